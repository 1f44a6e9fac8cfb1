"""Implicit GEMM convolution (hostlib/dnn/conv/implicit.py, kernels/dnn/conv_implicit.s)
against the float64 reference of tests/test_dnn_conv.py, its blocking rules, the two engines,
the model and the sampled estimate."""
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from swsim.hostlib import dnn
from swsim.hostlib.dnn.conv import implicit
from swsim.hostlib.dnn.conv.common import ConvStats, make_geometry
from swsim.vm import HostError, Machine
from test_dnn_conv import _close, ref_backward_data, ref_backward_filter, ref_forward

DTYPES = (np.float32, np.float64)
Blocking = implicit.Blocking


def to_rcnb(a):
    """(B, C, H, W) -> (H, W, C, B): the layout the module's passes take (numpy only prepares
    the operands)."""
    return np.ascontiguousarray(a.transpose(2, 3, 1, 0))


def from_rcnb(a):
    return a.transpose(3, 2, 0, 1)


def _stats(geo, machine, direction):
    config = machine.config
    return ConvStats(implicit.NAME, direction, geo.flops, config.clock_hz,
                     config.peak_gflops_cg, {p: [] for p in implicit.PHASES})


def _forward(x, w, bias, stride, padding, engine="c"):
    geo = make_geometry(x.shape, w.shape, stride, padding, "w")
    machine = Machine()
    stats = _stats(geo, machine, "forward")
    y = implicit.forward(geo, to_rcnb(x), w, bias, machine, stats, engine)
    return from_rcnb(y), stats


@st.composite
def problems(draw, strides=(1, 2, (2, 1))):
    k = draw(st.sampled_from([(1, 1), (3, 3), (5, 5), (3, 1)]))
    stride = draw(st.sampled_from(strides))
    padding = draw(st.sampled_from([0, 1, 2, (0, 2)]))
    s = (stride, stride) if isinstance(stride, int) else stride
    p = (padding, padding) if isinstance(padding, int) else padding
    assume(p[0] < k[0] and p[1] < k[1])
    sizes = st.sampled_from([1, 2, 3, 5, 7, 8, 9])
    r_i, c_i = draw(sizes), draw(sizes)
    assume(r_i + 2 * p[0] >= k[0] and c_i + 2 * p[1] >= k[1])
    # batch and channels: 1, primes, just below and above the blocks' multiples (16, 8, 32)
    b = draw(st.sampled_from([1, 3, 15, 16, 17, 33]))
    n_i = draw(st.sampled_from([1, 2, 7, 8, 9, 17]))
    n_o = draw(st.sampled_from([1, 5, 31, 32, 33]))
    return dict(x_shape=(b, n_i, r_i, c_i), w_shape=(n_o, n_i) + k, stride=stride,
                padding=padding, s=s, p=p, dtype=draw(st.sampled_from(DTYPES)),
                seed=draw(st.integers(0, 2**31)))


@settings(max_examples=14, deadline=None)
@given(problems())
# the last step's deferred X piece must not be issued for the step after the last one
@example(pb=dict(x_shape=(15, 9, 2, 2), w_shape=(1, 9, 3, 3), stride=1, padding=1, s=(1, 1),
                 p=(1, 1), dtype=np.float64, seed=0))
def test_forward_matches_reference(pb):
    rng = np.random.default_rng(pb["seed"])
    dtype = pb["dtype"]
    x = rng.standard_normal(pb["x_shape"]).astype(dtype)
    w = rng.standard_normal(pb["w_shape"]).astype(dtype)
    bias = rng.standard_normal(pb["w_shape"][0]).astype(dtype) if pb["seed"] % 2 else None
    y, stats = _forward(x, w, bias, pb["stride"], pb["padding"])
    _close(y, ref_forward(x, w, bias, pb["s"], pb["p"]), dtype, np.prod(pb["w_shape"][1:]) + 1)
    assert stats.phase_cycles["weights"] > 0 and stats.phase_cycles["conv"] > 0
    assert 0 < stats.efficiency < 1


def _backward_case(pb, direction):
    """pb's operands of a backward pass (w or x, then dy), a machine, the pass's stats and
    supports()' reason (None: it runs)."""
    rng = np.random.default_rng(pb["seed"])
    dtype = pb["dtype"]
    geo = make_geometry(pb["x_shape"], pb["w_shape"], pb["stride"], pb["padding"], "w")
    other = rng.standard_normal(pb["w_shape" if direction == "backward_data" else "x_shape"])
    dy = rng.standard_normal(geo.y_shape).astype(dtype)
    machine = Machine()
    return (geo, other.astype(dtype), dy, machine, _stats(geo, machine, direction),
            implicit.supports(geo, direction, dtype, machine.config))


@settings(max_examples=14, deadline=None)
@given(problems())
@example(pb=dict(x_shape=(3, 5, 7, 8), w_shape=(4, 5, 3, 3), stride=2, padding=1, s=(2, 2),
                 p=(1, 1), dtype=np.float32, seed=1))
def test_backward_data_matches_reference(pb):
    geo, w, dy, machine, stats, reason = _backward_case(pb, "backward_data")
    if reason:
        # stride > 1: a dx row no dy row reaches (K_r < s_r, or remainder rows past p_r)
        assert pb["s"][0] > 1
        with pytest.raises(HostError, match="dy row for every dx row"):
            implicit.backward_data(geo, to_rcnb(dy), w, machine, stats, "c")
        return
    dx = from_rcnb(implicit.backward_data(geo, to_rcnb(dy), w, machine, stats, "c"))
    _close(dx, ref_backward_data(dy, w, pb["x_shape"], pb["s"], pb["p"]), pb["dtype"],
           pb["w_shape"][0] * pb["w_shape"][2] * pb["w_shape"][3])


@settings(max_examples=10, deadline=None)
@given(problems(strides=(1,)))
def test_backward_filter_matches_reference(pb):
    geo, x, dy, machine, stats, reason = _backward_case(pb, "backward_filter")
    if reason:
        # padding >= the output size: dy cannot be the swapped convolution's kernel
        assert pb["p"][0] >= geo.r_o or pb["p"][1] >= geo.c_o
        with pytest.raises(HostError, match="output size"):
            implicit.backward_filter(geo, to_rcnb(x), to_rcnb(dy), machine, stats, "c")
        return
    dw = implicit.backward_filter(geo, to_rcnb(x), to_rcnb(dy), machine, stats, "c")
    _close(dw, ref_backward_filter(x, dy, pb["w_shape"], pb["s"], pb["p"]), pb["dtype"],
           geo.batch * geo.r_o * geo.c_o)
    assert all(stats.phase_cycles[p] > 0 for p in implicit.PHASES)


@pytest.mark.parametrize("blocking", [
    Blocking(16, 4, 1, 1, 16, 8, False),      # streamed weights, image-size-aware (CB = 8)
    Blocking(16, 4, 2, 3, 32, 4, True),       # resident weights, 3 taps a step
    Blocking(32, 8, 1, 3, 32, 8, True),       # ROW-mode weight DMA (N_o = 8 NB)
    Blocking(16, 8, 1, 1, 128, 1, False),     # batch-size-aware (CB = 1), ROW-mode weights
])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_kind_of_blocking(blocking, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20, 9, 5, 6)).astype(dtype)
    w = rng.standard_normal((64 if blocking.nb == 8 else 33, 9, 3, 3)).astype(dtype)
    bias = rng.standard_normal(w.shape[0]).astype(dtype)
    geo = make_geometry(x.shape, w.shape, 1, 1, "w")
    wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    y, run = implicit.run_kernel(geo, to_rcnb(x), wt, bias, Machine(), "c", blocking=blocking)
    _close(from_rcnb(y), ref_forward(x, w, bias, (1, 1), (1, 1)), dtype, 9 * 9 + 1)
    assert run.blocking == blocking


@pytest.mark.parametrize("direction", ["forward", "backward_data"])
def test_engines_agree_bit_for_bit_and_cycle_for_cycle(direction):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((5, 2, 3, 3)).astype(np.float32)
    geo = implicit.pass_geometry(make_geometry((3, 2, 3, 4), w.shape, (2, 1), 1, "w"),
                                 direction)      # backward-data: dy dilated along rows
    stored = geo.stored_input if direction == "backward_data" else (geo.r_i, geo.c_i)
    x = rng.standard_normal(stored + (geo.n_i, geo.batch)).astype(np.float32)
    wt = rng.standard_normal((9, geo.n_i, geo.n_o)).astype(np.float32)
    results = [implicit.run_kernel(geo, x, wt, None, Machine(), engine,
                                   blocking=Blocking(16, 4, 1, 3, 16, 8, True))
               for engine in ("c", "python")]
    (y_c, run_c), (y_py, run_py) = results
    assert y_c.tobytes() == y_py.tobytes() and run_c.cycles == run_py.cycles


def test_supports_names_what_it_does_not_do():
    config = Machine().config
    geo = make_geometry((32, 64, 8, 8), (64, 64, 3, 3), 1, 1, "w")
    assert implicit.supports(geo, "forward", np.float32, config) is None
    assert implicit.supports(geo, "backward_data", np.float64, config) is None
    assert implicit.supports(geo, "backward_filter", np.float32, config) is None
    strided = make_geometry((32, 64, 8, 8), (64, 64, 3, 3), 2, 1, "w")
    assert implicit.supports(strided, "backward_data", np.float32, config) is None
    odd = make_geometry((32, 64, 9, 9), (64, 64, 3, 3), 3, 1, "w")
    assert "power of 2" in implicit.supports(odd, "backward_data", np.float32, config)
    assert "stride 1" in implicit.supports(strided, "backward_filter", np.float32, config)
    padded = make_geometry((2, 3, 8, 8), (4, 3, 3, 3), 1, 3, "w")
    assert "padding" in implicit.supports(padded, "forward", np.float32, config)
    x, dy = np.zeros((8, 8, 64, 32), np.float32), np.zeros((4, 4, 64, 32), np.float32)
    with pytest.raises(HostError, match="backward-filter needs stride 1"):
        implicit.backward_filter(strided, x, dy, Machine(), None, "c")
    with pytest.raises(HostError, match="padding"):
        implicit.forward(padded, np.zeros((8, 8, 3, 2), np.float32),
                         np.zeros(padded.w_shape, np.float32), None, Machine(), None, "c")


def test_blockings_keep_the_primitive_and_channel_rules():
    geo = make_geometry((32, 100, 12, 12), (70, 100, 3, 3), 1, 1, "w")
    options = implicit.candidates(geo, 4, Machine().config)
    assert options
    for b in options:
        assert b.mb % 16 == 0 and b.nb % 4 == 0 and b.bb * b.cb == 8 * b.mb
        assert 3 % b.g == 0 and b.g * (1 if b.resident else 2) <= implicit.MAX_DMAS_PER_STEP


@pytest.mark.parametrize("shape, dtype", [
    ((32, 64, 64, 10, 10), np.float32),        # resident weights, 3 taps a step
    ((20, 24, 40, 9, 7), np.float64),
])
def test_estimate_is_within_three_percent_of_the_whole_run(shape, dtype):
    b, n_i, n_o, r_i, c_i = shape
    geo = make_geometry((b, n_i, r_i, c_i), (n_o, n_i, 3, 3), 1, 1, "w")
    estimated, details = implicit.estimate(geo, "forward", dtype, Machine())
    assert not details["whole"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((r_i, c_i, n_i, b)).astype(dtype)
    wt = rng.standard_normal((9, n_i, n_o)).astype(dtype)
    _, run = implicit.run_kernel(geo, x, wt, None, Machine(), "c")
    assert details["weights"] > 0          # the weights' rearrangement, simulated whole
    assert estimated - details["weights"] == pytest.approx(run.cycles, rel=0.03)


def test_strided_backward_data_estimate_is_within_three_percent_of_the_whole_run():
    geo = make_geometry((32, 64, 15, 15), (64, 64, 3, 3), 2, 1, "w")
    estimated, details = implicit.estimate(geo, "backward_data", np.float32, Machine())
    assert not details["whole"]
    swapped = implicit.pass_geometry(geo, "backward_data")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(swapped.stored_input + (64, 32)).astype(np.float32)
    wt = rng.standard_normal((9, 64, 64)).astype(np.float32)
    _, run = implicit.run_kernel(swapped, x, wt, None, Machine(), "c", reverse=True,
                                 blocking=details["blocking"])
    assert estimated - details["weights"] == pytest.approx(run.cycles, rel=0.03)


@pytest.mark.parametrize("shape, padding, dtype", [
    ((32, 64, 64, 12, 12), 1, np.float32),     # resident dy, 3 taps a step
    ((16, 24, 40, 9, 13), 1, np.float64),      # streamed dy
])
def test_backward_filter_estimate_is_within_three_percent_of_the_whole_run(shape, padding,
                                                                             dtype):
    b, n_i, n_o, r_i, c_i = shape
    geo = make_geometry((b, n_i, r_i, c_i), (n_o, n_i, 3, 3), 1, padding, "w")
    estimated, details = implicit.estimate(geo, "backward_filter", dtype, Machine())
    assert not details["whole"]
    assert details["operands"] > 0 and details["weights"] > 0   # the transforms, counted
    rng = np.random.default_rng(0)
    x = rng.standard_normal((r_i, c_i, n_i, b)).astype(dtype)
    dy = rng.standard_normal((geo.r_o, geo.c_o, n_o, b)).astype(dtype)
    _, stats = dnn.conv2d_backward_filter(dy, x, (n_o, n_i, 3, 3), padding=padding,
                                          algo="implicit", layout="RCNB")
    assert estimated == pytest.approx(stats.cycles, rel=0.03)   # the whole pass


def test_model_predicts_a_run_within_ten_percent():
    """predict counts what the pass runs: the kernel and the weights' rearrangement."""
    geo = make_geometry((32, 64, 10, 10), (64, 64, 3, 3), 1, 1, "w")
    config = Machine().config
    predicted = implicit.predict(geo, "forward", np.float32, config)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 10, 64, 32)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    _, stats = dnn.conv2d_forward(x, w, padding=1, algo="implicit", layout="RCNB")
    assert stats.phase_cycles["weights"] > 0
    assert predicted == pytest.approx(stats.cycles, rel=0.10)
