"""``Stats``: what one kernel launch did, the one result type of every host wrapper."""
from __future__ import annotations

from dataclasses import dataclass, field


class Rates:
    """Time, rate and efficiency of anything with `cycles`, `flops`, `clock_hz` and
    `peak_gflops` (a launch, or a DNN operator's several launches)."""

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9

    @property
    def efficiency(self) -> float:
        return self.gflops / self.peak_gflops


@dataclass
class Stats(Rates):
    """One launch: its timed cycles and flops, the whole run, and the wrapper's own choices
    (``details``: e.g. the blocking or tile it used; read as attributes, ``stats.blocking``)."""
    flops: int                # floating-point operations the launch performs
    cycles: int               # the timed region: the whole kernel, or what the kernel timed
    kernel_cycles: int        # the whole run, spawn excluded
    clock_hz: float
    peak_gflops: float        # the core group's peak (the machine's config)
    host_seconds: float       # host time of the simulation
    run: object               # the VM's RunResult (counters, per-CPE statistics)
    details: dict = field(default_factory=dict)

    def __getattr__(self, name):
        details = self.__dict__.get("details", {})
        if name in details:
            return details[name]
        raise AttributeError(f"Stats has no attribute {name!r} (details: {sorted(details)})")

    @property
    def ee_min(self) -> float:
        """The lowest per-CPE execution efficiency over the whole run."""
        return min(s.ee for s in self.run.cpe.values())
