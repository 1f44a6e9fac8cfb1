"""Steady-state analysis of a loop body under the issue rules: the SW26010 counterpart of
llvm-mca (docs/analysis.md).

The loop is the code from its head (a label, or a source line for numeric labels) to the last
backward branch that targets it. The body is issued again and again on one CPE by the reference
engine's own issue rules (``vm.issue.plan_issue`` and ``IssueState``) in an ideal
environment: every structural condition holds, loads take their LDM latency, forward branches
fall through and the backward branch is taken. From the simulated cycles come the steady-state
time per iteration, P0/P1 use, EE, the thesis' RBW/MBW for LDM -> registers (eq. 3-4) and a
per-cycle timeline; from the dependency graph the recurrence bound and its critical chain.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from ...asm.program import TEXT, Program
from ...errors import SwsimError
from ...isa import NUM_REGS
from ...isa.disasm import disassemble_word, format_instruction
from ...vm.config import VMConfig
from ...vm.engine_api import STALL_REASONS
from ...vm.issue import IssueState, Op, decode_program, plan_issue

DEFAULT_ITERATIONS = 20
MAX_ITERATIONS = 10_000         # ~5 ms of host time each (gemm_kloop's kloop_11)
RECURRENCE_ITERATIONS = 64     # unrolled iterations of the dependency graph (see _recurrence)
ASSUMPTIONS = (
    "loads and stores hit LDM (global accesses are timed as LDM accesses)",
    "getr/getc find their data; puts, load-and-broadcasts and dma never block",
    "forward branches fall through; the backward branch is always taken",
)
PIPE_NAMES = ("P0", "P1")


class AnalysisError(SwsimError):
    """The loop cannot be found or analysed (unknown label, no backward branch, ...)."""


# ---- the loop -------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoopInstruction:
    index: int          # position in the body
    op: Op
    text: str           # disassembly
    source: str         # "file.s:line" or ""

    @property
    def label(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"[{self.index}] {self.text}{where}"

    @property
    def pipes(self) -> str:
        return "P0" if self.op.p0_only else "P1" if self.op.p1_only else "P0|P1"


@dataclass(frozen=True)
class Loop:
    name: str                           # the label or "line N"
    head: int                           # address of the first instruction
    branch: int                         # address of the backward branch
    body: tuple[LoopInstruction, ...]
    notes: tuple[str, ...] = ()


def find_loop(program: Program, loop: str, config: Optional[VMConfig] = None,
              entry: Optional[str] = None, instance: int = 1,
              source_file: Optional[str] = None) -> Loop:
    """Locate ``loop`` (a label, ``LINE`` or ``FILE:LINE``) in ``program``; ``entry`` limits the
    search to one function, ``instance`` picks one of several macro expansions of a line, a
    plain ``LINE`` is a line of ``source_file`` (of any file if None)."""
    config = config or VMConfig.preset()
    ops = decode_program(program.code, program.code_base, config)
    low, high = _function_range(program, entry) if entry else (program.code_base,
                                                               program.code_end)
    loop_heads = {_branch_target(op): op.pc for op in ops
                  if op is not None and op.cls == "branch" and _branch_target(op) <= op.pc
                  and low <= _branch_target(op) < high}   # head -> last branch back to it
    notes = []
    if loop in program.symbols:
        heads, name = [program.symbols[loop].value], loop
    else:
        name = f"line {loop}"
        heads = _heads_at_line(program, loop, low, high, loop_heads, source_file)
        if len(heads) > 1:
            if not 1 <= instance <= len(heads):
                raise AnalysisError(f"--instance {instance}: line {loop} starts {len(heads)} "
                                    f"loops (1..{len(heads)})")
            notes.append(f"line {loop} starts {len(heads)} loops (macro expansions) at "
                         f"{', '.join(hex(h) for h in heads)}; this is number {instance} "
                         f"(choose with --instance)")
            heads = [heads[instance - 1]]
    head = heads[0]
    if head not in loop_heads:
        raise AnalysisError(f"no backward branch to {name} ({head:#x}): a loop ends with a "
                            f"branch back to its first instruction")
    branch = loop_heads[head]
    body = tuple(_describe(program, i, ops[(pc - program.code_base) >> 2])
                 for i, pc in enumerate(range(head, branch + 4, 4)))
    if any(item.op.cls in ("branch", "jump") for item in body[:-1]):
        notes.append("the body contains other branches or jumps: timed as falling through")
    return Loop(name, head, branch, body, tuple(notes))


def _branch_target(op: Op) -> int:
    return op.pc + 4 + 4 * op.disp


def _function_range(program: Program, entry: str) -> tuple[int, int]:
    symbol = program.symbols.get(entry)
    if symbol is None or not _is_code(program, entry):
        raise AnalysisError(f"--entry {entry}: no such function{_suggest(program, entry)}")
    later = [s.value for name, s in program.symbols.items()
             if s.type == "func" and s.value > symbol.value and _is_code(program, name)]
    return symbol.value, min(later, default=program.code_end)


def _is_code(program: Program, name: str) -> bool:
    section = program.symbols[name].section
    return any(s.name == section and s.kind == TEXT for s in program.sections)


def _heads_at_line(program: Program, loop: str, low: int, high: int, loop_heads: dict,
                   source_file: Optional[str]) -> list[int]:
    """Loop heads at the first line with code at or after LINE (a label line has none)."""
    match = re.fullmatch(r"(?:(.+):)?(\d+)", loop)
    if not match:
        raise AnalysisError(f"no label {loop!r}{_suggest(program, loop)}; give numeric or "
                            f"local labels by their source line number")
    file, line = match.group(1) or source_file, int(match.group(2))
    lines = {address: source for address, source in program.lines.items()
             if low <= address < high and source.line >= line and
             (file is None or os.path.basename(source.file) == os.path.basename(file))}
    if not lines:
        raise AnalysisError(f"no code at or after line {loop}")
    first = min(source.line for source in lines.values())
    starts = sorted(address for address, source in lines.items() if source.line == first)
    heads = [address for address in starts if address in loop_heads]
    if not heads:
        raise AnalysisError(f"no backward branch to line {first} ({starts[0]:#x}): a loop ends "
                            f"with a branch back to its first instruction")
    return heads


def _suggest(program: Program, name: str) -> str:
    labels = [n for n in program.symbols if _is_code(program, n)]
    close = difflib.get_close_matches(name, labels, n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _describe(program: Program, index: int, op: Op) -> LoopInstruction:
    word = int(program.code[(op.pc - program.code_base) >> 2])
    text = format_instruction(word, op.pc, program.symbol_at) or disassemble_word(word, op.pc)
    source = program.lines.get(op.pc)
    where = f"{os.path.basename(source.file)}:{source.line}" if source else ""
    return LoopInstruction(index, op, " ".join(text.split()), where)


# ---- issuing the body -----------------------------------------------------------------------
@dataclass(frozen=True)
class Slot:
    """One pipe in one cycle: an instruction issued (``index``) or idle for ``reason``."""
    index: Optional[int] = None
    iteration: int = 0
    reason: Optional[str] = None
    detail: str = ""

    def to_dict(self) -> dict:
        return {"index": self.index, "iteration": self.iteration, "reason": self.reason,
                "detail": self.detail}


class _Issuer:
    """One CPE issuing the unrolled body: stream position p is instruction p % n of
    iteration p // n."""

    def __init__(self, loop: Loop):
        self.body = loop.body
        self.state = IssueState(NUM_REGS)
        self.writer: dict[int, int] = {}       # register -> stream position of its last writer

    def run(self, iterations: int) -> tuple[list[tuple[Slot, Slot]], list[int]]:
        """Cycles until the head of iteration ``iterations`` issues: per cycle (P0, P1) slots,
        and the cycle at which each iteration's head issued."""
        n = len(self.body)
        end = iterations * n + 1
        cycles, starts, position, t = [], [], 0, 0
        while position < end:
            leader = self.body[position % n].op
            follower = self.body[(position + 1) % n].op if position + 1 < end else None
            group = plan_issue(leader, follower, lambda op: self.state.register_stall(op, t))
            if position % n == 0 and not group.stall:
                starts.append(t)
            cycles.append(self._slots(group, position, t))
            if not group.stall:
                issued = 2 if group.follower else 1
                for p in range(position, position + issued):
                    self.state.record_issue(self.body[p % n].op, t)
                    if self.body[p % n].op.dest is not None:
                        self.writer[self.body[p % n].op.dest] = p
                position += issued
            t += 1
        return cycles, starts

    def _slots(self, group, position: int, t: int) -> tuple[Slot, Slot]:
        n = len(self.body)
        if group.stall:
            idle = Slot(reason=group.stall, detail=self._stall_detail(position, group.stall, t))
            return idle, idle
        slots = [None, None]
        slots[group.leader_pipe] = Slot(position % n, position // n)
        after = position + 1
        if group.follower:
            slots[1 - group.leader_pipe] = Slot(after % n, after // n)
        elif group.idle_reason != "pairing":
            slots[1 - group.leader_pipe] = Slot(
                reason=group.idle_reason, detail=self._stall_detail(after, group.idle_reason, t))
        else:
            slots[1 - group.leader_pipe] = Slot(reason="pairing",
                                                detail=self._pairing_detail(position))
        return slots[0], slots[1]

    def _stall_detail(self, position: int, reason: str, t: int) -> str:
        """Which register (and which producer) the instruction at ``position`` waits for."""
        n = len(self.body)
        op = self.body[position % n].op
        ready = self.state.ready
        if reason == "divide":
            return f"[{position % n}] waits for P0 (divide busy {self.state.p0_busy_until - t}" \
                   f" more cycles)"
        registers = op.sources if reason == "raw" else (op.dest,)
        register = max(registers, key=lambda r: ready[r])
        producer = self.writer[register]
        previous = " of the previous iteration" if producer // n < position // n else ""
        return f"[{position % n}] waits {ready[register] - t} for ${register} from " \
               f"[{producer % n}]{previous}"

    def _pairing_detail(self, position: int) -> str:
        """Why a ready follower did not issue beside the leader (the rules of ``pairs``)."""
        n = len(self.body)
        leader, follower = self.body[position % n].op, self.body[(position + 1) % n].op
        if leader.ends_group:
            return f"nothing pairs with [{position % n}] {leader.name}"
        if leader.dest is not None and (leader.dest in follower.sources or
                                        leader.dest == follower.dest):
            return f"[{(position + 1) % n}] uses ${leader.dest}, written by [{position % n}]"
        return f"[{(position + 1) % n}] needs the same pipe as [{position % n}]"


# ---- the steady state -----------------------------------------------------------------------
def _steady_state(starts: list[int]) -> tuple[int, bool]:
    """The smallest period p whose last three repetitions of per-iteration times agree
    (converged), else half of the iterations (not converged)."""
    times = [b - a for a, b in zip(starts, starts[1:])]
    for period in range(1, len(times) // 3 + 1):
        if times[-period:] == times[-2 * period:-period] == times[-3 * period:-2 * period]:
            return period, True
    return max(1, len(times) // 2), False


# ---- bounds ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bound:
    name: str
    cycles: float                       # per iteration
    why: str

    def to_dict(self) -> dict:
        return {"name": self.name, "cycles": self.cycles, "why": self.why}


@dataclass(frozen=True)
class Link:
    """One instruction of the critical chain and the latency its consumer waits for."""
    index: int
    latency: int
    next_iteration: bool    # its consumer is in the next iteration

    def to_dict(self) -> dict:
        return {"index": self.index, "latency": self.latency,
                "next_iteration": self.next_iteration}


def _dependences(body) -> list[list[tuple[int, int]]]:
    """For each instruction, (producer index, iteration distance) of every register it reads
    or writes (RAW and WAW both wait for the producer's result, timing.md readiness 1-2)."""
    last_writer = {item.op.dest: item.index for item in body if item.op.dest is not None}
    written: dict[int, int] = {}
    deps = []
    for item in body:
        registers = set(item.op.sources) | ({item.op.dest} - {None})
        deps.append([(written[r], 0) if r in written else (last_writer[r], 1)
                     for r in sorted(registers) if r in written or r in last_writer])
        if item.op.dest is not None:
            written[item.op.dest] = item.index
    return deps


def _recurrence(body) -> tuple[float, list[Link]]:
    """The loop-carried dependence cycle with the most latency per iteration.

    Earliest issue times of the unrolled dependence graph with unlimited issue; the longest
    path to the last iteration, followed back, settles on the critical cycle: between two
    visits of the same instruction, latency / iterations is a cycle's ratio."""
    deps = _dependences(body)
    latency = [item.op.latency for item in body]
    time: list[list[int]] = []
    came_from: list[list[Optional[tuple[int, int]]]] = []
    for k in range(RECURRENCE_ITERATIONS):
        time.append([0] * len(body))
        came_from.append([None] * len(body))
        for j, producers in enumerate(deps):
            for p, distance in producers:
                if k - distance >= 0 and time[k - distance][p] + latency[p] > time[k][j]:
                    time[k][j] = time[k - distance][p] + latency[p]
                    came_from[k][j] = (k - distance, p)
    last = RECURRENCE_ITERATIONS - 1
    node = (last, max(range(len(body)), key=lambda j: time[last][j] + latency[j]))
    path = []                       # backwards in time
    while node is not None:
        path.append(node)
        node = came_from[node[0]][node[1]]
    best, chain, seen = 0.0, [], {}
    for position, (k, j) in enumerate(path):
        if j in seen:
            later_k = path[seen[j]][0]
            ratio = (time[later_k][j] - time[k][j]) / (later_k - k)
            if ratio > best:
                cycle = path[seen[j] + 1:position + 1][::-1]   # forward in time, j first
                best = ratio
                chain = [Link(jj, latency[jj], kk != nxt[0])
                         for (kk, jj), nxt in zip(cycle, cycle[1:] + [(later_k, j)])]
        seen[j] = position
    if chain:   # start after a loop-carried link, so that the chain reads in program order
        start = next(i for i, link in enumerate(chain) if link.next_iteration) + 1
        chain = chain[start:] + chain[:start]
    return best, chain


def _bounds(body, recurrence: float, chain: list[Link]) -> list[Bound]:
    p0_cycles = sum(item.op.latency if item.op.cls == "fdiv" else 1
                    for item in body if item.op.p0_only)
    p1_only = sum(1 for item in body if item.op.p1_only)
    return [
        Bound("recurrence", recurrence,
              f"loop-carried dependence chain, instructions: {len(chain)}" if chain
              else "no loop-carried dependence"),
        Bound("P0", p0_cycles, "P0-only instructions (a divide holds P0 for its latency)"),
        Bound("P1", p1_only, "P1-only instructions"),
        Bound("dual issue", len(body) / 2, f"{len(body)} instructions, two per cycle"),
    ]


# ---- the result -----------------------------------------------------------------------------
@dataclass
class LoopAnalysis:
    loop: Loop
    iterations: int
    cycles_per_iteration: float
    converged: bool
    iteration_cycles: list[int]         # time of every simulated iteration
    period: int                         # iterations in the steady-state window
    p0_valid: float                     # per iteration, over the window
    p1_valid: float
    p0_idle: dict                       # reason -> cycles per iteration
    p1_idle: dict
    bounds: list[Bound]
    limited_by: str
    critical_chain: list[Link]
    timeline: list[tuple[int, Slot, Slot]]   # (cycle from the window's start, P0, P1)
    notes: list[str] = field(default_factory=list)

    @property
    def ee(self) -> float:
        """#P0_valid / #P0_cycle in the steady state (thesis eq. 3-4's EE)."""
        return self.p0_valid / self.cycles_per_iteration

    @property
    def rbw_mbw(self) -> float:
        """RBW/MBW for LDM -> registers, thesis eq. 3-4: #P0_valid / #P1_valid."""
        return self.p0_valid / self.p1_valid if self.p1_valid else float("inf")

    def to_dict(self) -> dict:
        body = self.loop.body
        return {
            "loop": {"name": self.loop.name, "head": self.loop.head, "branch": self.loop.branch,
                     "instructions": [{"index": i.index, "pc": i.op.pc, "text": i.text,
                                       "source": i.source, "pipes": i.pipes,
                                       "latency": i.op.latency} for i in body]},
            "assumptions": list(ASSUMPTIONS),
            "iterations": self.iterations, "converged": self.converged,
            "iteration_cycles": self.iteration_cycles, "period": self.period,
            "cycles_per_iteration": self.cycles_per_iteration,
            "p0_valid": self.p0_valid, "p1_valid": self.p1_valid,
            "p0_idle": self.p0_idle, "p1_idle": self.p1_idle,
            "ee": self.ee, "rbw_mbw_ldm_to_registers": self.rbw_mbw,
            "bounds": [b.to_dict() for b in self.bounds], "limited_by": self.limited_by,
            "critical_chain": [link.to_dict() for link in self.critical_chain],
            "timeline": [{"cycle": c, "p0": p0.to_dict(), "p1": p1.to_dict()}
                         for c, p0, p1 in self.timeline],
            "notes": self.notes,
        }

    def __str__(self) -> str:
        return "\n".join(self._summary() + [""] + self._timeline_lines())

    def _summary(self) -> list[str]:
        loop, body = self.loop, self.loop.body
        times = " ".join(str(c) for c in self.iteration_cycles[-6:])
        lines = [
            f"Loop {loop.name}: {len(body)} instructions at {loop.head:#x}..{loop.branch:#x}, "
            f"{self.iterations} iterations simulated",
            "Assuming: " + "; ".join(ASSUMPTIONS) + ".",
            *(f"Note: {note}" for note in self.notes),
            "",
            f"Steady state: {self.cycles_per_iteration:.2f} cycles/iteration "
            + (f"(converged; last iterations {times})" if self.converged else
               f"(NOT converged; last iterations {times}: try more --iterations)"),
            f"  P0 valid {self.p0_valid:.2f}, P1 valid {self.p1_valid:.2f} per iteration",
            f"  EE = #P0_valid / #P0_cycle = {self.ee:.1%}",
            f"  RBW/MBW LDM->registers (eq. 3-4) = #P0_valid / #P1_valid = "
            f"{self.p0_valid:g}/{self.p1_valid:g} = {self.rbw_mbw:.2f}",
        ]
        for pipe, idle in (("P0", self.p0_idle), ("P1", self.p1_idle)):
            spent = ", ".join(f"{reason} {cycles:g}" for reason, cycles in idle.items()) or "none"
            lines.append(f"  {pipe} idle per iteration: {spent}")
        lines.append("Bounds (cycles/iteration):")
        for bound in self.bounds:
            lines.append(f"  {bound.name:<11} {bound.cycles:6.2f}  {bound.why}")
        lines.append(f"  limited by: {self.limited_by}")
        if self.critical_chain:
            lines.append("Critical chain (loop-carried):")
            for link in self.critical_chain:
                carried = "  (to the next iteration)" if link.next_iteration else ""
                lines.append(f"  {body[link.index].label}  -> {link.latency} cycles{carried}")
        return lines

    def _timeline_lines(self) -> list[str]:
        first = self.iterations - self.period
        which = f"iteration {first}" if self.period == 1 else \
            f"iterations {first}..{self.iterations - 1}"
        lines = [f"Timeline of {which} ([i] body index; idle: reason and cause)",
                 f"{'cycle':>5}  {'P0':<44} P1"]
        for cycle, p0, p1 in self.timeline:
            lines.append(f"{cycle:>5}  {self._cell(p0):<44} {self._cell(p1)}")
        return lines

    def _cell(self, slot: Slot) -> str:
        if slot.index is not None:
            return self.loop.body[slot.index].label
        return f"- {slot.reason}: {slot.detail}"


def analyze_loop(program: Program, loop: str, iterations: int = DEFAULT_ITERATIONS,
                 config: Optional[VMConfig] = None, entry: Optional[str] = None,
                 instance: int = 1, source_file: Optional[str] = None) -> LoopAnalysis:
    """Analyse the loop ``loop`` of ``program`` (see ``find_loop``) over ``iterations``."""
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise AnalysisError(f"--iterations must be 1..{MAX_ITERATIONS}, got {iterations}")
    if instance < 1:
        raise AnalysisError(f"--instance must be at least 1, got {instance}")
    found = find_loop(program, loop, config, entry, instance, source_file)
    cycles, starts = _Issuer(found).run(iterations)
    period, converged = _steady_state(starts)
    window = cycles[starts[-1 - period]:starts[-1]]
    counts = {(pipe, key): 0 for pipe in (0, 1) for key in ("valid", *STALL_REASONS)}
    for slots in window:
        for pipe, slot in enumerate(slots):
            counts[pipe, "valid" if slot.index is not None else slot.reason] += 1
    per_iteration = {key: value / period for key, value in counts.items()}
    cycles_per_iteration = len(window) / period
    recurrence, chain = _recurrence(found.body)
    bounds = _bounds(found.body, recurrence, chain)
    largest = max(bounds, key=lambda b: b.cycles)
    limited_by = largest.name if cycles_per_iteration <= largest.cycles + 1e-9 else \
        f"in-order issue: {cycles_per_iteration - largest.cycles:g} cycles/iteration of stalls " \
        f"and pairing beyond the largest bound ({largest.name}); see the timeline"
    return LoopAnalysis(
        found, iterations, cycles_per_iteration, converged,
        [b - a for a, b in zip(starts, starts[1:])], period,
        per_iteration[0, "valid"], per_iteration[1, "valid"],
        {r: per_iteration[0, r] for r in STALL_REASONS if per_iteration[0, r]},
        {r: per_iteration[1, r] for r in STALL_REASONS if per_iteration[1, r]},
        bounds, limited_by, chain,
        [(c, *slots) for c, slots in enumerate(window)], list(found.notes))
