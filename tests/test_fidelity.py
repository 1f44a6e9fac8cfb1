"""The fidelity targets of MACHINE.md §11 (``vm.config.PUBLISHED`` entries with ``target``, issue
28's hardware recordings among them), measured by ``swsim bench fidelity`` on the C engine on the
default preset and held to tolerances. The register-communication bandwidths are reported, not
targets, and so is the default's strided DMA against thesis eq. 3-2 (the recordings' per-block
costs supersede it); the pre-issue-28 calibration (``sw26010-stream``) still follows eq. 3-2.
"""
import pytest

from swsim.hostlib.tools.bench import fidelity
from swsim.vm.config import PUBLISHED

# key -> (lowest, highest) accepted relative error of the measured value.
TOLERANCES = {
    "rc_latency": (0, 0),
    "dma_bandwidth": (-0.01, 0.01),
    # the intercept includes polling the reply word and the request's own engine time
    # (dma_get_request_cycles, issue 28)
    "dma_latency": (-0.05, 0.08),
    "dma_strided_eq": (-0.01, 0.01),       # sw26010-stream against eq. 3-2 with PEAK_BW
    "gld_latency": (0, 0),
    "gld_gst_latency": (0, 0),
    "gld_bandwidth": (-0.10, 0.10),        # published: "about 3 GB/s"
    "barrier": (0, 0.05),                  # published: "at least 14 cycles"
    "gemm_inner_loop": (0, 0),
    "gemm_primitive_best": (-0.02, 0.02),
    "cpe_printf": (-0.15, 0.15),           # published: "about 270 k cycles"
    # MACHINE.md §6/§11: the hardware STREAM table, and the sizes held out of its fit, within
    # 15% in every cell
    **{key: (-0.15, 0.15) for key in PUBLISHED if key.startswith("dma_stream_")},
    # MACHINE.md §6 "Further hardware recordings" (issue 28): within 15%
    **{key: (-0.15, 0.15) for key in ("dma_block_get_8", "dma_block_put_8", "dma_block_get_1024",
                                      "dma_block_put_1024", "dma_bcast_line", "dma_bcast_start",
                                      "launch")},
}
REPORTED = {"rc_p2p_bandwidth", "rc_bcast_bandwidth", "dma_strided"}


@pytest.fixture(scope="module")
def rows():
    return fidelity.run("c")


def test_the_tolerances_cover_exactly_the_targets():
    targets = {key for key, published in PUBLISHED.items() if published.target}
    assert set(TOLERANCES) == targets | {"dma_strided_eq"}


def test_every_target_is_measured_and_the_rest_is_reported(rows):
    keys = {row.key for row in rows}
    assert set(TOLERANCES) <= keys
    assert keys - set(TOLERANCES) == REPORTED
    assert not any(key in PUBLISHED and PUBLISHED[key].target for key in REPORTED)


def test_only_eq_3_2_is_shown_on_the_pre_issue_28_calibration(rows):
    for row in rows:
        expected = (fidelity.STREAM_PRESET if row.key == "dma_strided_eq"
                    else fidelity.DEFAULT_PRESET)
        assert row.preset == expected, row.key


@pytest.mark.parametrize("key", sorted(TOLERANCES))
def test_target_within_tolerance(rows, key):
    low, high = TOLERANCES[key]
    for row in (r for r in rows if r.key == key):
        error = row.measured / row.published - 1
        assert low - 1e-12 <= error <= high + 1e-12, (row.quantity, row.measured, row.published)
