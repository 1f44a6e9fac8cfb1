"""Souffle's element-level dependences (hostlib/graph/te.py): Transpose / Slice / broadcast
chains composed into one strided pattern of their source, checked against numpy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.hostlib.graph import te
from swsim.hostlib.graph.ir import GraphError, Node


@st.composite
def chains(draw):
    source = shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            steps.append(("Transpose", draw(st.permutations(range(len(shape))))))
        else:
            axis = draw(st.integers(0, len(shape) - 1))
            start = draw(st.integers(0, shape[axis] - 1))
            end = draw(st.integers(start + 1, shape[axis]))
            steps.append(("Slice", (axis, start, end, draw(st.integers(1, 3)))))
        shape = _apply(np.zeros(shape), steps[-1]).shape
    return source, steps


def _apply(x, step):
    kind, how = step
    if kind == "Transpose":
        return np.transpose(x, how)
    axis, start, end, stride = how
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, end, stride)
    return x[tuple(index)]


def _node(step):
    kind, how = step
    if kind == "Transpose":
        return Node("t", "Transpose", ["x"], ["y"], {"perm": list(how)}), {}
    axis, start, end, stride = how
    constants = {"s": np.array([start]), "e": np.array([end]), "a": np.array([axis]),
                 "k": np.array([stride])}
    return Node("s", "Slice", ["x", "s", "e", "a", "k"], ["y"]), constants


@settings(max_examples=60, deadline=None)
@given(chains())
def test_a_transpose_slice_chain_is_one_strided_pattern_of_its_source(chain):
    shape, steps = chain
    source = np.random.default_rng(0).standard_normal(shape)
    maps, x = [], source
    for step in steps:
        node, constants = _node(step)
        y = _apply(x, step)
        kind, per_input = te.lower(node, [x.shape], y.shape, constants)
        assert kind == te.ONE_TO_ONE
        maps.insert(0, per_input[0])           # consumer first
        x = y
    composed = te.compose_chain(maps)
    offset, strides = composed.strided(source.shape)
    flat = source.reshape(-1)
    gathered = np.array([flat[offset + int(np.dot(strides, v))] for v in np.ndindex(x.shape)])
    np.testing.assert_array_equal(gathered.reshape(x.shape), x)


def test_broadcast_reduce_and_reshape():
    add = Node("a", "Add", ["x", "b"], ["y"])
    kind, (mx, mb) = te.lower(add, [(2, 3, 4), (3, 1)], (2, 3, 4))
    assert kind == te.ONE_TO_ONE
    assert list(mb((1, 2, 3))) == [2, 0] and list(mx((1, 2, 3))) == [1, 2, 3]
    assert te.lower(Node("g", "MatMul", ["a", "b"], ["y"]), [(2, 3), (3, 4)], (2, 4)) == \
        (te.ONE_TO_MANY, [None, None])
    kind, reason = te.lower(Node("r", "Reshape", ["x", "s"], ["y"]), [(2, 6)], (3, 4))
    assert kind is None and "Reshape" in reason
    assert te.tag(flops=2 * 64 ** 3, nbytes=3 * 64 * 64 * 4) == "compute"
    assert te.tag(flops=64 * 64, nbytes=2 * 64 * 64 * 4) == "memory"
    with pytest.raises(GraphError):
        te.compose_chain([])
