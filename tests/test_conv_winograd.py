"""Winograd F(2x2, 3x3) convolution (hostlib/dnn/conv/winograd.py, kernels/dnn/winograd.s)
against the float64 reference of tests/test_dnn_conv.py, with an error bound derived from
where the algorithm rounds; the transforms against numpy's; the model and the sampled
estimate against full runs."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from swsim.hostlib.dnn.conv import winograd as wino
from swsim.hostlib.dnn.conv.common import ConvGeometry, ConvStats
from swsim.vm import HostError, Machine

from test_dnn_conv import ref_backward_data, ref_backward_filter, ref_forward

DTYPES = (np.float32, np.float64)
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float)
G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]])
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float)


def nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def nchw(a):
    return a.transpose(0, 3, 1, 2)


def geometry(b, n_i, n_o, r, c, p):
    return ConvGeometry(b, n_i, n_o, r, c, 3, 3, (1, 1), (p, p))


def new_stats(geo, direction, machine):
    return ConvStats("winograd", direction, geo.flops, machine.config.clock_hz,
                     machine.config.peak_gflops_cg, {name: [] for name in wino.PHASES})


# ---- numpy's transforms and the error bound --------------------------------------------------

def tiles(x, p, r_o, c_o):
    """(B, C, TR, TC, 4, 4) input tiles of x (B, C, R, C) padded by p (and zeros past it)."""
    tr, tc = -(-r_o // 2), -(-c_o // 2)
    b, ch, r, c = x.shape
    xp = np.zeros((b, ch, 2 * tr + 2, 2 * tc + 2))
    rows, cols = min(r, 2 * tr + 2 - p), min(c, 2 * tc + 2 - p)
    xp[:, :, p:p + rows, p:p + cols] = x[:, :, :rows, :cols]
    idx_r = 2 * np.arange(tr)[:, None] + np.arange(4)[None, :]
    idx_c = 2 * np.arange(tc)[:, None] + np.arange(4)[None, :]
    return xp[:, :, idx_r[:, None, :, None], idx_c[None, :, None, :]]


def winograd_abs(x, w, p, r_o, c_o):
    """The Winograd algorithm on |x| and |w| with |B|, |G|, |A|: every intermediate the
    algorithm forms is bounded by it, element for element."""
    d = tiles(np.abs(x), p, r_o, c_o)
    v = np.einsum("ij,bctujk,lk->bctuil", np.abs(BT), d, np.abs(BT))
    u = np.einsum("ij,ocjk,lk->ocil", np.abs(G), np.abs(w).astype(float), np.abs(G))
    m = np.einsum("bctuil,ocil->botuil", v, u)
    y = np.einsum("ij,botujk,lk->botuil", np.abs(AT), m, np.abs(AT))
    b, o, tr, tc = y.shape[:4]
    return y.transpose(0, 1, 2, 4, 3, 5).reshape(b, o, 2 * tr, 2 * tc)[:, :, :r_o, :c_o]


def dy_tiles(dy):
    """(B, O, TR, TC, 2, 2) tiles of dy, zeros past odd edges."""
    b, o, r, c = dy.shape
    tr, tc = -(-r // 2), -(-c // 2)
    full = np.zeros((b, o, 2 * tr, 2 * tc))
    full[:, :, :r, :c] = dy
    return full.reshape(b, o, tr, 2, tc, 2).transpose(0, 1, 2, 4, 3, 5)


def winograd_abs_filter(x, dy, p):
    """The filter gradient's Winograd algorithm on |x|, |dy| with |B|, |A|, |G|."""
    d = tiles(np.abs(x), p, dy.shape[2], dy.shape[3])
    v = np.einsum("ij,bctujk,lk->bctuil", np.abs(BT), d, np.abs(BT))
    z = np.einsum("ji,botujk,kl->botuil", np.abs(AT), dy_tiles(np.abs(dy)), np.abs(AT))
    du = np.einsum("bctuil,botuil->ocil", v, z)
    return np.einsum("ji,ocjk,kl->ocil", np.abs(G), du, np.abs(G))


def check(got, want, bound, dtype, n_i):
    """The kernel rounds V, U, M (to the element type) and y: each a relative error <= u of a
    quantity bounded by the |.| algorithm, so |error| <= 4 u Y_abs to first order; swGEMM's
    double accumulation of n_i products (N_i, or P tiles for the filter gradient) adds
    (n_i + 2) 2^-53 Y_abs (also covering the float64 reference's own rounding). The filter
    gradient rounds V, Z, dU and dw: the same count."""
    u = np.finfo(dtype).eps / 2
    tol = (4 * u + (n_i + 2) * 2.0 ** -53) * bound * (1 + 1e-6) + 1e-300
    assert got.dtype == dtype and got.shape == want.shape
    err = np.abs(got - want)
    assert np.all(err <= tol), f"max error / bound {np.max(err / np.maximum(tol, 1e-300))}"


@st.composite
def problems(draw):
    p = draw(st.integers(0, 2))
    r = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 9, 11]))
    c = draw(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 10, 13]))
    assume(r + 2 * p >= 3 and c + 2 * p >= 3)
    return dict(b=draw(st.integers(1, 3)), n_i=draw(st.sampled_from([1, 2, 3, 4, 5, 8, 12])),
                n_o=draw(st.sampled_from([1, 3, 4, 7, 8, 16])), r=r, c=c, p=p,
                dtype=draw(st.sampled_from(DTYPES)), bias=draw(st.booleans()),
                seed=draw(st.integers(0, 2**31)))


def run_pass(pb, direction):
    """The pass on the VM for problem `pb`: (result NCHW / OIHW, reference, bound, terms the
    GEMM sums, stats)."""
    rng = np.random.default_rng(pb["seed"])
    dtype, p = pb["dtype"], pb["p"]
    geo = geometry(pb["b"], pb["n_i"], pb["n_o"], pb["r"], pb["c"], p)
    x = rng.standard_normal(geo.x_shape).astype(dtype)
    dy = rng.standard_normal(geo.y_shape).astype(dtype)
    w = rng.standard_normal(geo.w_shape).astype(dtype)
    machine = Machine()
    stats = new_stats(geo, direction, machine)
    if direction == "forward":
        bias = rng.standard_normal(pb["n_o"]).astype(dtype) if pb["bias"] else None
        got = nchw(wino.forward(geo, nhwc(x), w, bias, machine, stats, "c"))
        bound = winograd_abs(x, w, p, geo.r_o, geo.c_o) + (
            0 if bias is None else np.abs(bias)[None, :, None, None])
        return got, ref_forward(x, w, bias, (1, 1), (p, p)), bound, pb["n_i"], stats
    if direction == "backward_data":
        got = nchw(wino.backward_data(geo, nhwc(dy), w, machine, stats, "c"))
        w_data = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        bound = winograd_abs(dy, w_data, 2 - p, pb["r"], pb["c"])
        return (got, ref_backward_data(dy, w, geo.x_shape, (1, 1), (p, p)), bound, pb["n_o"],
                stats)
    got = wino.backward_filter(geo, nhwc(x), nhwc(dy), machine, stats, "c")
    return (got, ref_backward_filter(x, dy, geo.w_shape, (1, 1), (p, p)),
            winograd_abs_filter(x, dy, p), wino._tiles(geo)[2], stats)


@settings(max_examples=12, deadline=None)
@given(problems())
def test_forward_matches_reference(pb):
    got, want, bound, terms, stats = run_pass(pb, "forward")
    check(got, want, bound, pb["dtype"], terms)
    assert [len(stats.phases[name]) for name in wino.PHASES] == [1, 1, 16, 1]


@settings(max_examples=8, deadline=None)
@given(problems(), st.sampled_from(["backward_data", "backward_filter"]))
def test_backward_matches_reference(pb, direction):
    got, want, bound, terms, stats = run_pass(pb, direction)
    check(got, want, bound, pb["dtype"], terms)
    assert [len(stats.phases[name]) for name in wino.PHASES] == [1, 1, 16, 1]


@pytest.mark.parametrize("dtype, direction", [(np.float32, "forward"),
                                              (np.float64, "backward_filter")])
def test_channels_too_wide_for_ldm_are_split_into_blocks(dtype, direction):
    """512 input channels do not fit a task of 4 tiles: the input transform splits them into
    blocks (16 DMAs per task) and the result still holds the bound."""
    pb = dict(b=1, n_i=512, n_o=4, r=5, c=6, p=1, dtype=dtype, bias=True, seed=9)
    geo = geometry(1, 512, 4, 5, 6, 1)
    assert wino.transform_plan(geo, "INPUT", 512, np.dtype(dtype).itemsize,
                               Machine().config).ncb > 1
    got, want, bound, terms, _ = run_pass(pb, direction)
    check(got, want, bound, dtype, terms)


def test_float32_error_is_within_the_bound_and_above_direct_convolution():
    """On a 128-channel layer the bound holds, and Winograd's float32 error is larger than a
    direct sum's (one rounding of y; measured: 3.4-3.7 times on average) — the price of the
    rounded intermediates V, U and M."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 128, 6, 6)).astype(np.float32)
    w = rng.standard_normal((8, 128, 3, 3)).astype(np.float32)
    geo = geometry(1, 128, 8, 6, 6, 1)
    machine = Machine()
    y = nchw(wino.forward(geo, nhwc(x), w, None, machine, new_stats(geo, "forward", machine),
                          "c"))
    ref = ref_forward(x, w, None, (1, 1), (1, 1))
    check(y, ref, winograd_abs(x, w, 1, 6, 6), np.float32, 128)
    direct = np.abs(ref.astype(np.float32) - ref).mean()
    assert np.abs(y - ref).mean() > 2 * direct


# ---- the transforms on their own --------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels, cb", [(24, 24), (24, 8), (6, 6), (7, 3)])
def test_transforms_match_numpy(dtype, channels, cb):
    """Whole channel rows and channel blocks (16 DMAs per task), vectors (multiples of 4) and
    the scalar path; V = B^T d B, y = A^T m A + bias, Z = A dy A^T, U = G g G^T (and
    rotated), dw = G^T dU G."""
    rng = np.random.default_rng(channels)
    geo = geometry(2, channels, channels, 7, 9, 1)
    machine = Machine()
    es = np.dtype(dtype).itemsize
    x = rng.standard_normal((2, channels, 7, 9)).astype(dtype)
    base = wino.transform_plan(geo, "INPUT", channels, es, machine.config)
    plan = wino.TransformPlan(base.m, cb, -(-channels // cb), base.groups, cb % 4 == 0)
    v, _ = wino._input_transform(geo, nhwc(x), machine, "c", plan)
    d = tiles(x.astype(float), 1, geo.r_o, geo.c_o)
    want = np.einsum("ij,bctujk,lk->ilbtuc", BT, d, BT).reshape(16, -1, channels)
    # the kernel's two passes round in another order than numpy's sum: a few ulps of the
    # inputs' scale (a tile vector sums at most 16 of them)
    eps = np.finfo(dtype).eps

    def close(got, want, scale):
        np.testing.assert_allclose(got, want, rtol=0, atol=16 * eps * scale)

    close(v, want, np.abs(x).max())
    m = rng.standard_normal(v.shape).astype(dtype)
    bias = rng.standard_normal(channels).astype(dtype)
    y, _ = wino._output_transform(geo, m, bias, machine, "c", plan)
    tr, tc = -(-geo.r_o // 2), -(-geo.c_o // 2)
    mt = m.astype(float).reshape(4, 4, 2, tr, tc, channels)
    full = np.einsum("ij,jkbtuc,lk->btiulc", AT, mt, AT).reshape(2, 2 * tr, 2 * tc, channels)
    close(y, full[:, :geo.r_o, :geo.c_o] + bias, np.abs(m).max() + np.abs(bias).max())
    dy = rng.standard_normal((2, channels, geo.r_o, geo.c_o)).astype(dtype)
    z, _ = wino._dy_transform(geo, nhwc(dy), machine, "c", plan)
    want = np.einsum("ji,botujk,kl->ilbtuo", AT, dy_tiles(dy.astype(float)), AT)
    close(z, want.reshape(16, -1, channels), np.abs(dy).max())
    du = rng.standard_normal((16, 5, channels)).astype(dtype)
    dw, _ = wino._dw_transform(du, machine, "c")
    want = np.einsum("ji,jkco,kl->ocil", G, du.astype(float).reshape(4, 4, 5, channels), G)
    close(dw, want, np.abs(du).max())
    w = rng.standard_normal((channels, 5, 3, 3)).astype(dtype)
    for rotate in (False, True):
        u, _ = wino._filter_transform(w, rotate, machine, "c")
        g = w[:, :, ::-1, ::-1].astype(float) if rotate else w.astype(float)
        want = np.einsum("ij,ocjk,lk->iloc", G, g, G).reshape(16, channels, 5)
        want = want if rotate else want.transpose(0, 2, 1)
        close(u, want, np.abs(w).max())


def test_python_engine_gives_the_same_bits_and_cycles():
    """The five transforms (swGEMM's engine agreement is tested with swGEMM)."""
    rng = np.random.default_rng(3)
    geo = geometry(1, 5, 4, 5, 4, 1)
    x = nhwc(rng.standard_normal(geo.x_shape).astype(np.float32))
    w = rng.standard_normal(geo.w_shape).astype(np.float32)
    results = []
    for engine in ("c", "python"):
        machine = Machine()
        u, s1 = wino._filter_transform(w, False, machine, engine)
        v, s2 = wino._input_transform(geo, x, machine, engine)
        y, s3 = wino._output_transform(geo, v[:, :, :4].copy(), None, machine, engine)
        z, s4 = wino._dy_transform(geo, y, machine, engine)
        dw, s5 = wino._dw_transform(u, machine, engine)
        results.append((u.tobytes(), v.tobytes(), y.tobytes(), z.tobytes(), dw.tobytes(),
                        [s.cycles for s in (s1, s2, s3, s4, s5)]))
    assert results[0] == results[1]


def test_same_inputs_same_bits_and_cycles():
    rng = np.random.default_rng(4)
    geo = geometry(2, 8, 8, 6, 6, 1)
    x, w = nhwc(rng.standard_normal(geo.x_shape)), rng.standard_normal(geo.w_shape)
    runs = []
    for _ in range(2):
        machine = Machine()
        stats = new_stats(geo, "forward", machine)
        runs.append((wino.forward(geo, x, w, None, machine, stats, "c").tobytes(),
                     stats.phase_cycles))
    assert runs[0] == runs[1]


# ---- plans, support, model, estimate ----------------------------------------------------------

@pytest.mark.parametrize("channels, dtype", [(512, np.float32), (256, np.float64),
                                             (64, np.float32), (6, np.float64)])
def test_plans_fit_in_ldm_and_keep_the_cpes_busy(channels, dtype):
    config = Machine().config
    es = np.dtype(dtype).itemsize
    geo = geometry(32, channels, channels, 16, 16, 1)
    for op in ("INPUT", "OUTPUT"):
        plan = wino.transform_plan(geo, op, channels, es, config)
        assert wino._fits(op, plan.m, plan.cb, es, config)
        assert plan.vec == (channels % 4 == 0) and plan.cb % (4 if plan.vec else 1) == 0
        assert plan.tasks(geo) >= 2 * config.num_cpes
        if plan.ncb > 1:      # split only when whole rows of 4 tiles do not fit
            assert not wino._fits(op, 4, channels, es, config)
    for op, rotate in (("FILTER", False), ("FILTER", True), ("DW", False)):
        assert wino._filter_fits(*wino.filter_blocks(op, channels, channels, rotate, es,
                                                     config), es, config)


@pytest.mark.parametrize("op, rotate", [("FILTER", False), ("FILTER", True), ("DW", False)])
def test_filter_side_block_is_the_fastest_of_the_simple_ones(op, rotate):
    """96 x 80 float32 filters: the block the model picks runs no slower than spanning all o
    or all i (the two one-sided layouts), and the model is within 30% of the run (it misses
    some of the cost of many short strided blocks)."""
    rng = np.random.default_rng(7)
    config = Machine().config
    chosen = wino.filter_blocks(op, 96, 80, rotate, 4, config)
    data = (rng.standard_normal((16, 80, 96)) if op == "DW"
            else rng.standard_normal((96, 80, 3, 3))).astype(np.float32)

    def run(blocks):
        machine = Machine()
        if op == "DW":
            return wino._dw_transform(data, machine, "c", blocks)[1].cycles
        return wino._filter_transform(data, rotate, machine, "c", blocks)[1].cycles

    cycles = run(chosen)
    for blocks in ((96, 4), (4, 80)):
        assert cycles <= run(blocks), blocks
    assert abs(wino.filter_cycles(op, 96, 80, rotate, 4, config) / cycles - 1) <= 0.30


def test_supports_names_what_it_cannot_do():
    config = Machine().config
    assert wino.supports(geometry(2, 4, 4, 8, 8, 1), "forward", np.float32, config) is None
    assert "K = 3" in wino.supports(ConvGeometry(1, 2, 2, 8, 8, 5, 5, (1, 1), (0, 0)),
                                    "forward", np.float32, config)
    assert "stride 1" in wino.supports(ConvGeometry(1, 2, 2, 8, 8, 3, 3, (2, 2), (1, 1)),
                                       "forward", np.float32, config)
    assert "padding <= 2" in wino.supports(geometry(1, 2, 2, 8, 8, 3), "backward_data",
                                           np.float64, config)
    assert wino.supports(geometry(1, 2, 2, 8, 8, 3), "backward_filter", np.float64,
                         config) is None
    with pytest.raises(HostError, match="stride 1"):
        wino.estimate(ConvGeometry(1, 2, 2, 8, 8, 3, 3, (2, 2), (1, 1)), "forward", np.float32)


@pytest.mark.parametrize("direction, dtype, padding, gemm_sampled", [
    ("forward", np.float32, 1, False), ("backward_data", np.float64, 0, False),
    ("backward_filter", np.float32, 2, True)])
def test_estimate_and_prediction_against_the_full_run(direction, dtype, padding, gemm_sampled):
    """Cases where the transforms (and, for backward filter, the GEMM; the others' run whole,
    forward's in 3 blocks of P) are sampled: the estimate is within 3% of the full run's cycles,
    the model within 10% (swGEMM's model is most of its error)."""
    geo = geometry(2, 32, 32, 48, 48, padding)
    estimate, details = wino.estimate(geo, direction, dtype)
    for phase in ("input_transform", "output_transform"):
        assert isinstance(details[phase]["simulated"], tuple), phase
    assert isinstance(details["gemm"]["simulated"], tuple) == gemm_sampled
    rng = np.random.default_rng(6)
    machine = Machine()
    stats = new_stats(geo, direction, machine)
    w = rng.standard_normal(geo.w_shape).astype(dtype)
    x = nhwc(rng.standard_normal(geo.x_shape).astype(dtype))
    dy = nhwc(rng.standard_normal(geo.y_shape).astype(dtype))
    if direction == "forward":
        wino.forward(geo, x, w, None, machine, stats, "c")
    elif direction == "backward_filter":
        wino.backward_filter(geo, x, dy, machine, stats, "c")
    else:
        wino.backward_data(geo, dy, w, machine, stats, "c")
    assert abs(estimate / stats.cycles - 1) <= 0.03
    predicted = wino.predict_phases(geo, direction, dtype, machine.config)
    assert abs(sum(predicted.values()) / stats.cycles - 1) <= 0.10
    for phase in ("input_transform", "output_transform"):
        assert abs(predicted[phase] / stats.phase_cycles[phase] - 1) <= 0.01, phase
