"""dnn.adam_update (kernels/dnn/stream.s adam_moments / adam_step, after an `add` pass for the
weight decay): values against a float64 numpy reference, edge values, odd sizes, the same bits
on 1, 2 and 4 core groups and on both engines, errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.errors import ArgumentTypeError
from swsim.hostlib import dnn

DTYPES = [np.float32, np.float64]


def reference(w, g, m, v, lr_t, beta1, beta2, eps, weight_decay):
    """Caffe's Adam in float64, with each element's magnitude: the sum of the absolute terms
    of m' and v' (what their rounding errors are relative to; m' may cancel), and |w| plus the
    step with m' replaced by its magnitude (an error in m' moves the step by that much)."""
    w, g, m, v = (np.asarray(x, np.float64) for x in (w, g, m, v))
    g2 = g + weight_decay * w
    g_size = np.abs(g) + np.abs(weight_decay * w)
    m2 = beta1 * m + (1 - beta1) * g2
    v2 = beta2 * v + (1 - beta2) * g2 * g2
    step = lr_t * m2 / (np.sqrt(v2) + eps)
    w2 = w - step
    m_size = beta1 * np.abs(m) + (1 - beta1) * g_size
    sizes = (np.abs(w) + lr_t * m_size / (np.sqrt(v2) + eps), m_size,
             beta2 * np.abs(v) + (1 - beta2) * g_size ** 2)
    return (w2, m2, v2), sizes


def check(got, want, sizes, dtype):
    """Each of w', m', v' within 8 roundings of its terms' size. Float32: g' is rounded once
    between the passes, m' and v' once each when stored, so the step lr_t m'/(sqrt(v')+eps) is
    off by about 2.5 roundings relative and w' rounds once more; the kernel's own arithmetic is
    double. Float64: a few double roundings per value."""
    unit = np.finfo(dtype).eps / 2
    for name, a, b, size in zip(("w'", "m'", "v'"), got, want, sizes):
        assert a.dtype == dtype and a.shape == b.shape, name
        error = np.abs(a.astype(np.float64) - b)
        bound = 8 * unit * size + float(np.finfo(dtype).smallest_subnormal)
        assert np.all(error <= bound), (name, float(np.max(error / np.maximum(bound, 1e-300))))


def state(rng, n, scale, dtype):
    w, g, m = (rng.standard_normal(n) * scale for _ in range(3))
    v = np.abs(rng.standard_normal(n)) * scale * scale      # a second moment: >= 0
    return [x.astype(dtype) for x in (w, g, m, v)]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from(DTYPES), st.integers(1, 5000),
       st.sampled_from([1e-3, 1.0, 1e4]), st.floats(0, 0.1), st.floats(0, 0.99),
       st.floats(0.9, 0.9999), st.sampled_from([1e-8, 1e-4, 0.0]),
       st.sampled_from([0.0, 5e-4, 0.1]))
def test_adam_update_is_caffes_adam(seed, dtype, n, scale, lr_t, beta1, beta2, eps,
                                    weight_decay):
    w, g, m, v = state(np.random.default_rng(seed), n, scale, dtype)
    got, stats = dnn.adam_update(w, g, m, v, lr_t, beta1, beta2, eps, weight_decay)
    check(got, *reference(w, g, m, v, lr_t, beta1, beta2, eps, weight_decay), dtype)
    es = np.dtype(dtype).itemsize
    assert stats.bytes_moved == 7 * n * es                   # 4 streams in, 3 out
    assert stats.passes == (3 if weight_decay else 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_edge_values(dtype):
    n = 9
    zeros = np.zeros(n, dtype)
    w = np.linspace(-3, 3, n).astype(dtype)
    # zero gradient and moments: the step is 0 / (0 + eps), w unchanged to the bit
    (w2, m2, v2), _ = dnn.adam_update(w, zeros, zeros, zeros, 0.1, 0.9, 0.999, 1e-8)
    assert w2.tobytes() == w.tobytes() and not m2.any() and not v2.any()
    # large gradients (g'^2 far beyond float32's range is computed in double; v' fits)
    g = np.full(n, 1e15, dtype) * np.sign(w + 0.5).astype(dtype)
    got, _ = dnn.adam_update(w, g, zeros, zeros, 0.1, 0.9, 0.999, 1e-8)
    check(got, *reference(w, g, zeros, zeros, 0.1, 0.9, 0.999, 1e-8, 0.0), dtype)
    # first step from zero moments: the step is lr_t (1 - b1) / sqrt(1 - b2) sign(g)
    np.testing.assert_allclose(got[0], w - 0.1 * 0.1 / np.sqrt(0.001) * np.sign(g),
                               rtol=1e-6)
    # v = 0 and eps = 0 where m' = 0: 0 / 0 is NaN as in numpy (and Caffe)
    (w3, _, _), _ = dnn.adam_update(w, zeros, zeros, zeros, 0.1, 0.9, 0.999, 0.0)
    assert np.isnan(w3).all()


@pytest.mark.parametrize("n", [1, 63, 64 * 32 + 1, 3 * 2048 + 5])
def test_odd_sizes_and_shapes(n):
    rng = np.random.default_rng(n)
    w, g, m, v = (x.reshape(n, 1) for x in state(rng, n, 1.0, np.float32))
    got, _ = dnn.adam_update(w, g, m, v, 0.01, 0.9, 0.999, 1e-8, 1e-4)
    assert all(a.shape == (n, 1) for a in got)
    check(got, *reference(w, g, m, v, 0.01, 0.9, 0.999, 1e-8, 1e-4), np.float32)


def test_same_bits_on_1_2_4_core_groups_and_both_engines():
    rng = np.random.default_rng(7)
    w, g, m, v = state(rng, 20_001, 1.0, np.float32)
    args = (w, g, m, v, 0.003, 0.9, 0.999, 1e-8, 5e-4)
    one, single = dnn.adam_update(*args)
    for cgs in (2, 4):
        many, _ = dnn.adam_update(*args, cgs=cgs)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(one, many)), cgs
    small = [x[:777] for x in (w, g, m, v)] + list(args[4:])
    c, s1 = dnn.adam_update(*small, engine="c")
    p, s2 = dnn.adam_update(*small, engine="python")
    assert all(a.tobytes() == b.tobytes() for a, b in zip(c, p)) and s1.cycles == s2.cycles
    assert 0 < single.bandwidth_ratio <= 1.0


@pytest.mark.parametrize("call, message", [
    (lambda: dnn.adam_update(np.ones(3), np.ones(3), np.ones(4), np.ones(3), 0.1, 0.9, 0.999,
                             1e-8), "one shape"),
    (lambda: dnn.adam_update(np.ones(3), np.ones(3), np.ones(3, np.float32), np.ones(3), 0.1,
                             0.9, 0.999, 1e-8), "float64 like the other"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(dnn.DnnError, match=message):
        call()


def test_a_wrong_type_is_an_argument_type_error():
    with pytest.raises(ArgumentTypeError, match="lr_t must be a real number"):
        dnn.adam_update(np.ones(3), np.ones(3), np.ones(3), np.ones(3), "0.1", 0.9, 0.999, 1e-8)
