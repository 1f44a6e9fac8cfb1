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

# Why a pipe was idle in a cycle (docs/timing.md "Counters"); the order is the counter order.
STALL_REASONS = ("raw", "waw", "get_empty", "put_full", "dma_full", "global", "barrier",
                 "divide", "pairing", "finished")

# Per-CPE counters, columns of EngineResult.cpe_counters.
CPE_COUNTERS = (
    "p0_valid", "p1_valid",
    *(f"p0_idle_{r}" for r in STALL_REASONS),
    *(f"p1_idle_{r}" for r in STALL_REASONS),
    "active_cycles",   # cycles up to and including the CPE's halt
)
CPE_COUNTER_INDEX = {name: i for i, name in enumerate(CPE_COUNTERS)}

# Per-CG counters, entries of EngineResult.cg_counters.
CG_COUNTERS = ("dma_requests", "dma_bytes_requested", "dma_transactions", "dma_bytes_moved",
               "rc_transfers", "rc_deliveries", "gld_count", "gst_count", "barriers")
CG_COUNTER_INDEX = {name: i for i, name in enumerate(CG_COUNTERS)}

# Why a run stopped early. Each code has a message template over the stop's (a, b) values.
STOP_KINDS = {
    1: ("access", "address {a:#x} is outside this CPE's LDM and main memory"),
    2: ("misaligned", "{b}-byte access at {a:#x} is not {b}-byte aligned"),
    3: ("undecodable", "undecodable instruction word {a:#010x}"),
    4: ("pc", "pc {a:#x} is outside the code image"),
    5: ("dma", "bad DMA request: {detail}"),
    6: ("put_unspawned", "register communication to CPE {a}, which is not spawned"),
    7: ("put_self", "register communication to itself (n = {a})"),
    8: ("barrier", "barrier mask {a:#04x}: {detail}"),
    9: ("bcast_memory", "load-and-broadcast from main memory address {a:#x} (LDM only)"),
    100: ("deadlock", "deadlock: every running CPE waits for something that cannot happen"),
    101: ("cycle_limit", "cycle limit of {a} cycles reached"),
}
# Details for kinds 5 and 8, indexed by b.
DMA_PROBLEMS = ("bad op (must be 0 get or 1 put)", "bad mode (must be 0 PE, 1 BCAST, 2 ROW)",
                "put in BCAST/ROW mode", "size is 0", "LDM range outside LDM",
                "memory range outside main memory", "reply word not 4-byte aligned in LDM",
                "broadcast mask is empty")
BARRIER_PROBLEMS = ("the issuing CPE is not in the mask", "a participant is not spawned")
STOP_DEADLOCK, STOP_CYCLE_LIMIT = 100, 101


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
            detail = DMA_PROBLEMS[self.b]
        elif self.kind == 8:
            detail = BARRIER_PROBLEMS[self.b]
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
