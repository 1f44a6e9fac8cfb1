"""The dual-issue rules of a CPE (docs/timing.md "Issue rules"), shared by the Python reference
engine (``pyengine``) and the loop analysis (``hostlib.analyze``).

An ``Op`` is an instruction word decoded once with what the rules ask about it (its
properties come from the ISA table); ``IssueState`` holds register ready times and the divide
unit; ``plan_issue`` decides what one cycle issues from a leader and the instruction after it.
The C core applies the same rules to the same table facts (vm/core/engine.c).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from ..isa import decode, dest_field, immediate_fields, immediate_value, source_fields
from ..isa.table import ZERO_REG
from .semantics import SEMANTICS


# ---- decoded instructions -------------------------------------------------------------------
class Op:
    """One instruction word decoded once, with everything the issue rules ask about it."""
    __slots__ = ("pc", "name", "fmt", "cls", "size", "ra", "rb", "rc", "r3", "lit", "literal",
                 "disp", "lane", "imm", "sources", "dest", "latency", "p0_only", "p1_only",
                 "ends_group", "flops", "execute")

    def __init__(self, pc: int, instr, fields: dict, literal: bool, config):
        self.pc, self.name, self.fmt, self.cls, self.size = \
            pc, instr.name, instr.fmt, instr.cls, instr.size
        self.ra, self.rb, self.rc, self.r3 = (fields.get(f, ZERO_REG) for f in ("ra", "rb", "rc", "r3"))
        self.imm = immediate_value(immediate_fields(instr, literal), fields)
        self.lit, self.literal = self.imm if literal else 0, literal
        self.disp = fields.get("disp16", fields.get("disp21", 0))
        self.lane = fields.get("lane", 0)
        self.sources = tuple(fields[f] for f in source_fields(instr, literal)
                             if fields[f] != ZERO_REG)
        dest = dest_field(instr)
        self.dest = fields[dest] if dest and fields[dest] != ZERO_REG else None
        self.latency = config.latency(instr.latency)
        self.p0_only, self.p1_only = instr.pipe == "P0", instr.pipe == "P1"
        self.ends_group = instr.ends_group
        self.flops = instr.flops
        self.execute = SEMANTICS[instr.name]

    def can_use(self, pipe: int) -> bool:
        return not (self.p1_only if pipe == 0 else self.p0_only)


def decode_program(code: np.ndarray, code_base: int, config) -> list[Optional[Op]]:
    ops = []
    for index, word in enumerate(code):
        decoded = decode(int(word))
        ops.append(None if decoded is None else Op(code_base + 4 * index, *decoded, config))
    return ops


# ---- the issue rules ------------------------------------------------------------------------
class IssueState:
    """What readiness depends on besides the structural conditions: register ready times and
    the divide unit. A CPE of the Python engine is one; ``hostlib.analyze`` drives another
    through a loop body."""

    def __init__(self, num_regs: int):
        self.ready = [0] * num_regs          # cycle at which each register can be read
        self.p0_busy_until = 0               # divide/sqrt in P0

    def register_stall(self, op: Op, t: int) -> Optional[str]:
        """Readiness checks 1-3 of timing.md (raw, waw, divide), or None if they pass."""
        ready = self.ready
        if any(ready[r] > t for r in op.sources):
            return "raw"
        if op.dest is not None and ready[op.dest] > t:
            return "waw"
        if op.p0_only and self.p0_busy_until > t:
            return "divide"
        return None

    def record_issue(self, op: Op, t: int, result_ready: Optional[int] = None) -> None:
        """``op`` issued at t: its destination is readable at t + latency (or at
        ``result_ready``, e.g. a global load), a divide keeps P0 busy as long."""
        if op.dest is not None:
            self.ready[op.dest] = result_ready if result_ready is not None else t + op.latency
        if op.cls == "fdiv":
            self.p0_busy_until = t + op.latency


class IssueGroup(NamedTuple):
    """What one cycle's issue step does (timing.md "Issue rules")."""
    stall: Optional[str]               # the leader is not ready: nothing issues, for this reason
    leader_pipe: int = 0
    follower: Optional[Op] = None      # issues on the other pipe
    idle_reason: str = "pairing"       # charged to the other pipe when no follower issues


def pairs(leader: Op, follower: Op) -> bool:
    """Independent and a pipe left for the follower (readiness checked separately)."""
    dest = leader.dest
    if dest is not None and (dest in follower.sources or dest == follower.dest):
        return False
    if leader.p0_only:
        return follower.can_use(1)
    if leader.p1_only:
        return follower.can_use(0)
    return True


def plan_issue(leader: Op, next_op: Optional[Op],
               stall_reason: Callable[[Op], Optional[str]]) -> IssueGroup:
    """Apply the issue rules to ``leader`` and the instruction after it in program order
    (None if there is none); ``stall_reason(op)`` is op's readiness at this cycle."""
    reason = stall_reason(leader)
    if reason:
        return IssueGroup(reason)
    follower = None if leader.ends_group else next_op
    follower_reason = stall_reason(follower) if follower else None
    if follower is None or follower_reason or not pairs(leader, follower):
        follower = None
    if leader.p0_only or leader.p1_only:
        leader_pipe = 0 if leader.p0_only else 1
    else:
        leader_pipe = 0 if follower is not None and follower.p1_only else 1
    return IssueGroup(None, leader_pipe, follower, follower_reason or "pairing")


__all__ = ["Op", "decode_program", "IssueState", "IssueGroup", "pairs", "plan_issue"]
