# One training step of the MLP 256 -> 64 -> 10 (FC, ReLU, FC, softmax cross-entropy) on ONE
# CPE, per ParaX instance (docs/parax.md "Training"; hostlib/parax/mlp.py is the host side).
# Each spawned CPE is an instance with its own batch of M_NSAMP samples (even, 2..B_MAX), its
# data in its LDM. The parameters W (one shared copy in main memory, f32) are
#   W1 [256][64] | b1 [64] | W2 [64][12] | b2 [12]     (W2, b2: columns 10, 11 zero)
# W1 (64 KiB) does not fit an LDM beside anything else: it is streamed in chunks of
# CHUNK_ROWS rows, double-buffered (the next chunk's get runs under this chunk's compute). The
# instance writes its gradient G (same layout, the mean over its batch) and its softmax
# probabilities (b x 12 f32; the host reads the loss and accuracy from them).
#
#   h = relu(x W1 + b1)        h[s][j] = b1[j] + x[s][0] W1[0][j] + x[s][1] W1[1][j] + ...
#   z = h W2 + b2              (each sum in that order, one fused f32 multiply-add per term)
#   p = softmax(z)             e = exp(z - max z) (vmath.inc's vexp_s), p = e (1 / sum e)
#   dz = (p - y) (1 / b)       y one-hot
#   dW2 = h^T dz, db2 = sum_s dz, dh = dz W2^T masked by h > 0, dW1 = x^T dh, db1 = sum_s dh
#     (sums over the samples in sample order, over the outputs in output order)
#
# The FC loops are AXPY16: 16 vector accumulators (64 f32 outputs) += a scalar x 16 vectors,
# software-pipelined so that every vmas issues beside a load of the next row.

	.set	noreorder
	.include "../include/dma.inc"
	.include "../dnn/vmath.inc"
	.include "parax.inc"

	M_NSAMP = 0           # samples of this instance (even, 2..B_MAX)
	M_X = 8               # its samples, b x 256 f32
	M_Y = 16              # their one-hot labels, b x 12 f32
	M_W = 24              # the shared parameters
	M_G = 32              # this instance's gradient (PARAMS f32)
	M_P = 40              # its probabilities out, b x 12 f32
	M_INVB = 48           # 1 / b, a double
	MJOB_BYTES = 64

	B_MAX = 8
	IN = 256
	HID = 64
	OUT_PAD = 12
	X_ROW = IN * 4
	H_ROW = HID * 4
	Z_ROW = OUT_PAD * 4
	W1_BYTES = IN * H_ROW                 # 65536
	CHUNK_ROWS = 16
	CHUNK_BYTES = CHUNK_ROWS * H_ROW
	CHUNKS = IN / CHUNK_ROWS
	TAIL_BYTES = H_ROW + HID * Z_ROW + Z_ROW   # b1, W2, b2: 3376
	W2_AT = H_ROW                              # offsets in the tail
	B2_AT = H_ROW + HID * Z_ROW
	PARAMS = W1_BYTES / 4 + TAIL_BYTES / 4     # 17228

	.ldm
	.align	5
RPLY:	.long	0             # reply words: one request at a time / W1 chunks / dW1 chunks
RPLYW:	.long	0
RPLYG:	.long	0
	.long	0
SAVE_RA:
	.quad	0
MASKSEL:
	.quad	0
V_C:	.quad	0             # loop state kept in LDM across AXPY16 (it uses every register)
V_I:	.quad	0
	.align	5
MJOB:	.skip	MJOB_BYTES
	.align	5
X:	.skip	B_MAX * X_ROW
Y:	.skip	B_MAX * Z_ROW
TAIL:	.skip	TAIL_BYTES + 16
	.align	5
GTAIL:	.skip	TAIL_BYTES + 16
	.align	5
H:	.skip	B_MAX * H_ROW         # h, then relu(h)
DH:	.skip	B_MAX * H_ROW
Z:	.skip	B_MAX * Z_ROW         # z, then z - max z, then e, then dz
P:	.skip	B_MAX * Z_ROW
W2T:	.skip	10 * H_ROW
	.align	5
WBUF:	.skip	2 * CHUNK_BYTES       # W1 chunks, then dW1 chunks (double buffer)
	.skip	512                   # AXPY16 loads a row past its last (unused)
	.align	5
	.globl	mlp_ldm_end
mlp_ldm_end:

	.text

# ROW16 xc, xn, xs, rs: acc $0-$15 += xc R, R the 16 vectors at $25 whose first 8 are in
# $17-$24; meanwhile load R's last 8, the next x (xs bytes on from $27) into xn and the next
# R's first 8 (rs bytes on), and advance $25, $27.
	.macro	ROW16 xc, xn, xs, rs
	vmas	\xc, $17, $0, $0
	vlds	$17, 128($25)
	vmas	\xc, $18, $1, $1
	vlds	$18, 144($25)
	vmas	\xc, $19, $2, $2
	vlds	$19, 160($25)
	vmas	\xc, $20, $3, $3
	vlds	$20, 176($25)
	vmas	\xc, $21, $4, $4
	vlds	$21, 192($25)
	vmas	\xc, $22, $5, $5
	vlds	$22, 208($25)
	vmas	\xc, $23, $6, $6
	vlds	$23, 224($25)
	vmas	\xc, $24, $7, $7
	vlds	$24, 240($25)
	vmas	\xc, $17, $8, $8
	ldse	\xn, \xs($27)
	vmas	\xc, $18, $9, $9
	vlds	$17, \rs + 0($25)
	vmas	\xc, $19, $10, $10
	vlds	$18, \rs + 16($25)
	vmas	\xc, $20, $11, $11
	vlds	$19, \rs + 32($25)
	vmas	\xc, $21, $12, $12
	vlds	$20, \rs + 48($25)
	vmas	\xc, $22, $13, $13
	vlds	$21, \rs + 64($25)
	vmas	\xc, $23, $14, $14
	vlds	$22, \rs + 80($25)
	vmas	\xc, $24, $15, $15
	vlds	$23, \rs + 96($25)
	vlds	$24, \rs + 112($25)
	ldi	$25, \rs($25)
	ldi	$27, \xs($27)
	.endm

# AXPY16 xs, rs: acc $0-$15 += sum over k < $28 (even, >= 2) of x_k R_k, x_k the f32 at
# $27 + k xs, R_k the 16 vectors at $25 + k rs, in k order. Clobbers $16-$28.
	.macro	AXPY16 xs, rs
	ldse	$16, 0($27)
	vlds	$17, 0($25)
	vlds	$18, 16($25)
	vlds	$19, 32($25)
	vlds	$20, 48($25)
	vlds	$21, 64($25)
	vlds	$22, 80($25)
	vlds	$23, 96($25)
	vlds	$24, 112($25)
1:	ROW16	$16, $26, \xs, \rs
	ROW16	$26, $16, \xs, \rs
	subl	$28, 2, $28
	bgt	$28, 1b
	.endm

# VEC16 op, base: op (vlds or vsts) $0-$15 at base ($-register).
	.macro	VEC16 op, base
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	\op	$\k, 16 * \k(\base)
	.endr
	.endm

	.macro	ZERO16
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vfmov	$31, $\k
	.endr
	.endm

# GET_CHUNK c: get W1's chunk c (register) into WBUF half c mod 2, counted in RPLYW.
	.macro	GET_CHUNK c
	MAKE_DESC $1, DMA_GET, CHUNK_BYTES, RPLYW
	ldl	$2, MJOB + M_W($31)
	sll	\c, 12, $3            # CHUNK_BYTES per chunk
	addl	$2, $3, $2
	and	\c, 1, $3
	sll	$3, 12, $3
	ldi	$3, WBUF($3)
	dma	$1, $2, $3
	.endm

	.globl	parax_mlp
	.ent	parax_mlp
parax_mlp:
	ENTER_WITH_JOB MJOB, MJOB_BYTES
	stw	$31, RPLY($31)
	stw	$31, RPLYW($31)
	stw	$31, RPLYG($31)
	ldl	$9, MJOB + M_NSAMP($31)
	MAKE_DESC $1, DMA_GET, 0, RPLY
	sll	$9, 10, $2            # X_ROW per sample
	DESC_SET_SIZE $1, $2
	ldl	$2, MJOB + M_X($31)
	ldi	$3, X
	dma	$1, $2, $3
	MAKE_DESC $1, DMA_GET, 0, RPLY
	mull	$9, Z_ROW, $2
	DESC_SET_SIZE $1, $2
	ldl	$2, MJOB + M_Y($31)
	ldi	$3, Y
	dma	$1, $2, $3
	MAKE_DESC $1, DMA_GET, TAIL_BYTES, RPLY
	ldl	$2, MJOB + M_W($31)
	ldih	$2, 1($2)             # + W1_BYTES
	ldi	$3, TAIL
	dma	$1, $2, $3
	clr	$4
	GET_CHUNK $4
	WAIT_REPLY 3
	ldi	$20, H                # h[s] = b1
	mov	$9, $21
	ldi	$22, TAIL
11:	VEC16	vlds, $22
	VEC16	vsts, $20
	ldi	$20, H_ROW($20)
	subl	$21, 1, $21
	bgt	$21, 11b

	stl	$31, V_C($31)         # h[s] += x[s][rows of chunk c] W1[chunk c]
12:	ldl	$10, V_C($31)
	addl	$10, 1, $4            # the next chunk's get, under this one's compute
	cmplt	$4, CHUNKS, $5
	beq	$5, 13f
	GET_CHUNK $4
13:	ldl	$5, V_C($31)
	addl	$5, 1, $5
	WAIT_COUNT RPLYW, $5
	stl	$31, V_I($31)
14:	ldl	$10, V_C($31)
	ldl	$11, V_I($31)
	sll	$11, 8, $20           # H_ROW per sample
	ldi	$20, H($20)
	sll	$11, 10, $27          # x[s][16 c]
	sll	$10, 6, $1
	addl	$27, $1, $27
	ldi	$27, X($27)
	and	$10, 1, $25
	sll	$25, 12, $25
	ldi	$25, WBUF($25)
	ldi	$28, CHUNK_ROWS
	VEC16	vlds, $20
	AXPY16	4, H_ROW
	ldl	$20, V_I($31)
	addl	$20, 1, $21
	stl	$21, V_I($31)
	sll	$20, 8, $20
	ldi	$20, H($20)
	VEC16	vsts, $20
	ldl	$9, MJOB + M_NSAMP($31)
	cmplt	$21, $9, $1
	bne	$1, 14b
	ldl	$10, V_C($31)
	addl	$10, 1, $10
	stl	$10, V_C($31)
	cmplt	$10, CHUNKS, $1
	bne	$1, 12b

	ldih	$1, 0x7755($31)       # relu in place (as block.s's relu_f32)
	ldi	$1, 0x3311($1)
	stl	$1, MASKSEL($31)
	ldi	$2, H
	sll	$9, 4, $3             # vectors
15:	vlds	$4, 0($2)
	vsraw	$4, 31, $5
	vshfw	$5, $5, $1, $5
	vbicw	$4, $5, $4
	vsts	$4, 0($2)
	ldi	$2, 16($2)
	subl	$3, 1, $3
	bgt	$3, 15b

	ldi	$20, H                # z[s] = b2 + sum_j h[s][j] W2[j]
	ldi	$21, Z
	mov	$9, $22
36:	vlds	$0, TAIL + B2_AT($31)
	vlds	$1, TAIL + B2_AT + 16($31)
	vlds	$2, TAIL + B2_AT + 32($31)
	ldi	$23, TAIL + W2_AT
	ldi	$24, HID
37:	ldse	$16, 0($20)
	vlds	$17, 0($23)
	vlds	$18, 16($23)
	vlds	$19, 32($23)
	vmas	$16, $17, $0, $0
	vmas	$16, $18, $1, $1
	vmas	$16, $19, $2, $2
	ldi	$20, 4($20)
	ldi	$23, Z_ROW($23)
	subl	$24, 1, $24
	bgt	$24, 37b
	vsts	$0, 0($21)
	vsts	$1, 16($21)
	vsts	$2, 32($21)
	flds	$3, 0($21)            # z - max z (max over the 10 outputs)
	ldi	$5, 4
38:	addl	$21, $5, $6
	flds	$4, 0($6)
	fcmplt	$3, $4, $6
	selne	$6, $4, $3, $3
	ldi	$5, 4($5)
	cmplt	$5, 40, $6
	bne	$6, 38b
	vcpyf	$3, $3
	vsubs	$0, $3, $0
	vsubs	$1, $3, $1
	vsubs	$2, $3, $2
	vsts	$0, 0($21)
	vsts	$1, 16($21)
	vsts	$2, 32($21)
	ldi	$21, Z_ROW($21)
	subl	$22, 1, $22
	bgt	$22, 36b

	ldi	$16, Z                # e = exp(z - max z), all samples at once
	mov	$16, $17
	mull	$9, 3, $18
	bsr	$26, vexp_s
	ldl	$9, MJOB + M_NSAMP($31)
	ldde	$8, MJOB + M_INVB($31)
	ldi	$20, Z
	ldi	$21, P
	ldi	$22, Y
	mov	$9, $23
31:	stw	$31, 40($20)          # the padding outputs: e = 0
	stw	$31, 44($20)
	flds	$3, 0($20)            # sum e, in output order
	ldi	$5, 4
32:	addl	$20, $5, $6
	flds	$4, 0($6)
	fadds	$3, $4, $3
	ldi	$5, 4($5)
	cmplt	$5, 40, $6
	bne	$6, 32b
	ldih	$4, 0x3ff0($31)       # 1.0 (a double)
	sll	$4, 32, $4
	fdivs	$4, $3, $3
	vcpyf	$3, $3
	.irp	k, 0, 1, 2
	vlds	$0, 16 * \k($20)
	vmuls	$0, $3, $0            # p = e (1 / sum e)
	vsts	$0, 16 * \k($21)
	vlds	$1, 16 * \k($22)
	vsubs	$0, $1, $0            # dz = (p - y) (1 / b)
	vmuls	$0, $8, $0
	vsts	$0, 16 * \k($20)
	.endr
	ldi	$20, Z_ROW($20)
	ldi	$21, Z_ROW($21)
	ldi	$22, Z_ROW($22)
	subl	$23, 1, $23
	bgt	$23, 31b

	ldi	$20, H                # dW2[j] = sum_s h[s][j] dz[s]
	ldi	$21, GTAIL + W2_AT
	ldi	$24, HID
33:	vfmov	$31, $0
	vfmov	$31, $1
	vfmov	$31, $2
	mov	$20, $22
	ldi	$23, Z
	mov	$9, $25
34:	ldse	$16, 0($22)
	vlds	$17, 0($23)
	vlds	$18, 16($23)
	vlds	$19, 32($23)
	vmas	$16, $17, $0, $0
	vmas	$16, $18, $1, $1
	vmas	$16, $19, $2, $2
	ldi	$22, H_ROW($22)
	ldi	$23, Z_ROW($23)
	subl	$25, 1, $25
	bgt	$25, 34b
	vsts	$0, 0($21)
	vsts	$1, 16($21)
	vsts	$2, 32($21)
	ldi	$20, 4($20)
	ldi	$21, Z_ROW($21)
	subl	$24, 1, $24
	bgt	$24, 33b
	vfmov	$31, $0               # db2 = sum_s dz[s]
	vfmov	$31, $1
	vfmov	$31, $2
	ldi	$23, Z
	mov	$9, $25
35:	vlds	$17, 0($23)
	vlds	$18, 16($23)
	vlds	$19, 32($23)
	vadds	$0, $17, $0
	vadds	$1, $18, $1
	vadds	$2, $19, $2
	ldi	$23, Z_ROW($23)
	subl	$25, 1, $25
	bgt	$25, 35b
	vsts	$0, GTAIL + B2_AT($31)
	vsts	$1, GTAIL + B2_AT + 16($31)
	vsts	$2, GTAIL + B2_AT + 32($31)

	ldi	$20, TAIL + W2_AT     # W2T[o][j] = W2[j][o], o < 10
	ldi	$21, W2T
	ldi	$24, HID
36:	.irp	o, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
	ldw	$1, 4 * \o($20)
	stw	$1, H_ROW * \o($21)
	.endr
	ldi	$20, Z_ROW($20)
	ldi	$21, 4($21)
	subl	$24, 1, $24
	bgt	$24, 36b

	stl	$31, V_I($31)         # dh[s] = (sum_o dz[s][o] W2T[o]) where h[s] > 0
16:	ldl	$11, V_I($31)
	mull	$11, Z_ROW, $27
	ldi	$27, Z($27)
	ldi	$25, W2T
	ldi	$28, 10
	ZERO16
	AXPY16	4, H_ROW
	ldl	$20, V_I($31)
	sll	$20, 8, $20
	ldl	$17, MASKSEL($31)
	ldi	$21, H($20)
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vlds	$16, 16 * \k($21)
	vsubs	$31, $16, $16         # 0 - h: its sign is set exactly when h > 0
	vsraw	$16, 31, $16
	vshfw	$16, $16, $17, $16
	vandw	$\k, $16, $\k
	.endr
	ldi	$20, DH($20)
	VEC16	vsts, $20
	ldl	$11, V_I($31)
	addl	$11, 1, $11
	stl	$11, V_I($31)
	ldl	$9, MJOB + M_NSAMP($31)
	cmplt	$11, $9, $1
	bne	$1, 16b
	ZERO16                        # db1 = sum_s dh[s]
	ldi	$20, DH
	ldl	$21, MJOB + M_NSAMP($31)
17:	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vlds	$16, 16 * \k($20)
	vadds	$\k, $16, $\k
	.endr
	ldi	$20, H_ROW($20)
	subl	$21, 1, $21
	bgt	$21, 17b
	ldi	$20, GTAIL
	VEC16	vsts, $20

	stl	$31, V_C($31)         # dW1[i] = sum_s x[s][i] dh[s], a chunk at a time
18:	ldl	$10, V_C($31)
	cmplt	$10, 2, $1            # its buffer's previous put has landed
	bne	$1, 19f
	subl	$10, 1, $2
	WAIT_COUNT RPLYG, $2
19:	sll	$10, 4, $10           # first row
	stl	$10, V_I($31)
20:	ldl	$10, V_I($31)
	sll	$10, 2, $27           # x[0][i]
	ldi	$27, X($27)
	ldi	$25, DH
	ldl	$28, MJOB + M_NSAMP($31)
	ZERO16
	AXPY16	X_ROW, H_ROW
	ldl	$20, V_I($31)
	addl	$20, 1, $21
	stl	$21, V_I($31)
	and	$20, 2 * CHUNK_ROWS - 1, $20   # its row in the double buffer
	sll	$20, 8, $20
	ldi	$20, WBUF($20)
	VEC16	vsts, $20
	and	$21, CHUNK_ROWS - 1, $1
	bne	$1, 20b
	ldl	$10, V_C($31)
	MAKE_DESC $1, DMA_PUT, CHUNK_BYTES, RPLYG
	ldl	$2, MJOB + M_G($31)
	sll	$10, 12, $3
	addl	$2, $3, $2
	and	$10, 1, $4
	sll	$4, 12, $4
	ldi	$4, WBUF($4)
	dma	$1, $2, $4
	addl	$10, 1, $10
	stl	$10, V_C($31)
	cmplt	$10, CHUNKS, $1
	bne	$1, 18b
	MAKE_DESC $1, DMA_PUT, TAIL_BYTES, RPLY
	ldl	$2, MJOB + M_G($31)
	ldih	$2, 1($2)             # + W1_BYTES
	ldi	$3, GTAIL
	dma	$1, $2, $3
	ldl	$9, MJOB + M_NSAMP($31)
	MAKE_DESC $1, DMA_PUT, 0, RPLY
	mull	$9, Z_ROW, $2
	DESC_SET_SIZE $1, $2
	ldl	$2, MJOB + M_P($31)
	ldi	$3, P
	dma	$1, $2, $3
	WAIT_REPLY 2
	ldi	$2, CHUNKS
	WAIT_COUNT RPLYG, $2
	ldl	$26, SAVE_RA($31)
	ret
	.end	parax_mlp
