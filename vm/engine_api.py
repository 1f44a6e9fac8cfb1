"""The contract between the host side (``Machine``) and the two engines.

The host prepares an ``EngineJob`` (initial registers, LDM images, main memory, the code), an
engine (``swsim.vm.pyengine`` or ``swsim.vm.cengine``) runs it to the end and returns an
``EngineResult``; the arrays of the job are updated in place. Both engines follow
``docs/timing.md`` and must return identical results for the same job: same final arrays, same
counters, same stop, same trace spans.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .config import VMConfig
# The enums the engines share (the C core's are generated from the same module).
from .engine_defs import (BARRIER_PROBLEMS, CG_COUNTER_INDEX, CG_COUNTERS,  # noqa: F401
                          CPE_COUNTER_INDEX, CPE_COUNTERS, DMA_FIELDS, DMA_MODES, DMA_OPS,
                          DMA_PROBLEMS, SPAN_KINDS, STALL_REASONS, STOP_CYCLE_LIMIT,
                          STOP_DEADLOCK, STOP_KINDS)


@dataclass
class EngineJob:
    config: VMConfig
    code: np.ndarray            # uint32 instruction words, the first at config.code_base
    spawned: np.ndarray         # bool (num_cpes,)
    entry_pc: int               # address every spawned CPE starts at
    regs: np.ndarray            # uint64 (num_cpes, 32, 4), lane 0 = bits [63:0]; in/out
    ldm: np.ndarray             # uint8 (num_cpes, config.ldm_bytes); in/out
    mem: np.ndarray             # uint8 (n,), main memory from config.mem_base; in/out
    max_cycles: Optional[int] = None
    trace: bool = False


@dataclass
class Stop:
    kind: int                   # key of STOP_KINDS
    cpe: int                    # faulting CPE (-1 for deadlock / cycle limit)
    pc: int
    cycle: int
    a: int = 0
    b: int = 0
    blocked: list = field(default_factory=list)  # deadlock/limit: [(cpe, pc, reason name)]

    @property
    def name(self) -> str:
        return STOP_KINDS[self.kind][0]

    def message(self) -> str:
        detail = ""
        if self.kind == 5:
            detail = DMA_PROBLEMS[self.b][1]
        elif self.kind == 8:
            detail = BARRIER_PROBLEMS[self.b][1]
        return STOP_KINDS[self.kind][1].format(a=self.a, b=self.b, detail=detail)


@dataclass
class EngineResult:
    kernel_cycles: int          # cycles from spawn to the cycle after the last halt (or stop)
    cpe_counters: np.ndarray    # uint64 (num_cpes, len(CPE_COUNTERS)); zero rows if not spawned
    cg_counters: np.ndarray     # uint64 (len(CG_COUNTERS),)
    pcs: np.ndarray             # uint64 (num_cpes,) pc of each CPE at the end
    stop: Optional[Stop] = None
    # Trace (only if job.trace): (cpe, kind, start, end) with end exclusive; kind is "issue",
    # "stall:<reason>" (not for "finished") or "dma" (issue of the dma to its reply update).
    # Consecutive cycles in the same state are one span; spans are sorted by (cpe, start, kind).
    spans: Optional[list] = None
