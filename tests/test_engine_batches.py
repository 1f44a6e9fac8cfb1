"""The C core's batches (docs/vm.md "Engines"): a CPE running a private block (registers and
LDM only) simulates several cycles in one visit. Each case is built to take that path (the
core's count of batched cycles says so) and to leave it in one of the ways the core must get
exactly right: operands not ready at the block's entry, a load or store leaving LDM, DMA
writing the LDM of CPEs in a batch, another CPE's fault in a cycle a batch already simulated,
the cycle limit and pauses inside a batch. Both engines must agree bit for bit, and the core
must agree with itself stepping every cycle (no batches)."""
from dataclasses import replace

import numpy as np
import pytest

from swsim.vm import cengine

from vm_helpers import agree_three_ways, copy, dma_descriptor_asm, iterations, job_of

# A loop of dependent integer work on a ring of LDM words (as `int_chain`): $16 iterations.
INT_LOOP = """
\tldi $18, 3($31)
\tldi $19, 7($31)
\tldi $20, 2047($31)
\tbis $31, $31, $17
1:\tldl $1, 0($17)
\tmull $1, $18, $1
\taddl $1, $19, $1
\tstl $1, 0($17)
\taddl $17, 8, $17
\tand $17, $20, $17
\tsubl $16, 1, $16
\tbgt $16, 1b
"""

# Float, divide and vector work, with a value carried from one iteration into the next one's
# first instruction (the mull at the end: the next entry waits for it).
FLOAT_LOOP = """
\tldi $2, 5($31)
\tfcvtld $2, $3
\tldi $4, 3($31)
2:\taddl $5, 1, $6
\tfmuld $3, $3, $7
\tfdivd $7, $3, $8
\tfaddd $8, $3, $3
\tvaddl $6, $5, $9
\tvinsf $8, $9, 2, $9
\tvstd $9, 256($31)
\tmull $6, $4, $5
\tsubl $16, 1, $16
\tbne $16, 2b
"""


def agree(job, progress=None):
    """The engines agree on ``job`` (vm_helpers.agree_three_ways); returns (the Python result,
    the cycles the core simulated in batches)."""
    result, paths = agree_three_ways(job, progress)
    return result, paths.batch


def test_a_private_loop_runs_in_batches():
    result, batched = agree(job_of(INT_LOOP + "\thalt\n", 6, iterations([40, 41, 45, 52, 60, 3])))
    assert result.stop is None
    assert batched > result.kernel_cycles   # several CPEs, most of their cycles


def test_float_divide_and_vector_loop_waits_for_operands_at_entry():
    result, batched = agree(job_of(FLOAT_LOOP + "\thalt\n", 4, iterations([9, 10, 11, 30])))
    assert result.stop is None and batched > 0


def test_a_loop_whose_loads_go_to_main_memory_every_other_iteration():
    """$22 alternates between an LDM address and a main-memory one: the batch stops before
    each global load, which issue() takes."""
    text = """
\tldi $22, 0x100($31)
\tldih $23, 0x4000($31)
\tldi $1, 0x100($31)
\txor $23, $1, $23
\txor $23, $31, $23
3:\tldl $2, 0($22)
\taddl $2, 1, $2
\tstl $2, 8($22)
\txor $22, $23, $22
\taddl $3, $2, $3
\tsubl $16, 1, $16
\tbgt $16, 3b
\thalt
"""
    regs = iterations([6, 7, 8])
    regs[:3, 23, 0] = 0   # set by the program
    result, batched = agree(job_of(text, 3, regs))
    assert result.stop is None and batched > 0


def test_dma_into_the_ldm_of_cpes_in_batches():
    """CPE 0 broadcasts a get into every CPE's LDM (the words the loop reads) while all run the
    integer loop; batches must end before the engine writes their LDM."""
    get = dma_descriptor_asm("$9", "$10", "get", 64, 0x800, mode="bcast", mask=0xff)
    get = get.replace("\n", "\n\t")
    text = f"""
\trcid $11
\tbne $11, 5f
\t{get}
\tldih $12, 0x4000($31)
\tdma $9, $12, $31
5:""" + INT_LOOP + "\thalt\n"
    job = job_of(text, 8, iterations([60] * 8))
    job.mem[:64] = np.arange(1, 65, dtype=np.uint8)
    result, batched = agree(job)
    assert result.stop is None and batched > 0


def faulting_text(faulting_cpe, fault_after):
    """Every CPE runs the integer loop, but CPE `faulting_cpe` runs `fault_after` iterations of
    it and then a misaligned load."""
    return (f"\trcid $11\n\tcmpeq $11, {faulting_cpe}, $12\n\tbeq $12, 6f\n"
            f"\tldi $16, {fault_after}($31)\n6:" + INT_LOOP
            + "\tbeq $12, 7f\n\tldl $13, 3($31)\n7:\thalt\n")


@pytest.mark.parametrize("faulting_cpe", [0, 3, 7])
@pytest.mark.parametrize("fault_after", [2, 9, 23])
def test_a_fault_while_other_cpes_are_in_batches(faulting_cpe, fault_after):
    """The run stops in the faulting cycle: the batches of the other CPEs are taken back to
    it (those before the faulting CPE in the cycle's order have simulated it, the others not)."""
    result, batched = agree(job_of(faulting_text(faulting_cpe, fault_after), 8,
                                   iterations([50] * 8)))
    assert result.stop.name == "misaligned" and result.stop.cpe == faulting_cpe
    assert batched > 0


@pytest.mark.parametrize("max_cycles", [20, 37, 150, 401])
def test_the_cycle_limit_inside_a_batch(max_cycles):
    result, batched = agree(job_of(INT_LOOP + "\thalt\n", 5, iterations([100] * 5),
                                   max_cycles=max_cycles))
    assert result.stop.name == "cycle_limit" and result.kernel_cycles == max_cycles
    assert batched > 0


@pytest.mark.parametrize("every", [1, 5, 7, 13, 64])
def test_pauses_inside_batches(monkeypatch, every):
    """A run in steps (progress reports) pauses at horizons that fall inside batches."""
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", every)
    seen = []
    text = INT_LOOP + "\tldi $16, 12($31)\n" + FLOAT_LOOP + "\thalt\n"
    result, batched = agree(job_of(text, 4, iterations([20, 21, 22, 23])), progress=seen.append)
    assert result.stop is None and batched > 0 and len(seen) > 1


def test_no_batches_while_tracing():
    job = job_of(INT_LOOP + "\thalt\n", 2, iterations([30, 30]))
    assert cengine.path_cycles(copy(job)).batch > 0
    assert cengine.path_cycles(replace(copy(job), trace=True)).batch == 0


# ---- whole iterations (micro-operations) and the ways out of them ----------------------------

def spin_text(paired):
    """Every CPE spins on its first LDM word until CPE 0's broadcast DMA writes it: an
    iteration that changes nothing stops the batch before its branch, which issues alone or
    (`paired`) as the follower of a word that waits for the same load."""
    get = dma_descriptor_asm("$9", "$10", "get", 64, 0x800, mode="bcast", mask=0xff)
    get = get.replace("\n", "\n\t")
    wait = "\taddl $1, 0, $5\n" if paired else ""
    return f"""
\trcid $11
\tbne $11, 5f
\tldi $13, 40($31)
4:\tsubl $13, 1, $13
\tbgt $13, 4b
\t{get}
\tldih $12, 0x4000($31)
\tdma $9, $12, $31
5:\tldi $2, 0($31)
1:\tldl $1, 0($2)
{wait}\tbeq $1, 1b
\taddl $1, $5, $6
\thalt
"""


@pytest.mark.parametrize("paired", [False, True])
def test_a_spin_loop_that_changes_nothing_stops_batches_before_its_branch(paired):
    job = job_of(spin_text(paired), 4)
    job.mem[:64] = np.arange(1, 65, dtype=np.uint8)
    result, batched = agree(job)
    assert result.stop is None and batched > 0


@pytest.mark.parametrize("which", ["load", "store"])
def test_a_load_and_the_store_it_examines_one_leaving_ldm(which):
    """A load leads a cycle in which the store after it is examined (both use P1): both
    accesses are checked before the cycle, and one of them ($22) goes to main memory every
    other iteration, which stops the batch before that cycle."""
    load, store = ("$22", "$27") if which == "load" else ("$27", "$22")
    text = f"""
\tldi $22, 0x100($31)
\tldih $23, 0x4000($31)
\tldi $27, 0x200($31)
6:\tldl $2, 0({load})
\tstl $3, 8({store})
\taddl $2, 1, $3
\txor $22, $23, $22
\tsubl $16, 1, $16
\tbgt $16, 6b
\thalt
"""
    result, batched = agree(job_of(text, 3, iterations([20, 21, 22])))
    assert result.stop is None and batched > 0


@pytest.mark.parametrize("cpes, per_cpe", [(2, 200), (3, 401)])
def test_batches_end_when_their_undo_record_is_full(cpes, per_cpe):
    """Three stores per iteration and no dma in the code (no request latency bounds a batch):
    a batch ends when the record of the stores it may have to take back is full."""
    text = """
\tbis $31, $31, $17
\tldi $18, 1023($31)
5:\tstl $16, 0($17)
\tstw $16, 8($17)
\tstb $16, 12($17)
\taddl $17, 16, $17
\tand $17, $18, $17
\tsubl $16, 1, $16
\tbgt $16, 5b
\thalt
"""
    result, batched = agree(job_of(text, cpes, iterations([per_cpe + k for k in range(cpes)])))
    assert result.stop is None and batched > result.kernel_cycles


@pytest.mark.parametrize("faulting_cpe", [0, 5])
def test_a_fault_while_other_cpes_are_in_long_batches(faulting_cpe):
    """No dma in the code: batches run up to the undo record's 256 stores, and a fault takes
    back a long one."""
    result, batched = agree(job_of(faulting_text(faulting_cpe, 300), 6, iterations([400] * 6)))
    assert result.stop.name == "misaligned" and result.stop.cpe == faulting_cpe
    assert batched > 0
