"""The start of Souffle's tensor-expression analysis (Xia's thesis §4.3–4.5, digest
../shared/reference/thesis-xia-dnntune-souffle-gdpnpu.md §2; docs/hope.md "Souffle"): graph
nodes lowered to element-level dependences, and the vertical transformation's index-map
composition (eq. 4-1), which turns a Transpose / Slice / broadcast chain into one strided
access pattern of its source; and the tensor-expression IR the Souffle passes work on
(``compute(shape, lambda *i: ...)`` with reduce axes; souffle.py lowers graphs to it and
souffle_codegen.py generates CPE kernels from it; docs/souffle.md).

Dependence classes: a node is One-Relies-on-One when every output element reads one element of
each input through an integer map v -> M·v + c (``IndexMap``), and One-Relies-on-Many when it
reduces (GEMM, Softmax, pooling, ...). ``lower`` returns the maps, or the reason there are
none (a Reshape's index map is not affine: it divides and takes remainders)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import GraphError, Node

ONE_TO_ONE, ONE_TO_MANY = "One-Relies-on-One", "One-Relies-on-Many"
ELEMENTWISE = ("Relu", "Sigmoid", "Tanh", "Identity", "Add", "Sub", "Mul", "Div")
REDUCING = ("MatMul", "Gemm", "Conv", "Softmax", "LogSoftmax", "MaxPool", "AveragePool",
            "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "LRN")
COMPUTE_THRESHOLD = 2.0     # flops per byte above which a TE is compute-bound (thesis §4.5)


@dataclass(frozen=True)
class IndexMap:
    """Output index v -> input index ``matrix @ v + offset`` (integers)."""
    matrix: np.ndarray          # input rank x output rank
    offset: np.ndarray          # input rank

    def __call__(self, index):
        return self.matrix @ np.asarray(index) + self.offset

    def then(self, inner: "IndexMap") -> "IndexMap":
        """This map followed by ``inner`` (the producer's map into its own input): eq. 4-1."""
        return IndexMap(inner.matrix @ self.matrix, inner.matrix @ self.offset + inner.offset)

    def strided(self, source_shape) -> tuple:
        """(element offset, element strides per output dimension) of the pattern in a
        C-contiguous source of ``source_shape``: one strided DMA descriptor."""
        strides = np.array([int(np.prod(source_shape[k + 1:])) for k in range(
            len(source_shape))], dtype=np.int64)
        return int(strides @ self.offset), tuple(int(s) for s in strides @ self.matrix)


def identity(shape) -> IndexMap:
    return IndexMap(np.eye(len(shape), dtype=np.int64), np.zeros(len(shape), np.int64))


def lower(node: Node, input_shapes: list, output_shape: tuple, constants=None):
    """(dependence class, per-input IndexMap or None) of ``node``, or (None, reason)."""
    constants = constants or {}
    rank = len(output_shape)
    if node.op_type in REDUCING:
        return ONE_TO_MANY, [None] * len(input_shapes)
    if node.op_type == "Transpose":
        perm = node.attr("perm") or list(range(rank))[::-1]
        matrix = np.zeros((rank, rank), np.int64)
        for out_axis, in_axis in enumerate(perm):
            matrix[in_axis, out_axis] = 1
        return ONE_TO_ONE, [IndexMap(matrix, np.zeros(rank, np.int64))]
    if node.op_type == "Slice":
        return _slice(node, input_shapes[0], constants)
    if node.op_type in ELEMENTWISE:
        return ONE_TO_ONE, [_broadcast(shape, output_shape) for shape in input_shapes]
    return None, f"{node.op_type} has no affine index map (a Reshape divides and takes " \
        f"remainders; other operators are not lowered yet)"


def _broadcast(shape, output_shape) -> IndexMap:
    """numpy broadcasting as a map: size-1 and missing dimensions read index 0."""
    rank, skip = len(output_shape), len(output_shape) - len(shape)
    matrix = np.zeros((len(shape), rank), np.int64)
    for k, size in enumerate(shape):
        if size != 1:
            matrix[k, skip + k] = 1
    return IndexMap(matrix, np.zeros(len(shape), np.int64))


def _slice(node, shape, constants):
    names = node.inputs[1:]
    values = [constants.get(n) if n else None for n in names] + [None] * (4 - len(names))
    starts, ends, axes, steps = values[:4]
    if starts is None or ends is None:
        return None, "Slice's starts and ends are not constants"
    axes = list(range(len(starts))) if axes is None else [int(a) % len(shape) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    if any(s < 1 for s in steps):
        return None, "a Slice with a negative step is not lowered"
    matrix = np.eye(len(shape), dtype=np.int64)
    offset = np.zeros(len(shape), np.int64)
    for axis, start, step in zip(axes, starts, steps):
        start = int(start)
        offset[axis] = min(max(start + shape[axis] if start < 0 else start, 0), shape[axis])
        matrix[axis, axis] = step
    return ONE_TO_ONE, [IndexMap(matrix, offset)]


def compose_chain(maps: list) -> IndexMap:
    """The map from the last node's output to the first node's input of a chain whose maps
    are listed consumer first (the vertical transformation)."""
    if not maps:
        raise GraphError("compose_chain needs at least one index map")
    result = maps[0]
    for inner in maps[1:]:
        result = result.then(inner)
    return result


def tag(flops: float, nbytes: float) -> str:
    """Souffle's compute/memory tag: compute-bound above ``COMPUTE_THRESHOLD`` flops/byte."""
    return "compute" if nbytes and flops / nbytes > COMPUTE_THRESHOLD else "memory"


# ---- the tensor-expression IR ---------------------------------------------------------------
# A TE is ``compute(shape, lambda *i: body)``: every output element is the body evaluated at its
# index. Indices are affine in the output axes and the reduce axes (``Affine``); the body is a
# tree of ``Const``, ``Read``, ``Binary``, ``Unary``; a reduction (``te_sum`` / ``te_max``)
# may only be the whole body (as in TVM), so a softmax is four TEs.

class Axis:
    """An iteration axis: an output axis of a TE or a reduce axis (``reduce_axis``)."""

    def __init__(self, name: str, extent: int, reduce: bool = False):
        self.name, self.extent, self.reduce = name, int(extent), reduce

    def __repr__(self):
        return self.name

    def _affine(self):
        return Affine({self: 1}, 0)

    def __add__(self, other):
        return self._affine() + other

    __radd__ = __add__

    def __sub__(self, other):
        return self._affine() - other

    def __mul__(self, other):
        return self._affine() * other

    __rmul__ = __mul__


class Affine:
    """sum(coef * axis) + const over integer coefficients."""

    def __init__(self, coefs: dict, const: int):
        self.coefs = {a: int(c) for a, c in coefs.items() if c}
        self.const = int(const)

    @staticmethod
    def of(value) -> "Affine":
        if isinstance(value, Affine):
            return value
        if isinstance(value, Axis):
            return value._affine()
        if isinstance(value, (int, np.integer)):
            return Affine({}, int(value))
        raise GraphError(f"a tensor index must be affine in the axes, got {value!r}")

    def __add__(self, other):
        other = Affine.of(other)
        coefs = dict(self.coefs)
        for axis, c in other.coefs.items():
            coefs[axis] = coefs.get(axis, 0) + c
        return Affine(coefs, self.const + other.const)

    __radd__ = __add__

    def __sub__(self, other):
        return self + Affine.of(other) * -1

    def __mul__(self, k):
        if not isinstance(k, (int, np.integer)):
            raise GraphError("an index is multiplied by integers only (it stays affine)")
        return Affine({a: c * int(k) for a, c in self.coefs.items()}, self.const * int(k))

    __rmul__ = __mul__

    def values(self, grid: dict):
        """The index at every point of ``grid`` (axis -> broadcastable arange)."""
        return sum((c * grid[a] for a, c in self.coefs.items()), np.int64(self.const))

    def __repr__(self):
        terms = [f"{c}*{a}" if c != 1 else repr(a) for a, c in self.coefs.items()]
        return " + ".join(terms + ([str(self.const)] if self.const or not terms else []))


class Expr:
    def __add__(self, o): return Binary("add", self, _expr(o))
    def __radd__(self, o): return Binary("add", _expr(o), self)
    def __sub__(self, o): return Binary("sub", self, _expr(o))
    def __rsub__(self, o): return Binary("sub", _expr(o), self)
    def __mul__(self, o): return Binary("mul", self, _expr(o))
    def __rmul__(self, o): return Binary("mul", _expr(o), self)
    def __truediv__(self, o): return Binary("div", self, _expr(o))
    def __rtruediv__(self, o): return Binary("div", _expr(o), self)
    def __neg__(self): return Binary("sub", Const(0.0), self)


def _expr(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (int, float, np.number)):
        return Const(float(value))
    raise GraphError(f"not a tensor expression: {value!r}")


@dataclass(eq=False)
class Const(Expr):
    value: float


@dataclass(eq=False)
class Read(Expr):
    """``tensor[index]``; ``view``: the shape the tensor's buffer is read as (a Reshape of a
    materialised tensor), None for its own shape; ``fill``: the value of an index outside the
    buffer (a padded read: a Conv's or a pool's pads), None when such an index is refused."""
    tensor: "Tensor"
    index: tuple
    view: tuple = None
    fill: float = None

    @property
    def shape(self) -> tuple:
        return self.view or self.tensor.shape


@dataclass(eq=False)
class Binary(Expr):
    op: str                 # add sub mul div max
    a: Expr
    b: Expr


@dataclass(eq=False)
class Unary(Expr):
    op: str                 # exp sqrt
    a: Expr


@dataclass(eq=False)
class Reduce:
    op: str                 # sum max
    body: Expr
    axes: tuple


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum}
UNARY = {"exp": np.exp, "sqrt": np.sqrt}
REDUCERS = {"sum": (np.sum, 0.0), "max": (np.max, -np.inf)}


def exp(x): return Unary("exp", _expr(x))
def sqrt(x): return Unary("sqrt", _expr(x))
def maximum(a, b): return Binary("max", _expr(a), _expr(b))


def reduce_axis(extent: int, name: str) -> Axis:
    return Axis(name, extent, reduce=True)


def te_sum(body, axes) -> Reduce:
    return Reduce("sum", _expr(body), tuple(axes))


def te_max(body, axes) -> Reduce:
    return Reduce("max", _expr(body), tuple(axes))


class Tensor:
    """A placeholder (``body`` None: a graph input or a constant) or a computed TE. ``origin``
    names the graph node it was lowered from (the report groups by it). ``into``: (whole,
    offsets) when the TE computes a part of ``whole`` starting at ``offsets`` (a Concat's
    input writes its slice of the concatenation; readers read ``whole``)."""

    def __init__(self, name, shape, axes=(), body=None, origin=None, into=None):
        self.name, self.shape, self.axes = name, tuple(int(n) for n in shape), tuple(axes)
        self.body, self.origin, self.into = body, origin or name, into

    def __getitem__(self, index):
        return self.read(index)

    def read(self, index, fill=None) -> Read:
        """``self[index]``; with ``fill`` an index outside the tensor reads ``fill``."""
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != len(self.shape):
            raise GraphError(f"{self.name} has rank {len(self.shape)}, indexed with "
                             f"{len(index)} indices")
        return Read(self, tuple(Affine.of(i) for i in index), fill=fill)

    @property
    def storage(self) -> str:
        """The name of the buffer the TE's output is written to."""
        return self.into[0].name if self.into else self.name

    def __repr__(self):
        return f"Tensor({self.name}, {list(self.shape)})"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def reduce_axes(self) -> tuple:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def expr(self) -> Expr:
        return self.body.body if isinstance(self.body, Reduce) else self.body


def placeholder(name: str, shape) -> Tensor:
    return Tensor(name, shape)


def compute(shape, fn, name: str, origin=None, into=None) -> Tensor:
    axes = tuple(Axis(f"{name}.i{k}", n) for k, n in enumerate(shape))
    body = fn(*axes)
    body = body if isinstance(body, Reduce) else _expr(body)
    return Tensor(name, shape, axes, body, origin, into)


def nodes(expr) -> list:
    """Every node of an expression tree, parents first."""
    out, todo = [], [expr]
    while todo:
        e = todo.pop()
        out.append(e)
        if isinstance(e, Binary):
            todo += [e.b, e.a]
        elif isinstance(e, Unary):
            todo.append(e.a)
    return out


def reads(t: Tensor) -> list:
    return [e for e in nodes(t.expr) if isinstance(e, Read)] if t.body is not None else []


def evaluate(tensors: list, feeds: dict) -> dict:
    """numpy evaluation of TEs in order (the test oracle); feeds: placeholder name -> array."""
    values = dict(feeds)
    for t in tensors:
        axes = t.axes + t.reduce_axes
        grid = {a: np.arange(a.extent).reshape([-1 if k == j else 1 for j in range(len(axes))])
                for k, a in enumerate(axes)}
        value = np.broadcast_to(_eval(t.expr, grid, values), [a.extent for a in axes])
        if t.reduce_axes:
            value = REDUCERS[t.body.op][0](value, axis=tuple(range(len(t.axes), len(axes))))
        values[t.name] = np.array(value, np.float64)
        if t.into:
            whole, offsets = t.into
            part = tuple(slice(o, o + n) for o, n in zip(offsets, t.shape))
            values.setdefault(whole.name, np.zeros(whole.shape))[part] = values[t.name]
    return values


def _inside(index: list, shape) -> np.ndarray:
    """Where every component of the broadcast ``index`` lies in ``shape``."""
    inside = np.bool_(True)
    for i, n in zip(index, shape):
        inside = inside & (i >= 0) & (i < n)
    return inside


def _eval(e, grid, values):
    if isinstance(e, Const):
        return np.float64(e.value)
    if isinstance(e, Read):
        source = values[e.tensor.name].reshape(e.shape)
        index = [np.asarray(i.values(grid)) for i in e.index]
        if e.fill is not None:
            inside = _inside(index, e.shape)
            clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(index, e.shape))
            return np.where(inside, source[clipped], e.fill)
        for k, i in enumerate(index):
            if i.size and (i.min() < 0 or i.max() >= e.shape[k]):
                raise GraphError(f"{e.tensor.name}: index {e.index[k]} leaves 0..{e.shape[k] - 1}")
        return source[tuple(index)]
    if isinstance(e, Binary):
        return BINARY[e.op](_eval(e.a, grid, values), _eval(e.b, grid, values))
    return UNARY[e.op](_eval(e.a, grid, values))


def read_map(t: Tensor, r: Read) -> IndexMap:
    """The read's IndexMap from (output axes, reduce axes) to the read buffer's index."""
    axes = t.axes + t.reduce_axes
    matrix = np.array([[i.coefs.get(a, 0) for a in axes] for i in r.index], np.int64)
    return IndexMap(matrix.reshape(len(r.index), len(axes)),
                    np.array([i.const for i in r.index], np.int64))


def dependence(t: Tensor, r: Read) -> str:
    """One-Relies-on-One when the read's index uses no reduce axis, else One-Relies-on-Many."""
    uses = set().union(*(i.coefs for i in r.index)) if r.index else set()
    return ONE_TO_MANY if uses & set(t.reduce_axes) else ONE_TO_ONE


def points(t: Tensor) -> int:
    return t.size * int(np.prod([a.extent for a in t.reduce_axes], dtype=np.int64))


def flops(t: Tensor) -> int:
    """Arithmetic operations (each Binary or Unary node and the reduction's combine: one each)
    over every (output, reduce) point."""
    ops = sum(isinstance(e, (Binary, Unary)) for e in nodes(t.expr)) + bool(t.reduce_axes)
    return ops * points(t)


def footprint(t: Tensor, r: Read) -> int:
    """Distinct elements the read touches (evaluated: TEs here are small)."""
    axes = t.axes + t.reduce_axes
    grid = {a: np.arange(a.extent).reshape([-1 if k == j else 1 for j in range(len(axes))])
            for k, a in enumerate(axes)}
    shape = [a.extent for a in axes]
    index = [np.broadcast_to(i.values(grid), shape) for i in r.index]
    inside = _inside(index, r.shape)          # a padded read's fill is not an element read
    flat = np.ravel_multi_index([i[inside] for i in index], r.shape) if r.index \
        else np.zeros(1, np.int64)
    return int(np.unique(flat).size)


def reuse_map(t: Tensor) -> dict:
    """Input name -> how many times each element read is used on average (points / distinct
    elements): the thesis' reuse map, which decides what is worth keeping on chip."""
    out = {}
    for r in reads(t):
        out[r.tensor.name] = max(out.get(r.tensor.name, 0.0), points(t) / footprint(t, r))
    return out


def te_tag(t: Tensor, itemsize: int = 8) -> str:
    """Compute/memory tag of a TE: its flops over the bytes of its output and distinct inputs."""
    inputs = {r.tensor.name: footprint(t, r) for r in reads(t)}
    return tag(flops(t), itemsize * (t.size + sum(inputs.values())))
