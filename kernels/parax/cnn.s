# One SGD step of a small CNN on ONE CPE per ParaX instance (docs/parax.md "The CNN's step";
# hostlib/parax/cnn.py is the host side). The network, per sample (H, 8, 16) f32 (HWC):
#   a = relu(conv3x3(x) scale + shift)     block.s's conv3x3_f32, bn_f32, relu_f32
#   f = (1 / pixels) sum_p a[p]            global average pool, 16 features (pixel order)
#   z = bfc + sum_c f[c] Wfc[c]            FC 16 -> 10 (padded to 12), c order
#   p = softmax(z), dz = (p - y) (1 / b)   as mlp.s
# and its backward, accumulated over the instance's samples in order:
#   dWfc[c] += f[c] dz, dbfc += dz, df[c] = sum_o Wfc[c][o] dz[o] (o order),
#   da[p] = df / pixels, then block.s's bn_relu_grad_f32 (dscale, dshift, the gradient at the
#   conv's output) and conv3x3_dw_f32 (dW). The conv's input gradient is not computed (it is
#   the first layer).
# The parameters (and the gradient, same layout) are one f32 vector:
#   W [3][3][16][16] | scale[16], shift[16] | Wfc [16][12] | bfc [12]
# Everything stays in the instance's LDM from its first sample to its gradient's put: no
# operator writes to memory, no barrier (per_cpe).

# Its LDM variables and vmath.inc's come before block.s's, within reach of a 16-bit
# displacement from $31.
	.set	noreorder
	.include "../dnn/vmath.inc"

	CLASSES = 10
	Z_BYTES = 48          # 12 f32 outputs
	FEATURES = 16
	FC_W_BYTES = FEATURES * Z_BYTES
	FC_BYTES = FC_W_BYTES + Z_BYTES

	.ldm
	.align	5
CNN_FC:	.skip	FC_BYTES
	.align	5
CNN_DFC:
	.skip	FC_BYTES
	.align	5
CNN_F:	.skip	4 * FEATURES
CNN_DF:	.skip	4 * FEATURES
CNN_Z:	.skip	Z_BYTES       # z, then z - max z, then e, then dz
CNN_P:	.skip	Z_BYTES
CNN_Y:	.skip	Z_BYTES
CNN_ROW:
	.quad	0

	.include "block.s"

	J_Y = J_TMP           # one-hot labels, Z_BYTES per sample
	J_G = J_TMP + 8       # this instance's gradient (the parameters' layout)
	J_INVB = J_OPS        # 1 / b, a double
	J_INVPIX = J_OPS + 8  # 1 / pixels, a double

	P_BN_AT = CONV_W_BYTES                # offsets in the parameter vector
	P_FC_AT = CONV_W_BYTES + BN_P_BYTES
	ACT = GRAD_WT                         # offsets in WEIGHTS: the conv's output (BN's input),
	DY_INTERIOR = GRAD_PADDED_DY + PAD_ROW_BYTES + PIXEL_BYTES   # the padded gradient at it

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

# FC_ROWS w, update: over c < FEATURES in order, f[c] (CNN_F) times row c of the FC-shaped
# LDM `w`: update 0: $0-$2 += f[c] w[c]; update 1: w[c] += f[c] ($0-$2), in LDM. Leaves $21
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

	.globl	parax_cnn_step
	.ent	parax_cnn_step
parax_cnn_step:
	ENTER
	PARAMS_DMA DMA_GET, J_W, WEIGHTS, BN_PARAMS, CNN_FC
	ZERO_VECTORS WEIGHTS + GRAD_DW, GRAD_ZEROED / 16     # dW and the padded dY's border
	ZERO_VECTORS BN_PARAMS + GRAD_DPARAMS, BN_P_BYTES / 16
	ZERO_VECTORS CNN_DFC, FC_BYTES / 16
	SAMPLES_BEGIN                 # $10 x, $11 probabilities out, $12 labels
5:	ldl	$7, JOB + J_ROWS($31) # the sample, its one-hot label
	mov	$10, $13
	GET_PADDED_ROWS $13
	MAKE_DESC $4, DMA_GET, Z_BYTES, RPLY
	ldi	$5, CNN_Y
	dma	$4, $12, $5
	addl	$7, 1, $7
	WAIT_REPLY $7
	SAVE_LOOP_REGS stl
	ldi	$16, PADDED           # forward: conv into BUF, its copy at ACT, BN, ReLU in BUF
	ldi	$17, WEIGHTS
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, conv3x3_f32
	ldl	$1, SIZE($31)
	srl	$1, 4, $1
	ldi	$2, BUF
	ldi	$3, WEIGHTS + ACT
1:	vlds	$4, 0($2)
	vsts	$4, 0($3)
	ldi	$2, 16($2)
	ldi	$3, 16($3)
	subl	$1, 1, $1
	bgt	$1, 1b
	ldi	$16, BUF
	ldi	$17, BN_PARAMS
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, bn_f32
	ldi	$16, BUF
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, relu_f32

	.irp	k, 0, 1, 2, 3         # f = (1 / pixels) sum_p a[p]
	vfmov	$31, $\k
	.endr
	ldi	$16, BUF
	ldl	$18, JOB + J_ROWS($31)
	sll	$18, 3, $18
1:	.irp	k, 0, 1, 2, 3
	vlds	$1\k, 16 * \k($16)
	vadds	$\k, $1\k, $\k
	.endr
	ldi	$16, PIXEL_BYTES($16)
	subl	$18, 1, $18
	bgt	$18, 1b
	ldde	$8, JOB + J_INVPIX($31)
	.irp	k, 0, 1, 2, 3
	vmuls	$\k, $8, $\k
	vsts	$\k, CNN_F + 16 * \k($31)
	.endr

	.irp	k, 0, 1, 2            # z = bfc + sum_c f[c] Wfc[c]
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

	.irp	k, 0, 1, 2            # backward: dWfc[c] += f[c] dz, dbfc += dz
	vlds	$\k, CNN_Z + 16 * \k($31)
	.endr
	FC_ROWS	CNN_DFC, 1
	.irp	k, 0, 1, 2
	vlds	$1\k, 16 * \k($21)
	vadds	$1\k, $\k, $1\k
	vsts	$1\k, 16 * \k($21)
	.endr
	ldi	$20, CNN_FC           # df[c] = sum_o Wfc[c][o] dz[o]
	ldi	$21, CNN_DF
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
	ldde	$8, JOB + J_INVPIX($31)       # da[p] = df / pixels, into the padded gradient
	.irp	k, 0, 1, 2, 3
	vlds	$\k, CNN_DF + 16 * \k($31)
	vmuls	$\k, $8, $\k
	.endr
	ldi	$20, WEIGHTS + DY_INTERIOR
	ldl	$22, JOB + J_ROWS($31)
3:	ldi	$23, 8
	mov	$20, $21
4:	.irp	k, 0, 1, 2, 3
	vsts	$\k, 16 * \k($21)
	.endr
	ldi	$21, PIXEL_BYTES($21)
	subl	$23, 1, $23
	bgt	$23, 4b
	ldi	$20, PAD_ROW_BYTES($20)
	subl	$22, 1, $22
	bgt	$22, 3b
	stl	$31, CNN_ROW($31)     # [BN, ReLU]'s backward row by row, in place in the padding
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
	ldi	$16, PADDED           # dW += the correlation of x and the conv's output gradient
	ldi	$17, WEIGHTS + DY_INTERIOR
	ldl	$18, JOB + J_ROWS($31)
	ldi	$19, WEIGHTS + GRAD_DW
	bsr	$26, conv3x3_dw_f32
	SAVE_LOOP_REGS ldl
	ldl	$8, SIZE($31)
	addl	$10, $8, $10
	addl	$11, Z_BYTES, $11
	addl	$12, Z_BYTES, $12
	subl	$9, 1, $9
	bgt	$9, 5b
	PARAMS_DMA DMA_PUT, J_G, WEIGHTS + GRAD_DW, BN_PARAMS + GRAD_DPARAMS, CNN_DFC
9:	LEAVE
	.end	parax_cnn_step
