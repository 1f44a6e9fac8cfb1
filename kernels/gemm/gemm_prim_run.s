# Host-driver kernel for the LDM GEMM primitive (hostlib/blas/primitive.py): DMA every CPE's A, B and
# C blocks from main memory into LDM, line the 64 CPEs up with a barrier, call the primitive
# between two rtc reads, DMA C back.
#
# Arguments: a0 = the primitive's code address (any entry of gemm_prim.s), a1 = the job
# (main memory, RUN_JOB_BYTES: the int64 fields J_* below), a2 = out (main memory, 64 x 16
# bytes: each CPE's rtc right after the barrier and right after the primitive returned).
# Block b of CPE id lives in main memory at X_mem + id * X_bytes.

	.set	noreorder
	.include "gemm_prim.inc"
	.include "../include/dma.inc"

	J_A_MEM = 0
	J_B_MEM = 8
	J_C_MEM = 16
	J_A_LDM = 24
	J_B_LDM = 32
	J_C_LDM = 40
	J_WORK_LDM = 48
	J_A_BYTES = 56
	J_B_BYTES = 64
	J_C_BYTES = 72
	J_MB = 80
	J_NB = 88
	J_KB = 96
	RUN_JOB_BYTES = 128

	.ldm
	.align	5
REPLY:	.skip	32
TIMES:	.skip	32            # start and end rtc
JOB:	.skip	RUN_JOB_BYTES
	.globl	gemm_run_ldm_end      # the host places the blocks from here up
gemm_run_ldm_end:

	RUN_FRAME = 64        # 0: the primitive's stack argument, 32: ra, 40: primitive, 48: out
	.globl	gemm_prim_run_stack   # the stack of the call chain, for the host's LDM plan
	gemm_prim_run_stack = RUN_FRAME + GEMM_PRIM_STACK

	.text
# BLOCK_DMA op, field: get/put this CPE's block `field` (A, B or C) without waiting;
# $1 = CPE id. Temporaries $2-$6, $29.
	.macro	BLOCK_DMA op, field
	ldl	$2, JOB + J_\field\()_BYTES($31)
	ldl	$3, JOB + J_\field\()_MEM($31)
	ldl	$4, JOB + J_\field\()_LDM($31)
	mull	$1, $2, $5
	addl	$3, $5, $3
	MAKE_DESC $6, \op, 0, REPLY
	DESC_SET_SIZE $6, $2
	dma	$6, $3, $4
	.endm

# WAIT_REPLY n: spin until n DMAs have completed since the reply word was cleared.
	.macro	WAIT_REPLY n
1:	ldw	$2, REPLY($31)
	cmplt	$2, \n, $2
	bne	$2, 1b
	.endm

	.globl	gemm_prim_run
	.ent	gemm_prim_run
gemm_prim_run:
	ldi	$sp, -RUN_FRAME($sp)
	.frame	$30, RUN_FRAME, $26, 0
	stl	$26, 32($sp)
	stl	$16, 40($sp)
	stl	$18, 48($sp)
	MAKE_DESC $6, DMA_GET, RUN_JOB_BYTES, REPLY
	ldi	$4, JOB
	DMA_WAIT $6, $17, $4, REPLY
	rcid	$1
	stw	$31, REPLY($31)
	BLOCK_DMA DMA_GET, A
	BLOCK_DMA DMA_GET, B
	BLOCK_DMA DMA_GET, C
	WAIT_REPLY 3
	ldl	$16, JOB + J_A_LDM($31)
	ldl	$17, JOB + J_B_LDM($31)
	ldl	$18, JOB + J_C_LDM($31)
	ldl	$19, JOB + J_MB($31)
	ldl	$20, JOB + J_NB($31)
	ldl	$21, JOB + J_KB($31)
	ldl	$1, JOB + J_WORK_LDM($31)
	stl	$1, 0($sp)
	ldl	$27, 40($sp)
	synr	0xff
	sync	0xff
	rtc	$1
	stl	$1, TIMES($31)
	call	$26, ($27)
	rtc	$1
	stl	$1, TIMES + 8($31)
	rcid	$1
	stw	$31, REPLY($31)
	BLOCK_DMA DMA_PUT, C
	ldl	$3, 48($sp)
	sll	$1, 4, $2
	addl	$3, $2, $3            # &out[id]
	MAKE_DESC $6, DMA_PUT, 16, REPLY
	ldi	$4, TIMES
	dma	$6, $3, $4
	WAIT_REPLY 2
	ldl	$26, 32($sp)
	ldi	$sp, RUN_FRAME($sp)
	ret
	.end	gemm_prim_run
