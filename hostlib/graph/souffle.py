"""Souffle as passes of the graph engine (Xia's thesis §4.3–4.5; digest
../shared/reference/thesis-xia-dnntune-souffle-gdpnpu.md §2; docs/souffle.md).

``lower(graph)`` turns a graph's nodes into tensor expressions (te.py): softmax, layernorm and
the sigmoid/tanh/GELU activations become several TEs (a reduction is a whole TE, and exp is
always a whole TE body: the CPEs compute it with vmath.inc's vectorised routine).
The passes rewrite the TE program and say, per TE, why they did not apply:

- ``vertical``: a copy TE (Transpose, Slice, a splitting Reshape) or a one-to-one element-wise
  TE is inlined into its readers by composing index maps (eq. 4-1), so the reader fetches the
  source through one strided pattern and the intermediate is never written;
- ``horizontal``: TEs of the same structure that read the same inputs and differ only in one
  constant (the Q/K/V projections) become one TE over the stacked constants: one launch that
  reads the shared input once;
- the partition and the fusion are souffle_codegen's ``plan``: per TE a grid of CPEs under
  the LDM budget, the TEs of a launch separated by CPE barriers, and the reductions fused with
  their producers when the producer's LDM tile holds all the reader needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import te
from .ir import Graph, GraphError
from .ops import window_geometry

GELU_C = float(np.sqrt(2.0 / np.pi))


@dataclass
class Program:
    """A TE program: placeholders (graph inputs and constants), the TEs in order, outputs."""
    inputs: dict                          # name -> te.Tensor (placeholders)
    constants: dict                       # name -> np.ndarray (the constant placeholders)
    tensors: list                         # te.Tensor in a valid order
    outputs: list                         # names of program outputs (graph outputs)
    notes: list = field(default_factory=list)   # (pass, TE or group, applied?, why)

    def evaluate(self, feeds: dict) -> dict:
        values = te.evaluate(self.tensors, {**self.constants, **feeds})
        return {name: values[name] for name in self.outputs}

    def readers(self) -> dict:
        out = {t.name: [] for t in self.tensors}
        for t in self.tensors:
            for r in te.reads(t):
                if r.tensor.name in out:
                    out[r.tensor.name].append((t, r))
        return out


# ---- lowering ---------------------------------------------------------------------------

def _from_map(source: te.Tensor, imap: te.IndexMap, axes) -> te.Read:
    index = tuple(te.Affine(dict(zip(axes, row)), c) for row, c in zip(imap.matrix, imap.offset))
    return te.Read(source, index)


def _broadcast_read(source: te.Tensor, axes) -> te.Read:
    return _from_map(source, te._broadcast(source.shape, [a.extent for a in axes]), axes)


def _last_axis(node, rank: int, default: int = -1):
    axis = node.attr("axis", default)
    if axis % rank != rank - 1:
        raise GraphError(f"{node}: Souffle lowers {node.op_type} over the last axis only, not "
                         f"axis {axis}")


def _rows(name, shape, fn, origin):
    """A TE over all but the last axis (a per-row reduction), kept rank-equal with size 1."""
    return te.compute(tuple(shape[:-1]) + (1,), fn, name, origin)


def _matmul(node, a, b, shape):
    n = a.shape[-1]
    r = te.reduce_axis(n, f"{node.name}.k")

    def body(*i):
        batch = i[:-2]
        ia = tuple(ax if dim != 1 else 0 for ax, dim in zip(batch[len(batch) - len(a.shape) + 2:],
                                                             a.shape[:-2]))
        ib = tuple(ax if dim != 1 else 0 for ax, dim in zip(batch[len(batch) - len(b.shape) + 2:],
                                                             b.shape[:-2]))
        return te.te_sum(a[ia + (i[-2], r)] * b[ib + (r, i[-1])], [r])
    return [te.compute(shape, body, node.outputs[0], node.name)]


def _gemm(node, a, b, shape, c=None):
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    r = te.reduce_axis(a.shape[0] if node.attr("transA", 0) else a.shape[1], f"{node.name}.k")

    def ab(i, j):
        x = a[r, i] if node.attr("transA", 0) else a[i, r]
        y = b[j, r] if node.attr("transB", 0) else b[r, j]
        return te.te_sum(x * y * alpha if alpha != 1.0 else x * y, [r])
    if c is None:
        return [te.compute(shape, ab, node.outputs[0], node.name)]
    product = te.compute(shape, ab, f"{node.outputs[0]}.ab", node.name)
    return [product, te.compute(shape, lambda *i: product[i] + _broadcast_read(c, i) * beta
                                if beta != 1.0 else product[i] + _broadcast_read(c, i),
                                node.outputs[0], node.name)]


def _softmax(node, x, shape):
    _last_axis(node, len(shape))
    out, n = node.outputs[0], shape[-1]
    r = te.reduce_axis(n, f"{node.name}.r")
    m = _rows(f"{out}.max", shape, lambda *i: te.te_max(x[i[:-1] + (r,)], [r]), node.name)
    e = te.compute(shape, lambda *i: te.exp(x[i] - m[i[:-1] + (0,)]), f"{out}.exp", node.name)
    r2 = te.reduce_axis(n, f"{node.name}.r2")
    s = _rows(f"{out}.sum", shape, lambda *i: te.te_sum(e[i[:-1] + (r2,)], [r2]), node.name)
    return [m, e, s, te.compute(shape, lambda *i: e[i] / s[i[:-1] + (0,)], out, node.name)]


def _layernorm(node, x, shape, scale, bias=None):
    _last_axis(node, len(shape))
    out, n, eps = node.outputs[0], shape[-1], float(node.attr("epsilon", 1e-5))
    r, r2 = te.reduce_axis(n, f"{node.name}.r"), te.reduce_axis(n, f"{node.name}.r2")
    mean = _rows(f"{out}.mean", shape, lambda *i: te.te_sum(x[i[:-1] + (r,)] * (1.0 / n), [r]),
                 node.name)

    def centred(i, axis):
        return x[i[:-1] + (axis,)] - mean[i[:-1] + (0,)]
    var = _rows(f"{out}.var", shape,
                lambda *i: te.te_sum(centred(i, r2) * centred(i, r2) * (1.0 / n), [r2]), node.name)

    def y(*i):
        value = (x[i] - mean[i[:-1] + (0,)]) / te.sqrt(var[i[:-1] + (0,)] + eps) \
            * _broadcast_read(scale, i)
        return value + _broadcast_read(bias, i) if bias is not None else value
    return [mean, var, te.compute(shape, y, out, node.name)]


def _exp_then(node, x, shape, inner, outer):
    """An activation as exp(inner(x)) (its own TE) and outer(x, u)."""
    u = te.compute(shape, lambda *i: te.exp(inner(x[i])), f"{node.outputs[0]}.exp", node.name)
    return [u, te.compute(shape, lambda *i: outer(x[i], u[i]), node.outputs[0], node.name)]


def _gelu(node, x, shape):
    if node.attr("approximate", "none") != "tanh":
        raise GraphError(f"{node}: Souffle lowers Gelu(approximate='tanh') only (the exact form "
                         "needs erf, which the CPE math library does not have)")
    # 0.5 x (1 + tanh(y)) = x - x / (exp(2 y) + 1), y = c (x + 0.044715 x^3)
    return _exp_then(node, x, shape, lambda v: (v + v * v * v * 0.044715) * (2 * GELU_C),
                     lambda v, u: v - v / (u + 1.0))


def _elementwise(node, inputs, shape):
    def reads(i):
        return [_broadcast_read(t, i) for t in inputs]
    ops = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
           "Div": lambda a, b: a / b}
    if node.op_type in ops:
        return [te.compute(shape, lambda *i: ops[node.op_type](*reads(i)), node.outputs[0],
                           node.name)]
    return [te.compute(shape, lambda *i: te.maximum(reads(i)[0], 0.0), node.outputs[0],
                       node.name)]


def _copy(node, x, shape, constants):
    kind, maps = te.lower(node, [x.shape], shape, constants)
    if kind is None:
        raise GraphError(f"{node}: {maps}")
    return [te.compute(shape, lambda *i: _from_map(x, maps[0], i), node.outputs[0], node.name)]


def _reshape(node, x, shape):
    return [te.compute(shape, lambda *i: te.Read(x, tuple(te.Affine.of(a) for a in i),
                                                 tuple(shape)), node.outputs[0], node.name)]


def _reduce_axes(extents: dict, prefix: str) -> dict:
    """Name -> a reduce axis, or 0 when the extent is 1 (a reduce axis of one point is no loop)."""
    return {k: te.reduce_axis(n, f"{prefix}.{k}") if n > 1 else 0 for k, n in extents.items()}


def _window(node, x, shape, kernel):
    """(per output spatial axis a function (out axis, kernel axis) -> the input index, whether
    an index can leave the input: the read needs a fill) of a Conv or pool node."""
    begin, _, strides, dilations, _ = window_geometry(node, x.shape[2:], kernel)
    outside = any(b > 0 or (o - 1) * s + d * (k - 1) - b >= n for b, s, d, k, o, n in zip(
        begin, strides, dilations, kernel, shape[2:], x.shape[2:]))
    return [lambda o, r, s=s, d=d, b=b: o * s + r * d - b
            for s, d, b in zip(strides, dilations, begin)], outside


def _conv(node, x, w, shape, bias=None):
    """A 2-D Conv of one group or a depthwise one (one output channel per group); the bias an
    element-wise TE after the reduction."""
    if len(x.shape) != 4:
        raise GraphError(f"{node}: Souffle lowers 2-D Conv only (a 4-D input)")
    group, (co, cg, kh, kw) = int(node.attr("group", 1)), w.shape
    if group not in (1, co):
        raise GraphError(f"{node}: Souffle lowers Conv with group 1 or depthwise (group = "
                         f"output channels), not group {group}: the input channel of a group "
                         "is not affine in the output channel")
    (row, col), outside = _window(node, x, shape, (kh, kw))
    r = _reduce_axes({"c": cg, "kh": kh, "kw": kw}, node.name)

    def body(n, o, i, j):
        channel = r["c"] + (o * cg if group > 1 else 0)
        v = x.read((n, channel, row(i, r["kh"]), col(j, r["kw"])), 0.0 if outside else None)
        product = v * w[o, r["c"], r["kh"], r["kw"]]
        axes = [a for a in r.values() if isinstance(a, te.Axis)]
        return te.te_sum(product, axes) if axes else product
    name = node.outputs[0]
    if bias is None:
        return [te.compute(shape, body, name, node.name)]
    conv = te.compute(shape, body, f"{name}.conv", node.name)
    return [conv, te.compute(shape, lambda *i: conv[i] + bias[(i[1],)], name, node.name)]


def _maxpool(node, x, shape):
    if len(x.shape) != 4 or len(node.outputs) > 1 and node.outputs[1]:
        raise GraphError(f"{node}: Souffle lowers 2-D MaxPool without Indices only")
    kernel = [int(k) for k in node.attr("kernel_shape")]
    (row, col), outside = _window(node, x, shape, kernel)
    r = _reduce_axes({"kh": kernel[0], "kw": kernel[1]}, node.name)
    axes = [a for a in r.values() if isinstance(a, te.Axis)]
    return [te.compute(shape, lambda n, c, i, j: te.te_max(x.read(
        (n, c, row(i, r["kh"]), col(j, r["kw"])), -np.inf if outside else None), axes),
        node.outputs[0], node.name)]


def _concat(node, inputs, shape):
    """One copy TE per input, each writing its slice of the concatenation (``into``): the
    inputs' producers are inlined into them, so the branches write the result in place."""
    axis = int(node.attr("axis", 0)) % len(shape)
    whole, made, offset = te.Tensor(node.outputs[0], shape), [], 0
    for k, x in enumerate(inputs):
        offsets = tuple(offset if d == axis else 0 for d in range(len(shape)))
        made.append(te.compute(x.shape, lambda *i, x=x: x[i], f"{node.outputs[0]}.part{k}",
                               node.name, into=(whole, offsets)))
        offset += x.shape[axis]
    return made, whole


def lower(graph: Graph) -> Program:
    """The graph's nodes as TEs; a node Souffle cannot lower raises GraphError with the reason."""
    graph.infer()
    constants = {k: np.asarray(v, np.float64) for k, v in graph.initializers.items()}
    tensors = {name: te.placeholder(name, info.shape) for name, info in graph.inputs.items()}
    tensors.update({name: te.placeholder(name, v.shape) for name, v in constants.items()})
    inputs = dict(tensors)
    out = []
    for node in graph.order():
        shape = tuple(graph.info[node.outputs[0]].shape)
        args = [tensors[n] for n in node.inputs if n and n in tensors]
        op = node.op_type
        if op == "MatMul":
            made = _matmul(node, *args[:2], shape)
        elif op == "Gemm":
            made = _gemm(node, *args[:2], shape, *args[2:])
        elif op == "Softmax":
            made = _softmax(node, args[0], shape)
        elif op == "LayerNormalization":
            made = _layernorm(node, args[0], shape, *args[1:])
        elif op == "Gelu":
            made = _gelu(node, args[0], shape)
        elif op == "Sigmoid":
            made = _exp_then(node, args[0], shape, lambda v: -v, lambda v, u: 1.0 / (u + 1.0))
        elif op == "Tanh":
            made = _exp_then(node, args[0], shape, lambda v: v * 2.0,
                             lambda v, u: 1.0 - 2.0 / (u + 1.0))
        elif op in ("Add", "Sub", "Mul", "Div", "Relu"):
            made = _elementwise(node, args, shape)
        elif op in ("Transpose", "Slice", "Identity"):
            made = _copy(node, args[0], shape, graph.initializers)
        elif op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
            made = _reshape(node, args[0], shape)
        elif op == "Conv":
            made = _conv(node, *args[:2], shape, *args[2:])
        elif op == "MaxPool":
            made = _maxpool(node, args[0], shape)
        elif op == "Concat":
            made, whole = _concat(node, args, shape)
            out += made
            tensors[node.outputs[0]] = whole
            continue
        else:
            raise GraphError(f"{node}: Souffle has no tensor expression for {op}")
        out += made
        tensors[node.outputs[0]] = made[-1]
    return Program(inputs, constants, out, list(graph.outputs))


# ---- vertical transformation ----------------------------------------------------------------

def reshape_map(shape, view) -> te.IndexMap | None:
    """The map from an index of ``view`` to one of ``shape`` (same size), when it is affine:
    every dimension of ``shape`` is a run of consecutive dimensions of ``view`` (a split).
    None when the reshape merges dimensions (the index divides and takes remainders)."""
    matrix = np.zeros((len(shape), len(view)), np.int64)
    j = 0
    for m, extent in enumerate(shape):
        group, product = [], 1
        while j < len(view) and (product < extent or (view[j] == 1 and extent == 1 and not group)):
            group.append(j)
            product *= view[j]
            j += 1
        if product != extent:
            return None
        stride = 1
        for k in reversed(group):
            matrix[m, k] = stride if view[k] != 1 else 0
            stride *= view[k]
    if any(view[k] != 1 for k in range(j, len(view))):
        return None
    return te.IndexMap(matrix, np.zeros(len(shape), np.int64))


def _substitute(expr, mapping: dict):
    """The expression with each of its Reads' axes replaced by Affine ``mapping[axis]``."""
    if isinstance(expr, te.Read):
        return te.Read(expr.tensor, tuple(_subst_affine(i, mapping) for i in expr.index),
                       expr.view, expr.fill)
    if isinstance(expr, te.Binary):
        return te.Binary(expr.op, _substitute(expr.a, mapping), _substitute(expr.b, mapping))
    if isinstance(expr, te.Unary):
        return te.Unary(expr.op, _substitute(expr.a, mapping))
    return expr


def _subst_affine(affine: te.Affine, mapping: dict) -> te.Affine:
    out = te.Affine({}, affine.const)
    for axis, coef in affine.coefs.items():
        out = out + (mapping[axis] * coef if axis in mapping else te.Affine({axis: coef}, 0))
    return out


def _replace_reads(expr, fn):
    """The expression with every Read r replaced by fn(r) (None: kept)."""
    if isinstance(expr, te.Read):
        return fn(expr) or expr
    if isinstance(expr, te.Binary):
        return te.Binary(expr.op, _replace_reads(expr.a, fn), _replace_reads(expr.b, fn))
    if isinstance(expr, te.Unary):
        return te.Unary(expr.op, _replace_reads(expr.a, fn))
    return expr


def _with_expr(t: te.Tensor, expr) -> te.Tensor:
    body = te.Reduce(t.body.op, expr, t.body.axes) if isinstance(t.body, te.Reduce) else expr
    return te.Tensor(t.name, t.shape, t.axes, body, t.origin, t.into)


def _inline_reason(p: te.Tensor, readers, outputs) -> str | None:
    """Why producer ``p`` cannot be inlined into its readers (None: it can)."""
    if p.name in outputs:
        return "a graph output (it must be written)"
    if isinstance(p.body, te.Reduce):
        return "a reduction (One-Relies-on-Many: its readers would recompute it)"
    if any(isinstance(e, te.Unary) and e.op == "exp" for e in te.nodes(p.expr)):
        return "its body is an exp (computed by the vectorised routine, a whole TE)"
    if p.into:
        return f"it writes its slice of {p.into[0].name} (read there)"
    if not readers:
        return "no reader"
    copy = isinstance(p.expr, te.Read)
    names = sorted({t.name for t, _ in readers})
    if not copy and len(names) > 1:
        return (f"{len(names)} TEs read it ({', '.join(names)}): each would recompute it, and "
                "along a recurrence (an LSTM's c_t, read by tanh(c_t) and c_t+1) the "
                "recomputed chain would grow with every step")
    for t, r in readers:
        if r.fill is not None:
            return (f"{t.name} reads it with padding: inlined, the padded indices would read "
                    "its source's neighbours instead of the fill")
        if r.view is not None and r.view != p.shape and reshape_map(p.shape, r.view) is None:
            return (f"{t.name} reads it through a merging Reshape {list(p.shape)} -> "
                    f"{list(r.view)}: not an affine index map, so it stays materialised")
        if not copy and te.dependence(t, r) != te.ONE_TO_ONE:
            return (f"{t.name} reads each element many times (One-Relies-on-Many): inlining "
                    "would recompute it")
    return None


def vertical(program: Program) -> Program:
    """Inline copy TEs and one-to-one element-wise TEs into their readers (eq. 4-1)."""
    tensors, notes = list(program.tensors), []
    changed = True
    while changed:
        changed = False
        readers = Program(program.inputs, program.constants, tensors, program.outputs).readers()
        for p in tensors:
            if _inline_reason(p, readers[p.name], program.outputs) is None:
                tensors = [_inline(t, p) for t in tensors if t is not p]
                notes.append(("vertical", p.name, True,
                              f"inlined into {', '.join(sorted({t.name for t, _ in readers[p.name]}))}"))
                changed = True
                break
    readers = Program(program.inputs, program.constants, tensors, program.outputs).readers()
    for p in tensors:
        why = _inline_reason(p, readers[p.name], program.outputs)
        notes.append(("vertical", p.name, False, why))
    return Program(program.inputs, program.constants, tensors, program.outputs,
                   program.notes + notes)


def _inline(t: te.Tensor, p: te.Tensor) -> te.Tensor:
    def replace(r):
        if r.tensor.name != p.name:
            return None
        index = r.index
        if r.view is not None and r.view != p.shape:       # split reshape: view -> p's index
            rmap = reshape_map(p.shape, r.view)
            index = tuple(sum((i * int(c) for i, c in zip(index, row) if c), te.Affine({}, 0))
                          for row in rmap.matrix)
        return _substitute(p.expr, dict(zip(p.axes, index)))
    return _with_expr(t, _replace_reads(t.expr, replace))


# ---- horizontal transformation --------------------------------------------------------------

def _signature(t: te.Tensor, constants) -> str:
    """The TE's structure with axes by position and constant inputs by shape only."""
    names = {a: f"a{k}" for k, a in enumerate(t.axes + t.reduce_axes)}

    def show(e):
        if isinstance(e, te.Const):
            return repr(e.value)
        if isinstance(e, te.Read):
            who = f"const{list(e.tensor.shape)}" if e.tensor.name in constants else e.tensor.name
            idx = ",".join("+".join(f"{c}*{names[a]}" for a, c in i.coefs.items()) + f"+{i.const}"
                           for i in e.index)
            return f"{who}[{idx}]{e.view}{e.fill}"
        if isinstance(e, te.Binary):
            return f"{e.op}({show(e.a)},{show(e.b)})"
        return f"{e.op}({show(e.a)})"
    reduce = t.body.op if isinstance(t.body, te.Reduce) else ""
    return f"{list(t.shape)}{reduce}{[a.extent for a in t.reduce_axes]}:{show(t.expr)}"


def horizontal(program: Program) -> Program:
    """Concatenate TEs of one structure that differ only in a constant input into one TE over
    the stacked constants (one launch, the shared input read once)."""
    groups = {}
    for t in program.tensors:
        groups.setdefault(_signature(t, program.constants), []).append(t)
    tensors, constants, inputs = list(program.tensors), dict(program.constants), dict(program.inputs)
    notes = []
    for group in groups.values():
        if len(group) < 2:
            continue
        current = {t.name: t for t in tensors}     # earlier merges rewrote their readers
        members = [current[m.name] for m in group]
        names = ", ".join(m.name for m in members)
        why = _horizontal_reason(members, program)
        if why:
            notes.append(("horizontal", names, False, why))
            continue
        consts = [[r.tensor.name for r in te.reads(m) if r.tensor.name in program.constants]
                  for m in members]
        stacked_name = "hcat(" + ",".join(c[0] for c in consts) + ")"
        stacked = te.placeholder(stacked_name, (len(members),)
                                 + program.constants[consts[0][0]].shape)
        constants[stacked_name] = np.stack([program.constants[c[0]] for c in consts])
        inputs[stacked_name] = stacked
        first = members[0]
        name = "hcat(" + ",".join(m.name for m in members) + ")"
        g = te.Axis(f"{name}.g", len(members))
        axes = (g,) + tuple(te.Axis(f"{name}.i{k}", n) for k, n in enumerate(first.shape))
        mapping = {a: te.Affine.of(b) for a, b in zip(first.axes, axes[1:])}
        expr = _replace_reads(_substitute(first.expr, mapping), lambda r: te.Read(
            stacked, (te.Affine.of(g),) + r.index, fill=r.fill) if r.tensor.name == consts[0][0]
            else None)
        body = te.Reduce(first.body.op, expr, first.body.axes) \
            if isinstance(first.body, te.Reduce) else expr
        merged = te.Tensor(name, (len(members),) + first.shape, axes, body, name)
        index = {m.name: k for k, m in enumerate(members)}

        def retarget(r, index=index, merged=merged):
            if r.tensor.name not in index:
                return None
            view = None if r.view is None else (len(index),) + tuple(r.view)
            return te.Read(merged, (te.Affine({}, index[r.tensor.name]),) + r.index, view, r.fill)
        position = [t.name for t in tensors].index(first.name)
        tensors = [_with_expr(t, _replace_reads(t.expr, retarget)) for t in tensors
                   if t.name not in index]
        tensors.insert(position, merged)
        notes.append(("horizontal", names, True, f"one TE {name} over the stacked "
                      f"{stacked_name}: the shared input read once"))
    return Program(inputs, constants, tensors, program.outputs, program.notes + notes)


def _horizontal_reason(members, program) -> str | None:
    for m in members:
        if m.name in program.outputs:
            return f"{m.name} is a graph output"
        if m.into:
            return f"{m.name} writes its slice of {m.into[0].name}"
        consts = {r.tensor.name for r in te.reads(m) if r.tensor.name in program.constants}
        if len(consts) != 1:
            return f"{m.name} reads {len(consts)} constants; the transformation stacks exactly one"
    shared = [{r.tensor.name for r in te.reads(m) if r.tensor.name not in program.constants}
              for m in members]
    if any(s != shared[0] for s in shared) or not shared[0]:
        return "they do not read the same non-constant inputs (nothing read once)"
    return None


PASSES = {"vertical": vertical, "horizontal": horizontal}


def explain(program: Program) -> str:
    """One line per pass decision: what applied, and why the others did not."""
    lines = []
    for name, what, applied, why in program.notes:
        if why is None:
            continue
        lines.append(f"{name:<10} {'applied' if applied else 'not applied':<12} {what}: {why}")
    return "\n".join(lines)
