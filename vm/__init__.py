"""The SW26010 core-group emulator: ``Machine`` (host API), its configuration, results and
errors. Engines: ``pyengine`` (pure-Python reference) and ``cengine`` (the C core)."""
from .config import VMConfig
from .faults import CycleLimit, Deadlock, HostError, RunStopped, VMFault
from .machine import Machine
from .memory import Memory
from .results import CpeStats, RunResult

__all__ = ["Machine", "VMConfig", "Memory", "RunResult", "CpeStats", "HostError", "RunStopped",
           "VMFault", "Deadlock", "CycleLimit"]
