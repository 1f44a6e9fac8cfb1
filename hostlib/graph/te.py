"""The start of Souffle's tensor-expression analysis (Xia's thesis §4.3–4.5, digest
../shared/reference/thesis-xia-dnntune-souffle-gdpnpu.md §2; docs/hope.md "Souffle"): graph
nodes lowered to element-level dependences, and the vertical transformation's index-map
composition (eq. 4-1), which turns a Transpose / Slice / broadcast chain into one strided
access pattern of its source. No fused kernel is generated from it yet.

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
