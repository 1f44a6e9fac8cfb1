"""The small CNN's whole SGD step on one CPE per ParaX instance (kernels/parax/cnn.s,
hostlib/parax/cnn.py) against float64 numpy: BN's batch statistics, loss-head probabilities,
every parameter's gradient, the inference forward, instances independent, both engines, bad
input; training it on digits (hostlib.train.instances.train_cnn, `swsim parax train`)."""
import json

import numpy as np
import pytest

from swsim.cli import main
from swsim.errors import ArgumentError, ArgumentTypeError
from swsim.hostlib.parax import cnn
from swsim.hostlib.train.instances import train_cnn


def numpy_step(params, x, labels, moments=None):
    """float64: probabilities (b, 10), the mean cross-entropy's gradient of one instance and
    its batch's mean and variance; with `moments` BN uses them (inference), no gradient."""
    w, scale, shift, wfc, bfc = (a.astype(float) for a in cnn.unpack(params))
    b, rows = x.shape[:2]
    xp = np.zeros((b, rows + 2, 10, 16))
    xp[:, 1:rows + 1, 1:9] = x
    conv = sum(xp[:, kh:kh + rows, kw:kw + 8] @ w[kh, kw] for kh in range(3) for kw in range(3))
    mean, var = (conv.mean(axis=(0, 1, 2)), conv.var(axis=(0, 1, 2))) if moments is None \
        else moments.astype(float)
    rstd = 1 / np.sqrt(var + cnn.BN_EPS)
    xhat = (conv - mean) * rstd
    y = xhat * scale + shift
    act = np.maximum(y, 0)
    quadrants = act.reshape(b, 2, rows // 2, 2, 4, 16)
    f = quadrants.mean(axis=(2, 4)).reshape(b, 64)
    z = f @ wfc[:, :10] + bfc[:10]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    if moments is not None:
        return p
    dz = (p - np.eye(10)[labels]) / b
    g = [np.zeros(a.shape) for a in (w, scale, shift, wfc, bfc)]
    g[3][:, :10], g[4][:10] = f.T @ dz, dz.sum(axis=0)
    df = (dz @ wfc[:, :10].T).reshape(b, 2, 1, 2, 1, 16) / (2 * rows)
    da = np.broadcast_to(df, quadrants.shape).reshape(act.shape)
    dy = np.where(y > 0, da, 0)
    g[1], g[2] = (dy * xhat).sum(axis=(0, 1, 2)), dy.sum(axis=(0, 1, 2))
    dxhat = dy * scale
    dconv = (dxhat - dxhat.mean(axis=(0, 1, 2))
             - xhat * (dxhat * xhat).mean(axis=(0, 1, 2))) * rstd
    for kh in range(3):
        for kw in range(3):
            g[0][kh, kw] = np.einsum("nhwc,nhwo->co", xp[:, kh:kh + rows, kw:kw + 8], dconv)
    return p, np.concatenate([a.ravel() for a in g]), np.stack([mean, var])


RUNNING = np.stack([np.linspace(-0.3, 0.4, 16), np.linspace(0.6, 1.9, 16)]).astype(np.float32)


@pytest.fixture(scope="module")
def step():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 2, 8, 16)).astype(np.float32)
    labels = rng.integers(0, 10, (3, 2))
    params = cnn.init_params(2)
    return params, x, labels, cnn.cnn_step(params, x, labels, RUNNING)


def test_cnn_step_matches_float64_numpy(step):
    params, x, labels, run = step
    for k in range(3):
        p, g, moments = numpy_step(params, x[k], labels[k])
        np.testing.assert_allclose(run.moments[k], moments, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(run.probabilities[k], p, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(run.gradients[k], g, rtol=1e-4, atol=2e-6)
        assert np.abs(g).max() > 1e-3                 # the gradient is not trivially 0
    pad = cnn.unpack(run.gradients[0])
    assert not pad[3][:, 10:].any() and not pad[4][10:].any()


def test_cnn_step_instances_independent(step):
    params, x, labels, run = step
    alone = cnn.cnn_step(params, x[1:2], labels[1:2])
    np.testing.assert_array_equal(alone.gradients[0].view(np.int32),
                                  run.gradients[1].view(np.int32))
    assert alone.cycles <= run.cycles < 1.1 * alone.cycles     # no barrier, compute-bound


def test_running_statistics_update_on_the_cpes(step):
    # the kernel's term (running - batch, one f32 subtraction) is exact; the update summed
    # across the instances by each strategy matches (1 - m) running + m mean(batch)
    run = step[3]
    np.testing.assert_array_equal(run.running_deltas.view(np.int32),
                                  (RUNNING - run.moments).view(np.int32))
    want = (1 - cnn.BN_MOMENTUM) * RUNNING.astype(float) \
        + cnn.BN_MOMENTUM * run.moments.astype(float).mean(axis=0)
    updated = {s: cnn.update_running(RUNNING, run, strategy=s) for s in ("PS", "RAR", "GS")}
    for sync in updated.values():
        np.testing.assert_allclose(sync.w, want, rtol=1e-6, atol=1e-7)
        assert sync.cycles > 0 and sync.dma_bytes > 0
    np.testing.assert_array_equal(updated["PS"].w.view(np.int32), updated["GS"].w.view(np.int32))
    assert np.abs(updated["GS"].w - RUNNING).max() > 1e-3      # it moved
    with pytest.raises(ArgumentError, match="running must be"):
        cnn.update_running(RUNNING[0], run)
    with pytest.raises(ArgumentTypeError, match="run must be a training step's CnnStep"):
        cnn.update_running(RUNNING, cnn.cnn_predict(step[0], RUNNING, step[1]))


@pytest.mark.slow              # the Python engine
def test_cnn_step_engines_agree():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 2, 8, 16)).astype(np.float32)
    labels = np.array([[3, 7]])
    params = cnn.init_params(3)
    c = cnn.cnn_step(params, x, labels, RUNNING, engine="c")
    py = cnn.cnn_step(params, x, labels, RUNNING, engine="python")
    np.testing.assert_array_equal(c.gradients.view(np.int32), py.gradients.view(np.int32))
    np.testing.assert_array_equal(c.running_deltas.view(np.int32),
                                  py.running_deltas.view(np.int32))
    assert c.cycles == py.cycles


def test_cnn_step_refuses_bad_input(step):
    params, x, labels, _ = step
    with pytest.raises(ArgumentError, match="params must be float32"):
        cnn.cnn_step(params[:5], x, labels)
    with pytest.raises(ArgumentError, match="x must be"):
        cnn.cnn_step(params, x[0], labels)
    with pytest.raises(ArgumentError, match="labels must be ints"):
        cnn.cnn_step(params, x, labels + 10)
    with pytest.raises(ArgumentTypeError, match="numpy arrays"):
        cnn.cnn_step(params, x.tolist(), labels)
    with pytest.raises(ArgumentError, match="H even"):
        cnn.cnn_step(params, x[:, :, :1], labels)
    with pytest.raises(ArgumentError, match="at most 8 samples"):
        cnn.cnn_step(params, np.zeros((1, 9, 2, 8, 16), np.float32), np.zeros((1, 9), int))
    with pytest.raises(ArgumentError, match="moments must be"):
        cnn.cnn_predict(params, np.zeros(16, np.float32), x)


def test_cnn_predict_uses_the_given_statistics(step):
    params, x, labels, run = step
    moments = np.stack([np.linspace(-0.5, 0.5, 16), np.linspace(0.5, 2, 16)]).astype(np.float32)
    pred = cnn.cnn_predict(params, moments, x)
    assert pred.gradients is None
    for k in range(3):
        np.testing.assert_allclose(pred.probabilities[k], numpy_step(params, x[k], None, moments),
                                   rtol=1e-5, atol=1e-6)
    batch = cnn.cnn_predict(params, run.moments[1], x[1:2])     # the batch's own statistics
    np.testing.assert_allclose(batch.probabilities[0], run.probabilities[1], rtol=1e-5,
                               atol=1e-6)
    assert pred.cycles < run.cycles / 2                         # no backward, no conv's dW


@pytest.mark.slow              # 40 steps and the test set's forward (337 s of wall time at load 35)
def test_kernel_trained_cnn_learns_digits():
    run = train_cnn(instances=4, batch=4, strategy="GS", steps=40, lr=0.5)
    assert np.mean(run.losses[-10:]) < np.mean(run.losses[:10]) - 0.3
    assert run.test_accuracy > 0.3                              # chance: 0.1
    assert run.moments.shape == (2, 16) and (run.moments[1] > 0).all()


def test_parax_train_command(tmp_path, capsys):
    out = tmp_path / "train.json"
    assert main(["parax", "train", "--instances", "2", "--batch", "2", "--steps", "2",
                 "--strategy", "RAR", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "test accuracy" in text and "samples / Mcycle" in text
    report = json.loads(out.read_text())
    assert report["steps"] == 2 and 0 <= report["test_accuracy"] <= 1
    assert report["compute_cycles"] > 0 and report["sync_bytes"] > 0
    assert main(["parax", "train", "--instances", "64", "--strategy", "PS"]) == 1
    assert "at most 63 instances" in capsys.readouterr().err
