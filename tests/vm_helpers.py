"""Helpers of the VM tests: run a snippet of assembly on a few CPEs and read registers."""
import numpy as np

import swsim
from swsim.vm import Machine
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
