"""The SW26010 emulator: ``Machine`` (host API: one chip, kernels spawned on its core groups as
``CgRun``s), its configuration, results and errors. Engines: ``pyengine`` (pure-Python
reference) and ``cengine`` (the C core)."""
from .config import VMConfig
from .faults import CycleLimit, Deadlock, HostError, RunStopped, VMFault
from .machine import CgRun, Machine
from .memory import Memory
from .results import CpeStats, RunResult

__all__ = ["Machine", "CgRun", "VMConfig", "Memory", "RunResult", "CpeStats", "HostError",
           "RunStopped", "VMFault", "Deadlock", "CycleLimit"]
