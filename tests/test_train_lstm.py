"""The LSTM layer of the training stack and SequenceTranspose (docs/train.md, "LSTM"): the
float64 reference's gradients against finite differences, the VM's losses and updated
parameters against it, the TEST phase's tensorized forward, the shipped example, and errors
naming the layer and the field."""
import numpy as np
import pytest

from swsim.hostlib import train
from swsim.hostlib.train.net import Run
from swsim.hostlib.train.reference import Reference
from swsim.vm import Machine
from test_train_reference import _check_gradient

# A 1x1 convolution before the LSTM so that the LSTM's dx (through SequenceTranspose's
# backward) reaches a parameter gradient; images (N, 2, 5, 3): T = 5 steps of I = 6 values.
NET = """
name: "seq"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "%s" batch_size: 6 } }
layer { name: "mix" type: "Convolution" bottom: "data" top: "mix"
        convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "xavier" } } }
layer { name: "rows" type: "SequenceTranspose" bottom: "mix" top: "rows" }
layer { name: "lstm" type: "LSTM" bottom: "rows" top: "lstm"
        recurrent_param { num_output: 7 weight_filler { type: "uniform" min: -0.5 max: 0.5 }
                          bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
layer { name: "steps" type: "SequenceTranspose" bottom: "lstm" top: "steps" }
layer { name: "out" type: "InnerProduct" bottom: "steps" top: "out"
        inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "out" bottom: "label" top: "accuracy"
        include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "out" bottom: "label" top: "loss" }
"""
SOLVER = train.SolverSpec(base_lr=0.5, momentum=0.9, weight_decay=0.01, random_seed=3)


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    rng = np.random.default_rng(5)
    source = tmp_path_factory.mktemp("seq") / "seq.npz"
    np.savez(source, data=rng.normal(size=(24, 2, 5, 3)), label=rng.integers(0, 4, 24))
    return NET % source


def test_the_shapes_and_the_packed_parameters_follow_caffes_blob_order(spec):
    net = train.Net(spec)
    assert net.shapes["rows"] == (5, 6, 6) and net.shapes["lstm"] == (5, 6, 7)
    assert net.shapes["steps"] == (6, 5, 7)
    assert [net.params[f"lstm/{i}"].shape for i in range(3)] == [(28, 6), (28,), (28, 7)]


def test_the_reference_gradients_match_finite_differences(spec):
    reference = Reference(train.Solver(spec, SOLVER))
    data, label = reference.order.batch(0)
    _, grads = reference.gradients(data, label)
    rng = np.random.default_rng(0)
    for name, value in reference.params.items():
        for _ in range(4):
            index = tuple(rng.integers(0, n) for n in value.shape)
            _check_gradient(reference, (data, label), grads, name, index)


@pytest.mark.parametrize("cgs", [1, 2])
def test_the_vm_matches_the_float64_reference(spec, cgs):
    solver = train.Solver(spec, SOLVER, cgs=cgs)
    reference = Reference(solver)
    vm = [solver.step().loss for _ in range(3)]
    expected = [reference.step() for _ in range(3)]
    np.testing.assert_allclose(vm, expected, rtol=1e-3, atol=0)
    for name, value in reference.params.items():     # the gradients, through the updates
        np.testing.assert_allclose(solver.net.params[name], value, rtol=1e-3, atol=1e-5,
                                   err_msg=name)


def test_the_test_phase_runs_the_tensorized_forward(spec):
    config = Machine().config
    rows = {r["layer"]: r for r in train.Net(spec, config=config).explain()}
    assert rows["lstm"]["operator"] == "lstm_forward(tensorized, reserve)+lstm_backward"
    net = train.Net(spec, "TEST", config=config)
    row = {r["layer"]: r for r in net.explain()}["lstm"]
    assert row["operator"] == "lstm_forward(tensorized)"
    assert row["predicted_seconds"] > 0 and rows["lstm"]["predicted_seconds"] > 0
    solver = train.Solver(spec, SOLVER)
    reference = Reference(solver)
    for name in net.params.layout:
        net.params[name][...] = solver.net.params[name]
    batch = reference.order.batch(0)
    run = Run(Machine())
    blobs = net.forward(run, batch)
    expected, _ = reference.forward(net, *batch)
    np.testing.assert_allclose(blobs["out"], expected["out"], rtol=1e-4, atol=1e-5)
    assert run.seconds["lstm"] > 0


def test_train_runs_the_forward_the_estimates_pick_with_its_reserve(spec, monkeypatch):
    """TRAIN: the tensorized forward (predicted faster) leaves its reserve for the backward
    (no second forward); where the estimates say the baseline is faster, the baseline."""
    from swsim.hostlib.dnn import lstm, lstm_model
    solver = train.Solver(spec, SOLVER)
    solver.step()
    layer = next(n.layer for n in solver.net.nodes if n.layer.param.type == "LSTM")
    assert (layer.algo, layer.reserve) == ("tensorized", True)
    (_, _, _, _, _, reserve), = layer.segments
    assert isinstance(reserve, lstm.Reserve) and reserve.gates.shape == (5, 6, 28)
    real = lstm_model.estimate_forward

    def tensorized_slower(*args, algo, **kwargs):
        estimate = real(*args, algo=algo, **kwargs)
        estimate.cycles *= 100 if algo == "tensorized" else 1
        return estimate
    monkeypatch.setattr(lstm_model, "estimate_forward", tensorized_slower)
    for phase, operator in (("TRAIN", "lstm_forward(baseline)+lstm_backward"),
                            ("TEST", "lstm_forward(baseline)")):
        net = train.Net(spec, phase, config=Machine().config)
        assert {r["layer"]: r for r in net.explain()}["lstm"]["operator"] == operator


def test_the_shipped_example_trains_like_the_reference():
    solver = train.Solver(train.parse_net(train.example("lstm")),
                          train.SolverSpec(base_lr=0.1, momentum=0.9, random_seed=1))
    reference = Reference(solver)
    vm = [solver.step().loss for _ in range(2)]
    np.testing.assert_allclose(vm, [reference.step() for _ in range(2)], rtol=1e-3, atol=0)


@pytest.mark.parametrize("edit, message", [
    (('bottom: "rows" top: "lstm"', 'bottom: "mix" top: "lstm"'),
     r"layer 'lstm' \(LSTM\), bottom: needs a \(T, B, I\) blob, got \(6, 2, 5, 3\)"),
    (("num_output: 7", "num_output: 0"),
     r"layer 'lstm' \(LSTM\), recurrent_param.num_output: must be given and > 0"),
    (('bottom: "mix" top: "rows"', 'bottom: "label" top: "rows"'),
     r"layer 'rows' \(SequenceTranspose\), bottom: needs an \(N, C, H, W\), a \(T, B, F\) or "
     r"a \(T, B\) blob, got \(6,\)"),
])
def test_bad_input_names_the_layer_and_the_field(spec, edit, message):
    with pytest.raises(train.TrainError, match=message):
        train.Net(spec.replace(*edit))
