"""``swsim.hostlib.tools.report``: the post-run report, its formulas, the roofline PNG and
``swsim report``."""
import json

import numpy as np
import pytest

import swsim
from swsim.cli import main
from swsim.hostlib.tools.report import run_report
from swsim.kernels import program, source_path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
K = 4   # gemm_kloop iterations


@pytest.fixture(scope="module")
def gemm_run():
    """The GEMM inner loop on 64 CPEs: DMA, register communication, 16 vmads per k."""
    m = swsim.Machine()
    a = m.mem.put(np.ones((8, K + 1, 16)))
    b = m.mem.put(np.ones((8, K + 1, 4)))
    out = m.mem.put(np.zeros((64, 80)))
    return m.run(program("gemm/gemm_kloop.s"), entry="gemm_kloop", args=[K, a, b, out])


GEMM_FLOPS = 64 * K * 16 * 8     # per CPE and k: 16 vmads of 4 lanes x 2 flops


def test_issue_counts_add_up_to_the_run(gemm_run):
    report = run_report(gemm_run)
    for pipe in (0, 1):
        assert report.valid_cycles(pipe) + sum(report.idle_cycles(pipe).values()) == \
            gemm_run.kernel_cycles * 64 == report.pipe_cycles
    assert report.idle_cycles(1)["get_empty"] == sum(s.p1_idle["get_empty"]
                                                     for s in gemm_run.cpe.values())
    data = report.to_dict()
    assert data["ee"]["mean"] == pytest.approx(gemm_run.ee)
    assert data["ee"]["min"] <= data["ee"]["mean"] <= data["ee"]["max"]


def test_dma_and_eq_3_5(gemm_run):
    report, counters = run_report(gemm_run), gemm_run.counters
    assert report.dma_waste_bytes == counters["dma_bytes_moved"] - \
        counters["dma_bytes_requested"] > 0      # B tiles of (K+1) x 32 bytes end mid-transaction
    # T_DMA: one 128-byte transaction per 6 cycles (30.93 GB/s at 1.45 GHz, the published
    # 30.94 GB/s in whole cycles).
    t_dma_cycles = counters["dma_transactions"] * 6
    assert report.t_dma_seconds * 1.45e9 == pytest.approx(t_dma_cycles)
    busiest = max(s.active_cycles for s in gemm_run.cpe.values())
    assert report.compute_cycles == busiest
    assert report.rbw_mbw_memory == pytest.approx(t_dma_cycles / busiest)


def test_gflops_intensity_and_counted_flops(gemm_run):
    report = run_report(gemm_run, flops=GEMM_FLOPS)
    seconds = gemm_run.kernel_cycles / 1.45e9
    assert report.gflops == pytest.approx(GEMM_FLOPS / seconds / 1e9)
    assert report.intensity == pytest.approx(GEMM_FLOPS / gemm_run.counters["dma_bytes_moved"])
    assert report.ridge_intensity == pytest.approx(742.4e9 / (128 / 6 * 1.45e9))
    assert report.counted_flops == GEMM_FLOPS    # the vmads; the prologue's vcpyf counts 0
    assert "of the CG peak 742.4" in str(report) and "eq. 3-5" in str(report)
    counted = run_report(gemm_run)
    assert counted.gflops == report.gflops and counted.to_dict()["flops"] is None
    assert f"Flops: {GEMM_FLOPS} counted by the VM" in str(counted)
    json.dumps(report.to_dict())
    with pytest.raises(ValueError):
        run_report(gemm_run, flops=-1)


def test_roofline_plots_the_roof_and_the_run(gemm_run, tmp_path):
    report = run_report(gemm_run, flops=GEMM_FLOPS)
    roof, run = report.roofline_figure().axes[0].lines
    # the bandwidth roof meets the 742.4 GFLOPS peak at the ridge; the run sits at its own
    # intensity and GFLOPS, under the roof
    (low, low_gflops), ridge, (high, high_gflops) = roof.get_xydata()
    assert tuple(ridge) == pytest.approx((report.ridge_intensity, 742.4))
    assert low_gflops == pytest.approx(low * 128 / 6 * 1.45) and high_gflops == 742.4
    assert tuple(run.get_xydata()[0]) == pytest.approx((report.intensity, report.gflops))
    assert report.gflops <= min(742.4, report.intensity * 128 / 6 * 1.45)
    path = tmp_path / "roof.png"
    report.roofline_png(str(path))
    assert path.read_bytes()[:8] == PNG_SIGNATURE


def test_cli_report_without_dram_traffic(tmp_path, capsys):
    roofline = tmp_path / "axpy.png"
    status = main(["report", str(source_path("examples/axpy.s")), "--entry", "axpy", "--cpes",
                   "2",
                   "--arg", "16", "--arg", "0", "--arg", "1024", "--arg", "1.5",
                   "--flops", "64", "--roofline", str(roofline), "--json"])
    assert status == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cpes"] == 2 and data["flops"] == 64 and data["intensity"] is None
    assert data["dma"]["bytes_moved"] == 0 and data["rbw_mbw_memory_to_ldm"] == 0
    assert roofline.read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize("argv, message", [
    (["--entry", "nope"], "nope"),
    (["--entry", "axpy", "--arg", "x1"], "--arg 'x1'"),
    (["--entry", "axpy", "--arg", "@/dev/null"], "not a regular file"),
    (["--entry", "axpy", "--roofline", "."], "is a directory"),
    (["--entry", "axpy", "--roofline", "plot"], "ending in .png"),
])
def test_cli_report_bad_input_exits_1(capsys, argv, message):
    assert main(["report", str(source_path("examples/axpy.s")), "--cpes", "1", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_global_accesses_count_as_whole_memory_transactions():
    # axpy on x, y in main memory: each of the 16 vector steps loads x and y and stores y with
    # global accesses, each costing one 128-byte transaction (MACHINE.md §3).
    m = swsim.Machine()
    x, y = m.mem.put(np.arange(64.0)), m.mem.put(np.ones(64))
    res = m.run(program("examples/axpy.s"), entry="axpy", args=[64, x, y, 2.0], cpes=range(1))
    report = run_report(res, flops=128)
    assert (res.counters["gld_count"], res.counters["gst_count"]) == (32, 16)
    assert report.dram_bytes == 48 * 128
    assert report.intensity == pytest.approx(128 / (48 * 128))
