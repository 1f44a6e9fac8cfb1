"""The tensorized LSTM forward's reserve (``lstm_forward(..., reserve=True)``; docs/dnn.md
"LSTM"): the activated gates and the cells its CPEs put per step, against the numpy float64
reference and the baseline's reserve (bit for bit where both compute the same roundings), and
``lstm_backward`` fed with it."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.hostlib import dnn
from swsim.hostlib.dnn import lstm
from swsim.vm import Machine

from test_lstm import TOL, _case, _close, reference_backward, reference_forward

FIELDS = ("y", "gates", "c")
GRADS = ("dx", "dh0", "dc0", "dW", "dR", "db")


def _tensorized(args, **choice):
    """The tensorized forward with the reserve on the plan restricted by ``choice``."""
    machine = Machine()
    batch, hidden = args[1].shape
    p = lstm.plan(batch, hidden, args[0].itemsize, machine.config, reserve=True, **choice)
    for key, value in choice.items():
        assert getattr(p, key) == value, key
    return lstm._tensorized(*args, p, machine, "c")


def _check_reserve(reserve, result, args, dtype):
    """The reserve against the reference's gates and cells, and its y and last c against the
    forward's own outputs (the same bits)."""
    y, h_n, c_n = result
    assert np.array_equal(reserve.y, y) and np.array_equal(reserve.c[-1], c_n)
    (ry, _, _), (gates, cells) = reference_forward(*args)
    for got, want, what in ((reserve.y, ry, "y"), (reserve.gates, gates, "gates"),
                            (reserve.c, cells, "c")):
        assert got.dtype == dtype and got.shape == want.shape, what
        _close(got, want, dtype, what)


shapes = st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 20), st.integers(1, 40))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=4, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2 ** 16), staged=st.booleans())
def test_reserve_matches_reference(dtype, shape, seed, staged):
    """Odd sizes (padding rows and units in every block), the reserve staged in its own
    buffer or narrowed in C, float32 and float64."""
    args = _case(np.random.default_rng(seed), *shape, dtype)
    result, stats = _tensorized(args, reserve_staged=staged)
    assert stats.plan.reserve and stats.plan.reserve_staged == staged
    _check_reserve(stats.reserve, result, args, dtype)


@pytest.mark.parametrize("kc, prefetch, staged", [(8, True, True), (8, False, False),
                                                  (2, True, False), (1, False, True)])
def test_reserve_on_every_ldm_plan(kc, prefetch, staged):
    """R^T resident (kc = Hb = 8) or streamed, I prefetched or not, the reserve staged or in
    place: the same reserve, and lstm_backward gives the reference's gradients from it."""
    rng = np.random.default_rng(kc)
    for dtype in (np.float32, np.float64):
        args = _case(rng, 3, 40, 7, 50, dtype)
        result, stats = _tensorized(args, kc=kc, prefetch=prefetch, reserve_staged=staged)
        assert (stats.plan.kc, stats.plan.resident) == (kc, kc == 8)
        _check_reserve(stats.reserve, result, args, dtype)
        dy = rng.normal(size=result[0].shape).astype(dtype)
        grads, _ = dnn.lstm_backward(dy, *args, reserve=stats.reserve)
        zeros = np.zeros(args[1].shape)
        for got, want, what in zip(grads, reference_backward(dy, zeros, zeros, *args), GRADS):
            _close(got, want, dtype, what)


def _exact_case(rng, steps, batch, inputs, hidden, dtype, recurrent):
    """Inputs whose products and sums are exact in float32: x and W small multiples of 1/8,
    so W x_t is the same in any order; R either zero or one entry 1/2 per row (h R^T one
    exact product per pre-activation)."""
    x = rng.integers(-4, 5, (steps, batch, inputs)) / 8
    W = rng.integers(-4, 5, (4 * hidden, inputs)) / 8
    R = np.zeros((4 * hidden, hidden))
    if recurrent:
        R[np.arange(4 * hidden), rng.integers(0, hidden, 4 * hidden)] = 0.5
    b = rng.integers(-4, 5, 4 * hidden) / 8 if not recurrent or steps == 1 else \
        np.zeros(4 * hidden)
    h0, c0 = rng.normal(size=(batch, hidden)), rng.normal(size=(batch, hidden))
    if steps == 1:
        h0 = rng.integers(-4, 5, (batch, hidden)) / 8
    return [a.astype(dtype) for a in (x, h0, c0, W, R, b)]


@pytest.mark.parametrize("dtype, steps, recurrent", [
    (np.float32, 1, True), (np.float64, 1, True),     # one step: every sum exact
    (np.float64, 3, False),                            # R = 0: z = fl(W x + b) in both
    (np.float64, 3, True)])                            # b = 0: z = fl(W x + h r) in both
def test_reserve_is_the_baselines_bit_for_bit_where_the_arithmetic_is_the_same(
        dtype, steps, recurrent):
    """Where both algorithms round the same sums once (exact GEMMs, see ``_exact_case``) the
    element-wise parts are the same instructions on the same values, so the reserves are
    equal bit for bit, and so are lstm_backward's gradients from either. (In general they are
    not: the baseline rounds W x_t and then + R h_{t-1} to memory precision and adds b last;
    the tensorized kernel adds b to I_t first and accumulates R h_{t-1} in double, and in
    float32 it keeps h and c in double between steps where the baseline rounds them.)"""
    rng = np.random.default_rng(steps)
    args = _exact_case(rng, steps, 37, 11, 21, dtype, recurrent)
    baseline = dnn.lstm_forward(*args, algo="baseline")[1].reserve
    for staged in (True, False):
        result, stats = _tensorized(args, reserve_staged=staged)
        for field in FIELDS:
            assert np.array_equal(getattr(stats.reserve, field), getattr(baseline, field)), \
                (field, staged)
    assert np.abs(baseline.gates - 0.5).max() > 0.1        # not a trivial case
    dy = rng.normal(size=result[0].shape).astype(dtype)
    from_tensorized, _ = dnn.lstm_backward(dy, *args, reserve=stats.reserve)
    from_baseline, _ = dnn.lstm_backward(dy, *args, reserve=baseline)
    for a, b, what in zip(from_tensorized, from_baseline, GRADS):
        assert np.array_equal(a, b), what


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_from_either_reserve_agrees(dtype):
    """General inputs: the two reserves differ by rounding only, and so do the gradients."""
    rng = np.random.default_rng(5)
    args = _case(rng, 3, 13, 9, 17, dtype)
    dy = rng.normal(size=(3, 13, 17)).astype(dtype)
    base = dnn.lstm_forward(*args, algo="baseline")[1].reserve
    tens = dnn.lstm_forward(*args, reserve=True)[1].reserve
    for field in FIELDS:
        _close(getattr(tens, field), getattr(base, field).astype(np.float64), dtype, field)
    g_base, _ = dnn.lstm_backward(dy, *args, reserve=base)
    g_tens, _ = dnn.lstm_backward(dy, *args, reserve=tens)
    for a, b, what in zip(g_tens, g_base, GRADS):
        _close(a, b.astype(np.float64), dtype, what)


@pytest.mark.parametrize("cgs", [1, 2, 3, 4])
def test_reserve_on_core_groups_is_each_slices(cgs):
    """cgs CGs on B = 7: the reserve is the slices' reserves side by side, each the bits of a
    run of that slice alone."""
    args = _case(np.random.default_rng(cgs), 2, 7, 5, 9, np.float32)
    _, stats = dnn.lstm_forward(*args, reserve=True, cgs=cgs)
    assert stats.algo == "tensorized"
    for lo, hi in stats.details.get("rows", [(0, 7)]):
        x, h0, c0 = (np.ascontiguousarray(a[..., lo:hi, :]) for a in args[:3])
        alone = dnn.lstm_forward(x, h0, c0, *args[3:], reserve=True)[1].reserve
        for field in FIELDS:
            assert np.array_equal(getattr(stats.reserve, field)[:, lo:hi],
                                  getattr(alone, field)), (field, lo)
    _check_reserve(stats.reserve, (stats.reserve.y, None, stats.reserve.c[-1]), args,
                   np.float32)


def test_no_reserve_unless_asked_and_the_fallback_keeps_it(monkeypatch):
    args = _case(np.random.default_rng(2), 2, 3, 2, 5, np.float64)
    _, stats = dnn.lstm_forward(*args)
    assert "reserve" not in stats.details and not stats.plan.reserve
    monkeypatch.setattr(lstm, "plan", lambda *a, **k: None)
    result, stats = dnn.lstm_forward(*args, reserve=True)
    assert stats.algo == "baseline" and "LDM" in stats.fallback
    _check_reserve(stats.reserve, result, args, np.float64)


def test_plan_stages_the_reserve_where_it_fits():
    """The staging buffer where it fits beside everything; never at the price of a resident
    R^T with the prefetch of I (B = 96, H = 256 float32: in place); else at a chunk down to
    1/4 of the one in place allows (B = 64, H = 384 float32: 16 rows instead of 24; B = 128,
    H = 352: 4 instead of 11; B = 128, H = 256: 16 instead of a resident 32 without the
    prefetch), not below (B = 160, H = 288: 4 against 18). With the reserve there is no y
    buffer (h goes out in the record)."""
    config = Machine().config
    small = lstm.plan(64, 64, 4, config, reserve=True)
    assert small.reserve and small.reserve_staged and small.resident and small.prefetch
    assert not small.reserve_deferred and small.ldm["ybuf"] == 0
    assert not lstm.plan(64, 64, 4, config).reserve
    cases = {(96, 256): (32, False, 32), (64, 384): (16, True, 24), (128, 352): (4, True, 11),
             (160, 288): (18, False, 18), (128, 256): (16, True, 32)}
    for (batch, hidden), (kc, staged, in_place) in cases.items():
        p = lstm.plan(batch, hidden, 4, config, reserve=True)
        assert (p.kc, p.reserve_staged, p.reserve_deferred) == (kc, staged, staged), batch
        assert lstm.plan(batch, hidden, 4, config, reserve=True,
                         reserve_staged=False).kc == in_place


def test_the_estimates_match_full_runs():
    """lstm_model (what the training stack selects by): 2 and 3 sampled steps, extended to
    T, within 3 % of a full run, with the reserve and for the baseline."""
    from swsim.hostlib.dnn import lstm_model
    args = lstm_model.sample_arrays(np.random.default_rng(0), 7, 40, 12, 36, np.float32)
    for algo in lstm.ALGOS:
        _, stats = dnn.lstm_forward(*args, algo=algo, reserve=True)
        estimate = lstm_model.estimate_forward(7, 40, 12, 36, np.float32, algo=algo,
                                               reserve=True)
        assert estimate.algo == algo and (estimate.plan == stats.details.get("plan"))
        assert abs(estimate.cycles / lstm_model.launch_cycles(stats) - 1) <= 0.03, algo


@pytest.mark.parametrize("steps, batch, inputs, hidden", [(7, 40, 12, 36), (12, 16, 20, 24)])
def test_the_backward_estimate_matches_full_runs(steps, batch, inputs, hidden):
    """lstm_model.backward: the recurrence sampled for 2 and 3 steps, the four products by
    swGEMM's model, within 5 % of a full lstm_backward from the forward's reserve."""
    from swsim.hostlib.dnn import lstm_model
    args = lstm_model.sample_arrays(np.random.default_rng(1), steps, batch, inputs, hidden,
                                    np.float32)
    (y, _, _), forward = dnn.lstm_forward(*args, algo="tensorized", reserve=True)
    dy = np.random.default_rng(2).uniform(-1, 1, y.shape).astype(np.float32)
    _, stats = dnn.lstm_backward(dy, *args, reserve=forward.reserve)
    estimate = lstm_model.backward(steps, batch, inputs, hidden, np.float32)
    assert abs(estimate / lstm_model.launch_cycles(stats) - 1) <= 0.05
