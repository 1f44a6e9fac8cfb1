# QingLong's persistent kernel (docs/qinglong.md "Persistent kernel"), for y = alpha x in
# float64 (persistent_scale) or float32 (persistent_scale_s: widened by vlds, rounded once by
# vsts, as stream.s's scale_s): one launch serves a stream of Q_COUNT samples. Each CPE owns Q_SHARE bytes of every
# sample and moves them through a 3-slot ring in its LDM: at step k it gets sample k+1, computes
# sample k in place and puts it while sample k-1's put may still be in flight. The descriptor
# table (Q_TABLE: each sample's (input, output) address pair, padded to whole chunks of CHUNK
# samples) reaches a 2-chunk ring in the LDM a chunk at a time: chunk c+1 at step 32c (sample
# 32c-1, the last of chunk c-1, was put at the step before), waited for at step 32c+31, whose
# get is its first use; so the stream has no length limit. Reply words count completions
# (GETS, PUTS, CHUNKS), so a step waits for a count, not a flag.

	.include "../include/dma.inc"

	Q_COUNT = 0           # samples
	Q_SHARE = 8           # bytes of a sample per CPE (a multiple of a vector's elements)
	Q_ALPHA = 16          # alpha, the bits of an IEEE double
	Q_TABLE = 24          # main-memory address of the descriptor table
	JOB_BYTES = 32
	LOG_CHUNK = 5
	CHUNK = 1 << LOG_CHUNK   # samples per chunk of the table
	CHUNK_BYTES = CHUNK * 16

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
TABLE:	.skip	2 * CHUNK_BYTES
JOB_REPLY:
	.skip	4
GETS:	.skip	4
PUTS:	.skip	4
CHUNKS:	.skip	4
	.align	5
	.globl	ring_ldm_end
ring_ldm_end:                 # the 3 slots of Q_SHARE bytes start here

	.text

# NEXT_SLOT slot: the ring's next slot after the register `slot` ($23 first, $22 the end);
# takes $3.
	.macro	NEXT_SLOT slot
	addl	\slot, $10, \slot
	cmplt	\slot, $22, $3
	bne	$3, 1f
	mov	$23, \slot
1:
	.endm

# PERSISTENT_SCALE name, load, store, log_step: the kernel `name` for elements loaded by `load`
# and stored by `store`, 1 << log_step bytes a vector.
# $4 samples, $10 share, $11 this CPE's offset in a sample, $12 alpha, $13 / $14 the get / put
# descriptors, $15 k, $21 slot of k, $23 / $22 the ring's start / end.
	.macro	PERSISTENT_SCALE name, load, store, log_step
	.globl	\name
	.ent	\name
\name:
	FETCH_JOB $2, $3, JOB_REPLY
	ldl	$4, JOB + Q_COUNT($31)
	MAKE_DESC $2, DMA_GET, CHUNK_BYTES, JOB_REPLY
	ldl	$6, JOB + Q_TABLE($31)    # chunk 0 of the table
	ldi	$7, TABLE
	DMA_WAIT $2, $6, $7, JOB_REPLY
	rcid	$9
	ldl	$10, JOB + Q_SHARE($31)
	mull	$9, $10, $11
	ldl	$1, JOB + Q_ALPHA($31)
	vcpyf	$1, $12
	MAKE_DESC $13, DMA_GET, 0, GETS
	DESC_SET_SIZE $13, $10
	MAKE_DESC $14, DMA_PUT, 0, PUTS
	DESC_SET_SIZE $14, $10
	stw	$31, GETS($31)
	stw	$31, PUTS($31)
	stw	$31, CHUNKS($31)
	ldi	$23, ring_ldm_end
	mov	$23, $21
	addl	$10, $10, $22
	addl	$22, $10, $22
	addl	$22, $23, $22
	ldl	$3, TABLE($31)        # sample 0's get
	addl	$3, $11, $3
	dma	$13, $3, $21
	clr	$15
.Lstep\@:
	and	$15, CHUNK - 1, $1    # step 32c: get chunk c+1 if the stream has it
	bne	$1, 4f
	addl	$15, CHUNK, $1
	cmplt	$1, $4, $2
	beq	$2, 4f
	srl	$1, LOG_CHUNK, $1
	sll	$1, LOG_CHUNK + 4, $2
	ldl	$5, JOB + Q_TABLE($31)
	addl	$5, $2, $5
	and	$1, 1, $2
	sll	$2, LOG_CHUNK + 4, $2
	ldi	$2, TABLE($2)
	MAKE_DESC $8, DMA_GET, CHUNK_BYTES, CHUNKS
	dma	$8, $5, $2
4:	addl	$15, 1, $1            # get k+1 into the slot sample k-2 was put from
	cmplt	$1, $4, $2
	beq	$2, 2f
	subl	$15, 1, $2            # puts 0..k-2 done
	WAIT_COUNT PUTS, $2, $3
	and	$1, CHUNK - 1, $2     # k+1 starts chunk c: it is in
	bne	$2, 5f
	srl	$1, LOG_CHUNK, $2
	WAIT_COUNT CHUNKS, $2, $3
5:	mov	$21, $5               # (NEXT_SLOT takes $3)
	NEXT_SLOT $5
	and	$1, 2 * CHUNK - 1, $2
	sll	$2, 4, $2
	ldl	$3, TABLE($2)
	addl	$3, $11, $3
	dma	$13, $3, $5
2:	addl	$15, 1, $2            # sample k is in
	WAIT_COUNT GETS, $2, $3
	mov	$21, $6
	srl	$10, \log_step, $7
3:	\load	$8, 0($6)
	vmuld	$8, $12, $8
	\store	$8, 0($6)
	addl	$6, 1 << \log_step, $6
	subl	$7, 1, $7
	bne	$7, 3b
	and	$15, 2 * CHUNK - 1, $2    # put k
	sll	$2, 4, $2
	ldl	$3, TABLE + 8($2)
	addl	$3, $11, $3
	dma	$14, $3, $21
	NEXT_SLOT $21
	addl	$15, 1, $15
	cmplt	$15, $4, $1
	bne	$1, .Lstep\@
	WAIT_COUNT PUTS, $4, $3
	ret
	.end	\name
	.endm

	PERSISTENT_SCALE persistent_scale, vldd, vstd, 5
	PERSISTENT_SCALE persistent_scale_s, vlds, vsts, 4
