"""LSTM sequence continuation (Caffe's second bottom ``cont``; docs/train.md "LSTM"): state
carried across minibatches and reset where cont is 0, on the VM against one uninterrupted run
and against the float64 reference, through checkpoints, and the errors."""
import numpy as np
import pytest

from swsim.hostlib import train
from swsim.hostlib.train import layers
from swsim.hostlib.train.net import Run
from swsim.hostlib.train.reference import Reference
from swsim.vm import Machine
from test_train_reference import _check_gradient, _matches_reference

NET = """
name: "streams"
layer { name: "d" type: "Data" top: "data" top: "label" top: "cont"
        data_param { source: "%s" batch_size: 4 } }
layer { name: "rows" type: "SequenceTranspose" bottom: "data" top: "rows" }
layer { name: "flags" type: "SequenceTranspose" bottom: "cont" top: "flags" }
layer { name: "lstm" type: "LSTM" bottom: "rows" bottom: "flags" top: "lstm"
        recurrent_param { num_output: 5 weight_filler { type: "uniform" min: -0.5 max: 0.5 }
                          bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
layer { name: "steps" type: "SequenceTranspose" bottom: "lstm" top: "steps" }
layer { name: "out" type: "InnerProduct" bottom: "steps" top: "out"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "out" bottom: "label" top: "loss" }
"""
SOLVER = train.SolverSpec(base_lr=0.3, momentum=0.9, random_seed=4)


def _set(directory, first_column=None, seed=7):
    """12 samples of 4 steps x 3 values; cont mostly 1, with restarts inside sequences."""
    rng = np.random.default_rng(seed)
    cont = (rng.random((12, 4)) > 0.25).astype(np.float32)
    if first_column is not None:
        cont[:, 0] = first_column
    source = directory / f"streams-{seed}-{first_column}.npz"
    np.savez(source, data=rng.normal(size=(12, 1, 4, 3)), label=rng.integers(0, 3, 12),
             cont=cont)
    return NET % source


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return _set(tmp_path_factory.mktemp("streams"))


def _layer(batch, hidden=4, continued=True):
    lp = train.LSTM("l", "x", hidden)
    layer = layers.LSTM(lp)
    layer.set_phase("TRAIN")
    layer.setup([(3, batch, 2)] + ([(3, batch)] if continued else []))
    layer.state = [np.zeros(s, np.float32) for s in layer.state_shapes]
    rng = np.random.default_rng(1)
    params = [rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in layer.param_shapes]
    return layer, params


def test_carried_state_equals_one_uninterrupted_sequence_and_cont_zero_restarts():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 2, 2)).astype(np.float32)
    run = Run(Machine())
    whole, params = _layer(2)
    whole.setup([(6, 2, 2)])                          # one forward over all 6 steps
    expected = whole.forward(run, [x], params)[0]
    carried, _ = _layer(2)
    first = carried.forward(run, [x[:3], np.array([[0, 0], [1, 1], [1, 1]], np.float32)],
                            params)[0]
    second = carried.forward(run, [x[3:], np.ones((3, 2), np.float32)], params)[0]
    np.testing.assert_allclose(np.concatenate([first, second]), expected, rtol=1e-5,
                               atol=1e-6)
    # row 1 restarts at t = 1 (and again at the next minibatch's t = 0): a fresh sequence
    cont = np.array([[1, 1], [1, 0], [1, 1]], np.float32)
    restarted = carried.forward(run, [x[:3], cont], params)[0]
    fresh, _ = _layer(1, continued=False)
    alone = fresh.forward(run, [x[1:3, 1:2]], params)[0]
    np.testing.assert_allclose(restarted[1:, 1:2], alone[:2], rtol=1e-5, atol=1e-6)
    assert not np.allclose(restarted[:, 0], first[:, 0])     # row 0 carried its state


def test_the_reference_gradients_match_finite_differences(tmp_path):
    # every row starts at the minibatch's t = 0 (the carried state would change between the
    # differences); the restarts inside the sequences are exercised
    reference = Reference(train.Solver(_set(tmp_path, first_column=0), SOLVER))
    batch = reference.order.batch(0)
    assert (batch[2][:, 1:] == 0).any()
    _, grads = reference.gradients(*batch)
    rng = np.random.default_rng(0)
    for name in ("lstm/0", "lstm/1", "lstm/2"):
        for _ in range(3):
            index = tuple(rng.integers(0, n) for n in reference.params[name].shape)
            _check_gradient(reference, batch, grads, name, index)


@pytest.mark.parametrize("cgs", [1, 2])
def test_the_vm_matches_the_reference_across_minibatches(spec, cgs):
    solver = train.Solver(spec, SOLVER, cgs=cgs)
    reference = _matches_reference(solver, 4)
    for name, value in reference.params.items():
        np.testing.assert_allclose(solver.net.params[name], value, rtol=1e-3, atol=1e-5,
                                   err_msg=name)
    h = solver.replicas[-1].state["lstm/state0"]
    assert np.abs(h).max() > 0                            # the carried h of the last slice


def test_a_resumed_run_carries_every_core_groups_state(spec, tmp_path):
    straight = train.Solver(spec, SOLVER, cgs=2)
    losses = [straight.step().loss for _ in range(3)]
    first = train.Solver(spec, SOLVER, cgs=2)
    first.step()
    first.save(tmp_path)
    resumed = train.Solver(spec, SOLVER, cgs=2)
    resumed.restore(tmp_path)
    assert [resumed.step().loss for _ in range(2)] == losses[1:]


def test_bad_cont_names_the_layer_and_the_field(spec, tmp_path):
    bad = spec.replace('bottom: "flags" top: "lstm"', 'bottom: "rows" top: "lstm"')
    with pytest.raises(train.TrainError, match=r"layer 'lstm' \(LSTM\), bottom: cont \(the "
                       r"second bottom\) must be \(T, B\) = \(4, 4\), got \(4, 4, 3\)"):
        train.Net(bad)
    source = tmp_path / "plain.npz"
    np.savez(source, data=np.zeros((4, 1, 4, 3)), label=np.zeros(4))
    with pytest.raises(train.TrainError, match=r"layer 'd' \(Data\), top: a third top \(cont\) "
                       r"needs a 'cont' \(N, T\) array"):
        train.Net(NET % source)
    np.savez(source, data=np.zeros((4, 1, 4, 3)), label=np.zeros(4), cont=np.full((4, 4), 0.5))
    solver = train.Solver(NET % source, SOLVER)
    with pytest.raises(train.TrainError, match=r"layer 'lstm' \(LSTM\), bottom: cont must "
                       r"hold 0 \(a sequence starts\) or 1"):
        solver.step()


def test_a_checkpoint_of_other_core_groups_is_refused_with_lstm_state(spec, tmp_path):
    solver = train.Solver(spec, SOLVER, cgs=2)
    solver.step()
    solver.save(tmp_path)
    with pytest.raises(train.TrainError, match=r"holds the LSTM state of 2 core groups, this "
                       r"run has --cgs 1"):
        train.Solver(spec, SOLVER).restore(tmp_path)


def test_the_test_phase_carries_state_through_the_tensorized_forward(spec):
    solver = train.Solver(spec, SOLVER)
    reference = Reference(solver)
    net = train.Net(spec, "TEST", config=Machine().config)
    assert _node_algo(net) == "tensorized"
    for name in net.params.layout:
        net.params[name][...] = solver.net.params[name]
    run = Run(Machine())
    for k in range(2):                         # the second batch starts from the first's h, c
        batch = reference.order.batch(k)
        blobs = net.forward(run, batch)
        expected, _ = reference.forward(net, *batch)
        np.testing.assert_allclose(blobs["out"], expected["out"], rtol=1e-4, atol=1e-5)
    assert np.abs(net.state["lstm/state0"]).max() > 0


def _node_algo(net):
    return next(n.layer.algo for n in net.nodes if n.layer.param.type == "LSTM")
