"""Long work shows progress: gemm() passes Machine.run's progress callback on, the benchmarks
report their steps, and the benchmark bar takes both."""
import numpy as np
import pytest

from swsim import Machine
from swsim.hostlib.blas.swgemm import gemm
from swsim.hostlib.tools.bench import fidelity
from swsim.hostlib.tools.tool_commands import StepBar


def test_gemm_reports_the_simulated_cycles():
    cycles = []
    a = np.ones((256, 256), np.float32)
    _, stats = gemm(a, a, progress=cycles.append)
    assert cycles and cycles == sorted(cycles) and max(cycles) <= stats.kernel_cycles


def test_fidelity_names_each_measurement(monkeypatch):
    monkeypatch.setattr(fidelity, "MEASUREMENTS", (lambda engine, progress: [],) * 3)
    steps = []
    fidelity.run("c", progress=steps.append)
    assert steps == ["<lambda>"] * 3


@pytest.mark.parametrize("measure", fidelity.MEASUREMENTS, ids=lambda m: m.__name__)
def test_fidelity_measurements_report_cycles_while_they_simulate(measure, monkeypatch):
    # every simulation a measurement starts passes the progress callback on: counted by
    # wrapping Machine.run (the runs themselves are too short on the C engine to call it)
    runs = []
    real_run = Machine.run

    def run(self, *args, progress=None, **kw):
        runs.append(progress)
        return real_run(self, *args, progress=progress, **kw)

    monkeypatch.setattr(Machine, "run", run)
    marker = [].append
    measure("c", marker)
    assert runs and all(p is marker for p in runs)


def test_the_step_bar_counts_steps_and_shows_cycles():
    bar = StepBar(2, enabled=True)
    bar("1. first")
    bar(70000)
    bar("2. second")
    assert bar.bar.n == 1 and bar.started == 2
    bar.close()
    assert bar.bar.n == 2
