"""The fidelity targets of MACHINE.md §11 (``vm.config.PUBLISHED`` entries with ``target``, and
strided DMA against thesis eq. 3-2), measured by ``swsim bench fidelity`` on the C engine and
held to tolerances. The register-communication bandwidths are reported, not targets. Issue 28's
hardware recordings are measured on the ``sw26010-hw`` preset, the rest on the default.
"""
import pytest

from swsim.hostlib.tools.bench import fidelity
from swsim.hostlib.tools.bench.stream import BUFS
from swsim.vm.config import PUBLISHED

# MACHINE.md §6 "Further hardware recordings" (issue 28): STREAM sizes held out of the table's
# fit, strided and broadcast DMA, launch; measured on fidelity.HW_PRESET
HW_KEYS = {key for key in PUBLISHED if key.startswith("dma_stream_")
           and int(key.rsplit("_", 1)[1]) not in BUFS} | {
    "dma_block_get_8", "dma_block_put_8", "dma_block_get_1024", "dma_block_put_1024",
    "dma_bcast_line", "dma_bcast_start", "launch"}
# key -> (lowest, highest) accepted relative error of the measured value.
TOLERANCES = {
    "rc_latency": (0, 0),
    "dma_bandwidth": (-0.01, 0.01),
    "dma_latency": (-0.05, 0.05),          # the intercept includes polling the reply word
    "dma_strided": (-0.01, 0.01),          # against eq. 3-2 with the published PEAK_BW
    "gld_latency": (0, 0),
    "gld_gst_latency": (0, 0),
    "gld_bandwidth": (-0.10, 0.10),        # published: "about 3 GB/s"
    "barrier": (0, 0.05),                  # published: "at least 14 cycles"
    "gemm_inner_loop": (0, 0),
    "gemm_primitive_best": (-0.02, 0.02),
    "cpe_printf": (-0.15, 0.15),           # published: "about 270 k cycles"
    # MACHINE.md §6/§11: the hardware STREAM table within 15% in every cell
    **{key: (-0.15, 0.15) for key in PUBLISHED if key.startswith("dma_stream_")},
    # issue 28's target: every recorded cell within 15%
    **{key: (-0.15, 0.15) for key in HW_KEYS},
}


@pytest.fixture(scope="module")
def rows():
    return fidelity.run("c")


def test_the_tolerances_cover_exactly_the_targets():
    targets = {key for key, published in PUBLISHED.items() if published.target}
    assert set(TOLERANCES) == targets | {"dma_strided"}


def test_every_target_is_measured_and_the_rest_is_reported(rows):
    keys = {row.key for row in rows}
    assert set(TOLERANCES) <= keys
    assert keys - set(TOLERANCES) == {"rc_p2p_bandwidth", "rc_bcast_bandwidth"}
    assert not any(PUBLISHED[key].target for key in keys - set(TOLERANCES))


def test_issue_28_cells_run_on_the_hw_preset_and_the_rest_on_the_default(rows):
    for row in rows:
        expected = fidelity.HW_PRESET if row.key in HW_KEYS else fidelity.DEFAULT_PRESET
        assert row.preset == expected, row.key


@pytest.mark.parametrize("key", sorted(TOLERANCES))
def test_target_within_tolerance(rows, key):
    low, high = TOLERANCES[key]
    for row in (r for r in rows if r.key == key):
        error = row.measured / row.published - 1
        assert low - 1e-12 <= error <= high + 1e-12, (row.quantity, row.measured, row.published)
