"""The per-CPE floating-point operation counter (isa/table.py Instr.flops, CPE counter
float_ops, rcsr CSR_FLOAT_OPS): counted at issue in both engines, bit for bit the same, read by
rcsr and by penv_slave_float_ops_count, and equal to the flops a GEMM primitive must do."""
import numpy as np
import pytest

from swsim.isa.table import BY_NAME, CSR_FLOAT_OPS
from swsim.vm import RunStopped

from vm_helpers import reg, run


@pytest.mark.parametrize("name, flops", [
    ("faddd", 1), ("fmuls", 1), ("fdivd", 1), ("fsqrts", 1), ("fmad", 2), ("fnmss", 2),
    ("vaddd", 4), ("vdivs", 4), ("vsqrtd", 4), ("vmad", 8), ("vnmsd", 8),
    ("fcmpeq", 0), ("fcvtds", 0), ("fcpys", 0), ("vinsf", 0), ("ldde", 0), ("addl", 0),
])
def test_table_counts_the_arithmetic_of_each_instruction(name, flops):
    assert BY_NAME[name].flops == flops


def test_rcsr_reads_the_operations_issued_before_it():
    body = f"""
	rcsr	$5, {CSR_FLOAT_OPS}
	vmad	$1, $2, $3, $4
	fadds	$1, $2, $3
	rcsr	$6, {CSR_FLOAT_OPS}
	fmad	$1, $2, $3, $7
	vsqrtd	$2, $8
	fcmplt	$1, $2, $9
	rcsr	$10, {CSR_FLOAT_OPS}
	halt
"""
    result, m = run(body, cpes=(0, 5))
    for cpe in (0, 5):
        assert [reg(m, n, cpe) for n in (5, 6, 10)] == [0, 9, 15]
        assert result.cpe[cpe].float_ops == 15


def test_counter_runs_through_a_loop_and_the_skipped_idle_time():
    # 100 iterations of one vmad (8) and one faddd (1), then a long divide chain while the
    # other CPE idles at a barrier: skipping must not change the counts
    body = f"""
	ldi	$1, 100
	rcid	$20
	bne	$20, 2f
1:	vmad	$2, $3, $4, $4
	faddd	$5, $6, $6
	subl	$1, 1, $1
	bgt	$1, 1b
	fdivd	$5, $6, $7
	fdivd	$7, $6, $7
2:	synr	3
	rcsr	$8, {CSR_FLOAT_OPS}
	halt
"""
    result, m = run(body, cpes=(0, 1))
    assert reg(m, 8, 0) == 100 * 9 + 2 and reg(m, 8, 1) == 0
    assert [result.cpe[c].float_ops for c in (0, 1)] == [902, 0]


def test_other_control_registers_still_fault():
    with pytest.raises(RunStopped, match="control/status register 5"):
        run("rcsr $1, 5\nhalt\n")


def test_gemm_primitive_counts_exactly_its_flops():
    # the LDM primitive on 8Mb x 8Nb x 8Kb: 2 M N K operations in its vmads, nothing else
    from swsim.hostlib.blas.primitive import ldm_gemm
    rng = np.random.default_rng(0)
    m, n, k = 8 * 16, 8 * 16, 8 * 8
    _, stats = ldm_gemm(rng.standard_normal((m, k)), rng.standard_normal((k, n)),
                        np.zeros((m, n)))
    assert sum(c.float_ops for c in stats.run.cpe.values()) == 2 * m * n * k


def test_a_skipped_spin_loop_counts_its_operations_in_both_engines():
    # a reply-word spin loop with a float add whose result never changes is a fixed point the
    # C core skips; its float_ops must still advance as the Python engine steps them
    from swsim.vm import Machine
    from vm_helpers import dma_descriptor_asm
    machine = Machine()
    source = machine.mem.put(np.zeros(32768, np.uint8))
    body = dma_descriptor_asm("$1", "$2", "get", 32768, 0x100) + f"""
	ldi	$3, 0x1000
	dma	$1, $16, $3
1:	faddd	$5, $6, $7
	ldw	$4, 0x100($31)
	beq	$4, 1b
	rcsr	$8, {CSR_FLOAT_OPS}
	halt
"""
    result, m = run(body, args=[source], machine=machine)
    spins = reg(m, 8)
    assert spins > 100 and result.cpe[0].float_ops == spins   # one per poll of the reply
