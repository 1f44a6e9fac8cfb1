# QingLong's persistent kernel (docs/qinglong.md "Persistent kernel"), for y = alpha x in
# float64 (persistent_scale) or float32 (persistent_scale_s: widened by vlds, rounded once by
# vsts, as stream.s's scale_s), on the stream of ring.inc: each CPE owns Q_SHARE bytes of every
# sample and computes them in place in its slot.

	.include "../include/dma.inc"

	Q_SHARE = 16          # bytes of a sample per CPE (a multiple of a vector's elements)
	Q_ALPHA = 24          # alpha, the bits of an IEEE double
	JOB_BYTES = 32
	.include "ring.inc"

	.ldm
	.align	5
	.globl	ring_ldm_end
ring_ldm_end:                 # the 3 slots of Q_SHARE bytes start here

	.text

# SCALE_SETUP: the ring's registers for a share of Q_SHARE bytes in and out in place; $12 alpha.
	.macro	SCALE_SETUP
	rcid	$9
	ldl	$10, JOB + Q_SHARE($31)
	mull	$9, $10, $11
	mov	$11, $17
	clr	$18
	ldl	$1, JOB + Q_ALPHA($31)
	vcpyf	$1, $12
	MAKE_DESC $13, DMA_GET, 0, GETS
	DESC_SET_SIZE $13, $10
	MAKE_DESC $14, DMA_PUT, 0, PUTS
	DESC_SET_SIZE $14, $10
	.endm

# SCALE_SLOT load, store, log_step: the slot at $21 times alpha, loaded by `load` and stored by
# `store`, 1 << log_step bytes a vector.
	.macro	SCALE_SLOT load, store, log_step
	mov	$21, $6
	srl	$10, \log_step, $7
3:	\load	$8, 0($6)
	vmuld	$8, $12, $8
	\store	$8, 0($6)
	addl	$6, 1 << \log_step, $6
	subl	$7, 1, $7
	bne	$7, 3b
	.endm

	.macro	SCALE_D
	SCALE_SLOT vldd, vstd, 5
	.endm

	.macro	SCALE_S
	SCALE_SLOT vlds, vsts, 4
	.endm

	PERSISTENT_RING persistent_scale, SCALE_SETUP, SCALE_D, ring_ldm_end
	PERSISTENT_RING persistent_scale_s, SCALE_SETUP, SCALE_S, ring_ldm_end
