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

# The FC loops' 16 vector accumulators (64 f32 outputs) are $0-$7 and $10-$17, so that `.irp`
# names both halves ($\k, $1\k); AXPY16's row of 16 vectors passes through $20-$27.

# ROW16 xc, xn, xs, rs: acc += xc R, R the 16 vectors at $18 whose first 8 are in $20-$27;
# every vmas issues beside a load: R's last 8, then the next x (xs bytes on from $19) into xn
# and the next R's first 8 (rs bytes on). Advances $18, $19.
	.macro	ROW16 xc, xn, xs, rs
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vmas	\xc, $2\k, $\k, $\k
	vlds	$2\k, 128 + 16 * \k($18)
	.endr
	ldse	\xn, \xs($19)
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vmas	\xc, $2\k, $1\k, $1\k
	vlds	$2\k, \rs + 16 * \k($18)
	.endr
	ldi	$18, \rs($18)
	ldi	$19, \xs($19)
	.endm

# AXPY16 xs, rs: acc += sum over k < $28 (even, >= 2) of x_k R_k, x_k the f32 at $19 + k xs,
# R_k the 16 vectors at $18 + k rs, in k order. Clobbers $8, $9, $18-$28.
	.macro	AXPY16 xs, rs
	ldse	$8, 0($19)
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vlds	$2\k, 16 * \k($18)
	.endr
1:	ROW16	$8, $9, \xs, \rs
	ROW16	$9, $8, \xs, \rs
	subl	$28, 2, $28
	bgt	$28, 1b
	.endm

# VEC16 op, base: op (vlds or vsts) the accumulators at base ($-register, not one of them).
	.macro	VEC16 op, base
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	\op	$\k, 16 * \k(\base)
	\op	$1\k, 128 + 16 * \k(\base)
	.endr
	.endm

	.macro	ZERO16
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vfmov	$31, $\k
	vfmov	$31, $1\k
	.endr
	.endm

# MASK_BY_SIGN_OF_MINUS acc, offset: acc = acc where h > 0 (h at offset($21)), else +0: the
# sign of 0 - h is set exactly when h > 0 (h = +0 gives +0); $9 holds relu's word selector.
	.macro	MASK_BY_SIGN_OF_MINUS acc, offset
	vlds	$8, \offset($21)
	vsubs	$31, $8, $8
	vsraw	$8, 31, $8
	vshfw	$8, $8, $9, $8
	vandw	\acc, $8, \acc
	.endm

# AXPY3 x, xs, count: acc $0-$2 += sum over k < count (a register, >= 1) of x_k R_k, x_k the
# f32 at x + k xs, R_k the 3 vectors at $23 + k Z_ROW (a row of z). Advances x, $23.
	.macro	AXPY3 x, xs, count
1:	ldse	$16, 0(\x)
	.irp	k, 0, 1, 2
	vlds	$1\k, 16 * \k($23)
	vmas	$16, $1\k, $\k, $\k
	.endr
	ldi	\x, \xs(\x)
	ldi	$23, Z_ROW($23)
	subl	\count, 1, \count
	bgt	\count, 1b
	.endm

# DMA_ROWS op, field, ldm, row: issue (no wait; RPLY counts) a DMA of M_NSAMP x `row` bytes
# between the address in the job's `field` and LDM `ldm`.
	.macro	DMA_ROWS op, field, ldm, row
	MAKE_DESC $1, \op, 0, RPLY
	ldl	$2, MJOB + M_NSAMP($31)
	ldi	$3, \row
	mull	$2, $3, $2
	DESC_SET_SIZE $1, $2
	ldl	$2, MJOB + \field($31)
	ldi	$3, \ldm
	dma	$1, $2, $3
	.endm

# DMA_TAIL op, field, ldm: the same for the TAIL_BYTES after W1 in the parameter-shaped
# vector at the job's `field`.
	.macro	DMA_TAIL op, field, ldm
	MAKE_DESC $1, \op, TAIL_BYTES, RPLY
	ldl	$2, MJOB + \field($31)
	ldih	$2, 1($2)             # + W1_BYTES
	ldi	$3, \ldm
	dma	$1, $2, $3
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
	DMA_ROWS DMA_GET, M_X, X, X_ROW
	DMA_ROWS DMA_GET, M_Y, Y, Z_ROW
	DMA_TAIL DMA_GET, M_W, TAIL
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
	sll	$11, 10, $19          # x[s][16 c]
	sll	$10, 6, $1
	addl	$19, $1, $19
	ldi	$19, X($19)
	and	$10, 1, $18
	sll	$18, 12, $18
	ldi	$18, WBUF($18)
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
36:	.irp	k, 0, 1, 2
	vlds	$\k, TAIL + B2_AT + 16 * \k($31)
	.endr
	ldi	$23, TAIL + W2_AT
	ldi	$24, HID
	AXPY3	$20, 4, $24
	.irp	k, 0, 1, 2
	vsts	$\k, 16 * \k($21)
	.endr
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
	.irp	k, 0, 1, 2
	vsubs	$\k, $3, $\k
	vsts	$\k, 16 * \k($21)
	.endr
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
33:	.irp	k, 0, 1, 2
	vfmov	$31, $\k
	.endr
	mov	$20, $22
	ldi	$23, Z
	mov	$9, $25
	AXPY3	$22, H_ROW, $25
	.irp	k, 0, 1, 2
	vsts	$\k, 16 * \k($21)
	.endr
	ldi	$20, 4($20)
	ldi	$21, Z_ROW($21)
	subl	$24, 1, $24
	bgt	$24, 33b
	.irp	k, 0, 1, 2            # db2 = sum_s dz[s]
	vfmov	$31, $\k
	.endr
	ldi	$23, Z
	mov	$9, $25
35:	.irp	k, 0, 1, 2
	vlds	$1\k, 16 * \k($23)
	vadds	$\k, $1\k, $\k
	.endr
	ldi	$23, Z_ROW($23)
	subl	$25, 1, $25
	bgt	$25, 35b
	.irp	k, 0, 1, 2
	vsts	$\k, GTAIL + B2_AT + 16 * \k($31)
	.endr

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
	mull	$11, Z_ROW, $19
	ldi	$19, Z($19)
	ldi	$18, W2T
	ldi	$28, 10
	ZERO16
	AXPY16	4, H_ROW
	ldl	$20, V_I($31)
	sll	$20, 8, $20
	ldl	$9, MASKSEL($31)
	ldi	$21, H($20)
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	MASK_BY_SIGN_OF_MINUS $\k, 16 * \k
	MASK_BY_SIGN_OF_MINUS $1\k, 128 + 16 * \k
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
17:	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vlds	$8, 16 * \k($20)
	vadds	$\k, $8, $\k
	vlds	$8, 128 + 16 * \k($20)
	vadds	$1\k, $8, $1\k
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
	sll	$10, 2, $19           # x[0][i]
	ldi	$19, X($19)
	ldi	$18, DH
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
	DMA_TAIL DMA_PUT, M_G, GTAIL
	DMA_ROWS DMA_PUT, M_P, P, Z_ROW
	WAIT_REPLY 2
	ldi	$2, CHUNKS
	WAIT_COUNT RPLYG, $2
	ldl	$26, SAVE_RA($31)
	ret
	.end	parax_mlp
