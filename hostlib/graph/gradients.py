"""The operators training adds to the graph (docs/graph.md "Training"): the loss
``SoftmaxCrossEntropyLoss`` (ONNX's, reduction "mean"), ``BatchNormalizationTraining`` (what
a BatchNormalization node becomes in a training graph) and the gradient operators the backward
graph is made of, named as onnxruntime's training operators are (``ConvGrad``, ``GemmGrad``,
``MaxPoolGrad``, ``ReluGrad``, ...). Each has, as every operator of ``ops.OPS``, an MPE
implementation (numpy: the fallback and the debug check's oracle) with its cost class, and a
CPE implementation through the DNN library's backward operators (``cpe.CPE``). Importing this
module (the package does) registers them in ``cpe.CPE`` and in ``ops.TRAINING`` -- the loss, an
ONNX operator (opset 12 on), in ``ops.OPS``: ONNX files may hold it.

A gradient operator's inputs are the output gradient(s) first, then the forward tensors it
reads; its outputs the gradients of the forward node's inputs in order, "" for those nobody
needs (the CPE path does not compute them)."""
from __future__ import annotations

import numpy as np

from .. import blas, dnn
from .cpe import CPE, NotSuitable, _floats, _launch, pool_window
from .ir import GraphError
from .ops import (OPS, TRAINING, Op, TensorInfo, _ints, _like_input, _windows, conv_layout, perm,
                  permute, window_geometry)


# ---- shapes and costs -------------------------------------------------------------------

def _like_forward_inputs(first):
    """Shape function: output k has the shape of input ``first + k`` (the forward tensor whose
    gradient it is)."""
    def shape(node, info):
        return [info[first + k] for k in range(len(node.outputs))]
    return shape


def _conv_grad_shape(node, info):
    dy, x, w = info[:3]
    return [x, w, TensorInfo(dy.dtype, w.shape[:1])][:len(node.outputs)]


def _conv_grad_flops(node, inputs, outputs):
    """2 flops per multiply-add for each gradient computed (data and filter: each as many as
    the forward's)."""
    dy, x, w = inputs[:3]
    forward = 2 * int(dy.size) * int(np.prod(w.shape[1:]))
    return forward * sum(1 for out in node.outputs[:2] if out)


def _gemm_grad_flops(node, inputs, outputs):
    dy, a = inputs[:2]
    k = a.shape[0] if node.attr("transA", 0) else a.shape[1]
    return 2 * int(dy.size) * int(k) * sum(1 for out in node.outputs[:2] if out)


# ---- MPE implementations (numpy, float64 inside) ----------------------------------------

def _scatter_windows(grads, shape, node, kernel):
    """Sum window gradients (N, C, OH, OW, KH, KW) back onto the padded input and crop the
    padding: the adjoint of ``ops._windows``'s view. ``shape``: the unpadded input's."""
    begin, end, strides, dilations, out = window_geometry(node, shape[2:], kernel)
    size = [max(s + b + e, (o - 1) * st + d * (k - 1) + 1)
            for s, b, e, o, st, d, k in zip(shape[2:], begin, end, out, strides, dilations,
                                            kernel)]
    padded = np.zeros(tuple(shape[:2]) + tuple(size))
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r0, c0 = i * dilations[0], j * dilations[1]
            padded[:, :, r0:r0 + strides[0] * (out[0] - 1) + 1:strides[0],
                   c0:c0 + strides[1] * (out[1] - 1) + 1:strides[1]] += grads[..., i, j]
    return padded[:, :, begin[0]:begin[0] + shape[2], begin[1]:begin[1] + shape[3]]


def conv_grad(node, dy, x, w):
    """(dx, dw, db) of a 2-D Conv; dy, x and dx stored in the node's layout (its forward's,
    set by the layout pass), computed in NCHW."""
    order = conv_layout(node)
    dx, dw, db = _conv_grad_nchw(node, *(np.transpose(a, perm(order, "NCHW")) for a in (dy, x)),
                                 w)
    return np.ascontiguousarray(np.transpose(dx, perm("NCHW", order))), dw, db


def _conv_grad_nchw(node, dy, x, w):
    """(dx, dw, db) of a 2-D Conv (any group count, dilation, pads): per group, the adjoint
    of ``ops._windows``'s view."""
    kernel = list(w.shape[2:])
    group = int(node.attr("group", 1))
    cg, og = x.shape[1] // group, w.shape[0] // group
    dy64, w64 = dy.astype(np.float64), w.astype(np.float64)
    windows = _windows(x.astype(np.float64), node, kernel, 0.0)[0]   # N, C, OH, OW, KH, KW
    dx, dw = np.zeros(x.shape), np.zeros(w.shape)
    for g in range(group):
        ins, outs = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og)
        dw[outs] = np.einsum("nohw,nchwij->ocij", dy64[:, outs], windows[:, ins])
        dx[:, ins] = _scatter_windows(np.einsum("nohw,ocij->nchwij", dy64[:, outs],
                                                w64[outs]), (x.shape[0], cg) + x.shape[2:],
                                      node, kernel)
    return dx.astype(x.dtype), dw.astype(w.dtype), dy64.sum(axis=(0, 2, 3)).astype(dy.dtype)


def gemm_grad(node, dy, a, b, c=None):
    """(da, db, dc) of y = alpha op(a) op(b) + beta c."""
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    dy64 = dy.astype(np.float64)
    op_a = a.T if node.attr("transA", 0) else a
    op_b = b.T if node.attr("transB", 0) else b
    d_op_a = alpha * dy64 @ op_b.T.astype(np.float64)
    d_op_b = alpha * op_a.T.astype(np.float64) @ dy64
    da = d_op_a.T if node.attr("transA", 0) else d_op_a
    db = d_op_b.T if node.attr("transB", 0) else d_op_b
    outputs = [da.astype(a.dtype), db.astype(b.dtype)]
    if c is not None:
        outputs.append(_sum_to(beta * dy64, c.shape).astype(c.dtype))
    return tuple(outputs)


def _sum_to(g, shape):
    """g summed over the axes a broadcast of ``shape`` stretched (the adjoint of broadcast)."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=stretched, keepdims=True) if stretched else g


def _max_padding(node, shape, kernel):
    """(pads per side of the planes, padded plane shape) that max pooling's CPE path adds as
    -inf (the declared pads and ceil_mode's partial windows): the planes argmax indexes."""
    begin, end, strides, dilations, out = window_geometry(node, shape[2:], kernel)
    width = [(b, e + max(0, (o - 1) * s + d * (k - 1) + 1 - (size + b + e)))
             for b, e, o, s, d, k, size in zip(begin, end, out, strides, dilations, kernel,
                                               shape[2:])]
    return width, tuple(size + b + e for size, (b, e) in zip(shape[2:], width))


def maxpool_training(node, x):
    """MaxPool and, for its backward, the argmax: the index of each window's first maximum in
    its plane padded as ``_max_padding`` says (the DNN library's pooling's convention)."""
    kernel = _ints(node, "kernel_shape")
    windows = _windows(x, node, kernel, -np.inf)[0]           # N, C, OH, OW, KH, KW
    first = windows.reshape(windows.shape[:4] + (-1,)).argmax(axis=-1)
    _, strides, dilations = window_geometry(node, x.shape[2:], kernel)[1:4]
    row, column = np.divmod(first, kernel[1])
    oh, ow = np.indices(first.shape[2:])
    width = _max_padding(node, x.shape, kernel)[1][1]
    argmax = ((oh * strides[0] + row * dilations[0]) * width
              + ow * strides[1] + column * dilations[1])
    return windows.max(axis=(-2, -1)).astype(x.dtype), argmax.astype(np.int64)


def maxpool_grad(node, dy, x, argmax):
    """Each output gradient to its window's argmax, the padding cropped."""
    width, padded = _max_padding(node, x.shape, _ints(node, "kernel_shape"))
    planes = np.zeros(x.shape[:2] + (padded[0] * padded[1],))
    flat = argmax.reshape(argmax.shape[:2] + (-1,))
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            np.add.at(planes[n, c], flat[n, c], dy[n, c].reshape(-1))
    planes = planes.reshape(x.shape[:2] + padded)
    (top, _), (left, _) = width
    return (planes[:, :, top:top + x.shape[2], left:left + x.shape[3]].astype(x.dtype),)


def averagepool_grad(node, dy, x):
    """Each output gradient shared by its window's counted elements."""
    kernel = _ints(node, "kernel_shape")
    _, declared, real = _windows(np.zeros(x.shape), node, kernel, 0.0)
    counted = declared if node.attr("count_include_pad", 0) else real
    share = dy.astype(np.float64) / counted.sum(axis=(-2, -1))
    grads = share[..., None, None] * counted          # pads get shares that are cropped
    return (_scatter_windows(grads, x.shape, node, kernel).astype(x.dtype),)


def global_averagepool_grad(node, dy, x):
    planes = int(np.prod(x.shape[2:]))
    return (np.broadcast_to(dy.astype(np.float64) / planes, x.shape).astype(x.dtype),)


ACTIVATION_GRADS = {          # op -> (the forward tensor it reads, numpy f'(.) from it)
    "ReluGrad": ("x", lambda x: (x > 0).astype(np.float64)),
    "SigmoidGrad": ("y", lambda y: y * (1.0 - y)),
    "TanhGrad": ("y", lambda y: 1.0 - y * y),
}


def _activation_grad(node, dy, forward):
    derivative = ACTIVATION_GRADS[node.op_type][1]
    return ((dy.astype(np.float64) * derivative(forward.astype(np.float64))).astype(dy.dtype),)


def _channel_view(x):
    """The axes a per-channel statistic reduces over, and the shape that broadcasts one."""
    return (0,) + tuple(range(2, x.ndim)), (1, -1) + (1,) * (x.ndim - 2)


def batchnorm_training(node, x, scale, bias, mean, var):
    """BatchNormalization with the batch's statistics: y, the running mean and variance
    updated as ONNX's ``momentum`` m weighs them (m r + (1 - m) s, the variance unbiased as
    the DNN library's, Caffe's and PyTorch's), and the mean and 1/sqrt(var + eps) used, which
    the backward reads."""
    axes, shape = _channel_view(x)
    x64 = x.astype(np.float64)
    mu, variance = x64.mean(axis=axes), x64.var(axis=axes)
    invstd = 1.0 / np.sqrt(variance + node.attr("epsilon", 1e-5))
    y = ((x64 - mu.reshape(shape)) * invstd.reshape(shape) * scale.reshape(shape)
         + bias.reshape(shape))
    m, count = node.attr("momentum", 0.9), x.size // x.shape[1]
    running = (m * mean + (1 - m) * mu, m * var + (1 - m) * variance * count / (count - 1))
    return tuple(a.astype(x.dtype) for a in (y, *running, mu, invstd))


def batchnorm_grad(node, dy, x, scale, saved_mean, saved_invstd):
    """(dx, dscale, dbias) of ``batchnorm_training``'s y."""
    axes, shape = _channel_view(x)
    dy64 = dy.astype(np.float64)
    xhat = (x - saved_mean.reshape(shape)) * saved_invstd.reshape(shape).astype(np.float64)
    dbias, dscale = dy64.sum(axis=axes), (dy64 * xhat).sum(axis=axes)
    count = x.size // x.shape[1]
    dx = (scale.astype(np.float64) * saved_invstd).reshape(shape) / count * (
        count * dy64 - dbias.reshape(shape) - xhat * dscale.reshape(shape))
    return dx.astype(x.dtype), dscale.astype(scale.dtype), dbias.astype(scale.dtype)


def _maxpool_training_shape(node, info):
    (y,) = OPS["MaxPool"].shape(node, info)
    return [y, TensorInfo(np.dtype(np.int64), y.shape)]


def _batchnorm_training_shape(node, info):
    x, scale = info[:2]
    return [x] + [scale] * 4


def _batchnorm_grad_shape(node, info):
    return [info[1], info[2], info[2]][:len(node.outputs)]


def _log_softmax(scores):
    s = scores.astype(np.float64)
    shifted = s - s.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _classes(node, scores, labels):
    """The labels as indices; GraphError naming the node for one outside 0..C-1."""
    labels = labels.astype(np.int64)
    if labels.size and not (0 <= labels.min() and labels.max() < scores.shape[1]):
        raise GraphError(f"{node}: labels must be in 0..{scores.shape[1] - 1} (the scores' "
                         f"classes), got {labels.min()}..{labels.max()}")
    return labels


def softmax_cross_entropy(node, scores, labels):
    """Mean over the rows of -log softmax(scores)[label] (ONNX SoftmaxCrossEntropyLoss,
    reduction "mean", no weights)."""
    picked = _log_softmax(scores)[np.arange(len(scores)), _classes(node, scores, labels)]
    return (np.asarray(-picked.mean(), scores.dtype),)


def softmax_cross_entropy_grad(node, dloss, scores, labels):
    """d loss / d scores = (softmax(scores) - onehot(labels)) / B, times dloss."""
    grad = np.exp(_log_softmax(scores))
    grad[np.arange(len(scores)), _classes(node, scores, labels)] -= 1.0
    return ((grad * (float(dloss) / len(scores))).astype(scores.dtype),)


def _loss_check(node, info):
    if node.attr("reduction", "mean") not in ("mean", b"mean"):
        return f"reduction {node.attr('reduction')!r}: only 'mean' is implemented"
    if len(node.inputs) > 2 and node.inputs[2]:
        return "class weights are not implemented"
    if node.attr("ignore_index") is not None:
        return "ignore_index is not implemented"
    if len(node.outputs) > 1 and node.outputs[1]:
        return "the log_prob output is not implemented"
    if len(info[0].shape) != 2 or len(info) < 2 or info[1].shape != info[0].shape[:1]:
        return "takes scores (N, C) and labels (N,)"
    return None


def _scalar(node, info):
    return [TensorInfo(info[0].dtype, ())]


# ---- CPE implementations ----------------------------------------------------------------

def _needed(node):
    return [bool(out) for out in node.outputs]


def _symmetric_padding(node, x_shape, kernel):
    """(strides, padding) as the dnn operators take them, or NotSuitable."""
    begin, end, strides, dilations, _ = window_geometry(node, x_shape[2:], kernel)
    if dilations != [1, 1]:
        raise NotSuitable(f"dilations {dilations}: the CPE operators have none")
    if begin != end:
        raise NotSuitable(f"pads {begin + end}: the CPE backward operators pad both sides "
                          "alike")
    return strides, begin


def cpe_conv_grad(node, inputs, on):
    """The DNN library's backward operators, once per group (as the forward's CPE path), with
    dy, x and dx in the node's layout."""
    dy, x, w = inputs
    _floats(node, dy, x, w)
    layout, order = node.attr("layout", "NCHW"), conv_layout(node)
    strides, padding = _symmetric_padding(node, permute(x.shape, order, "NCHW"),
                                          list(w.shape[2:]))
    geometry = dict(stride=tuple(strides), padding=tuple(padding), algo="auto", layout=layout,
                    **on)
    want_dx, want_dw, want_db = (_needed(node) + [False] * 3)[:3]
    group = int(node.attr("group", 1))
    if layout != "NCHW" and group != 1:
        raise NotSuitable(f"layout {layout}: the CPE path takes groups in NCHW only")
    cg, og = x.shape[1] // group, w.shape[0] // group
    dxs, dws, parts, algorithms = [], [], [], []
    for g in range(group):
        dy_g = np.ascontiguousarray(dy[:, g * og:(g + 1) * og]) if group > 1 else dy
        if want_dx:
            shape = x.shape if group == 1 else (x.shape[0], cg) + x.shape[2:]
            dx, stats = _launch(dnn.conv2d_backward_data, dy_g,
                                np.ascontiguousarray(w[g * og:(g + 1) * og]), shape, **geometry)
            dxs.append(dx)
            parts.append(stats)
        if want_dw:
            x_g = np.ascontiguousarray(x[:, g * cg:(g + 1) * cg]) if group > 1 else x
            dw, stats = _launch(dnn.conv2d_backward_filter, dy_g, x_g, (og,) + w.shape[1:],
                                **geometry)
            dws.append(dw)
            parts.append(stats)
    outputs = [np.concatenate(dxs, axis=1) if want_dx else None,
               np.concatenate(dws, axis=0) if want_dw else None, None]
    if want_dx:
        algorithms.append(f"data {parts[0].algo}")
    if want_dw:
        algorithms.append(f"filter {parts[int(want_dx)].algo}")
    if want_db:
        outputs[2], sums = _channel_sums(dy, order, on)
        parts += sums
        algorithms.append("bias swGEMM")
    suffix = f" x{group} groups" if group > 1 else ""
    return tuple(outputs[:len(node.outputs)]), parts, ", ".join(algorithms) + suffix


def _channel_sums(dy, order, on):
    """dy (stored in axis ``order``) summed over all but its channels: the axes outside the
    channels summed by a row of ones, those inside by a column of ones (two swGEMMs)."""
    c = dy.shape[order.index("C")]
    outer = int(np.prod(dy.shape[:order.index("C")]))
    on_gemm = dict(machine=on["machine"], engine=on["engine"])
    rows, first = _launch(blas.gemm, np.ones((1, outer), dy.dtype), dy.reshape(outer, -1),
                          **on_gemm)
    sums, second = _launch(blas.gemm, np.ascontiguousarray(rows).reshape(c, -1),
                           np.ones((dy.size // (outer * c), 1), dy.dtype), **on_gemm)
    return np.ascontiguousarray(sums).reshape(c), [first, second]


def cpe_gemm_grad(node, inputs, on):
    dy, a, b, *rest = inputs
    c = rest[0] if rest else None
    _floats(node, dy, a, b, c)
    n = b.shape[0]
    if (node.attr("transA", 0) or not node.attr("transB", 0) or node.attr("alpha", 1.0) != 1.0
            or node.attr("beta", 1.0) != 1.0 or c is not None and c.size != n):
        raise NotSuitable("the CPE backward is a layer's (transB=1, transA=0, alpha = beta = "
                          "1, a bias of N)")
    (da, db, dc), stats = _launch(dnn.linear_backward, dy, a, b, **on)
    outputs = [da, db] + ([dc.reshape(c.shape)] if c is not None else [])
    return tuple(o if want else None for o, want in zip(outputs, _needed(node))), [stats], \
        "swGEMM (linear_backward)"


def cpe_pool_grad(node, inputs, on):
    dy, x = inputs[:2]
    _floats(node, dy, x)
    k, s, begin, end, out = pool_window(node, x)
    if node.op_type == "AveragePoolGrad":
        floor = [(size + 2 * begin[0] - k) // s + 1 for size in x.shape[2:]]
        if len(set(begin + end)) != 1 or out != floor or (
                begin[0] and not node.attr("count_include_pad", 0)):
            raise NotSuitable("the CPE average pooling's backward takes equal pads, no "
                              "partial windows and count_include_pad=1")
        dx, stats = _launch(dnn.pool2d_backward, dy, x.shape, k, stride=s, padding=begin[0],
                            mode="avg", **on)
        return (dx,), [stats], "pool2d_backward avg"
    width, padded = _max_padding(node, x.shape, [k, k])
    (top, _), (left, _) = width
    dx, stats = _launch(dnn.pool2d_backward, dy, x.shape[:2] + padded, k, stride=s,
                        mode="max", indices=inputs[2], **on)
    return (np.ascontiguousarray(dx[:, :, top:top + x.shape[2], left:left + x.shape[3]]),), \
        [stats], "pool2d_backward max"


def cpe_maxpool_training(node, inputs, on):
    """The forward's CPE pooling (over x padded with -inf), keeping the argmax it returns."""
    (x,) = inputs
    _floats(node, x)
    k, s = pool_window(node, x)[:2]
    width, _ = _max_padding(node, x.shape, [k, k])
    if any(w for pair in width for w in pair):
        x = np.pad(x, [(0, 0), (0, 0)] + width, constant_values=-np.inf)
    (y, argmax), stats = _launch(dnn.pool2d_forward, x, k, stride=s, mode="max",
                                 return_indices=True, **on)
    return (y, argmax), [stats], "pool2d max (argmax kept)"


def cpe_global_pool_grad(node, inputs, on):
    dy, x = inputs
    _floats(node, dy, x)
    if x.ndim != 4 or x.shape[2] != x.shape[3]:
        raise NotSuitable(f"global pooling of {list(x.shape)}: the CPE pooling takes square "
                          "4-D planes")
    dx, stats = _launch(dnn.pool2d_backward, dy, x.shape, x.shape[2], stride=x.shape[2],
                        mode="avg", **on)
    return (dx,), [stats], "pool2d_backward avg (global)"


def cpe_activation_grad(node, inputs, on):
    dy, forward = inputs
    _floats(node, dy, forward)
    kind = node.op_type[:-len("Grad")].lower()
    reads = ACTIVATION_GRADS[node.op_type][0]
    dx, stats = _launch(dnn.activation_backward, dy, mode=kind, **{reads: forward}, **on)
    return (dx,), [stats], f"{kind} backward"


def _planes(x):
    """x (N, C, ...) as the (N, C, H, W) the batchnorm operators take."""
    return x.reshape(x.shape[0], x.shape[1], -1, 1)


def cpe_batchnorm_training(node, inputs, on):
    x, scale, bias, mean, var = inputs
    _floats(node, *inputs)
    result, stats = _launch(dnn.batchnorm_forward, _planes(x), scale, bias, mean, var,
                            training=True, momentum=1 - node.attr("momentum", 0.9),
                            eps=node.attr("epsilon", 1e-5), **on)
    return (result[0].reshape(x.shape),) + tuple(result[1:]), [stats], \
        "batchnorm (training)"


def cpe_batchnorm_grad(node, inputs, on):
    dy, x, scale, saved_mean, saved_invstd = inputs
    _floats(node, *inputs)
    (dx, dscale, dbias), stats = _launch(dnn.batchnorm_backward, _planes(dy), _planes(x),
                                         scale, saved_mean, saved_invstd, **on)
    return (dx.reshape(x.shape), dscale, dbias), [stats], "batchnorm_backward"


def cpe_loss(node, inputs, on):
    scores, labels = inputs
    _floats(node, scores)
    (loss, _), stats = _launch(dnn.softmax_cross_entropy, scores, labels, **on)
    return (np.asarray(loss, scores.dtype),), [stats], "softmax_cross_entropy"


def cpe_loss_grad(node, inputs, on):
    """The loss operator once more, for its gradient (times dloss on the CPEs unless 1)."""
    dloss, scores, labels = inputs
    _floats(node, dloss, scores)
    (_, grad), stats = _launch(dnn.softmax_cross_entropy, scores, labels, **on)
    parts = [stats]
    if float(dloss) != 1.0:
        grad, stats = _launch(dnn.scale, grad, alpha=float(dloss), **on)
        parts.append(stats)
    return (grad,), parts, "softmax_cross_entropy (gradient)"


def _register():
    grads = dict(
        SoftmaxCrossEntropyLoss=(Op(softmax_cross_entropy, "stream", check=_loss_check,
                                    shape=_scalar), cpe_loss),
        SoftmaxCrossEntropyLossGrad=(Op(softmax_cross_entropy_grad, "stream",
                                        shape=_like_forward_inputs(1)), cpe_loss_grad),
        ConvGrad=(Op(conv_grad, "conv", shape=_conv_grad_shape, flops=_conv_grad_flops),
                  cpe_conv_grad),
        GemmGrad=(Op(gemm_grad, "gemm", shape=_like_forward_inputs(1), flops=_gemm_grad_flops),
                  cpe_gemm_grad),
        MaxPoolTraining=(Op(maxpool_training, "stream", shape=_maxpool_training_shape),
                         cpe_maxpool_training),
        MaxPoolGrad=(Op(maxpool_grad, "stream", shape=_like_forward_inputs(1)), cpe_pool_grad),
        AveragePoolGrad=(Op(averagepool_grad, "stream", shape=_like_forward_inputs(1)),
                         cpe_pool_grad),
        BatchNormalizationTraining=(Op(batchnorm_training, "stream",
                                       shape=_batchnorm_training_shape),
                                    cpe_batchnorm_training),
        BatchNormalizationGrad=(Op(batchnorm_grad, "stream", shape=_batchnorm_grad_shape),
                                cpe_batchnorm_grad),
        GlobalAveragePoolGrad=(Op(global_averagepool_grad, "stream",
                                  shape=_like_forward_inputs(1)), cpe_global_pool_grad),
    )
    for name in ACTIVATION_GRADS:
        grads[name] = (Op(_activation_grad, "stream", shape=_like_input), cpe_activation_grad)
    for name, (op, cpe) in grads.items():      # the loss is ONNX's; the rest training's
        (OPS if name == "SoftmaxCrossEntropyLoss" else TRAINING)[name] = op
        CPE[name] = cpe


_register()
