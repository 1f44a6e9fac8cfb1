# One SGD step of a small CNN on ONE CPE per ParaX instance (docs/parax.md "The CNN's step";
# hostlib/parax/cnn.py is the host side). The network, per sample (H, 8, 16) f32 (HWC, H even):
#   c = conv3x3(x)                             block.s's conv3x3_f32
#   a = relu((c - mean) rstd scale + shift)    BN in training form: mean and var (biased) over
#                                              the instance's b samples' pixels, rstd =
#                                              1 / sqrt(var + eps); bn_f32 with the folded
#                                              A = scale rstd, C = shift - mean A, relu_f32
#   f[q] = (1 / 2H) sum of a over quadrant q   q = 2 (row >= H/2) + (column >= 4): 64 features
#   z = bfc + sum_i f[i] Wfc[i]                FC 64 -> 10 (padded to 12), i order
#   p = softmax(z), dz = (p - y) (1 / b)       as mlp.s
# and its backward: dWfc[i] += f[i] dz, dbfc += dz, df[i] = sum_o Wfc[i][o] dz[o], da = df of
# the pixel's quadrant / 2H; block.s's bn_relu_grad_f32 with (A, C) gives g A (g: da where
# the ReLU passed) and S1 = sum g c, S0 = sum g; dshift = S0, dscale = rstd (S1 - mean S0);
# BN's input gradient g A + c K1 + K0 (K1 = -A rstd dscale / n, K0 = -A S0 / n - mean K1, n
# = b 8 H: the batch statistics' terms), then conv3x3_dw_f32 gives dW. Three passes over the
# instance's samples: 1. conv, the sums of c and c^2 (var = E c^2 - mean^2), c put to J_ACTS;
# 2. c back, the forward, the loss head's backward, S0 and S1; 3. x and c back, dW.
# J_MOM is 256 bytes: the batch's mean, var (16 f32 each), then the running mean, var. With
# J_TRAIN = 0 (inference) BN normalises with the running statistics and only the forward runs
# (passes 1 and 2 to the probabilities); with J_TRAIN = 1 the batch's statistics go out and the
# running ones are replaced by running - batch, the instance's term of the running update
# (hostlib/parax/cnn.py update_running: one synchronisation of them across the instances).
# The parameters (and the gradient, same layout) are one f32 vector:
#   W [3][3][16][16] | scale[16], shift[16] | Wfc [64][12] | bfc [12]
# Every sample's forward and backward stays in the instance's LDM but for its conv output (c),
# kept in memory between the passes; no barrier (per_cpe).

# Its LDM variables and vmath.inc's come before block.s's, within reach of a 16-bit
# displacement from $31.
	.set	noreorder
	.include "../dnn/vmath.inc"

	CLASSES = 10
	Z_BYTES = 48          # 12 f32 outputs
	FEATURES = 64         # 4 quadrants x 16 channels
	FEATURE_BYTES = 4 * FEATURES
	FC_W_BYTES = FEATURES * Z_BYTES
	FC_BYTES = FC_W_BYTES + Z_BYTES
	MAX_BATCH = 8         # an instance's samples at most (their da per quadrant stay in LDM)

	.ldm
	.align	5
CNN_FC:	.skip	FC_BYTES
	.align	5
CNN_DFC:
	.skip	FC_BYTES
	.align	5
CNN_F:	.skip	FEATURE_BYTES
CNN_DA:	.skip	FEATURE_BYTES * MAX_BATCH      # each sample's da per quadrant (pass 2 -> 3)
CNN_MOM:
	.skip	128           # sum c, sum c^2, then mean, var (16 f32 each)
CNN_RSTD:
	.skip	64
CNN_K:	.skip	128           # K1, K0
CNN_Z:	.skip	Z_BYTES       # z, then z - max z, then e, then dz
CNN_P:	.skip	Z_BYTES
CNN_Y:	.skip	Z_BYTES
CNN_ROW:
	.quad	0
CNN_PASS:
	.quad	0

	.include "block.s"

	J_Y = J_TMP           # one-hot labels, Z_BYTES per sample
	J_G = J_TMP + 8       # this instance's gradient (the parameters' layout)
	J_ACTS = J_NCONV      # room in memory for its samples' conv outputs
	J_MOM = J_BN          # the batch's mean, var (out) | the running ones (in; out: running - batch)
	MOM_RUNNING = 128
	J_TRAIN = J_NBN       # 1: a training step, 0: the forward with J_MOM's statistics
	J_INVB = J_OPS        # doubles: 1 / b, 1 / 2H, 1 / n, eps
	J_INVPIX = J_OPS + 8
	J_INVN = J_OPS + 16
	J_EPS = J_OPS + 24

	P_BN_AT = CONV_W_BYTES                # offsets in the parameter vector
	P_FC_AT = CONV_W_BYTES + BN_P_BYTES
	ACT = GRAD_WT                         # offsets in WEIGHTS: the conv's output (BN's input),
	DY_INTERIOR = GRAD_PADDED_DY + PAD_ROW_BYTES + PIXEL_BYTES   # the padded gradient at it
	BN_FOLDED = 0                         # offsets in BN_PARAMS: A, C (bn_f32's scale, shift);
	BN_SUMS = GRAD_DPARAMS                # S1, S0 (bn_relu_grad_f32's sums);
	BN_TRAINED = 2 * BN_P_BYTES           # scale, shift; their gradient
	BN_GRAD = 3 * BN_P_BYTES

	.ldm
	.align	5
	.globl	cnn_ldm_end
cnn_ldm_end:

	.text

# PARAMS_DMA op, field, w, bn, fc: the three parts of a parameter-shaped vector (at the job's
# `field`) to or from LDM `w`, `bn`, `fc`, and wait.
	.macro	PARAMS_DMA op, field, w, bn, fc
	stw	$31, RPLY($31)
	ldl	$2, JOB + \field($31)
	MAKE_DESC $1, \op, CONV_W_BYTES, RPLY
	ldi	$3, \w
	dma	$1, $2, $3
	MAKE_DESC $1, \op, BN_P_BYTES, RPLY
	ldi	$2, P_BN_AT($2)
	ldi	$3, \bn
	dma	$1, $2, $3
	MAKE_DESC $1, \op, FC_BYTES, RPLY
	ldi	$2, BN_P_BYTES($2)
	ldi	$3, \fc
	dma	$1, $2, $3
	WAIT_REPLY 3
	.endm

# SCALAR_SUM acc, base, tmp: acc += the f32 at base + 4 o for o = 1 .. CLASSES - 1, in order.
	.macro	SCALAR_SUM acc, base
	ldi	$5, 4
2:	addl	\base, $5, $6
	flds	$4, 0($6)
	fadds	\acc, $4, \acc
	ldi	$5, 4($5)
	cmplt	$5, 4 * CLASSES, $6
	bne	$6, 2b
	.endm

# FC_ROWS w, update: over i < FEATURES in order, f[i] (CNN_F) times row i of the FC-shaped
# LDM `w`: update 0: $0-$2 += f[i] w[i]; update 1: w[i] += f[i] ($0-$2), in LDM. Leaves $21
# past the last row.
	.macro	FC_ROWS w, update
	ldi	$20, CNN_F
	ldi	$21, \w
	ldi	$22, FEATURES
1:	ldse	$16, 0($20)
	.irp	k, 0, 1, 2
	vlds	$1\k, 16 * \k($21)
	.if	\update
	vmas	$16, $\k, $1\k, $1\k
	vsts	$1\k, 16 * \k($21)
	.else
	vmas	$16, $1\k, $\k, $\k
	.endif
	.endr
	ldi	$20, 4($20)
	ldi	$21, Z_BYTES($21)
	subl	$22, 1, $22
	bgt	$22, 1b
	.endm

# PASS_BEGIN / PASS_END loop: a pass over the instance's samples: $9 samples left, $10 x, $11
# probabilities out, $12 one-hot labels, $13 conv output (memory), $14 da (CNN_DA); the body
# saves them (SAVE_LOOP_REGS stl) before its calls, PASS_END reloads and steps them.
	.macro	PASS_BEGIN
	ldl	$9, JOB + J_NSAMP($31)
	ldl	$10, JOB + J_IN($31)
	ldl	$11, JOB + J_OUT($31)
	ldl	$12, JOB + J_Y($31)
	ldl	$13, JOB + J_ACTS($31)
	ldi	$14, CNN_DA
	.endm
	.macro	PASS_END loop
	SAVE_LOOP_REGS ldl
	ldl	$8, SIZE($31)
	addl	$10, $8, $10
	addl	$13, $8, $13
	addl	$11, Z_BYTES, $11
	addl	$12, Z_BYTES, $12
	ldi	$14, FEATURE_BYTES($14)
	subl	$9, 1, $9
	bgt	$9, \loop
	.endm

# SAMPLE_DMA op, ldm: get or put (no wait) a sample (SIZE bytes) between LDM `ldm` and $13.
	.macro	SAMPLE_DMA op, ldm
	MAKE_DESC $4, \op, 0, RPLY
	ldl	$8, SIZE($31)
	DESC_SET_SIZE $4, $8
	ldi	$5, \ldm
	dma	$4, $13, $5
	.endm

# POOL: f[q] = (1 / 2H) sum of BUF's pixels of quadrant q (rows, then the row's 4 pixels).
	.macro	POOL
	ldi	$20, CNN_F
	ldi	$21, BUF
	ldl	$22, JOB + J_ROWS($31)
	srl	$22, 1, $22           # rows of a quadrant
	ldl	$25, SIZE($31)
	srl	$25, 1, $25
	ldi	$25, -ROW_BYTES($25)  # from a row of quadrants to the next, past 2 x 4 pixels
	ldde	$8, JOB + J_INVPIX($31)
	ldi	$23, 2
3:	ldi	$24, 2
4:	.irp	k, 0, 1, 2, 3
	vfmov	$31, $\k
	.endr
	mov	$21, $16
	mov	$22, $18
5:	ldi	$19, 4
	mov	$16, $17
6:	.irp	k, 0, 1, 2, 3
	vlds	$1\k, 16 * \k($17)
	vadds	$\k, $1\k, $\k
	.endr
	ldi	$17, PIXEL_BYTES($17)
	subl	$19, 1, $19
	bgt	$19, 6b
	ldi	$16, ROW_BYTES($16)
	subl	$18, 1, $18
	bgt	$18, 5b
	.irp	k, 0, 1, 2, 3
	vmuls	$\k, $8, $\k
	vsts	$\k, 16 * \k($20)
	.endr
	ldi	$20, PIXEL_BYTES($20)
	ldi	$21, 4 * PIXEL_BYTES($21)
	subl	$24, 1, $24
	bgt	$24, 4b
	addl	$21, $25, $21
	subl	$23, 1, $23
	bgt	$23, 3b
	.endm

# SPREAD_DA: every pixel of the padded gradient's interior = its quadrant's da (at $14).
	.macro	SPREAD_DA
	ldi	$20, WEIGHTS + DY_INTERIOR
	ldl	$22, JOB + J_ROWS($31)
	srl	$22, 1, $22
	mov	$14, $19
	ldi	$24, 2
3:	mov	$22, $23
4:	mov	$20, $21
	mov	$19, $18
	ldi	$25, 2
5:	.irp	k, 0, 1, 2, 3
	vlds	$\k, 16 * \k($18)
	.endr
	ldi	$17, 4
6:	.irp	k, 0, 1, 2, 3
	vsts	$\k, 16 * \k($21)
	.endr
	ldi	$21, PIXEL_BYTES($21)
	subl	$17, 1, $17
	bgt	$17, 6b
	ldi	$18, PIXEL_BYTES($18)
	subl	$25, 1, $25
	bgt	$25, 5b
	ldi	$20, PAD_ROW_BYTES($20)
	subl	$23, 1, $23
	bgt	$23, 4b
	ldi	$19, 2 * PIXEL_BYTES($19)
	subl	$24, 1, $24
	bgt	$24, 3b
	.endm

# BN_RELU_GRAD_ROWS: bn_relu_grad_f32 row by row over the conv output at ACT and the padded
# gradient (written over by g A); S1 and S0 accumulate at BN_SUMS.
	.macro	BN_RELU_GRAD_ROWS
	stl	$31, CNN_ROW($31)
6:	ldl	$1, CNN_ROW($31)
	sll	$1, 9, $16            # ROW_BYTES per row
	ldi	$16, WEIGHTS + ACT($16)
	ldi	$17, PAD_ROW_BYTES
	mull	$1, $17, $17
	ldi	$17, WEIGHTS + DY_INTERIOR($17)
	ldi	$18, 1
	bsr	$26, bn_relu_grad_f32
	ldl	$1, CNN_ROW($31)
	addl	$1, 1, $1
	stl	$1, CNN_ROW($31)
	ldl	$2, JOB + J_ROWS($31)
	cmplt	$1, $2, $2
	bne	$2, 6b
	.endm

# SUMS k, q: vector k of a pixel at $16 (into $1k): $k += it, $q += its square.
	.macro	SUMS k, q
	vlds	$1\k, 16 * \k($16)
	vadds	$\k, $1\k, $\k
	vmas	$1\k, $1\k, $\q, $\q
	.endm

# GRAD_AT_C k, k0, c, d: vector k of a pixel: the gradient at $20 += c (at $16) $k + $k0
# (temporaries $c, $d).
	.macro	GRAD_AT_C k, k0, c, d
	vlds	$\c, 16 * \k($16)
	vlds	$\d, 16 * \k($20)
	vmas	$\c, $\k, $\k0, $\c
	vadds	$\d, $\c, $\d
	vsts	$\d, 16 * \k($20)
	.endm

	.globl	parax_cnn_step
	.ent	parax_cnn_step
parax_cnn_step:
	ENTER
	rtc	$2
	stl	$2, STATS + S_BEGIN($31)
	PARAMS_DMA DMA_GET, J_W, WEIGHTS, BN_PARAMS + BN_TRAINED, CNN_FC
	ZERO_VECTORS WEIGHTS + GRAD_DW, GRAD_ZEROED / 16     # dW and the padded dY's border
	ZERO_VECTORS BN_PARAMS + BN_SUMS, BN_P_BYTES / 16
	ZERO_VECTORS CNN_DFC, FC_BYTES / 16
	ZERO_VECTORS CNN_MOM, 8
	PASS_BEGIN                    # pass 1: c = conv(x), sum c, sum c^2, c to memory
30:	ldl	$7, JOB + J_ROWS($31)
	mov	$10, $15
	GET_PADDED_ROWS $15
	WAIT_REPLY $7
	SAVE_LOOP_REGS stl
	ldi	$16, PADDED
	ldi	$17, WEIGHTS
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, conv3x3_f32
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vlds	$\k, CNN_MOM + 16 * \k($31)
	.endr
	ldi	$16, BUF
	ldl	$18, JOB + J_ROWS($31)
	sll	$18, 3, $18           # pixels
1:	SUMS	0, 4
	SUMS	1, 5
	SUMS	2, 6
	SUMS	3, 7
	ldi	$16, PIXEL_BYTES($16)
	subl	$18, 1, $18
	bgt	$18, 1b
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vsts	$\k, CNN_MOM + 16 * \k($31)
	.endr
	ldl	$13, SAVE_LOOP + 8 * 4($31)
	stw	$31, RPLY($31)
	SAMPLE_DMA DMA_PUT, BUF
	WAIT_REPLY 1
	PASS_END 30b
	ldl	$1, JOB + J_TRAIN($31)
	bne	$1, 20f
	MAKE_DESC $1, DMA_GET, 128, RPLY      # inference: the running mean and var
	ldl	$2, JOB + J_MOM($31)
	ldi	$2, MOM_RUNNING($2)
	ldi	$3, CNN_MOM
	DMA_WAIT $1, $2, $3, RPLY
	br	21f
20:	ldde	$8, JOB + J_INVN($31) # mean = sum / n, var = sum c^2 / n - mean^2
	.irp	k, 0, 1, 2, 3
	vlds	$\k, CNN_MOM + 16 * \k($31)
	vlds	$1\k, CNN_MOM + 64 + 16 * \k($31)
	vmuls	$\k, $8, $\k
	vmuls	$1\k, $8, $1\k
	vnmas	$\k, $\k, $1\k, $1\k
	vsts	$\k, CNN_MOM + 16 * \k($31)
	vsts	$1\k, CNN_MOM + 64 + 16 * \k($31)
	.endr
	MAKE_DESC $1, DMA_PUT, 128, RPLY
	ldl	$2, JOB + J_MOM($31)
	ldi	$3, CNN_MOM
	DMA_WAIT $1, $2, $3, RPLY
	MAKE_DESC $1, DMA_GET, 128, RPLY      # running - batch, through CNN_K (free until pass 3)
	ldi	$2, MOM_RUNNING($2)
	ldi	$3, CNN_K
	DMA_WAIT $1, $2, $3, RPLY
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7
	vlds	$4, CNN_K + 16 * \k($31)
	vlds	$5, CNN_MOM + 16 * \k($31)
	vsubs	$4, $5, $4
	vsts	$4, CNN_K + 16 * \k($31)
	.endr
	MAKE_DESC $1, DMA_PUT, 128, RPLY
	DMA_WAIT $1, $2, $3, RPLY

21:	ldde	$8, JOB + J_EPS($31)  # rstd = 1 / sqrt(var + eps), A = scale rstd,
	ldih	$9, 0x3ff0($31)       # C = shift - mean A
	sll	$9, 32, $9            # 1.0 (a double)
	vcpyf	$9, $9
	ldi	$25, BN_PARAMS
	.irp	k, 0, 1, 2, 3
	vlds	$\k, CNN_MOM + 64 + 16 * \k($31)
	vadds	$\k, $8, $\k
	vsqrts	$\k, $\k
	vdivs	$9, $\k, $\k
	vsts	$\k, CNN_RSTD + 16 * \k($31)
	vlds	$10, BN_TRAINED + 16 * \k($25)
	vmuls	$10, $\k, $10
	vsts	$10, BN_FOLDED + 16 * \k($25)
	vlds	$11, CNN_MOM + 16 * \k($31)
	vlds	$12, BN_TRAINED + 64 + 16 * \k($25)
	vnmas	$11, $10, $12, $12
	vsts	$12, BN_FOLDED + 64 + 16 * \k($25)
	.endr

	PASS_BEGIN                    # pass 2: the forward, the loss head's backward, S1, S0
31:	stw	$31, RPLY($31)
	SAMPLE_DMA DMA_GET, WEIGHTS + ACT
	MAKE_DESC $4, DMA_GET, Z_BYTES, RPLY
	ldi	$5, CNN_Y
	dma	$4, $12, $5
	WAIT_REPLY 2
	SAVE_LOOP_REGS stl
	ldl	$1, SIZE($31)         # c into BUF; A, C; ReLU
	srl	$1, 4, $1
	ldi	$2, WEIGHTS + ACT
	ldi	$3, BUF
1:	vlds	$4, 0($2)
	vsts	$4, 0($3)
	ldi	$2, 16($2)
	ldi	$3, 16($3)
	subl	$1, 1, $1
	bgt	$1, 1b
	ldi	$16, BUF
	ldi	$17, BN_PARAMS + BN_FOLDED
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, bn_f32
	ldi	$16, BUF
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, relu_f32
	POOL

	.irp	k, 0, 1, 2            # z = bfc + sum_i f[i] Wfc[i]
	vlds	$\k, CNN_FC + FC_W_BYTES + 16 * \k($31)
	.endr
	FC_ROWS	CNN_FC, 0
	ldi	$21, CNN_Z
	.irp	k, 0, 1, 2
	vsts	$\k, 16 * \k($21)
	.endr
	flds	$3, 0($21)            # z - max z (over the CLASSES outputs)
	ldi	$5, 4
2:	addl	$21, $5, $6
	flds	$4, 0($6)
	fcmplt	$3, $4, $6
	selne	$6, $4, $3, $3
	ldi	$5, 4($5)
	cmplt	$5, 4 * CLASSES, $6
	bne	$6, 2b
	vcpyf	$3, $3
	.irp	k, 0, 1, 2
	vsubs	$\k, $3, $\k
	vsts	$\k, 16 * \k($21)
	.endr
	ldi	$16, CNN_Z
	mov	$16, $17
	ldi	$18, 3
	bsr	$26, vexp_s
	ldi	$20, CNN_Z            # p = e (1 / sum e), dz = (p - y) (1 / b)
	stw	$31, 4 * CLASSES($20)
	stw	$31, 4 * CLASSES + 4($20)
	flds	$3, 0($20)
	SCALAR_SUM $3, $20
	ldih	$4, 0x3ff0($31)       # 1.0 (a double)
	sll	$4, 32, $4
	fdivs	$4, $3, $3
	vcpyf	$3, $3
	ldde	$8, JOB + J_INVB($31)
	.irp	k, 0, 1, 2
	vlds	$0, CNN_Z + 16 * \k($31)
	vmuls	$0, $3, $0
	vsts	$0, CNN_P + 16 * \k($31)
	vlds	$1, CNN_Y + 16 * \k($31)
	vsubs	$0, $1, $0
	vmuls	$0, $8, $0
	vsts	$0, CNN_Z + 16 * \k($31)
	.endr
	ldl	$11, SAVE_LOOP + 8 * 2($31)   # this sample's probabilities out
	MAKE_DESC $1, DMA_PUT, Z_BYTES, RPLY
	ldi	$3, CNN_P
	DMA_WAIT $1, $11, $3, RPLY
	ldl	$1, JOB + J_TRAIN($31)
	beq	$1, 39f

	.irp	k, 0, 1, 2            # backward: dWfc[i] += f[i] dz, dbfc += dz
	vlds	$\k, CNN_Z + 16 * \k($31)
	.endr
	FC_ROWS	CNN_DFC, 1
	.irp	k, 0, 1, 2
	vlds	$1\k, 16 * \k($21)
	vadds	$1\k, $\k, $1\k
	vsts	$1\k, 16 * \k($21)
	.endr
	ldi	$20, CNN_FC           # df[i] = sum_o Wfc[i][o] dz[o], into the sample's da
	ldl	$21, SAVE_LOOP + 8 * 5($31)
	ldi	$22, FEATURES
1:	flds	$3, 0($20)
	flds	$4, CNN_Z($31)
	fmuls	$3, $4, $3
	ldi	$5, 4
2:	addl	$20, $5, $6
	flds	$4, 0($6)
	ldi	$6, CNN_Z($5)
	flds	$7, 0($6)
	fmuls	$4, $7, $4
	fadds	$3, $4, $3
	ldi	$5, 4($5)
	cmplt	$5, 4 * CLASSES, $6
	bne	$6, 2b
	fsts	$3, 0($21)
	ldi	$20, Z_BYTES($20)
	ldi	$21, 4($21)
	subl	$22, 1, $22
	bgt	$22, 1b
	ldl	$14, SAVE_LOOP + 8 * 5($31)   # da = df / 2H
	ldde	$8, JOB + J_INVPIX($31)
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vlds	$0, 16 * \k($14)
	vmuls	$0, $8, $0
	vsts	$0, 16 * \k($14)
	.endr
	SPREAD_DA
	BN_RELU_GRAD_ROWS
39:	PASS_END 31b
	ldl	$1, JOB + J_TRAIN($31)
	beq	$1, 9f

	ldde	$8, JOB + J_INVN($31) # dshift = S0, dscale = rstd (S1 - mean S0),
	ldi	$25, BN_PARAMS
	.irp	k, 0, 1, 2, 3         # K1 = -A rstd dscale / n, K0 = -A S0 / n - mean K1
	vlds	$0, BN_SUMS + 16 * \k($25)
	vlds	$1, BN_SUMS + 64 + 16 * \k($25)
	vlds	$2, CNN_MOM + 16 * \k($31)
	vlds	$3, CNN_RSTD + 16 * \k($31)
	vlds	$4, BN_FOLDED + 16 * \k($25)
	vsts	$1, BN_GRAD + 64 + 16 * \k($25)
	vnmas	$2, $1, $0, $0
	vmuls	$0, $3, $0
	vsts	$0, BN_GRAD + 16 * \k($25)
	vmuls	$4, $3, $5
	vmuls	$5, $0, $5
	vmuls	$5, $8, $5
	vsubs	$31, $5, $5
	vsts	$5, CNN_K + 16 * \k($31)
	vmuls	$4, $8, $6
	vmuls	$6, $1, $6
	vmas	$2, $5, $6, $6
	vsubs	$31, $6, $6
	vsts	$6, CNN_K + 64 + 16 * \k($31)
	.endr

	PASS_BEGIN                    # pass 3: x and c back, BN's input gradient, dW
32:	ldl	$7, JOB + J_ROWS($31)
	mov	$10, $15
	GET_PADDED_ROWS $15
	SAMPLE_DMA DMA_GET, WEIGHTS + ACT
	addl	$7, 1, $7
	WAIT_REPLY $7
	SAVE_LOOP_REGS stl
	SPREAD_DA
	BN_RELU_GRAD_ROWS
	.irp	k, 0, 1, 2, 3, 4, 5, 6, 7     # the gradient at c: g A + c K1 + K0
	vlds	$\k, CNN_K + 16 * \k($31)
	.endr
	ldi	$16, WEIGHTS + ACT
	ldi	$17, WEIGHTS + DY_INTERIOR
	ldl	$18, JOB + J_ROWS($31)
3:	ldi	$19, 8
	mov	$17, $20
4:	GRAD_AT_C 0, 4, 8, 12
	GRAD_AT_C 1, 5, 9, 13
	GRAD_AT_C 2, 6, 10, 14
	GRAD_AT_C 3, 7, 11, 15
	ldi	$16, PIXEL_BYTES($16)
	ldi	$20, PIXEL_BYTES($20)
	subl	$19, 1, $19
	bgt	$19, 4b
	ldi	$17, PAD_ROW_BYTES($17)
	subl	$18, 1, $18
	bgt	$18, 3b
	ldi	$16, PADDED           # dW += the correlation of x and the gradient at c
	ldi	$17, WEIGHTS + DY_INTERIOR
	ldl	$18, JOB + J_ROWS($31)
	ldi	$19, WEIGHTS + GRAD_DW
	bsr	$26, conv3x3_dw_f32
	PASS_END 32b
	PARAMS_DMA DMA_PUT, J_G, WEIGHTS + GRAD_DW, BN_PARAMS + BN_GRAD, CNN_DFC
9:	LEAVE
	.end	parax_cnn_step
