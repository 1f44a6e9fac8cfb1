# Batch normalisation with the data resident in a core group's LDM (docs/dnn.md "Batch
# normalisation"): training forward reads x once and backward reads dy and x once, where
# batchnorm.s (the streaming scheme, the fallback) reads them twice.
#
# The channels are cut into *tiles* of M consecutive channels; a core group takes a range of
# tiles, one at a time, and its CPEs together hold the whole tile. Per image the tile is M H W
# contiguous elements, cut into Q *pieces* of one contiguous DMA each: PLANES > 0 whole planes
# of consecutive channels (H W a multiple of 4: every plane starts on a vector), or (PLANES = 0)
# segments of SEG elements of a plane, Q / M per plane. CPE id holds pieces id, id + CPES, ... of the
# tile's B Q pieces (image = piece / Q) in its slots; the piece table PT keeps, per slot, what
# does not change between tiles.
#
# Per tile: the CPE sums its runs (a run: one channel's elements in a piece) into a partial
# per channel (PART, doubles), the partials are summed over the group by register
# communication in a fixed order (group_sum), and every CPE then has the same totals. Forward:
# the sums give the means; the sums of (x - mean)^2 (a second pass over the LDM copy, not over
# memory) the variances; then y = (x - mean) gamma invstd + beta in place and y is put.
# Backward: sum dy and sum dy (x - mean) in one pass, then dx in place of dy. CPE 0 puts the
# per-channel results. Two parities of slots double-buffer the tiles: the gets of tile t + 1
# are in flight while tile t is computed and its puts are in flight (G_PARITIES = 1, where a
# tile fits the LDM only once: one parity, a tile's gets, compute and puts in turn).
#
# Unlike the streaming operators (thesis §5.3: data parallel, no register communication), a
# tile's sums cross the CPEs, so they travel by register communication. Routines that depend
# on the element size (the passes, the finishes) are chosen by the host: their code addresses
# are in the job (G_F0..G_F3). The kernel keeps no stack frames. Argument: a0 = the job in
# main memory.

	.set	noreorder
	.include "../include/dma.inc"
	.include "stream.inc"       # QUOTIENT
	.include "batchnorm.inc"

	G_IN0 = 0             # x (forward) or dy (backward)
	G_IN1 = 8             # x (backward), else 0
	G_OUT = 16            # y or dx
	G_PARAM = 24          # per channel 4 elements: gamma, beta, running mean, running var
	                      # (backward: gamma, saved mean, saved invstd, 0)
	G_RESULT = 32         # per channel RESULTS elements: new running mean, new running var,
	                      # mean, invstd (backward: dgamma, dbeta)
	G_RESULTS = 40
	G_B = 48
	G_C = 56
	G_HW = 64
	G_ES = 72
	G_M = 80              # channels per tile
	G_PLANES = 88         # planes per piece, 0: segments of one plane
	G_SEG = 96            # segments: elements per segment
	G_Q = 104             # pieces per image and tile
	G_SLOT = 112          # LDM bytes per slot
	G_K = 120             # slots per stream and parity
	G_BUF = 128           # LDM address of the slots: parity 0 (in0 slots, in1 slots), parity 1
	G_FIRST = 136         # this core group's tiles [FIRST, LAST)
	G_LAST = 144
	G_STREAMS = 152       # input streams: 1 (forward), 2 (backward)
	G_COLS = 160          # the mesh
	G_ROWS = 168
	G_F0 = 176            # code addresses, forward: sums, deviations, finish, apply
	G_F1 = 184            # (inference: 0, 0, finish, apply); backward: sums, finish, apply
	G_F2 = 192
	G_F3 = 200
	G_N = 208             # doubles: elements per channel, N - 1, momentum, eps
	G_N1 = 216
	G_MOMENTUM = 224
	G_EPS = 232
	G_PARITIES = 240      # 2: double-buffered tiles; 1: one tile's slots fill the LDM
	G_SKIP = 248          # > 0: a CPE's slots of a whole tile are one strided request per
	                      # stream (pieces of whole slots, G_SKIP bytes apart in memory)
	GJOB_BYTES = 256

	MAX_TILE = 32         # channels per tile, at most
	MAX_SLOTS = 16        # slots per stream and parity, at most
	PT_BYTES = 32         # piece table entry: element offset without the tile's, first
	                      # channel, run length, runs at most
	COEF_BYTES = 64       # per channel: forward mean, gamma invstd, beta; backward mean,
	                      # invstd, dbeta / N, dgamma / N, gamma invstd
	PARAM_BYTES = 32      # a channel's 4 parameter elements, at most
	PARITY_LOG = 10       # log2 of PARAM_BYTES MAX_TILE: a parity's PARAMS / RESULTS

	.ldm
	.align	5
JOB:	.skip	GJOB_BYTES
	.align	5
PART:	.skip	2 * 8 * MAX_TILE      # partial sums per channel (backward: two arrays)
	.align	5
COEF:	.skip	COEF_BYTES * MAX_TILE
	.align	5
PARAMS:	.skip	2 << PARITY_LOG       # per parity
	.align	5
RESULTS:
	.skip	2 << PARITY_LOG
	.align	5
PT:	.skip	PT_BYTES * MAX_SLOTS
	.align	5
BCAST:	.skip	32
KK:	.skip	8             # slots this CPE fills
MY_ID:	.skip	8
MY_COL:	.skip	8
MY_ROW:	.skip	8
TILE_M:	.skip	8             # the current tile's channels (M, fewer in the last tile)
TILE_MR:
	.skip	8             # ... rounded up to whole vectors
GET_N:	.skip	16            # requests issued per parity
PUT_N:	.skip	16
JOB_REPLY:
	.skip	4
GET_REPLY:
	.skip	8             # reply words per parity
PUT_REPLY:
	.skip	8
	.align	3
SAVED_RA:
	.skip	8             # compute's return, its parity; call_pass's return
SAVED_PARITY:
	.skip	8
CALL_RA:
	.skip	8
	.align	5
	.globl	bn_group_ldm_end
bn_group_ldm_end:

	.text

# ---------------------------------------------------------------------------------------------
# bn_group(job a0): the entry. $9 tile, $10 last tile, $11 parity (double-buffered).
	.globl	bn_group
	.ent	bn_group
bn_group:
	MAKE_DESC $1, DMA_GET, GJOB_BYTES, JOB_REPLY
	ldi	$2, JOB
	DMA_WAIT $1, $16, $2, JOB_REPLY
	bsr	$26, setup
	ldl	$9, JOB + G_FIRST($31)
	ldl	$10, JOB + G_LAST($31)
	ldl	$1, JOB + G_PARITIES($31)
	cmpeq	$1, 1, $1
	bne	$1, 5f
	clr	$11
	mov	$9, $16
	clr	$17
	bsr	$26, issue_gets
1:	xor	$11, 1, $17           # the other parity: its puts done, the next tile's gets
	ldi	$16, PUT_REPLY($31)
	s4addl	$17, $16, $16
	s8addl	$17, $31, $1
	ldl	$17, PUT_N($1)
	bsr	$26, wait
	addl	$9, 1, $16
	cmplt	$16, $10, $1
	beq	$1, 2f
	xor	$11, 1, $17
	bsr	$26, issue_gets
2:	ldi	$16, GET_REPLY($31)
	s4addl	$11, $16, $16
	s8addl	$11, $31, $1
	ldl	$17, GET_N($1)
	bsr	$26, wait
	mov	$9, $16
	mov	$11, $17
	bsr	$26, compute
	mov	$9, $16
	mov	$11, $17
	bsr	$26, issue_puts
	xor	$11, 1, $11
	addl	$9, 1, $9
	cmplt	$9, $10, $1
	bne	$1, 1b
	ldi	$16, PUT_REPLY($31)   # the last two tiles' puts
	ldl	$17, PUT_N($31)
	bsr	$26, wait
	ldi	$16, PUT_REPLY + 4($31)
	ldl	$17, PUT_N + 8($31)
	bsr	$26, wait
	halt
5:	mov	$9, $16               # one parity: a tile's gets, compute, puts, in turn
	clr	$17
	bsr	$26, issue_gets
	ldi	$16, GET_REPLY($31)
	ldl	$17, GET_N($31)
	bsr	$26, wait
	mov	$9, $16
	clr	$17
	bsr	$26, compute
	mov	$9, $16
	clr	$17
	bsr	$26, issue_puts
	ldi	$16, PUT_REPLY($31)
	ldl	$17, PUT_N($31)
	bsr	$26, wait
	addl	$9, 1, $9
	cmplt	$9, $10, $1
	bne	$1, 5b
	halt
	.end	bn_group

# wait(reply $16, count $17): spin until the reply word reaches count.
	.ent	wait
wait:
1:	ldw	$1, 0($16)
	cmplt	$1, $17, $1
	bne	$1, 1b
	ret
	.end	wait

# setup: this CPE's place in the mesh, its piece table and how many slots it fills; no
# requests outstanding.
	.ent	setup
setup:
	rcid	$1
	stl	$1, MY_ID($31)
	ldl	$2, JOB + G_COLS($31)
	QUOTIENT $1, $2, $3
	stl	$3, MY_ROW($31)
	mull	$3, $2, $4
	subl	$1, $4, $4
	stl	$4, MY_COL($31)
	stl	$31, GET_N($31)
	stl	$31, GET_N + 8($31)
	stl	$31, PUT_N($31)
	stl	$31, PUT_N + 8($31)
	ldl	$5, JOB + G_Q($31)
	ldl	$6, JOB + G_B($31)
	mull	$5, $6, $6            # pieces per tile
	ldl	$7, JOB + G_ROWS($31)
	mull	$7, $2, $7            # CPEs
	ldl	$8, JOB + G_HW($31)
	ldl	$16, JOB + G_PLANES($31)
	ldl	$17, JOB + G_SEG($31)
	ldl	$18, JOB + G_C($31)
	ldi	$19, PT($31)
	clr	$20                   # slots
1:	cmplt	$1, $6, $21
	beq	$21, 4f
	QUOTIENT $1, $5, $21          # image b
	mull	$21, $5, $22
	subl	$1, $22, $22          # piece within the image's tile span
	mull	$21, $18, $21
	mull	$21, $8, $21          # b C HW
	beq	$16, 2f
	mull	$22, $16, $22         # planes: first channel, runs of HW, PLANES of them
	mull	$22, $8, $23
	addl	$21, $23, $21
	stl	$21, 0($19)
	stl	$22, 8($19)
	stl	$8, 16($19)
	stl	$16, 24($19)
	br	3f
2:	ldl	$23, JOB + G_M($31)   # segments: piece p = m S + s of the image's tile span,
	QUOTIENT $5, $23, $24         # S = Q / M segments per plane, channel m, segment s:
	QUOTIENT $22, $24, $25        # one run of min(SEG, HW - s SEG)
	mull	$25, $24, $23
	subl	$22, $23, $22
	stl	$25, 8($19)
	mull	$25, $8, $23
	addl	$21, $23, $21
	mull	$22, $17, $22
	addl	$21, $22, $21
	stl	$21, 0($19)
	subl	$8, $22, $23
	cmplt	$23, $17, $24
	seleq	$24, $17, $23, $23
	stl	$23, 16($19)
	ldi	$23, 1
	stl	$23, 24($19)
3:	ldi	$19, PT_BYTES($19)
	addl	$20, 1, $20
	addl	$1, $7, $1
	br	1b
4:	stl	$20, KK($31)
	ret
	.end	setup

# TILE_GEOMETRY tile: $2 = the tile's first channel, $3 = its channels (TILE_M), $4 its first
# element's offset (c0 HW). Sets TILE_M and TILE_MR.
	.macro	TILE_GEOMETRY tile
	ldl	$1, JOB + G_M($31)
	mull	\tile, $1, $2
	ldl	$3, JOB + G_C($31)
	subl	$3, $2, $3
	cmplt	$3, $1, $4
	seleq	$4, $1, $3, $3
	stl	$3, TILE_M($31)
	addl	$3, 3, $4
	bic	$4, 3, $4
	stl	$4, TILE_MR($31)
	ldl	$4, JOB + G_HW($31)
	mull	$2, $4, $4
	.endm

# SLOT_RUNS: for the piece table entry at $19, $20 = its runs in this tile (min(runs at
# most, TILE_M - first channel); <= 0: the slot is empty this tile). Temporaries $5, $6.
	.macro	SLOT_RUNS
	ldl	$20, 24($19)
	ldl	$5, TILE_M($31)
	ldl	$6, 8($19)
	subl	$5, $6, $5
	cmplt	$5, $20, $6
	selne	$6, $5, $20, $20
	.endm

# PARITY_SLOTS parity, slots, stream, tmp: slots = the LDM address of the parity's in0 slots,
# stream = a stream's slots' bytes (in1's follow in0's).
	.macro	PARITY_SLOTS parity, slots, stream, tmp
	ldl	\stream, JOB + G_SLOT($31)
	ldl	\tmp, JOB + G_K($31)
	mull	\stream, \tmp, \stream
	ldl	\tmp, JOB + G_STREAMS($31)
	mull	\stream, \tmp, \tmp
	mull	\tmp, \parity, \tmp
	ldl	\slots, JOB + G_BUF($31)
	addl	\slots, \tmp, \slots
	.endm

# transfer(tile $16, parity $17, put $18): the tile's DMA: gets of every input stream's
# pieces into the parity's slots and of the tile's parameters (put = 0), or puts of the
# slots of in0 to the output and, on CPE 0, of the tile's results (put = 1): a request per
# slot, or (G_SKIP > 0 and a whole tile) one strided request per stream. Counts the requests
# in GET_N / PUT_N[parity] after clearing the parity's reply word.
	.ent	transfer
transfer:
	TILE_GEOMETRY $16
	ldi	$21, GET_REPLY($31)
	ldi	$22, GET_N($31)
	beq	$18, 1f
	ldi	$21, PUT_REPLY($31)
	ldi	$22, PUT_N($31)
1:	s4addl	$17, $21, $21
	stw	$31, 0($21)
	s8addl	$17, $22, $22
	clr	$23                   # requests
	ldl	$7, JOB + G_ES($31)
	PARITY_SLOTS $17, $25, $24, $27
	ldl	$8, JOB + G_SLOT($31)
	ldl	$27, JOB + G_STREAMS($31)
	beq	$18, 2f
	ldi	$27, 1                # puts: the output from in0's slots
2:	ldi	$28, G_IN0            # the stream's job field
	beq	$18, 3f
	ldi	$28, G_OUT
3:	ldl	$1, KK($31)
	ldi	$19, PT($31)
	mov	$25, $16              # the slot
	ldl	$5, JOB + G_SKIP($31)
	beq	$5, 4f
	beq	$1, 6f
	ldl	$6, JOB + G_M($31)    # a whole tile: its slots are one strided request
	cmpeq	$3, $6, $6
	beq	$6, 4f
	mull	$1, $8, $20           # bytes: the slots, back to back
	ldl	$6, 0($19)
	addl	$6, $4, $6
	mull	$6, $7, $6
	ldl	$29, JOB($28)
	addl	$6, $29, $6           # main-memory address of the first
	vinsw	$20, $31, DESC_SIZE, $20
	ldih	$29, (DMA_GET << (DESC_OP_SHIFT - 16))($8)
	beq	$18, 11f
	ldih	$29, (DMA_PUT << (DESC_OP_SHIFT - 16))($8)
11:	vinsw	$29, $20, DESC_CTRL, $20   # blocks of a slot
	vinsw	$21, $20, DESC_REPLY, $20
	vinsw	$5, $20, DESC_STRIDE, $20
	dma	$20, $6, $16
	addl	$23, 1, $23
	br	6f
4:	beq	$1, 6f
	SLOT_RUNS
	ble	$20, 5f
	ldl	$5, 16($19)
	mull	$5, $20, $5
	mull	$5, $7, $5            # bytes
	ldl	$6, 0($19)
	addl	$6, $4, $6
	mull	$6, $7, $6
	ldl	$29, JOB($28)
	addl	$6, $29, $6           # main-memory address
	vinsw	$5, $31, DESC_SIZE, $5
	ldih	$29, (DMA_GET << (DESC_OP_SHIFT - 16))($31)
	beq	$18, 7f
	ldih	$29, (DMA_PUT << (DESC_OP_SHIFT - 16))($31)
7:	vinsw	$29, $5, DESC_CTRL, $5
	vinsw	$21, $5, DESC_REPLY, $5
	dma	$5, $6, $16
	addl	$23, 1, $23
5:	addl	$16, $8, $16
	ldi	$19, PT_BYTES($19)
	subl	$1, 1, $1
	br	4b
6:	subl	$27, 1, $27           # the next stream: in1's slots follow in0's
	ldi	$28, 8($28)
	addl	$25, $24, $25
	bgt	$27, 3b
	ldi	$6, PARAMS($31)       # parameters in, results out (CPE 0)
	ldl	$28, JOB + G_PARAM($31)
	ldi	$5, 4
	beq	$18, 8f
	ldl	$5, JOB + G_RESULTS($31)
	ldi	$6, RESULTS($31)
	ldl	$28, JOB + G_RESULT($31)
	ldl	$29, MY_ID($31)
	bne	$29, 9f
8:	mull	$5, $7, $5            # a channel's elements' bytes
	mull	$2, $5, $29
	addl	$28, $29, $28         # the tile's first channel's
	mull	$3, $5, $5
	sll	$17, PARITY_LOG, $29
	addl	$6, $29, $6
	vinsw	$5, $31, DESC_SIZE, $5
	ldih	$29, (DMA_GET << (DESC_OP_SHIFT - 16))($31)
	beq	$18, 10f
	ldih	$29, (DMA_PUT << (DESC_OP_SHIFT - 16))($31)
10:	vinsw	$29, $5, DESC_CTRL, $5
	vinsw	$21, $5, DESC_REPLY, $5
	dma	$5, $28, $6
	addl	$23, 1, $23
9:	stl	$23, 0($22)
	ret
	.end	transfer

# issue_gets(tile $16, parity $17) / issue_puts(tile $16, parity $17).
	.ent	issue_gets
issue_gets:
	clr	$18
	br	transfer
	.end	issue_gets

	.ent	issue_puts
issue_puts:
	ldi	$18, 1
	br	transfer
	.end	issue_puts

# compute(tile $16, parity $17): the tile's sums, group sums, finish and normalisation from
# the parity's slots. Keeps $26 and the tile in its own LDM words (the routines it calls are
# leaves).
	.ent	compute
compute:
	stl	$26, SAVED_RA($31)
	stl	$17, SAVED_PARITY($31)
	TILE_GEOMETRY $16
	ldl	$1, JOB + G_STREAMS($31)
	cmpeq	$1, 2, $1
	bne	$1, 5f
	ldl	$1, JOB + G_F0($31)
	beq	$1, 8f                # no sums: inference
	bsr	$26, clear_part       # forward: sums, means
	ldl	$27, JOB + G_F0($31)
	bsr	$26, call_pass
	ldl	$17, TILE_MR($31)
	srl	$17, 2, $17
	bsr	$26, group_sum
	bsr	$26, means
	bsr	$26, clear_part       # deviations, the finish, y
	ldl	$27, JOB + G_F1($31)
	bsr	$26, call_pass
	ldl	$17, TILE_MR($31)
	srl	$17, 2, $17
	bsr	$26, group_sum
	ldl	$27, JOB + G_F2($31)
	bsr	$26, call_pass
	ldl	$27, JOB + G_F3($31)
	bsr	$26, call_pass
	br	9f
5:	ldl	$27, JOB + G_F1($31)  # backward: the means first (the finish's parameter pass)
	bsr	$26, call_pass
	bsr	$26, clear_part
	ldl	$27, JOB + G_F0($31)
	bsr	$26, call_pass
	ldl	$17, TILE_MR($31)
	srl	$17, 1, $17           # two arrays of TILE_MR
	bsr	$26, group_sum
	ldl	$27, JOB + G_F2($31)
	bsr	$26, call_pass
	br	9f
8:	ldl	$27, JOB + G_F2($31)  # inference: the finish from the running statistics, y
	bsr	$26, call_pass
	ldl	$27, JOB + G_F3($31)
	bsr	$26, call_pass
9:	ldl	$26, SAVED_RA($31)
	ret
	.end	compute


# call_pass(routine $27): call a pass routine with $16 = the parity's in0 slots, $17 = its in1
# slots, $18 = the parity (for PARAMS / RESULTS). Keeps $26 in CALL_RA.
	.ent	call_pass
call_pass:
	stl	$26, CALL_RA($31)
	ldl	$18, SAVED_PARITY($31)
	PARITY_SLOTS $18, $16, $1, $2
	addl	$16, $1, $17
	call	$26, ($27), 0
	ldl	$26, CALL_RA($31)
	ret
	.end	call_pass


# clear_part: PART = 0 (both arrays).
	.ent	clear_part
clear_part:
	ldi	$1, PART($31)
	ldi	$2, 2 * MAX_TILE / 4
1:	vstd	$31, 0($1)
	ldi	$1, 32($1)
	subl	$2, 1, $2
	bgt	$2, 1b
	ret
	.end	clear_part

# means: COEF[c].mean = PART[c] / N for the tile's channels.
	.ent	means
means:
	ldl	$1, TILE_M($31)
	ldi	$2, PART($31)
	ldi	$3, COEF($31)
	ldl	$4, JOB + G_N($31)
1:	fldd	$5, 0($2)
	fdivd	$5, $4, $5
	fstd	$5, 0($3)
	ldi	$2, 8($2)
	ldi	$3, COEF_BYTES($3)
	subl	$1, 1, $1
	bgt	$1, 1b
	ret
	.end	means

# CHAIN get, put, position, last: PART's $17 vectors along a row (getr, putr) or a column
# (getc, putc): from the CPE at position 0, each adds this CPE's to the partial sums so far
# and passes them on; the one at `last` keeps the sums in PART. Temporaries $5-$8, $18, $19.
	.macro	CHAIN get, put, position, last
	ldi	$5, PART($31)
	mov	$17, $6
	addl	\position, 1, $7
1:	vldd	$8, 0($5)
	beq	\position, 2f
	\get	$18
	vaddd	$18, $8, $8
2:	cmpeq	\position, \last, $19
	bne	$19, 3f
	\put	$8, $7
	br	4f
3:	vstd	$8, 0($5)
4:	ldi	$5, 32($5)
	subl	$6, 1, $6
	bgt	$6, 1b
	.endm

# group_sum(vectors $17): PART's first $17 vectors summed over the core group's CPEs, the
# totals in every CPE's PART, in a fixed order: along each row from column 0 (the partial
# so far + this CPE's), down the last column from row 0, then broadcast back from the last
# CPE, along the last column and each row. Every chain ends before a broadcast starts, so
# a queue never holds a chain value behind a broadcast value.
	.ent	group_sum
group_sum:
	ldl	$1, MY_COL($31)
	ldl	$2, MY_ROW($31)
	ldl	$3, JOB + G_COLS($31)
	subl	$3, 1, $3             # the last column
	ldl	$4, JOB + G_ROWS($31)
	subl	$4, 1, $4             # the last row
	CHAIN	getr, putr, $1, $3    # along the row
	cmpeq	$1, $3, $19
	beq	$19, 20f
	CHAIN	getc, putc, $2, $4    # the last column: down it
	ldi	$5, PART($31)
	mov	$17, $6
	cmpeq	$2, $4, $19
	beq	$19, 10f
	beq	$4, 11f               # the last CPE: the totals to its column and row
9:	vldd	$8, 0($5)
	putc	$8, 8
	beq	$3, 12f
	putr	$8, 8
12:	ldi	$5, 32($5)
	subl	$6, 1, $6
	bgt	$6, 9b
	ret
11:	beq	$3, 13f               # one row: only along it
	vldd	$8, 0($5)
	putr	$8, 8
	ldi	$5, 32($5)
	subl	$6, 1, $6
	bgt	$6, 11b
13:	ret
10:	getc	$8                    # the last column, above the last row
	vstd	$8, 0($5)
	beq	$3, 14f
	putr	$8, 8
14:	ldi	$5, 32($5)
	subl	$6, 1, $6
	bgt	$6, 10b
	ret
20:	ldi	$5, PART($31)         # the other columns: from the row's last CPE
	mov	$17, $6
21:	getr	$8
	vstd	$8, 0($5)
	ldi	$5, 32($5)
	subl	$6, 1, $6
	bgt	$6, 21b
	ret
	.end	group_sum

# FOR_RUNS shift / END_RUNS shift: a pass over the parity's runs: for every slot ($16 in0, $17
# in1) with runs this tile, for every run: $22 / $23 its in0 / in1 elements, $24 their count,
# $21 the channel (within the tile). The body between them keeps $16-$24.
	.macro	FOR_RUNS
	ldl	$18, KK($31)
	ldi	$19, PT($31)
91:	beq	$18, 99f
	SLOT_RUNS
	ldl	$21, 8($19)
	ldl	$24, 16($19)
	mov	$16, $22
	mov	$17, $23
92:	ble	$20, 93f
	.endm

	.macro	END_RUNS shift
	sll	$24, \shift, $5
	addl	$22, $5, $22
	addl	$23, $5, $23
	addl	$21, 1, $21
	subl	$20, 1, $20
	br	92b
93:	ldl	$5, JOB + G_SLOT($31)
	addl	$16, $5, $16
	addl	$17, $5, $17
	ldi	$19, PT_BYTES($19)
	subl	$18, 1, $18
	br	91b
99:
	.endm

# ADD_PART array, value: PART[array][$21] += value ($5 temporary, $28 scratch).
	.macro	ADD_PART array, value
	s8addl	$21, $31, $5
	.if	\array
	ldl	$28, TILE_MR($31)
	s8addl	$28, $5, $5
	.endif
	fldd	$28, PART($5)
	faddd	$28, \value, $28
	fstd	$28, PART($5)
	.endm

# SUMS label, load, vload, shift, centred: PART[c] += sum of the run's elements; with
# `centred`, of (x - COEF[c].mean)^2. Two vectors per iteration into two accumulators (the
# adds' latency), an odd vector first, a scalar tail.
	.macro	SUMS label, load, vload, shift, centred
	.globl	\label
	.ent	\label
\label:
	FOR_RUNS
	.if	\centred
	sll	$21, 6, $5
	ldde	$2, COEF($5)          # the channel's mean
	.endif
	SPLIT_COUNT $24, $6, $7
	vaddd	$31, $31, $3
	vaddd	$31, $31, $25
	mov	$22, $8
	blbc	$6, 5f
	\vload	$4, 0($8)
	SUM_VECTOR \centred, $4, $3
	ldi	$8, 4 << \shift($8)
5:	srl	$6, 1, $6
	beq	$6, 2f
1:	\vload	$4, 0($8)
	\vload	$1, 4 << \shift($8)
	SUM_VECTOR \centred, $4, $3
	SUM_VECTOR \centred, $1, $25
	ldi	$8, 8 << \shift($8)
	subl	$6, 1, $6
	bgt	$6, 1b
2:	vaddd	$3, $25, $3
	LANE_SUM $3, $3, BCAST
	beq	$7, 4f
3:	\load	$4, 0($8)
	.if	\centred
	fsubd	$4, $2, $4
	fmad	$4, $4, $3, $3
	.else
	faddd	$3, $4, $3
	.endif
	ldi	$8, 1 << \shift($8)
	subl	$7, 1, $7
	bgt	$7, 3b
4:	ADD_PART 0, $3
	END_RUNS \shift
	ret
	.end	\label
	.endm

# SUM_VECTOR centred, v, acc, mean=$2: acc += v, or with `centred` (v - mean)^2 (v is
# clobbered).
	.macro	SUM_VECTOR centred, v, acc, mean=$2
	.if	\centred
	vsubd	\v, \mean, \v
	vmad	\v, \v, \acc, \acc
	.else
	vaddd	\acc, \v, \acc
	.endif
	.endm
	SUMS	bn_group_sums_s, flds, vlds, 2, 0
	SUMS	bn_group_sums_d, fldd, vldd, 3, 0
	SUMS	bn_group_deviations_s, flds, vlds, 2, 1
	SUMS	bn_group_deviations_d, fldd, vldd, 3, 1

# BACKWARD_SUMS label, load, vload, shift: PART[0][c] += sum dy, PART[1][c] += sum dy (x -
# mean) over the run (in0 dy, in1 x).
	.macro	BACKWARD_SUMS label, load, vload, shift
	.globl	\label
	.ent	\label
\label:
	FOR_RUNS
	sll	$21, 6, $5
	ldde	$2, COEF($5)          # the channel's mean
	SPLIT_COUNT $24, $6, $7
	mov	$22, $8
	mov	$23, $1
	BACKWARD_SUMS_RUN \load, \vload, \shift, $8, $1, $6, $7, $2, $2, $3, $25, $4, $5, BCAST
	ADD_PART 0, $3
	ADD_PART 1, $25
	END_RUNS \shift
	ret
	.end	\label
	.endm
	BACKWARD_SUMS bn_group_backward_sums_s, flds, vlds, 2
	BACKWARD_SUMS bn_group_backward_sums_d, fldd, vldd, 3

# FINISH label, load, store, shift, training: per channel of the tile (PART: the sums of
# squared deviations; PARAMS[parity] (gamma, beta, running mean, running var)): biased
# variance M2 / N, invstd = 1 / sqrt(var + eps), COEF = (mean, gamma invstd, beta),
# RESULTS[parity] = (running mean, running var updated with the unbiased M2 / (N - 1), mean,
# invstd). training = 0 (inference): the running mean and variance, returned unchanged.
	.macro	FINISH label, load, store, shift, training=1
	.globl	\label
	.ent	\label
\label:
	sll	$18, PARITY_LOG, $1
	ldi	$2, PARAMS($1)
	ldi	$3, RESULTS($1)
	ldi	$1, PART($31)
	ldi	$4, COEF($31)
	ldl	$8, TILE_M($31)
	ldl	$16, JOB + G_N($31)
	ldl	$17, JOB + G_N1($31)
	ldl	$18, JOB + G_MOMENTUM($31)
	ldl	$19, JOB + G_EPS($31)
	ONE	$20
	fsubd	$20, $18, $21         # 1 - momentum
1:
	.if	\training
	fldd	$5, 0($1)             # M2
	fldd	$6, 0($4)             # mean
	fdivd	$5, $16, $7           # biased variance
	fdivd	$5, $17, $5           # unbiased
	\load	$22, 2 << \shift($2)  # running mean, var
	\load	$23, 3 << \shift($2)
	fmuld	$21, $22, $22
	fmad	$18, $6, $22, $22
	fmuld	$21, $23, $23
	fmad	$18, $5, $23, $23
	.else
	\load	$22, 2 << \shift($2)  # running mean, var: the mean and variance used
	\load	$23, 3 << \shift($2)
	mov	$22, $6
	mov	$23, $7
	fstd	$6, 0($4)
	.endif
	\store	$22, 0($3)
	\store	$23, 1 << \shift($3)
	\store	$6, 2 << \shift($3)
	faddd	$7, $19, $7
	fsqrtd	$7, $7
	fdivd	$20, $7, $7           # invstd
	\store	$7, 3 << \shift($3)
	\load	$22, 0($2)            # gamma
	\load	$23, 1 << \shift($2)  # beta
	fmuld	$22, $7, $22
	fstd	$22, 8($4)
	fstd	$23, 16($4)
	ldi	$1, 8($1)
	ldi	$2, 4 << \shift($2)
	ldi	$3, 4 << \shift($3)
	ldi	$4, COEF_BYTES($4)
	subl	$8, 1, $8
	bgt	$8, 1b
	ret
	.end	\label
	.endm
	FINISH	bn_group_finish_s, flds, fsts, 2
	FINISH	bn_group_finish_d, fldd, fstd, 3
	FINISH	bn_group_infer_finish_s, flds, fsts, 2, 0
	FINISH	bn_group_infer_finish_d, fldd, fstd, 3, 0

# BACKWARD_MEANS label, load, shift: COEF[c].mean, .invstd from PARAMS[parity] (gamma, saved
# mean, saved invstd, 0).
	.macro	BACKWARD_MEANS label, load, shift
	.globl	\label
	.ent	\label
\label:
	sll	$18, PARITY_LOG, $1
	ldi	$2, PARAMS($1)
	ldi	$4, COEF($31)
	ldl	$8, TILE_M($31)
1:	\load	$5, 1 << \shift($2)
	\load	$6, 2 << \shift($2)
	fstd	$5, 0($4)
	fstd	$6, 8($4)
	ldi	$2, 4 << \shift($2)
	ldi	$4, COEF_BYTES($4)
	subl	$8, 1, $8
	bgt	$8, 1b
	ret
	.end	\label
	.endm
	BACKWARD_MEANS bn_group_backward_means_s, flds, 2
	BACKWARD_MEANS bn_group_backward_means_d, fldd, 3

# BACKWARD_FINISH load, store, shift: per channel dgamma = sum dy (x - mean) invstd, dbeta =
# sum dy (RESULTS[parity]) and the coefficients dbeta / N, dgamma / N, gamma invstd.
	.macro	BACKWARD_FINISH load, store, shift
	sll	$18, PARITY_LOG, $1
	ldi	$2, PARAMS($1)
	ldi	$3, RESULTS($1)
	ldi	$1, PART($31)
	ldi	$4, COEF($31)
	ldl	$8, TILE_M($31)
	ldl	$6, TILE_MR($31)
	s8addl	$6, $31, $6
	ldl	$7, JOB + G_N($31)
1:	fldd	$5, 0($1)             # dbeta
	addl	$1, $6, $25
	fldd	$29, 0($25)           # sum dy (x - mean)
	fldd	$25, 8($4)            # invstd
	fmuld	$29, $25, $29         # dgamma
	\store	$29, 0($3)
	\store	$5, 1 << \shift($3)
	fdivd	$5, $7, $5
	fdivd	$29, $7, $29
	fstd	$5, 16($4)
	fstd	$29, 24($4)
	\load	$5, 0($2)
	fmuld	$5, $25, $5
	fstd	$5, 32($4)
	ldi	$1, 8($1)
	ldi	$2, 4 << \shift($2)
	ldi	$3, 2 << \shift($3)
	ldi	$4, COEF_BYTES($4)
	subl	$8, 1, $8
	bgt	$8, 1b
	.endm

# DX_COEF entry: $1-$4, $25 = the channel's mean, invstd, dbeta / N, dgamma / N, gamma
# invstd (its COEF entry at the LDM address `entry`) in every lane.
	.macro	DX_COEF entry
	ldde	$1, 0(\entry)
	ldde	$2, 8(\entry)
	ldde	$3, 16(\entry)
	ldde	$4, 24(\entry)
	ldde	$25, 32(\entry)
	.endm

# DX_RUN vload, vstore, shift, dy, x, count: dx = ((dy - dbeta / N) - xhat dgamma / N) gamma
# invstd, xhat = (x - mean) invstd (DX_COEF's registers), in place of dy over `count` whole
# vectors at dy and x (both advanced, count counted down), an odd vector first, then two per
# iteration. Temporaries a, $27-$29.
	.macro	DX_RUN vload, vstore, shift, dy, x, count, a=$5
	blbc	\count, 2f
	\vload	\a, 0(\dy)            # an odd vector first
	\vload	$28, 0(\x)
	DX_COMPUTE \a, $28, $1, $2, $3, $4, $25
	\vstore	\a, 0(\dy)
	ldi	\dy, 4 << \shift(\dy)
	ldi	\x, 4 << \shift(\x)
2:	srl	\count, 1, \count
	beq	\count, 4f
3:	\vload	\a, 0(\dy)
	\vload	$28, 0(\x)
	\vload	$27, 4 << \shift(\dy)
	\vload	$29, 4 << \shift(\x)
	DX_COMPUTE2 \a, $28, $27, $29, $1, $2, $3, $4, $25
	\vstore	\a, 0(\dy)
	\vstore	$27, 4 << \shift(\dy)
	ldi	\dy, 8 << \shift(\dy)
	ldi	\x, 8 << \shift(\x)
	subl	\count, 1, \count
	bgt	\count, 3b
4:
	.endm

# BACKWARD_FINISH_APPLY label, load, vload, store, vstore, shift: BACKWARD_FINISH, then dx in
# place of dy run by run, by whole vectors (the slots are whole vectors; the lanes past a
# run's end are never put).
	.macro	BACKWARD_FINISH_APPLY label, load, vload, store, vstore, shift
	.globl	\label
	.ent	\label
\label:
	BACKWARD_FINISH \load, \store, \shift
	FOR_RUNS
	sll	$21, 6, $5
	ldi	$5, COEF($5)
	DX_COEF	$5
	addl	$24, 3, $6
	srl	$6, 2, $6
	mov	$22, $7               # dy, then dx
	mov	$23, $8               # x
	DX_RUN	\vload, \vstore, \shift, $7, $8, $6
	END_RUNS \shift
	ret
	.end	\label
	.endm
	BACKWARD_FINISH_APPLY bn_group_backward_apply_s, flds, vlds, fsts, vsts, 2
	BACKWARD_FINISH_APPLY bn_group_backward_apply_d, fldd, vldd, fstd, vstd, 3

# APPLY_RUN vload, vstore, shift, vectors, count, a, b, c, d: y = (x - $1) $2 + $3 in place
# over `vectors` whole vectors at $7 (advanced), the rest of vectors / 4 first, then four per
# iteration (the loads' and FMAs' latency); `count` counts down, a-d are temporaries.
	.macro	APPLY_RUN vload, vstore, shift, vectors, count, a, b, c, d
	and	\vectors, 3, \count
	beq	\count, 2f
1:	\vload	\a, 0($7)
	vsubd	\a, $1, \a
	vmad	\a, $2, $3, \a
	\vstore	\a, 0($7)
	ldi	$7, 4 << \shift($7)
	subl	\count, 1, \count
	bgt	\count, 1b
2:	srl	\vectors, 2, \count
	beq	\count, 4f
3:	\vload	\a, 0($7)
	\vload	\b, 4 << \shift($7)
	\vload	\c, 8 << \shift($7)
	\vload	\d, 12 << \shift($7)
	vsubd	\a, $1, \a
	vsubd	\b, $1, \b
	vsubd	\c, $1, \c
	vsubd	\d, $1, \d
	vmad	\a, $2, $3, \a
	vmad	\b, $2, $3, \b
	vmad	\c, $2, $3, \c
	vmad	\d, $2, $3, \d
	\vstore	\a, 0($7)
	\vstore	\b, 4 << \shift($7)
	\vstore	\c, 8 << \shift($7)
	\vstore	\d, 12 << \shift($7)
	ldi	$7, 16 << \shift($7)
	subl	\count, 1, \count
	bgt	\count, 3b
4:
	.endm

# APPLY label, vload, vstore, shift: y = (x - mean) (gamma invstd) + beta in place, by whole
# vectors.
	.macro	APPLY label, vload, vstore, shift
	.globl	\label
	.ent	\label
\label:
	FOR_RUNS
	sll	$21, 6, $5
	ldde	$1, COEF($5)
	ldde	$2, COEF + 8($5)
	ldde	$3, COEF + 16($5)
	addl	$24, 3, $6
	srl	$6, 2, $6
	mov	$22, $7
	APPLY_RUN \vload, \vstore, \shift, $6, $5, $4, $8, $25, $28
	END_RUNS \shift
	ret
	.end	\label
	.endm
	APPLY	bn_group_apply_s, vlds, vsts, 2
	APPLY	bn_group_apply_d, vldd, vstd, 3

# Row tiles (a piece per image holding all the tile's channels, as RCNB's positions: every
# slot holds the same TILE_M runs of HW elements, HW a multiple of 4): the passes go channel by
# channel over the slots, so a channel's coefficients are loaded and its lane sums taken once
# per tile, not per run, and its vectors go four at a time into four accumulators.

# FOR_CHANNELS / END_CHANNELS: for every channel of the tile: $0 its run in the first slot of
# in0 ($16; in1 $17 the same distance on), $23 its COEF entry, $22 its PART word; the body
# walks the slots with FOR_SLOTS. $18 channels left, $19 a run's bytes, $20 slots, $21 the
# slot stride, $24 vectors per run.
	.macro	FOR_CHANNELS shift
	ldl	$18, TILE_M($31)
	ldl	$19, JOB + G_HW($31)
	srl	$19, 2, $24
	sll	$19, \shift, $19
	ldl	$20, KK($31)
	ldl	$21, JOB + G_SLOT($31)
	ldi	$22, PART($31)
	ldi	$23, COEF($31)
	mov	$16, $0
81:
	.endm

	.macro	END_CHANNELS
	addl	$0, $19, $0
	ldi	$22, 8($22)
	ldi	$23, COEF_BYTES($23)
	subl	$18, 1, $18
	bgt	$18, 81b
	.endm

# FOR_SLOTS / END_SLOTS: for every slot: $7 the channel's run in it; the body goes over
# its $24 vectors (the rest of $24 / 4 one at a time, then quads: ROW_QUADS) and keeps $0,
# $18-$24, $5, $6.
	.macro	FOR_SLOTS
	mov	$20, $5
	mov	$0, $6
	beq	$5, 89f
82:	mov	$6, $7
	.endm

	.macro	END_SLOTS
	addl	$6, $21, $6
	subl	$5, 1, $5
	bgt	$5, 82b
89:
	.endm

# ROWS_SUMS label, vload, shift, centred: PART[c] = the sum of channel c's elements (with
# `centred`: of (x - COEF[c].mean)^2) over the slots, in four accumulators (vector i of a run
# into accumulator i mod 4, the rest of a run's vectors past its quads into the first).
	.macro	ROWS_SUMS label, vload, shift, centred
	.globl	\label
	.ent	\label
\label:
	FOR_CHANNELS \shift
	vaddd	$31, $31, $1
	vaddd	$31, $31, $2
	vaddd	$31, $31, $3
	vaddd	$31, $31, $4
	.if	\centred
	ldde	$25, 0($23)           # the channel's mean
	.endif
	FOR_SLOTS
	and	$24, 3, $8
	beq	$8, 3f
2:	\vload	$27, 0($7)
	SUM_VECTOR \centred, $27, $1, $25
	ldi	$7, 4 << \shift($7)
	subl	$8, 1, $8
	bgt	$8, 2b
3:	srl	$24, 2, $8
	beq	$8, 4f
1:	\vload	$27, 0($7)
	\vload	$28, 4 << \shift($7)
	\vload	$29, 8 << \shift($7)
	\vload	$12, 12 << \shift($7)
	SUM_VECTOR \centred, $27, $1, $25
	SUM_VECTOR \centred, $28, $2, $25
	SUM_VECTOR \centred, $29, $3, $25
	SUM_VECTOR \centred, $12, $4, $25
	ldi	$7, 16 << \shift($7)
	subl	$8, 1, $8
	bgt	$8, 1b
4:
	END_SLOTS
	vaddd	$1, $2, $1
	vaddd	$3, $4, $3
	vaddd	$1, $3, $1
	LANE_SUM $1, $1, BCAST
	fstd	$1, 0($22)
	END_CHANNELS
	ret
	.end	\label
	.endm
	ROWS_SUMS bn_group_rows_sums_s, vlds, 2, 0
	ROWS_SUMS bn_group_rows_sums_d, vldd, 3, 0
	ROWS_SUMS bn_group_rows_deviations_s, vlds, 2, 1
	ROWS_SUMS bn_group_rows_deviations_d, vldd, 3, 1

# ROWS_APPLY label, vload, vstore, shift: APPLY's y = (x - mean) (gamma invstd) + beta in
# place, channel by channel.
	.macro	ROWS_APPLY label, vload, vstore, shift
	.globl	\label
	.ent	\label
\label:
	FOR_CHANNELS \shift
	ldde	$1, 0($23)
	ldde	$2, 8($23)
	ldde	$3, 16($23)
	FOR_SLOTS
	APPLY_RUN \vload, \vstore, \shift, $24, $8, $4, $25, $27, $28
	END_SLOTS
	END_CHANNELS
	ret
	.end	\label
	.endm
	ROWS_APPLY bn_group_rows_apply_s, vlds, vsts, 2
	ROWS_APPLY bn_group_rows_apply_d, vldd, vstd, 3

# ROWS_BACKWARD_SUMS label, vload, shift: BACKWARD_SUMS channel by channel: PART[0][c] = sum
# dy, PART[1][c] = sum dy (x - mean) over the slots (in0 dy, in1 x), two vectors per
# iteration into two pairs of accumulators, an odd vector first.
	.macro	ROWS_BACKWARD_SUMS label, vload, shift
	.globl	\label
	.ent	\label
\label:
	subl	$17, $16, $17         # in1's runs: this far past in0's
	ldl	$13, TILE_MR($31)
	s8addl	$13, $31, $13         # PART's second array: this far past the first
	FOR_CHANNELS \shift
	vaddd	$31, $31, $1
	vaddd	$31, $31, $2
	vaddd	$31, $31, $3
	vaddd	$31, $31, $4
	ldde	$25, 0($23)           # the channel's mean
	FOR_SLOTS
	addl	$7, $17, $14
	blbc	$24, 2f
	\vload	$27, 0($7)
	\vload	$28, 0($14)
	vaddd	$1, $27, $1
	vsubd	$28, $25, $28
	vmad	$27, $28, $3, $3
	ldi	$7, 4 << \shift($7)
	ldi	$14, 4 << \shift($14)
2:	srl	$24, 1, $8
	beq	$8, 4f
1:	\vload	$27, 0($7)
	\vload	$29, 4 << \shift($7)
	\vload	$28, 0($14)
	\vload	$12, 4 << \shift($14)
	vaddd	$1, $27, $1
	vaddd	$2, $29, $2
	vsubd	$28, $25, $28
	vsubd	$12, $25, $12
	vmad	$27, $28, $3, $3
	vmad	$29, $12, $4, $4
	ldi	$7, 8 << \shift($7)
	ldi	$14, 8 << \shift($14)
	subl	$8, 1, $8
	bgt	$8, 1b
4:
	END_SLOTS
	vaddd	$1, $2, $1
	vaddd	$3, $4, $3
	LANE_SUM $1, $1, BCAST
	LANE_SUM $3, $3, BCAST
	fstd	$1, 0($22)
	addl	$22, $13, $5
	fstd	$3, 0($5)
	END_CHANNELS
	ret
	.end	\label
	.endm
	ROWS_BACKWARD_SUMS bn_group_rows_backward_sums_s, vlds, 2
	ROWS_BACKWARD_SUMS bn_group_rows_backward_sums_d, vldd, 3

# ROWS_BACKWARD_APPLY label, load, vload, store, vstore, shift: BACKWARD_FINISH_APPLY with dx
# channel by channel.
	.macro	ROWS_BACKWARD_APPLY label, load, vload, store, vstore, shift
	.globl	\label
	.ent	\label
\label:
	BACKWARD_FINISH \load, \store, \shift
	subl	$17, $16, $17         # in1's runs: this far past in0's
	FOR_CHANNELS \shift
	DX_COEF	$23
	FOR_SLOTS
	addl	$7, $17, $14
	mov	$24, $8
	DX_RUN	\vload, \vstore, \shift, $7, $14, $8, $12
	END_SLOTS
	END_CHANNELS
	ret
	.end	\label
	.endm
	ROWS_BACKWARD_APPLY bn_group_rows_backward_apply_s, flds, vlds, fsts, vsts, 2
	ROWS_BACKWARD_APPLY bn_group_rows_backward_apply_d, fldd, vldd, fstd, vstd, 3
