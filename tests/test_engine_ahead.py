"""The C core's run-ahead (docs/vm.md "Engines"): a CPE spinning at a fixed point (a loop that
waits for a DMA reply and changes nothing) jumps to the end of its wait in one step while the
other CPEs are stepped, and is taken back when an event writes the LDM bytes its loop loads or
another CPE faults in a cycle it ran ahead. Each case is built to take that path (the core's
count of run-ahead cycles says so) and to leave it in one of the ways the core must get exactly
right; both engines must agree bit for bit, and the core must agree with itself stepping every
cycle."""
from dataclasses import replace

import numpy as np
import pytest

from swsim.vm import cengine

from vm_helpers import agree_three_ways, copy, dma_descriptor_asm, iterations, job_of

WORKER = 0      # the CPE that works while the others spin
REPLY = 0x800   # each spinning CPE's reply word


def indent(text):
    return text.replace("\n", "\n\t")


def replies_text(size, worker_end=""):
    """CPE 0 runs $16 iterations of dependent integer work (issuing in most cycles, so that no
    skip over every CPE applies); the others each get `size` bytes by DMA (PE mode) and spin
    on the reply word, then read the data and halt. `worker_end`: what CPE 0 does after its
    loop (before halting)."""
    get = indent(dma_descriptor_asm("$9", "$10", "get", size, REPLY))
    return f"""
\trcid $11
\tbne $11, 5f
1:\tmull $16, 3, $17
\taddl $17, 1, $17
\tsubl $16, 1, $16
\tbgt $16, 1b
{worker_end}\thalt
5:\t{get}
\tldih $12, 0x4000($31)
\tsll $11, 10, $14
\taddl $12, $14, $12
\tldi $13, 0x100($31)
\tdma $9, $12, $13
\tldi $2, {REPLY}($31)
2:\tldw $1, 0($2)
\tbeq $1, 2b
\tldl $3, 0x100($31)
\thalt
"""


def replies_job(cpes=8, size=1024, work=600, worker_end="", **options):
    job = job_of(replies_text(size, worker_end), cpes, iterations([work] * cpes),
                 mem=cpes * max(size, 1024), **options)
    job.mem[:] = np.arange(len(job.mem), dtype=np.uint64).astype(np.uint8)
    return job


def agree(job, progress=None):
    """The engines agree on ``job``; returns (the Python result, the cycles the core's CPEs
    ran ahead)."""
    result, paths = agree_three_ways(job, progress)
    return result, paths.ahead


def test_cpes_spinning_on_their_replies_run_ahead():
    result, ahead = agree(replies_job())
    assert result.stop is None
    # 7 CPEs wait on their replies (start-up latency 200 cycles and more): most of it ahead
    assert ahead > 7 * 200 // 2


def test_a_broadcast_into_the_word_the_loops_load():
    """After a short loop CPE 0 broadcasts 64 bytes over every CPE's reply word (a data
    transaction, not a reply) while their own long gets are served: a CPE still spinning comes
    back from its run-ahead before those bytes land."""
    bcast = indent(dma_descriptor_asm("$9", "$10", "get", 64, 0x900, mode="bcast", mask=0xff))
    job = replies_job(size=4096, work=20,
                      worker_end=f"\t{bcast}\n\tldih $12, 0x4000($31)\n"
                                 f"\tldi $13, {REPLY}($31)\n\tdma $9, $12, $13\n")
    result, ahead = agree(job)
    assert result.stop is None and ahead > 0


@pytest.mark.parametrize("faults_after", [40, 150, 400])
def test_a_fault_of_the_worker_while_cpes_run_ahead(faults_after):
    """The worker, first in the run order, faults in a cycle that the spinning CPEs ran ahead:
    they are taken back to the cycle before it (they come after it in the cycle's order)."""
    result, ahead = agree(replies_job(work=faults_after, worker_end="\tldl $13, 3($31)\n"))
    assert result.stop.name == "misaligned" and result.stop.cpe == WORKER and ahead > 0


def test_a_fault_of_the_last_cpe_while_others_run_ahead():
    """CPE 7, last in the run order, faults after its reply while other CPEs still run ahead:
    they are taken back to the faulting cycle, which they have simulated."""
    text = replies_text(1024).replace("\tldl $3, 0x100($31)",
                                      "\tcmpeq $11, 7, $4\n\tbeq $4, 7f\n\tldl $3, 3($31)\n7:")
    result, ahead = agree(job_of(text, 8, iterations([600] * 8), mem=8 << 10))
    assert result.stop.name == "misaligned" and result.stop.cpe == 7 and ahead > 0


@pytest.mark.parametrize("max_cycles", [150, 333, 801])
def test_the_cycle_limit_while_cpes_run_ahead(max_cycles):
    result, ahead = agree(replies_job(max_cycles=max_cycles))
    assert result.stop.name == "cycle_limit" and result.kernel_cycles == max_cycles
    assert ahead > 0


@pytest.mark.parametrize("every", [7, 64, 301])
def test_pauses_while_cpes_run_ahead(monkeypatch, every):
    """A run in steps (progress reports): a CPE runs ahead only up to the pause."""
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", every)
    seen = []
    result, ahead = agree(replies_job(cpes=4, size=512, work=400), progress=seen.append)
    assert result.stop is None and ahead > 0 and len(seen) > 1


def test_no_run_ahead_while_tracing():
    job = replies_job(cpes=3, size=256, work=300)
    assert cengine.path_cycles(copy(job)).ahead > 0
    assert cengine.path_cycles(replace(copy(job), trace=True)).ahead == 0
