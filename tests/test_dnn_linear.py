"""FC / linear layers through swGEMM (hostlib/dnn/linear.py): forward and the three gradients
against float64 numpy references, the references' gradients by finite differences, errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.hostlib import dnn

DTYPES = [np.float32, np.float64]
EPS = {np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}


def reference_forward(x, w, b):
    return x @ w.T + (0 if b is None else b)


def reference_backward(dy, x, w):
    return dy @ w, dy.T @ x, dy.sum(axis=0)


def assert_product_close(got, want, dtype, k, magnitude):
    """Within the rounding of a k-term dot product of entries of size `magnitude`."""
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * (k + 2) * EPS[dtype] * magnitude)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(1, 40), st.integers(1, 70), st.integers(1, 40),
       st.booleans(), st.integers(0, 2 ** 32 - 1))
def test_forward_and_backward_match_reference(dtype, batch, inputs, outputs, with_bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, inputs)).astype(dtype)
    w = rng.standard_normal((outputs, inputs)).astype(dtype)
    b = rng.standard_normal(outputs).astype(dtype) if with_bias else None
    dy = rng.standard_normal((batch, outputs)).astype(dtype)
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    y, stats = dnn.linear_forward(x, w, b)
    assert y.dtype == dtype and y.shape == (batch, outputs)
    big = 16.0     # bound on |entries| products of standard normals, generously
    assert_product_close(y, reference_forward(x64, w64, b), dtype, inputs + 1, big)
    assert stats.flops == 2 * batch * inputs * outputs + (2 * batch * outputs if with_bias else 0)
    (dx, dw, db), _ = dnn.linear_backward(dy, x, w)
    want = reference_backward(dy64, x64, w64)
    for got, ref, k in zip((dx, dw, db), want, (outputs, batch, batch)):
        assert got.dtype == dtype and got.shape == ref.shape
        assert_product_close(got, ref, dtype, k, big)


def test_reference_gradients_by_finite_differences():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((4, 6)), rng.standard_normal((3, 6)), rng.standard_normal(3)
    g = rng.standard_normal((4, 3))           # loss = sum(g * y)
    dx, dw, db = reference_backward(g, x, w)
    h = 1e-6
    for array, grad in ((x, dx), (w, dw), (b, db)):
        numeric = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            saved = array[index]
            array[index] = saved + h
            up = np.sum(g * reference_forward(x, w, b))
            array[index] = saved - h
            down = np.sum(g * reference_forward(x, w, b))
            array[index] = saved
            numeric[index] = (up - down) / (2 * h)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_stats_report_gflops_and_efficiency():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((128, 256)), rng.standard_normal((256, 256))
    _, stats = dnn.linear_forward(x, w, np.zeros(256))
    assert stats.gflops == pytest.approx(stats.flops / stats.seconds / 1e9)
    assert 0 < stats.efficiency < 1 and len(stats.parts) == 2
    assert stats.cycles == sum(p.cycles for p in stats.parts)


@pytest.mark.parametrize("call, message", [
    (lambda: dnn.linear_forward(np.ones((2, 3)), np.ones((4, 5))), r"x must be \(B, I\)"),
    (lambda: dnn.linear_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones(3)), r"b must be \(4,\)"),
    (lambda: dnn.linear_forward(np.ones(3), np.ones((4, 3))), r"x must be \(B, I\)"),
    (lambda: dnn.linear_backward(np.ones((2, 5)), np.ones((2, 3)), np.ones((4, 3))),
     r"dy must be \(B, O\)"),
    (lambda: dnn.linear_forward(np.ones((2, 3)), np.ones((4, 3)), cgs=2), "one core group"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(dnn.DnnError, match=message):
        call()
