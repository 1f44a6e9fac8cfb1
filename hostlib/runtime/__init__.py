"""The host runtime every operator wrapper stands on: ``Kernel`` (a linked kernel, its entry,
the job-record layouts and stack it declares in its symbols, launch on a Machine), ``Record``
(one record layout), ``LdmArena`` (LDM planning between a kernel's data and its stack) and
``Stats`` (what one launch did, with its GFLOPS)."""
from .kernel import Kernel, LdmArena, Record
from .stats import Stats

__all__ = ["Kernel", "LdmArena", "Record", "Stats"]
