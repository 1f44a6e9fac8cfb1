"""The dataflow estimate of swFLOWpro's two-level parallelism: node states, FIFO queues dealt
round robin, the successor-first locality rule, and split copies (docs/graph.md)."""
import numpy as np
import pytest

from swsim.hostlib.graph import Graph, GraphError, Node, TensorInfo
from swsim.hostlib.graph.dataflow import replicate, schedule


def chain_graph(*names, branches=()):
    """a -> b -> ... (each Relu), plus `branches`: (name, source) nodes reading `source`."""
    nodes, previous = [], "x"
    for name in names:
        nodes.append(Node(name, "Relu", [previous], [name]))
        previous = name
    nodes += [Node(name, "Relu", [source], [name]) for name, source in branches]
    outputs = [previous] + [name for name, _ in branches]
    return Graph("g", nodes, {"x": TensorInfo(np.dtype(np.float32), (4,))}, outputs)


def test_a_chain_gains_nothing_from_more_core_groups():
    g = chain_graph("a", "b", "c")
    cycles = {"a": 10, "b": 20, "c": 30}
    assert schedule(g, cycles, 1).makespan == 60
    s = schedule(g, cycles, 4)
    assert s.makespan == 60
    assert {cg for cg, _, _ in s.placed.values()} == {0}     # successor-first: one CG


def test_a_fork_runs_its_branches_side_by_side():
    # a -> b, and c, d read a: after a, b follows on a's CG, c and d on the others
    g = chain_graph("a", "b", branches=[("c", "a"), ("d", "a")])
    cycles = {"a": 10, "b": 50, "c": 50, "d": 50}
    one, three = schedule(g, cycles, 1), schedule(g, cycles, 3)
    assert one.makespan == 160 and three.makespan == 60
    assert three.placed["a"][0] == three.placed["b"][0]
    assert sorted(three.busy) == [50, 50, 60]


def test_split_copies_fill_the_core_groups():
    g = chain_graph("a", "b", "c")
    copies = replicate(g, 4)
    assert len(copies.nodes) == 12 and copies.outputs == ["c@0", "c@1", "c@2", "c@3"]
    cycles = {"a": 10, "b": 20, "c": 30}
    s = schedule(copies, cycles, 4)
    assert s.makespan == 60                                  # 4 x 60 cycles on 4 CGs
    for i in range(4):                                       # each copy stays on one CG
        assert len({s.placed[f"{n}@{i}"][0] for n in "abc"}) == 1
    assert schedule(copies, cycles, 2).makespan == 120


def test_bad_arguments():
    g = chain_graph("a")
    with pytest.raises(GraphError, match="no measured cycles"):
        schedule(g, {}, 2)
    with pytest.raises(GraphError, match="cgs must be"):
        schedule(g, {"a": 1}, 0)
    with pytest.raises(GraphError, match="copies must be"):
        replicate(g, 0)
