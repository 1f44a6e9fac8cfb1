"""The CPE implementations of the graph's operators (swHMAE's accelerated path): each maps an
ONNX node onto an operator of ``hostlib.dnn`` / ``hostlib.blas`` or a kernel the Souffle code
generator writes for it (``generated``; every multiply, compare and
exp runs as CPE code on the VM; the host only reshapes, broadcasts, pads or transposes
operands, i.e. copies) or raises ``NotSuitable`` with the reason, and ``dispatch`` falls back
to the MPE. ``CPE[op_type](node, inputs, on) -> (outputs, stats, algorithm)`` with ``on`` the
keyword arguments machine=, cgs=, engine=."""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError
from .. import blas, dnn
from . import souffle, souffle_codegen
from .ir import Graph, GraphError, Node, TensorInfo
from .ops import FLOATS, legacy_broadcast, window_geometry


class NotSuitable(Exception):
    """The node does not fit a CPE operator; the message says why (it runs on the MPE)."""


def _floats(node, *arrays):
    """The node's float operands, one dtype, float32 or float64; else NotSuitable."""
    dtypes = {a.dtype for a in arrays if a is not None}
    if len(dtypes) != 1 or next(iter(dtypes)) not in FLOATS:
        raise NotSuitable(f"operands of dtypes {sorted(d.name for d in dtypes)}: the CPE "
                          "operators take one dtype, float32 or float64")


def _launch(operator, *args, **kwargs):
    """Call a dnn/blas operator; its refusal (LDM, sizes) becomes NotSuitable."""
    try:
        return operator(*args, **kwargs)
    except ArgumentError as error:
        raise NotSuitable(f"{operator.__name__} refused it: {error}") from None


def conv(node, inputs, on):
    x, w, *rest = inputs
    b = rest[0] if rest else None
    _floats(node, x, w, b)
    begin, end, strides, dilations, _ = window_geometry(node, x.shape[2:], list(w.shape[2:]))
    if dilations != [1, 1]:
        raise NotSuitable(f"dilations {dilations}: the CPE convolutions have none")
    # asymmetric padding: the extra rows/columns on one side as zeros in the operand
    low = [min(b_, e) for b_, e in zip(begin, end)]
    extra = [(b_ - m, e - m) for b_, e, m in zip(begin, end, low)]
    group = int(node.attr("group", 1))
    layout = node.attr("layout", "NCHW")
    if layout != "NCHW" and (group != 1 or any(p for pair in extra for p in pair)):
        raise NotSuitable(f"layout {layout}: the CPE path takes groups and asymmetric padding "
                          "in NCHW only")
    if any(p for pair in extra for p in pair):
        x = np.pad(x, [(0, 0), (0, 0)] + extra)
    cg, og = x.shape[1] // group, w.shape[0] // group
    outputs, parts = [], []
    for g in range(group):
        y, stats = _launch(dnn.conv2d_forward, np.ascontiguousarray(x[:, g * cg:(g + 1) * cg]),
                           np.ascontiguousarray(w[g * og:(g + 1) * og]),
                           bias=None if b is None else b[g * og:(g + 1) * og],
                           stride=tuple(strides), padding=tuple(low), algo="auto",
                           layout=layout, **on)
        outputs.append(y)
        parts.append(stats)
    y = outputs[0] if group == 1 else np.concatenate(outputs, axis=1)
    return (y,), parts, parts[0].algo + (f" x{group} groups" if group > 1 else "")


def gemm(node, inputs, on):
    a, b, *rest = inputs
    c = rest[0] if rest else None
    _floats(node, a, b, c)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    n = b.shape[0] if trans_b else b.shape[1]
    if (not trans_a and trans_b and alpha == 1.0 and beta == 1.0 and c is not None
            and c.size == n and c.shape[-1] == n):       # a layer: y = x w^T + bias
        y, stats = _launch(dnn.linear_forward, a, b, bias=c.reshape(n), **on)
        return (y,), [stats], "swGEMM (linear)"
    m = a.shape[1] if trans_a else a.shape[0]
    full = None if c is None else np.ascontiguousarray(np.broadcast_to(c, (m, n)))
    y, stats = _launch(blas.gemm, a, b, full, alpha=alpha, beta=beta if c is not None else 0.0,
                       trans_a=trans_a, trans_b=trans_b, machine=on["machine"],
                       engine=on["engine"])
    return (np.ascontiguousarray(y),), [stats], "swGEMM"


def matmul(node, inputs, on):
    a, b = inputs
    _floats(node, a, b)
    if a.ndim != 2 or b.ndim != 2:
        raise NotSuitable(f"MatMul of {a.ndim}-D by {b.ndim}-D: the CPE path takes 2-D")
    y, stats = _launch(blas.gemm, a, b, machine=on["machine"], engine=on["engine"])
    return (np.ascontiguousarray(y),), [stats], "swGEMM"


def _square(node, name, values):
    if len(set(values)) != 1:
        raise NotSuitable(f"{name} {values}: the CPE pooling takes square windows")
    return values[0]


def pool_window(node, x):
    """(kernel, stride, pads begin, pads end, output sizes) of a pooling node over x for the
    CPE pooling (a square window, equal strides, no dilation), else NotSuitable."""
    kernel = [int(k) for k in node.attr("kernel_shape")]
    begin, end, strides, dilations, out = window_geometry(node, x.shape[2:], kernel)
    if dilations != [1, 1]:
        raise NotSuitable(f"dilations {dilations}: the CPE pooling has none")
    return (_square(node, "kernel_shape", kernel), _square(node, "strides", strides), begin,
            end, out)


def pool(node, inputs, on):
    (x,) = inputs
    _floats(node, x)
    k, s, begin, end, out = pool_window(node, x)
    mode = "max" if node.op_type == "MaxPool" else "avg"
    if mode == "max":
        # any padding (asymmetric, ceil_mode's partial windows): -inf rows and columns added
        # to the operand, which no maximum picks
        extra = [(o - 1) * s + k - (size + b + e)
                 for o, size, b, e in zip(out, x.shape[2:], begin, end)]
        width = [(0, 0), (0, 0)] + [(b, e + max(0, x_)) for b, e, x_ in zip(begin, end, extra)]
        if any(w for pair in width for w in pair):
            x = np.pad(x, width, constant_values=-np.inf)
        begin = end = [0, 0]
    if len(set(begin + end)) != 1:
        raise NotSuitable(f"pads {begin + end}: the CPE average pooling pads all sides alike")
    p = begin[0]
    floor = [(size + 2 * p - k) // s + 1 for size in x.shape[2:]]
    if out != floor:
        raise NotSuitable("ceil_mode adds a partial window: the CPE average pooling has none")
    if mode == "avg" and p and not node.attr("count_include_pad", 0):
        raise NotSuitable("count_include_pad=0 with padding: the CPE average pooling "
                          "divides by the whole window")
    result, stats = _launch(dnn.pool2d_forward, x, k, stride=s, padding=p, mode=mode, **on)
    return (result,), [stats], f"pool2d {mode}"


def global_pool(node, inputs, on):
    (x,) = inputs
    _floats(node, x)
    if x.ndim != 4 or x.shape[2] != x.shape[3]:
        raise NotSuitable(f"global pooling of {list(x.shape)}: the CPE pooling takes square "
                          "4-D planes")
    mode = "max" if node.op_type == "GlobalMaxPool" else "avg"
    result, stats = _launch(dnn.pool2d_forward, x, x.shape[2], stride=x.shape[2], mode=mode,
                            **on)
    return (result,), [stats], f"pool2d {mode} (global)"


def activation(node, inputs, on):
    (x,) = inputs
    _floats(node, x)
    y, stats = _launch(dnn.activation_forward, x, mode=node.op_type.lower(), **on)
    return (y,), [stats], node.op_type.lower()


def leakyrelu(node, inputs, on):
    """(1 - alpha) relu(x) + alpha x: ReLU, then the CPEs' axpby."""
    (x,) = inputs
    _floats(node, x)
    alpha = float(node.attr("alpha", 0.01))
    rectified, first = _launch(dnn.activation_forward, x, mode="relu", **on)
    y, second = _launch(dnn.add, rectified, x, alpha=1.0 - alpha, beta=alpha, **on)
    return (y,), [first, second], "relu + axpby"


def batchnorm(node, inputs, on):
    x, scale, bias, mean, var = inputs
    _floats(node, x, scale, bias, mean, var)
    if node.opset < 9 and not node.attr("spatial", 1):
        raise NotSuitable("spatial=0 (per-activation statistics): the CPE operator is per "
                          "channel")
    if x.ndim < 2:
        raise NotSuitable("BatchNormalization of a 1-D input")
    x4 = x.reshape(x.shape[0], x.shape[1], -1, 1)
    result, stats = _launch(dnn.batchnorm_forward, x4, scale, bias, mean, var, training=False,
                            eps=node.attr("epsilon", 1e-5), **on)
    return (result[0].reshape(x.shape),), [stats], "batchnorm (inference)"


def add_sub(node, inputs, on):
    _floats(node, *inputs)
    sign = -1.0 if node.op_type == "Sub" else 1.0
    if node.op_type == "Sum":
        shape = np.broadcast_shapes(*(x.shape for x in inputs))
        pairs = [(1.0, x) for x in inputs]
    else:
        a, b = legacy_broadcast(node, *inputs)
        shape = np.broadcast_shapes(a.shape, b.shape)
        pairs = [(1.0, a), (sign, b)]
    total, parts = _full(pairs[0][1], shape), []
    for weight, x in pairs[1:]:
        total, stats = _launch(dnn.add, total, _full(x, shape), alpha=1.0, beta=weight, **on)
        parts.append(stats)
    if not parts:
        raise NotSuitable("a Sum of one input is a copy")
    return (total,), parts, "add" + (" (broadcast operand)" if any(
        x.shape != shape for _, x in pairs) else "")


def _full(x, shape):
    """x broadcast to `shape` as a contiguous operand (a host copy, no arithmetic)."""
    return x if x.shape == tuple(shape) else np.ascontiguousarray(np.broadcast_to(x, shape))


def mul_div(node, inputs, on):
    a, b = legacy_broadcast(node, *inputs)
    _floats(node, a, b)
    if b.size != 1 or a.size == 1 and node.op_type == "Div":
        if a.size == 1 and node.op_type == "Mul":
            a, b = b, a
        else:
            raise NotSuitable("an element-wise product of two tensors: the CPE operators "
                              "scale by a scalar only")
    factor = float(b.reshape(-1)[0])
    if node.op_type == "Div":
        factor = 1.0 / factor
    shape = np.broadcast_shapes(a.shape, b.shape)
    y, stats = _launch(dnn.scale, _full(a, shape), alpha=factor, **on)
    return (y,), [stats], "scale"


def transpose(node, inputs, on):
    (x,) = inputs
    _floats(node, x)
    perm = [int(p) for p in node.attr("perm", list(range(x.ndim))[::-1])]
    # x read as each layout in turn (NCHW first): perm must take it to another layout
    for source, order in dnn.LAYOUTS.items() if x.ndim == 4 else ():
        target = "".join(order[p] for p in perm)
        layout = next((name for name, o in dnn.LAYOUTS.items() if o == target), None)
        if layout is not None:
            y, stats = _launch(dnn.transform, x, source, layout, **on)
            return (y,), [stats], f"transform {source}->{layout}"
    raise NotSuitable(f"perm {perm}: the CPE layout transforms move 4-D tensors between "
                      f"{sorted(dnn.LAYOUTS)}")


def concat(node, inputs, on):
    """Each input copied by the CPEs (the layout transform's copying pass, the bytes a
    concatenation moves); the host places the copies side by side."""
    _floats(node, *inputs)
    if any(x.ndim != 4 for x in inputs):
        raise NotSuitable("Concat of tensors that are not 4-D: the CPE copy pass takes 4-D")
    copies, parts = [], []
    for x in inputs:
        y, stats = _launch(dnn.transform, x, "NCHW", "NCHW", **on)
        copies.append(y)
        parts.append(stats)
    axis = int(node.attr("axis", 0)) % 4
    return (np.concatenate(copies, axis=axis),), parts, "copy passes (transform)"


def generated(node, inputs, on):
    """Gelu (tanh form) and LayerNormalization (its y only) as the Souffle code generator's
    kernels (docs/souffle.md): the node alone lowered to tensor expressions, planned on one
    CG's mesh and run; the generator computes in float64, the result is cast back."""
    x, *constants = inputs
    _floats(node, *inputs)
    if node.op_type == "Gelu" and node.attr("approximate", "none") != "tanh":
        raise NotSuitable("Gelu's exact (erf) form: the generated kernels have the tanh form")
    if any(node.outputs[1:]):
        raise NotSuitable("LayerNormalization's mean and inverse deviation outputs: the "
                          "generated kernel writes y only")
    names = ["x"] + [f"c{i}" for i in range(len(constants))]
    graph = Graph(node.name, [Node(node.name, node.op_type, names, ["y"], node.attrs,
                                   node.opset)], {"x": TensorInfo(x.dtype, x.shape)}, ["y"],
                  dict(zip(names[1:], constants)), {})
    machine = on["machine"]
    try:
        program = souffle.lower(graph)
        launches = souffle_codegen.plan(program, machine.config)
        outputs, stats = souffle_codegen.run(program, launches, machine, {"x": x},
                                             on["engine"])
    except GraphError as refusal:
        raise NotSuitable(f"the code generator refused it: {refusal}") from None
    return (outputs["y"].astype(x.dtype),), stats, "generated (Souffle)"


CPE = {
    "Conv": conv, "Gemm": gemm, "MatMul": matmul,
    "MaxPool": pool, "AveragePool": pool,
    "GlobalAveragePool": global_pool, "GlobalMaxPool": global_pool,
    "Relu": activation, "Sigmoid": activation, "Tanh": activation, "LeakyRelu": leakyrelu,
    "BatchNormalization": batchnorm,
    "Add": add_sub, "Sub": add_sub, "Sum": add_sub, "Mul": mul_div, "Div": mul_div,
    "Transpose": transpose, "Concat": concat,
    "Gelu": generated, "LayerNormalization": generated,
}


def layout_transforms(node, stats) -> int:
    """The layout transforms a node ran: a Transpose is one; a convolution's are those its
    operator ran around an algorithm whose layout is not the caller's (phase "layout")."""
    if node.op_type == "Transpose":
        return 1
    return sum(len(part.phases.get("layout", ())) for s in stats if hasattr(s, "phases")
               for part in [s, *s.per_cg])


def dma_bytes(stats) -> int:
    """Bytes the CPEs asked the DMA engine to move over a dnn/blas result's launches."""
    if isinstance(stats, list):
        return sum(dma_bytes(s) for s in stats)
    if hasattr(type(stats), "dma_bytes") or isinstance(stats, souffle_codegen.LaunchStats):
        return stats.dma_bytes
    nested = stats.details.get("per_cg") or stats.details.get("parts")
    if nested:
        return sum(dma_bytes(s) for s in nested)
    return int(stats.run.counters["dma_bytes_requested"])
