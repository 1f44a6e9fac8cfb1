"""Random core-group programs for differential testing of the two engines.

A generated case is assembly text plus the initial state: every spawned CPE runs its own random
block (dispatched on rcid) made of *phases*. Straight-line code and loops draw any instruction of
the ISA table with random legal operands; communication, DMA and barrier phases are planned
across CPEs so that most programs finish (queues never overfill, every get has a put), while
fault cases plant one bad access, undecodable word or bad branch.

Register plan: $0-$23 random data, $24-$27 loop counters and scratch, $28 = LDM data base,
$29 = this CPE's main-memory region, $30 = sp, $31 = zero.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from swsim import isa
from vm_helpers import dma_descriptor_asm

DATA_REGS = list(range(24))
LDM_DATA = 0x1000          # random LDM data area [LDM_DATA, LDM_DATA + LDM_DATA_BYTES)
LDM_DATA_BYTES = 1024
LDM_DMA = 0x2000           # DMA target area in LDM
REPLY = 0x3000             # DMA reply word
MEM_REGION = 4096          # bytes of main memory per CPE

# Instructions the straight-line generator may draw (the rest need planned phases or would
# leave the program: communication, barriers, DMA, halt, jumps, branches).
_PHASED = {"put", "get", "bcast_load", "sync", "dma", "branch", "jump"}
STRAIGHT = [i for i in isa.INSTRUCTIONS if i.cls not in _PHASED and i.name != "halt"]


@dataclass
class Case:
    text: str
    cpes: int
    seed: int
    expect_fault: bool = False
    notes: list = field(default_factory=list)


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
    if op == "csr":   # the others fault (the fault cases plant one)
        return str(isa.table.CSR_CYCLE_COUNTER)
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
class Plan:
    """Per-CPE code of one coordinated phase."""
    code: dict


def comm_phase(draw, cpes: int) -> dict[int, list[str]]:
    """Row/column transfers among spawned CPEs; every queue receives at most 4 entries."""
    code = {c: [] for c in range(cpes)}
    gets = {c: {"getr": 0, "getc": 0} for c in range(cpes)}
    for _ in range(draw(st.integers(1, 6))):
        src = draw(st.integers(0, cpes - 1))
        row, col = divmod(src, 8)
        along_row = draw(st.booleans())
        mates = [row * 8 + c for c in range(8) if row * 8 + c < cpes and c != col] if along_row \
            else [r * 8 + col for r in range(8) if r * 8 + col < cpes and r != row]
        if not mates:
            continue
        kind = "getr" if along_row else "getc"
        if draw(st.booleans()) and len(mates) == 7:
            targets, n = mates, 8
        else:
            target = draw(st.sampled_from(mates))
            targets, n = [target], (target % 8 if along_row else target // 8)
        if any(gets[t][kind] >= 4 for t in targets):
            continue
        for t in targets:
            gets[t][kind] += 1
        if draw(st.integers(0, 3)) == 0:
            op = draw(st.sampled_from(["vldr", "ldder"] if along_row else ["vldc", "lddec"]))
            if n != 8:
                op = "putr" if along_row else "putc"
                code[src].append(f"\t{op}\t{_reg(draw)}, {n}")
            else:
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
    for c in range(cpes):
        for kind, count in gets[c].items():
            for _ in range(count):
                code[c].append(f"\t{kind}\t{_reg(draw)}")
                if draw(st.integers(0, 2)) == 0:
                    code[c].append(straight_instruction(draw))
    return code


def dma_phase(draw, cpes: int) -> dict[int, list[str]]:
    """Each CPE issues 1-3 gets/puts on its own memory region and waits for all replies; one
    in five is in another mode than PE, so it also reaches the LDM of other CPEs."""
    code = {}
    for c in range(cpes):
        n = draw(st.integers(1, 3))
        lines = ["\tstw\t$31, %d($31)" % REPLY]
        for _ in range(n):
            put = draw(st.booleans())
            block = draw(st.sampled_from([0, 0, 16, 32, 100]))
            size = draw(st.integers(1, 24)) * 8
            stride = draw(st.sampled_from([0, 8, 64])) if block else 0
            modes = ["pe", "row", "rank"] if put else ["pe", "bcast", "row", "brow", "rank"]
            mode = draw(st.sampled_from(modes)) if draw(st.integers(0, 4)) == 0 else "pe"
            mask = draw(st.integers(1, 255))
            mem_off = 8 * draw(st.integers(0, 64))
            ldm_off = 8 * draw(st.integers(0, 64))
            descriptor = dma_descriptor_asm("$25", "$24", "put" if put else "get", size, REPLY,
                                            mode=mode, block=block, stride=stride, mask=mask)
            lines += [
                *("\t" + line for line in descriptor.split("\n")),
                f"\tldi\t$26, {mem_off}($29)", f"\tldi\t$24, {LDM_DMA + ldm_off}",
                "\tdma\t$25, $26, $24",
            ]
            if draw(st.booleans()):
                lines.append(straight_instruction(draw, global_ok=False))
        lines += ["7:", f"\tldw\t$24, {REPLY}($31)", f"\tsubl\t$24, {n}, $24", "\tbne\t$24, 7b"]
        code[c] = lines
    return code


def barrier_phase(draw, cpes: int) -> dict[int, list[str]]:
    code = {}
    for c in range(cpes):
        row, col = divmod(c, 8)
        row_mask = sum(1 << k for k in range(8) if row * 8 + k < cpes)
        col_mask = sum(1 << r for r in range(8) if r * 8 + col < cpes)
        if draw(st.booleans()):
            code[c] = [f"\tsynr\t{row_mask:#x}", f"\tsync\t{col_mask:#x}"]
        else:   # the masks in a register
            code[c] = [f"\tldi\t$26, {row_mask:#x}", "\tsynr\t$26",
                       f"\tldi\t$26, {col_mask:#x}", "\tsync\t$26"]
    return code


@st.composite
def programs(draw, max_cpes=64, faults=False) -> Case:
    cpes = draw(st.sampled_from([n for n in (1, 2, 3, 8, 9, 16, 64) if n <= max_cpes]))
    phases = draw(st.lists(st.sampled_from(["straight", "loop", "comm", "dma", "barrier"]),
                           min_size=1, max_size=5))
    per_cpe = {c: [] for c in range(cpes)}
    for phase in phases:
        if phase in ("straight", "loop"):
            for c in range(cpes):
                per_cpe[c] += straight(draw) if phase == "straight" else loop(draw)
        else:
            planned = {"comm": comm_phase, "dma": dma_phase, "barrier": barrier_phase}[phase]
            for c, lines in planned(draw, cpes).items():
                per_cpe[c] += lines
    fault = None
    if faults:
        victim = draw(st.integers(0, cpes - 1))
        fault = draw(st.sampled_from([
            "\tldl\t$0, 3($28)",                     # misaligned
            "\tldw\t$0, -4($31)",                    # outside LDM and memory
            "\tldih\t$0, 0x100($29)\n\tvldd\t$0, 0($0)",  # beyond the allocated memory
            "\t.word\t0x0000dead",                   # undecodable (opcode 0 is free)
            "\tldi\t$0, 0x100\n\tjmp\t$31, ($0), 0",  # jump outside the code image
            "\tgetr\t$0",                            # waits forever: deadlock
            "\tvldr\t$0, 0($29)",                    # load-and-broadcast from memory
            "\trcsr\t$0, 5",                         # a control/status register not modelled
            "\tldi\t$26, 9\n\tputr\t$0, $26",          # a put target beyond the row
            "\tldi\t$26, 0x1ff\n\tsynr\t$26",          # a barrier mask beyond the row
        ]))
        at = draw(st.integers(0, len(per_cpe[victim])))
        per_cpe[victim][at:at] = [fault]
    lines = ["\t.text", "\t.globl\tentry", "entry:", "\trcid\t$24"]
    for c in range(1, cpes):
        lines += [f"\tcmpeq\t$24, {c}, $25", f"\tbne\t$25, .Lcpe{c}"]
    for c in range(cpes):
        lines += [f".Lcpe{c}:", *per_cpe[c], "\thalt"]
    return Case("\n".join(lines) + "\n", cpes, draw(st.integers(0, 2**32 - 1)),
                expect_fault=fault is not None)


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
    regs[:, 28, 0] = LDM_DATA
    regs[:, 29, 0] = config.mem_base + MEM_REGION * np.arange(n, dtype=np.uint64)
    return regs, ldm, mem
