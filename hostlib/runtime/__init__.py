"""The host runtime every operator wrapper stands on: ``Kernel`` (a linked kernel, its entry,
the job-record layouts and stack it declares in its symbols, launch on a Machine), ``Record``
(one record layout), ``RequirementError`` (a launch refused: the machine is not one the kernel
declares it runs on), ``LdmArena`` (LDM planning between a kernel's data and its stack) and
``Stats`` (what one launch did, with its GFLOPS)."""
from .kernel import Kernel, LdmArena, Record, RequirementError
from .stats import Stats

__all__ = ["Kernel", "LdmArena", "Record", "RequirementError", "Stats"]
