# ParaX on the CPE array (docs/parax.md; hostlib/parax/ is the host side). One CPE runs a list of
# single-CPE f32 operators on its own samples, one sample at a time, every operator reading its
# input from main memory and writing its output there by DMA (unfused, as a framework runs
# them: ParaX digest §1.8):
#   conv 3x3, pad 1, 16 -> 16 channels, 8x8: out[p][co] = sum over (kh, kw, ci) in that order
#       of in[p + (kh-1, kw-1)][ci] w[kh][kw][ci][co], one fused f32 multiply-add per term
#   bn (inference form): out[p][c] = in[p][c] scale[c] + shift[c], one fused f32 multiply-add
#   relu: out = in with every element whose sign bit is set replaced by +0
# A sample is (8, 8, 16) f32, channels innermost (HWC, 4 KiB). Weights are [kh][kw][ci][co].
#
# A sample may have fewer rows (J_ROWS, 1..8: (rows, 8, 16), zero-padded above and below).
#
# parax_run(jobs $16): CPE id takes the job record at jobs + id JOB_BYTES. With J_BCAST, CPE 0
# broadcasts the weights and BN parameters of every layer into every LDM (all 64 CPEs must be
# spawned); else each CPE gets its own copy. The spawned CPEs meet (`synr J_RMASK` then `sync
# J_CMASK`), then each spins for J_DELAY cycles (delayed start), runs its J_NSAMP samples and
# writes its statistics. J_BARRIER: after every operator the CPEs of its instance meet (`synr
# J_GRMASK`, `sync J_GCMASK`): per_cg (the whole array) and per_group(x) (x CPEs).

	.set	noreorder
	.include "../include/dma.inc"
	.include "parax.inc"

	J_NSAMP = 0           # samples of this CPE (0: it only takes part in the broadcast)
	J_IN = 8              # its first input sample, first output sample (consecutive samples)
	J_OUT = 16
	J_TMP = 24            # two sample buffers (addresses) in memory between its operators
	J_W = 40              # conv weights of J_NCONV layers (CONV_W_BYTES each), in memory
	J_NCONV = 48
	J_BN = 56             # BN parameters of J_NBN layers (scale[16], shift[16] f32 each)
	J_NBN = 64
	J_DELAY = 72          # cycles from the array's meeting to the start of its samples
	J_RMASK = 80          # the meeting's masks: synr J_RMASK, then sync J_CMASK
	J_CMASK = 88
	J_STATS = 96          # STATS_BYTES of statistics, in memory
	J_NOPS = 104          # operators, then their codes: kind | layer << 8
	J_ROWS = 112          # image rows of a sample (1..8)
	J_BCAST = 120         # 1: CPE 0 broadcasts the parameters
	J_BARRIER = 128       # 1: the instance meets after every operator (per_cg, per_group)
	J_GRMASK = 136        # the instance's masks
	J_GCMASK = 144
	J_OPS = 152
	MAX_OPS = 16
	JOB_BYTES = J_OPS + 8 * MAX_OPS

	OP_CONV = 1
	OP_BN = 2
	OP_RELU = 3

	S_CYCLES = 0          # statistics: cycles inside the operators of kind k at S_CYCLES + 8 k,
	S_CALLS = 32          # calls at S_CALLS + 8 k, first and last cycle of its samples
	S_BEGIN = 64
	S_END = 72
	STATS_BYTES = 128

	ROW_BYTES = 512       # one image row, 8 pixels x 16 channels (f32)
	MAX_ROWS = 8
	SAMPLE_BYTES = ROW_BYTES * MAX_ROWS
	PAD_ROW_BYTES = 640   # a row of the padded input: 10 pixels
	PIXEL_BYTES = 64
	CONV_W_BYTES = 9216   # 3 x 3 x 16 x 16 f32
	BN_P_BYTES = 128
	MAX_CONV = 4
	MAX_BN = 4

	.ldm
	.align	5
RPLY:	.long	0             # DMA reply word
	.long	0
SAVE_RA:
	.quad	0
SAVE_OP_RA:
	.quad	0
SAVE_CONV_RA:
	.quad	0
SAVE_DST:
	.quad	0
SAVE_T0:
	.quad	0
SIZE:	.quad	0             # bytes of a sample
SAVE_LOOP:
	.skip	8 * 7             # the driver's $9-$15 across an operator (they clobber all)
	.align	5
JOB:	.skip	JOB_BYTES
	.align	5
STATS:	.skip	STATS_BYTES
	.align	5
BUF:	.skip	SAMPLE_BYTES  # an operator's input (bn, relu) and output (all)
	.align	5
PADDED:	.skip	PAD_ROW_BYTES * (MAX_ROWS + 2)    # conv input with a zero border (never written)
	.align	5
WEIGHTS:
	.skip	CONV_W_BYTES * MAX_CONV
	.align	5
BN_PARAMS:
	.skip	BN_P_BYTES * MAX_BN
	.align	5
	.globl	parax_ldm_end
parax_ldm_end:

	.text

# GET_LAYERS count_field, base_field, ldm, bytes, desc: get the parameters of count layers of
# `bytes` each into `ldm`, one request per layer, with the descriptor `desc` (size `bytes`).
	.macro	GET_LAYERS count_field, base_field, ldm, bytes, desc
	ldl	$5, JOB + \count_field($31)
	ldl	$6, JOB + \base_field($31)
	ldi	$7, \ldm
	ble	$5, 2f
3:	dma	\desc, $6, $7
	WAIT_REPLY 1
	ldi	$6, \bytes($6)
	ldi	$7, \bytes($7)
	subl	$5, 1, $5
	bgt	$5, 3b
2:
	.endm

# GET_PADDED_ROWS src: clear RPLY, issue (no wait) the gets of a sample's $7 rows from `src`
# (advanced past them) into PADDED's interior. Clobbers $4-$6.
	.macro	GET_PADDED_ROWS src
	MAKE_DESC $4, DMA_GET, ROW_BYTES, RPLY
	ldi	$5, PADDED + PAD_ROW_BYTES + PIXEL_BYTES
	mov	$7, $6
	stw	$31, RPLY($31)
8:	dma	$4, \src, $5          # (label 8: free where it expands)
	ldi	\src, ROW_BYTES(\src)
	ldi	$5, PAD_ROW_BYTES($5)
	subl	$6, 1, $6
	bgt	$6, 8b
	.endm

# ZERO_VECTORS addr, count: store +0 to `count` vectors from LDM `addr`. Clobbers $1, $2.
	.macro	ZERO_VECTORS addr, count
	ldi	$1, \addr
	ldi	$2, \count
1:	vsts	$31, 0($1)
	ldi	$1, 16($1)
	subl	$2, 1, $2
	bgt	$2, 1b
	.endm

# MEET row, column: a barrier (synr, then sync) with the masks of the job's fields.
	.macro	MEET row, column
	ldl	$1, JOB + \row($31)
	synr	$1
	ldl	$1, JOB + \column($31)
	sync	$1
	.endm

# SAVE_LOOP_REGS op: store (stl) or reload (ldl) the driver's loop registers $9-$15.
	.macro	SAVE_LOOP_REGS op
	.irp	r, 9, 10, 11, 12, 13, 14, 15
	\op	$\r, SAVE_LOOP + 8 * (\r - 9)($31)
	.endr
	.endm

# ENTER: take the job record (the reply word left clear), SIZE = the bytes of a sample.
	.macro	ENTER
	ENTER_WITH_JOB JOB, JOB_BYTES
	stw	$31, RPLY($31)
	ldl	$1, JOB + J_ROWS($31)
	sll	$1, 9, $1             # ROW_BYTES per row
	stl	$1, SIZE($31)
	.endm

# LEAVE: the last cycle into the statistics, put them to J_STATS, return.
	.macro	LEAVE
	rtc	$2
	stl	$2, STATS + S_END($31)
	ldl	$2, JOB + J_STATS($31)
	MAKE_DESC $1, DMA_PUT, STATS_BYTES, RPLY
	ldi	$3, STATS
	DMA_WAIT $1, $2, $3, RPLY
	ldl	$26, SAVE_RA($31)
	ret
	.endm

	.globl	parax_run
	.ent	parax_run
parax_run:
	ENTER
	ldl	$1, JOB + J_BCAST($31)
	bne	$1, 11f
	MAKE_DESC $8, DMA_GET, CONV_W_BYTES, RPLY
	MAKE_DESC $9, DMA_GET, BN_P_BYTES, RPLY
	br	12f
11:	rcid	$1                    # broadcast: CPE 0 gets, the array meets
	bne	$1, 10f
	MAKE_DESC $8, DMA_GET, CONV_W_BYTES, RPLY, DMA_BCAST, $31, 0xff
	MAKE_DESC $9, DMA_GET, BN_P_BYTES, RPLY, DMA_BCAST, $31, 0xff
12:	GET_LAYERS J_NCONV, J_W, WEIGHTS, CONV_W_BYTES, $8
	GET_LAYERS J_NBN, J_BN, BN_PARAMS, BN_P_BYTES, $9
10:	MEET	J_RMASK, J_CMASK
	ldl	$1, JOB + J_DELAY($31)
	rtc	$2
	addl	$1, $2, $1
2:	rtc	$2                    # delayed start
	cmplt	$2, $1, $2
	bne	$2, 2b
	rtc	$2
	stl	$2, STATS + S_BEGIN($31)
	ldl	$9, JOB + J_NSAMP($31)
	ldl	$10, JOB + J_IN($31)
	ldl	$11, JOB + J_OUT($31)
	ble	$9, 9f
3:	mov	$10, $12              # source of the next operator
	ldi	$13, JOB + J_OPS($31)
	ldl	$14, JOB + J_NOPS($31)
	clr	$15                   # operator index
4:	subl	$14, 1, $1            # destination: the output sample after the last operator,
	cmpeq	$15, $1, $1           # else a buffer by parity
	and	$15, 1, $2
	sll	$2, 3, $2
	ldl	$2, JOB + J_TMP($2)
	selne	$1, $11, $2, $2
	stl	$2, SAVE_DST($31)
	rtc	$3
	stl	$3, SAVE_T0($31)
	ldl	$3, 0($13)
	mov	$12, $16
	SAVE_LOOP_REGS stl
	bsr	$26, run_op
	SAVE_LOOP_REGS ldl
	rtc	$3                    # time the call
	ldl	$4, SAVE_T0($31)
	subl	$3, $4, $3
	ldl	$1, 0($13)
	and	$1, 0xff, $1
	sll	$1, 3, $1
	ldl	$4, STATS + S_CYCLES($1)
	addl	$4, $3, $4
	stl	$4, STATS + S_CYCLES($1)
	ldl	$4, STATS + S_CALLS($1)
	addl	$4, 1, $4
	stl	$4, STATS + S_CALLS($1)
	ldl	$1, JOB + J_BARRIER($31)  # per_cg: the array meets after every operator
	beq	$1, 5f
	MEET	J_GRMASK, J_GCMASK
5:	ldl	$12, SAVE_DST($31)
	ldi	$13, 8($13)
	addl	$15, 1, $15
	cmplt	$15, $14, $1
	bne	$1, 4b
	ldl	$1, SIZE($31)
	addl	$10, $1, $10
	addl	$11, $1, $11
	subl	$9, 1, $9
	bgt	$9, 3b
9:	LEAVE
	.end	parax_run

# run_op(source $16, code $3): get the input, compute into BUF, put BUF to SAVE_DST.
	.ent	run_op
run_op:
	stl	$26, SAVE_OP_RA($31)
	and	$3, 0xff, $1
	srl	$3, 8, $2             # layer
	ldl	$7, JOB + J_ROWS($31)
	ldl	$8, SIZE($31)
	cmpeq	$1, OP_CONV, $4
	bne	$4, 1f
	MAKE_DESC $4, DMA_GET, 0, RPLY
	DESC_SET_SIZE $4, $8
	ldi	$5, BUF
	DMA_WAIT $4, $16, $5, RPLY
	ldi	$16, BUF
	mov	$7, $18
	cmpeq	$1, OP_BN, $4
	beq	$4, 2f
	sll	$2, 7, $17            # BN_P_BYTES per layer
	ldi	$17, BN_PARAMS($17)
	bsr	$26, bn_f32
	br	3f
2:	bsr	$26, relu_f32
	br	3f
1:	GET_PADDED_ROWS $16      # the rows into the padded buffer's interior
	WAIT_REPLY $7
	ldi	$5, CONV_W_BYTES
	mull	$2, $5, $17
	ldi	$17, WEIGHTS($17)
	ldi	$16, PADDED
	mov	$7, $18
	bsr	$26, conv3x3_f32
3:	ldl	$2, SAVE_DST($31)
	MAKE_DESC $1, DMA_PUT, 0, RPLY
	ldl	$8, SIZE($31)
	DESC_SET_SIZE $1, $8
	ldi	$3, BUF
	DMA_WAIT $1, $2, $3, RPLY
	ldl	$26, SAVE_OP_RA($31)
	ret
	.end	run_op

# conv3x3_f32(padded input $16, weights $17, rows $18): BUF = the convolution. Tiles of 2
# output pixels x 16 channels (accumulators $0-$7); for each kh the 48 (kw, ci) terms are
# contiguous in the padded row and in the weights, taken two at a time, software-pipelined:
# the multiply-adds of one term (in $8/$9, weights $10-$13, or $14/$15, $22-$25) issue beside
# the loads of the next.
	.globl	conv3x3_f32
	.ent	conv3x3_f32
conv3x3_f32:
	stl	$26, SAVE_CONV_RA($31)
	sll	$18, 2, $27           # tiles left
	ldi	$18, BUF              # output tile
1:	vfmov	$31, $0
	vfmov	$31, $1
	vfmov	$31, $2
	vfmov	$31, $3
	vfmov	$31, $4
	vfmov	$31, $5
	vfmov	$31, $6
	vfmov	$31, $7
	mov	$17, $20              # weights of (kh, kw, ci), consecutive over the tile
	mov	$16, $19
	ldi	$28, 3                # kh left
2:	mov	$19, $26              # this kh's padded row at the tile
	ldse	$8, 0($26)
	ldse	$9, PIXEL_BYTES($26)
	vlds	$10, 0($20)
	vlds	$11, 16($20)
	vlds	$12, 32($20)
	vlds	$13, 48($20)
	ldi	$21, 24               # term pairs
3:	vmas	$8, $10, $0, $0
	ldse	$14, 4($26)
	vmas	$8, $11, $1, $1
	ldse	$15, PIXEL_BYTES + 4($26)
	vmas	$8, $12, $2, $2
	vlds	$22, 64($20)
	vmas	$8, $13, $3, $3
	vlds	$23, 80($20)
	vmas	$9, $10, $4, $4
	vlds	$24, 96($20)
	vmas	$9, $11, $5, $5
	vlds	$25, 112($20)
	vmas	$9, $12, $6, $6
	addl	$26, 8, $26
	vmas	$9, $13, $7, $7
	addl	$20, 128, $20
	vmas	$14, $22, $0, $0
	ldse	$8, 0($26)
	vmas	$14, $23, $1, $1
	ldse	$9, PIXEL_BYTES($26)
	vmas	$14, $24, $2, $2
	vlds	$10, 0($20)
	vmas	$14, $25, $3, $3
	vlds	$11, 16($20)
	vmas	$15, $22, $4, $4
	vlds	$12, 32($20)
	vmas	$15, $23, $5, $5
	vlds	$13, 48($20)
	vmas	$15, $24, $6, $6
	subl	$21, 1, $21
	vmas	$15, $25, $7, $7
	bgt	$21, 3b
	ldi	$19, PAD_ROW_BYTES($19)
	subl	$28, 1, $28
	bgt	$28, 2b
	vsts	$0, 0($18)
	vsts	$1, 16($18)
	vsts	$2, 32($18)
	vsts	$3, 48($18)
	vsts	$4, PIXEL_BYTES($18)
	vsts	$5, PIXEL_BYTES + 16($18)
	vsts	$6, PIXEL_BYTES + 32($18)
	vsts	$7, PIXEL_BYTES + 48($18)
	ldi	$18, 2 * PIXEL_BYTES($18)
	ldi	$16, 2 * PIXEL_BYTES($16)
	subl	$27, 1, $27
	and	$27, 3, $1            # a row of 4 tiles done: skip the padded row's 2 border pixels
	bne	$1, 4f
	ldi	$16, 2 * PIXEL_BYTES($16)
4:	bgt	$27, 1b
	ldl	$26, SAVE_CONV_RA($31)
	ret
	.end	conv3x3_f32

# bn_f32(data $16, parameters $17, rows $18): data = data scale + shift per channel, in place.
	.globl	bn_f32
	.ent	bn_f32
bn_f32:
	vlds	$0, 0($17)
	vlds	$1, 16($17)
	vlds	$2, 32($17)
	vlds	$3, 48($17)
	vlds	$4, 64($17)
	vlds	$5, 80($17)
	vlds	$6, 96($17)
	vlds	$7, 112($17)
	sll	$18, 3, $18           # pixels
1:	vlds	$8, 0($16)
	vlds	$9, 16($16)
	vlds	$10, 32($16)
	vlds	$11, 48($16)
	vmas	$8, $0, $4, $8
	vmas	$9, $1, $5, $9
	vmas	$10, $2, $6, $10
	vmas	$11, $3, $7, $11
	subl	$18, 1, $18
	vsts	$8, 0($16)
	vsts	$9, 16($16)
	vsts	$10, 32($16)
	vsts	$11, 48($16)
	ldi	$16, PIXEL_BYTES($16)
	bgt	$18, 1b
	ret
	.end	bn_f32

# relu_f32(data $16, rows $18): in place over a sample. A lane holds the value as a double,
# so its sign is bit 31 of its odd word: vsraw spreads it over that word, vshfw copies the odd
# word to both words of the lane, vbicw clears the lanes whose sign was set.
	.globl	relu_f32
	.ent	relu_f32
relu_f32:
	ldih	$1, 0x7755($31)       # word lanes 1,1,3,3,5,5,7,7
	ldi	$1, 0x3311($1)
	sll	$18, 4, $18           # pairs of vectors
1:	vlds	$2, 0($16)
	vlds	$3, 16($16)
	vsraw	$2, 31, $4
	vsraw	$3, 31, $5
	vshfw	$4, $4, $1, $4
	vshfw	$5, $5, $1, $5
	vbicw	$2, $4, $2
	vbicw	$3, $5, $3
	subl	$18, 1, $18
	vsts	$2, 0($16)
	vsts	$3, 16($16)
	ldi	$16, 32($16)
	bgt	$18, 1b
	ret
	.end	relu_f32

# The conv's backward on one CPE per instance. The block's parameter area (WEIGHTS, four
# layers' room) holds this entry's W, its flipped transpose, dW and the padded dY.
	J_DY = J_TMP          # the output gradients of the job's samples (consecutive)
	J_DW = J_TMP + 8      # where dW (summed over the job's samples) goes
	GRAD_W = 0            # offsets in WEIGHTS
	GRAD_WT = CONV_W_BYTES
	GRAD_DW = 2 * CONV_W_BYTES
	GRAD_PADDED_DY = 3 * CONV_W_BYTES
	GRAD_ZEROED = CONV_W_BYTES + PAD_ROW_BYTES * (MAX_ROWS + 2)    # dW and the padded dY

# SAMPLES_BEGIN: a backward entry's sample loop: the first cycle into the statistics; $9
# samples, $10 x, $11 dX, $12 dY (the job's); none: to 9f.
	.macro	SAMPLES_BEGIN
	rtc	$2
	stl	$2, STATS + S_BEGIN($31)
	ldl	$9, JOB + J_NSAMP($31)
	ldl	$10, JOB + J_IN($31)
	ldl	$11, JOB + J_OUT($31)
	ldl	$12, JOB + J_DY($31)
	ble	$9, 9f
	.endm

# SAMPLES_END dx, grad, bytes: after a sample's compute (its $9-$15 saved): put dX (LDM `dx`),
# step to the next sample (loop at 5b); after the last, put the parameter gradient (LDM
# `grad`, `bytes`) to J_DW.
	.macro	SAMPLES_END dx, grad, bytes
	SAVE_LOOP_REGS ldl
	MAKE_DESC $1, DMA_PUT, 0, RPLY
	ldl	$8, SIZE($31)
	DESC_SET_SIZE $1, $8
	ldi	$3, \dx
	DMA_WAIT $1, $11, $3, RPLY
	addl	$10, $8, $10
	addl	$11, $8, $11
	addl	$12, $8, $12
	subl	$9, 1, $9
	bgt	$9, 5b
	MAKE_DESC $1, DMA_PUT, \bytes, RPLY
	ldl	$2, JOB + J_DW($31)
	ldi	$3, \grad
	DMA_WAIT $1, $2, $3, RPLY
	.endm

# parax_conv_grad(jobs $16): CPE id takes the job record at jobs + id JOB_BYTES: J_NSAMP
# samples x from J_IN and their dY from J_DY, one layer's weights at J_W, J_ROWS rows. Per
# sample (in order): dX = the convolution of the zero-bordered dY with W flipped and
# transposed (WT[2-kh][2-kw][co][ci] = W[kh][kw][ci][co]; conv3x3_f32), put to J_OUT; dW +=
# the correlation of x and dY (conv3x3_dw_f32). Then dW goes to J_DW, the statistics to J_STATS.
	.globl	parax_conv_grad
	.ent	parax_conv_grad
parax_conv_grad:
	ENTER
	MAKE_DESC $1, DMA_GET, CONV_W_BYTES, RPLY
	ldl	$2, JOB + J_W($31)
	ldi	$3, WEIGHTS + GRAD_W
	DMA_WAIT $1, $2, $3, RPLY
	ZERO_VECTORS WEIGHTS + GRAD_DW, GRAD_ZEROED / 16   # dW, the padded dY (its border stays 0)
	bsr	$26, flip_transpose
	SAMPLES_BEGIN
5:	MAKE_DESC $4, DMA_GET, ROW_BYTES, RPLY   # x and dY row by row into the padded buffers
	ldl	$7, JOB + J_ROWS($31)
	ldi	$5, PADDED + PAD_ROW_BYTES + PIXEL_BYTES
	ldi	$6, WEIGHTS + GRAD_PADDED_DY + PAD_ROW_BYTES + PIXEL_BYTES
	mov	$10, $13
	mov	$12, $14
	mov	$7, $8
	stw	$31, RPLY($31)
3:	dma	$4, $13, $5
	dma	$4, $14, $6
	ldi	$13, ROW_BYTES($13)
	ldi	$14, ROW_BYTES($14)
	ldi	$5, PAD_ROW_BYTES($5)
	ldi	$6, PAD_ROW_BYTES($6)
	subl	$8, 1, $8
	bgt	$8, 3b
	addl	$7, $7, $7
	WAIT_REPLY $7
	SAVE_LOOP_REGS stl
	ldi	$16, PADDED
	ldi	$17, WEIGHTS + GRAD_PADDED_DY + PAD_ROW_BYTES + PIXEL_BYTES
	ldl	$18, JOB + J_ROWS($31)
	ldi	$19, WEIGHTS + GRAD_DW
	bsr	$26, conv3x3_dw_f32
	ldi	$16, WEIGHTS + GRAD_PADDED_DY
	ldi	$17, WEIGHTS + GRAD_WT
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, conv3x3_f32
	SAMPLES_END BUF, WEIGHTS + GRAD_DW, CONV_W_BYTES
9:	LEAVE
	.end	parax_conv_grad

# flip_transpose: WT[8 - k][co][ci] = W[k][ci][co] for the 9 (kh, kw) = k, exact f32 copies,
# four loads ahead of their stores.
	.ent	flip_transpose
flip_transpose:
	ldi	$1, WEIGHTS + GRAD_W
	ldi	$2, WEIGHTS + GRAD_WT + 8 * 1024
	ldi	$3, 9
1:	ldi	$4, 16                # ci left
	mov	$2, $5                # WT's column ci
2:	.irp	co, 0, 4, 8, 12
	flds	$6, 4 * \co($1)
	flds	$7, 4 * \co + 4($1)
	flds	$8, 4 * \co + 8($1)
	flds	$9, 4 * \co + 12($1)
	fsts	$6, 64 * \co($5)
	fsts	$7, 64 * \co + 64($5)
	fsts	$8, 64 * \co + 128($5)
	fsts	$9, 64 * \co + 192($5)
	.endr
	ldi	$1, 64($1)
	ldi	$5, 4($5)
	subl	$4, 1, $4
	bgt	$4, 2b
	ldi	$2, -1024($2)
	subl	$3, 1, $3
	bgt	$3, 1b
	ret
	.end	flip_transpose

# DW_LOAD c, x0, x1, d0-d3: pixel c of the row: x[ci], x[ci + 1] (broadcast) and dY's 16
# channels (4 vectors).
	.macro	DW_LOAD c, x0, x1, d0, d1, d2, d3
	ldse	\x0, 64 * (\c) + 0($20)
	ldse	\x1, 64 * (\c) + 4($20)
	vlds	\d0, 64 * (\c) + 0($21)
	vlds	\d1, 64 * (\c) + 16($21)
	vlds	\d2, 64 * (\c) + 32($21)
	vlds	\d3, 64 * (\c) + 48($21)
	.endm

# DW_PIXEL c, pixel c's registers, pixel c + 1's: the 8 multiply-adds of pixel c (dW rows ci
# and ci + 1 in $0-$7) issue beside the loads of pixel c + 1 (after the last pixel: the
# border's, unused).
	.macro	DW_PIXEL c, x0, x1, d0, d1, d2, d3, n0, n1, e0, e1, e2, e3
	vmas	\x0, \d0, $0, $0
	ldse	\n0, 64 * (\c) + 64($20)
	vmas	\x0, \d1, $1, $1
	ldse	\n1, 64 * (\c) + 68($20)
	vmas	\x0, \d2, $2, $2
	vlds	\e0, 64 * (\c) + 64($21)
	vmas	\x0, \d3, $3, $3
	vlds	\e1, 64 * (\c) + 80($21)
	vmas	\x1, \d0, $4, $4
	vlds	\e2, 64 * (\c) + 96($21)
	vmas	\x1, \d1, $5, $5
	vlds	\e3, 64 * (\c) + 112($21)
	vmas	\x1, \d2, $6, $6
	vmas	\x1, \d3, $7, $7
	.endm

# conv3x3_dw_f32(padded x $16, dY $17 (rows PAD_ROW_BYTES apart), rows $18, dW $19):
# dW[kh][kw][ci][co] += sum over the pixels p, row by row, of x[p + (kh-1, kw-1)][ci] dY[p][co].
# Per (kh, kw) and pair of input channels: 8 accumulators (2 dW rows of 16), a row of 8
# pixels unrolled, each pixel's 8 vmas beside the next pixel's 6 loads.
	.globl	conv3x3_dw_f32
	.ent	conv3x3_dw_f32
conv3x3_dw_f32:
	stl	$26, SAVE_CONV_RA($31)
	mov	$16, $30              # x at (kh, kw, ci)
	ldi	$29, 3                # kh left
1:	ldi	$28, 3                # kw left
2:	ldi	$27, 8                # ci pairs left
3:	.irp	r, 0, 1, 2, 3, 4, 5, 6, 7
	vlds	$\r, 16 * \r($19)
	.endr
	mov	$30, $20
	mov	$17, $21
	mov	$18, $26
4:	DW_LOAD 0, $8, $9, $10, $11, $12, $13
	.irp	c, 0, 2, 4, 6
	DW_PIXEL \c, $8, $9, $10, $11, $12, $13, $14, $15, $22, $23, $24, $25
	DW_PIXEL \c + 1, $14, $15, $22, $23, $24, $25, $8, $9, $10, $11, $12, $13
	.endr
	ldi	$20, PAD_ROW_BYTES($20)
	ldi	$21, PAD_ROW_BYTES($21)
	subl	$26, 1, $26
	bgt	$26, 4b
	.irp	r, 0, 1, 2, 3, 4, 5, 6, 7
	vsts	$\r, 16 * \r($19)
	.endr
	ldi	$19, 128($19)
	ldi	$30, 8($30)
	subl	$27, 1, $27
	bgt	$27, 3b
	subl	$28, 1, $28           # 8 pairs moved $30 a pixel on: the next kw's
	bgt	$28, 2b
	ldi	$30, PAD_ROW_BYTES - 3 * PIXEL_BYTES($30)
	subl	$29, 1, $29
	bgt	$29, 1b
	ldl	$26, SAVE_CONV_RA($31)
	ret
	.end	conv3x3_dw_f32

# The backward of a [BN, ReLU] pair on one CPE per instance.
	GRAD_DPARAMS = BN_P_BYTES     # offset in BN_PARAMS: dscale[16], dshift[16] (layer 1's room)

# parax_bn_relu_grad(jobs $16): CPE id takes the job record at jobs + id JOB_BYTES: J_NSAMP
# samples x (BN's input) from J_IN and dY (the gradient at ReLU's output) from J_DY, BN's
# scale and shift at J_BN, J_ROWS rows. Per sample (in order), bn_relu_grad_f32 gives dX, put
# to J_OUT, and adds to dscale and dshift; at the end these go to J_DW (dscale[16], dshift[16]).
	.globl	parax_bn_relu_grad
	.ent	parax_bn_relu_grad
parax_bn_relu_grad:
	ENTER
	MAKE_DESC $1, DMA_GET, BN_P_BYTES, RPLY
	ldl	$2, JOB + J_BN($31)
	ldi	$3, BN_PARAMS
	DMA_WAIT $1, $2, $3, RPLY
	ldi	$1, BN_PARAMS + GRAD_DPARAMS
	.irp	r, 0, 1, 2, 3, 4, 5, 6, 7
	vsts	$31, 16 * \r($1)
	.endr
	SAMPLES_BEGIN
5:	ldl	$8, SIZE($31)         # x into BUF, dY into the (unused) weights' room
	MAKE_DESC $4, DMA_GET, 0, RPLY
	DESC_SET_SIZE $4, $8
	stw	$31, RPLY($31)
	ldi	$5, BUF
	dma	$4, $10, $5
	ldi	$5, WEIGHTS
	dma	$4, $12, $5
	WAIT_REPLY 2
	SAVE_LOOP_REGS stl
	ldi	$16, BUF
	ldi	$17, WEIGHTS
	ldl	$18, JOB + J_ROWS($31)
	bsr	$26, bn_relu_grad_f32
	SAMPLES_END WEIGHTS, BN_PARAMS + GRAD_DPARAMS, BN_P_BYTES
9:	LEAVE
	.end	parax_bn_relu_grad

# BNG_VECTOR v, scale, shift, dscale, dshift, x, d, t: one vector (4 channels) of a pixel:
# y = x scale + shift as the forward rounds it; g = dY where y's sign bit is clear (ReLU's
# derivative, as relu_f32 keeps: +0 passes, like every other non-negative y); dscale += g x,
# dshift += g, dX = g scale over dY.
	.macro	BNG_VECTOR v, scale, shift, dscale, dshift, x, d, t
	vlds	\x, 16 * \v($16)
	vlds	\d, 16 * \v($17)
	vmas	\x, \scale, \shift, \t
	vsraw	\t, 31, \t
	vshfw	\t, \t, $28, \t
	vbicw	\d, \t, \d
	vmas	\d, \x, \dscale, \dscale
	vadds	\d, \dshift, \dshift
	vmuls	\d, \scale, \d
	vsts	\d, 16 * \v($17)
	.endm

# bn_relu_grad_f32(x $16, dY $17 (dX written over it), rows $18): scale, shift from
# BN_PARAMS; dscale, dshift accumulated in BN_PARAMS + GRAD_DPARAMS, pixel by pixel.
	.globl	bn_relu_grad_f32
	.ent	bn_relu_grad_f32
bn_relu_grad_f32:
	ldi	$25, BN_PARAMS
	.irp	r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vlds	$\r, 16 * \r($25)        # scale, shift; then dscale, dshift
	.endr
	ldih	$28, 0x7755($31)      # word lanes 1,1,3,3,5,5,7,7 (as relu_f32)
	ldi	$28, 0x3311($28)
	sll	$18, 3, $18           # pixels
1:	BNG_VECTOR 0, $0, $4, $8, $12, $19, $20, $21
	BNG_VECTOR 1, $1, $5, $9, $13, $22, $23, $24
	BNG_VECTOR 2, $2, $6, $10, $14, $19, $20, $21
	BNG_VECTOR 3, $3, $7, $11, $15, $22, $23, $24
	ldi	$16, PIXEL_BYTES($16)
	ldi	$17, PIXEL_BYTES($17)
	subl	$18, 1, $18
	bgt	$18, 1b
	.irp	r, 8, 9, 10, 11, 12, 13, 14, 15
	vsts	$\r, 16 * \r($25)
	.endr
	ret
	.end	bn_relu_grad_f32
