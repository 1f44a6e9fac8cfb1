# The thesis' register-communication GEMM inner loop (Fang 2019, listing 4.1), in swsim syntax.
#
# One step T = 0 of the 8x8 SUMMA-like algorithm: CPE (i, 0) holds A_i (K x 16 doubles, k-major,
# 128 bytes per k) and broadcasts it along its row with vldr; CPE (0, j) holds B_j (K x 4
# doubles, 32 bytes per k) and broadcasts splats along its column with lddec; every CPE (i, j)
# accumulates C_ij[16 x 4] += A_i^T B_j in 16 vector registers. The four roles (row
# send/receive x column send/receive) run the same 16-cycle schedule: one vmad per cycle on P0,
# the 8 fetches (load-and-broadcast or get), 2 pointer updates, the counter and the branch on P1.
#
# Schedule (cycle: vmad C[m][n] = A_m * B_n + C[m][n]; P1 fetch slots). A register is reloaded
# after its last use in the iteration and >= 4 cycles before its first use in the next one:
#   A2, A3, B3 are fetched for the current k (slots 1-3), A0, A1, B0, B1, B2 for k + 1.
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

# FETCHA reg, off: row operand (vector). Row senders load and broadcast, receivers get.
	.macro	FETCHA reg, off, send
	.if \send
	vldr	\reg, \off($24)
	.else
	getr	\reg
	.endif
	.endm
# FETCHB reg, off: column operand (splatted double).
	.macro	FETCHB reg, off, send
	.if \send
	lddec	\reg, \off($25)
	.else
	getc	\reg
	.endif
	.endm
	.macro	BUMP reg, bytes, send
	.if \send
	ldi	\reg, \bytes(\reg)
	.endif
	.endm

# One role's loop: rs / cs = 1 if this CPE sends along the row / column.
	.macro	KLOOP rs, cs
	FETCHA	$0, 0, \rs            # prologue: the operands of k = 0 fetched by the loop's
	FETCHA	$1, 32, \rs           # "next k" slots
	FETCHB	$4, 0, \cs
	FETCHB	$5, 8, \cs
	FETCHB	$6, 16, \cs
	rtc	$29
1:
	vmad	$0, $4, $8, $8        # 0  C00
	vmad	$1, $4, $9, $9        # 1  C10
	FETCHB	$7, 24, \cs           #    B3 (this k)
	vmad	$0, $5, $10, $10      # 2  C01
	FETCHA	$2, 64, \rs           #    A2 (this k)
	vmad	$1, $5, $11, $11      # 3  C11
	FETCHA	$3, 96, \rs           #    A3 (this k)
	vmad	$0, $6, $12, $12      # 4  C02
	BUMP	$24, 128, \rs
	vmad	$1, $6, $13, $13      # 5  C12
	BUMP	$25, 32, \cs
	vmad	$0, $7, $14, $14      # 6  C03
	vmad	$1, $7, $15, $15      # 7  C13
	FETCHA	$0, 0, \rs            #    A0 (next k)
	vmad	$2, $4, $16, $16      # 8  C20
	subl	$27, 1, $27
	vmad	$3, $4, $17, $17      # 9  C30
	FETCHA	$1, 32, \rs           #    A1 (next k)
	vmad	$2, $5, $18, $18      # 10 C21
	vmad	$3, $5, $19, $19      # 11 C31
	FETCHB	$4, 0, \cs            #    B0 (next k)
	vmad	$2, $6, $20, $20      # 12 C22
	vmad	$3, $6, $21, $21      # 13 C32
	FETCHB	$5, 8, \cs            #    B1 (next k)
	vmad	$2, $7, $22, $22      # 14 C23
	FETCHB	$6, 16, \cs           #    B2 (next k)
	vmad	$3, $7, $23, $23      # 15 C33
	bgt	$27, 1b
	rtc	$28
	br	$31, .Ldone
	.endm

	.include "dma.inc"

	.ent	gemm_kloop
gemm_kloop:
	ldi	$sp, -32($sp)
	.frame	$30, 32, $26, 0
	mov	$16, $27              # K
	stl	$19, 0($sp)           # out (needed after the loop; $19 is an accumulator)
	rcid	$28
	and	$28, 7, $0            # column j
	srl	$28, 3, $1            # row i
	# Row senders (j == 0) fetch A_i, column senders (i == 0) fetch B_j.
	addl	$27, 1, $2            # K + 1 rows of operands
	bne	$0, .Lno_a
	sll	$2, 7, $3             # (K+1) * 128 bytes
	mull	$1, $3, $4
	addl	$17, $4, $4           # &A_all[i]
	MAKE_DESC $5, 0, 0, REPLY
	vinsw	$3, $5, 1, $5         # size = (K+1) * 128
	ldi	$6, A_LDM
	DMA_WAIT $5, $4, $6, REPLY
.Lno_a:
	bne	$1, .Lno_b
	sll	$2, 5, $3             # (K+1) * 32 bytes
	mull	$0, $3, $4
	addl	$18, $4, $4           # &B_all[j]
	MAKE_DESC $5, 0, 0, REPLY
	vinsw	$3, $5, 1, $5
	ldi	$6, B_LDM
	DMA_WAIT $5, $4, $6, REPLY
.Lno_b:
	ldi	$24, A_LDM
	ldi	$25, B_LDM
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
	MAKE_DESC $5, 1, 640, REPLY
	ldi	$6, C_LDM
	DMA_WAIT $5, $3, $6, REPLY
	ldi	$sp, 32($sp)
	ret
	.end	gemm_kloop
