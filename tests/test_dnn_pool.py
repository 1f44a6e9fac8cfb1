"""2-D pooling (hostlib/dnn/pool.py, kernels/dnn/pool.inc) against a loop-by-loop float64
reference with PyTorch's rules (max: NaN wins, the first maximum's index is kept, padding never
wins; average: divide by kernel², count_include_pad), and the reference's gradients by finite
differences."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.hostlib import dnn

DTYPES = [np.float32, np.float64]


def windows(shape, kernel, stride, padding):
    h, w = shape[-2:]
    oh, ow = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * stride - padding, j * stride - padding
            yield i, j, range(max(h0, 0), min(h0 + kernel, h)), range(max(w0, 0), min(w0 + kernel, w))


def reference_forward(x, kernel, stride, padding, mode):
    x = np.asarray(x, np.float64)
    h, w = x.shape[-2:]
    oh, ow = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
    y = np.zeros(x.shape[:-2] + (oh, ow))
    argmax = np.zeros(y.shape, np.int64)
    for plane in np.ndindex(*x.shape[:-2]):
        for i, j, rows, cols in windows(x.shape, kernel, stride, padding):
            if mode == "avg":
                y[plane + (i, j)] = x[plane][rows.start:rows.stop, cols.start:cols.stop].sum() \
                    / kernel ** 2
                continue
            best, index = -np.inf, rows[0] * w + cols[0]
            for r in rows:
                for c in cols:
                    v = x[plane + (r, c)]
                    if (v > best or np.isnan(v)) and not np.isnan(best):
                        best, index = v, r * w + c
            y[plane + (i, j)], argmax[plane + (i, j)] = best, index
    return y, argmax


def reference_backward(dy, x_shape, argmax, kernel, stride, padding, mode):
    dx = np.zeros(x_shape)
    w = x_shape[-1]
    for plane in np.ndindex(*x_shape[:-2]):
        for i, j, rows, cols in windows(x_shape, kernel, stride, padding):
            if mode == "max":
                index = argmax[plane + (i, j)]
                dx[plane + (index // w, index % w)] += dy[plane + (i, j)]
            else:
                dx[plane][rows.start:rows.stop, cols.start:cols.stop] += \
                    dy[plane + (i, j)] / kernel ** 2
    return dx


@st.composite
def pooling_cases(draw):
    kernel = draw(st.integers(1, 4))
    stride = draw(st.integers(1, 3))
    padding = draw(st.integers(0, kernel // 2))
    h = draw(st.integers(max(1, kernel - 2 * padding), 13))
    w = draw(st.integers(max(1, kernel - 2 * padding), 13))
    lead = draw(st.sampled_from([(), (3,), (2, 3), (1, 70)]))
    return lead + (h, w), kernel, stride, padding


@settings(max_examples=25, deadline=None)
@given(pooling_cases(), st.sampled_from(DTYPES), st.sampled_from(["max", "avg"]),
       st.integers(0, 2 ** 32 - 1))
def test_forward_matches_reference(case, dtype, mode, seed):
    shape, kernel, stride, padding = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    got, stats = dnn.pool2d_forward(x, kernel, stride, padding, mode=mode,
                                    return_indices=mode == "max")
    want, want_argmax = reference_forward(x, kernel, stride, padding, mode)
    if mode == "max":
        got, argmax = got
        np.testing.assert_array_equal(argmax, want_argmax)
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        # a window's sum may cancel: the error is relative to the terms, not the result
        np.testing.assert_allclose(got, want, rtol=0, atol=2 * (kernel ** 2 + 1) *
                                   np.finfo(dtype).eps * np.abs(x).max())
    assert got.dtype == dtype and got.shape == want.shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_edge_values(dtype):
    x = np.array([[[0.0, -0.0, np.nan, 1.0],
                   [-np.inf, -np.inf, 2.0, np.inf],
                   [np.finfo(dtype).max, 5.0, -np.inf, -np.inf],
                   [1.0, 1.0, -np.inf, -np.inf]]], dtype)
    (y, argmax), _ = dnn.pool2d_forward(x, 2, 2, return_indices=True)
    want, want_argmax = reference_forward(x, 2, 2, 0, "max")
    np.testing.assert_array_equal(y, want.astype(dtype))      # NaN wins, -inf window stays -inf
    np.testing.assert_array_equal(argmax, want_argmax)
    assert np.isnan(y[0, 0, 1]) and y[0, 1, 1] == -np.inf and argmax[0, 1, 1] == 10


@pytest.mark.parametrize("kernel, stride, padding", [(3, 2, 1), (2, 2, 0), (3, 1, 1)])
def test_many_units_per_cpe_and_core_groups_agree(kernel, stride, padding):
    """Several units per CPE (each parity's unit record and buffers reused), ties, signed
    zeros and NaN; cgs = 1, 2, 4 give the same bits."""
    rng = np.random.default_rng(kernel + 10 * stride)
    x = rng.integers(-3, 4, (4, 70, 9, 11)).astype(np.float32)     # many ties
    x[0, 0, 1, 1], x[1, 5, 2, 3], x[3, 69, 8, 10] = np.nan, -0.0, np.inf
    want, want_argmax = reference_forward(x, kernel, stride, padding, "max")
    for cgs in (1, 2, 4):
        (y, argmax), stats = dnn.pool2d_forward(x, kernel, stride, padding,
                                                return_indices=True, cgs=cgs)
        np.testing.assert_array_equal(y, want.astype(np.float32))
        np.testing.assert_array_equal(argmax, want_argmax)
        avg, _ = dnn.pool2d_forward(x, kernel, stride, padding, mode="avg", cgs=cgs)
        if cgs == 1:
            first = avg
        assert avg.tobytes() == first.tobytes() and stats.cgs == cgs
    np.testing.assert_allclose(first, reference_forward(x, kernel, stride, padding, "avg")[0],
                               rtol=1e-6, atol=1e-6)


def test_backward_core_groups_give_the_same_bits():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 70, 9, 11))
    (y, argmax), _ = dnn.pool2d_forward(x, 3, 2, 1, return_indices=True)
    dy = rng.standard_normal(y.shape)
    for mode in ("max", "avg"):
        first, _ = dnn.pool2d_backward(dy, x.shape, 3, 2, 1, mode=mode, indices=argmax)
        for cgs in (2, 4):
            dx, stats = dnn.pool2d_backward(dy, x.shape, 3, 2, 1, mode=mode, indices=argmax,
                                            cgs=cgs)
            assert dx.tobytes() == first.tobytes() and stats.cgs == cgs


def test_large_planes_are_cut_into_row_blocks():
    x = np.random.default_rng(5).standard_normal((2, 130, 150)).astype(np.float64)
    (y, argmax), stats = dnn.pool2d_forward(x, 3, 2, 1, return_indices=True)
    assert stats.rows_per_unit < y.shape[-2]
    want, want_argmax = reference_forward(x, 3, 2, 1, "max")
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(argmax, want_argmax)


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_reference_gradients_by_finite_differences(mode):
    rng = np.random.default_rng(6)
    x = rng.permutation(60).astype(np.float64).reshape(1, 6, 10) / 7   # distinct: max is smooth
    g = rng.standard_normal(reference_forward(x, 3, 2, 1, mode)[0].shape)
    _, argmax = reference_forward(x, 3, 2, 1, mode)
    dx = reference_backward(g, x.shape, argmax, 3, 2, 1, mode)
    numeric = np.zeros_like(x)
    h = 1e-6
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        up = np.sum(g * reference_forward(x, 3, 2, 1, mode)[0])
        x[index] = saved - h
        down = np.sum(g * reference_forward(x, 3, 2, 1, mode)[0])
        x[index] = saved
        numeric[index] = (up - down) / (2 * h)
    np.testing.assert_allclose(dx, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("call, message", [
    (lambda: dnn.pool2d_forward(np.ones((4, 4)), 2, mode="min"), "mode must be one of"),
    (lambda: dnn.pool2d_forward(np.ones(4), 2), "at least 2 dimensions"),
    (lambda: dnn.pool2d_forward(np.ones((4, 4)), 0), "kernel_size must be an integer >= 1"),
    (lambda: dnn.pool2d_forward(np.ones((4, 4)), 2, padding=2), "at most kernel_size / 2"),
    (lambda: dnn.pool2d_forward(np.ones((2, 2)), 3), "larger than the 2 x 2 input"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(dnn.DnnError, match=message):
        call()


@settings(max_examples=25, deadline=None)
@given(pooling_cases(), st.sampled_from(DTYPES), st.sampled_from(["max", "avg"]),
       st.integers(0, 2 ** 32 - 1))
def test_backward_matches_reference(case, dtype, mode, seed):
    shape, kernel, stride, padding = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    forward, _ = dnn.pool2d_forward(x, kernel, stride, padding, mode=mode,
                                  return_indices=mode == "max")
    argmax = forward[1] if mode == "max" else None
    y = forward[0] if mode == "max" else forward
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx, stats = dnn.pool2d_backward(dy, x.shape, kernel, stride, padding, mode=mode,
                                    indices=argmax)
    want = reference_backward(dy.astype(np.float64), x.shape, argmax, kernel, stride, padding,
                              mode)
    assert dx.dtype == dtype and dx.shape == x.shape
    overlaps = (-(-kernel // stride)) ** 2     # contributions one element can receive
    np.testing.assert_allclose(dx, want, rtol=0,
                               atol=4 * overlaps * np.finfo(dtype).eps * np.abs(dy).max())


def test_backward_of_large_planes_in_row_blocks():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 150, 170))
    (y, argmax), _ = dnn.pool2d_forward(x, 3, 1, 1, return_indices=True)
    dy = rng.standard_normal(y.shape)
    dx, stats = dnn.pool2d_backward(dy, x.shape, 3, 1, 1, indices=argmax)
    assert stats.rows_per_unit < 150
    np.testing.assert_allclose(dx, reference_backward(dy, x.shape, argmax, 3, 1, 1, "max"),
                               rtol=1e-14, atol=1e-14)
    dx, _ = dnn.pool2d_backward(dy, x.shape, 3, 1, 1, mode="avg")
    np.testing.assert_allclose(dx, reference_backward(dy, x.shape, None, 3, 1, 1, "avg"),
                               rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("call, message", [
    (lambda: dnn.pool2d_backward(np.ones((2, 2)), (4, 4), 2), "needs the forward's indices"),
    (lambda: dnn.pool2d_backward(np.ones((2, 2)), (4, 4), 2, indices=np.full((2, 2), 16)),
     "indices must index"),
    (lambda: dnn.pool2d_backward(np.ones((2, 2)), (4, 4), 2, indices=np.full((2, 2), 1.5)),
     "indices must be integers"),
    (lambda: dnn.pool2d_backward(np.ones((3, 2)), (4, 4), 2, mode="avg"),
     "forward output's shape"),
])
def test_backward_bad_arguments_are_refused(call, message):
    with pytest.raises(dnn.DnnError, match=message):
        call()


def test_same_bits_and_cycles_on_both_engines():
    x = np.random.default_rng(9).standard_normal((2, 7, 9)).astype(np.float32)
    runs = [dnn.pool2d_forward(x, 3, 2, 1, return_indices=True, engine=engine)
            for engine in ("c", "python")]
    (y1, a1), s1 = runs[0]
    (y2, a2), s2 = runs[1]
    assert y1.tobytes() == y2.tobytes() and np.array_equal(a1, a2) and s1.cycles == s2.cycles
    t1, c1 = dnn.transform(x.reshape(1, 2, 7, 9), "NCHW", "RCNB", engine="c")
    t2, c2 = dnn.transform(x.reshape(1, 2, 7, 9), "NCHW", "RCNB", engine="python")
    assert t1.tobytes() == t2.tobytes() and c1.cycles == c2.cycles
