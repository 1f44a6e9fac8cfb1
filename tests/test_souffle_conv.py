"""Souffle's Conv lowering (hostlib/graph/souffle.py, docs/souffle.md "Convolution blocks"):
padded reads in the TE IR, Conv / depthwise Conv / MaxPool / Concat as TEs against the graph
engine's numpy operators, and the Inception-like and MobileNet-like blocks fused into one
generated kernel on the VM."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from swsim.hostlib.graph import souffle, te
from swsim.hostlib.graph import souffle_codegen as codegen
from swsim.hostlib.graph.ir import Graph, GraphError, Node, TensorInfo
from swsim.hostlib.tools.bench.souffle import BLOCKS, graph_numpy
from swsim.vm.machine import Machine


def test_padded_read_reads_its_fill_outside_and_counts_only_inside():
    a = te.placeholder("a", (4,))
    shifted = te.compute((4,), lambda i: a.read((i + 1,), fill=-1.0), "s")
    out = te.evaluate([shifted], {"a": np.arange(4.0)})["s"]
    np.testing.assert_array_equal(out, [1, 2, 3, -1])
    assert te.footprint(shifted, te.reads(shifted)[0]) == 3


def _conv_graph(channels, size, kernel, stride, pad, group, bias):
    rng = np.random.default_rng(3)
    cout = channels if group > 1 else channels + 2
    inits = {"w": rng.standard_normal((cout, channels // group, kernel, kernel)).astype(
        np.float32)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(cout).astype(np.float32)
        inputs.append("b")
    node = Node("conv", "Conv", inputs, ["c"], {"group": group, "strides": [stride] * 2,
                                                "pads": [pad] * 4})
    pool = Node("pool", "MaxPool", ["c"], ["y"], {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]})
    return Graph("conv_pool", [node, pool], {"x": TensorInfo(np.dtype(np.float32), (1, channels, size, size))},
                 ["y"], inits)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(channels=st.sampled_from([2, 4]), size=st.sampled_from([4, 6]),
       kernel=st.sampled_from([1, 3]), stride=st.sampled_from([1, 2]),
       pad=st.sampled_from([0, 1]), depthwise=st.booleans(), bias=st.booleans())
def test_random_conv_pool_fused_equals_numpy(channels, size, kernel, stride, pad, depthwise,
                                             bias):
    """Random Conv (stride, pad, depthwise, bias) -> padded MaxPool chains: the TE program
    equals the graph engine's numpy operators, and the fused kernel equals the TE program."""
    graph = _conv_graph(channels, size, kernel, stride, pad, channels if depthwise else 1, bias)
    x = np.random.default_rng(4).standard_normal((1, channels, size, size))
    program = souffle.horizontal(souffle.vertical(souffle.lower(graph)))
    want = program.evaluate({"x": x})["y"]
    np.testing.assert_allclose(want, graph_numpy(graph, {"x": x})["y"], rtol=1e-12, atol=1e-12)
    machine = Machine()
    launches = codegen.plan(program, machine.config, fused=True)
    outputs, _ = codegen.run(program, launches, machine, {"x": x})
    assert len(launches) == 1
    np.testing.assert_allclose(outputs["y"], want, rtol=1e-12, atol=1e-12)


def test_grouped_conv_is_refused_with_its_reason():
    graph = _conv_graph(4, 4, 3, 1, 1, 2, False)
    with pytest.raises(GraphError, match="group 1 or depthwise"):
        souffle.lower(graph)


@pytest.fixture(scope="module")
def blocks():
    """Per block: (graph, x, program after both passes, fused launches, apart launches)."""
    out = {}
    for name, make in BLOCKS.items():
        graph = make(4, 4)
        x = np.random.default_rng(6).standard_normal(graph.inputs["x"].shape)
        program = souffle.horizontal(souffle.vertical(souffle.lower(graph)))
        config = Machine().config
        out[name] = (graph, x, program, codegen.plan(program, config, fused=True),
                     codegen.plan(program, config, fused=False))
    return out


@pytest.mark.parametrize("name", list(BLOCKS))
def test_conv_block_in_one_launch_matches_numpy(blocks, name):
    graph, x, program, launches, apart = blocks[name]
    assert len(launches) == 1 and len(apart) == len(program.tensors) > 4
    machine = Machine()
    outputs, stats = codegen.run(program, launches, machine, {"x": x})
    ref = graph_numpy(graph, {"x": x})["y"]
    assert np.abs(outputs["y"] - ref).max() <= 1e-12 * np.abs(ref).max()
    _, apart_stats = codegen.run(program, apart, Machine(), {"x": x})
    assert stats[0].cycles < sum(s.cycles for s in apart_stats)
    assert stats[0].dma_bytes < sum(s.dma_bytes for s in apart_stats)
    steps = {s.tensor.name: s for s in launches[0].steps}
    if name == "inception":
        # the 1x1 reductions of two branches merged; each branch writes its slice of y in
        # place from its Conv's tile in LDM; padded reads fill their boxes
        assert "hcat(b2a,b3a)" in steps
        assert all(any(p.local for p in steps[f"y.part{k}"].reads) for k in range(4))
        assert any(p.fill for p in steps["pool"].reads)
    else:
        assert "depthwise_r" in steps and "y" in steps


def test_padded_conv_same_bits_and_cycles_on_both_engines():
    """A depthwise Conv with pads and a bias, then a padded MaxPool (fills 0 and -inf)."""
    graph = _conv_graph(2, 4, 3, 1, 1, 2, True)
    program = souffle.horizontal(souffle.vertical(souffle.lower(graph)))
    x = np.random.default_rng(7).standard_normal((1, 2, 4, 4))
    launches = codegen.plan(program, Machine().config, fused=True)
    assert {p.read.fill for s in launches[0].steps for p in s.reads if p.fill} == {0.0, -np.inf}
    runs = [codegen.run(program, launches, Machine(), {"x": x}, engine=engine)
            for engine in ("c", "python")]
    (out_c, stats_c), (out_py, stats_py) = runs
    assert out_c["y"].tobytes() == out_py["y"].tobytes()
    assert [s.cycles for s in stats_c] == [s.cycles for s in stats_py]


def test_independent_tes_run_at_once_on_sub_meshes():
    """Two MatMuls that read none of each other (not merged: no horizontal pass) run in one
    group on disjoint parts of the mesh (no barrier between them); both engines give the same
    bits and cycles, equal to the TE program."""
    rng = np.random.default_rng(8)
    inits = {"w1": rng.standard_normal((4, 4)).astype(np.float32),
             "w2": rng.standard_normal((4, 4)).astype(np.float32)}
    nodes = [Node("m1", "MatMul", ["x", "w1"], ["a"]), Node("m2", "MatMul", ["x", "w2"], ["b"]),
             Node("add", "Add", ["a", "b"], ["y"])]
    graph = Graph("pair", nodes, {"x": TensorInfo(np.dtype(np.float32), (4, 4))}, ["y"], inits)
    program = souffle.lower(graph)
    x = rng.standard_normal((4, 4))
    config = Machine().config
    for how in ("even", "work"):
        launches = codegen.plan(program, config, submeshes=how)
        m1, m2 = launches[0].steps[:2]
        assert m1.group == m2.group is not None and not m2.barrier
        assert m1.first + int(np.prod(m1.grid)) <= m2.first
    runs = [codegen.run(program, launches, Machine(), {"x": x}, engine=engine)
            for engine in ("c", "python")]
    (out_c, stats_c), (out_py, stats_py) = runs
    assert out_c["y"].tobytes() == out_py["y"].tobytes()
    assert [s.cycles for s in stats_c] == [s.cycles for s in stats_py]
    np.testing.assert_allclose(out_c["y"], program.evaluate({"x": x})["y"], rtol=1e-12)
    with pytest.raises(codegen.GeneratorError, match="submeshes"):
        codegen.plan(program, config, submeshes="rows")
