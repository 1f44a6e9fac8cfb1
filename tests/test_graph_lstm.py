"""ONNX's LSTM on the graph and the gradients of LSTM, LeakyRelu, Gelu and LayerNormalization
(docs/graph.md "LSTM" and "Training"): the forward against onnxruntime; each gradient on the VM
against central finite differences of the float64 numpy forward (graph_models.check_gradients);
an imported LSTM model trained by the Solver."""
import numpy as np
import onnxruntime
import pytest
from onnx import helper as h

from graph_models import check_gradients, model, tensor
from swsim.hostlib import train
from swsim.hostlib.graph import GraphError, Session, import_onnx
from swsim.hostlib.graph.autodiff import derive_training, with_loss
from swsim.hostlib.train.graph_net import GraphModel

STEPS, BATCH, INPUTS, HIDDEN = 3, 2, 4, 5


def records_of(session):
    return {r.node: r for r in session.records}


def lstm_model(rng, layout=0, bias=True, states=True, outputs=("Y", "Y_h", "Y_c"),
               direction="forward", head=True, opset=14):
    """X -> LSTM -> (head: Y_h flattened, Gemm to 3 logits "g"), or the LSTM's outputs."""
    dirs = 2 if direction == "bidirectional" else 1
    names = ["x", "W", "R", "B" if bias else "", "", "h0" if states else "",
             "c0" if states else ""]
    while not names[-1]:
        names.pop()
    inits = [tensor(rng, "W", dirs, 4 * HIDDEN, INPUTS), tensor(rng, "R", dirs, 4 * HIDDEN, HIDDEN)]
    inits += [tensor(rng, "B", dirs, 8 * HIDDEN)] if bias else []
    state = [BATCH, dirs, HIDDEN] if layout else [dirs, BATCH, HIDDEN]
    inits += [tensor(rng, "h0", *state), tensor(rng, "c0", *state)] if states else []
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")]
    nodes = [h.make_node("LSTM", names, outs, hidden_size=HIDDEN, layout=layout,
                         direction=direction, name="lstm")]
    x_shape = [BATCH, STEPS, INPUTS] if layout else [STEPS, BATCH, INPUTS]
    if not head:
        shapes = {"Y": [BATCH, STEPS, dirs, HIDDEN] if layout else [STEPS, dirs, BATCH, HIDDEN],
                  "Y_h": state, "Y_c": state}
        return model(nodes, [("x", x_shape)], [(o, shapes[o]) for o in outputs], inits,
                     opset=opset)
    # the loss through Y_h: batch first (a Transpose when time-major), flattened, a Gemm
    hb = "Y_h"
    if not layout:
        nodes.append(h.make_node("Transpose", ["Y_h"], ["hb"], perm=[1, 0, 2], name="batch"))
        hb = "hb"
    nodes.append(h.make_node("Flatten", [hb], ["hf"], name="flat_h"))
    nodes += [h.make_node("Gemm", ["hf", "fc_w"], ["g"], transB=1, name="fc")]
    inits.append(tensor(rng, "fc_w", 3, dirs * HIDDEN))
    return model(nodes, [("x", x_shape)], [("g", [BATCH, 3])], inits, opset=opset)


@pytest.mark.parametrize("layout,direction", [(0, "forward"), (1, "forward"),
                                              (0, "bidirectional"), (1, "reverse")])
def test_forward_matches_onnxruntime(layout, direction):
    """onnxruntime has no batch-first LSTM: layout 1 is checked against its time-major twin
    (the same weights, no initial states) with X and the outputs transposed."""
    onnx_model = lstm_model(np.random.default_rng(40), layout, direction=direction,
                            head=False, states=not layout)
    twin = lstm_model(np.random.default_rng(40), 0, direction=direction, head=False,
                      states=not layout)
    x = np.random.default_rng(1).standard_normal((STEPS, BATCH, INPUTS)).astype(np.float32)
    want = onnxruntime.InferenceSession(twin.SerializeToString()).run(None, {"x": x})
    if layout:
        x = np.ascontiguousarray(np.swapaxes(x, 0, 1))
        want = [np.transpose(want[0], (2, 0, 1, 3))] + [np.swapaxes(w, 0, 1) for w in want[1:]]
    session = Session(import_onnx(onnx_model), minimum_work=False, check=True)
    got = session.run({"x": x})
    for name, w in zip(("Y", "Y_h", "Y_c"), want):
        np.testing.assert_allclose(got[name], w, rtol=1e-3, atol=1e-5, err_msg=name)
    (record,) = session.records
    assert record.device == "CPE" and record.algorithm == "lstm tensorized"


def test_lstm_gradients_match_finite_differences():
    """Batch first, both biases and initial states, the loss through Y_h: every parameter's
    gradient (W, R, B, h0, c0 and the head's) from LSTMGrad on the CPEs (the tensorized
    forward's reserve handed over), checked against the MPE path as well."""
    rng = np.random.default_rng(41)
    onnx_model = lstm_model(rng, layout=1)
    x = rng.standard_normal((BATCH, STEPS, INPUTS)).astype(np.float32)
    training, session = check_gradients(onnx_model, x, np.array([2, 0]), check=True)
    records = records_of(session)
    assert records["lstm"].op_type == "LSTMTraining"
    assert records["lstm/grad"].algorithm == "lstm_backward (reserve)"
    assert set(training.parameters) >= {"W", "R", "B", "h0", "c0"}


def test_gradients_through_y_and_y_c():
    """Time-major, no bias or initial state: the loss reads the whole sequence Y (its last
    step through a Gemm after a Flatten) and the last cell Y_c (summed in), so LSTMGrad gets
    dY and dY_c."""
    rng = np.random.default_rng(42)
    nodes = [h.make_node("LSTM", ["x", "W", "R"], ["Y", "", "Y_c"], hidden_size=HIDDEN,
                         name="lstm"),
             h.make_node("Transpose", ["Y"], ["yb"], perm=[2, 0, 1, 3], name="batch_first"),
             h.make_node("Flatten", ["yb"], ["yf"], name="flat"),
             h.make_node("Gemm", ["yf", "fc_w"], ["a"], transB=1, name="fc"),
             h.make_node("Flatten", ["Y_c"], ["cf"], axis=2, name="flat_c"),
             h.make_node("Reshape", ["cf", "shape"], ["c2"], name="c2"),
             h.make_node("Gemm", ["c2", "fc_c"], ["b"], transB=1, name="fc_c"),
             h.make_node("Add", ["a", "b"], ["g"], name="add")]
    inits = [tensor(rng, "W", 1, 4 * HIDDEN, INPUTS), tensor(rng, "R", 1, 4 * HIDDEN, HIDDEN),
             tensor(rng, "fc_w", 3, STEPS * HIDDEN), tensor(rng, "fc_c", 3, HIDDEN),
             h.make_tensor("shape", 7, [2], [BATCH, HIDDEN])]
    onnx_model = model(nodes, [("x", [STEPS, BATCH, INPUTS])], [("g", [BATCH, 3])], inits)
    x = rng.standard_normal((STEPS, BATCH, INPUTS)).astype(np.float32)
    _, cpe = check_gradients(onnx_model, x, np.array([1, 2]), check=True)
    assert records_of(cpe)["lstm/grad"].device == "CPE"


def test_leakyrelu_gelu_and_layernorm_gradients():
    """LeakyRelu forward and backward on the CPEs (ReLU's kernels and an axpby); Gelu (both
    forms) and LayerNormalization (scale and bias over the last two axes) on the MPE, timed."""
    rng = np.random.default_rng(43)
    nodes = [h.make_node("Gemm", ["x", "w1"], ["a"], transB=1, name="fc1"),
             h.make_node("LeakyRelu", ["a"], ["b"], alpha=0.2, name="leaky"),
             h.make_node("Reshape", ["b", "shape"], ["b3"], name="to3d"),
             h.make_node("LayerNormalization", ["b3", "scale", "bias"], ["n"], axis=-2,
                         name="norm"),
             h.make_node("Gelu", ["n"], ["e"], name="gelu"),
             h.make_node("Gelu", ["e"], ["t"], approximate="tanh", name="gelu_tanh"),
             h.make_node("Flatten", ["t"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "w2"], ["g"], transB=1, name="fc2")]
    inits = [tensor(rng, "w1", 12, 6), h.make_tensor("shape", 7, [3], [BATCH, 3, 4]),
             tensor(rng, "scale", 3, 4, scale=1.0), tensor(rng, "bias", 4),
             tensor(rng, "w2", 3, 12)]
    onnx_model = model(nodes, [("x", [BATCH, 6])], [("g", [BATCH, 3])], inits, opset=20)
    x = rng.standard_normal((BATCH, 6)).astype(np.float32)
    _, session = check_gradients(onnx_model, x, np.array([0, 2]), check=True)
    records = records_of(session)
    assert records["leaky"].algorithm == "relu + axpby"
    assert records["leaky/grad"].algorithm == "relu backward + axpby"
    for name in ("norm/grad", "gelu/grad", "gelu_tanh/grad"):
        assert records[name].device == "MPE" and records[name].reason == "no CPE operator"
        assert records[name].cycles > 0


def test_training_refusals_name_the_node():
    rng = np.random.default_rng(44)
    for direction in ("reverse", "bidirectional"):
        graph = import_onnx(lstm_model(rng, direction=direction))
        with pytest.raises(GraphError, match="lstm.*forward direction"):
            derive_training(with_loss(graph, "g"), "loss")


def test_the_solver_trains_an_imported_lstm(tmp_path):
    """An ONNX LSTM (batch first, both biases) over 4 steps of 4 features with a Gemm head on
    its last hidden state, trained 12 Solver steps at batch 8 on sequences whose label is the
    feature raised at every step: the loss falls; the LSTM's forward and backward are CPE
    nodes of the step's time."""
    steps, inputs, hidden, classes = 4, 4, 8, 3
    rng = np.random.default_rng(45)
    data = rng.standard_normal((64, steps, inputs)).astype(np.float32)
    labels = rng.integers(0, classes, 64)
    data[np.arange(64), :, labels] += 2.0
    np.savez(tmp_path / "data.npz", data=data, label=labels)
    nodes = [h.make_node("LSTM", ["x", "W", "R", "B"], ["", "Y_h"], hidden_size=hidden,
                         layout=1, name="lstm"),
             h.make_node("Flatten", ["Y_h"], ["hf"], name="flat"),
             h.make_node("Gemm", ["hf", "fc_w", "fc_b"], ["g"], transB=1, name="fc")]
    inits = [tensor(rng, "W", 1, 4 * hidden, inputs), tensor(rng, "R", 1, 4 * hidden, hidden,
                                                             scale=0.3),
             tensor(rng, "B", 1, 8 * hidden, scale=0.1), tensor(rng, "fc_w", classes, hidden),
             tensor(rng, "fc_b", classes, scale=0.0)]
    onnx_model = model(nodes, [("x", [8, steps, inputs])], [("g", [8, classes])], inits,
                       opset=14)
    spec = train.SolverSpec(base_lr=0.3, momentum=0.9, random_seed=1)
    solver = train.Solver(GraphModel(onnx_model, source=str(tmp_path / "data.npz"),
                                     batch_size=8), spec)
    results = [solver.step() for _ in range(12)]
    losses = [r.loss for r in results]
    assert np.mean(losses[-4:]) < 0.6 * np.mean(losses[:4])
    records = {r.node: r for r in solver.net.records}
    assert records["lstm"].device == records["lstm/grad"].device == "CPE"
    assert results[-1].layer_seconds["lstm/grad"] > 0
