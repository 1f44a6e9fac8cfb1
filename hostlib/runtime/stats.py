"""``Stats``: the one type of what a host operator reports (its cycles, flops, time, rate and
efficiency); ``LaunchStats``, the Stats of kernel launches every host wrapper returns (DNN
convolution's ``ConvStats`` is another)."""
from __future__ import annotations

from dataclasses import dataclass, field


class Stats:
    """What an operator did: its ``cycles``, ``flops``, ``clock_hz`` and ``peak_gflops`` (each
    subclass holds or computes them), and from them its time, rate and efficiency."""

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
class LaunchStats(Stats):
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
        raise AttributeError(f"LaunchStats has no attribute {name!r} (details: {sorted(details)})")

    @property
    def ee_min(self) -> float:
        """The lowest per-CPE execution efficiency over the whole run."""
        return min(s.ee for s in self.run.cpe.values())
