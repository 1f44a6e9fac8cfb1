# STREAM Copy and Triad through DMA, as the hardware STREAM run does it (docs/timing.md "DMA",
# hardware check): every CPE takes the blocks of `buf` doubles round robin (block j of CPE id
# is element (id + j * cpes) * buf), gets its operand block(s) into LDM in PE mode, waits, runs
# a SIMD loop in LDM (4 doubles per vector instruction, scalar remainder), puts the result
# block and waits. The host (hostlib/bench/stream.py) passes array addresses that are offset
# from 128-byte alignment as the hardware run's arrays were.
#
# Register ABI (docs/asm.md "Calling convention"):
#   stream_copy(a, c, blocks, buf, block_step):             c[i] = a[i]
#   stream_triad(a, b, c, blocks, buf, block_step, scalar): a[i] = b[i] + scalar * c[i]
#   blocks: blocks per CPE; buf: doubles per block (1 ... 1024); block_step: bytes from one of
#   a CPE's blocks to its next (cpes * buf * 8); scalar: the bits of an IEEE double.

	.set	noreorder
	.text

	REPLY = 0             # DMA reply word
	BUF_X = 0x100         # LDM blocks, 8 KiB (MAX_BUF doubles) each
	BUF_Y = 0x2100
	BUF_Z = 0x4100

# SETUP buf: $1 = byte offset of this CPE's first block, $6 / $7 = get / put descriptor
# of buf doubles (PE mode, reply word REPLY), $8 = bytes per block.
	.macro	SETUP buf
	rcid	$1
	sll	\buf, 3, $8
	mull	$1, $8, $1
	vinsw	$31, $31, 0, $6       # w0: get, PE mode
	vinsw	$8, $6, 1, $6         # w1: size
	ldi	$2, REPLY
	vinsw	$2, $6, 4, $6         # w4: reply word
	ldi	$2, 1
	vinsw	$2, $6, 0, $7         # the same as a put
	.endm

# WAIT n: spin until the reply word counts n completions, then clear it.
	.macro	WAIT n
1:	ldw	$2, REPLY($31)
	cmpeq	$2, \n, $2
	beq	$2, 1b
	stw	$31, REPLY($31)
	.endm

	.globl	stream_copy
	.ent	stream_copy
stream_copy:
	SETUP	$19
	stw	$31, REPLY($31)
	ldi	$9, BUF_X
	ldi	$10, BUF_Z
.Lcopy_block:
	addl	$16, $1, $3
	dma	$6, $3, $9            # get a block
	WAIT	1
	srl	$19, 2, $4            # vectors
	mov	$9, $11
	mov	$10, $12
	beq	$4, 3f
2:	vldd	$13, 0($11)
	addl	$11, 32, $11
	subl	$4, 1, $4
	vstd	$13, 0($12)
	addl	$12, 32, $12
	bne	$4, 2b
3:	and	$19, 3, $4            # scalar remainder
	beq	$4, 5f
4:	fldd	$13, 0($11)
	addl	$11, 8, $11
	subl	$4, 1, $4
	fstd	$13, 0($12)
	addl	$12, 8, $12
	bne	$4, 4b
5:	addl	$17, $1, $3
	dma	$7, $3, $10           # put c block
	WAIT	1
	addl	$1, $20, $1
	subl	$18, 1, $18
	bgt	$18, .Lcopy_block
	ret
	.end	stream_copy

	.globl	stream_triad
	.ent	stream_triad
stream_triad:
	SETUP	$20
	ldl	$5, 0($sp)
	vcpyf	$5, $5                # scalar in all four lanes
	stw	$31, REPLY($31)
	ldi	$9, BUF_X
	ldi	$14, BUF_Y
	ldi	$10, BUF_Z
.Ltriad_block:
	addl	$17, $1, $3
	dma	$6, $3, $9            # get b block
	addl	$18, $1, $3
	dma	$6, $3, $14           # get c block
	WAIT	2
	srl	$20, 2, $4            # vectors
	mov	$9, $11
	mov	$14, $15
	mov	$10, $12
	beq	$4, 3f
2:	vldd	$13, 0($11)
	vldd	$22, 0($15)
	addl	$11, 32, $11
	addl	$15, 32, $15
	vmad	$22, $5, $13, $13     # b + scalar * c
	subl	$4, 1, $4
	vstd	$13, 0($12)
	addl	$12, 32, $12
	bne	$4, 2b
3:	and	$20, 3, $4            # scalar remainder
	beq	$4, 5f
4:	fldd	$13, 0($11)
	fldd	$22, 0($15)
	addl	$11, 8, $11
	addl	$15, 8, $15
	fmad	$22, $5, $13, $13
	subl	$4, 1, $4
	fstd	$13, 0($12)
	addl	$12, 8, $12
	bne	$4, 4b
5:	addl	$16, $1, $3
	dma	$7, $3, $10           # put a block
	WAIT	1
	addl	$1, $21, $1
	subl	$19, 1, $19
	bgt	$19, .Ltriad_block
	ret
	.end	stream_triad
