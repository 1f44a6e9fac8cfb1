# Batch normalisation on the streaming driver (stream.s; docs/dnn.md "Batch normalisation");
# hostlib/dnn/batchnorm.py is the host side. A unit is one channel c of x (B, C, H, W): its B
# planes of H W elements, one strided DMA (blocks of H W elements, C - 1 planes skipped), are
# in LDM whole; the per-channel values travel as small records of ES-byte elements.
#
# bn_forward_{s,d}: in0 x, in1 (gamma, beta, running_mean, running_var), out0 y,
#   out1 (new running_mean, new running_var, mean used, invstd used). J_P: momentum, eps,
#   training (1.0 or 0.0). Training: mean and biased variance of the channel (two passes, in
#   double), running stats (1 - momentum) r + momentum s with the unbiased variance;
#   inference: the running stats. y = (x - mean) (gamma invstd) + beta, invstd = 1/sqrt(v + eps).
# bn_backward_{s,d}: in0 dy, in1 x, in2 (gamma, mean, invstd, -), out0 dx, out1 (dgamma, dbeta):
#   dbeta = sum dy, dgamma = sum dy xhat, dx = gamma invstd (dy - dbeta/N - xhat dgamma/N).

# Linked before stream.s (stream.inc has the driver's interface).

	.set	noreorder
	.include "stream.inc"

	X_B = 0               # J_X words: batch, H W, channels, then per stream (in0-2, out0-1):
	X_HW = 8              # 0 none, 1 the channel's planes, k > 1: k elements per channel
	X_C = 16
	X_KIND = 24

	.text

# bn_plan(channel $16, record $17).
	.globl	bn_plan
	.ent	bn_plan
bn_plan:
	ldl	$1, JOB + J_X + X_HW($31)
	ldl	$2, JOB + J_ES($31)
	mull	$1, $2, $1            # plane bytes
	ldl	$3, JOB + J_X + X_B($31)
	mull	$3, $1, $6            # the channel's bytes
	ldl	$3, JOB + J_X + X_HW($31)
	ldl	$7, JOB + J_X + X_B($31)
	mull	$3, $7, $7
	stl	$7, U_COUNT($17)      # N = B H W
	ldl	$3, JOB + J_X + X_C($31)
	subl	$3, 1, $5
	mull	$5, $1, $5            # stride: the other channels' planes
	mull	$16, $1, $4           # the channel's offset
	ldi	$18, JOB + J_IN($31)  # bases (J_OUT follows J_IN)
	ldi	$19, JOB + J_X + X_KIND($31)
	ldi	$20, 5
1:	ldl	$21, 0($19)
	stl	$31, U_BYTES($17)
	stl	$31, U_BLOCK($17)
	stl	$31, U_STRIDE($17)
	beq	$21, 3f
	ldl	$22, 0($18)
	cmpeq	$21, 1, $23
	beq	$23, 2f
	addl	$22, $4, $22          # the channel's planes
	stl	$22, U_ADDR($17)
	stl	$6, U_BYTES($17)
	stl	$1, U_BLOCK($17)
	stl	$5, U_STRIDE($17)
	br	3f
2:	mull	$21, $2, $21          # a record of k elements
	mull	$16, $21, $23
	addl	$22, $23, $22
	stl	$22, U_ADDR($17)
	stl	$21, U_BYTES($17)
3:	ldi	$18, 8($18)
	ldi	$19, 8($19)
	ldi	$17, 8($17)
	subl	$20, 1, $20
	bgt	$20, 1b
	ret
	.end	bn_plan

# BN_FORWARD / BN_BACKWARD label, load, store, shift: the bodies for elements of 1 << shift
# bytes; scalar loops in double over the channel's N elements ($17).
	.macro	BN_FORWARD label, load, store, shift
	.globl	\label
	.ent	\label
\label:
	ldl	$1, 0($16)            # x
	ldl	$2, 8($16)            # gamma, beta, rm, rv
	ldl	$4, 8 * STREAM_OUT($16)
	ldl	$25, 8 * STREAM_OUT + 8($16)
	ifmovd	$17, $18
	fcvtld	$18, $18              # N
	clr	$5               # sum
	mov	$1, $6
	mov	$17, $7
1:	\load	$8, 0($6)
	faddd	$5, $8, $5
	ldi	$6, 1 << \shift($6)
	subl	$7, 1, $7
	bgt	$7, 1b
	fdivd	$5, $18, $5           # mean
	clr	$19              # sum of squares
	mov	$1, $6
	mov	$17, $7
2:	\load	$8, 0($6)
	fsubd	$8, $5, $8
	fmad	$8, $8, $19, $19
	ldi	$6, 1 << \shift($6)
	subl	$7, 1, $7
	bgt	$7, 2b
	fdivd	$19, $18, $20         # biased variance
	\load	$21, 2 << \shift($2)  # running mean, var
	\load	$22, 3 << \shift($2)
	ldl	$23, JOB + J_P($31)   # momentum
	ldl	$24, JOB + J_P + 16($31)   # training
	fbeq	$24, 3f
	ldi	$3, 1
	ifmovd	$3, $3
	fcvtld	$3, $3
	fsubd	$18, $3, $3
	fdivd	$19, $3, $3           # unbiased variance
	ldi	$7, 0x3FF
	sll	$7, 52, $7
	ifmovd	$7, $7                # 1.0
	fsubd	$7, $23, $6           # 1 - momentum
	fmuld	$6, $21, $21
	fmad	$23, $5, $21, $21     # new running mean
	fmuld	$6, $22, $22
	fmad	$23, $3, $22, $22     # new running var
	\store	$21, 0($25)
	\store	$22, 1 << \shift($25)
	br	4f
3:	\store	$21, 0($25)           # inference: the running stats, unchanged
	\store	$22, 1 << \shift($25)
	mov	$21, $5
	mov	$22, $20
4:	ldl	$23, JOB + J_P + 8($31)    # eps
	faddd	$20, $23, $20
	fsqrtd	$20, $20
	ldi	$7, 0x3FF
	sll	$7, 52, $7
	ifmovd	$7, $7
	fdivd	$7, $20, $20          # invstd
	\store	$5, 2 << \shift($25)
	\store	$20, 3 << \shift($25)
	\load	$21, 0($2)            # gamma
	\load	$22, 1 << \shift($2)  # beta
	fmuld	$21, $20, $21         # gamma invstd
	mov	$1, $6
	mov	$4, $8
	mov	$17, $7
5:	\load	$3, 0($6)
	fsubd	$3, $5, $3
	fmad	$3, $21, $22, $3
	\store	$3, 0($8)
	ldi	$6, 1 << \shift($6)
	ldi	$8, 1 << \shift($8)
	subl	$7, 1, $7
	bgt	$7, 5b
	ret
	.end	\label
	.endm
	BN_FORWARD bn_forward_s, flds, fsts, 2
	BN_FORWARD bn_forward_d, fldd, fstd, 3

	.macro	BN_BACKWARD label, load, store, shift
	.globl	\label
	.ent	\label
\label:
	ldl	$1, 0($16)            # dy
	ldl	$2, 8($16)            # x
	ldl	$3, 16($16)           # gamma, mean, invstd
	ldl	$4, 8 * STREAM_OUT($16)
	ldl	$25, 8 * STREAM_OUT + 8($16)
	ifmovd	$17, $18
	fcvtld	$18, $18              # N
	\load	$19, 1 << \shift($3)  # mean
	\load	$20, 2 << \shift($3)  # invstd
	clr	$5               # sum dy
	clr	$21              # sum dy (x - mean)
	mov	$1, $6
	mov	$2, $8
	mov	$17, $7
1:	\load	$22, 0($6)
	\load	$23, 0($8)
	faddd	$5, $22, $5
	fsubd	$23, $19, $23
	fmad	$22, $23, $21, $21
	ldi	$6, 1 << \shift($6)
	ldi	$8, 1 << \shift($8)
	subl	$7, 1, $7
	bgt	$7, 1b
	fmuld	$21, $20, $21         # dgamma
	\store	$21, 0($25)
	\store	$5, 1 << \shift($25)  # dbeta
	fdivd	$5, $18, $5           # dbeta / N
	fdivd	$21, $18, $21         # dgamma / N
	\load	$24, 0($3)
	fmuld	$24, $20, $24         # gamma invstd
	mov	$1, $6
	mov	$2, $8
	mov	$4, $16
	mov	$17, $7
2:	\load	$22, 0($6)
	\load	$23, 0($8)
	fsubd	$23, $19, $23
	fmuld	$23, $20, $23         # xhat
	fsubd	$22, $5, $22
	fnmad	$23, $21, $22, $22    # dy - dbeta/N - xhat dgamma/N
	fmuld	$22, $24, $22
	\store	$22, 0($16)
	ldi	$6, 1 << \shift($6)
	ldi	$8, 1 << \shift($8)
	ldi	$16, 1 << \shift($16)
	subl	$7, 1, $7
	bgt	$7, 2b
	ret
	.end	\label
	.endm
	BN_BACKWARD bn_backward_s, flds, fsts, 2
	BN_BACKWARD bn_backward_d, fldd, fstd, 3
