"""The operators the graph IR knows (ONNX's names and semantics, opsets 6 to current): for each,
its shape function (``infer``), its MPE implementation (numpy on the host, the swHMAE fallback
and the debug oracle; ``mpe``) and its MPE cost class (``mpe_cost.py``). The CPE
implementations are in ``cpe.py``; ``dispatch.py`` chooses between the two.

``unsupported(node, info)`` says why a node's attributes or dtypes are outside what is
implemented (None when they are inside): such nodes are refused at import, never run wrong.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..dnn.layout_transform import LAYOUTS, permute
from .ir import GraphError, Node, TensorInfo

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
NUMBERS = FLOATS + tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8,
                                               np.uint16, np.uint32, np.uint64))


@dataclass(frozen=True)
class Op:
    mpe: Callable              # (node, *inputs) -> tuple of outputs
    cost: str                  # MPE cost class: "conv", "gemm", "stream", "copy" or "view"
    dtypes: tuple = FLOATS     # dtypes of the first input it takes
    check: Optional[Callable] = None   # (node, info) -> reason it is unsupported, or None
    shape_only: bool = False   # computes on shapes (folded when its inputs are constant)
    # (node, input TensorInfos) -> output TensorInfos, for operators too costly to run on
    # stand-ins at inference (otherwise the MPE function runs on zero-filled stand-ins)
    shape: Optional[Callable] = None
    # (node, inputs, outputs) -> flops, for "conv"/"gemm" operators other than Conv, Gemm and
    # MatMul (the gradient operators)
    flops: Optional[Callable] = None


# ---- helpers ----------------------------------------------------------------------------

def _ints(node: Node, name, default=None):
    value = node.attr(name, default)
    return None if value is None else [int(v) for v in value]


def _axis(node: Node, axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise GraphError(f"{node}: axis {axis} is out of range for a {ndim}-D input")
    return axis % max(ndim, 1)


def legacy_broadcast(node: Node, a, b):
    """Opset < 7 ``broadcast=1, axis``: b's dims align with a's starting at ``axis``."""
    if node.opset < 7 and node.attr("broadcast", 0) and np.ndim(b) < np.ndim(a):
        axis = node.attr("axis", np.ndim(a) - np.ndim(b))
        b = np.reshape(b, np.shape(b) + (1,) * (np.ndim(a) - axis % np.ndim(a) - np.ndim(b)))
    return a, b


def window_geometry(node: Node, spatial, kernel):
    """(pads_begin, pads_end, strides, dilations, output sizes) of a Conv / pool node over
    `spatial` input sizes, with auto_pad and ceil_mode as ONNX defines them."""
    n = len(spatial)
    strides = _ints(node, "strides", [1] * n)
    dilations = _ints(node, "dilations", [1] * n)
    pads = _ints(node, "pads", [0] * 2 * n)
    auto = node.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    ceil = bool(node.attr("ceil_mode", 0))
    begin, end, out = list(pads[:n]), list(pads[n:]), []
    for i, size in enumerate(spatial):
        span = dilations[i] * (kernel[i] - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // strides[i])
            total = max(0, (o - 1) * strides[i] + span - size)
            small, large = total // 2, total - total // 2
            begin[i], end[i] = (small, large) if auto == "SAME_UPPER" else (large, small)
        elif auto == "VALID":
            begin[i] = end[i] = 0
        elif auto != "NOTSET":
            raise GraphError(f"{node}: auto_pad {auto!r} is not NOTSET, SAME_UPPER, "
                             "SAME_LOWER or VALID")
        room = size + begin[i] + end[i] - span
        if room < 0:
            raise GraphError(f"{node}: the {kernel[i]}-wide window (dilation {dilations[i]}) "
                             f"does not fit the padded input of {size + begin[i] + end[i]}")
        o = (-(-room // strides[i]) if ceil else room // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= size + begin[i]:
            o -= 1          # the last window must start inside the input or the left pad
        out.append(o)
    return begin, end, strides, dilations, out


def _windows(x, node: Node, kernel, fill):
    """x (N, C, H, W) padded (with `fill`, and past the end pads for ceil_mode) and its
    (N, C, OH, OW, KH, KW) windows, with the mask of the declared (not ceil) padding."""
    begin, end, strides, dilations, out = window_geometry(node, x.shape[2:], kernel)
    extra = [max(0, (o - 1) * s + d * (k - 1) + 1 - (size + b + e))
             for o, s, d, k, size, b, e in zip(out, strides, dilations, kernel, x.shape[2:],
                                               begin, end)]
    width = [(0, 0), (0, 0)] + [(b, e + x_) for b, e, x_ in zip(begin, end, extra)]
    padded = np.pad(x, width, constant_values=fill)
    declared = np.pad(np.ones([size + b + e for size, b, e in zip(x.shape[2:], begin, end)]),
                      [(0, e) for e in extra])
    real = np.pad(np.ones(x.shape[2:]), [(b, e + x_) for b, e, x_ in zip(begin, end, extra)],
                  constant_values=0)

    def view(a):
        span = [d * (k - 1) + 1 for d, k in zip(dilations, kernel)]
        w = sliding_window_view(a, span, axis=(-2, -1))
        w = w[..., ::strides[0], ::strides[1], ::dilations[0], ::dilations[1]]
        return w[..., :out[0], :out[1], :, :]
    return view(padded), view(declared), view(real)


def conv_layout(node: Node) -> str:
    """The axis order a Conv's x and y are stored in: its ``layout`` attribute (set by the
    layout pass, ``layouts.plan_layouts``; not an ONNX attribute), NCHW by default."""
    return LAYOUTS[node.attr("layout", "NCHW")]


def moves_no_data(node: Node, shapes) -> bool:
    """Whether ``node`` (given its inputs' shapes) only relabels its input's bytes: a view
    operator, or a Transpose whose axes longer than 1 keep their order (NCHW to CNHW at
    batch 1), which dispatch then runs as a view."""
    if operator(node.op_type).cost == "view":
        return True
    if node.op_type != "Transpose" or not shapes:
        return False
    shape = shapes[0]
    moving = [p for p in _ints(node, "perm", list(range(len(shape)))[::-1]) if shape[p] != 1]
    return moving == sorted(moving)


def perm(src: str, dst: str) -> list:
    """The Transpose ``perm`` taking a tensor stored in axis order ``src`` to ``dst``."""
    return [src.index(axis) for axis in dst]


# ---- MPE implementations ----------------------------------------------------------------

def conv(node, x, w, b=None):
    """Computed in NCHW; x and y stored in the node's layout."""
    order = conv_layout(node)
    (y,) = _conv_nchw(node, np.transpose(x, perm(order, "NCHW")), w, b)
    return (np.ascontiguousarray(np.transpose(y, perm("NCHW", order))),)


def _conv_nchw(node, x, w, b=None):
    group = int(node.attr("group", 1))
    kernel = list(w.shape[2:])
    begin, end, strides, dilations, out = window_geometry(node, x.shape[2:], kernel)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(begin, end)))
    n, c = x.shape[:2]
    co = w.shape[0]
    y = np.zeros((n, co, *out), dtype=np.float64)
    cg, og = c // group, co // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg].astype(np.float64)
        ws = w[g * og:(g + 1) * og].astype(np.float64)
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                r0, c0 = i * dilations[0], j * dilations[1]
                patch = xs[:, :, r0:r0 + strides[0] * (out[0] - 1) + 1:strides[0],
                           c0:c0 + strides[1] * (out[1] - 1) + 1:strides[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return (y.astype(x.dtype),)


def _conv_check(node, info):
    x, w = info[0], info[1]
    if len(x.shape) != 4:
        return f"only 2-D convolution (4-D input), got a {len(x.shape)}-D input"
    if node.attr("layout", "NCHW") not in LAYOUTS:
        return f"layout {node.attr('layout')!r} is none of {sorted(LAYOUTS)}"
    channels = permute(x.shape, conv_layout(node), "NCHW")[1]
    if channels != w.shape[1] * int(node.attr("group", 1)):
        return (f"input channels {channels} != weight's {w.shape[1]} x group "
                f"{node.attr('group', 1)}")
    return None


def _pool_check(node, info):
    if len(info[0].shape) != 4:
        return f"only 2-D pooling (4-D input), got a {len(info[0].shape)}-D input"
    if len(node.outputs) > 1 and node.outputs[1]:
        return "the Indices output is not implemented"
    if int(node.attr("storage_order", 0)):
        return "storage_order=1 is not implemented"
    return None


def maxpool(node, x):
    windows, _, _ = _windows(x, node, _ints(node, "kernel_shape"), -np.inf)
    return (windows.max(axis=(-2, -1)).astype(x.dtype),)


def averagepool(node, x):
    windows, declared, real = _windows(x.astype(np.float64), node,
                                       _ints(node, "kernel_shape"), 0.0)
    counted = declared if node.attr("count_include_pad", 0) else real
    return ((windows.sum(axis=(-2, -1)) / counted.sum(axis=(-2, -1))).astype(x.dtype),)


def gemm(node, a, b, c=None):
    a = a.T if node.attr("transA", 0) else a
    b = b.T if node.attr("transB", 0) else b
    y = node.attr("alpha", 1.0) * (a.astype(np.float64) @ b.astype(np.float64))
    if c is not None:
        y = y + node.attr("beta", 1.0) * c
    return (y.astype(a.dtype),)


def batchnorm(node, x, scale, bias, mean, var):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if node.opset < 9 and not node.attr("spatial", 1):
        shape = (1,) + x.shape[1:]
    eps = node.attr("epsilon", 1e-5)
    y = ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape)
         + bias.reshape(shape))
    return (y.astype(x.dtype),)


def _softmax_axes(node, x):
    """(array to normalise, the axes to normalise over, how to give it back)."""
    if node.opset < 13:     # coerce to 2-D at axis
        axis = _axis(node, node.attr("axis", 1), x.ndim)
        flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
        return flat, 1, lambda y: y.reshape(x.shape)
    return x, _axis(node, node.attr("axis", -1), x.ndim), lambda y: y


def softmax(node, x):
    a, axis, back = _softmax_axes(node, x)
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return (back(e / e.sum(axis=axis, keepdims=True)).astype(x.dtype),)


def layernorm(node, x, scale, bias=None):
    """LayerNormalization (opset 17) over the axes from ``axis`` on, inference output only."""
    axes = tuple(range(_axis(node, node.attr("axis", -1), x.ndim), x.ndim))
    a = x.astype(np.float64)
    centred = a - a.mean(axis=axes, keepdims=True)
    y = centred / np.sqrt((centred * centred).mean(axis=axes, keepdims=True)
                          + node.attr("epsilon", 1e-5)) * scale
    return ((y if bias is None else y + bias).astype(x.dtype),)


def _layernorm_check(node, info):
    if len([o for o in node.outputs if o]) > 1:
        return "the Mean and InvStdDev outputs are not implemented"
    return None


def gelu(node, x):
    """Gelu (opset 20): x Φ(x), or with approximate='tanh' its tanh form."""
    a = x.astype(np.float64)
    if node.attr("approximate", "none") == "tanh":
        return ((0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))))
                .astype(x.dtype),)
    from math import erf
    return ((0.5 * a * (1 + np.vectorize(erf)(a / np.sqrt(2)))).astype(x.dtype),)


def logsoftmax(node, x):
    a, axis, back = _softmax_axes(node, x)
    s = a - a.max(axis=axis, keepdims=True)
    return (back(s - np.log(np.exp(s).sum(axis=axis, keepdims=True))).astype(x.dtype),)


def lrn(node, x):
    size = int(node.attr("size"))
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    sq = np.pad(x.astype(np.float64) ** 2,
                [(0, 0), ((size - 1) // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
    sums = sum(sq[:, i:i + x.shape[1]] for i in range(size))
    return ((x / (bias + alpha / size * sums) ** beta).astype(x.dtype),)


def _binary(function):
    def run(node, a, b):
        a, b = legacy_broadcast(node, a, b)
        return (np.asarray(function(a, b)).astype(np.result_type(a, b)),)
    return run


def _divide(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.trunc(a / b)
    return a / b


def reshape(node, x, shape=None):
    target = [int(v) for v in (shape if shape is not None else node.attr("shape"))]
    if not node.attr("allowzero", 0):
        target = [x.shape[i] if v == 0 else v for i, v in enumerate(target)]
    try:
        return (x.reshape(target),)
    except ValueError:
        raise GraphError(f"{node}: cannot reshape {x.shape} to {target}") from None


def flatten(node, x):
    axis = node.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis <= x.ndim:
        raise GraphError(f"{node}: axis {node.attr('axis')} is out of range for a "
                         f"{x.ndim}-D input")
    return (x.reshape(int(np.prod(x.shape[:axis])), -1),)


def _axes_input(node, axes):
    """Unsqueeze/Squeeze/ReduceX axes: an attribute before opset 13, an input from 13."""
    return _ints(node, "axes") if axes is None else [int(v) for v in axes]


def unsqueeze(node, x, axes=None):
    axes = _axes_input(node, axes)
    ndim = x.ndim + len(axes)
    return (np.expand_dims(x, tuple(sorted(_axis(node, a, ndim) for a in axes))),)


def squeeze(node, x, axes=None):
    axes = _axes_input(node, axes)
    if axes is None:
        return (np.squeeze(x),)
    return (np.squeeze(x, axis=tuple(_axis(node, a, x.ndim) for a in axes)),)


def shape(node, x):
    dims = np.array(x.shape, dtype=np.int64)
    start, end = node.attr("start", 0), node.attr("end", None)
    return (dims[start:end],)


def constant(node):
    for name in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if name in node.attrs:
            value = node.attrs[name]
            dtype = np.float32 if "float" in name else np.int64 if "int" in name else None
            return (np.array(value, dtype=dtype),)
    raise GraphError(f"{node}: only value, value_float(s) and value_int(s) are implemented")


def constant_of_shape(node, dims):
    value = node.attr("value", np.zeros(1, np.float32))
    return (np.full([int(d) for d in dims], value.reshape(-1)[0], dtype=value.dtype),)


def dropout(node, x, ratio=None, training=None):
    mask = np.ones(x.shape, dtype=bool)
    return (x.copy(), mask)


def _dropout_check(node, info):
    if len(node.inputs) > 2 and node.inputs[2]:
        return "the training_mode input is not implemented (inference only)"
    return None


def _batchnorm_check(node, info):
    if node.attr("training_mode", 0) or len([o for o in node.outputs if o]) > 1:
        return "training-mode BatchNormalization is not implemented (inference only)"
    return None


def _cast_target(node):
    from onnx.helper import tensor_dtype_to_np_dtype
    return np.dtype(tensor_dtype_to_np_dtype(int(node.attr("to"))))


def cast(node, x):
    return (x.astype(_cast_target(node)),)


def _cast_check(node, info):
    target = _cast_target(node)
    if target not in NUMBERS + (np.dtype(bool),):
        return f"Cast to {target} is not implemented"
    return None


def transpose(node, x):
    perm = _ints(node, "perm")
    return (np.ascontiguousarray(np.transpose(x, perm)),)


def concat(node, *xs):
    return (np.concatenate(xs, axis=_axis(node, node.attr("axis", 0), xs[0].ndim)),)


def gather(node, x, indices):
    axis = _axis(node, node.attr("axis", 0), x.ndim)
    indices = np.where(indices < 0, indices + x.shape[axis], indices)
    return (np.take(x, indices, axis=axis),)


def _elementwise(function):
    return lambda node, x: (np.asarray(function(node, x)).astype(x.dtype),)


def _like_input(node, info):
    """The first input's dtype and shape (Dropout's mask output: bool of that shape)."""
    return [info[0]] + [TensorInfo(np.dtype(bool), info[0].shape)] * (len(node.outputs) - 1)


def _sum_shape(node, info):
    """Sum: the inputs' shapes broadcast (not the MPE sum of stand-ins: ResNet's sums of
    full-size maps took seconds each)."""
    try:
        shape = np.broadcast_shapes(*(t.shape for t in info))
    except ValueError:
        raise GraphError(f"{node}: input shapes {[list(t.shape) for t in info]} do not "
                         "broadcast together") from None
    return [TensorInfo(info[0].dtype, shape)]


def _conv_shape(node, info):
    x, w = info[0], info[1]
    order = conv_layout(node)
    n, _, *spatial = permute(x.shape, order, "NCHW")
    *_, out = window_geometry(node, spatial, list(w.shape[2:]))
    return [TensorInfo(x.dtype, permute((n, w.shape[0], *out), "NCHW", order))]


def _pool_shape(node, info):
    x = info[0]
    *_, out = window_geometry(node, x.shape[2:], _ints(node, "kernel_shape"))
    return [TensorInfo(x.dtype, x.shape[:2] + tuple(out))]


def _gemm_shape(node, info):
    a, b = info[0].shape, info[1].shape
    if len(a) != 2 or len(b) != 2:
        raise GraphError(f"{node}: Gemm needs 2-D A and B, got {list(a)} and {list(b)}")
    m, k = a[::-1] if node.attr("transA", 0) else a
    k2, n = b[::-1] if node.attr("transB", 0) else b
    if k != k2:
        raise GraphError(f"{node}: A's {k} columns (after transA) do not match B's {k2} rows")
    if len(info) > 2 and info[2] is not None:
        try:
            np.broadcast_shapes(info[2].shape, (m, n))
        except ValueError:
            raise GraphError(f"{node}: C of shape {list(info[2].shape)} does not broadcast "
                             f"to ({m}, {n})") from None
    return [TensorInfo(info[0].dtype, (m, n))]


def _matmul_check(node, info):
    a, b = info[0], info[1]
    if len(a.shape) < 1 or len(b.shape) < 1:
        return "MatMul of a scalar"
    return None


OPS: dict = {
    "Conv": Op(conv, "conv", check=_conv_check, shape=_conv_shape),
    "MaxPool": Op(maxpool, "stream", check=_pool_check, shape=_pool_shape),
    "AveragePool": Op(averagepool, "stream", check=_pool_check,
                      shape=_pool_shape),
    "GlobalAveragePool": Op(lambda n, x: (x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)
                                          .astype(x.dtype),), "stream"),
    "GlobalMaxPool": Op(lambda n, x: (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),),
                        "stream"),
    "Gemm": Op(gemm, "gemm", shape=_gemm_shape),
    "MatMul": Op(lambda n, a, b: (np.matmul(a.astype(np.float64), b).astype(a.dtype),), "gemm",
                 check=_matmul_check),
    "BatchNormalization": Op(batchnorm, "stream", check=_batchnorm_check,
                             shape=_like_input),
    "LRN": Op(lrn, "stream", shape=_like_input),
    "Relu": Op(_elementwise(lambda n, x: np.maximum(x, 0)), "stream"),
    "LeakyRelu": Op(_elementwise(lambda n, x: np.where(x >= 0, x, x * n.attr("alpha", 0.01))),
                    "stream"),
    "Sigmoid": Op(_elementwise(lambda n, x: 1 / (1 + np.exp(-x.astype(np.float64)))), "stream"),
    "Tanh": Op(_elementwise(lambda n, x: np.tanh(x)), "stream"),
    "Softmax": Op(softmax, "stream"),
    "LogSoftmax": Op(logsoftmax, "stream"),
    "LayerNormalization": Op(layernorm, "stream", check=_layernorm_check, shape=_like_input),
    "Gelu": Op(gelu, "stream", shape=_like_input),
    "Add": Op(_binary(np.add), "stream", NUMBERS),
    "Sub": Op(_binary(np.subtract), "stream", NUMBERS),
    "Mul": Op(_binary(np.multiply), "stream", NUMBERS),
    "Div": Op(_binary(_divide), "stream", NUMBERS),
    "Sum": Op(lambda n, *xs: (np.asarray(sum(xs[1:], xs[0])).astype(xs[0].dtype),), "stream",
              shape=_sum_shape),
    "Concat": Op(concat, "copy", NUMBERS),
    "Transpose": Op(transpose, "copy", NUMBERS),
    "Flatten": Op(flatten, "view", NUMBERS),
    "Reshape": Op(reshape, "view", NUMBERS),
    "Unsqueeze": Op(unsqueeze, "view", NUMBERS, shape_only=True),
    "Squeeze": Op(squeeze, "view", NUMBERS, shape_only=True),
    "Identity": Op(lambda n, x: (x,), "view", NUMBERS),
    "Dropout": Op(dropout, "view", check=_dropout_check),
    "Constant": Op(constant, "view", None, shape_only=True),
    "Shape": Op(shape, "view", NUMBERS, shape_only=True),
    "ConstantOfShape": Op(constant_of_shape, "view", (np.dtype(np.int64),), shape_only=True),
    "Gather": Op(gather, "copy", NUMBERS, shape_only=True),
    "Cast": Op(cast, "copy", NUMBERS, check=_cast_check, shape_only=True),
}
for _name in ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Dropout"):
    OPS[_name] = replace(OPS[_name], shape=_like_input)
# The operators training adds (gradients.py registers them: the loss, BatchNormalization with
# the batch's statistics, the gradient operators). Graphs built by autodiff use them; they are
# not in OPS, the ONNX operators the importer and the backend accept.
TRAINING: dict = {}


def operator(op_type: str) -> Optional[Op]:
    """The Op of an ONNX or training operator, None if unknown."""
    return OPS.get(op_type) or TRAINING.get(op_type)


# tensors some operators read only as constants (shapes, axes): they must be known at import
CONSTANT_INPUTS = {"Reshape": (1,), "Unsqueeze": (1,), "Squeeze": (1,), "ConstantOfShape": (0,)}


def unsupported(node: Node, info: list) -> Optional[str]:
    """Why `node` (with its inputs' TensorInfos) cannot run here, or None."""
    op = operator(node.op_type)
    if op is None:
        return f"operator {node.op_type} is not implemented"
    if op.dtypes is not None and info and info[0] is not None and info[0].dtype not in op.dtypes:
        return f"{node.op_type} on {info[0].dtype.name} is not implemented"
    return op.check(node, info) if op.check else None


def infer_node(node: Node, info: dict, constants: dict) -> list:
    """The TensorInfos of `node`'s outputs from its inputs' (``info``): the MPE function run
    on zero-sized stand-ins where it can, on the constant values for shape inputs."""
    args = []
    for name in node.inputs:
        if not name:
            args.append(None)
        elif name not in info:
            raise GraphError(f"{node}: input {name!r} has no known shape")
        else:
            args.append(info[name])
    while args and args[-1] is None:
        args.pop()
    reason = unsupported(node, args)
    if reason:
        raise GraphError(f"{node}: {reason}")
    for index in CONSTANT_INPUTS.get(node.op_type, ()):
        if index < len(node.inputs) and node.inputs[index] and \
                node.inputs[index] not in constants:
            raise GraphError(f"{node}: input {node.inputs[index]!r} must be a constant (an "
                             "initializer or computable from them at import)")
    shape = operator(node.op_type).shape
    if shape is not None:
        return shape(node, args)
    values = [None if a is None else
              constants[name] if name in constants else _stand_in(a)
              for name, a in zip(node.inputs, args)]
    try:
        with np.errstate(all="ignore"):
            outputs = operator(node.op_type).mpe(node, *values)
    except GraphError:
        raise
    except (ValueError, IndexError, TypeError, KeyError) as error:
        shapes = ", ".join("-" if a is None else f"{a.dtype}{list(a.shape)}" for a in args)
        raise GraphError(f"{node}: its inputs ({shapes}) do not fit it: {error}") from None
    return [TensorInfo(np.asarray(o).dtype, tuple(np.shape(o))) for o in outputs]


def _stand_in(tensor: TensorInfo):
    """A cheap array of the tensor's dtype and shape for shape inference: zeros through a
    broadcast view (no memory), except small ones."""
    if tensor.size <= 1 << 16:
        return np.zeros(tensor.shape, tensor.dtype)
    return np.broadcast_to(np.zeros((), tensor.dtype), tensor.shape)


def output_size(node: Node, inputs) -> int:
    """Elements the largest input or output of a node has (the MPE stream cost's unit)."""
    return max((int(np.size(a)) for a in inputs if a is not None), default=0)


def flops(node: Node, inputs, outputs) -> int:
    """Floating-point operations of a conv or GEMM node (2 per multiply-add)."""
    op = operator(node.op_type)
    if op.flops is not None:
        return op.flops(node, inputs, outputs)
    if node.op_type == "Conv":
        w, y = inputs[1], outputs[0]
        return 2 * int(y.size) * int(np.prod(w.shape[1:]))
    a = inputs[0]
    k = a.shape[0] if node.op_type == "Gemm" and node.attr("transA", 0) else a.shape[-1]
    return 2 * int(outputs[0].size) * int(k)

