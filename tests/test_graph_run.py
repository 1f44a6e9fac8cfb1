"""Running imported ONNX graphs through swHMAE's dispatch, against onnxruntime (rtol 1e-3):
CPE operators where suitable, the MPE path timed by its cost model otherwise, the debug check,
the per-node report, bad feeds (docs/graph.md)."""
import numpy as np
import onnxruntime
import pytest
from onnx import helper, numpy_helper

from swsim.hostlib.graph import GraphError, Session, import_onnx
from swsim.hostlib.graph import cpe, dispatch
from swsim.vm import Machine

from graph_models import convnet, model, resblock, tensor

RTOL = 1e-3


def reference(m, feeds):
    session = onnxruntime.InferenceSession(m.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run(m, feeds, **options):
    session = Session(import_onnx(m), check=True, minimum_work=False, **options)
    outputs = session.run(feeds)
    for got, want in zip(outputs.values(), reference(m, feeds)):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * np.abs(want).max())
    return session


def records(session):
    return {r.node: r for r in session.records}


def feed(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_convnet_matches_onnxruntime_with_every_heavy_node_on_the_cpes():
    session = run(convnet(), {"x": feed(2, 3, 8, 8)})
    r = records(session)
    assert {name: r[name].device for name in r} == {   # the layout pass's transforms too
        "layout x NCHW>CNHW": "CPE", "conv": "CPE", "relu": "CPE", "pool": "CPE",
        "layout p CNHW>NCHW": "CPE", "flat": "view", "fc": "CPE", "softmax": "MPE"}
    assert r["softmax"].reason == "no CPE operator"
    assert all(r[n].cycles > 0 and r[n].dma_bytes > 0 for n in ("conv", "relu", "pool", "fc"))
    assert session.cycles == sum(x.cycles for x in session.records)
    table = session.report()
    assert "swGEMM (linear)" in table and "share" in table and "MPE" in table


@pytest.mark.parametrize("opset", [9, 13])
def test_resblock_with_batchnorm_and_residual_add(opset):
    session = run(resblock(opset=opset), {"x": feed(2, 8, 8, 8)})
    assert all(r.device in ("CPE", "view") for r in session.records)


def test_cgs_give_the_same_result():
    x = {"x": feed(4, 3, 8, 8)}
    one = Session(import_onnx(convnet(batch=4)), minimum_work=False).run(x)["y"]
    two = Session(import_onnx(convnet(batch=4)), minimum_work=False, cgs=2).run(x)["y"]
    np.testing.assert_allclose(one, two, rtol=RTOL, atol=1e-6)


def test_operators_mapped_with_broadcasts_transposes_and_padding():
    rng = np.random.default_rng(3)
    h = helper
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[0, 1, 2, 1], strides=[1, 2],
                         name="asym"),
             h.make_node("Conv", ["c", "wg"], ["g"], group=2, pads=[1, 1, 1, 1], name="grouped"),
             h.make_node("Add", ["g", "bias"], ["a"], name="bias_add"),
             h.make_node("Mul", ["a", "two"], ["m"], name="times2"),
             h.make_node("Div", ["m", "four"], ["d"], name="by4"),
             h.make_node("Sub", ["d", "a"], ["s"], name="minus"),
             h.make_node("Sigmoid", ["s"], ["sg"], name="sigmoid"),
             h.make_node("Tanh", ["sg"], ["t"], name="tanh"),
             h.make_node("AveragePool", ["t"], ["q"], kernel_shape=[2, 2], strides=[2, 2],
                         name="avg"),
             h.make_node("MaxPool", ["q"], ["p"], kernel_shape=[2, 2], pads=[0, 0, 1, 1],
                         strides=[1, 1], name="max_asym"),
             h.make_node("Transpose", ["p"], ["nhwc"], perm=[0, 2, 3, 1], name="to_nhwc"),
             h.make_node("Flatten", ["nhwc"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "fw", "fb"], ["y"], transA=0, transB=0, alpha=0.5,
                         beta=2.0, name="gemm"),
             h.make_node("MatMul", ["y", "mw"], ["z"], name="matmul")]
    inits = [tensor(rng, "w", 4, 3, 3, 3), tensor(rng, "wg", 4, 2, 3, 3),
             tensor(rng, "bias", 4, 1, 1), tensor(rng, "fw", 24, 5), tensor(rng, "fb", 5),
             tensor(rng, "mw", 5, 3)]
    inits += [h.make_tensor("two", 1, [], [2.0]), h.make_tensor("four", 1, [1], [4.0])]
    m = model(nodes, [("x", [2, 3, 7, 8])], [("z", [2, 3])], inits)
    session = run(m, {"x": feed(2, 3, 7, 8)})
    r = records(session)
    assert all(r[n].device == "CPE" for n in r if n != "flat"), session.report()
    assert r["grouped"].algorithm.endswith("x2 groups")
    assert r["to_nhwc"].algorithm == "transform NCHW->NHWC"
    assert r["bias_add"].algorithm == "add (broadcast operand)"


def test_mpe_fallbacks_are_timed_by_the_cost_model():
    h = helper
    nodes = [h.make_node("LRN", ["x"], ["l"], size=3, name="lrn"),
             h.make_node("Softmax", ["l"], ["k"], axis=1, name="softmax"),
             h.make_node("MaxPool", ["k"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                         ceil_mode=1, name="ceil"),
             h.make_node("Conv", ["p", "w"], ["c"], dilations=[2, 2], name="dilated"),
             h.make_node("Concat", ["c", "c"], ["cc"], axis=1, name="concat"),
             h.make_node("LogSoftmax", ["cc"], ["y"], axis=1, name="logsoftmax")]
    rng = np.random.default_rng(4)
    m = model(nodes, [("x", [1, 4, 10, 10])], [("y", [1, 4, 3, 3])],
              [tensor(rng, "w", 2, 4, 2, 2)])
    session = run(m, {"x": feed(1, 4, 10, 10)})
    r = records(session)
    assert {x.node for x in session.records if x.device == "CPE"} == {"concat", "ceil"}
    assert r["concat"].algorithm == "copy passes (transform)"
    assert "dilations" in r["dilated"].reason
    config = session.machine.config
    flops = 2 * (1 * 2 * 3 * 3) * (4 * 2 * 2)       # 2 x outputs x (N_i K_r K_c)
    assert r["dilated"].cycles == round(flops / (config.mpe_conv_gflops * 1e9) * config.clock_hz)
    assert r["lrn"].cycles == round(4 * 100 * config.mpe_element_ns * 1e-9 * config.clock_hz)


def test_minimum_work_keeps_tiny_nodes_on_the_mpe():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", [4])], [("y", [4])])
    session = Session(import_onnx(m))
    np.testing.assert_array_equal(session.run({"x": np.array([-1, 2, -3, 4], np.float32)})["y"],
                                  [0, 2, 0, 4])
    assert session.records[0].device == "MPE"
    assert "less work than a CPE launch" in session.records[0].reason


def test_legacy_broadcast_of_opset_6():
    m = model([helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1, name="add")],
              [("x", [2, 3, 4, 5]), ("b", [3])], [("y", [2, 3, 4, 5])], opset=6)
    x, b = feed(2, 3, 4, 5), feed(3, seed=1)
    y = Session(import_onnx(m), minimum_work=False).run({"x": x, "b": b})["y"]
    np.testing.assert_allclose(y, x + b.reshape(1, 3, 1, 1), rtol=1e-6)


def test_debug_check_names_a_node_whose_cpe_result_is_wrong(monkeypatch):
    def wrong(node, inputs, on):
        return (inputs[0] + 1,), [], "broken"
    monkeypatch.setitem(dispatch.CPE, "Relu", wrong)
    m = model([helper.make_node("Relu", ["x"], ["y"], name="bad_relu")], [("x", [64])],
              [("y", [64])])
    session = Session(import_onnx(m), check=True, minimum_work=False)
    with pytest.raises(GraphError, match="'bad_relu'.*differs from the MPE"):
        session.run({"x": feed(64)})


def test_refused_cpe_operator_falls_back_with_its_reason():
    # a float64 MatMul of 3-D operands: the CPE path takes 2-D
    m = model([helper.make_node("MatMul", ["a", "b"], ["y"], name="bmm")],
              [("a", [2, 3, 4]), ("b", [2, 4, 5])], [("y", [2, 3, 5])])
    session = run(m, {"a": feed(2, 3, 4), "b": feed(2, 4, 5, seed=1)})
    assert "takes 2-D" in session.records[0].reason
    assert cpe.NotSuitable.__doc__


def test_bad_feeds_are_named():
    session = Session(import_onnx(convnet()))
    with pytest.raises(GraphError, match="'x' is not fed"):
        session.run({})
    with pytest.raises(GraphError, match="'x' must be float32 of shape \\[2, 3, 8, 8\\]"):
        session.run({"x": np.zeros((2, 3, 8, 8))})
    with pytest.raises(GraphError, match="not graph inputs"):
        session.run({"x": feed(2, 3, 8, 8), "z": 1})


def test_deterministic_cycles():
    x = {"x": feed(2, 3, 8, 8)}
    a, b = (Session(import_onnx(convnet()), minimum_work=False, machine=Machine())
            for _ in range(2))
    ya, yb = a.run(x)["y"], b.run(x)["y"]
    np.testing.assert_array_equal(ya, yb)
    assert [r.cycles for r in a.records] == [r.cycles for r in b.records]


def test_gelu_and_layernorm_run_as_generated_kernels():
    """LayerNormalization (y only) and Gelu's tanh form on the CPEs through the Souffle code
    generator, checked against the MPE path; the exact Gelu stays on the MPE, saying why."""
    from onnx import TensorProto
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["n"], axis=-1,
                              name="norm"),
             helper.make_node("Gelu", ["n"], ["t"], approximate="tanh", name="gelu_tanh"),
             helper.make_node("Gelu", ["t"], ["y"], name="gelu_exact")]
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, 32).astype(np.float32), "s"),
             numpy_helper.from_array(rng.normal(0, 0.1, 32).astype(np.float32), "b")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [4, 32])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [4, 32])], inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    session = Session(import_onnx(onnx_model), minimum_work=False, check=True)
    x = rng.standard_normal((4, 32)).astype(np.float32)
    session.run({"x": x})
    records = {r.node: r for r in session.records}
    for name in ("norm", "gelu_tanh"):
        assert (records[name].device, records[name].algorithm) == ("CPE", "generated (Souffle)")
        assert records[name].cycles > 0 and records[name].dma_bytes > 0
        assert records[name].check_error <= 1e-6
    assert records["gelu_exact"].device == "MPE" and "erf" in records["gelu_exact"].reason
