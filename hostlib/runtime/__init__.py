"""The host runtime every operator wrapper stands on: ``Kernel`` (a linked kernel, its entry,
the job-record layouts and stack it declares in its symbols, launch on a Machine), ``Record``
(one record layout), ``RequirementError`` (a launch refused: the machine is not one the kernel
declares it runs on), ``LdmArena`` (LDM planning between a kernel's data and its stack),
``Stats`` (what an operator did: the one stats type; ``LaunchStats`` those of kernel launches),
``host_operator`` (the checks and the memory release every public operator shares) and
``numeric_array`` (an array argument, a wrong type refused by name)."""
from .contract import host_operator, numeric_array
from .kernel import Kernel, LdmArena, Record, RequirementError, timed_run
from .stats import LaunchStats, Stats

__all__ = ["Kernel", "LdmArena", "Record", "LaunchStats", "RequirementError", "Stats",
           "host_operator", "numeric_array", "timed_run"]
