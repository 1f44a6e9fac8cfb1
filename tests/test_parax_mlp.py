"""ParaX training (kernels/parax/mlp.s, hostlib/parax/mlp.py, hostlib/train/instances.py): the
single-CPE MLP step against numpy, the training loop against the training stack's Solver,
and the configurations that cannot run."""
import numpy as np
import pytest

from swsim.errors import ArgumentError, ArgumentTypeError
from swsim.hostlib.parax import mlp


def case(instances, batch, seed=0):
    rng = np.random.default_rng(seed)
    params = mlp.init_params(seed)
    _, b1, _, b2 = mlp.unpack(params)
    b1[...] = rng.standard_normal(mlp.HIDDEN) / 10        # biases in play, padding kept 0
    b2[:mlp.OUT] = rng.standard_normal(mlp.OUT) / 10
    x = rng.random((instances, batch, mlp.IN)).astype(np.float32)
    x[0, 0, :8] = 0                                         # some hidden units exactly 0
    return params, x, rng.integers(0, mlp.OUT, (instances, batch))


def numpy_step(params, x, labels):
    """float64 forward and backward of one instance: probabilities and packed gradient."""
    w1, b1, w2, b2 = (a.astype(np.float64) for a in mlp.unpack(params))
    h = np.maximum(x @ w1 + b1, 0)
    z = h @ w2[:, :mlp.OUT] + b2[:mlp.OUT]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    dz = np.zeros((len(x), mlp.OUT_PAD))
    dz[:, :mlp.OUT] = (p - np.eye(mlp.OUT)[labels]) / len(x)
    dh = dz @ w2.T * (h > 0)
    return p, np.concatenate([(x.T @ dh).ravel(), dh.sum(0), (h.T @ dz).ravel(), dz.sum(0)])


def test_instance_step_matches_numpy():
    params, x, labels = case(3, 4)
    run = mlp.instance_step(params, x, labels)
    assert mlp.KERNEL.symbol("B_MAX") == mlp.B_MAX
    for k in range(3):
        p, g = numpy_step(params, x[k].astype(np.float64), labels[k])
        np.testing.assert_allclose(run.probabilities[k], p, atol=1e-6)
        np.testing.assert_allclose(run.gradients[k], g, atol=1e-6)
        assert run.gradients[k].any()
    pad = mlp.unpack(run.gradients[0])
    assert not pad[2][:, mlp.OUT:].any() and not pad[3][mlp.OUT:].any()
    alone = mlp.instance_step(params, x[1:2], labels[1:2])      # instances are independent
    np.testing.assert_array_equal(alone.gradients[0], run.gradients[1])
    assert run.cycles > alone.cycles                            # they share the DMA engine


@pytest.mark.slow
def test_engines_agree_on_the_step():
    params, x, labels = case(1, 2)
    c = mlp.instance_step(params, x, labels)
    py = mlp.instance_step(params, x, labels, engine="python")
    np.testing.assert_array_equal(c.gradients.view(np.int32), py.gradients.view(np.int32))
    assert c.cycles == py.cycles


def test_trains_like_the_solver(tmp_path):
    """The instances take the Solver's SGD step (momentum 0, the same minibatch, the same
    initial weights): the same loss and updated weights up to float32 sums in another order
    (one step: the Solver on this net takes seconds per step)."""
    from swsim.hostlib import train
    from swsim.hostlib.train.instances import load_mlp_params, mlp_net_spec, train_mlp
    spec = mlp_net_spec(tmp_path, 4)
    ours = train_mlp(spec, instances=2, batch=2, strategy="GS", steps=1, lr=0.5, test=False)
    solver = train.Solver(spec, train.SolverSpec(base_lr=0.5, momentum=0.0, random_seed=1))
    load_mlp_params(solver.net, mlp.init_params(1))
    np.testing.assert_allclose(ours.losses, [solver.step().loss], rtol=1e-5)
    w1, b1, w2, b2 = mlp.unpack(ours.params)
    assert not np.array_equal(w1, mlp.unpack(mlp.init_params(1))[0])     # a step was taken
    for ours_value, name in ((w1.T, "ip1/0"), (b1, "ip1/1"), (w2[:, :mlp.OUT].T, "ip2/0"),
                             (b2[:mlp.OUT], "ip2/1")):
        np.testing.assert_allclose(ours_value, solver.net.params[name], atol=1e-6)
    assert ours.compute_cycles[0] > 0 and ours.sync_cycles[0] > 0


@pytest.mark.parametrize("instances, batch, message", [
    (1, 3, "batch must be even, 2..8: its LDM holds 8 samples of 1024 bytes"),
    (1, 10, r"\(\d+ of 65536 LDM bytes used\); got 10"),
    (65, 2, "65 instances need as many CPEs, the core group has 64"),
])
def test_impossible_configurations_are_refused(instances, batch, message):
    params = mlp.init_params()
    x = np.zeros((instances, batch, mlp.IN), np.float32)
    with pytest.raises(ArgumentError, match=message):
        mlp.instance_step(params, x, np.zeros((instances, batch), np.int64))


def test_bad_input_is_refused(tmp_path):
    params, x, labels = case(1, 2)
    with pytest.raises(ArgumentError, match="labels must be ints 0..9"):
        mlp.instance_step(params, x, labels + 10)
    with pytest.raises(ArgumentError, match="params must be float32"):
        mlp.instance_step(params[:5], x, labels)
    with pytest.raises(ArgumentTypeError, match="must be numpy arrays"):
        mlp.instance_step(params, x.tolist(), labels)
    from swsim.hostlib.train.instances import train_mlp
    with pytest.raises(ArgumentError, match="PS keeps one CPE as its server: at most 63"):
        train_mlp(None, instances=64, strategy="PS")
