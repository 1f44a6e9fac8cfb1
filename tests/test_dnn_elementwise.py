"""The streaming driver and its element-wise operators (hostlib/dnn/elementwise.py,
kernels/dnn/stream.s): values against float64 numpy references, odd sizes, edge values, the
split over core groups, the measured bandwidth against the DMA engine's ceiling, errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim import Machine
from swsim.errors import ArgumentTypeError
from swsim.vm import HostError
from swsim.hostlib import dnn
from swsim.hostlib.dnn import stream

DTYPES = [np.float32, np.float64]
ULP_RTOL = {np.float32: 4 * 2.0 ** -24, np.float64: 4 * 2.0 ** -53}


def arrays(draw, dtype, n, count):
    seeds = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seeds)
    scale = draw(st.sampled_from([1e-3, 1.0, 1e4]))
    return [(rng.standard_normal(n) * scale).astype(dtype) for _ in range(count)]


def close(got, want, dtype, magnitude):
    """Within a few roundings of the float64 reference, relative to the operands' size (and
    to the dtype's smallest subnormal, where the rounded result underflows)."""
    want = np.asarray(want, np.float64)
    assert got.dtype == dtype
    atol = ULP_RTOL[dtype] * 4 * float(magnitude) + float(np.finfo(dtype).smallest_subnormal)
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)


@settings(max_examples=15, deadline=None)
@given(st.data(), st.sampled_from(DTYPES), st.integers(1, 5000),
       st.floats(-4, 4, allow_nan=False), st.floats(-4, 4, allow_nan=False))
def test_add_matches_reference(data, dtype, n, alpha, beta):
    a, b = arrays(data.draw, dtype, n, 2)
    got, stats = dnn.add(a, b, alpha, beta)
    want = alpha * a.astype(np.float64) + beta * b.astype(np.float64)
    magnitude = (abs(alpha) + abs(beta)) * max(np.abs(a).max(), np.abs(b).max()).astype(float)
    close(got, want, dtype, magnitude)
    assert stats.bytes_moved == 3 * n * np.dtype(dtype).itemsize


@settings(max_examples=15, deadline=None)
@given(st.data(), st.sampled_from(DTYPES), st.integers(1, 5000),
       st.floats(0, 1), st.floats(0, 0.99), st.floats(0, 0.1))
def test_sgd_update_is_caffes_sgd(data, dtype, n, lr, momentum, weight_decay):
    param, grad, velocity = arrays(data.draw, dtype, n, 3)
    (new_param, new_velocity), _ = dnn.sgd_update(param, grad, velocity, lr, momentum,
                                                  weight_decay)
    p, g, v = (x.astype(np.float64) for x in (param, grad, velocity))
    diff = lr * (g + weight_decay * p) + momentum * v
    magnitude = 4 * max(np.abs(p).max(), np.abs(g).max(), np.abs(v).max())
    close(new_velocity, diff, dtype, magnitude)
    close(new_param, p - diff, dtype, magnitude)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scale_keeps_shape(dtype):
    x = np.arange(2 * 3 * 5 * 7, dtype=dtype).reshape(2, 3, 5, 7) - 100
    got, _ = dnn.scale(x, -0.5)
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, (x * -0.5).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_edge_values_follow_ieee(dtype):
    huge = np.finfo(dtype).max
    a = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, np.inf, huge, huge, 1.0], dtype)
    b = np.array([0.0, -0.0, 1.0, 1.0, 5.0, -np.inf, huge, -huge, np.nan], dtype)
    got, _ = dnn.add(a, b)
    with np.errstate(all="ignore"):
        want = a + b
    np.testing.assert_array_equal(got, want)          # NaN where numpy has NaN, inf, -0.0
    assert np.signbit(got[1])


@pytest.mark.parametrize("n", [1, 63, 64 * 32 + 1, 3 * 2048 + 5])
def test_every_element_once_for_odd_sizes(n):
    # sizes that do not divide into the 64 CPEs or the chunks: the tail chunk and the idle CPEs
    x = np.arange(n, dtype=np.float64)
    got, stats = dnn.scale(x, 2.0)
    np.testing.assert_array_equal(got, 2 * x)


@pytest.mark.parametrize("cgs", [2, 4])
def test_split_over_core_groups(cgs):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 40_001))
    one, single = dnn.add(a, b, 1.5, 2.0)
    many, split = dnn.add(a, b, 1.5, 2.0, cgs=cgs)
    np.testing.assert_array_equal(one, many)
    assert split.cgs == cgs and len(split.runs) == cgs
    assert split.cycles < 1.25 * single.cycles / cgs     # each CG has its own DMA engine


def test_an_operator_on_one_cg_of_a_chip_whose_other_cgs_are_busy():
    # CG 3 of the chip is spawned (by "another host thread") and not joined meanwhile: an
    # operator on CG 1's view, and one on CGs 0..1 of the chip, run, allocate in the room
    # reserved ahead, and join their own runs only; the bits and cycles are a fresh Machine's
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 5_001))
    chip = Machine()
    chip.mem.reserve(1 << 20)
    busy = chip.spawn(".text\n.globl k\nk: halt\n", entry="k", cg=3, cpes=[0])
    for machine, cgs in ((chip.core_group(1), 1), (chip, 2)):
        got, stats = dnn.add(a, b, 1.5, 2.0, machine=machine, cgs=cgs)
        want, alone = dnn.add(a, b, 1.5, 2.0, cgs=cgs)
        assert got.tobytes() == want.tobytes() and stats.cycles == alone.cycles
        assert chip.running == [3]
    assert [run.cg for run in stats.runs] == [0, 1]
    with pytest.raises(HostError, match="CG 3 is busy"):      # the launch wants CGs 0..3
        dnn.add(a, b, machine=chip, cgs=4)
    assert chip.running == [3]                   # CGs 0..2, spawned before, were joined
    busy.join()
    with pytest.raises(dnn.DnnError, match=r"cgs must be an integer in 1\.\.1"):
        dnn.add(a, b, machine=chip.core_group(2), cgs=2)


def test_bandwidth_against_the_dma_ceiling():
    machine = Machine()
    config = machine.config
    # a copy-like stream (1 get + 1 put per element): 256 bytes per 6 + 11 cycles
    assert stream.stream_bound_gbps(config, 1, 1) == pytest.approx(
        256 / (config.dma_transaction_cycles + config.dma_put_write_cycles)
        * config.clock_hz / 1e9)
    x = np.ones(1 << 17)
    _, stats = dnn.scale(x, 2.0, machine=machine)
    assert stats.bandwidth_gbps == pytest.approx(2 * x.nbytes / stats.seconds / 1e9)
    assert 0.9 < stats.bandwidth_ratio <= 1.0


def test_same_bits_and_cycles_on_both_engines():
    rng = np.random.default_rng(2)
    param, grad, velocity = rng.standard_normal((3, 777)).astype(np.float32)
    (p1, v1), s1 = dnn.sgd_update(param, grad, velocity, 0.1, 0.9, 1e-4, engine="c")
    (p2, v2), s2 = dnn.sgd_update(param, grad, velocity, 0.1, 0.9, 1e-4, engine="python")
    assert p1.tobytes() == p2.tobytes() and v1.tobytes() == v2.tobytes()
    assert s1.cycles == s2.cycles


@pytest.mark.parametrize("call, message", [
    (lambda: dnn.add(np.ones(3), np.ones(3, np.float32)), "float64 like the other"),
    (lambda: dnn.add(np.ones(3), np.ones(4)), "one shape"),
    (lambda: dnn.add(np.ones(3, int), np.ones(3, int)), "float32 or float64"),
    (lambda: dnn.scale(np.ones(0), 1.0), "at least one element"),
    (lambda: dnn.scale(np.ones(3), 2.0, cgs=0), "cgs must be an integer in 1..4"),
    (lambda: dnn.scale(np.ones(3), 2.0, cgs=5), "cgs must be an integer in 1..4"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(dnn.DnnError, match=message):
        call()


def test_a_scalar_of_the_wrong_type_is_a_type_error():
    with pytest.raises(ArgumentTypeError, match="alpha must be a real number"):
        dnn.scale(np.ones(3), "2")
