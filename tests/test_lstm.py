"""LSTM forward (tensorized and baseline) and backward on the VM against a numpy float64
reference; the reference's gradients are checked by finite differences."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.hostlib import dnn
from swsim.hostlib.dnn import lstm
from swsim.vm import Machine

TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def reference_forward(x, h0, c0, W, R, b):
    """float64: (y, h_T, c_T) and the cache (gates, cells) of the backward reference."""
    x, h0, c0, W, R, b = (np.asarray(a, np.float64) for a in (x, h0, c0, W, R, b))
    hidden = R.shape[1]
    h, c, ys, gates, cells = h0, c0, [], [], []
    for x_t in x:
        z = x_t @ W.T + h @ R.T + b
        i, f = _sigmoid(z[:, :hidden]), _sigmoid(z[:, hidden:2 * hidden])
        g, o = np.tanh(z[:, 2 * hidden:3 * hidden]), _sigmoid(z[:, 3 * hidden:])
        c = f * c + i * g
        h = o * np.tanh(c)
        ys.append(h)
        gates.append(np.concatenate([i, f, g, o], axis=1))
        cells.append(c)
    return (np.stack(ys), h, c), (np.stack(gates), np.stack(cells))


def reference_backward(dy, dh_n, dc_n, x, h0, c0, W, R, b):
    """float64 gradients (dx, dh0, dc0, dW, dR, db) of sum(dy y) + sum(dh_n h_T) + sum(dc_n c_T)."""
    (y, _, _), (gates, cells) = reference_forward(x, h0, c0, W, R, b)
    x, h0, c0, W, R = (np.asarray(a, np.float64) for a in (x, h0, c0, W, R))
    hidden = R.shape[1]
    dh, dc = np.array(dh_n, np.float64), np.array(dc_n, np.float64)
    d_pre = np.zeros(gates.shape)
    for t in reversed(range(x.shape[0])):
        i, f, g, o = (gates[t][:, k * hidden:(k + 1) * hidden] for k in range(4))
        c_prev = c0 if t == 0 else cells[t - 1]
        dh = dh + dy[t]
        tc = np.tanh(cells[t])
        dc = dc + dh * o * (1 - tc ** 2)
        d_pre[t] = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                                   dc * i * (1 - g ** 2), dh * tc * o * (1 - o)], axis=1)
        dc = dc * f
        dh = d_pre[t] @ R
    flat = d_pre.reshape(-1, 4 * hidden)
    h_prev = np.concatenate([h0[None], y[:-1]]).reshape(-1, hidden)
    return ((flat @ W).reshape(x.shape), dh, dc, flat.T @ x.reshape(-1, x.shape[2]),
            flat.T @ h_prev, flat.sum(axis=0))


def _case(rng, steps, batch, inputs, hidden, dtype, scale=0.5):
    shapes = [(steps, batch, inputs), (batch, hidden), (batch, hidden), (4 * hidden, inputs),
              (4 * hidden, hidden), (4 * hidden,)]
    return [(rng.normal(size=s) * (scale if k in (3, 4) else 1)).astype(dtype)
            for k, s in enumerate(shapes)]


def _close(got, want, dtype, what):
    scale = max(1.0, float(np.max(np.abs(want))))
    err = float(np.max(np.abs(np.asarray(got, np.float64) - want))) / scale
    assert err <= TOL[dtype], f"{what}: error {err:.3g} > {TOL[dtype]}"


shapes = st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 20), st.integers(1, 40))


@pytest.mark.parametrize("algo", lstm.ALGOS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=3, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2 ** 16))
def test_forward_matches_reference(algo, dtype, shape, seed):
    args = _case(np.random.default_rng(seed), *shape, dtype)
    (y, h_n, c_n), stats = dnn.lstm_forward(*args, algo=algo)
    (ry, rh, rc), _ = reference_forward(*args)
    assert y.dtype == dtype and y.shape == ry.shape
    for got, want, what in ((y, ry, "y"), (h_n, rh, "h_T"), (c_n, rc, "c_T")):
        _close(got, want, dtype, what)
    assert stats.algo == algo and stats.split["gemm"] > 0 and stats.split["elementwise"] > 0


@pytest.mark.parametrize("kc, prefetch", [(8, True), (8, False), (2, True), (1, False)])
def test_tensorized_every_ldm_plan(kc, prefetch):
    """R^T resident (kc = Hb = 8) or streamed in chunks, I prefetched or widened in place."""
    rng = np.random.default_rng(kc)
    for dtype in (np.float32, np.float64):
        args = _case(rng, 3, 40, 7, 50, dtype)
        machine = Machine()
        p = lstm.plan(40, 50, np.dtype(dtype).itemsize, machine.config, kc=kc,
                      prefetch=prefetch)
        assert (p.kc, p.resident, p.prefetch) == (kc, kc == 8, prefetch)
        (y, _, c_n), _ = lstm._tensorized(*args, p, machine, "c")
        (ry, _, rc), _ = reference_forward(*args)
        _close(y, ry, dtype, "y")
        _close(c_n, rc, dtype, "c_T")


def test_plan_streams_r_when_it_does_not_fit_and_falls_back_past_ldm():
    config = Machine().config
    small = lstm.plan(64, 64, 4, config)
    assert small.resident and small.prefetch
    big = lstm.plan(128, 384, 4, config)
    assert not big.resident and big.kc < big.hb
    assert lstm.plan(1024, 1024, 8, config) is None


def test_fallback_to_baseline_is_reported(monkeypatch):
    """No LDM plan (as for plan(1024, 1024, 8) above): the baseline answers, and says so."""
    monkeypatch.setattr(lstm, "plan", lambda *a, **k: None)
    args = _case(np.random.default_rng(3), 2, 3, 2, 5, np.float64)
    (y, _, _), stats = dnn.lstm_forward(*args)
    assert stats.algo == "baseline" and "LDM" in stats.fallback
    _close(y, reference_forward(*args)[0][0], np.float64, "y")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=3, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2 ** 16), with_reserve=st.booleans())
def test_backward_matches_reference(dtype, shape, seed, with_reserve):
    rng = np.random.default_rng(seed)
    args = _case(rng, *shape, dtype)
    steps, batch, _, hidden = shape
    dy = rng.normal(size=(steps, batch, hidden)).astype(dtype)
    dh_n, dc_n = (rng.normal(size=(batch, hidden)).astype(dtype) for _ in range(2))
    reserve = dnn.lstm_forward(*args, algo="baseline")[1].reserve if with_reserve else None
    grads, stats = dnn.lstm_backward(dy, *args, dh_n=dh_n, dc_n=dc_n, reserve=reserve)
    want = reference_backward(dy, dh_n, dc_n, *args)
    for got, ref, what in zip(grads, want, ("dx", "dh0", "dc0", "dW", "dR", "db")):
        assert got.shape == ref.shape and got.dtype == dtype, what
        _close(got, ref, dtype, what)
    assert stats.split["gemm"] > 0 and stats.split["elementwise"] > 0


def test_reference_gradients_by_finite_differences():
    rng = np.random.default_rng(7)
    args = _case(rng, 3, 2, 3, 4, np.float64)
    dy = rng.normal(size=(3, 2, 4))
    dh_n, dc_n = rng.normal(size=(2, 4)), rng.normal(size=(2, 4))

    def loss(*a):
        (y, h, c), _ = reference_forward(*a)
        return np.sum(dy * y) + np.sum(dh_n * h) + np.sum(dc_n * c)

    grads = reference_backward(dy, dh_n, dc_n, *args)
    order = (0, 1, 2, 3, 4, 5)            # dx, dh0, dc0, dW, dR, db
    eps = 1e-6
    for k, grad in zip(order, grads):
        for index in [tuple(rng.integers(0, n) for n in args[k].shape) for _ in range(4)]:
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[k][index] += eps
            minus[k][index] -= eps
            numeric = (loss(*plus) - loss(*minus)) / (2 * eps)
            assert abs(numeric - grad[index]) < 1e-7 * max(1, abs(numeric)), (k, index)


def test_bad_arguments_are_refused():
    args = _case(np.random.default_rng(0), 1, 2, 3, 4, np.float32)
    with pytest.raises(dnn.DnnError, match="algo"):
        dnn.lstm_forward(*args, algo="cudnn")
    with pytest.raises(dnn.DnnError, match="R must be"):
        dnn.lstm_forward(*args[:4], args[4][:5], args[5])
    with pytest.raises(dnn.DnnError, match="W must be"):
        dnn.lstm_forward(*args[:3], args[3][:, :2], *args[4:])
    with pytest.raises(dnn.DnnError, match="float64"):
        dnn.lstm_forward(args[0].astype(np.float64), *args[1:])
    with pytest.raises(dnn.DnnError, match="dy must be"):
        dnn.lstm_backward(np.zeros((2, 2, 4), np.float32), *args)
    with pytest.raises(dnn.DnnError, match="cgs"):
        dnn.lstm_forward(*args, cgs=5)
    with pytest.raises(dnn.DnnError, match="cgs"):
        dnn.lstm_backward(np.zeros((1, 2, 4), np.float32), *args, cgs=0)


@pytest.mark.parametrize("algo", lstm.ALGOS)
def test_core_groups_run_slices_of_the_batch(algo):
    """cgs = 3 on B = 7: each CG's slice (3, 2, 2 sequences) gives the bits a run of that
    slice alone gives; the chip's cycles are the slowest slice's."""
    args = _case(np.random.default_rng(3), 3, 7, 5, 8, np.float32)
    (y, h, c), stats = dnn.lstm_forward(*args, algo=algo, cgs=3)
    assert stats.cgs == 3 and stats.rows == [(0, 2), (2, 4), (4, 7)]
    assert ("plan" in stats.details) == (algo == "tensorized")
    for (lo, hi), part in zip(stats.rows, stats.per_cg):
        x, h0, c0 = (np.ascontiguousarray(a[..., lo:hi, :]) for a in args[:3])
        (y_s, h_s, c_s), alone = dnn.lstm_forward(x, h0, c0, *args[3:], algo=algo)
        assert np.array_equal(y[:, lo:hi], y_s) and np.array_equal(h[lo:hi], h_s)
        assert np.array_equal(c[lo:hi], c_s) and part.cycles == alone.cycles
    assert stats.cycles == max(p.cycles for p in stats.per_cg)
    assert stats.peak_gflops == 3 * stats.per_cg[0].peak_gflops
    want = reference_forward(*args)[0]
    for got, ref, what in zip((y, h, c), want, ("y", "h", "c")):
        _close(got, ref, np.float32, what)


@pytest.mark.parametrize("with_reserve", [False, True])
def test_backward_on_core_groups_matches_one(with_reserve):
    """The recurrence by slices of the batch, the products by rows of their outputs: the
    same gradients as on one CG (to rounding: the products' sums are cut differently), the
    chip's cycles less than one CG's."""
    rng = np.random.default_rng(4)
    args = _case(rng, 3, 6, 5, 8, np.float64)
    dy = rng.standard_normal((3, 6, 8))
    reserve = (dnn.lstm_forward(*args, algo="baseline")[1].reserve if with_reserve
               else None)
    one, s1 = dnn.lstm_backward(dy, *args, reserve=reserve)
    four, s4 = dnn.lstm_backward(dy, *args, reserve=reserve, cgs=4)
    for a, b, name in zip(one, four, ("dx", "dh0", "dc0", "dW", "dR", "db")):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=name)
    assert s4.cycles < s1.cycles
    if with_reserve:   # (else the forward runs again: the tensorized kernel counts the
        assert s4.flops == s1.flops     # padded work of each slice)
    assert [p.cgs for p in s4.parts] == [4, 4]
    want = reference_backward(dy, np.zeros((6, 8)), np.zeros((6, 8)), *args)
    for got, ref, name in zip(four, want, ("dx", "dh0", "dc0", "dW", "dR", "db")):
        _close(got, ref, np.float64, name)


def test_bench_extrapolation_matches_full_runs():
    """`swsim bench lstm` samples 1 and 2 steps (and 1 and 2 row blocks of the hoisted GEMM)
    and extrapolates: within 3 % of full runs of both algorithms."""
    from swsim.hostlib.tools.bench import lstm as bench
    case = (6, 32, 32)
    errors = bench.validate(case)
    assert all(abs(e) <= 0.03 for e in errors), errors
    report = bench.format_report([bench.measure(case)], [(case, errors)])
    assert "speed-up mean" in report and "worst extrapolation error" in report
