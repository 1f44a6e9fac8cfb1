"""``swsim bench light``'s seeded weights: ConstantOfShape fills and float initializers become
seeded random values, and the model still imports, runs and matches onnxruntime."""
import numpy as np
import onnxruntime
from onnx import helper, numpy_helper

from swsim.hostlib.graph import Session, import_onnx
from swsim.hostlib.tools.bench import light

from graph_models import model


def test_seeded_replaces_fills_and_initializers():
    h = helper
    nodes = [h.make_node("ConstantOfShape", ["w_shape"], ["w"],
                         value=numpy_helper.from_array(np.array([0.02], np.float32))),
             h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array(np.array([4, 3, 3, 3], np.int64), "w_shape"),
             numpy_helper.from_array(np.full(4, 0.5, np.float32), "b")]
    fill = model(nodes, [("x", [1, 3, 6, 6])], [("y", [1, 4, 6, 6])], inits)
    random = light.seeded(fill, seed=3)
    assert [n.op_type for n in random.graph.node] == ["Conv"]
    values = {t.name: numpy_helper.to_array(t) for t in random.graph.initializer}
    assert values["w"].shape == (4, 3, 3, 3) and np.unique(values["w"]).size == 108
    assert not np.all(values["b"] == 0.5)
    again = {t.name: numpy_helper.to_array(t) for t in light.seeded(fill, seed=3).graph.initializer}
    np.testing.assert_array_equal(values["w"], again["w"])
    x = np.random.default_rng(0).standard_normal((1, 3, 6, 6)).astype(np.float32)
    want = onnxruntime.InferenceSession(random.SerializeToString()).run(None, {"x": x})[0]
    got = Session(import_onnx(random)).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def test_batchnorm_variances_stay_positive():
    import onnx
    graph = import_onnx(light.seeded(onnx.load(light.path("resnet50"))))
    variances = [graph.initializers[n.inputs[4]] for n in graph.nodes
                 if n.op_type == "BatchNormalization"]
    assert len(variances) == 53 and min(v.min() for v in variances) >= 0.5


def test_squeezenet_imports():
    import onnx
    graph = import_onnx(light.seeded(onnx.load(light.path("squeezenet"))))
    assert graph.info[graph.outputs[0]].size == 1000
    assert sum(n.op_type == "Conv" for n in graph.nodes) == 26
