"""``swsim fuzz``: the differential campaign at length. Random programs of vm/fuzzgen.py (every
part of the machine, random valid configurations, planted faults) run on the C core and the
Python reference engine; a program on which they differ (a *mismatch*) or on which one raises
(a *crash*) is minimised by Hypothesis's shrinker and written as a reproducer file that
``swsim fuzz --replay FILE`` runs again.

The campaign runs in batches of ``BATCH`` programs, each a Hypothesis run with its own seed
(``seed + batch index``), so a campaign is reproducible from its seed and a failure in one batch
does not stop the others. Needs Hypothesis (``pip install 'swsim[fuzz]'``), which nothing
else of the package uses.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..asm.files import MAX_SOURCE_BYTES, read_bounded
from ..errors import SwsimError
from .differential import differences, run_both
from .faults import HostError

BATCH = 50
MAX_CYCLES = 100_000   # a generated program that spins longer stops at the limit (both engines)


@dataclass
class FuzzReport:
    programs: int = 0
    mismatches: int = 0
    crashes: int = 0
    seconds: float = 0.0
    reproducers: list = field(default_factory=list)

    @property
    def programs_per_second(self) -> float:
        return self.programs / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        lines = [f"{self.programs} programs, {self.mismatches} mismatches, {self.crashes} "
                 f"crashes in {self.seconds:.1f} s ({self.programs_per_second:.1f} programs/s)"]
        lines += [f"  reproducer: {path}" for path in self.reproducers]
        return "\n".join(lines)


class Mismatch(AssertionError):
    """The engines disagree on a program."""


def _generator():
    """The program generator and Hypothesis' decorators; a HostError if Hypothesis is
    missing."""
    try:
        from hypothesis import HealthCheck, Phase, given, seed, settings
    except ImportError as exc:
        raise HostError("swsim fuzz needs Hypothesis, which is not installed: pip install "
                        f"'swsim[fuzz]' (or hypothesis) ({exc})") from None
    from . import fuzzgen
    return fuzzgen, (HealthCheck, Phase, given, seed, settings)


def check_case(case) -> None:
    """Run one generated case on both engines; Mismatch if they differ."""
    jobs, results = run_both(case.job(max_cycles=MAX_CYCLES, trace=True))
    found = differences(jobs, results)
    if found:
        raise Mismatch("; ".join(found))


def campaign(programs: int, seed_value: int, out_dir: str = ".",
             progress: Optional[Callable[[int], None]] = None) -> FuzzReport:
    """Run ``programs`` random programs from ``seed_value``; reproducers go to ``out_dir``."""
    fuzzgen, (HealthCheck, Phase, given, seed, settings) = _generator()
    report = FuzzReport()
    start = time.perf_counter()
    for batch, first in enumerate(range(0, programs, BATCH)):
        state = {"failing": None, "shrinking": False}

        @settings(max_examples=min(BATCH, programs - first), deadline=None, database=None,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                  phases=[Phase.generate, Phase.shrink])
        @seed(seed_value + batch)
        @given(fuzzgen.programs(faults=True, configs=True))
        def check(case):
            if not state["shrinking"]:
                report.programs += 1
                if progress is not None:
                    progress(report.programs)
            try:
                check_case(case)
            except Exception as exc:
                state["shrinking"] = True
                state["failing"] = (case, exc)
                raise

        try:
            check()
        except Exception:   # Hypothesis re-raises the minimal example's error last
            case, exc = state["failing"]
            if isinstance(exc, Mismatch):
                report.mismatches += 1
            else:
                report.crashes += 1
            report.reproducers.append(write_reproducer(case, exc, out_dir, seed_value + batch))
    report.seconds = time.perf_counter() - start
    return report


def write_reproducer(case, exc: BaseException, out_dir: str, batch_seed: int) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"fuzz-repro-{batch_seed}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"problem": f"{type(exc).__name__}: {exc}", "text": case.text,
                   "cpes": case.cpes, "spawn": case.spawn, "seed": case.seed,
                   "overrides": case.overrides}, f, indent=2)
    return path


def replay(path: str) -> str:
    """Run a reproducer again: '' if the engines now agree, else what differs."""
    fuzzgen, _ = _generator()
    try:
        data = json.loads(read_bounded(path, "a fuzz reproducer", MAX_SOURCE_BYTES))
        case = fuzzgen.Case(data["text"], data["cpes"], data["seed"],
                          spawn=None if data["spawn"] is None else tuple(data["spawn"]),
                          overrides=data["overrides"])
    except (SwsimError, OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise HostError(f"{path}: not a fuzz reproducer ({exc})") from None
    try:
        check_case(case)
    except Mismatch as exc:
        return str(exc)
    return ""
