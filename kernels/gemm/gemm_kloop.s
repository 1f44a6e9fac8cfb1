# The thesis' register-communication GEMM inner loop (Fang 2019, listing 4.1), in swsim syntax.
#
# One step T = 0 of the 8x8 SUMMA-like algorithm: CPE (i, 0) holds A_i (K x 16 doubles, k-major,
# 128 bytes per k) and broadcasts it along its row with vldr; CPE (0, j) holds B_j (K x 4
# doubles, 32 bytes per k) and broadcasts splats along its column with lddec; every CPE (i, j)
# accumulates C_ij[16 x 4] += A_i^T B_j in 16 vector registers. The four roles (row
# send/receive x column send/receive) run the same 16-cycle schedule: one vmad per cycle on P0,
# the 8 fetches (load-and-broadcast or get), 2 pointer updates, the counter and the branch on P1.
#
# The schedule is KBODY of gemm_kbody.inc, shared with the LDM GEMM primitive: a register is
# reloaded after its last use in the iteration and >= 4 cycles before its first use in the next
# one; A2, A3, B3 are fetched for the current k (slots 1-3), A0, A1, B0, B1, B2 for k + 1.
#
# Arguments: a0 = K (iterations, >= 1), a1 = A_all (memory, 8 x (K+1) x 16 doubles),
#            a2 = B_all (memory, 8 x (K+1) x 4 doubles), a3 = out (memory, 64 x 640 bytes:
#            C_ij as 16 x 4 doubles (m-major vectors: C[m][n] = lanes of 4 consecutive m), then
#            the loop's cycle count at +512).
# The loop fetches one k beyond K (the extra data is loaded and discarded by every role alike).

	.set	noreorder
	.text
	.globl	gemm_kloop

	REPLY = 0             # DMA reply word (low LDM: reachable as a displacement from $31)
	C_LDM = 0x20          # the result (640 bytes)
	A_LDM = 0x400         # the A tile ((K+1) x 128 bytes, K <= 191)
	B_LDM = 0x6400        # the B tile ((K+1) x 32 bytes)

	GEMM_DIR = 0          # the vector operand A comes along rows (vldr / getr)
	GEMM_SINGLE = 0
	GEMM_ES = 8
	.include "gemm_kbody.inc"

# One role's loop: rs / cs = 1 if this CPE sends along the row / column. The loop registers are
# those of KBODY: $24 / $25 A / B pointers, $26 / $28 their strides per k, $27 the counter.
	.macro	KLOOP rs, cs
	# The operands of k = 0, fetched as the loop's "next k" slots do. Every role takes them
	# before the timer starts, so the loop time excludes the wait for the senders' DMA.
	FETCHV	$0, 0, \rs
	FETCHV	$1, 1, \rs
	FETCHS	$4, 0, \cs
	FETCHS	$5, 1, \cs
	FETCHS	$6, 2, \cs
	rtc	$29
kloop_\rs\()\cs:                # e.g. swsim analyze kernels/gemm/gemm_kloop.s --loop kloop_00
	KBODY	\rs, \cs, 0, kloop_\rs\()\cs
	rtc	$28
	br	$31, .Ldone
	.endm

	.include "../include/dma.inc"

	.ent	gemm_kloop
gemm_kloop:
	ldi	$sp, -32($sp)
	.frame	$30, 32, $26, 0
	mov	$16, $27              # K
	stl	$19, 0($sp)           # out (needed after the loop; $19 is an accumulator)
	stl	$26, 8($sp)           # ra ($26 is the loop's A stride)
	rcid	$28
	and	$28, 7, $0            # column j
	srl	$28, 3, $1            # row i
	# Row senders (j == 0) fetch A_i, column senders (i == 0) fetch B_j.
	addl	$27, 1, $2            # K + 1 rows of operands
	bne	$0, .Lno_a
	sll	$2, 7, $3             # (K+1) * 128 bytes
	mull	$1, $3, $4
	addl	$17, $4, $4           # &A_all[i]
	MAKE_DESC $5, DMA_GET, 0, REPLY
	DESC_SET_SIZE $5, $3          # size = (K+1) * 128
	ldi	$6, A_LDM
	DMA_WAIT $5, $4, $6, REPLY
.Lno_a:
	bne	$1, .Lno_b
	sll	$2, 5, $3             # (K+1) * 32 bytes
	mull	$0, $3, $4
	addl	$18, $4, $4           # &B_all[j]
	MAKE_DESC $5, DMA_GET, 0, REPLY
	DESC_SET_SIZE $5, $3
	ldi	$6, B_LDM
	DMA_WAIT $5, $4, $6, REPLY
.Lno_b:
	ldi	$24, A_LDM
	ldi	$25, B_LDM
	ldi	$26, 128              # A: 16 doubles per k
	ldi	$28, 32               # B: 4 doubles per k
	.irp	r, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23
	vcpyf	$31, $\r
	.endr
	# Dispatch on the role: $0 = column (row sender iff 0), $1 = row (column sender iff 0).
	bne	$0, .Lrow_recv
	bne	$1, .Lrs_cr
	KLOOP	1, 1
.Lrs_cr:
	KLOOP	1, 0
.Lrow_recv:
	bne	$1, .Lrr_cr
	KLOOP	0, 1
.Lrr_cr:
	KLOOP	0, 0

.Ldone:
	subl	$28, $29, $28
	stl	$28, C_LDM + 512($31)
	ldi	$24, C_LDM
	.irp	r, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23
	vstd	$\r, 0($24)
	ldi	$24, 32($24)
	.endr
	rcid	$28
	ldi	$2, 640
	mull	$28, $2, $2
	ldl	$3, 0($sp)
	addl	$3, $2, $3            # &out[id]
	MAKE_DESC $5, DMA_PUT, 640, REPLY
	ldi	$6, C_LDM
	DMA_WAIT $5, $3, $6, REPLY
	ldl	$26, 8($sp)
	ldi	$sp, 32($sp)
	ret
	.end	gemm_kloop
