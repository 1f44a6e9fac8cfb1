"""The pure-Python reference engine: ``run(job) -> EngineResult``.

Written for clarity, not speed: it is the oracle the C core is checked against. It follows
``docs/timing.md`` step by step — each cycle: events (DMA engine, register-communication
deliveries, barrier releases), then issue on every CPE in id order, then counters. Cycles in
which no CPE can issue and no event is due are skipped in one step (same counters).

Instruction semantics live in ``semantics.py`` (one function per mnemonic) and the issue rules
in ``issue.py``; this module owns the rest of the timing, memory paths, and everything shared
between CPEs.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..isa.table import CSR_CONSOLE, CSR_CYCLE_COUNTER, CSR_FLOAT_OPS, ZERO_REG
from .engine_api import (BARRIER_PROBLEMS, CG_COUNTER_INDEX, CG_COUNTERS, CPE_COUNTER_INDEX,
                         CPE_COUNTERS, DMA_FIELDS, DMA_MODES, DMA_OPS, DMA_PROBLEMS,
                         STALL_REASONS, STOP_CYCLE_LIMIT, STOP_DEADLOCK, STOP_KINDS, EngineJob,
                         EngineResult, Stop)
from .icache import InstructionCaches
from .issue import IssueState, Op, decode_program, plan_issue
from .semantics import BROADCAST, MASK64, effective_address

STOP_CODES = {name: code for code, (name, _) in STOP_KINDS.items()}
DMA_PROBLEM_INDEX = {name: index for index, (name, _) in enumerate(DMA_PROBLEMS)}
BARRIER_PROBLEM = {name: index for index, (name, _) in enumerate(BARRIER_PROBLEMS)}
PROGRESS_INTERVAL = 4096      # cycles between progress callbacks
NEVER = math.inf
RUNNING = "running"           # state of a CPE that issued in a cycle
FLOAT_OPS = CPE_COUNTER_INDEX["float_ops"]   # the counter rcsr CSR_FLOAT_OPS reads


class Fault(Exception):
    """Raised by a CPE before the faulting instruction has any effect."""

    def __init__(self, kind: str, a: int = 0, b: int = 0):
        super().__init__(kind)
        self.code, self.a, self.b = STOP_CODES[kind], a, b


# ---- register communication -----------------------------------------------------------------
@dataclass
class Transfer:
    due: int
    direction: str          # "row" or "col": which receive queue of the targets
    targets: list
    lanes: list


# ---- the DMA engine -------------------------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    """Where a DMA request's bytes are in LDM (docs/timing.md "DMA descriptor and modes")."""
    ldm_address: int
    targets: tuple = ()     # PE, BCAST, BROW: byte k at ldm_address + k in each of these CPEs
    sharers: tuple = ()     # ROW, RANK: `unit` bytes at a time dealt to these CPEs in turn
    unit: int = 0

    def runs(self, offset: int, nbytes: int) -> list[tuple[tuple, int, int]]:
        """(CPEs, LDM address, bytes) of the request's bytes [offset, offset + nbytes)."""
        if not self.sharers:
            return [(self.targets, self.ldm_address + offset, nbytes)]
        runs, end, n = [], offset + nbytes, len(self.sharers)
        while offset < end:
            unit, within = divmod(offset, self.unit)
            length = min(end - offset, self.unit - within)
            runs.append(((self.sharers[unit % n],),
                         self.ldm_address + unit // n * self.unit + within, length))
            offset += length
        return runs

    def extent(self, size: int) -> int:
        """Bytes from ldm_address that a request of `size` bytes covers in a CPE it reaches."""
        if not self.sharers:
            return size
        last, n = (size - 1) // self.unit, len(self.sharers)
        # the last round of dealing is widest at its first sharer: a full unit unless alone
        return last // n * self.unit + (self.unit if last % n else size - last * self.unit)


@dataclass
class DmaRequest:
    cpe: int
    is_put: bool
    is_barrier: bool        # no data; completes after the CPE's earlier requests
    placement: Placement
    pieces: list            # transactions: (memory address, bytes, offset in the request,
                            # whether it is the first of its block)
    reply: int              # LDM address of the reply word in the issuing CPE
    issue: int
    broadcast: bool = False  # BCAST or BROW
    strided: bool = False    # block and stride set, several blocks: blocks apart in memory
    number: int = 0         # activation order
    started: int = 0        # transactions started


def descriptor_fields(descriptor) -> dict[str, int]:
    """The fields of a 256-bit DMA descriptor (four 64-bit lanes, lane 0 = bits 0-63)."""
    value = sum((int(lane) & MASK64) << (64 * i) for i, lane in enumerate(descriptor))
    return {name: value >> low & ((1 << width) - 1) for name, (low, width) in DMA_FIELDS.items()}


class DmaEngine:
    """The CG's DMA engine (timing.md "DMA")."""

    def __init__(self, engine: "Engine"):
        self.engine = engine
        config = engine.config
        self.latency, self.active_limit = config.dma_latency, config.dma_active_requests
        self.config = config
        self.waiting: deque[DmaRequest] = deque()
        self.active: list[DmaRequest] = []
        self.activations = 0
        self.last_served = -1
        self.in_progress = None  # (request, piece, bytes read by a put, completion cycle)

    def submit(self, request: DmaRequest) -> None:
        self.waiting.append(request)

    def pending(self) -> bool:
        return bool(self.waiting or self.active or self.in_progress)

    def step(self, t: int) -> None:
        if self.in_progress and self.in_progress[3] == t:
            self._complete(t)
        while True:
            while self.waiting and len(self.active) < self.active_limit:
                request = self.waiting.popleft()
                self.engine.cpes[request.cpe].dma_waiting -= 1
                request.number = self.activations
                self.activations += 1
                self.active.append(request)
            if not self._complete_barrier(t):
                break
        if self.in_progress is None:
            self._start_next(t)

    def _startable(self, t: int) -> list[DmaRequest]:
        return [r for r in self.active
                if r.issue + self.latency <= t and r.started < len(r.pieces)]

    def _start_next(self, t: int) -> None:
        ready = self._startable(t)
        if not ready:
            return
        after_last = [r for r in ready if r.number > self.last_served]
        request = min(after_last or ready, key=lambda r: r.number)
        self.last_served = request.number
        piece = request.pieces[request.started]
        request.started += 1
        data = None
        if request.is_put:       # a put reads LDM when its transaction starts
            ldm = self.engine.ldm
            data = b"".join(bytes(ldm[cpes[0]][address:address + nbytes]) for cpes, address, nbytes
                            in request.placement.runs(piece[2], piece[1]))
        self.in_progress = (request, piece, data,
                            t + transaction_cycles(self.config, request, request.started - 1))

    def _complete(self, t: int) -> None:
        request, (address, nbytes, offset, _), data, _ = self.in_progress
        self.in_progress = None
        memory = self.engine.mem
        start = address - self.engine.mem_base
        if request.is_put:
            memory[start:start + nbytes] = data
        else:
            for cpes, ldm_address, length in request.placement.runs(offset, nbytes):
                for target in cpes:
                    self.engine.ldm[target][ldm_address:ldm_address + length] = \
                        memory[start:start + length]
                start += length
        if request.started == len(request.pieces):
            self._finish(request, t)

    def _finish(self, request: DmaRequest, t: int) -> None:
        """Adds 1 to the request's reply word; the request leaves the engine."""
        reply = self.engine.ldm[request.cpe]
        value = int.from_bytes(reply[request.reply:request.reply + 4], "little")
        reply[request.reply:request.reply + 4] = ((value + 1) & 0xFFFFFFFF).to_bytes(4, "little")
        self.active.remove(request)
        self.engine.add_span(request.cpe, "dma", request.issue, t)

    def _complete_barrier(self, t: int) -> bool:
        """Completes the first active BARRIER with no earlier request of its CPE still active
        (they were activated before it); returns whether there was one."""
        for k, request in enumerate(self.active):
            if request.is_barrier and all(r.cpe != request.cpe for r in self.active[:k]):
                self._finish(request, t)
                return True
        return False

    def next_event(self, t: int) -> float:
        """Earliest cycle after ``t`` at which the engine may change something."""
        times = [NEVER]
        if self.in_progress:
            times.append(self.in_progress[3])
        elif self._startable_later():
            times.append(max(t + 1, min(r.issue + self.latency for r in self.active
                                        if r.started < len(r.pieces))))
        if self.waiting and len(self.active) < self.active_limit:
            times.append(t + 1)
        return min(times)

    def drain(self, t: int, limit: Optional[int]) -> Optional[int]:
        """After the last CPE halted in cycle ``t``, completes every request the engine holds,
        as the hardware's does (a put still in flight reaches memory). Returns the cycle after
        its last step, or None if it would step at or after ``limit`` (the cycle limit)."""
        while self.pending():
            t = self.next_event(t)
            if limit is not None and t >= limit:
                return None
            self.step(t)
        return t + 1

    def _startable_later(self) -> bool:
        return any(r.started < len(r.pieces) for r in self.active)


def transaction_cycles(config, request: DmaRequest, k: int) -> int:
    """Engine time of the request's transaction ``k`` (docs/timing.md "DMA").

    A read costs ``dma_transaction_cycles`` (``dma_bcast_transaction_cycles``, if set, in
    BCAST/BROW mode), plus ``dma_get_request_cycles`` if it is the request's first. A write is
    one write command for a whole line, else one per ``dma_put_write_bytes`` piece it touches
    (at most ``dma_put_partial_writes``, if set); with ``dma_put_strided_pro_rata`` a strided
    put's writes cost ``dma_put_write_cycles`` per line pro rata instead, whatever the
    alignment. The first transaction of each block of a strided request adds
    ``dma_block_put_cycles`` (a put), or ``dma_block_get_cycles`` but at least what brings the
    block's reads to ``dma_block_get_min_cycles`` (a get); a put's last transaction waits for
    the acknowledgement."""
    address, nbytes, _, block_first = request.pieces[k]
    block_cost = block_first and request.strided
    if not request.is_put:
        read = config.dma_bcast_transaction_cycles \
            if request.broadcast and config.dma_bcast_transaction_cycles \
            else config.dma_transaction_cycles
        cycles = read + (k == 0) * config.dma_get_request_cycles
        if block_cost:   # the block holds the engine at least dma_block_get_min_cycles
            end = k + 1
            while end < len(request.pieces) and not request.pieces[end][3]:
                end += 1
            cycles += max(config.dma_block_get_cycles,
                          config.dma_block_get_min_cycles - read * (end - k))
        return cycles
    line = config.dma_transaction_bytes
    if request.strided and config.dma_put_strided_pro_rata:
        cycles = -(-config.dma_put_write_cycles * nbytes // line)
    else:
        piece_bytes = config.dma_put_write_bytes
        writes = 1 if nbytes == line else \
            (address + nbytes - 1) // piece_bytes - address // piece_bytes + 1
        if nbytes != line and config.dma_put_partial_writes:
            writes = min(writes, config.dma_put_partial_writes)
        cycles = writes * config.dma_put_write_cycles
    last = k == len(request.pieces) - 1
    return cycles + block_cost * config.dma_block_put_cycles + last * config.dma_put_ack_cycles


def is_strided(size: int, block: int, stride: int, merge_unstrided: bool) -> bool:
    """Whether a transfer is cut into several blocks: a block size below the size, and a
    stride unless ``merge_unstrided`` (then blocks without a stride are one block)."""
    return bool(block and size > block and (stride or not merge_unstrided))


def dma_pieces(memory_address: int, size: int, block: int, stride: int,
               transaction_bytes: int, merge_unstrided: bool = False
               ) -> list[tuple[int, int, int, bool]]:
    """Cut a transfer into transactions at aligned transaction boundaries: (memory address,
    bytes, offset in the request, first of its block), the blocks as ``is_strided`` says."""
    pieces = []
    block = block if is_strided(size, block, stride, merge_unstrided) else size
    address, remaining, offset = memory_address, size, 0
    while remaining:
        length = min(block, remaining)
        start, end = address, address + length
        while start < end:
            cut = min(end, (start // transaction_bytes + 1) * transaction_bytes)
            pieces.append((start, cut - start, offset, start == address))
            offset += cut - start
            start = cut
        remaining -= length
        address += length + stride
    return pieces


def dma_memory_end(memory_address: int, size: int, block: int, stride: int) -> int:
    """One past the last main-memory byte a transfer touches."""
    if not block:
        return memory_address + size
    blocks = -(-size // block)
    return memory_address + (blocks - 1) * (block + stride) + size - (blocks - 1) * block


# ---- one CPE (the ``cpu`` of semantics.py) --------------------------------------------------
class Cpe(IssueState):
    def __init__(self, engine: "Engine", cpe_id: int, pc: int, regs: np.ndarray):
        super().__init__(len(regs))
        self.engine = engine
        self.id = cpe_id
        self.row, self.col = divmod(cpe_id, engine.config.mesh_cols)
        self.regs = [[int(x) for x in reg] for reg in regs]
        self.regs[ZERO_REG] = [0] * len(regs[ZERO_REG])   # reads as zero whatever the job holds
        self.pc = pc
        self.halted = False
        self.halt_cycle = -1
        self.global_free_at = 0              # next global access may issue
        self.queues = {"row": deque(), "col": deque()}
        self.sends: deque[Transfer] = deque()
        self.dma_waiting = 0                 # requests in the engine's waiting FIFO
        self.barrier_wait = False
        self.counters = [0] * len(CPE_COUNTERS)
        self.state = RUNNING                 # "running" or the stall reason of the last cycle
        self.span_start = 0
        # Scratch of the instruction being executed.
        self.cycle = 0
        self.next_pc = pc
        self.result_ready: Optional[int] = None

    # registers
    def scalar(self, n: int) -> int:
        return self.regs[n][0]

    def vector(self, n: int) -> list:
        return self.regs[n]

    def set_scalar(self, n: int, value: int) -> None:
        if n != ZERO_REG:
            self.regs[n] = [value & MASK64] + self.regs[n][1:]

    def set_vector(self, n: int, lanes) -> None:
        if n != ZERO_REG:
            self.regs[n] = [lane & MASK64 for lane in lanes]

    # memory
    def _check_aligned(self, address: int, size: int) -> None:
        if address % size:
            raise Fault("misaligned", address, size)

    def _in_ldm(self, address: int, size: int) -> bool:
        return address + size <= self.engine.config.ldm_bytes

    def load(self, address: int, size: int) -> bytes:
        self._check_aligned(address, size)
        if self._in_ldm(address, size):
            return bytes(self.engine.ldm[self.id][address:address + size])
        offset = self.engine.memory_offset(address, size)
        self.engine.global_access(self, is_load=True)
        return bytes(self.engine.mem[offset:offset + size])

    def load_local(self, address: int, size: int) -> bytes:
        """LDM-only load of load-and-broadcast."""
        self._check_aligned(address, size)
        if self.engine.in_main_memory(address):
            raise Fault("bcast_memory", address)
        if not self._in_ldm(address, size):
            raise Fault("access", address)
        return bytes(self.engine.ldm[self.id][address:address + size])

    def store(self, address: int, data: bytes) -> None:
        size = len(data)
        self._check_aligned(address, size)
        if self._in_ldm(address, size):
            self.engine.ldm[self.id][address:address + size] = data
            return
        offset = self.engine.memory_offset(address, size)
        self.engine.global_access(self, is_load=False)
        self.engine.mem[offset:offset + size] = data

    def control_register(self, n: int) -> int:
        """rcsr: the cycle counter, the floating-point operations and the console service
        (0, ready once the host has served the call) are modelled."""
        if n == CSR_FLOAT_OPS:
            return self.counters[FLOAT_OPS]
        if n == CSR_CONSOLE:
            self.result_ready = self.cycle + self.engine.config.console_call_cycles
            return 0
        if n != CSR_CYCLE_COUNTER:
            raise Fault("csr", n)
        return self.cycle

    # control
    def jump(self, target: int) -> None:
        if target == self.engine.exit_address:
            self.halt()
        self.next_pc = target

    def halt(self) -> None:
        self.halted = True
        self.halt_cycle = self.cycle

    # communication, barriers, DMA: shared state lives in the engine
    def send(self, direction: str, n: int, lanes: list) -> None:
        self.engine.send(self, direction, n, lanes)

    def receive(self, direction: str) -> list:
        return self.queues[direction].popleft()

    def barrier(self, direction: str, mask: int) -> None:
        self.engine.arrive(self, direction, mask)

    def dma(self, descriptor: list, memory_address: int, ldm_address: int) -> None:
        self.engine.request_dma(self, descriptor, memory_address, ldm_address)

    def blocked_sends(self, t: int) -> int:
        """Transfers due but not delivered (they occupy the send buffer)."""
        count = 0
        for transfer in self.sends:
            if transfer.due > t:
                break
            count += 1
        return count


# ---- the engine -----------------------------------------------------------------------------
class Engine:
    def __init__(self, job: EngineJob, progress: Optional[Callable[[int], None]] = None):
        config = self.config = job.config
        self.job = job
        self.progress = progress
        self.code_base = config.code_base
        self.exit_address = config.code_base - 4
        self.mem_base = config.mem_base
        self.mem = memoryview(job.mem)
        self.mem_end = config.mem_base + len(job.mem)
        self.ldm = [memoryview(job.ldm[i]) for i in range(config.num_cpes)]
        self.ops = decode_program(job.code, config.code_base, config)
        self.spawned = [bool(s) for s in job.spawned]
        self.cpes = {i: Cpe(self, i, job.entry_pc, job.regs[i])
                     for i in range(config.num_cpes) if self.spawned[i]}
        self.order = sorted(self.cpes.values(), key=lambda c: c.id)
        self.dma = DmaEngine(self)
        self.barriers: dict[tuple, set] = {}
        self.cg_counters = [0] * len(CG_COUNTERS)
        self.interface_free = 0              # the CG memory interface (global accesses)
        self.spans: Optional[list] = [] if job.trace else None
        self.releases: list[tuple[int, list]] = []   # scheduled barrier releases
        self.icache = InstructionCaches(config, len(job.code)) if config.icache else None
        self._counter_index()

    def _counter_index(self) -> None:
        index = CPE_COUNTER_INDEX
        self.valid_index = (index["p0_valid"], index["p1_valid"])
        self.idle_index = {reason: (index[f"p0_idle_{reason}"], index[f"p1_idle_{reason}"])
                           for reason in STALL_REASONS}

    def count(self, name: str, amount: int = 1) -> None:
        self.cg_counters[CG_COUNTER_INDEX[name]] += amount

    # -- memory --------------------------------------------------------------------------------
    def in_main_memory(self, address: int) -> bool:
        return self.mem_base <= address < self.mem_end

    def memory_offset(self, address: int, size: int) -> int:
        if not (self.mem_base <= address and address + size <= self.mem_end):
            raise Fault("access", address)
        return address - self.mem_base

    def global_access(self, cpe: Cpe, is_load: bool) -> None:
        config = self.config
        start = max(cpe.cycle, self.interface_free)
        self.interface_free = start + config.gld_occupancy
        if is_load:
            cpe.global_free_at = cpe.result_ready = start + config.gld_latency
            self.count("gld_count")
        else:
            cpe.global_free_at = start + config.gst_latency
            self.count("gst_count")

    # -- register communication ----------------------------------------------------------------
    def line_of(self, cpe: Cpe, direction: str) -> list[int]:
        """CPE ids of cpe's row (direction "row") or column, by position 0..7."""
        cols = self.config.mesh_cols
        if direction == "row":
            return [cpe.row * cols + c for c in range(cols)]
        return [r * cols + cpe.col for r in range(self.config.mesh_rows)]

    def send(self, cpe: Cpe, direction: str, n: int, lanes: list) -> None:
        line = self.line_of(cpe, direction)
        if n > BROADCAST or (n < BROADCAST and n >= len(line)):
            raise Fault("put_outside", n, len(line))
        if n == BROADCAST:
            targets = [i for i in line if i != cpe.id]
        elif line[n] == cpe.id:
            raise Fault("put_self", n)
        else:
            targets = [line[n]]
        for target in targets:
            if not self.spawned[target]:
                raise Fault("put_unspawned", target)
        cpe.sends.append(Transfer(cpe.cycle + self.config.rc_latency, direction, targets, lanes))
        self.count("rc_transfers")

    def deliver(self, t: int) -> None:
        depth = self.config.rc_queue_depth
        for cpe in self.order:
            if cpe.sends and cpe.sends[0].due <= t and self._has_room(cpe.sends[0], depth):
                transfer = cpe.sends.popleft()
                for target in transfer.targets:
                    self.cpes[target].queues[transfer.direction].append(transfer.lanes)
                self.count("rc_deliveries", len(transfer.targets))

    def _has_room(self, transfer: Transfer, depth: int) -> bool:
        return all(len(self.cpes[target].queues[transfer.direction]) < depth
                   for target in transfer.targets)

    # -- barriers ------------------------------------------------------------------------------
    def arrive(self, cpe: Cpe, direction: str, mask: int) -> None:
        line = self.line_of(cpe, direction)
        position = cpe.col if direction == "row" else cpe.row
        if not mask >> position & 1:
            raise Fault("barrier", mask, BARRIER_PROBLEM["not_in_mask"])
        if mask >> len(line):
            raise Fault("barrier", mask, BARRIER_PROBLEM["outside_mesh"])
        participants = [line[i] for i in range(len(line)) if mask >> i & 1]
        if not all(self.spawned[p] for p in participants):
            raise Fault("barrier", mask, BARRIER_PROBLEM["participant_unspawned"])
        key = (direction, line[0], mask)
        arrived = self.barriers.setdefault(key, set())
        arrived.add(cpe.id)
        cpe.barrier_wait = True
        if len(arrived) == len(participants):
            del self.barriers[key]
            self.releases.append((cpe.cycle + self.config.barrier_cycles, participants))

    def release_barriers(self, t: int) -> None:
        for release in [r for r in self.releases if r[0] == t]:
            self.releases.remove(release)
            for p in release[1]:
                self.cpes[p].barrier_wait = False
            self.count("barriers")

    # -- DMA -----------------------------------------------------------------------------------
    def request_dma(self, cpe: Cpe, descriptor: list, memory_address: int,
                    ldm_address: int) -> None:
        config = self.config
        fields = descriptor_fields(descriptor)
        problem, placement = self.check_dma(cpe, fields, memory_address, ldm_address)
        if problem is not None:
            raise Fault("dma", 0, DMA_PROBLEM_INDEX[problem])
        op, size = fields["op"], fields["size"]
        is_barrier = op == DMA_OPS["barrier"]
        if is_barrier:
            size, pieces = 0, []
        else:
            pieces = dma_pieces(memory_address, size, fields["block"], fields["stride"],
                                config.dma_transaction_bytes, config.dma_merge_unstrided_blocks)
        request = DmaRequest(cpe.id, op in (DMA_OPS["put"], DMA_OPS["put_p"]), is_barrier,
                             placement, pieces, fields["reply"], cpe.cycle,
                             broadcast=fields["mode"] in (DMA_MODES["bcast"], DMA_MODES["brow"]),
                             strided=is_strided(size, fields["block"], fields["stride"],
                                                config.dma_merge_unstrided_blocks))
        self.dma.submit(request)
        cpe.dma_waiting += 1
        self.count("dma_requests")
        self.count("dma_bytes_requested", size)
        self.count("dma_transactions", len(pieces))
        self.count("dma_bytes_moved", len(pieces) * config.dma_transaction_bytes)

    def check_dma(self, cpe: Cpe, fields: dict, memory_address: int,
                  ldm_address: int) -> tuple[Optional[str], Optional[Placement]]:
        """(name of the request's problem or None, its placement) (MACHINE.md section 6)."""
        op, mode, size, block = fields["op"], fields["mode"], fields["size"], fields["block"]
        reply = fields["reply"]
        bad_reply = reply % 4 or reply + 4 > self.config.ldm_bytes
        if op not in DMA_OPS.values():
            return "bad_op", None
        if op == DMA_OPS["barrier"]:           # reads only the reply field
            return ("bad_reply" if bad_reply else None), Placement(ldm_address)
        if mode not in DMA_MODES.values():
            return "bad_mode", None
        broadcast = mode in (DMA_MODES["bcast"], DMA_MODES["brow"])
        if op in (DMA_OPS["put"], DMA_OPS["put_p"]) and broadcast:
            return "put_broadcast", None
        if size == 0:
            return "size_zero", None
        placement = self.dma_placement(cpe, mode, fields["mask"], size, block, ldm_address)
        if isinstance(placement, str):
            return placement, None
        if ldm_address + placement.extent(size) > self.config.ldm_bytes:
            return "ldm_range", None
        if (memory_address < self.mem_base
                or dma_memory_end(memory_address, size, block, fields["stride"]) > self.mem_end):
            return "mem_range", None
        return ("bad_reply" if bad_reply else None), placement

    def dma_placement(self, cpe: Cpe, mode: int, mask: int, size: int, block: int,
                      ldm_address: int):
        """The Placement of a request in `mode`, or the name of its problem."""
        rows, cols = self.config.mesh_rows, self.config.mesh_cols
        if mode == DMA_MODES["pe"]:
            return Placement(ldm_address, targets=(cpe.id,))
        if mode in (DMA_MODES["bcast"], DMA_MODES["brow"]):
            if mode == DMA_MODES["bcast"]:      # mask bit i: row i
                targets = [i * cols + j for i in range(rows) if mask >> i & 1 for j in range(cols)]
            else:                               # mask bit j: column j of the issuer's row
                targets = [cpe.row * cols + j for j in range(cols) if mask >> j & 1]
            return Placement(ldm_address, targets=tuple(targets)) if targets else "empty_mask"
        sharers = tuple(self.line_of(cpe, "row" if mode == DMA_MODES["row"] else "col"))
        if not block and size % len(sharers):
            return "uneven_split"
        return Placement(ldm_address, sharers=sharers, unit=block or size // len(sharers))

    # -- issue ---------------------------------------------------------------------------------
    def fetch(self, cpe: Cpe) -> Op:
        index = (cpe.pc - self.code_base) >> 2
        if not (self.code_base <= cpe.pc and index < len(self.ops)) or cpe.pc & 3:
            raise Fault("pc", cpe.pc)
        op = self.ops[index]
        if op is None:
            raise Fault("undecodable", int(self.job.code[index]))
        return op

    def follower(self, op: Op) -> Optional[Op]:
        index = (op.pc + 4 - self.code_base) >> 2
        return self.ops[index] if index < len(self.ops) else None

    def stall_reason(self, cpe: Cpe, op: Op, t: int) -> Optional[str]:
        """The first readiness check ``op`` fails at cycle t (timing.md), or None if ready."""
        reason = cpe.register_stall(op, t)
        if reason:
            return reason
        cls = op.cls
        if cls == "get":
            return None if cpe.queues[_QUEUE_OF[op.name]] else "get_empty"
        if cls in ("put", "bcast_load"):
            return "put_full" if cpe.blocked_sends(t) >= self.config.rc_send_depth else None
        if cls == "dma":
            return "dma_full" if cpe.dma_waiting >= self.config.dma_channel_depth else None
        if cls in ("load", "store") and cpe.global_free_at > t and \
                self.in_main_memory(effective_address(cpe, op)):
            return "global"
        return None

    def execute(self, cpe: Cpe, op: Op, t: int) -> None:
        cpe.cycle, cpe.next_pc, cpe.result_ready = t, op.pc + 4, None
        try:
            op.execute(cpe, op)
        except Fault:
            cpe.pc = op.pc
            raise
        cpe.counters[FLOAT_OPS] += op.flops
        cpe.record_issue(op, t, cpe.result_ready)
        cpe.pc = cpe.next_pc

    def issue(self, cpe: Cpe, t: int) -> tuple[str, int, int]:
        """Apply the issue rules to one CPE at cycle t. Returns what to charge for the cycle:
        (state, P0 counter index, P1 counter index); state is RUNNING if it issued."""
        if cpe.barrier_wait:
            return ("barrier", *self.idle_index["barrier"])
        leader = self.fetch(cpe)
        if self.icache is not None and self.icache.fetch(cpe, leader.pc, t) is not None:
            return ("icache", *self.idle_index["icache"])
        group = plan_issue(leader, self.follower(leader),
                           lambda op: self.stall_reason(cpe, op, t))
        if group.stall:
            return (group.stall, *self.idle_index[group.stall])
        self.execute(cpe, leader, t)
        if group.follower:
            self.execute(cpe, group.follower, t)
        leader_pipe, other = group.leader_pipe, 1 - group.leader_pipe
        charge = [0, 0]
        charge[leader_pipe] = self.valid_index[leader_pipe]
        charge[other] = self.valid_index[other] if group.follower else \
            self.idle_index[group.idle_reason][other]
        return (RUNNING, *charge)

    # -- counters and trace --------------------------------------------------------------------
    def charge(self, cpe: Cpe, state: str, p0_index: int, p1_index: int, cycles: int,
               t: int) -> None:
        cpe.counters[p0_index] += cycles
        cpe.counters[p1_index] += cycles
        self.set_state(cpe, state, t)

    def set_state(self, cpe: Cpe, state: str, t: int) -> None:
        if state != cpe.state:
            self.close_span(cpe, t)
            cpe.state, cpe.span_start = state, t

    def close_span(self, cpe: Cpe, t: int) -> None:
        self.add_span(cpe.id, "issue" if cpe.state == RUNNING else f"stall:{cpe.state}",
                      cpe.span_start, t)

    def add_span(self, cpe: int, kind: str, start: int, end: int) -> None:
        """Record a trace span if tracing; a span without cycles (end <= start) is none."""
        if self.spans is not None and end > start:
            self.spans.append((cpe, kind, start, end))

    # -- the cycle loop ------------------------------------------------------------------------
    def run(self) -> EngineResult:
        t = 0
        max_cycles = self.job.max_cycles
        next_progress = PROGRESS_INTERVAL
        while True:
            if max_cycles is not None and t >= max_cycles:
                stop = Stop(STOP_CYCLE_LIMIT, -1, 0, t, a=max_cycles, blocked=self.blocked())
                return self.result(t, stop)
            self.dma.step(t)
            self.deliver(t)
            self.release_barriers(t)
            running = [c for c in self.order if not c.halted]
            charges = []
            try:
                for cpe in running:
                    charges.append(self.issue(cpe, t))
            except Fault as fault:   # the faulting cycle is not charged
                return self.result(t, Stop(fault.code, cpe.id, cpe.pc, t, fault.a, fault.b))
            for cpe, charge in zip(running, charges):
                self.charge(cpe, *charge, 1, t)
            if all(c.halted for c in self.order):
                end = self.dma.drain(t, max_cycles)
                if end is None:
                    return self.result(max_cycles, Stop(STOP_CYCLE_LIMIT, -1, 0, max_cycles,
                                                        a=max_cycles, blocked=[]))
                return self.result(end, None)
            if all(state != RUNNING for state, _, _ in charges):
                skip_to = self.next_event(t)
                if skip_to == NEVER:
                    return self.result(t + 1, Stop(STOP_DEADLOCK, -1, 0, t,
                                                   blocked=self.blocked()))
                if max_cycles is not None:
                    skip_to = min(skip_to, max_cycles)
                for cpe, charge in zip(running, charges):
                    self.charge(cpe, *charge, skip_to - t - 1, t + 1)
                t = skip_to - 1
            t += 1
            if self.progress is not None and t >= next_progress:
                self.progress(t)
                next_progress = t + PROGRESS_INTERVAL

    def next_event(self, t: int) -> float:
        """Earliest cycle after t at which something can change, NEVER if nothing can
        (timing.md "Deadlock" lists what counts)."""
        times = [self.dma.next_event(t)]
        depth = self.config.rc_queue_depth
        for cpe in self.order:
            for transfer in cpe.sends:
                if transfer.due > t:
                    times.append(transfer.due)
                    break
            if cpe.sends and cpe.sends[0].due <= t and self._has_room(cpe.sends[0], depth):
                times.append(t + 1)
            if not cpe.halted and not cpe.barrier_wait:
                times.append(self.stall_end(cpe))
        times.extend(release for release, _ in self.releases)
        return min(times)

    def stall_end(self, cpe: Cpe) -> float:
        """When the current stall of a CPE ends, if that time is known."""
        op = self.ops[(cpe.pc - self.code_base) >> 2]
        return {
            "raw": lambda: max(cpe.ready[r] for r in op.sources),
            "waw": lambda: cpe.ready[op.dest],
            "divide": lambda: cpe.p0_busy_until,
            "global": lambda: cpe.global_free_at,
            "icache": lambda: self.icache.cpes[cpe.id].until,
        }.get(cpe.state, lambda: NEVER)()

    def blocked(self) -> list:
        return [(c.id, c.pc, c.state) for c in self.order if not c.halted]

    def result(self, kernel_cycles: int, stop: Optional[Stop]) -> EngineResult:
        num_cpes = self.config.num_cpes
        counters = np.zeros((num_cpes, len(CPE_COUNTERS)), dtype=np.uint64)
        pcs = np.zeros(num_cpes, dtype=np.uint64)
        finished = self.idle_index["finished"]
        active_index = CPE_COUNTER_INDEX["active_cycles"]
        for cpe in self.order:
            active = min(cpe.halt_cycle + 1, kernel_cycles) if cpe.halted else kernel_cycles
            cpe.counters[active_index] = active
            cpe.counters[finished[0]] += kernel_cycles - active
            cpe.counters[finished[1]] += kernel_cycles - active
            counters[cpe.id] = cpe.counters
            pcs[cpe.id] = cpe.pc & MASK64
            self.job.regs[cpe.id, :ZERO_REG] = np.array(cpe.regs[:ZERO_REG], dtype=np.uint64)
            self.close_span(cpe, active)
        spans = None
        if self.spans is not None:
            for request in [*self.dma.waiting, *self.dma.active]:   # never completed
                self.add_span(request.cpe, "dma", request.issue, kernel_cycles)
            spans = sorted(self.spans, key=lambda s: (s[0], s[2], s[1]))
        return EngineResult(kernel_cycles, counters, np.array(self.cg_counters, dtype=np.uint64),
                            pcs, stop, spans)


_QUEUE_OF = {"getr": "row", "getc": "col"}


def run(job: EngineJob, progress: Optional[Callable[[int], None]] = None) -> EngineResult:
    """Run ``job`` to the end (all spawned CPEs halted) or to a stop; arrays updated in place.

    ``progress``, if given, is called with the current cycle every few thousand cycles.
    """
    return Engine(job, progress).run()
