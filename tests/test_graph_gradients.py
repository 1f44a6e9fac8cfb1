"""The gradients of the operators beyond a conv net's (docs/graph.md "Training"): broadcasting
Add / Sub / Mul / Div, MatMul, Concat, Transpose, Softmax, LogSoftmax, LRN, grouped and dilated
Conv, each checked on the VM against central finite differences of a float64 numpy forward
(graph_models.check_gradients), every CPE node also by the debug check against its MPE path;
and a model of onnx's own test data trained by the Solver."""
import os

import numpy as np
import onnx
import pytest
from onnx import helper as h, numpy_helper

from graph_models import check_gradients, model, tensor
from swsim.hostlib import train
from swsim.hostlib.graph import GraphError, Node, import_onnx
from swsim.hostlib.graph.autodiff import derive_training, with_loss
from swsim.hostlib.train.graph_net import GraphModel


def positive(rng, name, *shape):
    return numpy_helper.from_array((1 + np.abs(rng.standard_normal(shape))).astype(np.float32),
                                   name)


def records_of(session):
    return {r.node: r for r in session.records}


def test_broadcasting_arithmetic_concat_transpose_and_matmul():
    rng = np.random.default_rng(21)
    nodes = [h.make_node("Mul", ["x", "s"], ["a"], name="mul"),           # s: (3, 1, 1)
             h.make_node("Add", ["a", "bias"], ["b"], name="add"),        # bias: (1, 3, 1, 1)
             h.make_node("Sub", ["b", "t"], ["c"], name="sub"),           # t: (4,)
             h.make_node("Div", ["c", "v"], ["d"], name="div"),           # v: (3, 1, 1) > 0
             h.make_node("Mul", ["x", "k"], ["e"], name="scale"),         # k: one element
             h.make_node("Concat", ["d", "e"], ["f"], axis=-3, name="concat"),
             h.make_node("Transpose", ["f"], ["nhwc"], perm=[0, 2, 3, 1], name="nhwc"),
             h.make_node("Flatten", ["nhwc"], ["flat"], name="flat"),
             h.make_node("MatMul", ["flat", "w"], ["g"], name="matmul")]
    inits = [tensor(rng, "s", 3, 1, 1), tensor(rng, "bias", 1, 3, 1, 1), tensor(rng, "t", 4),
             positive(rng, "v", 3, 1, 1), tensor(rng, "k", 1), tensor(rng, "w", 96, 5, scale=0.2)]
    onnx_model = model(nodes, [("x", [2, 3, 4, 4])], [("g", [2, 5])], inits)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    training, session = check_gradients(onnx_model, x, np.array([1, 4]), check=True)
    records = records_of(session)
    assert records["matmul/grad"].algorithm == "swGEMM (transposed operands)"
    assert records["nhwc/grad"].algorithm == "transform NHWC->NCHW"
    assert records["concat/grad"].algorithm == "copy passes (transform)"
    assert records["sub/grad/sum1"].algorithm == "swGEMM (ones vector)"   # -sum over N, C, H
    assert records["scale/grad/sum1"].algorithm == "swGEMM (ones vector)"  # to k's 1 element
    assert records["mul/grad/mul1"].device == "MPE"          # dy x: a product of two tensors
    assert all(r.check_error <= 1e-3 for r in session.records if r.device == "CPE")


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_logsoftmax_and_lrn(opset):
    """Softmax over axis 1 of a 4-D tensor: channels from opset 13, C x H x W flattened
    before (ONNX's coercion to 2-D); their gradients and LRN's run on the MPE, timed."""
    rng = np.random.default_rng(22)
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             h.make_node("LRN", ["c"], ["n"], size=3, alpha=0.5, beta=0.75, bias=2.0,
                         name="lrn"),
             h.make_node("Softmax", ["n"], ["s"], axis=1, name="softmax"),
             h.make_node("Flatten", ["s"], ["flat"], name="flat"),
             h.make_node("Gemm", ["flat", "fc_w"], ["z"], transB=1, name="fc"),
             h.make_node("LogSoftmax", ["z"], ["g"], axis=1, name="logsoftmax")]
    inits = [tensor(rng, "w", 4, 2, 1, 1, scale=1.0), tensor(rng, "fc_w", 3, 36, scale=2.0)]
    onnx_model = model(nodes, [("x", [2, 2, 3, 3])], [("g", [2, 3])], inits, opset=opset)
    x = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    training, session = check_gradients(onnx_model, x, np.array([2, 0]))
    records = records_of(session)
    for name in ("lrn/grad", "softmax/grad", "logsoftmax/grad"):
        assert records[name].device == "MPE" and records[name].cycles > 0


def test_grouped_and_dilated_convolutions():
    """Groups of 2 on the CPEs (the DNN library's backward operators once per group); a
    dilated depthwise convolution on the MPE (no CPE operator dilates), timed."""
    rng = np.random.default_rng(23)
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c"], group=2, pads=[1, 1, 1, 1],
                         name="grouped"),
             h.make_node("Conv", ["c", "w2"], ["d"], group=4, dilations=[2, 2],
                         name="dilated"),
             h.make_node("Flatten", ["d"], ["flat"], name="flat"),
             h.make_node("Gemm", ["flat", "fc_w"], ["g"], transB=1, name="fc")]
    inits = [tensor(rng, "w1", 4, 2, 3, 3), tensor(rng, "b1", 4), tensor(rng, "w2", 4, 1, 3, 3),
             tensor(rng, "fc_w", 3, 16)]
    onnx_model = model(nodes, [("x", [2, 4, 6, 6])], [("g", [2, 3])], inits)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    training, session = check_gradients(onnx_model, x, np.array([0, 2]), check=True)
    records = records_of(session)
    assert records["grouped/grad"].device == "CPE"
    assert records["grouped/grad"].algorithm.endswith("x2 groups")
    assert records["dilated/grad"].device == "MPE"
    assert "dilations" in records["dilated/grad"].reason


def test_legacy_broadcast_and_batched_matmul_gradients():
    """Opset 6's broadcast=1, axis=1 (the operand aligned at axis 1) and a MatMul of a 3-D
    tensor by a 2-D one (batched: the MPE path; its weight's gradient summed over the
    batch)."""
    rng = np.random.default_rng(24)
    nodes = [h.make_node("Add", ["x", "bias"], ["a"], broadcast=1, axis=1, name="add"),
             h.make_node("Mul", ["a", "s"], ["m"], broadcast=1, axis=1, name="mul"),
             h.make_node("Reshape", ["m", "shape"], ["r"], name="rows"),
             h.make_node("MatMul", ["r", "w"], ["y"], name="matmul"),
             h.make_node("Reshape", ["y", "flat_shape"], ["g"], name="flat")]
    inits = [tensor(rng, "bias", 3), tensor(rng, "s", 3, 4), tensor(rng, "w", 4, 2),
             numpy_helper.from_array(np.array([2, 3, 4], np.int64), "shape"),
             numpy_helper.from_array(np.array([2, 6], np.int64), "flat_shape")]
    onnx_model = model(nodes, [("x", [2, 3, 4])], [("g", [2, 6])], inits, opset=6)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    training, session = check_gradients(onnx_model, x, np.array([5, 1]))
    assert "2-D" in records_of(session)["matmul/grad"].reason


def _pytorch_converted(name):
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                        "pytorch-converted", name, "model.onnx")


def test_the_solver_trains_onnx_s_depthwise_convolution(tmp_path):
    """onnx's test_Conv2d_depthwise (a depthwise Conv with bias, opset 6) with a head added
    (GlobalAveragePool, Flatten: one logit per channel), trained by the Solver on data whose
    label is the channel of largest mean: the loss falls."""
    graph = import_onnx(_pytorch_converted("test_Conv2d_depthwise"))
    (out,) = graph.outputs
    graph.nodes += [Node("gap", "GlobalAveragePool", [out], ["pooled"], opset=6),
                    Node("head", "Flatten", ["pooled"], ["logits"], opset=6)]
    graph.outputs = ["logits"]
    graph.infer()
    rng = np.random.default_rng(25)
    data = rng.standard_normal((64, 4, 6, 6)).astype(np.float32)
    labels = rng.integers(0, 4, 64)
    data[np.arange(64), labels] += 1.0
    np.savez(tmp_path / "data.npz", data=data, label=labels)
    spec = train.SolverSpec(base_lr=0.5, momentum=0.9, random_seed=1)
    solver = train.Solver(GraphModel(graph, source=str(tmp_path / "data.npz"), batch_size=2),
                          spec)
    results = [solver.step() for _ in range(12)]
    losses = [r.loss for r in results]
    assert np.mean(losses[-4:]) < 0.8 * np.mean(losses[:4])
    assert results[-1].layer_seconds["Conv_0/grad"] > 0      # the grouped backward, timed
