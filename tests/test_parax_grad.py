"""The single-CPE backward of ParaX's conv 3x3 and [BN, ReLU] pair (kernels/parax/block.s
parax_conv_grad, parax_bn_relu_grad) against float64 numpy, both engines, bad input."""
import numpy as np
import pytest

from swsim.errors import ArgumentError, ArgumentTypeError
from swsim.hostlib.parax.block import bn_relu_backward, conv_backward


def case(samples, rows, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, rows, 8, 16)).astype(np.float32)
    dy = rng.standard_normal((samples, rows, 8, 16)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 16, 16)) / 12).astype(np.float32)
    return x, dy, w


def numpy_backward(x, dy, w):
    """float64: dx[p] = sum over taps of dy[p - d] W^T, dw per sample = sum_p x[p + d]^T dy[p]."""
    samples, rows = x.shape[:2]
    xp = np.zeros((samples, rows + 2, 10, 16))
    dyp = np.zeros_like(xp)
    xp[:, 1:rows + 1, 1:9], dyp[:, 1:rows + 1, 1:9] = x, dy
    dx = np.zeros(x.shape)
    dw = np.zeros((samples, 3, 3, 16, 16))
    for kh in range(3):
        for kw in range(3):
            dw[:, kh, kw] = np.einsum("nhwc,nhwo->nco", xp[:, kh:kh + rows, kw:kw + 8], dy)
            dx += dyp[:, 2 - kh:2 - kh + rows, 2 - kw:2 - kw + 8] @ w[kh, kw].T.astype(float)
    return dx, dw


def test_conv_backward_matches_float64_numpy():
    x, dy, w = case(samples=6, rows=3)
    run = conv_backward(dy, x, w, instances=3)
    dx, dw = numpy_backward(x, dy, w)
    np.testing.assert_allclose(run.dx, dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run.grads, dw.reshape(3, 2, 3, 3, 16, 16).sum(axis=1),
                               rtol=1e-5, atol=1e-4)
    alone = conv_backward(dy[2:4], x[2:4], w)            # instances are independent
    np.testing.assert_array_equal(alone.grads[0].view(np.int32), run.grads[1].view(np.int32))
    np.testing.assert_array_equal(alone.dx.view(np.int32), run.dx[2:4].view(np.int32))


@pytest.mark.slow              # the Python engine: ~25 s on the loaded 2-core host
def test_conv_backward_engines_agree():
    x, dy, w = case(samples=1, rows=1)
    c = conv_backward(dy, x, w, engine="c")
    py = conv_backward(dy, x, w, engine="python")
    np.testing.assert_array_equal(c.dx.view(np.int32), py.dx.view(np.int32))
    np.testing.assert_array_equal(c.grads.view(np.int32), py.grads.view(np.int32))
    assert c.cycles == py.cycles


def test_conv_backward_refuses_bad_input():
    x, dy, w = case(samples=4, rows=2)
    with pytest.raises(ArgumentError, match="divide the 4 samples, got 3"):
        conv_backward(dy, x, w, instances=3)
    with pytest.raises(ArgumentError, match="x and dy must be"):
        conv_backward(dy[:, :1], x, w)
    with pytest.raises(ArgumentError, match="weight must be float32"):
        conv_backward(dy, x, w[:2])
    with pytest.raises(ArgumentTypeError, match="instances must be an int"):
        conv_backward(dy, x, w, instances=2.0)


def test_bn_relu_backward_matches_float64_numpy():
    x, dy, _ = case(samples=4, rows=2)
    rng = np.random.default_rng(3)
    scale = (1 + rng.standard_normal(16) / 4).astype(np.float32)
    shift = (rng.standard_normal(16) / 4).astype(np.float32)
    run = bn_relu_backward(dy, x, scale, shift, instances=2)
    y = (x.astype(float) * scale + shift).astype(np.float32)
    g = np.where(np.signbit(y), 0.0, dy.astype(float))
    assert 0.2 < np.mean(g == 0) < 0.8                    # the mask is exercised
    np.testing.assert_array_equal(run.dx, (g * scale).astype(np.float32))
    sums = [(g[k:k + 2] * x[k:k + 2]).sum(axis=(0, 1, 2)) for k in (0, 2)]
    np.testing.assert_allclose(run.grads[:, 0], sums, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run.grads[:, 1], [g[k:k + 2].sum(axis=(0, 1, 2)) for k in (0, 2)],
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match="scale must be float32"):
        bn_relu_backward(dy, x, scale[:8], shift)


def test_bn_relu_backward_engines_agree():
    x, dy, _ = case(samples=1, rows=1)
    scale, shift = np.linspace(-1, 1, 16, dtype=np.float32), np.full(16, 0.1, np.float32)
    c = bn_relu_backward(dy, x, scale, shift, engine="c")
    py = bn_relu_backward(dy, x, scale, shift, engine="python")
    np.testing.assert_array_equal(c.dx.view(np.int32), py.dx.view(np.int32))
    np.testing.assert_array_equal(c.grads.view(np.int32), py.grads.view(np.int32))
    assert c.cycles == py.cycles
