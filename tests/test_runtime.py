"""``hostlib.runtime``: job records, stacks and LDM plans read from a kernel's symbols."""
import numpy as np
import pytest

import swsim
from swsim.errors import SwsimError
from swsim.hostlib.blas import baseline, gemm_model, primitive
from swsim.hostlib.runtime import LdmArena, Record

SOURCE = """
	J_COUNT = 0
	J_SCALE = 8
	J_BASE = 16
	JOB_BYTES = 32
	.text
f:	ret
"""


def test_a_record_is_the_kernels_absolute_symbols():
    record = Record(swsim.assemble(SOURCE), "J_", "JOB_BYTES")
    assert record.offsets == {"count": 0, "scale": 8, "base": 16} and record.nbytes == 32
    words = record.new(count=3, scale=1.5)
    record.write(words, 8, base=7)          # a second record starting 8 bytes further
    assert words.tolist() == [3, np.float64(1.5).view(np.int64), 0, 7]
    with pytest.raises(SwsimError, match="no field 'size'.*base, count, scale"):
        record.new(size=1)
    with pytest.raises(SwsimError, match="no record fields K_"):
        Record(swsim.assemble(SOURCE), "K_", "JOB_BYTES")


def test_the_gemm_kernels_declare_the_stack_of_their_call_chains():
    # driver frame + the primitive's frame (+ the strategy-2 wrapper's for gemm_prim_run); the
    # baseline keeps no frame but takes 3 of its 9 arguments on the stack (one 32-byte area).
    assert gemm_model.KERNEL.stack_bytes(gemm_model.KERNEL_ARGS) == 32 + 288
    assert primitive.KERNEL.stack_bytes(primitive.KERNEL_ARGS) == 64 + 64 + 288
    assert baseline.KERNEL.stack_bytes(baseline.KERNEL_ARGS) == 32


def test_the_swgemm_record_matches_what_the_kernel_reads():
    kernel = gemm_model.KERNEL
    job, operand = kernel.record("J_", "JOB_BYTES"), kernel.record("O_", "OP_BYTES")
    slot = kernel.record("SL_", "SLOT_BYTES")
    # the operand records (their two slots last, of 8-byte fields) follow one another in the
    # job record
    assert operand.offset("slot") + 2 * slot.nbytes == operand.nbytes
    assert operand.nbytes % 8 == 0 and slot.nbytes % 8 == 0
    assert job.offset("op_b") - job.offset("op_a") == operand.nbytes
    assert job.offset("op_c") + operand.nbytes == job.nbytes


def test_ldm_arena_aligns_and_tells_what_is_left():
    arena = LdmArena(100, 1000)
    assert [arena.take(10), arena.take(33), arena.take(0)] == [128, 160, 224]
    assert arena.free == 776 and arena.fits
    arena.take(800)
    assert not arena.fits
