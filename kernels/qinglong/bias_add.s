# QingLong's data package, the example (docs/qinglong.md "Segments and relocations"):
# y = x + bias in float64, the bias a constant of the package (.qconst), x and y reached
# through the I/O slots x_in and y_out. Nothing here names an address: the launch passes the
# segments' bases ($16 the constants, $17 the scratch, $18 the I/O table), so binding other
# inputs and outputs changes no instruction. BIAS_BYTES (the host defines it before this file)
# is a multiple of 64 x 32 bytes: each CPE adds its SHARE of the vector.

	.include "../include/dma.inc"

	SHARE = BIAS_BYTES / 64

	.qio
	.globl	x_in, y_out
x_in:	.quad	0
y_out:	.quad	0

	.qconst
	.align	7
	.globl	bias
bias:	.skip	BIAS_BYTES
	.size	bias, BIAS_BYTES

	.ldm
REPLY:	.skip	4
	.align	5
XBUF:	.skip	SHARE             # x, then x + bias
BBUF:	.skip	SHARE
	.globl	bias_add_ldm_end
bias_add_ldm_end:

	.text
	.globl	bias_add
	.ent	bias_add
bias_add:
	rcid	$9
	ldi	$10, SHARE
	mull	$9, $10, $11          # this CPE's byte offset in x, y and the bias
	MAKE_DESC $12, DMA_GET, SHARE, REPLY
	ldl	$1, x_in($18) !io     # the input's address, from its slot
	addl	$1, $11, $1
	ldi	$3, XBUF
	DMA_WAIT $12, $1, $3, REPLY
	ldi	$2, bias($16) !seg    # the bias' address: the constants' base + its offset
	addl	$2, $11, $2
	ldi	$3, BBUF
	DMA_WAIT $12, $2, $3, REPLY
	ldi	$4, XBUF
	ldi	$5, SHARE / 32
1:	vldd	$6, 0($4)
	vldd	$7, SHARE($4)
	vaddd	$6, $7, $6
	vstd	$6, 0($4)
	addl	$4, 32, $4
	subl	$5, 1, $5
	bne	$5, 1b
	MAKE_DESC $12, DMA_PUT, SHARE, REPLY
	ldl	$1, y_out($18) !io
	addl	$1, $11, $1
	ldi	$3, XBUF
	DMA_WAIT $12, $1, $3, REPLY
	ret
	.end	bias_add
