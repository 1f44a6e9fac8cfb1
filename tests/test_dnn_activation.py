"""Activation operators and exp on the VM (kernels/dnn/activation.s, hostlib/dnn)."""
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from swsim.hostlib.dnn import activation_backward, activation_forward, exp
from swsim.hostlib.dnn import accuracy, activation
from swsim.vm import HostError, Machine

DTYPES = (np.float32, np.float64)
# Largest error in ulps found on the VM (docs/dnn.md "Accuracy": the dense samples of
# accuracy.sample with per_binade 4096 / 256 plus 4 M normal random inputs); the
# deterministic sample tests must not exceed it (the kernels must not get worse). A sampled
# maximum is a lower bound of the true one, so tests on random inputs allow a quarter ulp more.
MAX_ULP = {
    ("exp", np.float32): 0.503, ("sigmoid", np.float32): 0.503, ("tanh", np.float32): 0.509,
    ("exp", np.float64): 0.744, ("sigmoid", np.float64): 0.761, ("tanh", np.float64): 0.794,
}
RANDOM_MARGIN_ULP = 0.25


def _forward(kind, x, **kw):
    return exp(x, **kw) if kind == "exp" else activation_forward(x, kind, **kw)


def _ulps(kind, x, y, dtype):
    return accuracy.ulp_error(y, accuracy.reference(kind, x), dtype)


# ---- accuracy -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", accuracy.FUNCTIONS)
def test_error_bound_over_the_float_range(kind, dtype):
    x = accuracy.sample(dtype, per_binade=8, uniform=20_000)
    y, _ = _forward(kind, x)
    assert y.dtype == dtype and y.shape == x.shape
    error = _ulps(kind, x, y, dtype)
    worst = int(np.argmax(error))
    assert error[worst] <= MAX_ULP[(kind, dtype)], (x[worst], y[worst])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", accuracy.FUNCTIONS)
def test_error_bound_dense(kind, dtype):
    dense = (4096, 1_000_000) if dtype == np.float32 else (256, 500_000)
    result = accuracy.measure(kind, dtype, *dense)
    assert result.max_ulp <= MAX_ULP[(kind, dtype)], result


def test_ulp_error_measures_what_it_claims():
    ref = np.array([1.0, 1.0, 2.0 ** -1074 * 3, np.inf, np.nan, 1e308 * 10], np.longdouble)
    y = np.array([1.0 + 2 ** -52, 1.0 - 2 ** -53, 2.0 ** -1074 * 4, np.inf, np.nan, np.inf])
    assert list(accuracy.ulp_error(y, ref, np.float64)) == [1.0, 0.5, 1.0, 0.0, 0.0, 0.0]
    assert accuracy.ulp_error(np.array([np.nan]), np.array([1.0], np.longdouble),
                              np.float64)[0] == np.inf


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values(dtype):
    info = np.finfo(dtype)
    inf, nan, tiny = np.inf, np.nan, info.smallest_subnormal
    x = np.array([0.0, -0.0, inf, -inf, nan, tiny, -tiny, 2000.0, -2000.0, 40.0, -40.0,
                  info.max, -info.max], dtype)
    e, _ = exp(x)
    np.testing.assert_array_equal(e[[0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12]],
                                  [1, 1, inf, 0, nan, 1, 1, inf, 0, inf, 0])
    s, _ = activation_forward(x, "sigmoid")
    np.testing.assert_array_equal(s[[0, 1, 2, 3, 4, 7, 8, 11, 12]],
                                  [0.5, 0.5, 1, 0, nan, 1, 0, 1, 0])
    t, _ = activation_forward(x, "tanh")
    np.testing.assert_array_equal(t, [0, 0, 1, -1, nan, tiny, -tiny, 1, -1, 1, -1, 1, -1])
    assert not np.signbit(t[0]) and np.signbit(t[1])   # tanh keeps the sign of zero


def test_exp_overflow_and_underflow_thresholds():
    ln_max = np.log(np.longdouble(np.finfo(np.float64).max))
    below, above = np.nextafter(float(ln_max), 0), np.nextafter(float(ln_max), 1000)
    x = np.array([below, above, -745.13321910194110842, -745.1332191019412, -708.5, -740.0])
    y, _ = exp(x)
    assert np.isfinite(y[0]) and y[1] == np.inf
    assert y[2] == 2.0 ** -1074 and y[3] == 0          # the last subnormal, then 0
    assert np.all(_ulps("exp", x[4:], y[4:], np.float64) <= MAX_ULP[("exp", np.float64)])


# ---- forward: any length, any values --------------------------------------------------------
def _relu_reference(x):
    return np.where(np.isnan(x) | (x > 0), x, 0).astype(x.dtype)


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(DTYPES), kind=st.sampled_from(("relu", "sigmoid", "tanh")),
       data=st.data())
def test_forward_any_length_and_values(dtype, kind, data):
    n = data.draw(st.integers(1, 3000), label="n")
    x = data.draw(hnp.arrays(dtype, n), label="x")   # any floats: NaN, inf, subnormals
    y, stats = activation_forward(x, kind)
    assert y.shape == x.shape and y.dtype == x.dtype and stats.n == n
    if kind == "relu":
        np.testing.assert_array_equal(y.view(np.dtype(f"u{x.itemsize}")),
                                      _relu_reference(x).view(np.dtype(f"u{x.itemsize}")))
    else:
        assert np.max(_ulps(kind, x, y, dtype)) <= MAX_ULP[(kind, dtype)] + RANDOM_MARGIN_ULP


def test_relu_edge_values():
    x = np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, -np.nan, -1e-320, 1e-320, -3.0, 3.0])
    y, _ = activation_forward(x, "relu")
    assert y.view(np.uint64).tolist() == np.array(
        [0.0, 0.0, 0.0, np.inf, np.nan, -np.nan, 0.0, 1e-320, 0.0, 3.0]).view(np.uint64).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_blocks_per_cpe_and_shapes(dtype):
    """More blocks than 2 per CPE (the double buffers are reused), a partial last block and
    a multi-dimensional array."""
    rng = np.random.default_rng(3)
    block = 8192 // np.dtype(dtype).itemsize
    n = 64 * block * 3 + 5 * block + 3
    x = rng.normal(scale=4, size=n).astype(dtype).reshape(-1, 1)
    y, stats = activation_forward(x, "tanh")
    assert y.shape == x.shape
    assert np.max(_ulps("tanh", x.ravel(), y.ravel(), dtype)) <= \
        MAX_ULP[("tanh", dtype)] + RANDOM_MARGIN_ULP
    assert stats.bytes_moved == 2 * x.nbytes
    job_bytes = activation.KERNEL.symbol("JOB_BYTES")      # every CPE gets the job record
    assert stats.run.counters["dma_bytes_requested"] == 2 * x.nbytes + 64 * job_bytes
    cube = rng.normal(size=(3, 5, 7)).astype(dtype)
    r, _ = activation_forward(cube, "relu")
    np.testing.assert_array_equal(r, np.maximum(cube, 0))


# ---- backward -------------------------------------------------------------------------------
def _backward_reference(kind, dy, inp, dtype=np.longdouble):
    """In extended precision by default; 1 - y^2 as (1 - y)(1 + y), without cancellation."""
    d, v = dy.astype(dtype), inp.astype(dtype)
    if kind == "relu":
        return np.where(v > 0, d, 0.0)
    if kind == "sigmoid":
        return d * v * (1 - v)
    return d * (1 - v) * (1 + v)


def _finite_difference(kind, x, h=1e-6):
    f = {"relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
         "tanh": np.tanh}[kind]
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("kind", ("relu", "sigmoid", "tanh"))
def test_reference_derivatives_by_finite_differences(kind):
    x = np.random.default_rng(5).uniform(-6, 6, 2000)
    x = x[np.abs(x) > 1e-3]                       # ReLU has no derivative at 0
    y = {"relu": x, "sigmoid": 1 / (1 + np.exp(-x)), "tanh": np.tanh(x)}[kind]
    analytic = _backward_reference(kind, np.ones_like(x), x if kind == "relu" else y,
                                   np.float64)
    np.testing.assert_allclose(analytic, _finite_difference(kind, x), atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(DTYPES), kind=st.sampled_from(("relu", "sigmoid", "tanh")),
       data=st.data())
def test_backward_any_length(dtype, kind, data):
    n = data.draw(st.integers(1, 3000), label="n")
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=3, size=n).astype(dtype)
    x[rng.random(n) < 0.05] = 0.0
    dy = rng.normal(size=n).astype(dtype)
    if kind == "relu":
        dx, stats = activation_backward(dy, x=x, mode=kind)
        np.testing.assert_array_equal(dx, _backward_reference(kind, dy, x).astype(dtype))
    else:
        y, _ = activation_forward(x, kind)
        dx, stats = activation_backward(dy, y=y, mode=kind)
        ref = _backward_reference(kind, dy, y)
        # float64: at most three roundings; float32: computed in double, rounded once
        rtol = 4 * np.finfo(np.float64).eps if dtype == np.float64 else np.finfo(np.float32).eps
        np.testing.assert_allclose(dx.astype(np.longdouble), ref, rtol=rtol, atol=1e-300)
    assert stats.bytes_moved == 3 * x.nbytes


def test_relu_backward_edge_values():
    x = np.array([-0.0, 0.0, 1e-320, -1e-320, np.inf, -np.inf, np.nan, 2.0])
    dy = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, np.nan])
    dx, _ = activation_backward(dy, x=x, mode="relu")
    np.testing.assert_array_equal(dx, [0, 0, 3, 0, 5, 0, 0, np.nan])


@pytest.mark.parametrize("dtype", DTYPES)
def test_core_groups_give_the_same_bits(dtype):
    rng = np.random.default_rng(12)
    x = rng.normal(scale=5, size=64 * 512 + 77).astype(dtype)
    dy = rng.normal(size=x.size).astype(dtype)
    for kind in ("relu", "sigmoid", "tanh"):
        y, single = activation_forward(x, kind)
        dx, _ = activation_backward(dy, x=x, y=y, mode=kind)
        for cgs in (2, 4):
            y2, stats = activation_forward(x, kind, cgs=cgs)
            dx2, _ = activation_backward(dy, x=x, y=y, mode=kind, cgs=cgs)
            assert y2.tobytes() == y.tobytes() and dx2.tobytes() == dx.tobytes()
            assert stats.cgs == cgs and stats.cycles < single.cycles
    e, _ = exp(x)
    assert exp(x, cgs=4)[0].tobytes() == e.tobytes()


# ---- stats, engines, errors -----------------------------------------------------------------
def test_stats_report_bandwidth_against_the_dma_stream_ceiling():
    x = np.ones(64 * 1024 * 4)
    _, stats = activation_forward(x, "relu")
    config = Machine().config
    # a whole line read costs dma_transaction_cycles, written dma_put_write_cycles
    line_cycles = config.dma_transaction_cycles + config.dma_put_write_cycles
    ceiling = 2 * config.dma_transaction_bytes / line_cycles * config.clock_hz
    assert stats.stream_gbps == pytest.approx(ceiling / 1e9)
    assert stats.bandwidth_gbps == pytest.approx(
        2 * x.nbytes / (stats.kernel_cycles / config.clock_hz) / 1e9)
    assert 0.9 < stats.bandwidth_ratio <= 1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_python_engine_agrees_bit_for_bit(dtype):
    x = np.concatenate([np.linspace(-30, 30, 37), [np.nan, np.inf, -np.inf, 1e-310]])
    x = x.astype(dtype)
    for kind in accuracy.FUNCTIONS:
        y_c, s_c = _forward(kind, x)
        y_py, s_py = _forward(kind, x, engine="python")
        assert y_c.tobytes() == y_py.tobytes()
        assert s_c.kernel_cycles == s_py.kernel_cycles


@pytest.mark.parametrize("call, message", [
    (lambda: activation_forward(np.ones(3), "gelu"), "mode must be one of"),
    (lambda: activation_forward(np.ones(3, np.int32)), "float32 or float64"),
    (lambda: activation_forward(np.ones(0)), "at least one element"),
    (lambda: activation_backward(np.ones(3), x=np.ones(3), mode="tanh"), "needs y="),
    (lambda: activation_backward(np.ones(3), mode="relu"), "needs x="),
    (lambda: activation_backward(np.ones(3), x=np.ones(4), mode="relu"), "same shape"),
    (lambda: activation_backward(np.ones(3), y=np.ones(3, np.float32), mode="sigmoid"),
     "same shape and dtype"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(HostError, match=message):
        call()


# ---- the LDM routines of vmath.inc, called directly (as the LSTM kernel will) ---------------
VMATH_ROUTINES = [f"v{kind}_{suffix}" for kind in accuracy.FUNCTIONS for suffix in "ds"]
HARNESS_BYTES = 8192
_HARNESS = f"""
	.include "include/dma.inc"
	.include "vmath.inc"
	.bss
	.align	5
BUF_IN:	.skip	{HARNESS_BYTES}
BUF_OUT:
	.skip	{HARNESS_BYTES}
	.ldm
	.align	3
REPLY:	.word	0, 0
ARGS:	.skip	48
ROUTINES:
	.quad	{", ".join(VMATH_ROUTINES)}
	.text
	.globl	kernel
# a0 input, a1 output, a2 int64[2] (cycles of the call, sp kept), a3 routine index,
# a4 bytes, a5 1: in place
kernel:
	stl	$17, ARGS($31)
	stl	$18, ARGS + 8($31)
	stl	$26, ARGS + 16($31)
	stl	$30, ARGS + 24($31)
	stl	$20, ARGS + 32($31)
	ldi	$2, BUF_OUT
	ldi	$3, BUF_IN
	selne	$21, $3, $2, $2
	stl	$2, ARGS + 40($31)
	MAKE_DESC $1, DMA_GET, 0, REPLY
	DESC_SET_SIZE $1, $20
	ldi	$2, BUF_IN
	DMA_WAIT $1, $16, $2, REPLY
	s8addl	$19, $31, $1
	ldl	$27, ROUTINES($1)
	ldi	$16, BUF_IN
	ldl	$17, ARGS + 40($31)
	srl	$20, 4, $18             # vectors: bytes / 16 for float32 (odd index)
	blbs	$19, 1f
	srl	$18, 1, $18             # bytes / 32 for float64
1:	rtc	$10
	stl	$10, REPLY($31)
	call	$26, ($27), 0
	rtc	$10
	ldl	$11, REPLY($31)
	subl	$10, $11, $10
	ldl	$12, ARGS + 8($31)
	stl	$10, 0($12)
	ldl	$9, ARGS + 24($31)
	cmpeq	$30, $9, $10
	stl	$10, 8($12)
	MAKE_DESC $1, DMA_PUT, 0, REPLY
	ldl	$20, ARGS + 32($31)
	DESC_SET_SIZE $1, $20
	ldl	$16, ARGS($31)
	ldl	$2, ARGS + 40($31)
	DMA_WAIT $1, $16, $2, REPLY
	ldl	$26, ARGS + 16($31)
	ret
"""


@functools.lru_cache(maxsize=None)
def _harness():
    from swsim import assemble
    from swsim.kernels import KERNEL_DIR
    return assemble(_HARNESS, include_dirs=(str(KERNEL_DIR), str(KERNEL_DIR / "dnn")))


def run_vmath(routine, x, in_place=False):
    """Run a vmath.inc routine on one CPE over x (whole vectors) in LDM; returns (result,
    cycles of the call)."""
    assert x.nbytes <= HARNESS_BYTES and x.size % 4 == 0
    machine = Machine()
    out = machine.mem.alloc(x.nbytes)
    info = np.zeros(2, np.int64)
    machine.mem.put(info)
    machine.mem.put(x)
    machine.run(_harness(), entry="kernel", cpes=[0],
                args=[x, out, info, VMATH_ROUTINES.index(routine), x.nbytes, int(in_place)])
    info = machine.mem.get(machine.mem.address_of(info), (2,), np.int64)
    assert info[1] == 1, "the routine must preserve sp"
    return machine.mem.get(out, x.shape, x.dtype), int(info[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nvec", [1, 2, 3, 5, 8, 11])
def test_vmath_routines_on_ldm_vectors(dtype, nvec):
    """Every vector count (tails of 1-3 vectors), in place and not, with specials in the
    vectors; the same bits as the activation kernel."""
    rng = np.random.default_rng(nvec)
    x = rng.normal(scale=20, size=4 * nvec).astype(dtype)
    x[rng.integers(0, x.size, 3)] = [np.nan, -np.inf, 3000.0]
    suffix = "d" if dtype == np.float64 else "s"
    for kind in accuracy.FUNCTIONS:
        expected, _ = _forward(kind, x)
        for in_place in (False, True):
            y, _ = run_vmath(f"v{kind}_{suffix}", x, in_place)
            assert y.tobytes() == expected.tobytes(), (kind, in_place)
