"""The small CNN's whole SGD step on one CPE per ParaX instance (kernels/parax/cnn.s,
hostlib/parax/cnn.py) against float64 numpy: loss-head probabilities, every parameter's
gradient, instances independent, both engines, bad input."""
import numpy as np
import pytest

from swsim.errors import ArgumentError, ArgumentTypeError
from swsim.hostlib.parax import cnn


def numpy_step(params, x, labels):
    """float64: probabilities (b, 10) and the mean cross-entropy's gradient of one instance."""
    w, scale, shift, wfc, bfc = (a.astype(float) for a in cnn.unpack(params))
    b, rows = x.shape[:2]
    xp = np.zeros((b, rows + 2, 10, 16))
    xp[:, 1:rows + 1, 1:9] = x
    conv = sum(xp[:, kh:kh + rows, kw:kw + 8] @ w[kh, kw] for kh in range(3) for kw in range(3))
    y = conv * scale + shift
    act = np.maximum(y, 0)
    f = act.mean(axis=(1, 2))
    z = f @ wfc[:, :10] + bfc[:10]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    dz = (p - np.eye(10)[labels]) / b
    g = [np.zeros(a.shape) for a in (w, scale, shift, wfc, bfc)]
    g[3][:, :10], g[4][:10] = f.T @ dz, dz.sum(axis=0)
    da = np.broadcast_to((dz @ wfc[:, :10].T)[:, None, None, :] / (rows * 8), act.shape)
    dy = np.where(y > 0, da, 0)
    g[1], g[2] = (dy * conv).sum(axis=(0, 1, 2)), dy.sum(axis=(0, 1, 2))
    dconv = dy * scale
    for kh in range(3):
        for kw in range(3):
            g[0][kh, kw] = np.einsum("nhwc,nhwo->co", xp[:, kh:kh + rows, kw:kw + 8], dconv)
    return p, np.concatenate([a.ravel() for a in g])


@pytest.fixture(scope="module")
def step():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 2, 8, 16)).astype(np.float32)
    labels = rng.integers(0, 10, (3, 2))
    params = cnn.init_params(2)
    return params, x, labels, cnn.cnn_step(params, x, labels)


def test_cnn_step_matches_float64_numpy(step):
    params, x, labels, run = step
    for k in range(3):
        p, g = numpy_step(params, x[k], labels[k])
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


@pytest.mark.slow              # the Python engine
def test_cnn_step_engines_agree():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 1, 8, 16)).astype(np.float32)
    labels = np.array([[3, 7]])
    params = cnn.init_params(3)
    c = cnn.cnn_step(params, x, labels, engine="c")
    py = cnn.cnn_step(params, x, labels, engine="python")
    np.testing.assert_array_equal(c.gradients.view(np.int32), py.gradients.view(np.int32))
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
