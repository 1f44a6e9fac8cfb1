"""Souffle (hostlib/graph/te.py, souffle.py, souffle_codegen.py; docs/souffle.md): the TE IR
against numpy, the passes and their reasons, and generated fused kernels on the VM against
the unfused TE program on random inputs."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from swsim.hostlib.graph import souffle, te
from swsim.hostlib.graph import souffle_codegen as codegen
from swsim.hostlib.graph.ir import Graph, Node, TensorInfo
from swsim.cli import main
from swsim.hostlib.graph import import_onnx
from swsim.hostlib.tools.bench.souffle import (weight_bytes, bert_block, bert_model,
                                               bert_numpy, lstm_model)
from swsim.vm.machine import Machine


def test_te_ir_gemm_softmax_against_numpy():
    rng = np.random.default_rng(0)
    a, b = te.placeholder("a", (6, 5)), te.placeholder("b", (5, 4))
    k = te.reduce_axis(5, "k")
    c = te.compute((6, 4), lambda i, j: te.te_sum(a[i, k] * b[k, j], [k]), "c")
    r = te.reduce_axis(4, "r")
    m = te.compute((6, 1), lambda i, _: te.te_max(c[i, r], [r]), "m")
    e = te.compute((6, 4), lambda i, j: te.exp(c[i, j] - m[i, 0]), "e")
    av, bv = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    out = te.evaluate([c, m, e], {"a": av, "b": bv})
    ref = av @ bv
    np.testing.assert_allclose(out["c"], ref, rtol=1e-13)
    np.testing.assert_allclose(out["e"], np.exp(ref - ref.max(1, keepdims=True)), rtol=1e-13)
    read_a, read_b = te.reads(c)
    assert te.dependence(c, read_a) == te.ONE_TO_MANY
    # a[i, k] over (i, j, k): rows (i), (k) of the matrix
    np.testing.assert_array_equal(te.read_map(c, read_a).matrix, [[1, 0, 0], [0, 0, 1]])
    assert te.dependence(e, te.reads(e)[0]) == te.ONE_TO_ONE
    # each a element is used by the 4 columns, each b element by the 6 rows
    assert te.reuse_map(c) == {"a": 4.0, "b": 6.0}
    big = te.placeholder("x", (64, 64))
    kk = te.reduce_axis(64, "kk")
    gemm = te.compute((64, 64), lambda i, j: te.te_sum(big[i, kk] * big[kk, j], [kk]), "g")
    add = te.compute((64, 64), lambda i, j: big[i, j] + big[j, i], "s")
    assert te.te_tag(gemm) == "compute" and te.te_tag(add) == "memory"


def test_te_index_out_of_bounds_is_refused():
    a = te.placeholder("a", (4,))
    shifted = te.compute((4,), lambda i: a[i + 1], "s")
    with pytest.raises(te.GraphError, match="leaves 0..3"):
        te.evaluate([shifted], {"a": np.zeros(4)})


def test_lowering_and_passes_match_numpy_and_explain():
    graph = bert_block(16, 32, 2)
    x = np.random.default_rng(3).standard_normal((16, 32))
    ref = bert_numpy(graph, x)
    program = souffle.lower(graph)
    np.testing.assert_allclose(program.evaluate({"x": x})["y"], ref, rtol=1e-12, atol=1e-12)
    vertical = souffle.vertical(program)
    both = souffle.horizontal(vertical)
    assert len(program.tensors) - len(vertical.tensors) == 7    # 3 splits, 3 heads, merged
    assert len(vertical.tensors) - len(both.tensors) == 2       # q, k, v -> one TE
    np.testing.assert_allclose(both.evaluate({"x": x})["y"], ref, rtol=1e-12, atol=1e-12)
    text = souffle.explain(both)
    assert "merging Reshape [16, 2, 16] -> [16, 32]" in text      # context_t stays
    assert "horizontal applied      q, k, v" in text


def test_pass_that_cannot_apply_leaves_the_program_unchanged():
    graph = Graph("g", [Node("mm", "MatMul", ["x", "w"], ["y"])],
                  {"x": TensorInfo(np.dtype(np.float32), (4, 8))}, ["y"],
                  {"w": np.ones((8, 4), np.float32)})
    program = souffle.lower(graph)
    for name in ("vertical", "horizontal"):
        after = souffle.PASSES[name](program)
        assert [t.name for t in after.tensors] == [t.name for t in program.tensors]
        assert all(a is b for a, b in zip(after.tensors, program.tensors))
    assert "y: a graph output" in souffle.explain(souffle.vertical(program))


def test_unsupported_node_says_why():
    graph = Graph("g", [Node("g", "Gelu", ["x"], ["y"])],
                  {"x": TensorInfo(np.dtype(np.float32), (4, 8))}, ["y"])
    with pytest.raises(te.GraphError, match=r"Gelu\(approximate='tanh'\) only"):
        souffle.lower(graph)


def _chain(rows, k, n, tail):
    """x (rows, k) -> MatMul w (k, n) -> tail, as a graph."""
    rng = np.random.default_rng(rows * 100 + k * 10 + n)
    nodes = [Node("mm", "MatMul", ["x", "w"], ["h"])]
    inits = {"w": rng.standard_normal((k, n)).astype(np.float32)}
    if tail == "Softmax":
        nodes.append(Node("t", "Softmax", ["h"], ["y"], {"axis": -1}, 13))
    elif tail == "LayerNormalization":
        inits["g"] = rng.standard_normal(n).astype(np.float32)
        nodes.append(Node("t", "LayerNormalization", ["h", "g"], ["y"], {"axis": -1}, 17))
    elif tail == "Gelu":
        nodes.append(Node("t", "Gelu", ["h"], ["y"], {"approximate": "tanh"}, 20))
    else:                   # Transpose then a second MatMul reading it
        inits["w2"] = rng.standard_normal((rows, 4)).astype(np.float32)
        nodes += [Node("t", "Transpose", ["h"], ["ht"], {"perm": [1, 0]}),
                  Node("m2", "MatMul", ["ht", "w2"], ["y"])]
    return Graph("chain", nodes, {"x": TensorInfo(np.dtype(np.float32), (rows, k))}, ["y"], inits)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.sampled_from([4, 8, 16]), k=st.sampled_from([4, 8, 16]),
       n=st.sampled_from([8, 16, 32]),
       tail=st.sampled_from(["Softmax", "LayerNormalization", "Gelu", "Transpose"]),
       seed=st.integers(0, 2 ** 16), overlap=st.booleans())
def test_fused_kernel_equals_unfused_program(rows, k, n, tail, seed, overlap):
    program = souffle.lower(_chain(rows, k, n, tail))
    x = np.random.default_rng(seed).standard_normal((rows, k))
    unfused = program.evaluate({"x": x})["y"]
    fused = souffle.horizontal(souffle.vertical(program))
    machine = Machine()
    launches = codegen.plan(fused, machine.config, fused=True, overlap=overlap)
    assert len(launches) == 1
    outputs, stats = codegen.run(fused, launches, machine, {"x": x})
    np.testing.assert_allclose(outputs["y"], unfused, rtol=1e-12, atol=1e-12)
    assert stats[0].cycles > 0 and stats[0].ldm_peak <= machine.config.ldm_bytes


@pytest.mark.parametrize("tail", ["Softmax", "Transpose"])   # exp and max; a barrier
def test_generated_kernel_same_bits_and_cycles_on_both_engines(tail):
    program = souffle.horizontal(souffle.vertical(souffle.lower(_chain(4, 4, 8, tail))))
    x = np.random.default_rng(0).standard_normal((4, 4))
    runs = []
    for engine in ("c", "python"):
        machine = Machine()
        launches = codegen.plan(program, machine.config, fused=True)
        runs.append(codegen.run(program, launches, machine, {"x": x}, engine=engine))
    (out_c, stats_c), (out_py, stats_py) = runs
    assert any(p.bcast for step in launches[0].steps for p in step.reads)   # the weight
    if tail == "Transpose":
        assert any(step.barrier for step in launches[0].steps)
    assert out_c["y"].tobytes() == out_py["y"].tobytes()
    assert [s.cycles for s in stats_c] == [s.cycles for s in stats_py]


def test_broadcast_fetches_a_shared_box_once():
    """The weight every CPE of a step reads is one BCAST get (here to all 8 rows): fewer DMA
    bytes, the same bits."""
    program = souffle.horizontal(souffle.vertical(souffle.lower(_chain(64, 8, 16, "Softmax"))))
    x = np.random.default_rng(1).standard_normal((64, 8))
    runs = {}
    for broadcast in (False, True):
        machine = Machine()
        launches = codegen.plan(program, machine.config, broadcast=broadcast)
        assert any(s.bcast_rows == 0xff for s in launches[0].steps) == broadcast
        runs[broadcast] = codegen.run(program, launches, machine, {"x": x})
    assert runs[True][0]["y"].tobytes() == runs[False][0]["y"].tobytes()
    assert runs[True][1][0].dma_bytes < runs[False][1][0].dma_bytes


@pytest.mark.parametrize("ldm_bytes", [65536, 12288])
def test_fused_bert_block_one_launch_matches_numpy(ldm_bytes):
    """With 12 KiB of LDM the FIFO manager evicts tiles, and readers fetch them again."""
    graph = bert_block(16, 32, 2)
    x = np.random.default_rng(5).standard_normal((16, 32))
    program = souffle.horizontal(souffle.vertical(souffle.lower(graph)))
    machine = Machine(ldm_bytes=ldm_bytes)
    launches = codegen.plan(program, machine.config, fused=True)
    steps = launches[0].steps
    assert len(launches) == 1 and len(steps) == len(program.tensors)
    # the softmax's and layernorms' reductions read their producers' tiles in LDM
    assert {"probs.sum", "ln1.var", "y.var"} <= {s.tensor.name for s in steps
                                                 if any(p.local for p in s.reads)}
    outputs, stats = codegen.run(program, launches, machine, {"x": x})
    ref = bert_numpy(graph, x)
    assert np.abs(outputs["y"] - ref).max() <= 1e-12 * np.abs(ref).max()
    assert stats[0].ldm_peak <= ldm_bytes
    # the small LDM refetches tiles that the full LDM keeps
    full = codegen.plan(program, Machine().config, fused=True)
    assert (ldm_bytes == 65536) == (_refetches(launches) == _refetches(full))


def _refetches(launches) -> int:
    """Reads from memory of a tensor computed earlier in the same launch."""
    count = 0
    for launch in launches:
        done = set()
        for step in launch.steps:
            count += sum(not p.local and p.read.tensor.name in done for p in step.reads)
            done.add(step.tensor.name)
    return count


def test_onnx_command_souffle(tmp_path, capsys):
    model = tmp_path / "bert.onnx"
    model.write_bytes(bert_model(16, 32, 2).SerializeToString())
    assert main(["onnx", str(model), "--souffle", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "horizontal applied      q, k, v" in out and "merging Reshape" in out
    assert main(["onnx", str(model), "--souffle"]) == 0
    out = capsys.readouterr().out
    assert "output y: float64 [16, 32]" in out and "hcat(q,k,v) .. y" in out
    assert main(["onnx", str(model), "--souffle", "--cgs", "2"]) == 1
    assert "--souffle runs the fused kernels on one core group" in capsys.readouterr().err


def test_lstm_in_one_launch_fetches_its_weights_fewer_times():
    """2 layers, 3 steps: the gates merged (also across layers), one launch, the weights'
    boxes kept in LDM across steps, and the result equal to the unfused program."""
    graph = import_onnx(lstm_model(hidden=8, steps=3, batch=4, layers=2))
    program = souffle.lower(graph)
    rng = np.random.default_rng(2)
    feeds = {name: rng.standard_normal(info.shape) for name, info in graph.inputs.items()}
    want = program.evaluate(feeds)[graph.outputs[0]]
    fused = souffle.horizontal(souffle.vertical(program))
    assert any(t.name.startswith("hcat(l0t1hu0") and "l1t0xw0" in t.name for t in fused.tensors)
    machine = Machine()
    launches = codegen.plan(fused, machine.config, fused=True)
    apart = codegen.plan(fused, machine.config, fused=False)
    assert len(launches) == 1 and len(apart) == len(fused.tensors)
    # at most 2/3 of the weight bytes over 3 steps (the FIFO manager evicts some boxes: 1.98x
    # fewer on the default DMA model, whose per-block costs shape the grid)
    assert 3 * weight_bytes(fused, launches) < 2 * weight_bytes(fused, apart)
    outputs, _ = codegen.run(fused, launches, machine, feeds)
    np.testing.assert_allclose(outputs[graph.outputs[0]], want, rtol=1e-12, atol=1e-12)
    # the cell recurrence stays in LDM: every c_t+1 reads c_t from the same CPE's tile
    steps = {s.tensor.name: s for s in launches[0].steps}
    for layer in range(2):          # (the last step's c is inlined into its one reader)
        cell = steps[f"l{layer}t1c"].reads
        assert [p.local for p in cell if p.read.tensor.name == f"l{layer}t0c"] == [True]


def test_vertical_does_not_inline_the_cell_recurrence():
    """c_t has two readers (tanh(c_t) and c_t+1): it stays a TE with its reason, so no TE's
    reads grow with the steps (inlined, c_t's chain back to c_0 was recomputed by every step:
    the full bench LSTM's last tanh read 25 tensors and needed a second launch)."""
    def widest(steps):
        program = souffle.vertical(souffle.lower(import_onnx(lstm_model(8, steps, 2, 1))))
        return program, max(len({r.tensor.name for r in te.reads(t)}) for t in program.tensors)
    (_, two), (program, four) = widest(2), widest(4)
    assert four == two
    why = {name: reason for stage, name, applied, reason in program.notes if not applied}
    assert why["l0t1c"].startswith("2 TEs read it (l0t1tc.exp, l0t2c)")


def test_overlap_gets_the_next_steps_boxes_while_computing():
    """plan(overlap=True): the weights of the second and the last MatMul (the last behind a
    barrier: it reads the sum) are got while the step before computes; same bits as without,
    and on both engines the same bits and cycles."""
    rng = np.random.default_rng(9)
    inits = {n: rng.standard_normal((4, 4)).astype(np.float32) for n in ("w1", "w2", "w3")}
    nodes = [Node("m1", "MatMul", ["x", "w1"], ["a"]), Node("m2", "MatMul", ["x", "w2"], ["b"]),
             Node("add", "Add", ["a", "b"], ["s"]), Node("m3", "MatMul", ["w3", "s"], ["y"])]
    graph = Graph("pair", nodes, {"x": TensorInfo(np.dtype(np.float32), (4, 4))}, ["y"], inits)
    program, x = souffle.lower(graph), rng.standard_normal((4, 4))
    config = Machine().config
    plain = codegen.plan(program, config, broadcast=False)
    launches = codegen.plan(program, config, broadcast=False, overlap=True)
    steps = launches[0].steps
    assert [bool(s.prefetched) for s in steps] == [False, True, False, True] and steps[3].barrier
    assert [p.read.tensor.name for p in steps[3].reads if p.early] == ["w3"]
    runs = [codegen.run(program, launches, Machine(), {"x": x}, engine=engine)
            for engine in ("c", "python")]
    (out_c, stats_c), (out_py, stats_py) = runs
    assert out_c["y"].tobytes() == out_py["y"].tobytes()
    assert [s.cycles for s in stats_c] == [s.cycles for s in stats_py]
    assert out_c["y"].tobytes() == codegen.run(program, plain, Machine(), {"x": x})[0]["y"].tobytes()
