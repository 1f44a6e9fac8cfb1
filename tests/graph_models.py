"""Small ONNX models built with onnx.helper for the graph tests (seeded weights)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def tensor(rng, name, *shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def constant(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))


def convnet(opset=13, batch=2):
    """Conv -> Relu -> MaxPool -> (shape subgraph) Reshape -> Dropout -> Gemm -> Softmax."""
    rng = np.random.default_rng(1)
    h = helper
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
             h.make_node("Shape", ["p"], ["s"], name="shape"),
             constant("zero", np.array([0], np.int64)),
             h.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="batch"),
             constant("minus1", np.array([-1], np.int64)),
             h.make_node("Concat", ["n", "minus1"], ["target"], axis=0, name="target"),
             h.make_node("Reshape", ["p", "target"], ["f"], name="flat"),
             h.make_node("Dropout", ["f"], ["d"], name="drop"),
             h.make_node("Gemm", ["d", "fc_w", "fc_b"], ["g"], transB=1, name="fc"),
             h.make_node("Softmax", ["g"], ["y"], axis=1, name="softmax")]
    inits = [tensor(rng, "w", 8, 3, 3, 3), tensor(rng, "b", 8), tensor(rng, "fc_w", 10, 128),
             tensor(rng, "fc_b", 10)]
    return model(nodes, [("x", [batch, 3, 8, 8])], [("y", [batch, 10])], inits, opset)


def resblock(opset=13, batch=2, channels=8):
    """Conv -> BN -> Relu -> Conv -> BN, + the input, Relu, GlobalAveragePool, Flatten."""
    rng = np.random.default_rng(2)
    h = helper
    c = channels
    inits = [tensor(rng, "w1", c, c, 3, 3, scale=0.2), tensor(rng, "w2", c, c, 3, 3, scale=0.2)]
    for k in ("1", "2"):
        inits += [tensor(rng, "g" + k, c), tensor(rng, "be" + k, c), tensor(rng, "m" + k, c),
                  numpy_helper.from_array(rng.uniform(0.5, 2, c).astype(np.float32), "v" + k)]
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"], ["n1"],
                         name="bn1"),
             h.make_node("Relu", ["n1"], ["r1"], name="relu1"),
             h.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             h.make_node("BatchNormalization", ["c2", "g2", "be2", "m2", "v2"], ["n2"],
                         name="bn2"),
             h.make_node("Add", ["n2", "x"], ["s"], name="add"),
             h.make_node("Relu", ["s"], ["r"], name="relu"),
             h.make_node("GlobalAveragePool", ["r"], ["gap"], name="gap"),
             h.make_node("Flatten", ["gap"], ["y"], name="flatten")]
    return model(nodes, [("x", [batch, c, 8, 8])], [("y", [batch, c])], inits, opset)


def two_branch_net(batch=2):
    """x -> conv a, conv b (side by side), each -> Relu; Concat on channels."""
    rng = np.random.default_rng(6)
    h = helper
    nodes = [h.make_node("Conv", ["x", "wa"], ["a"], pads=[1, 1, 1, 1], name="conv_a"),
             h.make_node("Relu", ["a"], ["ra"], name="relu_a"),
             h.make_node("Conv", ["x", "wb"], ["b"], name="conv_b"),
             h.make_node("Relu", ["b"], ["rb"], name="relu_b"),
             h.make_node("Concat", ["ra", "rb"], ["y"], axis=1, name="concat")]
    return model(nodes, [("x", [batch, 8, 8, 8])], [("y", [batch, 16, 8, 8])],
                 [tensor(rng, "wa", 8, 8, 3, 3), tensor(rng, "wb", 8, 8, 1, 1)])


def numpy_loss(training, feeds, params):
    """The loss by the MPE functions of the forward nodes in float64, node by node."""
    from swsim.hostlib.graph.ops import operator
    values = {k: v.astype(np.float64) if v.dtype.kind == "f" else v
              for k, v in {**training.graph.initializers, **feeds, **params}.items()}
    for node in training.graph.nodes[:training.forward]:
        outs = operator(node.op_type).mpe(node, *[values[n] if n else None for n in node.inputs])
        values.update(zip(node.outputs, outs))
    return float(values["loss"])


def check_gradients(onnx_model, x, labels, samples=12, **options):
    """The gradients a Session (``options``: its keywords; default every suitable node on the
    CPEs) computes for every parameter of ``onnx_model`` (input "x", logits "g") against
    central finite differences of ``numpy_loss``; returns (training graph, session)."""
    from swsim.hostlib.graph import Session, import_onnx
    from swsim.hostlib.graph.autodiff import derive_training, with_loss
    training = derive_training(with_loss(import_onnx(onnx_model), "g"), "loss")
    session = Session(training.graph, **{"minimum_work": False, **options})
    result = session.run({"x": x, "labels": labels})
    rng = np.random.default_rng(0)
    params = {p: training.graph.initializers[p].astype(np.float64)
              for p in training.parameters}
    feeds = {"x": x.astype(np.float64), "labels": labels}
    assert abs(result["loss"] - numpy_loss(training, feeds, params)) < 1e-5
    for name in training.parameters:
        grad = result[training.gradients[name]]
        assert grad.shape == params[name].shape and grad.dtype == np.float32
        flat = params[name].reshape(-1)
        picks = rng.choice(flat.size, min(samples, flat.size), replace=False)
        numeric = []
        for i in picks:
            saved, eps = flat[i], 1e-5
            flat[i] = saved + eps
            up = numpy_loss(training, feeds, params)
            flat[i] = saved - eps
            down = numpy_loss(training, feeds, params)
            flat[i] = saved
            numeric.append((up - down) / (2 * eps))
        scale = max(np.abs(grad).max(), 1e-3)
        np.testing.assert_allclose(grad.reshape(-1)[picks], numeric, atol=2e-4 * scale,
                                   rtol=1e-3, err_msg=name)
    return training, session


def convstack(batch=4, size=16, channels=8, depth=3):
    """(Conv -> Relu) x depth -> MaxPool -> Flatten -> Gemm: consecutive convolutions whose
    algorithms share a layout (the layout pass's case)."""
    rng = np.random.default_rng(3)
    h = helper
    nodes, inits, x = [], [], "x"
    for k in range(depth):
        inits.append(tensor(rng, f"w{k}", channels, 3 if k == 0 else channels, 3, 3, scale=0.3))
        nodes += [h.make_node("Conv", [x, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1],
                              name=f"conv{k}"),
                  h.make_node("Relu", [f"c{k}"], [f"r{k}"], name=f"relu{k}")]
        x = f"r{k}"
    features = channels * (size // 2) ** 2
    nodes += [h.make_node("MaxPool", [x], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                          name="pool"),
              h.make_node("Flatten", ["p"], ["f"], axis=1, name="flat"),
              h.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1, name="fc")]
    inits += [tensor(rng, "fc_w", 10, features, scale=0.05), tensor(rng, "fc_b", 10)]
    return model(nodes, [("x", [batch, 3, size, size])], [("y", [batch, 10])], inits)
