"""The gradient operators of the graph's tensor algebra (docs/graph.md "Training"), as
``gradients.py``'s: ``SumTo`` (the adjoint of a broadcast: a broadcasting Add / Sub / Mul /
Div's operand gradient), ``MatMulGrad``, ``ConcatGrad``, ``SoftmaxGrad``, ``LogSoftmaxGrad``
and ``LRNGrad``. Each has an MPE implementation (numpy, float64 inside: the fallback and the
debug check's oracle) with its cost class; SumTo, MatMulGrad and ConcatGrad also a CPE one
(swGEMM with a vector of ones, swGEMM with transposed operands, the copy pass). Softmax and
LRN have no CPE operator forward either: their gradients run on the MPE, timed. Importing
this module (the package does) registers them in ``ops.TRAINING`` and ``cpe.CPE``."""
from __future__ import annotations

import numpy as np

from .. import blas, dnn
from .cpe import CPE, NotSuitable, _floats, _launch
from .gradients import _like_forward_inputs, _sum_to
from .ops import TRAINING, Op, TensorInfo, _ints, _like_input, _softmax_axes


# ---- SumTo: the adjoint of a broadcast --------------------------------------------------

def sum_to(node, dy):
    """alpha times dy summed over the axes the operand was stretched along; attributes:
    ``aligned`` (the operand's shape as it broadcast against dy: legacy broadcasts pad it
    on the right), ``shape`` (the operand's), ``alpha``."""
    total = _sum_to(dy.astype(np.float64), tuple(_ints(node, "aligned")))
    return ((node.attr("alpha", 1.0) * total).reshape(_ints(node, "shape")).astype(dy.dtype),)


def _sum_to_shape(node, info):
    return [TensorInfo(info[0].dtype, tuple(_ints(node, "shape")))]


def cpe_sum_to(node, inputs, on):
    """No axis to sum: the CPEs' scale. Otherwise dy with the summed axes last (a host
    transpose, a copy) as a K x R matrix times a vector of R ones on swGEMM."""
    (dy,) = inputs
    _floats(node, dy)
    aligned = (1,) * (dy.ndim - len(_ints(node, "aligned"))) + tuple(_ints(node, "aligned"))
    summed = [i for i, (n, m) in enumerate(zip(aligned, dy.shape)) if n == 1 and m != 1]
    alpha, shape = node.attr("alpha", 1.0), _ints(node, "shape")
    if not summed:
        y, stats = _launch(dnn.scale, dy, alpha=alpha, **on)
        return (y.reshape(shape),), [stats], "scale"
    kept = [i for i in range(dy.ndim) if i not in summed]
    rows = int(np.prod([dy.shape[i] for i in summed]))
    moved = np.ascontiguousarray(np.transpose(dy, kept + summed)).reshape(-1, rows)
    y, stats = _launch(blas.gemm, moved, np.ones((rows, 1), dy.dtype), alpha=alpha,
                       machine=on["machine"], engine=on["engine"])
    return (np.ascontiguousarray(y).reshape(shape),), [stats], "swGEMM (ones vector)"


# ---- MatMul -----------------------------------------------------------------------------

def _as_matrices(a, b, dy):
    """numpy matmul's promotion of 1-D operands (and dy with the axes they dropped)."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    dy2 = dy[..., None] if b.ndim == 1 else dy
    dy2 = dy2[..., None, :] if a.ndim == 1 else dy2
    return a2, b2, dy2


def matmul_grad(node, dy, a, b):
    """(da, db) of y = a @ b (numpy's matmul: 1-D promotion, broadcast batch dimensions)."""
    a2, b2, dy2 = _as_matrices(a.astype(np.float64), b.astype(np.float64),
                               dy.astype(np.float64))
    da = _sum_to(dy2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
    db = _sum_to(np.swapaxes(a2, -1, -2) @ dy2, b2.shape).reshape(b.shape)
    return da.astype(a.dtype), db.astype(b.dtype)


def _matmul_grad_flops(node, inputs, outputs):
    dy, a = inputs[:2]
    return 2 * int(dy.size) * int(a.shape[-1]) * sum(1 for out in node.outputs if out)


def cpe_matmul_grad(node, inputs, on):
    dy, a, b = inputs
    _floats(node, dy, a, b)
    if a.ndim != 2 or b.ndim != 2:
        raise NotSuitable(f"MatMul of {a.ndim}-D by {b.ndim}-D: the CPE path takes 2-D")
    on_gemm = dict(machine=on["machine"], engine=on["engine"])
    outputs, parts = [None, None], []
    want_da, want_db = [bool(out) for out in node.outputs]
    if want_da:       # dy b^T
        outputs[0], stats = _launch(blas.gemm, dy, b, trans_b=True, **on_gemm)
        parts.append(stats)
    if want_db:       # a^T dy
        outputs[1], stats = _launch(blas.gemm, a, dy, trans_a=True, **on_gemm)
        parts.append(stats)
    return tuple(None if o is None else np.ascontiguousarray(o) for o in outputs), parts, \
        "swGEMM (transposed operands)"


# ---- Concat -----------------------------------------------------------------------------

def concat_grad(node, dy):
    """dy cut along ``axis`` into pieces of the ``split`` sizes (the inputs')."""
    return tuple(np.split(dy, np.cumsum(_ints(node, "split"))[:-1], axis=node.attr("axis")))


def _concat_grad_shape(node, info):
    axis, shape = node.attr("axis"), list(info[0].shape)
    return [TensorInfo(info[0].dtype, tuple(shape[:axis] + [size] + shape[axis + 1:]))
            for size in _ints(node, "split")]


def cpe_concat_grad(node, inputs, on):
    """Each needed piece copied by the CPEs (the layout transform's copying pass, as the
    forward Concat's); the host only cuts the views."""
    (dy,) = inputs
    _floats(node, dy)
    if dy.ndim != 4:
        raise NotSuitable("Concat of tensors that are not 4-D: the CPE copy pass takes 4-D")
    pieces, parts = [], []
    for piece, out in zip(concat_grad(node, dy), node.outputs):
        if not out:
            pieces.append(None)
            continue
        copy, stats = _launch(dnn.transform, np.ascontiguousarray(piece), "NCHW", "NCHW", **on)
        pieces.append(copy)
        parts.append(stats)
    return tuple(pieces), parts, "copy passes (transform)"


# ---- Softmax, LogSoftmax, LRN (MPE only, as their forwards) -----------------------------

def softmax_grad(node, dy, y):
    """y (dy - sum(dy y)) over the forward's axis (its attributes and opset's coercion)."""
    g, axis, back = _softmax_axes(node, dy.astype(np.float64))
    s = _softmax_axes(node, y.astype(np.float64))[0]
    return (back(s * (g - (g * s).sum(axis=axis, keepdims=True))).astype(dy.dtype),)


def logsoftmax_grad(node, dy, y):
    """dy - exp(y) sum(dy) over the forward's axis."""
    g, axis, back = _softmax_axes(node, dy.astype(np.float64))
    s = _softmax_axes(node, y.astype(np.float64))[0]
    return (back(g - np.exp(s) * g.sum(axis=axis, keepdims=True)).astype(dy.dtype),)


def lrn_grad(node, dy, x):
    """dx of y_c = x_c s_c^-beta, s_c = bias + alpha/size sum of x_j^2 over the channels j
    of c's window [c - (size-1)/2, c + size/2]: dy s^-beta - 2 alpha beta / size x times the
    sum of dy y / s over the windows holding c."""
    size = int(node.attr("size"))
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    rest = [(0, 0)] * (x.ndim - 2)

    def window_sums(values, before, after):
        padded = np.pad(values, [(0, 0), (before, after)] + rest)
        return sum(padded[:, i:i + x.shape[1]] for i in range(size))

    s = bias + alpha / size * window_sums(x64 * x64, (size - 1) // 2, size // 2)
    y = x64 * s ** -beta
    back = window_sums(dy64 * y / s, size // 2, (size - 1) // 2)   # the adjoint window
    return ((dy64 * s ** -beta - 2 * alpha * beta / size * x64 * back).astype(x.dtype),)


# ---- LeakyRelu, Gelu, LayerNormalization ------------------------------------------------

def leakyrelu_grad(node, dy, x):
    """dy where x > 0, alpha dy elsewhere (the CPE path's mask: ReLU's backward)."""
    slope = np.where(x > 0, 1.0, node.attr("alpha", 0.01))
    return ((dy.astype(np.float64) * slope).astype(dy.dtype),)


def cpe_leakyrelu_grad(node, inputs, on):
    """(1 - alpha) relu'(x) dy + alpha dy: ReLU's backward, then the CPEs' axpby."""
    dy, x = inputs
    _floats(node, dy, x)
    alpha = float(node.attr("alpha", 0.01))
    masked, first = _launch(dnn.activation_backward, dy, x=x, mode="relu", **on)
    dx, second = _launch(dnn.add, masked, dy, alpha=1.0 - alpha, beta=alpha, **on)
    return (dx,), [first, second], "relu backward + axpby"


def gelu_grad(node, dy, x):
    """d/dx of x Phi(x) = Phi(x) + x phi(x); of the tanh form with u = k (x + 0.044715 x^3):
    (1 + tanh u) / 2 + x (1 - tanh^2 u) k (1 + 3 0.044715 x^2) / 2."""
    a = x.astype(np.float64)
    if node.attr("approximate", "none") in ("tanh", b"tanh"):
        k = np.sqrt(2 / np.pi)
        t = np.tanh(k * (a + 0.044715 * a ** 3))
        slope = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * 0.044715 * a * a)
    else:
        from math import erf
        slope = 0.5 * (1 + np.vectorize(erf)(a / np.sqrt(2))) + \
            a * np.exp(-0.5 * a * a) / np.sqrt(2 * np.pi)
    return ((dy.astype(np.float64) * slope).astype(dy.dtype),)


def layernorm_grad(node, dy, x, scale, bias=None):
    """(dx, dscale, dbias) of y = (x - mean) / sqrt(var + eps) scale + bias over the axes from
    ``axis`` on (the statistics recomputed from x: the forward outputs only y)."""
    axes = tuple(range(node.attr("axis", -1) % x.ndim, x.ndim))
    a, g = x.astype(np.float64), dy.astype(np.float64)
    centred = a - a.mean(axis=axes, keepdims=True)
    invstd = 1.0 / np.sqrt((centred * centred).mean(axis=axes, keepdims=True)
                           + node.attr("epsilon", 1e-5))
    xhat = centred * invstd
    dxhat = g * scale
    dx = invstd * (dxhat - dxhat.mean(axis=axes, keepdims=True)
                   - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True))
    grads = [dx.astype(x.dtype), _sum_to(g * xhat, scale.shape).astype(scale.dtype)]
    if bias is not None:
        grads.append(_sum_to(g, bias.shape).astype(bias.dtype))
    return tuple(grads)


def _register():
    grads = dict(
        SumTo=(Op(sum_to, "stream", shape=_sum_to_shape), cpe_sum_to),
        MatMulGrad=(Op(matmul_grad, "gemm", shape=_like_forward_inputs(1),
                       flops=_matmul_grad_flops), cpe_matmul_grad),
        ConcatGrad=(Op(concat_grad, "copy", shape=_concat_grad_shape), cpe_concat_grad),
        SoftmaxGrad=(Op(softmax_grad, "stream", shape=_like_input), None),
        LogSoftmaxGrad=(Op(logsoftmax_grad, "stream", shape=_like_input), None),
        LRNGrad=(Op(lrn_grad, "stream", shape=_like_input), None),
        LeakyReluGrad=(Op(leakyrelu_grad, "stream", shape=_like_input), cpe_leakyrelu_grad),
        GeluGrad=(Op(gelu_grad, "stream", shape=_like_input), None),
        LayerNormalizationGrad=(Op(layernorm_grad, "stream", shape=_like_forward_inputs(1)),
                                None),
    )
    for name, (op, cpe) in grads.items():
        TRAINING[name] = op
        if cpe is not None:
            CPE[name] = cpe


_register()
