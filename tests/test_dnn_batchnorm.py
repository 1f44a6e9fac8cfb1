"""batchnorm_forward / batchnorm_backward (hostlib/dnn/batchnorm.py; the resident scheme
kernels/dnn/batchnorm_group.s and the streaming scheme kernels/dnn/batchnorm.s, forced where
a test says `resident=False`) against float64 numpy references (the backward reference
checked by finite differences), odd sizes, inference mode, edge values and errors."""
import contextlib
import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from swsim import Machine
from swsim.hostlib import dnn
from swsim.hostlib.dnn import batchnorm

DTYPES = [np.float32, np.float64]
EPS = {np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}
AXES = (0, 2, 3)


def channel(v):
    return np.asarray(v, np.float64)[None, :, None, None]


def forward_reference(x, gamma, beta, rm, rv, training=True, momentum=0.1, eps=1e-5):
    x = np.asarray(x, np.float64)
    n = x.size // x.shape[1]
    if training:
        mean, var = x.mean(axis=AXES), x.var(axis=AXES)
        new_rm = (1 - momentum) * np.float64(rm) + momentum * mean
        new_rv = (1 - momentum) * np.float64(rv) + momentum * var * n / (n - 1)
    else:
        mean, var = np.float64(rm), np.float64(rv)
        new_rm, new_rv = rm, rv
    invstd = 1 / np.sqrt(var + eps)
    y = (x - channel(mean)) * channel(invstd * gamma) + channel(beta)
    return y, new_rm, new_rv, mean, invstd


def loss_of(x, gamma, beta, dy):
    """sum(dy * y): its gradients are batchnorm's backward from dy."""
    y = forward_reference(x, gamma, beta, 0 * gamma, 1 + 0 * gamma)[0]
    return float((dy * y).sum())


def backward_reference(dy, x, gamma, mean, invstd):
    dy, x = np.asarray(dy, np.float64), np.asarray(x, np.float64)
    n = x.size // x.shape[1]
    xhat = (x - channel(mean)) * channel(invstd)
    dbeta = dy.sum(axis=AXES)
    dgamma = (dy * xhat).sum(axis=AXES)
    dx = channel(gamma * invstd) * (dy - channel(dbeta / n) - xhat * channel(dgamma / n))
    return dx, dgamma, dbeta


def test_backward_reference_by_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 2, 2, 3))
    gamma, beta = rng.normal(size=2), rng.normal(size=2)
    dy = rng.normal(size=x.shape)
    _, _, _, mean, invstd = forward_reference(x, gamma, beta, 0 * gamma, 1 + 0 * gamma)
    dx, dgamma, dbeta = backward_reference(dy, x, gamma, mean, invstd)
    h = 1e-6
    for name, value, grad in (("x", x, dx), ("gamma", gamma, dgamma), ("beta", beta, dbeta)):
        for index in np.ndindex(value.shape):
            step = np.zeros_like(value)
            step[index] = h
            args = {"x": x, "gamma": gamma, "beta": beta}
            plus = dict(args, **{name: value + step})
            minus = dict(args, **{name: value - step})
            numeric = (loss_of(dy=dy, **plus) - loss_of(dy=dy, **minus)) / (2 * h)
            assert abs(numeric - grad[index]) < 1e-6 * (1 + abs(grad[index])), (name, index)


@contextlib.contextmanager
def scheme(resident, one_at_a_time=False):
    """Run the block with the resident scheme where it fits (as the library does; with
    `one_at_a_time`, its tiles single-buffered as where they fit the LDM only once), or with
    the streaming scheme everywhere."""
    tiles = batchnorm.tiles
    with pytest.MonkeyPatch.context() as patch:
        if not resident:
            patch.setattr(batchnorm, "tiles", lambda *args: None)
        elif one_at_a_time:
            patch.setattr(batchnorm, "tiles",
                          lambda *args: dataclasses.replace(tiles(*args), parities=1))
        yield


def inputs(rng, shape, dtype, scale=1.0, offset=0.0):
    c = shape[1]
    x = (rng.normal(size=shape) * scale + offset).astype(dtype)
    return (x, rng.normal(size=c).astype(dtype), rng.normal(size=c).astype(dtype),
            rng.normal(size=c).astype(dtype), rng.uniform(0.5, 2, c).astype(dtype))


def close(got, want, dtype, magnitude, roundings=8):
    want = np.asarray(want, np.float64)
    assert got.dtype == dtype and got.shape == want.shape
    tol = EPS[dtype] * np.abs(want) + roundings * 2.0 ** -53 * magnitude + \
        2 * EPS[dtype] * magnitude
    assert np.all(np.abs(got - want) <= tol), float(np.max(np.abs(got - want) - tol))


@settings(max_examples=20, deadline=None)
@given(dtype=st.sampled_from(DTYPES), b=st.integers(1, 5), c=st.integers(1, 9),
       h=st.integers(1, 7), w=st.integers(1, 7), training=st.booleans(),
       scale=st.sampled_from([1e-3, 1.0, 100.0]), seed=st.integers(0, 2 ** 32 - 1),
       resident=st.booleans())
def test_forward_against_the_reference(dtype, b, c, h, w, training, scale, seed, resident):
    assume(not training or b * h * w >= 2)
    rng = np.random.default_rng(seed)
    args = inputs(rng, (b, c, h, w), dtype, scale, offset=3 * scale)
    with scheme(resident):
        got, stats = dnn.batchnorm_forward(*args, training=training, momentum=0.25, eps=1e-3)
    want = forward_reference(*args, training=training, momentum=0.25, eps=1e-3)
    n = b * h * w
    y_size = np.abs(want[0]).max() + 1
    close(got[0], want[0], dtype, y_size * (1 + n * 2.0 ** -40))
    for g, r in zip(got[1:], want[1:]):
        close(g, r, dtype, np.abs(r).max() + 1, roundings=8 + n)
    assert stats.cycles > 0


@settings(max_examples=20, deadline=None)
@given(dtype=st.sampled_from(DTYPES), b=st.integers(1, 5), c=st.integers(1, 9),
       h=st.integers(1, 7), w=st.integers(1, 7), seed=st.integers(0, 2 ** 32 - 1),
       resident=st.booleans())
def test_backward_against_the_reference(dtype, b, c, h, w, seed, resident):
    assume(b * h * w >= 2)
    rng = np.random.default_rng(seed)
    x, gamma, beta, rm, rv = inputs(rng, (b, c, h, w), dtype)
    (_, _, _, mean, invstd), _ = dnn.batchnorm_forward(x, gamma, beta, rm, rv)
    dy = rng.normal(size=x.shape).astype(dtype)
    with scheme(resident):
        (dx, dgamma, dbeta), _ = dnn.batchnorm_backward(dy, x, gamma, mean, invstd)
    want = backward_reference(dy, x, gamma, mean, invstd)
    n = b * h * w
    scale = (np.abs(dy).sum() + 1) * (np.abs(invstd).max() + 1) * (np.abs(gamma).max() + 1)
    for got, ref in zip((dx, dgamma, dbeta), want):
        close(got, ref, dtype, scale, roundings=8 + 2 * n)


@pytest.mark.parametrize("resident", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_channels_and_edge_values(dtype, resident):
    x = np.zeros((2, 3, 2, 2), dtype)
    x[:, 1] = 2.0 ** 100                       # sums exact: mean = x
    x[:, 2] = np.nan
    ones, zeros = np.ones(3, dtype), np.zeros(3, dtype)
    with scheme(resident):
        (y, rm, rv, mean, invstd), _ = dnn.batchnorm_forward(x, ones, zeros, zeros, ones)
    assert not y[:, :2].any() and np.isnan(y[:, 2]).all()    # x - mean = 0: y = beta
    assert invstd[0] == dtype(1 / np.sqrt(1e-5)) and np.isnan(rm[2])


@pytest.mark.parametrize("shape, backward, resident", [
    ((2, 5, 4, 4), True, True),                                       # resident, 2 tiles
    ((2, 5, 4, 4), True, "one at a time"),                            # ... single-buffered
    ((2, 40, 3, 5), True, True),             # segments (whole planes) of 5 channels per tile
    ((3, 4, 5, 3), False, False),                                     # planes
    pytest.param((3, 6, 2, 4), True, False, marks=pytest.mark.slow)])  # channel pieces (~20 s)
def test_engines_agree(shape, backward, resident):
    rng = np.random.default_rng(5)
    args = inputs(rng, shape, np.float64)
    with scheme(resident, one_at_a_time=resident == "one at a time"):
        a, sa = dnn.batchnorm_forward(*args, engine="c")
        b, sb = dnn.batchnorm_forward(*args, engine="python")
        assert all(p.tobytes() == q.tobytes() for p, q in zip(a, b)) and sa.cycles == sb.cycles
        if backward:
            dy = rng.normal(size=shape)
            c, sc = dnn.batchnorm_backward(dy, args[0], args[1], a[3], a[4], engine="c")
            d, sd = dnn.batchnorm_backward(dy, args[0], args[1], a[3], a[4], engine="python")
            assert all(p.tobytes() == q.tobytes() for p, q in zip(c, d))
            assert sc.cycles == sd.cycles


def test_errors():
    x = np.zeros((2, 3, 4, 4), np.float32)
    c = np.ones(3, np.float32)
    with pytest.raises(dnn.DnnError, match=r"\(B, C, H, W\)"):
        dnn.batchnorm_forward(x[0], c, c, c, c)
    with pytest.raises(dnn.DnnError, match=r"gamma must have shape \(3,\)"):
        dnn.batchnorm_forward(x, c[:2], c, c, c)
    with pytest.raises(dnn.DnnError, match="float32 like"):
        dnn.batchnorm_forward(x, c.astype(np.float64), c, c, c)
    with pytest.raises(dnn.DnnError, match="more than one value"):
        dnn.batchnorm_forward(x[:1, :, :1, :1], c, c, c, c)
    with pytest.raises(dnn.DnnError, match="training must be"):
        dnn.batchnorm_forward(x, c, c, c, c, training=1)
    with pytest.raises(dnn.DnnError, match=r"eps must be >= 0, got -1e-05"):
        dnn.batchnorm_forward(x, c, c, c, c, eps=-1e-5)
    with pytest.raises(dnn.DnnError, match=r"momentum must be in \[0, 1\], got 1.5"):
        dnn.batchnorm_forward(x, c, c, c, c, momentum=1.5)
    with pytest.raises(dnn.DnnError, match="dy must have"):
        dnn.batchnorm_backward(x[:1], x, c, c, c)


def check_both_passes(x, gamma, beta, rm, rv, dy, **kwargs):
    """Forward (training and inference) and backward against the references; returns the
    results and the training forward's Stats."""
    dtype, n = x.dtype.type, x.size // x.shape[1]
    results = []
    for training in (False, True):
        got, stats = dnn.batchnorm_forward(x, gamma, beta, rm, rv, training=training, **kwargs)
        want = forward_reference(x, gamma, beta, rm, rv, training=training)
        close(got[0], want[0], dtype, (np.abs(want[0]).max() + 1) * (1 + n * 2.0 ** -40))
        for g, r in zip(got[1:], want[1:]):
            close(g, r, dtype, np.abs(r).max() + 1, roundings=8 + n)
        results += list(got)
    mean, invstd = results[-2], results[-1]
    grads, _ = dnn.batchnorm_backward(dy, x, gamma, mean, invstd, **kwargs)
    want = backward_reference(dy, x, gamma, mean, invstd)
    scale = (np.abs(dy).sum() + 1) * (np.abs(invstd).max() + 1) * (np.abs(gamma).max() + 1)
    for got, ref in zip(grads, want):
        close(got, ref, dtype, scale, roundings=8 + 2 * n)
    return results + list(grads), stats


@pytest.mark.parametrize("resident", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 2, 33, 65), (40, 4, 3, 5), (3, 5, 1, 1)])
def test_any_shape_and_core_groups_agree(dtype, shape, resident):
    """Streaming: planes larger than a piece (segments of a plane, a partial last one),
    several planes per piece (strided gets over the other channels) and one-element planes;
    resident: segments of planes (H W not a multiple of 4), one channel per tile. cgs = 1, 2,
    4 give the same bits (the folds combine the pieces in one order; a tile's sums do not
    depend on the core group that takes it)."""
    rng = np.random.default_rng(sum(shape))
    x, gamma, beta, rm, rv = inputs(rng, shape, dtype, 2.0, 1.0)
    dy = rng.normal(size=shape).astype(dtype)
    with scheme(resident):
        first, stats = check_both_passes(x, gamma, beta, rm, rv, dy)
        machine = Machine()
        for cgs in (2, 4):
            again, chip = check_both_passes(x, gamma, beta, rm, rv, dy, cgs=cgs,
                                            machine=machine)
            assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again))
            used = min(cgs, stats.tiles.count(shape)) if resident else cgs
            assert chip.scheme == stats.scheme == ("resident" if resident else "streaming")
            assert chip.cgs == used and chip.cycles < stats.cycles


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, planes, slots", [
    ((1, 40, 4, 4), (2, 1), 1),    # B = 1: pieces of 2 (f64: 1) planes, tiles of 32 (a
    #                                partial one)
    ((100, 3, 2, 2), (3, 3), 2),   # more pieces than CPEs: two slots per CPE
    ((2, 3, 1, 4), (3, 3), 1),     # one-vector planes, a tile beyond the channels
    ((3, 2, 40, 36), (0, 0), 1),   # segments on 18 CPEs (f64: 36), not whole planes on 3 x 2
    ((1, 16, 16, 256), (0, 0), 1),  # B = 1 (CNHW's view): tiles of 2 channels' segments,
    #                                 32 pieces, not 16 planes
    ((2, 40, 3, 5), (0, 0), 1),    # planes of 15 elements: tiles of 5 channels' planes
    ((100, 40, 1, 8), (32, 32), 2),    # B >= 64 (RCNB's H W "images"): pieces of as many
    #                                planes as fit (not the fewest whole lines), a partial tile;
    #                                a CPE's two pieces one strided request (whole tiles); the
    #                                row passes, runs of two vectors
    ((100, 40, 1, 20), (32, 32), 2)])  # runs of five vectors: a quad and one more
def test_resident_tiles(dtype, shape, planes, slots):
    """The resident scheme's other geometries (several channels per piece and tile, segments
    of several channels' planes, partial tiles, several slots) against the references; cgs = 3,
    the tiles one at a time and a request per piece (not one strided request per CPE) give
    cgs = 1's bits."""
    rng = np.random.default_rng(len(shape) + shape[1])
    x, gamma, beta, rm, rv = inputs(rng, shape, dtype, 2.0, 1.0)
    dy = rng.normal(size=shape).astype(dtype)
    first, stats = check_both_passes(x, gamma, beta, rm, rv, dy)
    layout = stats.tiles
    assert stats.scheme == "resident" and layout.slots == slots
    assert layout.planes == planes[dtype == np.float64] and layout.parities == 2
    again, _ = check_both_passes(x, gamma, beta, rm, rv, dy, cgs=3)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again))
    with scheme(True, one_at_a_time=True):
        again, single = check_both_passes(x, gamma, beta, rm, rv, dy)
    assert single.tiles.parities == 1
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batchnorm, "_skip", lambda *args: 0)
        again, per_piece = check_both_passes(x, gamma, beta, rm, rv, dy)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again))
    requests = [s.run.counters["dma_requests"] for s in (stats, per_piece)]
    whole = layout.planes * shape[2] * shape[3] * x.itemsize == layout.slot_bytes
    assert (requests[0] < requests[1]) == (slots > 1 and whole)     # (100, 40, 1, 8); f64:
    #                                                                 also (100, 3, 2, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_inference_on_row_tiles(dtype):
    """Inference on row tiles (a piece per image holding all the tile's channels: RCNB's
    positions) runs on the resident scheme, the finish from the running statistics then y,
    with the streaming scheme's bits (the same double arithmetic); other tiles stream."""
    rng = np.random.default_rng(5)
    for shape, scheme_used in (((100, 40, 1, 20), "resident"), ((4, 8, 6, 8), "streaming")):
        x, gamma, beta, rm, rv = inputs(rng, shape, dtype, 2.0, 1.0)
        got, stats = dnn.batchnorm_forward(x, gamma, beta, rm, rv, training=False)
        with scheme(False):
            want, _ = dnn.batchnorm_forward(x, gamma, beta, rm, rv, training=False)
        assert stats.scheme == scheme_used
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))


def test_resident_boundary():
    """Tiles are double-buffered while their pieces fit half of every CPE's free LDM per
    input stream, one at a time while they fit all of it, and the streaming scheme runs past
    that: the boundaries for float32 at B = 1 (one whole-line segment per CPE), and runs on
    the first sizes past the backward's two (forward / backward: double-buffered / one at a
    time, then one at a time / streaming)."""
    config = Machine().config
    free = batchnorm.GROUP_KERNEL.arena(config.ldm_bytes, nargs=1).free
    for streams in (1, 2):
        for parities, beyond in ((2, 1), (1, None)):
            segment = free // (parities * streams) // 128 * 32    # float32 elements per CPE
            layout = batchnorm.tiles(config, (1, 1, 64, segment), 4, streams)
            assert (layout.segment, layout.parities) == (segment, parities)
            layout = batchnorm.tiles(config, (1, 1, 64, segment + 32), 4, streams)
            assert (layout and layout.parities) == beyond
    for parities, schemes in ((2, (2, 1)), (1, (1, None))):
        shape = (1, 1, 64, free // (2 * parities) // 128 * 32 + 32)
        x, gamma, beta, rm, rv = inputs(np.random.default_rng(3), shape, np.float32, 2.0, 1.0)
        dy = np.random.default_rng(4).normal(size=shape).astype(np.float32)
        (_, _, _, mean, invstd), forward = dnn.batchnorm_forward(x, gamma, beta, rm, rv)
        grads, backward = dnn.batchnorm_backward(dy, x, gamma, mean, invstd)
        used = [s.tiles.parities if s.scheme == "resident" else None
                for s in (forward, backward)]
        assert used == list(schemes)
        scale = (np.abs(dy).sum() + 1) * (np.abs(invstd).max() + 1) * (np.abs(gamma).max() + 1)
        for got, ref in zip(grads, backward_reference(dy, x, gamma, mean, invstd)):
            close(got, ref, np.float32, scale, roundings=8 + 2 * x.size)


def test_folds_of_folds(monkeypatch):
    """Streaming: tiny pieces and folds of at most 3 records: several fold levels per
    channel."""
    monkeypatch.setattr(batchnorm, "tiles", lambda *args: None)
    monkeypatch.setattr(batchnorm, "MAX_PIECE_BYTES", 128)
    monkeypatch.setattr(batchnorm, "MAX_FOLD", 3)
    rng = np.random.default_rng(9)
    x, gamma, beta, rm, rv = inputs(rng, (5, 2, 9, 13), np.float64, 3.0, 100.0)
    dy = rng.normal(size=x.shape)
    _, stats = check_both_passes(x, gamma, beta, rm, rv, dy)
    assert stats.pieces.per_channel > 9 and stats.pieces.segments > 1
    folds = [p for p in stats.parts if p.op == "bn_fold_stats"]
    assert len(folds) >= 3


def laid_out(a, layout):
    """a (B, C, H, W) with its axes in `layout`'s order (the bytes a layout holds)."""
    return np.ascontiguousarray(a.transpose(["NCHW".index(c) for c in dnn.LAYOUTS[layout]]))


def nchw(a, layout):
    """The inverse of laid_out."""
    return a.transpose(np.argsort(["NCHW".index(c) for c in dnn.LAYOUTS[layout]]))


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(DTYPES), layout=st.sampled_from(list(dnn.LAYOUTS)),
       b=st.integers(1, 5), c=st.integers(1, 9), h=st.integers(1, 6), w=st.integers(1, 6),
       training=st.booleans(), seed=st.integers(0, 2 ** 32 - 1), resident=st.booleans())
def test_layouts_against_the_reference_and_the_nchw_path(dtype, layout, b, c, h, w, training,
                                                         seed, resident):
    """x (and dy) laid out as `layout`: the statistics are per channel wherever C is, y and
    dx come back in the layout, and everything equals the NCHW path's results within float
    reassociation (the sums run in double in another order: the pieces differ)."""
    assume(b * h * w >= 2)
    rng = np.random.default_rng(seed)
    x, gamma, beta, rm, rv = inputs(rng, (b, c, h, w), dtype, 2.0, 1.0)
    dy = rng.normal(size=x.shape).astype(dtype)
    n = b * h * w
    with scheme(resident):
        got, stats = dnn.batchnorm_forward(laid_out(x, layout), gamma, beta, rm, rv,
                                           training=training, layout=layout)
        nchw_path, _ = dnn.batchnorm_forward(x, gamma, beta, rm, rv, training=training)
        assert got[0].shape == laid_out(x, layout).shape and stats.layout == layout
        want = forward_reference(x, gamma, beta, rm, rv, training=training)
        for mine, theirs, ref in zip((nchw(got[0], layout),) + got[1:], nchw_path, want):
            magnitude = np.abs(ref).max() + 1
            close(mine, ref, dtype, magnitude * (1 + n * 2.0 ** -40), roundings=8 + n)
            close(mine, theirs, dtype, magnitude * (1 + n * 2.0 ** -40), roundings=16 + 2 * n)
        mean, invstd = nchw_path[3], nchw_path[4]
        grads, stats = dnn.batchnorm_backward(laid_out(dy, layout), laid_out(x, layout), gamma,
                                              mean, invstd, layout=layout)
        nchw_grads, _ = dnn.batchnorm_backward(dy, x, gamma, mean, invstd)
    assert stats.layout == layout
    scale = (np.abs(dy).sum() + 1) * (np.abs(invstd).max() + 1) * (np.abs(gamma).max() + 1)
    for mine, theirs, ref in zip((nchw(grads[0], layout),) + grads[1:], nchw_grads,
                                 backward_reference(dy, x, gamma, mean, invstd)):
        close(mine, ref, dtype, scale, roundings=8 + 2 * n)
        close(mine, theirs, dtype, scale, roundings=16 + 4 * n)


@pytest.mark.parametrize("layout, view", [("NCHW", (4, 6, 5, 8)), ("CNHW", (1, 6, 1, 160)),
                                          ("RCNB", (40, 6, 1, 4)), ("NHWC", (160, 6, 1, 1))])
def test_a_layout_is_the_nchw_view_of_its_axes_around_c(layout, view):
    """What the kernels see: the axes before C as images, those after it as one plane."""
    shape = laid_out(np.zeros((4, 6, 5, 8)), layout).shape
    assert batchnorm.view(shape, layout) == view


def test_layout_errors():
    x = np.zeros((2, 3, 4, 4), np.float32)
    c = np.ones(3, np.float32)
    with pytest.raises(dnn.DnnError, match="unknown layout 'NCWH'"):
        dnn.batchnorm_forward(x, c, c, c, c, layout="NCWH")
    with pytest.raises(dnn.DnnError, match=r"x must be \(C, B, H, W\) \(layout CNHW\)"):
        dnn.batchnorm_backward(x[0], x[0], c, c, c, layout="CNHW")
    with pytest.raises(dnn.DnnError, match=r"gamma must have shape \(4,\)"):
        dnn.batchnorm_forward(x, c, c, c, c, layout="NHWC")      # C is NHWC's last axis


@pytest.mark.parametrize("shape, es", [((3136, 256, 1, 16), 4), ((3136, 512, 1, 16), 4),
                                       ((784, 1024, 1, 16), 8), ((64, 256, 4, 4), 4)])
@pytest.mark.parametrize("streams", [2, 3])
def test_many_channels_per_piece_leave_room_for_their_apply_records(shape, es, streams):
    """The apply launch holds `streams` piece buffers and APPLY_BYTES per channel of a piece,
    double-buffered (ResNet-50's res2a_bn1 in RCNB, the first shape, overflowed the LDM by
    1 KiB with 128 channels per piece)."""
    config = Machine().config
    pieces = batchnorm.pieces(config, shape, es, streams)
    assert pieces.channels > 2
    vector = batchnorm.VECTOR
    frame = streams * -(-pieces.elements * es // vector) * vector + -(
        -batchnorm.APPLY_BYTES * pieces.channels // vector) * vector
    assert 2 * frame <= batchnorm.stream.arena(config, batchnorm.KERNEL).free
