# QingLong's persistent Conv (docs/qinglong.md "Persistent Conv"): y = conv(x, w) (stride 1,
# zero padding PAD) for a stream of float32 NCHW samples on the ring of ring.inc, the weights
# resident in the LDMs in float64. CPE c computes output row c / GROUPS of the output channels of
# group c % GROUPS (CG of them): it gets the input rows its taps reach (PARAMS), all CI channels,
# in one strided get, and puts its CG channel rows of the output in one strided put.
# The host defines before this file CPES, CI, CG (a multiple of 8), K, PAD, W, WO, XTAB_BYTES,
# W_BYTES, IN_BYTES (a slot's input part), SLOT_BYTES, PUT_SIZE, PUT_BLOCK, PUT_STRIDE and
# RING_STAGES. Q_CONST (the record) is the constants on the device, copied there once: CPES
# entries of P_BYTES (PARAMS), the per-column table (XTAB: X_BYTES a column) and every group's
# weights as [channel][tap row][tap column][output channel].

	.include "../include/dma.inc"

	Q_CONST = 16
	JOB_BYTES = 32
	.include "ring.inc"

	P_IN = 0              # this CPE's byte offset in an input (its first row)
	P_OUT = 8             # ... in an output (its first channel row)
	P_GET_SIZE = 16       # its get: CI blocks of its rows
	P_GET_BLOCK = 24
	P_GET_STRIDE = 32
	P_ROWS = 40           # tap rows inside the image
	P_WSTART = 48         # the first such tap row's weights: byte offset in WBUF
	P_WEIGHTS = 56        # its group's weights: byte offset in the constants
	P_WSKIP = 64          # a channel's weights past its tap rows inside the image
	LOG_P_BYTES = 7
	P_BYTES = 1 << LOG_P_BYTES
	X_IN = 0              # a column's first tap in the input part of a slot
	X_W = 8               # its weights' offset in a tap row
	X_TAPS = 16           # tap columns inside the image
	X_IN_SKIP = 24        # to the next tap row, after them
	X_W_SKIP = 32
	X_BYTES = 40
	CG_BYTES = CG * 8     # a tap's weights

	.ldm
	.align	5
PARAMS:	.skip	P_BYTES
	.align	3
XTAB:	.skip	XTAB_BYTES
	.align	5
WBUF:	.skip	W_BYTES
	.align	5
	.globl	conv_ring
conv_ring:
	.skip	3 * SLOT_BYTES
	.globl	conv_ldm_end
conv_ldm_end:

	.text

# CONV_SETUP: this CPE's entry, the column table and its group's weights, once; the ring's
# registers from them.
	.macro	CONV_SETUP
	ldl	$1, JOB + Q_CONST($31)
	rcid	$9
	sll	$9, LOG_P_BYTES, $2
	addl	$1, $2, $2
	MAKE_DESC $3, DMA_GET, P_BYTES, JOB_REPLY
	ldi	$5, PARAMS
	DMA_WAIT $3, $2, $5, JOB_REPLY
	ldi	$2, CPES * P_BYTES($1)
	ldi	$6, XTAB_BYTES
	DESC_SET_SIZE $3, $6
	ldi	$5, XTAB
	DMA_WAIT $3, $2, $5, JOB_REPLY
	ldl	$2, PARAMS + P_WEIGHTS($31)
	addl	$1, $2, $2
	ldi	$6, W_BYTES
	DESC_SET_SIZE $3, $6
	ldi	$5, WBUF
	DMA_WAIT $3, $2, $5, JOB_REPLY
	ldi	$10, SLOT_BYTES
	ldl	$11, PARAMS + P_IN($31)
	ldl	$17, PARAMS + P_OUT($31)
	ldi	$18, IN_BYTES
	ldl	$5, PARAMS + P_GET_BLOCK($31)
	MAKE_DESC $13, DMA_GET, 0, GETS, DMA_PE, $5
	ldl	$5, PARAMS + P_GET_SIZE($31)
	DESC_SET_SIZE $13, $5
	ldl	$5, PARAMS + P_GET_STRIDE($31)
	DESC_SET_STRIDE $13, $5
	ldi	$5, PUT_BLOCK
	MAKE_DESC $14, DMA_PUT, PUT_SIZE, PUTS, DMA_PE, $5
	ldi	$5, PUT_STRIDE
	DESC_SET_STRIDE $14, $5
	.endm

# CONV_SLOT: the output part of the slot at $21 from its input part. For each output column
# (XTAB entry, $24) and block of 8 output channels ($28 its weights' offset), two vectors of
# sums over the channels, the tap rows inside the image and the column's taps (each an input
# value, widened and splat by ldse, times the taps' 8 weights), rounded to float32 by fsts into
# the channels' rows.
	.macro	CONV_SLOT
	ldi	$20, CG_BYTES
	ldi	$19, WO * 4           # an output channel row
	ldi	$24, XTAB
	addl	$21, $18, $25         # column x of the output's first channel row
	ldi	$27, WO
1:	clr	$28
2:	vcpyf	$31, $0
	vcpyf	$31, $1
	ldl	$6, X_IN($24)
	addl	$6, $21, $6
	ldl	$7, X_W($24)
	addl	$7, $28, $7
	ldl	$2, PARAMS + P_WSTART($31)
	addl	$7, $2, $7
	ldi	$7, WBUF($7)
	ldi	$8, CI
3:	ldl	$9, PARAMS + P_ROWS($31)
4:	ldl	$12, X_TAPS($24)
5:	ldse	$2, 0($6)
	vldd	$3, 0($7)
	vldd	$5, 32($7)
	vmad	$3, $2, $0, $0
	vmad	$5, $2, $1, $1
	addl	$6, 4, $6
	addl	$7, $20, $7
	subl	$12, 1, $12
	bne	$12, 5b
	ldl	$2, X_IN_SKIP($24)
	addl	$6, $2, $6
	ldl	$2, X_W_SKIP($24)
	addl	$7, $2, $7
	subl	$9, 1, $9
	bne	$9, 4b
	ldl	$2, PARAMS + P_WSKIP($31)
	addl	$7, $2, $7
	subl	$8, 1, $8
	bne	$8, 3b
	srl	$28, 3, $16           # the block's first channel row
	mull	$16, $19, $16
	addl	$16, $25, $16
	.irp	acc, $0, $1
	.irp	lane, 0, 1, 2, 3
	vextf	\acc, \lane, $3
	fsts	$3, 0($16)
	addl	$16, $19, $16
	.endr
	.endr
	addl	$28, 64, $28
	cmplt	$28, $20, $2
	bne	$2, 2b
	ldi	$24, X_BYTES($24)
	addl	$25, 4, $25
	subl	$27, 1, $27
	bne	$27, 1b
	.endm

	PERSISTENT_RING persistent_conv, CONV_SETUP, CONV_SLOT, conv_ring
