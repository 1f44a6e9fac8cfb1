"""softmax_cross_entropy (hostlib/dnn/softmax.py, kernels/dnn/softmax.s): the mean loss and the
logits' gradient against a float64 numpy reference (its gradient checked by finite
differences), with a row shared by a mesh row and with whole rows per CPE, odd sizes, edge
values, several launches and the reduction passes, errors, and the accuracy of the kernel's
log routine."""
import contextlib
import functools
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim import Machine
from swsim.hostlib import dnn
from swsim.hostlib.dnn import softmax

DTYPES = [np.float32, np.float64]
WIDTHS = [8, 1]               # CPEs sharing a row: a mesh row, or whole rows per CPE


@contextlib.contextmanager
def split_width(width):
    """Force the CPEs sharing a row (instead of the estimate's choice)."""
    with mock.patch.object(softmax, "split_width", lambda *args: width):
        yield
EPS = {np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}
# vexp_ds's truncation: Taylor to degree 8 on |r| <= ln2 / 2, (ln2/2)^9 / 9! / exp(-ln2/2)
# = 2.82e-10 relative (0.005 float32 ulp), plus double roundings
EXP_DS_MAX_RELATIVE = 2.83e-10
LOG_MAX_ULP = 1.66  # largest error of log_d found on test_log_accuracy's sample (1.6597 ulp)


def reference(x, labels):
    """Mean cross-entropy and its gradient in float64."""
    x = np.asarray(x, np.float64)
    labels = np.asarray(labels).astype(np.int64)
    rows = np.arange(x.shape[0])
    z = x - x.max(axis=1, keepdims=True)
    s = np.exp(z).sum(axis=1)
    loss = np.mean(np.log(s) - z[rows, labels])
    grad = np.exp(z) / s[:, None]
    grad[rows, labels] -= 1
    return loss, grad / x.shape[0]


def check(x, labels):
    (loss, dlogits), stats = dnn.softmax_cross_entropy(x, labels)
    with np.errstate(over="ignore"):               # x - max overflows for +-max: -inf
        want_loss, want_grad = reference(x, labels)
    dtype = x.dtype.type
    assert loss.dtype == x.dtype and loss.shape == () and dlogits.dtype == x.dtype
    # computed in double (the row losses are >= 0: their sum's roundings are relative to
    # it), rounded once to the dtype
    # (float32 rows take exp to float32 accuracy: its error, relative to each e, moves the
    # row sum, so the loss by as much and p = e / s by twice as much)
    exp_error = EXP_DS_MAX_RELATIVE if dtype == np.float32 else 0.0
    rtol = (x.shape[0] + 8) * 2.0 ** -53 + (EPS[dtype] if dtype == np.float32 else 0)
    if abs(want_loss) > np.finfo(dtype).max:       # overflows the dtype
        assert loss == np.inf
    else:
        np.testing.assert_allclose(float(loss), want_loss, rtol=rtol,
                                   atol=16 * 2.0 ** -53 + exp_error)
    # the final rounding, and in double exp's, the row sum's, 1/sum's and the products'
    # (relative to the softmax p: the label's element p - 1 cancels)
    batch, classes = x.shape
    double = (classes + 8) * 2.0 ** -53
    tol = (EPS[dtype] + double + 2 * exp_error) * np.abs(want_grad) + \
        (double + 2 * exp_error) / batch + np.finfo(dtype).smallest_subnormal
    assert np.all(np.abs(dlogits - want_grad) <= tol)
    assert stats.cycles > 0
    return (loss, dlogits), stats


def test_reference_gradient_by_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 5))
    labels = np.array([4, 0, 2])
    _, grad = reference(x, labels)
    h = 1e-6
    for i in range(3):
        for j in range(5):
            step = np.zeros_like(x)
            step[i, j] = h
            numeric = (reference(x + step, labels)[0] - reference(x - step, labels)[0]) / (2 * h)
            assert abs(numeric - grad[i, j]) < 1e-8


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(DTYPES), batch=st.integers(1, 70), classes=st.integers(1, 37),
       scale=st.sampled_from([1e-3, 1.0, 30.0]), seed=st.integers(0, 2 ** 32 - 1))
def test_against_the_reference(dtype, batch, classes, scale, seed):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(batch, classes)) * scale).astype(dtype)
    check(x, rng.integers(0, classes, batch))


@settings(max_examples=25, deadline=None)
@given(width=st.sampled_from(WIDTHS), dtype=st.sampled_from(DTYPES), batch=st.integers(1, 40),
       classes=st.integers(1, 300), scale=st.sampled_from([1e-3, 1.0, 30.0]),
       seed=st.integers(0, 2 ** 32 - 1))
def test_each_split_width_against_the_reference(width, dtype, batch, classes, scale, seed):
    """Rows cut at any byte of a line, ranges of several rows sharing lines, parts of a row
    empty (fewer classes than columns), both ways of working."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(batch, classes)) * scale).astype(dtype)
    with split_width(width):
        check(x, rng.integers(0, classes, batch))


def test_the_estimate_shares_long_rows_and_deals_short_ones():
    config = Machine().config
    assert softmax.split_width(config, 32, 1000, 4) == 8      # few long rows: a mesh row each
    assert softmax.split_width(config, 256, 10, 4) == 1       # many short ones: whole rows
    assert softmax.split_width(config, 2, 5000, 4) == 8       # only shared parts fit in LDM


@pytest.mark.parametrize("width, batch, classes", [(1, 2100, 3), (8, 2090, 33)])
def test_batches_past_one_launch(width, batch, classes):
    """More rows than a launch's ranges hold (RANGE_ROWS per mesh row): several launches,
    then the reduction passes."""
    rng = np.random.default_rng(9)
    x = rng.normal(scale=4, size=(batch, classes)).astype(np.float32)
    with split_width(width):
        _, stats = check(x, rng.integers(0, classes, batch))
    assert len([p for p in stats.parts if p.op == "softmax_cross_entropy"]) == 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_rows_take_several_reduction_passes(dtype):
    rng = np.random.default_rng(2)
    batch = softmax.REDUCE_VALUES + 77
    x = rng.normal(size=(batch, 3)).astype(dtype)
    check(x, rng.integers(0, 3, batch))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_widest_row_that_fits(dtype):
    classes = softmax.max_classes(Machine().config, np.dtype(dtype).itemsize)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, classes)).astype(dtype)
    with split_width(8):
        check(x, np.array([0, classes - 1]))
    with pytest.raises(dnn.DnnError, match="does not fit in LDM"):
        dnn.softmax_cross_entropy(np.zeros((1, classes + 4), dtype), [0])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_edge_values(dtype, width):
    with split_width(width):
        edge_values(dtype)


def edge_values(dtype):
    big = np.finfo(dtype).max
    x = np.array([[big, -big, 0.0], [-np.inf, 5.0, -np.inf], [1e-40, 0.0, -0.0],
                  [-1e3, -1e3, -1e3]], dtype)
    check(x, np.array([0, 1, 0, 2]))
    check(x[:1], np.array([1]))                            # loss 2 max: overflows f32
    (loss, dlogits), _ = dnn.softmax_cross_entropy(x[1:2], [0])
    assert loss == np.inf                                  # the label's exp(-inf) = 0
    assert dlogits.tolist() == [[-1.0, 1.0, 0.0]]
    (loss, dlogits), _ = dnn.softmax_cross_entropy(np.array([[1.0, np.nan]], dtype), [0])
    assert np.isnan(loss) and np.isnan(dlogits).all()
    (loss, dlogits), _ = dnn.softmax_cross_entropy(np.array([[7.0], [-3.0]], dtype), [0, 0])
    assert loss == 0 and not dlogits.any()                 # one class: p = 1


def test_float_labels_holding_integers_are_accepted():
    x = np.random.default_rng(4).normal(size=(4, 3)).astype(np.float32)
    check(x, np.array([0.0, 2.0, 1.0, 2.0], np.float32))


@pytest.mark.parametrize("labels, match", [
    ([0, 3], "0..2"), ([-1, 0], "0..2"), ([0.5, 1], "integers"), ([0], r"shape \(2,\)"),
    (["a", "b"], "integers")])
def test_bad_labels(labels, match):
    with pytest.raises(dnn.DnnError, match=match):
        dnn.softmax_cross_entropy(np.zeros((2, 3), np.float32), np.array(labels))


def test_bad_logits():
    with pytest.raises(dnn.DnnError, match="batch, classes"):
        dnn.softmax_cross_entropy(np.zeros(3, np.float32), [0])
    with pytest.raises(dnn.DnnError, match="float32 or float64"):
        dnn.softmax_cross_entropy(np.zeros((2, 3), np.int32), [0, 0])


@pytest.mark.parametrize("width, shape", [(8, (3, 70)), (1, (9, 11))])
def test_engines_agree(width, shape):
    """(3, 70) doubles: three rows of one range sharing lines, parts handed between columns."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=shape)
    labels = rng.integers(0, shape[1], shape[0])
    with split_width(width):
        (a, da), sa = dnn.softmax_cross_entropy(x, labels, engine="c")
        (b, db), sb = dnn.softmax_cross_entropy(x, labels, engine="python")
    assert a.tobytes() == b.tobytes() and da.tobytes() == db.tobytes()
    assert sa.cycles == sb.cycles


@pytest.mark.parametrize("width, shape", [(1, (300, 37)), (8, (96, 500))])
def test_core_groups_give_the_same_bits(width, shape):
    """The rows are shared by the CGs; the row losses are summed in one order on one CG."""
    rng = np.random.default_rng(8)
    x = rng.normal(scale=3, size=shape).astype(np.float32)
    labels = rng.integers(0, shape[1], shape[0])
    with split_width(width):
        (loss, grad), single = dnn.softmax_cross_entropy(x, labels)
        for cgs in (2, 4):
            (l2, g2), stats = dnn.softmax_cross_entropy(x, labels, cgs=cgs)
            assert l2.tobytes() == loss.tobytes() and g2.tobytes() == grad.tobytes()
            assert stats.parts[0].cgs == cgs and stats.cycles < single.cycles


# ---- the log routine, alone on one CPE -------------------------------------------------------
LOG_BATCH = 512


def _batch_harness(entry, body):
    """A kernel `entry` for one CPE: a0 = LOG_BATCH doubles in main memory, got into LT_BUF,
    `body` run on them in place, put back."""
    return f"""
	.include "../include/dma.inc"
	.ldm
	.align	5
LT_REPLY:	.quad	0
LT_RA:	.quad	0
LT_ARGS:	.skip	16
	.bss
	.align	7
LT_BUF:	.skip	{8 * LOG_BATCH}
	.text
	.globl	{entry}
	.ent	{entry}
{entry}:
	stl	$26, LT_RA($31)
	stl	$16, LT_ARGS($31)
	MAKE_DESC $1, DMA_GET, {8 * LOG_BATCH}, LT_REPLY
	ldi	$2, LT_BUF
	DMA_WAIT $1, $16, $2, LT_REPLY
{body}
	MAKE_DESC $1, DMA_PUT, {8 * LOG_BATCH}, LT_REPLY
	ldl	$16, LT_ARGS($31)
	ldi	$2, LT_BUF
	DMA_WAIT $1, $16, $2, LT_REPLY
	ldl	$26, LT_RA($31)
	ret
	.end	{entry}
"""


_LOG_HARNESS = _batch_harness("log_test", f"""
	ldi	$9, LT_BUF
	ldi	$10, {LOG_BATCH}
1:	fldd	$16, 0($9)
	bsr	$26, log_d
	fstd	$0, 0($9)
	ldi	$9, 8($9)
	subl	$10, 1, $10
	bgt	$10, 1b""")
_EXP_HARNESS = _batch_harness("exp_test", f"""
	ldi	$16, LT_BUF
	mov	$16, $17
	ldi	$18, {LOG_BATCH // 4}
	bsr	$26, vexp_ds""")


@functools.lru_cache(maxsize=None)
def _harness(source):
    """A test harness linked with softmax.s (log_d, and vmath.inc's routines) and the driver
    it needs."""
    from swsim.asm import build
    from swsim.kernels import KERNEL_DIR, source_path
    sources = [(source, "harness.s")] + [
        (source_path(name).read_text(), str(source_path(name)))
        for name in ("dnn/softmax.s", "dnn/stream.s")]
    return build(sources, include_dirs=(str(KERNEL_DIR), str(KERNEL_DIR / "dnn")))


def run_batch(source, entry, values):
    values = np.asarray(values, np.float64)
    assert values.shape == (LOG_BATCH,)
    machine = Machine()
    addr = machine.mem.put(values)
    machine.run(_harness(source), entry=entry, cpes=[0], args=[addr])
    return machine.mem.get(addr, values.shape, np.float64)


def run_log(values):
    return run_batch(_LOG_HARNESS, "log_test", values)


def log_sample():
    """Where the loss takes logs (row sums in [1, C]) and beyond: 1 and its neighbours, the
    binade ends and the sqrt(2) split, integers, and uniform points over [1, 2^20] and over
    the normal range."""
    rng = np.random.default_rng(6)
    special = [1.0, np.nextafter(1.0, 2), np.nextafter(1.0, 0), np.sqrt(2),
               np.nextafter(np.sqrt(2), 2), np.nextafter(np.sqrt(2), 0), 2.0, 3.0, 1308.0,
               np.finfo(np.float64).tiny, np.finfo(np.float64).max, 0.5, 0.75]
    values = np.concatenate([special, np.arange(1, 200, dtype=np.float64),
                             rng.uniform(1, 2, 1000), rng.uniform(1, 2.0 ** 20, 1000),
                             2.0 ** rng.uniform(-1020, 1020, 1000)])
    pad = -len(values) % LOG_BATCH
    return np.concatenate([values, np.full(pad, 2.0)])


def ulps(got, x):
    want = np.log(x.astype(np.longdouble))
    spacing = np.spacing(np.abs(want.astype(np.float64)))
    return np.abs((got.astype(np.longdouble) - want) / spacing.astype(np.longdouble))


def test_log_accuracy():
    x = log_sample()
    got = np.concatenate([run_log(chunk) for chunk in x.reshape(-1, LOG_BATCH)])
    assert got[0] == 0.0                          # log(1) = 0 exactly
    err = ulps(got, x)
    assert float(err.max()) <= LOG_MAX_ULP, (float(err.max()), x[np.argmax(err)])


def test_log_of_nan_is_nan():
    got = run_log(np.full(LOG_BATCH, np.nan))
    assert np.isnan(got).all()


# ---- vexp_ds (float64 arrays to float32 accuracy: the float32 rows' exp) ----------------------
def test_exp_to_float32_accuracy():
    rng = np.random.default_rng(7)
    x = np.concatenate([[0.0, -0.0, -np.log(2) / 2, np.log(2) / 2, -1e-300, 700.0, -700.0],
                        rng.uniform(-745, 0, 255), rng.uniform(-20, 20, 250)])
    got = run_batch(_EXP_HARNESS, "exp_test", x)
    want = np.exp(x.astype(np.longdouble))
    relative = np.abs((got.astype(np.longdouble) - want) / want)
    normal = want >= np.finfo(np.float64).tiny
    assert float(relative[normal].max()) <= EXP_DS_MAX_RELATIVE
    # results in the subnormal range keep their bits: the truncation's error, and within a
    # unit of the last place (2^-1074) from the two roundings of (1 + s) 2^n1 2^n2
    absolute = np.abs(got.astype(np.longdouble) - want)[~normal]
    assert np.all(absolute <= EXP_DS_MAX_RELATIVE * want[~normal] + 2.0 ** -1074)
    assert got[0] == 1.0 and got[1] == 1.0


def test_exp_to_float32_edges():
    x = np.resize([np.inf, -np.inf, np.nan, 710.0, -746.0, 1e300, -1e300, 0.0], LOG_BATCH)
    got = run_batch(_EXP_HARNESS, "exp_test", x)
    want = np.resize([np.inf, 0.0, np.nan, np.inf, 0.0, np.inf, 0.0, 1.0], LOG_BATCH)
    np.testing.assert_array_equal(got, want)
