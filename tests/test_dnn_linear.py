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
    (part,) = stats.per_cg
    assert 0 < stats.efficiency < 1 and len(part.parts) == 2
    assert stats.cycles == part.cycles == sum(p.cycles for p in part.parts)


@pytest.mark.parametrize("call, message", [
    (lambda: dnn.linear_forward(np.ones((2, 3)), np.ones((4, 5))), r"x must be \(B, I\)"),
    (lambda: dnn.linear_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones(3)), r"bias must be \(4,\)"),
    (lambda: dnn.linear_forward(np.ones(3), np.ones((4, 3))), r"x must be \(B, I\)"),
    (lambda: dnn.linear_backward(np.ones((2, 5)), np.ones((2, 3)), np.ones((4, 3))),
     r"dy must be \(B, O\)"),
    (lambda: dnn.linear_forward(np.ones((2, 3)), np.ones((4, 3)), cgs=5), "cgs must be"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(dnn.DnnError, match=message):
        call()


@pytest.mark.parametrize("dtype", DTYPES)
def test_core_groups_split_rows_and_outputs(dtype):
    """cgs = 2, 4: y and dx by batch rows, dw and db by outputs (5 rows: one CG idles in
    dx's split); every result within the single CG's rounding bound of the reference (the
    blocking, and so the order of a sum, may differ with the slice's shape); the chip's
    cycles are the slowest CG's and below the single CG's."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((5, 70)).astype(dtype), rng.standard_normal((33, 70)).astype(dtype)
    b, dy = rng.standard_normal(33).astype(dtype), rng.standard_normal((5, 33)).astype(dtype)
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    y1, s1 = dnn.linear_forward(x, w, b)
    g1, t1 = dnn.linear_backward(dy, x, w)
    for cgs in (2, 4):
        y, stats = dnn.linear_forward(x, w, b, cgs=cgs)
        assert_product_close(y, reference_forward(x64, w64, b), dtype, 71, 16.0)
        assert stats.cgs == cgs and stats.cycles == max(p.cycles for p in stats.per_cg)
        assert stats.cycles < s1.cycles and stats.flops == s1.flops
        grads, chip = dnn.linear_backward(dy, x, w, cgs=cgs)
        for got, ref, k in zip(grads, reference_backward(dy64, x64, w64), (33, 5, 5)):
            assert_product_close(got, ref, dtype, k, 16.0)
        assert chip.cycles < t1.cycles and chip.flops == t1.flops
