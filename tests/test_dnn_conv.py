"""Convolution on the VM (hostlib/dnn/conv/, kernels/dnn/im2col.s) against a numpy float64
reference of the forward pass and both gradients; the reference's gradients are checked by
finite differences of its forward pass."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from swsim.errors import ArgumentError
from swsim.hostlib import dnn
from swsim.hostlib.dnn.layout_transform import moves_nothing
from swsim.vm import HostError

DTYPES = (np.float32, np.float64)


# ---- the float64 reference ------------------------------------------------------------------

def _out(size, k, s, p):
    return (size + 2 * p - k) // s + 1


def _windows(shape, w_shape, s, p):
    """(kr, kc, row slice, column slice) of the padded image feeding each kernel tap."""
    _, _, r_i, c_i = shape
    _, _, k_r, k_c = w_shape
    r_o, c_o = _out(r_i, k_r, s[0], p[0]), _out(c_i, k_c, s[1], p[1])
    for kr in range(k_r):
        for kc in range(k_c):
            yield (kr, kc, slice(kr, kr + s[0] * (r_o - 1) + 1, s[0]),
                   slice(kc, kc + s[1] * (c_o - 1) + 1, s[1]))


def _pad(x, p):
    return np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))


def ref_forward(x, w, bias, s, p):
    xp = _pad(x, p)
    y = sum(np.einsum("bihw,oi->bohw", xp[:, :, rows, cols], w[:, :, kr, kc].astype(np.float64))
            for kr, kc, rows, cols in _windows(x.shape, w.shape, s, p))
    return y if bias is None else y + bias.astype(np.float64)[None, :, None, None]


def ref_backward_data(dy, w, x_shape, s, p):
    dxp = _pad(np.zeros(x_shape), p)
    for kr, kc, rows, cols in _windows(x_shape, w.shape, s, p):
        dxp[:, :, rows, cols] += np.einsum("bohw,oi->bihw", dy, w[:, :, kr, kc])
    return dxp[:, :, p[0]:p[0] + x_shape[2], p[1]:p[1] + x_shape[3]]


def ref_backward_filter(x, dy, w_shape, s, p):
    xp, dw = _pad(x, p), np.zeros(w_shape)
    for kr, kc, rows, cols in _windows(x.shape, w_shape, s, p):
        dw[:, :, kr, kc] = np.einsum("bohw,bihw->oi", dy, xp[:, :, rows, cols])
    return dw


def _pair(v):
    return (v, v) if isinstance(v, int) else v


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31), stride=st.sampled_from([1, 2, (1, 2)]),
       padding=st.sampled_from([0, 1, 2, (2, 0)]), k=st.sampled_from([(1, 1), (3, 3), (5, 3)]))
def test_reference_gradients_match_finite_differences(seed, stride, padding, k):
    rng = np.random.default_rng(seed)
    s, p = _pair(stride), _pair(padding)
    x = rng.standard_normal((2, 2, 5, 6))
    w = rng.standard_normal((3, 2) + k)
    dy = rng.standard_normal(ref_forward(x, w, None, s, p).shape)
    loss = lambda x, w: float((ref_forward(x, w, None, s, p) * dy).sum())
    h = 1e-3                  # the loss is linear in x and in w: central differences are exact
    for grad, at, direction in [
            (ref_backward_data(dy, w, x.shape, s, p), x, rng.standard_normal(x.shape)),
            (ref_backward_filter(x, dy, w.shape, s, p), w, rng.standard_normal(w.shape))]:
        if at is x:
            fd = (loss(x + h * direction, w) - loss(x - h * direction, w)) / (2 * h)
        else:
            fd = (loss(x, w + h * direction) - loss(x, w - h * direction)) / (2 * h)
        assert fd == pytest.approx(float((grad * direction).sum()), rel=1e-8, abs=1e-8)


# ---- the VM against the reference -----------------------------------------------------------

@st.composite
def problems(draw):
    k = draw(st.sampled_from([(1, 1), (3, 3), (5, 5), (3, 1)]))
    stride = draw(st.sampled_from([1, 2, (2, 1)]))
    padding = draw(st.sampled_from([0, 1, 2, (0, 2)]))
    s, p = _pair(stride), _pair(padding)
    sizes = st.sampled_from([1, 2, 3, 5, 7, 8])
    r_i, c_i = draw(sizes), draw(sizes)
    assume(r_i + 2 * p[0] >= k[0] and c_i + 2 * p[1] >= k[1])
    b, n_i, n_o = (draw(st.integers(1, n)) for n in (3, 5, 5))
    return dict(x_shape=(b, n_i, r_i, c_i), w_shape=(n_o, n_i) + k, stride=stride,
                padding=padding, s=s, p=p, dtype=draw(st.sampled_from(DTYPES)),
                seed=draw(st.integers(0, 2**31)))


def _close(got, want, dtype, terms):
    assert got.dtype == dtype and got.shape == want.shape
    # unit normal data: a sum of `terms` products has rounding error ~ eps sqrt(terms) |sum|
    tol = (1e-5 if dtype == np.float32 else 1e-13) * max(terms, 1)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@settings(max_examples=15, deadline=None)
@given(problems())
def test_forward_matches_reference(pb):
    rng = np.random.default_rng(pb["seed"])
    dtype = pb["dtype"]
    x = rng.standard_normal(pb["x_shape"]).astype(dtype)
    w = rng.standard_normal(pb["w_shape"]).astype(dtype)
    bias = rng.standard_normal(pb["w_shape"][0]).astype(dtype) if pb["seed"] % 2 else None
    y, stats = dnn.conv2d_forward(x, w, bias, stride=pb["stride"], padding=pb["padding"],
                                  algo="explicit")
    _close(y, ref_forward(x, w, bias, pb["s"], pb["p"]), dtype, np.prod(pb["w_shape"][1:]) + 1)
    assert stats.algo == "explicit" and stats.direction == "forward"
    assert stats.cycles == sum(stats.phase_cycles.values()) > 0
    assert stats.phase_cycles["im2col"] > 0 and stats.phase_cycles["col2im"] == 0
    assert len(stats.phases["gemm"]) == 1          # one GEMM for the whole batch
    # NCHW to explicit's CNHW and back, unless only axes of length 1 move (a view)
    relabels = all(moves_nothing(a.shape, "NCHW", "CNHW") for a in (x, y))
    assert (stats.phase_cycles["layout"] == 0) == relabels
    assert stats.dma_bytes >= x.nbytes + w.nbytes
    assert 0 < stats.efficiency < 1


@settings(max_examples=15, deadline=None)
@given(problems())
def test_backward_matches_reference(pb):
    rng = np.random.default_rng(pb["seed"])
    dtype, s, p = pb["dtype"], pb["s"], pb["p"]
    x = rng.standard_normal(pb["x_shape"]).astype(dtype)
    w = rng.standard_normal(pb["w_shape"]).astype(dtype)
    dy = rng.standard_normal(ref_forward(x, w, None, s, p).shape).astype(dtype)
    dx, stats = dnn.conv2d_backward_data(dy, w, x.shape, stride=pb["stride"],
                                         padding=pb["padding"], algo="explicit")
    _close(dx, ref_backward_data(dy, w, x.shape, s, p), dtype, np.prod(pb["w_shape"]))
    assert stats.phase_cycles["col2im"] > 0 and stats.phase_cycles["im2col"] == 0
    dw, stats = dnn.conv2d_backward_filter(dy, x, w.shape, stride=pb["stride"],
                                           padding=pb["padding"], algo="explicit")
    _close(dw, ref_backward_filter(x, dy, w.shape, s, p), dtype, np.prod(dy.shape) // dy.shape[1])
    assert stats.phase_cycles["im2col"] > 0 and stats.flops == 2 * dy.size * np.prod(w.shape[1:])


@settings(max_examples=10, deadline=None)
@given(problems())
def test_auto_runs_a_supporting_algorithm_and_matches_the_reference(pb):
    """algo="auto" over all registered algorithms (each is tested in its own file)."""
    from swsim.hostlib.dnn import conv
    rng = np.random.default_rng(pb["seed"])
    dtype, s, p = pb["dtype"], pb["s"], pb["p"]
    x = rng.standard_normal(pb["x_shape"]).astype(dtype)
    w = rng.standard_normal(pb["w_shape"]).astype(dtype)
    kw = dict(stride=pb["stride"], padding=pb["padding"])
    y, fwd = dnn.conv2d_forward(x, w, **kw)
    # Winograd's float32 rounding is a few times direct convolution's (test_conv_winograd.py)
    slack = 16 if dtype == np.float32 else 1
    _close(y, ref_forward(x, w, None, s, p), dtype, slack * np.prod(pb["w_shape"][1:]))
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx, bwd = dnn.conv2d_backward_data(dy, w, x.shape, **kw)
    _close(dx, ref_backward_data(dy, w, x.shape, s, p), dtype, slack * np.prod(pb["w_shape"]))
    dw, flt = dnn.conv2d_backward_filter(dy, x, w.shape, **kw)
    _close(dw, ref_backward_filter(x, dy, w.shape, s, p), dtype,
           slack * np.prod(dy.shape) // dy.shape[1])
    for stats in (fwd, bwd, flt):
        assert stats.algo in conv.ALGORITHMS


@pytest.mark.parametrize("group", [2, 3, 7])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stride, padding, k", [(1, 1, 3), (2, 2, 5), ((2, 1), (1, 0), 3)])
def test_row_groups(monkeypatch, group, dtype, stride, padding, k):
    """Tasks of several input rows (7 rows: groups of 2 and 3 leave a shorter last group)."""
    from swsim.hostlib.dnn.conv import explicit
    monkeypatch.setattr(explicit, "_row_group", lambda geo, es, op, config: min(group, geo.r_i))
    rng = np.random.default_rng(group)
    x = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    w = rng.standard_normal((2, 3, k, k)).astype(dtype)
    s, p = _pair(stride), _pair(padding)
    y, stats = dnn.conv2d_forward(x, w, stride=stride, padding=padding)
    _close(y, ref_forward(x, w, None, s, p), dtype, w[0].size)
    assert stats.phases["im2col"][0].rows_per_task == min(group, 7)
    dx, _ = dnn.conv2d_backward_data(y, w, x.shape, stride=stride, padding=padding)
    _close(dx, ref_backward_data(y, w, x.shape, s, p), dtype, w.size)


def test_rows_per_task_fill_ldm_and_spread_over_the_cpes():
    x = np.ones((1, 64, 9, 5), np.float32)
    y, stats = dnn.conv2d_forward(x, np.ones((1, 64, 3, 3), np.float32), padding=1)
    assert stats.phases["im2col"][0].rows_per_task == 9       # a whole plane per CPE
    assert y[0, 0, 4, 2] == 64 * 9
    from swsim.hostlib.dnn.conv import explicit
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    config = Machine().config
    geo = make_geometry((1, 64, 9, 300), (1, 64, 3, 3), 1, 1, "w")
    group = explicit._row_group(geo, 8, "COL2IM", config)
    assert 1 < group < 9                                      # limited by LDM
    fits = []
    for rows in (group, group + 1):
        arena = explicit.KERNEL.arena(config.ldm_bytes, nargs=1)
        explicit._buffers(geo, 8, rows, "COL2IM", arena)
        fits.append(arena.fits)
    assert fits == [True, False]


def test_same_inputs_same_bits_and_cycles():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    (y1, s1), (y2, s2) = (dnn.conv2d_forward(x, w, stride=2, padding=1) for _ in range(2))
    assert y1.tobytes() == y2.tobytes() and s1.phase_cycles == s2.phase_cycles


@pytest.mark.parametrize("group", [1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_python_engine_gives_the_same_bits_and_cycles(monkeypatch, dtype, group):
    """im2col and col2im (swGEMM's engine agreement is tested with swGEMM)."""
    from swsim.hostlib.dnn.conv import explicit
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 1, 5, 4)).astype(dtype)       # CNHW
    geo = make_geometry((1, 2, 5, 4), (2, 2, 3, 3), (2, 1), 1, "w")
    es, elements = x.itemsize, int(np.prod(geo.col_shape))
    results = []
    for engine in ("c", "python"):
        machine = Machine()
        x_addr, col = machine.mem.put(x), machine.mem.alloc(elements * es)
        im2col = explicit._launch("IM2COL", es, x_addr, col, geo, machine, engine, group)
        dx = machine.mem.alloc(x.nbytes)
        col2im = explicit._launch("COL2IM", es, dx, col, geo, machine, engine, group)
        results.append((machine.mem.get(col, (elements,), dtype).tobytes(),
                        machine.mem.get(dx, x.shape, dtype).tobytes(), im2col.cycles,
                        col2im.cycles))
    assert results[0] == results[1]


# ---- bad input ------------------------------------------------------------------------------

X = np.zeros((1, 2, 4, 4))
W = np.zeros((3, 2, 3, 3))
DY = np.zeros((1, 3, 2, 2))


@pytest.mark.parametrize("call, name", [
    (lambda: dnn.conv2d_forward(X.astype(np.int32), W), "x"),
    (lambda: dnn.conv2d_forward(X, W.astype(np.float32)), "w"),
    (lambda: dnn.conv2d_forward(X[0], W), "x"),
    (lambda: dnn.conv2d_forward(X, np.zeros((3, 1, 3, 3))), "input channels"),
    (lambda: dnn.conv2d_forward(X, np.zeros((3, 2, 7, 3))), "padding"),
    (lambda: dnn.conv2d_forward(X, W, np.zeros(2)), "bias"),
    (lambda: dnn.conv2d_forward(X, W, stride=0), "stride"),
    (lambda: dnn.conv2d_forward(X, W, padding=-1), "padding"),
    (lambda: dnn.conv2d_forward(X, W, padding=(1, 2, 3)), "padding"),
    (lambda: dnn.conv2d_forward(X, W, algo="fft"), "algo"),
    (lambda: dnn.conv2d_forward(X, W, algo=None), "algo"),
    (lambda: dnn.conv2d_forward(X, W, layout="NCWH"), "layout"),
    (lambda: dnn.conv2d_forward(X, W, cgs=0), "cgs"),
    (lambda: dnn.conv2d_forward(X, W, cgs=5), "cgs"),
    (lambda: dnn.conv2d_forward(X, W, cgs=True), "cgs"),
    (lambda: dnn.conv2d_forward(X, W, layout="NHWC"), "input channels"),
    (lambda: dnn.conv2d_backward_data(DY, W, (2, 1, 4, 4), layout="CNHW"), "dy"),
    (lambda: dnn.conv2d_backward_data(np.zeros((1, 3, 3, 2)), W, X.shape), "dy"),
    (lambda: dnn.conv2d_backward_data(DY, W, (1, 2, 4)), "x_shape"),
    (lambda: dnn.conv2d_backward_filter(DY, X, (3, 2, 0, 3)), "w_shape"),
    (lambda: dnn.conv2d_backward_filter(DY.astype(np.float32), X, W.shape), "dy"),
])
def test_bad_input_is_a_host_error_naming_the_argument(call, name):
    with pytest.raises(ArgumentError, match=name):   # cgs=True: a type error
        call()


def test_rows_too_long_for_ldm_are_a_host_error():
    with pytest.raises(HostError, match="LDM"):
        dnn.conv2d_forward(np.zeros((1, 1, 1, 8000)), np.zeros((1, 1, 1, 3)), algo="explicit")


# ---- the public API: auto, layout=, cgs= ----------------------------------------------------

def _data(shape, w_shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype))


class _Fake:
    """An algorithm module that refuses or wins the model's vote as told, and records
    whether it ran."""
    LAYOUT, PHASES = "NCHW", ("fake",)

    def __init__(self, name, refusal, cycles):
        self.NAME, self.refusal, self.cycles, self.ran = name, refusal, cycles, False

    def supports(self, geo, direction, dtype, config):
        return self.refusal

    def predict(self, geo, direction, dtype, config):
        return self.cycles

    def forward(self, geo, x, w, bias, machine, stats, engine):
        self.ran = True
        return np.zeros(geo.y_shape, x.dtype)


@pytest.mark.parametrize("refusal, cycles, picked", [
    ("fake needs K = 7", 0.0, "explicit"),       # refused: auto skips it, however fast
    (None, 1e12, "explicit"),                    # slower by the model
    (None, 1.0, "fake")])                        # faster by the model: picked, not tried
def test_auto_picks_the_fastest_supported_algorithm_by_predict(monkeypatch, refusal, cycles,
                                                               picked):
    from swsim.hostlib.dnn import conv
    fake = _Fake("fake", refusal, cycles)
    monkeypatch.setitem(conv.ALGORITHMS, "fake", fake)
    x, w = _data((1, 2, 5, 5), (3, 2, 3, 3))
    y, stats = dnn.conv2d_forward(x, w, padding=1)
    assert stats.algo == picked and fake.ran == (picked == "fake")
    if picked == "explicit":
        _close(y, ref_forward(x, w, None, (1, 1), (1, 1)), np.float32, 19)
    with pytest.raises(HostError, match="K = 7" if refusal else "nothing"):
        if refusal:
            dnn.conv2d_forward(x, w, padding=1, algo="fake")
        else:
            raise HostError("nothing")


def test_auto_with_no_supported_algorithm_is_a_host_error(monkeypatch):
    from swsim.hostlib.dnn import conv
    monkeypatch.setattr(conv, "ALGORITHMS", {"fake": _Fake("fake", "never", 1.0)})
    with pytest.raises(HostError, match="no convolution algorithm.*fake: never"):
        dnn.conv2d_forward(*_data((1, 2, 5, 5), (3, 2, 3, 3)))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "CNHW", "RCNB"])
def test_layouts_round_trip(layout):
    """Every pass in every layout gives the NCHW reference transposed; the layout phase
    costs nothing when the caller already has explicit's CNHW."""
    order = dnn.LAYOUTS[layout]
    perm = ["NCHW".index(a) for a in order]
    x, w = _data((2, 3, 6, 5), (4, 3, 3, 3), np.float64, seed=3)
    dy = np.random.default_rng(4).standard_normal((2, 4, 6, 5))
    s, p = (1, 1), (1, 1)
    y, st = dnn.conv2d_forward(x.transpose(perm), w, padding=1, layout=layout)
    _close(y, ref_forward(x, w, None, s, p).transpose(perm), np.float64, 28)
    assert (st.phase_cycles["layout"] == 0) == (layout == "CNHW")
    dx, _ = dnn.conv2d_backward_data(dy.transpose(perm), w, x.transpose(perm).shape,
                                     padding=1, layout=layout)
    _close(dx, ref_backward_data(dy, w, x.shape, s, p).transpose(perm), np.float64, 36)
    dw, _ = dnn.conv2d_backward_filter(dy.transpose(perm), x.transpose(perm), w.shape,
                                       padding=1, layout=layout)
    _close(dw, ref_backward_filter(x, dy, w.shape, s, p), np.float64, 60)


@pytest.mark.parametrize("stride, padding, k", [(1, 1, 3), (2, 2, 5), (2, 0, 1)])
def test_core_groups_give_the_same_results(stride, padding, k):
    """cgs = 1, 2, 4: R_o (backward-data: R_i) split with halos; 9 rows over 4 CGs leave
    uneven slices."""
    x, w = _data((2, 3, 9, 7), (4, 3, k, k), np.float64, seed=k)
    s, p = (stride, stride), (padding, padding)
    want = ref_forward(x, w, None, s, p)
    dy = np.random.default_rng(5).standard_normal(want.shape)
    runs = {}
    for cgs in (1, 2, 4):
        y, fwd = dnn.conv2d_forward(x, w, stride=stride, padding=padding, cgs=cgs)
        dx, bwd = dnn.conv2d_backward_data(dy, w, x.shape, stride=stride, padding=padding,
                                           cgs=cgs)
        dw, flt = dnn.conv2d_backward_filter(dy, x, w.shape, stride=stride, padding=padding,
                                             cgs=cgs)
        _close(y, want, np.float64, w[0].size)
        _close(dx, ref_backward_data(dy, w, x.shape, s, p), np.float64, w.size)
        _close(dw, ref_backward_filter(x, dy, w.shape, s, p), np.float64, dy[:, 0].size)
        runs[cgs] = (fwd, bwd, flt)
        slices = min(cgs, want.shape[2])
        assert fwd.cgs == slices and fwd.peak_gflops == pytest.approx(742.4 * slices)
        assert fwd.cycles == max(part.cycles for part in fwd.per_cg or [fwd])
        assert (flt.phase_cycles.get("reduce", 0) > 0) == (slices > 1)
    assert runs[4][0].cycles < runs[1][0].cycles            # the slices run in parallel


def test_batches_too_large_for_col_run_in_chunks(monkeypatch):
    from swsim.hostlib.dnn.conv import explicit
    x, w = _data((6, 2, 5, 4), (3, 2, 3, 3), np.float64, seed=6)
    per_image = 2 * 9 * 5 * 4 * 8
    monkeypatch.setattr(explicit, "COL_BYTES", 2 * per_image)     # chunks of 2 images
    dy = np.random.default_rng(7).standard_normal((6, 3, 5, 4))
    y, st = dnn.conv2d_forward(x, w, padding=1, algo="explicit")
    _close(y, ref_forward(x, w, None, (1, 1), (1, 1)), np.float64, 19)
    assert len(st.phases["gemm"]) == len(st.phases["im2col"]) == 3
    dx, st = dnn.conv2d_backward_data(dy, w, x.shape, padding=1, algo="explicit")
    _close(dx, ref_backward_data(dy, w, x.shape, (1, 1), (1, 1)), np.float64, 54)
    assert len(st.phases["col2im"]) == 3
    dw, st = dnn.conv2d_backward_filter(dy, x, w.shape, padding=1, algo="explicit")
    _close(dw, ref_backward_filter(x, dy, w.shape, (1, 1), (1, 1)), np.float64, 120)


# ---- the models: predict and the sampled estimate -------------------------------------------

@pytest.mark.parametrize("shape, src, dst, dtype", [
    ((512, 512, 3, 3), "NCHW", "RCNB", np.float32),     # implicit's weights
    ((128, 64, 3, 3), "CNHW", "RCNB", np.float32),      # backward-data's
    ((64, 64, 3, 3), "NCHW", "RCNB", np.float64),
    ((3, 3, 64, 32), "RCNB", "CNHW", np.float32),       # backward-filter's result
    ((196, 128, 32, 1), "NCHW", "NHWC", np.float32),    # and its operands
])
def test_transform_model_is_within_a_quarter_of_the_run(shape, src, dst, dtype):
    from swsim.hostlib.dnn.conv import model as conv_model
    from swsim.vm import Machine
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    _, stats = dnn.transform(x, src, dst, machine=Machine())
    predicted = conv_model.transform_cycles(shape, src, dst, x.itemsize, Machine().config)
    assert predicted == pytest.approx(stats.cycles, rel=0.25)


@pytest.mark.parametrize("direction, gemm_sampled", [("forward", True),
                                                     ("backward_data", False),
                                                     ("backward_filter", True)])
def test_estimate_from_samples_is_within_three_percent_of_the_whole_run(direction,
                                                                        gemm_sampled):
    """B = 8, 64 -> 64 channels, 16 x 16: im2col / col2im have 8 rounds of tasks, sampled (2
    and 4 rounds) and extrapolated, and so is the GEMM along an axis of many blocks; backward
    data's GEMM (blocks 24 x 128 x 8: 3 x 2 x 1 of them) runs whole."""
    from swsim.hostlib.dnn.conv import explicit
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    geo = make_geometry((8, 64, 16, 16), (64, 64, 3, 3), 1, 0, "w")
    estimate, details = explicit.estimate(geo, direction, np.float32, Machine())
    sampled = [d for d in details.values() if isinstance(d, dict)]
    assert bool(details["gemm"]["sampled_axes"]) == gemm_sampled
    assert any(len(d.get("simulated", ())) == 2 for d in sampled)
    x, w = _data((64, 8, 16, 16), (64, 64, 3, 3))
    dy = np.random.default_rng(1).standard_normal((64, 8, 14, 14)).astype(np.float32)
    if direction == "forward":
        _, st = dnn.conv2d_forward(x, w, layout="CNHW", algo="explicit")
    elif direction == "backward_data":
        _, st = dnn.conv2d_backward_data(dy, w, x.shape, layout="CNHW", algo="explicit")
    else:
        _, st = dnn.conv2d_backward_filter(dy, x, w.shape, layout="CNHW", algo="explicit")
    assert estimate == pytest.approx(st.cycles, rel=0.03)
    predicted = explicit.predict(geo, direction, np.float32, Machine().config)
    assert predicted == pytest.approx(st.cycles, rel=0.35)


def test_explicit_supports_everything_that_fits_in_ldm():
    from swsim.hostlib.dnn.conv import explicit
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    config = Machine().config
    for direction in ("forward", "backward_data", "backward_filter"):
        assert explicit.supports(make_geometry((128, 512, 258, 258), (512, 512, 3, 3), 1, 0,
                                               "w"), direction, np.float32, config) is None
        assert "LDM" in explicit.supports(make_geometry((1, 1, 1, 9000), (1, 1, 1, 3), 1, 0,
                                                        "w"), direction, np.float32, config)


def test_bench_cases_are_listing_5_1():
    from swsim.hostlib.tools.bench import conv as bench
    cases = bench.cases()
    assert len(cases) == 225 and len(set(cases)) == 225
    assert {c[1:3] for c in cases} == {(i, o) for i in bench.CHANNELS for o in bench.CHANNELS
                                       if i >= o}
    assert bench.geometry((32, 128, 64, 16)).r_o == 16


def test_bench_measures_and_validates_a_small_case():
    from swsim.hostlib.tools.bench import conv as bench
    from swsim.hostlib.dnn import conv
    result = bench.measure((1, 64, 64, 16))
    assert not result.refused                                 # generated zero-pads B = 1
    assert set(result.validated) == set(conv.ALGORITHMS)      # K = 3, stride 1
    for est, simulated, _ in result.validated.values():
        assert est == pytest.approx(simulated, rel=bench.MAX_ERROR)
    assert result.auto in conv.ALGORITHMS and result.best in conv.ALGORITHMS
    assert 0.05 < result.efficiency("explicit") < 1
    report = bench.format_report([result], 1.0)
    assert "explicit" in report and "validation: 4 slices" in report
