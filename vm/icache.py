"""The CPE instruction caches: the reference model (vm/core/icache.c is the C core's, the same
bit for bit; docs/timing.md "Instruction cache").

A CPE about to issue the word at pc fetches its window: the line of pc and that of the word
after it (the follower it may pair with), if that word is in the code. Each line missing from
the CPE's private L1 comes from the core group's shared L2, or through it from memory, one
after the other; the CPE stalls (reason ``icache``) until the last one is in, and only then do
the lines count as present. Both levels replace FIFO, so a hit changes nothing (what lets the
C core's batches and in-step cycles skip the fetch of lines already present).
"""
from __future__ import annotations

from typing import Optional

from .engine_api import CPE_COUNTER_INDEX

_L1_MISSES = CPE_COUNTER_INDEX["icache_l1_misses"]
_L2_MISSES = CPE_COUNTER_INDEX["icache_l2_misses"]


class _Fifo:
    """A set-associative array of lines, FIFO replacement; `ready[line]` is kept for the L2."""

    def __init__(self, size_bytes: int, line_bytes: int, ways: int):
        self.ways = ways
        self.sets = size_bytes // (line_bytes * ways)
        self.tags = [[-1] * ways for _ in range(self.sets)]
        self.next = [0] * self.sets

    def find(self, line: int) -> Optional[int]:
        ways = self.tags[line % self.sets]
        return ways.index(line) if line in ways else None

    def replace(self, line: int) -> tuple[int, int]:
        """Puts `line` in its set's oldest way; returns (the way, the line it held or -1)."""
        index = line % self.sets
        way = self.next[index]
        self.next[index] = (way + 1) % self.ways
        victim, self.tags[index][way] = self.tags[index][way], line
        return way, victim


class _CpeFetch:
    def __init__(self, config):
        self.l1 = _Fifo(config.icache_l1_bytes, config.icache_line_bytes, config.icache_l1_ways)
        self.present: set[int] = set()
        self.until = 0          # the last fill ends at this cycle ...
        self.filling: list[int] = []   # ... and brings these lines


class InstructionCaches:
    """The L1 of each CPE and the core group's L2, for one run (they start empty)."""

    def __init__(self, config, code_words: int):
        self.config = config
        self.shift = config.icache_line_bytes.bit_length() - 1
        self.code_end = config.code_base + 4 * code_words
        self.l2 = _Fifo(config.icache_l2_bytes, config.icache_line_bytes, config.icache_l2_ways)
        self.l2_ready: dict[tuple[int, int], int] = {}   # (set, way) -> cycle its line is in
        self.cpes: dict[int, _CpeFetch] = {}

    def window(self, pc: int) -> range:
        """The lines fetched to issue the word at pc (of the code)."""
        last = pc + 4 if pc + 4 < self.code_end else pc
        return range(pc >> self.shift, (last >> self.shift) + 1)

    def fetch(self, cpe, pc: int, t: int) -> Optional[int]:
        """The cycle until which `cpe` stalls to fetch the window of pc at cycle t, or None if
        every line is present."""
        state = self.cpes.get(cpe.id)
        if state is None:
            state = self.cpes[cpe.id] = _CpeFetch(self.config)
        lines = self.window(pc)
        if all(line in state.present for line in lines):
            return None
        if state.until > t:
            return state.until
        state.present.update(state.filling)
        state.filling = []
        ready = t
        for line in lines:
            if line in state.present:
                continue
            _, victim = state.l1.replace(line)
            state.present.discard(victim)
            state.filling.append(line)
            cpe.counters[_L1_MISSES] += 1
            ready = self._l2_fetch(cpe, line, ready)
        state.until = ready
        return ready if ready > t else None

    def _l2_fetch(self, cpe, line: int, start: int) -> int:
        """The cycle the L2 has `line` for a request from `start` (a line still coming from
        memory is ready when it arrives); a miss replaces the set's oldest line."""
        key_set = line % self.l2.sets
        way = self.l2.find(line)
        if way is not None:
            return max(start + self.config.icache_l2_cycles, self.l2_ready[key_set, way])
        way, _ = self.l2.replace(line)
        ready = self.l2_ready[key_set, way] = start + self.config.icache_memory_cycles
        cpe.counters[_L2_MISSES] += 1
        return ready
