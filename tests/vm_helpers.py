"""Helpers of the VM tests: run a snippet of assembly on a few CPEs and read registers."""
import numpy as np

import swsim
from swsim.vm import Machine
from swsim.vm.engine_api import DMA_FIELDS, DMA_MODES, DMA_OPS
from swsim.vm.floats import bits_to_double

PROLOGUE = ".text\n.globl kernel\nkernel:\n"


def run(body, cpes=(0,), args=(), machine=None, engine="python", **options):
    """Run ``body`` (instructions after the ``kernel`` label) and return (result, machine)."""
    machine = machine or Machine()
    program = swsim.assemble(PROLOGUE + body)
    result = machine.run(program, args=list(args), cpes=list(cpes), engine=engine, **options)
    return result, machine


def reg(machine, n, cpe=0, lane=0):
    return int(machine.last_job.regs[cpe, n, lane])


def lanes(machine, n, cpe=0):
    return [int(x) for x in machine.last_job.regs[cpe, n]]


def freg(machine, n, cpe=0, lane=0):
    return bits_to_double(reg(machine, n, cpe, lane))


def ldm(machine, cpe, address, count, dtype=np.uint8):
    data = machine.last_job.ldm[cpe, address:address + count * np.dtype(dtype).itemsize]
    return data.view(dtype)


def idle(result, cpe=0, pipe=0):
    """Non-zero idle counters of one pipe."""
    counts = result.cpe[cpe].p0_idle if pipe == 0 else result.cpe[cpe].p1_idle
    return {reason: n for reason, n in counts.items() if n}


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
