"""Random core-group programs for differential testing of the two engines (``swsim fuzz``,
tests/test_vm_differential.py). Needs Hypothesis, which only ``swsim fuzz`` and the tests use.

A generated case is assembly text, a configuration and the initial state: every spawned CPE (any
set of ids of a mesh of any valid shape) runs its own random block (dispatched on rcid), or in
one case in three all run the same block with their own data (SPMD), made of *phases*.
Straight-line code and loops draw any instruction of the ISA table with random legal operands;
calls go to shared functions (bsr/ret/jmp) and branches jump around code; the communication,
DMA, barrier and race phases are planned across CPEs: register communication may fill receive
queues past their depth (back-pressure) and get before it puts; DMA uses PE, BCAST and ROW
modes, odd, unaligned and large sizes, more requests than a channel holds, and is sometimes left
un-waited; barriers run on sub-masks, several per row or column at once; CPEs race on a shared
main-memory region. Most programs finish; some deadlock, and fault cases plant one fault of
every kind the engines report. ``programs(configs=True)`` also draws a random valid
configuration (mesh, latencies, queue and channel depths, DMA timing).

Register plan: $0-$21 random data, $22 = the shared main-memory region, $23-$27 loop counters,
link registers and scratch, $28 = LDM data base, $29 = this CPE's main-memory region,
$30 = sp, $31 = zero.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from hypothesis import strategies as st

from .. import isa
from ..asm import assemble
from .config import VMConfig
from .engine_api import DMA_FIELDS, DMA_MODES, DMA_OPS, EngineJob


def dma_descriptor(op, size, reply, mode="pe", block=0, stride=0, mask=0):
    """A DMA descriptor (MACHINE.md section 6) from the engines' field table, as its eight
    32-bit words, lowest first; op and mode by name ("get", "bcast", ...)."""
    values = dict(op=DMA_OPS[op], mode=DMA_MODES[mode], size=size, reply=reply, block=block,
                  stride=stride, mask=mask)
    value = 0
    for name, (low, width) in DMA_FIELDS.items():
        assert 0 <= values[name] < 1 << width, (name, values[name])
        value |= values[name] << low
    return [value >> (32 * k) & 0xFFFFFFFF for k in range(8)]


def dma_descriptor_asm(reg, temp, *args, **fields):
    """Assembly that builds dma_descriptor(*args, **fields) in register `reg` (words 0-3, the
    rest zero) with `temp` as scratch: ldih/ldi and vinsw per word."""
    lines, source = [], "$31"
    for k, word in enumerate(dma_descriptor(*args, **fields)[:4]):
        low = (word & 0xFFFF) - ((word & 0x8000) << 1)       # ldi's sign-extended half
        high = ((word - low) >> 16) & 0xFFFF
        high -= (high & 0x8000) << 1
        lines += [f"ldih {temp}, {high}($31)", f"ldi {temp}, {low}({temp})",
                  f"vinsw {temp}, {source}, {k}, {reg}"]
        source = reg
    return "\n".join(lines)


DATA_REGS = list(range(22))
SHARED_REG = 22            # the main-memory region every CPE may race on
LDM_DATA = 0x1000          # random LDM data area [LDM_DATA, LDM_DATA + LDM_DATA_BYTES)
LDM_DATA_BYTES = 1024
LDM_DMA = 0x2000           # DMA target area in LDM
LDM_DMA_BYTES = 0x1000
REPLY = 0x3000             # DMA reply words, one per DMA phase
MAX_DMA_PHASES = 8
MEM_REGION = 4096          # bytes of main memory per CPE

# Instructions the straight-line generator may draw (the rest need planned phases or would
# leave the program: communication, barriers, DMA, halt, jumps, branches).
_PHASED = {"put", "get", "bcast_load", "sync", "dma", "branch", "jump"}
STRAIGHT = [i for i in isa.INSTRUCTIONS if i.cls not in _PHASED and i.name != "halt"]


@dataclass
class Case:
    text: str
    cpes: int                   # number of spawned CPEs
    seed: int                   # of the initial state
    expect_fault: bool = False
    notes: list = field(default_factory=list)
    spawn: Optional[tuple] = None   # spawned CPE ids (None: 0..cpes-1)
    overrides: dict = field(default_factory=dict)   # configuration parameters

    @property
    def spawned_ids(self) -> tuple:
        return tuple(range(self.cpes)) if self.spawn is None else self.spawn

    def config(self):
        return VMConfig.preset(**self.overrides)

    def job(self, max_cycles: int = 200_000, trace: bool = False):
        """The engine job of this case (program assembled, initial state filled)."""
        config = self.config()
        program = assemble(self.text, filename="generated.s")
        regs, ldm, mem = initial_state(self, config, len(program.code))
        spawned = np.zeros(config.num_cpes, bool)
        spawned[list(self.spawned_ids)] = True
        return EngineJob(config=config, code=program.code, spawned=spawned,
                         entry_pc=program.address_of("entry"), regs=regs, ldm=ldm, mem=mem,
                         max_cycles=max_cycles, trace=trace)


def _reg(draw, pool=DATA_REGS):
    return f"${draw(st.sampled_from(pool))}"


def _operand(draw, instr, op, global_ok):
    if op in ("ra", "rb", "r3"):
        return _reg(draw, DATA_REGS + [31])
    if op == "rc":
        return _reg(draw)
    if op in ("rb|lit", "r3|sel"):
        return str(draw(st.integers(0, 255))) if draw(st.booleans()) else _reg(draw)
    if op == "lane":
        return str(draw(st.integers(0, 7)))
    if op == "truth":
        return str(draw(st.integers(0, 255)))
    if op == "csr":   # a modelled one; the others fault (the fault cases plant one)
        return str(draw(st.sampled_from(isa.table.CSRS)))
    if op == "disp(rb)":
        if instr.cls == "alu":  # ldi / ldih: any displacement, any base
            return f"{draw(st.integers(-32768, 32767))}({_reg(draw, DATA_REGS + [31])})"
        size = max(instr.size, 1)
        if global_ok and draw(st.integers(0, 9)) == 0:
            return f"{size * draw(st.integers(0, 64 // size))}($29)"
        return f"{size * draw(st.integers(0, LDM_DATA_BYTES // size - 1))}($28)"
    raise AssertionError(op)


def straight_instruction(draw, global_ok=True, only=None) -> str:
    instr = only or draw(st.sampled_from(STRAIGHT))
    ops = [_operand(draw, instr, op, global_ok) for op in instr.operands]
    return f"\t{instr.name}\t{', '.join(ops)}" if ops else f"\t{instr.name}"


def straight(draw, n_max=12) -> list[str]:
    lines = [straight_instruction(draw) for _ in range(draw(st.integers(1, n_max)))]
    if draw(st.booleans()):  # a forward conditional skip over part of it
        at = draw(st.integers(0, len(lines)))
        op = draw(st.sampled_from([i.name for i in isa.INSTRUCTIONS if i.cls == "branch"
                                   and i.name not in ("br", "bsr")]))
        lines[at:at] = [f"\t{op}\t{_reg(draw)}, 9f"]
        lines.append("9:")
    return lines


def loop(draw) -> list[str]:
    body = [straight_instruction(draw, global_ok=False)
            for _ in range(draw(st.integers(1, 8)))]
    return [f"\tldi\t$27, {draw(st.integers(1, 6))}", "8:", *body,
            "\tsubl\t$27, 1, $27", "\tbgt\t$27, 8b"]


@dataclass
class Mesh:
    """The shape of the case's mesh and its spawned CPEs."""
    rows: int
    cols: int
    spawned: list

    def line(self, cpe: int, along_row: bool) -> list[int]:
        """Every CPE id of cpe's row (along_row) or column, by position."""
        row, col = divmod(cpe, self.cols)
        return [row * self.cols + k for k in range(self.cols)] if along_row else \
            [k * self.cols + col for k in range(self.rows)]

    def position(self, cpe: int, along_row: bool) -> int:
        return cpe % self.cols if along_row else cpe // self.cols

    @property
    def all(self) -> list[int]:
        return list(range(self.rows * self.cols))


def comm_phase(draw, mesh: Mesh, depth: int) -> dict[int, list[str]]:
    """Row/column transfers among spawned CPEs. Usually no queue receives more than its depth;
    sometimes up to 3 more (the senders then wait for room), and a CPE may get before it
    puts (such programs may deadlock, which both engines must report alike)."""
    spawned = set(mesh.spawned)
    code = {c: [] for c in mesh.spawned}
    gets = {c: {"getr": 0, "getc": 0} for c in mesh.spawned}
    limit = depth + (draw(st.integers(1, 3)) if draw(st.integers(0, 3)) == 0 else 0)
    for _ in range(draw(st.integers(1, 8))):
        src = draw(st.sampled_from(mesh.spawned))
        along_row = draw(st.booleans())
        line = mesh.line(src, along_row)
        mates = [t for t in line if t != src and t in spawned]
        if not mates:
            continue
        kind = "getr" if along_row else "getc"
        if len(mates) == len(line) - 1 and draw(st.booleans()):
            targets, n = mates, 8
        else:
            target = draw(st.sampled_from(mates))
            targets, n = [target], line.index(target)
        if any(gets[t][kind] >= limit for t in targets):
            continue
        for t in targets:
            gets[t][kind] += 1
        if n == 8 and draw(st.integers(0, 3)) == 0:   # load-and-broadcast
            op = draw(st.sampled_from(["vldr", "ldder"] if along_row else ["vldc", "lddec"]))
            size = 32 if op.startswith("v") else 8
            disp = size * draw(st.integers(0, LDM_DATA_BYTES // size - 1))
            code[src].append(f"\t{op}\t{_reg(draw)}, {disp}($28)")
        elif draw(st.booleans()):   # the target in a register
            code[src] += [f"\tldi\t$26, {n}",
                          f"\t{'putr' if along_row else 'putc'}\t{_reg(draw)}, $26"]
        else:
            code[src].append(f"\t{'putr' if along_row else 'putc'}\t{_reg(draw)}, {n}")
        if draw(st.booleans()):
            code[src].append(straight_instruction(draw))
    for c in mesh.spawned:
        receive = []
        for kind, count in gets[c].items():
            for _ in range(count):
                receive.append(f"\t{kind}\t{_reg(draw)}")
                if draw(st.integers(0, 2)) == 0:
                    receive.append(straight_instruction(draw))
        at = 0 if draw(st.integers(0, 4)) == 0 else len(code[c])   # gets first, or last
        code[c][at:at] = receive
    return code


def dma_phase(draw, mesh: Mesh, reply: int, channel_depth: int) -> dict[int, list[str]]:
    """Each CPE issues gets and puts on its own memory region (up to twice what its channel
    holds; one in five in another mode than PE — BCAST, BROW, ROW, RANK — when the CPEs it
    reaches are spawned); odd, unaligned and large sizes; then it usually waits for every
    reply, sometimes not at all."""
    code = {}
    spawned = set(mesh.spawned)
    for c in mesh.spawned:
        n = draw(st.integers(1, 2 * channel_depth))
        lines = [f"\tstw\t$31, {reply}($31)"]
        for _ in range(n):
            put = draw(st.booleans())
            modes = ["pe", "row", "rank"] if put else ["pe", "bcast", "row", "brow", "rank"]
            mode = draw(st.sampled_from(modes)) if draw(st.integers(0, 4)) == 0 else "pe"
            reached = {"pe": [c], "bcast": mesh.all, "brow": mesh.line(c, True),
                       "row": mesh.line(c, True), "rank": mesh.line(c, False)}[mode]
            if not set(reached) <= spawned:
                mode = "pe"
            ldm_off = draw(st.sampled_from([8 * draw(st.integers(0, 64)),
                                            draw(st.integers(0, 512))]))
            mem_off = draw(st.sampled_from([8 * draw(st.integers(0, 64)),
                                            draw(st.integers(0, 512))]))
            size = draw(st.sampled_from([8 * draw(st.integers(1, 24)), draw(st.integers(1, 200)),
                                         draw(st.integers(1, LDM_DMA_BYTES - ldm_off))]))
            size = min(size, LDM_DMA_BYTES - ldm_off)
            block = draw(st.sampled_from([0, 0, 16, 32, 100, draw(st.integers(1, 64))]))
            stride = draw(st.sampled_from([0, 8, 64, draw(st.integers(0, 40))])) if block else 0
            if block and _footprint(size, block, stride) > MEM_REGION - mem_off:
                block = stride = 0
            size = min(size, MEM_REGION - mem_off)
            if mode in ("row", "rank") and not block:   # contiguous: an even share each
                sharers = len(mesh.line(c, mode == "row"))
                size = max(sharers, size - size % sharers)
            descriptor = dma_descriptor_asm("$25", "$24", "put" if put else "get", size, reply,
                                            mode=mode, block=block, stride=stride,
                                            mask=draw(st.integers(1, 255)))
            lines += [*("\t" + line for line in descriptor.split("\n")),
                      f"\tldi\t$26, {mem_off}($29)", f"\tldi\t$24, {LDM_DMA + ldm_off}",
                      "\tdma\t$25, $26, $24"]
            if draw(st.booleans()):
                lines.append(straight_instruction(draw, global_ok=False))
        if draw(st.integers(0, 5)):   # wait for every reply (else leave them in flight)
            lines += ["7:", f"\tldw\t$24, {reply}($31)", f"\tsubl\t$24, {n}, $24",
                      "\tblt\t$24, 7b"]
        code[c] = lines
    return code


def _footprint(size: int, block: int, stride: int) -> int:
    blocks = -(-size // block)
    return size + (blocks - 1) * stride


def barrier_phase(draw, mesh: Mesh) -> dict[int, list[str]]:
    """Row barriers, then column barriers. A line is either one barrier of all its spawned CPEs
    or split into up to three barriers on sub-masks (some CPEs may take part in none)."""
    code = {c: [] for c in mesh.spawned}
    spawned = set(mesh.spawned)
    for along_row, op in ((True, "synr"), (False, "sync")):
        lines = {tuple(mesh.line(c, along_row)) for c in mesh.spawned}
        for line in sorted(lines):
            members = [c for c in line if c in spawned]
            if draw(st.booleans()):
                groups = [members]
            else:
                groups = [[] for _ in range(draw(st.integers(1, 3)))]
                for c in members:
                    k = draw(st.integers(0, len(groups)))   # len(groups): in no barrier
                    if k < len(groups):
                        groups[k].append(c)
            for group in groups:
                mask = sum(1 << mesh.position(c, along_row) for c in group)
                for c in group:
                    if draw(st.booleans()):
                        code[c].append(f"\t{op}\t{mask:#x}")
                    else:   # the mask in a register
                        code[c] += [f"\tldi\t$26, {mask:#x}", f"\t{op}\t$26"]
    return code


def race_phase(draw, mesh: Mesh) -> dict[int, list[str]]:
    """CPEs load and store the same few words of the shared main-memory region."""
    code = {}
    for c in mesh.spawned:
        code[c] = [f"\t{draw(st.sampled_from(['ldl', 'stl', 'ldw', 'stw']))}\t{_reg(draw)}, "
                   f"{8 * draw(st.integers(0, 3))}(${SHARED_REG})"
                   for _ in range(draw(st.integers(1, 4)))]
    return code


def call_phase(draw, functions: int) -> list[str]:
    """A call of a shared function (returning with ret or jmp), or a branch around code."""
    if draw(st.booleans()):
        return [f"\tbsr\t$26, .Lfn{draw(st.integers(0, functions - 1))}"]
    skipped = [straight_instruction(draw) for _ in range(draw(st.integers(1, 3)))]
    return ["\tbr\t$31, 6f", *skipped, "6:"]


def functions(draw, count: int) -> list[str]:
    lines = []
    for k in range(count):
        ret = draw(st.sampled_from(["ret\t$31, ($26), 0", "jmp\t$31, ($26), 0"]))
        lines += [f".Lfn{k}:", *straight(draw, n_max=6), f"\t{ret}"]
    return lines


def fault_lines(draw, mesh: Mesh, victim: int) -> str:
    """One instruction (sequence) that faults or deadlocks on `victim`."""
    row_position = mesh.position(victim, True)
    row = mesh.line(victim, True)
    unspawned_in_row = [k for k, c in enumerate(row) if c not in mesh.spawned]
    choices = [
        "\tldl\t$0, 3($28)",                       # misaligned
        "\tldw\t$0, -4($31)",                      # outside LDM and memory
        "\tldih\t$0, 0x100($29)\n\tvldd\t$0, 0($0)",  # beyond the allocated memory
        "\t.word\t0x0000dead",                     # undecodable (opcode 0 is free)
        "\tldi\t$0, 0x100\n\tjmp\t$31, ($0), 0",   # jump outside the code image
        "\tgetr\t$0",                              # waits forever: deadlock
        "\tvldr\t$0, 0($29)",                      # load-and-broadcast from memory
        f"\tputr\t$0, {row_position}",             # put to itself
        f"\t.word\t{isa.encode(isa.BY_NAME['putc'], {'ra': 0, 'imm8': 9}, literal=True):#x}",
        "\tldi\t$26, 9\n\tputr\t$0, $26",          # put_outside, the target in a register
        "\tldi\t$26, 0x1ff\n\tsynr\t$26",          # a register mask beyond the row
        "\trcsr\t$0, 5",                           # a control/status register not modelled
        f"\tsynr\t{1 << ((row_position + 1) % 8):#x}",   # not in its own mask (or outside)
        "\tdma\t$31, $29, $31",                    # bad DMA: size 0
        "\tldih\t$24, 0x700($31)\n\tvinsw\t$24, $31, 1, $25\n\tdma\t$25, $29, $31",  # op 7
    ]
    if mesh.cols < 8:
        choices.append(f"\tputr\t$0, {mesh.cols}")   # beyond a narrow row
    if unspawned_in_row:
        k = draw(st.sampled_from(unspawned_in_row))
        choices += [f"\tputr\t$0, {k}",                              # put_unspawned
                    f"\tsynr\t{1 << k | 1 << row_position:#x}"]      # participant unspawned
    return draw(st.sampled_from(choices))


# Configuration parameters `programs(configs=True)` draws (each with probability 1/2): a
# strategy of valid values each. The LDM keeps room for the data/DMA/reply layout above.
CONFIG_STRATEGIES = {
    "mesh_rows": st.integers(1, 8), "mesh_cols": st.integers(1, 8),
    "ldm_bytes": st.sampled_from([16384, 32768, 65536, 131072]),
    "lat_int": st.integers(1, 3), "lat_imul": st.integers(1, 8), "lat_fp": st.integers(1, 10),
    "lat_fdivs": st.integers(1, 30), "lat_fdivd": st.integers(1, 40),
    "lat_fcvt": st.integers(1, 8), "lat_ldm_scalar": st.integers(1, 5),
    "lat_ldm_vector": st.integers(1, 6), "lat_get": st.integers(1, 3),
    "lat_bcast_load": st.integers(1, 6), "lat_shuffle": st.integers(1, 3),
    "gld_latency": st.integers(1, 200), "gst_latency": st.integers(1, 120),
    "gld_occupancy": st.integers(0, 20), "dma_latency": st.integers(0, 300),
    "dma_transaction_bytes": st.sampled_from([8, 32, 64, 128, 256]),
    "dma_transaction_cycles": st.integers(1, 8), "dma_active_requests": st.integers(1, 8),
    "dma_put_write_bytes": st.sampled_from([8, 16, 32, 64]),
    "dma_put_write_cycles": st.integers(1, 12), "dma_put_ack_cycles": st.integers(0, 40),
    "dma_get_request_cycles": st.integers(0, 12), "dma_put_partial_writes": st.integers(0, 8),
    "dma_block_get_cycles": st.integers(0, 20), "dma_block_get_min_cycles": st.integers(0, 40),
    "dma_block_put_cycles": st.integers(0, 50),
    "dma_bcast_transaction_cycles": st.integers(0, 20),
    "dma_put_strided_pro_rata": st.integers(0, 1), "dma_merge_unstrided_blocks": st.integers(0, 1),
    "dma_channel_depth": st.integers(1, 5), "rc_latency": st.integers(1, 20),
    "rc_queue_depth": st.integers(1, 6), "rc_send_depth": st.integers(1, 6),
    "barrier_cycles": st.integers(1, 20),
}


# The instruction caches of `programs(icache=True)`: small enough that the cases' code misses
# and evicts (every L1 and L2 at least one set of its ways).
ICACHE_STRATEGIES = {
    "icache_line_bytes": st.sampled_from([16, 32, 64]),
    "icache_l1_bytes": st.sampled_from([256, 512, 16384]), "icache_l1_ways": st.sampled_from([2, 4]),
    "icache_l2_bytes": st.sampled_from([512, 2048, 65536]),
    "icache_l2_ways": st.sampled_from([1, 2, 8]),
    "icache_l2_cycles": st.integers(1, 20), "icache_memory_cycles": st.integers(1, 200),
}


@st.composite
def programs(draw, max_cpes=64, faults=False, configs=False, spmd=None, icache=False) -> Case:
    """A random case; spmd: every CPE runs the same code (the C core's in-step path), with
    its own data (None: drawn, one case in three); icache: with the instruction caches on."""
    # The console register's wait drawn short in every case: the default (~270 k cycles, a
    # printf on hardware) outlasts a case's cycle limit.
    overrides = {"console_call_cycles": draw(st.integers(1, 300))}
    if configs:
        overrides.update({name: draw(strategy) for name, strategy in CONFIG_STRATEGIES.items()
                          if draw(st.booleans())})
    if icache:
        overrides.update({name: draw(strategy) for name, strategy in ICACHE_STRATEGIES.items()},
                         icache=1)
    config = VMConfig.preset(**overrides)
    num = min(config.num_cpes, max_cpes)
    cpes = draw(st.sampled_from(sorted({n for n in (1, 2, 3, 8, 9, 16, 64, num) if n <= num})))
    spawn = None
    if draw(st.integers(0, 2)) == 0:   # any set of ids, not 0..n-1
        spawn = tuple(sorted(draw(st.lists(st.integers(0, config.num_cpes - 1), min_size=cpes,
                                           max_size=cpes, unique=True))))
    mesh = Mesh(config.mesh_rows, config.mesh_cols,
                list(range(cpes)) if spawn is None else list(spawn))
    phases = draw(st.lists(st.sampled_from(["straight", "loop", "comm", "dma", "barrier",
                                            "race", "call"]), min_size=1, max_size=5))
    per_cpe = {c: [] for c in mesh.spawned}
    dma_phases = 0
    for phase in phases:
        if phase in ("straight", "loop", "call"):
            for c in mesh.spawned:
                per_cpe[c] += straight(draw) if phase == "straight" else \
                    loop(draw) if phase == "loop" else call_phase(draw, 2)
            continue
        if phase == "comm":
            planned = comm_phase(draw, mesh, config.rc_queue_depth)
        elif phase == "dma":
            if dma_phases == MAX_DMA_PHASES:
                continue
            planned = dma_phase(draw, mesh, REPLY + 4 * dma_phases, config.dma_channel_depth)
            dma_phases += 1
        else:
            planned = {"barrier": barrier_phase, "race": race_phase}[phase](draw, mesh)
        for c, lines in planned.items():
            per_cpe[c] += lines
    fault = None
    if faults:
        victim = draw(st.sampled_from(mesh.spawned))
        fault = fault_lines(draw, mesh, victim)
        at = draw(st.integers(0, len(per_cpe[victim])))
        per_cpe[victim][at:at] = [fault]
    if spmd is None:
        spmd = draw(st.integers(0, 2)) == 0
    lines = ["\t.text", "\t.globl\tentry", "entry:", "\trcid\t$24"]
    if spmd:   # the code of one CPE (the fault's victim if any) for all
        lines += [*per_cpe[victim if faults else mesh.spawned[0]], "\thalt"]
    else:
        for c in mesh.spawned[1:]:
            lines += [f"\tcmpeq\t$24, {c}, $25", f"\tbne\t$25, .Lcpe{c}"]
        for c in mesh.spawned:
            lines += [f".Lcpe{c}:", *per_cpe[c], "\thalt"]
    lines += functions(draw, 2)
    return Case("\n".join(lines) + "\n", cpes, draw(st.integers(0, 2**32 - 1)),
                expect_fault=fault is not None, spawn=spawn, overrides=overrides)


def initial_state(case: Case, config, code_words: int):
    """Random registers (a mix of integers and doubles), LDM and memory for a case."""
    rng = np.random.default_rng(case.seed)
    n = config.num_cpes
    regs = rng.integers(0, 2**64, size=(n, 32, 4), dtype=np.uint64)
    doubles = rng.choice(np.array([0.0, -0.0, 1.0, -2.5, 1e300, 1e-310, np.inf, np.nan, 3.14159,
                                   -7.0, 2.0**-126, 65504.0]), size=(n, 32, 4))
    use_double = rng.random((n, 32, 4)) < 0.5
    regs[use_double] = doubles.view(np.uint64)[use_double]
    small = rng.random((n, 32, 4)) < 0.2
    regs[small] = rng.integers(0, 300, size=int(small.sum())).astype(np.uint64)
    mem = rng.integers(0, 256, size=MEM_REGION * n, dtype=np.uint8)
    ldm = np.zeros((n, config.ldm_bytes), np.uint8)
    ldm[:, LDM_DATA:LDM_DATA + LDM_DATA_BYTES] = rng.integers(
        0, 256, size=(n, LDM_DATA_BYTES), dtype=np.uint8)
    regs[:, 31] = 0
    regs[:, SHARED_REG, 0] = config.mem_base
    regs[:, 28, 0] = LDM_DATA
    regs[:, 29, 0] = config.mem_base + MEM_REGION * np.arange(n, dtype=np.uint64)
    return regs, ldm, mem
