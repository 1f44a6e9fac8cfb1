"""QingLong's persistent Conv (issue 25 item 3): the weights resident in the 64 LDMs, float32
samples streamed through the 3-slot ring of kernels/qinglong/ring.inc
(kernels/qinglong/persistent_conv.s, hostlib/qinglong/persistent.py PersistentConv)."""
import numpy as np
import pytest

from swsim.hostlib.qinglong import Device, DeviceError
from swsim.hostlib.qinglong.net import QingLongError
from swsim.hostlib.qinglong.persistent import PersistentConv
from swsim.vm import Machine

def reference(x, w, padding):
    """numpy's convolution in float64, rounded once to float32."""
    c_o, _, k, _ = w.shape
    padded = np.pad(x.astype(np.float64), ((0, 0), (padding, padding), (padding, padding)))
    h_o, w_o = padded.shape[1] - k + 1, padded.shape[2] - k + 1
    y = np.zeros((c_o, h_o, w_o))
    for row in range(k):
        for col in range(k):
            y += np.einsum("oc,chw->ohw", w[:, :, row, col].astype(np.float64),
                           padded[:, row:row + h_o, col:col + w_o])
    return y.astype(np.float32)


def stream(w, input_shape, count, padding, stages=3, engine="c", machine=None):
    """A stream of `count` random samples (seeded) through one launch: (inputs, outputs,
    Stats)."""
    rng = np.random.default_rng(count)
    device = Device(machine=machine or Machine())
    kernel = PersistentConv(w, input_shape, device, padding=padding, stages=stages)
    kernel.copy_constant()
    xs = [rng.standard_normal(input_shape).astype(np.float32) for _ in range(count)]
    ins = [device.malloc(x.nbytes) for x in xs]
    outs = [device.malloc(int(np.prod(kernel.output_shape)) * 4) for _ in xs]
    for block, x in zip(ins, xs):
        device.copy_in(block, x)
    stats = kernel.compute(ins, outs, engine=engine)
    return xs, [device.copy_out(b, kernel.output_shape, np.float32) for b in outs], stats


@pytest.mark.parametrize("c_o, input_shape, k, padding, count", [
    (64, (2, 8, 8), 3, 1, 33),       # 8 groups of 8 channels; past the table's first chunk
    (32, (3, 18, 18), 3, 0, 3),      # no padding: every tap row and column inside
    (32, (2, 16, 16), 5, 2, 2),      # K = 5: two tap rows and columns cut at each edge
])
def test_persistent_conv_matches_numpy(c_o, input_shape, k, padding, count):
    w = np.random.default_rng(7).standard_normal((c_o, input_shape[0], k, k)).astype(np.float32)
    xs, ys, stats = stream(w, input_shape, count, padding)
    assert stats.details["samples"] == count
    for x, y in zip(xs, ys):
        np.testing.assert_allclose(y, reference(x, w, padding), rtol=1e-6, atol=1e-6)


def test_per_sample_time_is_the_larger_of_compute_and_transfers():
    """Once the ring is full a sample costs max(T_c, T_in + T_out), each measured with the same
    kernel built with its compute alone or its transfers alone (per sample: the difference of
    streams of 2 and 4 samples)."""
    w = np.random.default_rng(7).standard_normal((64, 4, 3, 3)).astype(np.float32)
    per = {}
    for stages in (3, 1, 2):
        cycles = [stream(w, (4, 8, 8), count, 1, stages)[2].cycles for count in (2, 4)]
        per[stages] = (cycles[1] - cycles[0]) / 2
    assert per[1] > 0 and per[2] > 0
    assert abs(per[3] / max(per[1], per[2]) - 1) < 0.05


def test_engines_agree():
    """On a 2 x 2 mesh (the Python engine's time): 4 output rows, one group of 8 channels."""
    w = np.random.default_rng(7).standard_normal((8, 1, 3, 3)).astype(np.float32)
    runs = [stream(w, (1, 4, 4), 2, 1, engine=engine, machine=Machine(mesh_rows=2, mesh_cols=2))
            for engine in ("c", "python")]
    (_, ys_c, stats_c), (_, ys_py, stats_py) = runs
    assert all(np.array_equal(a, b) for a, b in zip(ys_c, ys_py))
    assert stats_c.cycles == stats_py.cycles


def test_refusals():
    device = Device(machine=Machine())
    w = np.ones((32, 16, 3, 3), np.float32)
    with pytest.raises(QingLongError, match="float32"):
        PersistentConv(w.astype(np.float64), (16, 32, 32), device, padding=1)
    with pytest.raises(QingLongError, match="input_shape"):
        PersistentConv(w, (8, 32, 32), device, padding=1)
    with pytest.raises(QingLongError, match="padding"):
        PersistentConv(w, (16, 32, 32), device, padding=3)
    with pytest.raises(QingLongError, match="12 rows must divide the 64 CPEs"):
        PersistentConv(w, (16, 12, 12), device, padding=1)
    with pytest.raises(QingLongError, match="groups of a multiple of 8"):
        PersistentConv(np.ones((12, 16, 3, 3), np.float32), (16, 32, 32), device, padding=1)
    with pytest.raises(QingLongError, match=r"needs \d+ B of LDM .* the 3-slot ring: 3 x \d+ B"):
        PersistentConv(np.ones((8, 32, 3, 3), np.float32), (32, 64, 64), device, padding=1)
    with pytest.raises(QingLongError, match="stages"):
        PersistentConv(w, (16, 32, 32), device, padding=1, stages=4)
    kernel = PersistentConv(np.ones((64, 1, 3, 3), np.float32), (1, 8, 8), device, padding=1)
    block = device.malloc(64 * 8 * 8 * 4)
    with pytest.raises(QingLongError, match="copy_constant first"):
        kernel.compute([block], [block])
    kernel.copy_constant()
    with pytest.raises(QingLongError, match="already"):
        kernel.copy_constant()
    with pytest.raises(QingLongError, match="non-empty lists"):
        kernel.compute([block], [])
    with pytest.raises(DeviceError, match="outputs.*do not fit"):
        kernel.compute([block], [device.malloc(16)])
