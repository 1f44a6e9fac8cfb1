"""Configurations and jobs on which the engines once disagreed (issue 14): each runs on both
engines, which must agree with each other and with docs/timing.md."""
import numpy as np
import pytest

import swsim
from swsim.vm import VMConfig
from swsim.vm.config import ConfigError
from swsim.vm.engine_api import CG_COUNTER_INDEX, EngineJob
from swsim.vm.engine_defs import BARRIER_PROBLEMS

from swsim.vm.differential import differences, run_both   # needs the C core built
from vm_helpers import dma_descriptor_asm

NARROW = VMConfig.preset(mesh_rows=2, mesh_cols=3)


def both(text, config, cpes, trace=False, regs=None):
    """Run ``text`` (entry ``entry``) on CPEs 0..cpes-1 of ``config`` with both engines; the
    Python result after checking that C's is the same."""
    program = swsim.assemble("\t.text\n\t.globl entry\nentry:\n" + text, filename="edge.s")
    n = config.num_cpes
    spawned = np.zeros(n, bool)
    spawned[:cpes] = True
    job = EngineJob(config=config, code=program.code, spawned=spawned,
                    entry_pc=program.address_of("entry"),
                    regs=np.zeros((n, 32, 4), np.uint64) if regs is None else regs,
                    ldm=np.zeros((n, config.ldm_bytes), np.uint8), mem=np.zeros(4096, np.uint8),
                    max_cycles=100_000, trace=trace)
    jobs, results = run_both(job)
    assert differences(jobs, results) == []
    return jobs[0], results[0]


def test_barrier_cycles_is_at_least_one_and_one_agrees():
    with pytest.raises(ConfigError, match="barrier_cycles=0: must be 1.."):
        VMConfig.preset(barrier_cycles=0)
    _, result = both("\tsynr 0x3\n\trtc $1\n\thalt\n", VMConfig.preset(barrier_cycles=1), 2)
    assert result.stop is None and result.cg_counters[CG_COUNTER_INDEX["barriers"]] == 1


@pytest.mark.parametrize("put, n", [("putr", 3), ("putr", 7), ("putc", 2), ("putc", 9)])
def test_a_put_beyond_a_narrow_row_or_column_is_put_outside(put, n):
    word = swsim.isa.encode(swsim.isa.BY_NAME[put], {"ra": 1, "imm8": n}, literal=True)
    _, result = both(f"\t.word {word:#x}\n\thalt\n", NARROW, 6)
    length = 3 if put == "putr" else 2
    assert result.stop.name == "put_outside" and (result.stop.a, result.stop.b) == (n, length)
    assert f"position {n} of a row/column of {length} CPEs" in result.stop.message()


@pytest.mark.parametrize("sync, mask", [("synr", 0x9), ("synr", 0xff), ("sync", 0x5)])
def test_a_barrier_mask_beyond_a_narrow_row_or_column_faults(sync, mask):
    _, result = both(f"\t{sync} {mask:#x}\n\thalt\n", NARROW, 6)
    assert result.stop.name == "barrier"
    assert BARRIER_PROBLEMS[result.stop.b][0] == "outside_mesh"


def test_a_full_barrier_on_a_narrow_mesh_completes():
    _, result = both("\tsynr 0x7\n\tsync 0x3\n\thalt\n", NARROW, 6)
    assert result.stop is None


def test_a_dma_issued_in_the_cycle_of_a_fault_has_no_span():
    """CPE 0 issues a DMA in the cycle CPE 1 faults: that cycle is not charged, so the DMA
    covers no cycle of the trace."""
    def descriptor(reply):   # a get of 8 bytes to LDM 0, and the memory address in $4
        return (dma_descriptor_asm("$3", "$2", "get", 8, reply).replace("\n", "\n\t")
                + "\n\tldih $4, 0x4000($31)\n")
    text = ("\trcid $1\n\tbne $1, 1f\n\t" + descriptor(0x100) + "\tdma $3, $4, $31\n\thalt\n"
            "1:\n\t" + descriptor(0x104) + "\tldl $5, 3($31)\n\thalt\n")
    _, result = both(text, VMConfig.preset(), 2, trace=True)
    assert result.stop.name == "misaligned"
    assert all(end > start for _, _, start, end in result.spans)
    assert not [s for s in result.spans if s[1] == "dma"]
    assert result.kernel_cycles == result.stop.cycle
    assert result.cg_counters[CG_COUNTER_INDEX["dma_requests"]] == 1


def test_a_job_with_a_nonzero_zero_register_reads_zero():
    config = VMConfig.preset()
    regs = np.zeros((config.num_cpes, 32, 4), np.uint64)
    regs[:, 31] = 12345
    job, result = both("\taddl $31, 7, $1\n\tvaddl $31, $31, $2\n\thalt\n", config, 1, regs=regs)
    assert result.stop is None
    assert int(job.regs[0, 1, 0]) == 7 and not job.regs[0, 2].any()
    assert int(job.regs[0, 31, 0]) == 12345   # the job's $31 is left as it was
