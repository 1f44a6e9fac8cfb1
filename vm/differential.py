"""Differential runs: one job on the C core and on the Python reference engine, and the list of
everything in which they differ (final registers, LDM, memory, counters, stop, trace spans).
Used by the differential tests and by ``swsim fuzz``."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .engine_api import EngineJob, EngineResult


def run_both(job: EngineJob) -> tuple[list[EngineJob], list[EngineResult]]:
    """([python job, C job], [python result, C result]), each engine on its own copy of the
    job's arrays."""
    from . import cengine, pyengine
    jobs = [replace(job, regs=job.regs.copy(), ldm=job.ldm.copy(), mem=job.mem.copy())
            for _ in range(2)]
    return jobs, [pyengine.run(jobs[0]), cengine.run(jobs[1])]


def differences(jobs: list[EngineJob], results: list[EngineResult]) -> list[str]:
    """What differs between the two engines' final state and results (empty: they agree)."""
    found = []
    for name in ("regs", "ldm", "mem"):
        a, b = getattr(jobs[0], name), getattr(jobs[1], name)
        if not np.array_equal(a, b):
            where = np.argwhere(a != b)[:5]
            found.append(f"{name} differ at {where.tolist()}: python {a[tuple(where[0])]} "
                         f"c {b[tuple(where[0])]}")
    py, c = results
    for name in ("stop", "kernel_cycles", "cpe_counters", "cg_counters", "pcs", "spans"):
        a, b = getattr(py, name), getattr(c, name)
        same = np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
        if not same:
            found.append(f"{name}: python {_short(a)} c {_short(b)}")
    return found


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "..."
