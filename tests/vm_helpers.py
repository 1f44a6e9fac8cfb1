"""Helpers of the VM tests: run a snippet of assembly on a few CPEs and read registers.

Every run goes through both engines from the same main memory and must agree bit for bit
(result, registers, LDM, memory, or the same stop report), so each hand-counted expectation of
the VM tests is checked on the C core and on the Python reference engine alike.
"""
from dataclasses import replace

import numpy as np

import swsim
from swsim.vm import Machine, RunStopped, VMConfig, cengine, pyengine
from swsim.vm.differential import differences
from swsim.vm.engine_api import EngineJob
from swsim.vm.floats import bits_to_double
from swsim.vm.fuzzgen import dma_descriptor, dma_descriptor_asm  # noqa: F401 (for the tests)

PROLOGUE = ".text\n.globl kernel\nkernel:\n"


def run(body, cpes=(0,), args=(), machine=None, **options):
    """Run ``body`` (instructions after the ``kernel`` label) and return (result, machine)."""
    machine = machine or Machine()
    program = swsim.assemble(PROLOGUE + body)
    return run_on_both_engines(machine, program, args=list(args), cpes=list(cpes),
                               **options), machine


def run_on_both_engines(machine, program, **options):
    """``machine.run(program, **options)`` on the C engine, then on the Python engine from the
    same memory; checks that they agree and returns (or raises) the Python engine's outcome.
    ``machine.last_job`` is then the Python engine's job."""
    before = machine.mem.view().copy()
    outcomes = []
    for engine in ("c", "python"):
        machine.mem.write(machine.mem.base, before)
        try:
            result, error = machine.run(program, engine=engine, **options), None
        except RunStopped as stopped:
            result, error = stopped.result, stopped
        outcomes.append((result, error, machine.last_job, machine.mem.view().copy()))
    (c, c_error, c_job, c_mem), (py, py_error, py_job, py_mem) = outcomes
    assert type(c_error) is type(py_error) and str(c_error) == str(py_error), \
        f"C engine: {c_error!r}\nPython engine: {py_error!r}"
    assert {**c.to_dict(), "engine": None} == {**py.to_dict(), "engine": None}
    assert c.spans == py.spans
    for name in ("regs", "ldm"):
        np.testing.assert_array_equal(getattr(c_job, name), getattr(py_job, name), name)
    np.testing.assert_array_equal(c_mem, py_mem, "main memory")
    if py_error is not None:
        raise py_error
    return py


def fill_ldm_asm(buffer, words):
    """Assembly that writes the 64-bit words (cpe << 16) + 1, + 2, ... to LDM `buffer` (the
    CPE's id from rcid; $1-$3 and $7 scratch, label `fill`)."""
    return f"""
        rcid $1
        sll $1, 16, $2
        ldi $3, {buffer}($31)
        ldi $7, {words}($31)
    fill:
        addl $2, 1, $2
        stl $2, 0($3)
        ldi $3, 8($3)
        subl $7, 1, $7
        bgt $7, fill
    """


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


# ---- engine jobs of a snippet on the C core's fast paths (batches, CPEs in step) ----

def job_of(text, cpes, regs=None, max_cycles=200_000, config=None, mem=4096):
    config = config or VMConfig.preset()
    program = swsim.assemble("\t.text\n\t.globl entry\nentry:\n" + text, filename="snippet.s")
    n = config.num_cpes
    spawned = np.zeros(n, bool)
    spawned[:cpes] = True
    return EngineJob(config=config, code=program.code, spawned=spawned,
                     entry_pc=program.address_of("entry"),
                     regs=np.zeros((n, 32, 4), np.uint64) if regs is None else regs,
                     ldm=np.zeros((n, config.ldm_bytes), np.uint8), mem=np.zeros(mem, np.uint8),
                     max_cycles=max_cycles)


def copy(job):
    return replace(job, regs=job.regs.copy(), ldm=job.ldm.copy(), mem=job.mem.copy())


def agree_three_ways(job, progress=None):
    """Runs ``job`` on the Python engine, the C core and the C core stepping every cycle; all
    must agree. Returns (the Python result, the core's cengine.PathCycles)."""
    jobs = [copy(job) for _ in range(3)]
    results = [pyengine.run(jobs[0]), cengine.run(jobs[1], progress=progress),
               cengine.run(jobs[2], skip=False)]
    assert differences(jobs[:2], results[:2]) == []
    assert differences([jobs[0], jobs[2]], [results[0], results[2]]) == []
    return results[0], cengine.path_cycles(copy(job))


def iterations(per_cpe):
    """Registers with a0 = per_cpe[i] on CPE i."""
    regs = np.zeros((VMConfig.preset().num_cpes, 32, 4), np.uint64)
    regs[:len(per_cpe), 16, 0] = per_cpe
    return regs
