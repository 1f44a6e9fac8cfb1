"""QingLong's persistent FC kernel (issue 25 item 3): weights resident in the 64 LDMs, inputs
streamed through the 3-slot ring (hostlib/qinglong/persistent.py, kernels/qinglong/
persistent_fc.s, an assembled package)."""
import numpy as np
import pytest

from swsim.errors import ArgumentError
from swsim.hostlib.qinglong import Device
from swsim.hostlib.qinglong.net import QingLongError
from swsim.hostlib.qinglong.persistent import PersistentFC
from swsim.vm import Machine


def stream(w, count, stages=3, engine="c", seed=0, dtype=np.float64):
    """(xs, ys, the launch's Stats) of `count` random samples through PersistentFC(w)."""
    device = Device(machine=Machine())
    kernel = PersistentFC(w, device, stages=stages, dtype=dtype)
    kernel.copy_constant()
    xs = np.random.default_rng(seed).standard_normal((count, w.shape[1])).astype(dtype)
    ins = [device.malloc(x.nbytes) for x in xs]
    outs = [device.malloc(w.shape[0] * xs.itemsize) for _ in range(count)]
    for block, x in zip(ins, xs):
        device.copy_in(block, x)
    stats = kernel.compute(ins, outs, engine=engine)
    return xs, np.array([device.copy_out(b, (w.shape[0],), dtype) for b in outs]), stats


@pytest.fixture(scope="module")
def w():
    return np.random.default_rng(25).standard_normal((128, 256))


def per_sample(w, stages):
    cycles = {count: stream(w, count, stages)[2].cycles for count in (2, 4)}
    return (cycles[4] - cycles[2]) / 2


def test_every_sample_is_w_x(w):
    xs, ys, stats = stream(w, 5)
    assert np.allclose(ys, xs @ w.T, rtol=1e-12, atol=1e-12)
    assert stats.details["samples"] == 5 and stats.details["copy_cycles"] > 0


def test_float32_samples_are_w_x_rounded_once(w):
    """x and y in float32 (w in float64): x widened, the float64 sums rounded once."""
    xs, ys, _ = stream(w, 3, dtype=np.float32)
    assert ys.dtype == np.float32
    np.testing.assert_allclose(ys, (xs.astype(np.float64) @ w.T).astype(np.float32),
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(QingLongError, match="dtype must be float64 or float32"):
        PersistentFC(w, Device(machine=Machine()), dtype=np.int32)


def test_per_sample_time_is_within_5_percent_of_the_bound(w):
    """max(T_in + T_out, T_c): the DMA engine is shared by x's broadcast and y's puts; each term
    measured by the same kernel with only its compute (FC_STAGES 1) or its transfers (2)."""
    bound = max(per_sample(w, 1), per_sample(w, 2))
    assert abs(per_sample(w, 3) / bound - 1) < 0.05


def test_engines_agree_bit_for_bit():
    w = np.random.default_rng(1).standard_normal((64, 64))
    _, y_c, c = stream(w, 34, engine="c")   # two chunks of the table
    _, y_py, py = stream(w, 34, engine="python")
    assert np.array_equal(y_c, y_py) and c.cycles == py.cycles


def test_what_does_not_fit_is_refused_with_the_numbers():
    device = Device(machine=Machine())
    with pytest.raises(QingLongError, match=r"w of 1024 x 1024 float64 is 8388608 B, more than "
                                            r"the aggregate LDM \(64 x 65536 B = 4194304 B\)"):
        PersistentFC(np.zeros((1024, 1024)), device)
    with pytest.raises(QingLongError, match=r"each CPE needs \d+ B of LDM \(1 rows of w: 32768 "
                                            r"B, the 3-slot x ring: 98304 B"):
        PersistentFC(np.zeros((64, 4096)), device)
    with pytest.raises(QingLongError, match="O a multiple of the 64 CPEs and I of 16"):
        PersistentFC(np.zeros((100, 64)), device)
    with pytest.raises(QingLongError, match="needs mesh_cols = 8; this machine has 4"):
        PersistentFC(np.zeros((32, 64)), Device(machine=Machine(mesh_cols=4)))
    with pytest.raises(QingLongError, match="stages must be 3"):
        PersistentFC(np.zeros((64, 64)), device, stages=0)
    with pytest.raises(ArgumentError, match="2-D float64"):
        PersistentFC(np.zeros((64, 64), np.float32), device)
    kernel = PersistentFC(np.zeros((64, 64)), device)
    kernel.copy_constant()
    with pytest.raises(QingLongError, match="non-empty lists of Blocks"):
        kernel.compute([], [])


def test_a_stream_longer_than_the_tables_chunks_runs_whole():
    """100 samples in one launch: the table reaches the LDMs a 32-sample chunk at a time (four
    chunks, the last padded); every sample is w x and a longer stream costs more."""
    w = np.random.default_rng(2).standard_normal((64, 64))
    xs, ys, stats = stream(w, 100)
    assert np.allclose(ys, xs @ w.T, rtol=1e-12, atol=1e-12)
    assert stats.details["samples"] == 100
    assert stats.cycles > stream(w, 33)[2].cycles > stream(w, 32)[2].cycles
