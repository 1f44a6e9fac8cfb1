# Communication-set selection for RedSync (thesis ch. 8.2.1; docs/redsync.md): the elements of
# a float32 array in main memory above a threshold, on the 64 CPEs of a core group. Every
# entry takes a0 = the job record (JOB_BYTES, int64 fields J_*) and runs on all 64 CPEs.
#
#   sel_threshold  J_METHOD = TRIMMED: threshold mean + r (max - mean), r = J_START, then
#                    lowered by J_STEP until at least J_K elements are above, and below r = 0
#                    threshold 0 (Algorithm 11's first stage, as corrected);
#                  BINARY: binary search of r in [0, 1] until J_K <= selected <= J_HIGH
#                    (Algorithm 12, as corrected), r's interval at least J_EPS;
#                  FIXED: the threshold J_THR as given (the sampled search's reuse).
#   sel_radix      radix select: the exact J_K-th largest key, 8 bits per pass from the top.
#   sel_compact    stream compaction: the (index, value) of every element above J_THR, in
#                  element order, from the per-CPE counts the two entries above leave.
#   sel_trimmed    trimmed top-k in one launch: the TRIMMED threshold; if more than J_K are
#                  above, each CPE compacts its survivors into its own part of J_SCR_IDX /
#                  J_SCR_VAL (at its first element's position), radix select of the top J_K
#                  among all survivors, and the compaction of those through their indices.
#   sel_sumsq      the sum of the squares of the J_N f32 at J_X (double: R_SUM), for local
#                  gradient clipping.
#   sel_scatter_add  decompression, the sparse-into-dense axpy: dense[J_IDX[i]] +=
#                  J_ALPHA * J_X[i] in binary32 (multiply, then add), by global loads and
#                  stores; the indices of one launch must differ (one received set).
#
# Keys: an element's f32 bits, ANDed with J_AND and XORed with J_XOR (sign-extended words):
# |x| (0x7fffffff, 0), x (-1, 0) or -x (-1, 0x80000000); a negative key is never selected.
# For keys >= 0 the integer order is the float order, so every comparison is on integers.
# Selected: key > threshold bits, the threshold >= 0, so zeros are never selected.
#
# Work: CPE i takes elements [i C, min(N, (i + 1) C)), C = ceil(N / 64) rounded up to 8, in
# blocks of BLOCK elements whose gets are double-buffered. Reductions over the CPEs
# (ALLREDUCE) go in a fixed order by register communication, along each row then down
# the last column, and the totals come back by broadcast: every CPE takes the same decisions.
# Outputs: counts (64 int64: each CPE's selected elements), the result record R_* (CPE 0).

	.set	noreorder
	.include "../include/dma.inc"

	J_N = 0               # elements
	J_X = 8               # the f32 values
	J_IDX = 16            # sel_compact: int32 indices of the values (0: their positions)
	J_K = 24              # elements wanted
	J_AND = 32            # key masks
	J_XOR = 40
	J_METHOD = 48
	J_THR = 56            # threshold bits (FIXED, sel_compact)
	J_HIGH = 64           # BINARY: most elements accepted
	J_EPS = 72            # BINARY: smallest interval of r (double)
	J_START = 80          # TRIMMED: first r, its step down (doubles)
	J_STEP = 88
	J_MAX_ITER = 96       # BINARY: most count passes
	J_COUNTS = 104        # 64 int64 per-CPE counts (written, or read by sel_compact)
	J_OUT_IDX = 112       # sel_compact: int32 indices, f32 values out
	J_OUT_VAL = 120
	J_RESULT = 128        # the result record (RESULT_BYTES)
	J_DENSE = 136         # sel_scatter_add: the dense f32 array, the scale (a double)
	J_ALPHA = 144
	J_SCR_IDX = 152       # sel_trimmed: scratch for the survivors, J_N int32 and J_N f32
	J_SCR_VAL = 160
	JOB_BYTES = 192

	R_THR = 0             # threshold bits
	R_NNZ = 8             # elements selected
	R_PASSES = 16         # passes over the data after the statistics
	R_SUM = 24            # sum |x| (double; sel_sumsq: sum x^2)
	R_MAX = 32            # largest key
	R_SELSUM = 40         # sel_compact: sum of the selected values (double)
	RESULT_BYTES = 64

	METHOD_TRIMMED = 0
	METHOD_BINARY = 1
	METHOD_FIXED = 2

	BLOCK = 1024          # elements per get
	BLOCK_SHIFT = 12      # log2(BLOCK * 4)
	BINS = 256            # radix select: 8 bits per pass
	CPES = 64

	.ldm
	.align	5
	.globl	JOB
JOB:	.skip	JOB_BYTES
RES:	.skip	RESULT_BYTES
RED:	.skip	32            # the record ALLREDUCE_STATS combines: sum (double), max, count
REPLY:	.skip	8             # the gets' reply words, one per parity
PUT_REPLY:
	.skip	8
MINE:	.skip	8             # this CPE's selected elements (the DMA source of counts)
LO:	.skip	8             # this CPE's elements [LO, HI)
HI:	.skip	8
MYID:	.skip	8
NREQ:	.skip	8             # gets per block: 1, or 2 with an index map
BODY:	.skip	8             # PASS's body
PASS_RA:
	.skip	8
BODY_RA:
	.skip	8
RA:	.skip	8
SUB_RA:	.skip	8             # the return of the routines the entries call (stats, ...)
STAGE_RA:
	.skip	8             # trimmed_threshold's (it calls count_at)
OFFSET:	.skip	8             # sel_compact: elements written before this CPE's buffer
MEAN:	.skip	8             # statistics (doubles)
MAXV:	.skip	8
RATIO:	.skip	8
LEFT:	.skip	8             # BINARY: r's interval
RIGHT:	.skip	8
ITER:	.skip	8
BEST:	.skip	24            # BINARY: the fewest above K so far: bits, total, this CPE's
NEED:	.skip	8             # radix: elements still wanted, the key's prefix, its digit
PREFIX:	.skip	8
DIGIT:	.skip	8
ABOVE:	.skip	8             # radix: elements above the prefix
SHIFT:	.skip	8
	.align	5
CNTS:	.skip	8 * CPES
HIST:	.skip	8 * BINS      # this CPE's histogram, and the core group's
GHIST:	.skip	8 * BINS
BUF:	.skip	2 * BLOCK * 4 # values, two parities
IBUF:	.skip	2 * BLOCK * 4 # their indices (sel_compact with J_IDX)
OUTI:	.skip	2 * BLOCK * 4 # sel_compact's output, put when BLOCK are ready
OUTV:	.skip	2 * BLOCK * 4
	.globl	select_ldm_end
select_ldm_end:

	.text

# KEY_VEC v, t: the keys of v's 8 words (masks $23, $24 in every word), negatives made 0.
	.macro	KEY_VEC v, t
	vandw	\v, $23, \v
	vxorw	\v, $24, \v
	vsraw	\v, 31, \t
	vbicw	\v, \t, \v
	.endm

# KEY s: the key of the sign-extended f32 bits in s (masks $23, $24), a 64-bit integer.
	.macro	KEY s
	and	\s, $23, \s
	xor	\s, $24, \s
	.endm

# VECTORS / NEXT_VECTOR loop: a body's loop over the vectors of 8 elements at $16 ($17
# elements; the lanes past the end are zero).
	.macro	VECTORS
	addl	$17, 7, $17
	srl	$17, 3, $17
	.endm

	.macro	NEXT_VECTOR loop
	ldi	$16, 32($16)
	subl	$17, 1, $17
	bgt	$17, \loop
	.endm

# ZERO_VECTORS buf, vectors: `vectors` zero vectors at LDM buf (labels 1). Clobbers $1, $2.
	.macro	ZERO_VECTORS buf, vectors
	ldi	$1, \buf($31)
	ldi	$2, \vectors
1:	vstd	$31, 0($1)
	ldi	$1, 32($1)
	subl	$2, 1, $2
	bgt	$2, 1b
	.endm

# VMASKS: the key masks in every word of $23, $24.
	.macro	VMASKS
	ldl	$1, JOB + J_AND($31)
	vcpyw	$1, $23
	ldl	$1, JOB + J_XOR($31)
	vcpyw	$1, $24
	.endm

# setup: the job, this CPE's elements, the gets per block.
	.ent	setup
setup:
	FETCH_JOB $1, $2, REPLY
	rcid	$1
	stl	$1, MYID($31)
	ldl	$2, JOB + J_N($31)
	ldi	$3, 63($2)
	srl	$3, 6, $3
	addl	$3, 7, $3
	bic	$3, 7, $3             # C
	mull	$1, $3, $4
	addl	$4, $3, $5
	cmplt	$2, $5, $6
	selne	$6, $2, $5, $5        # min(N, (i + 1) C)
	cmplt	$2, $4, $6
	selne	$6, $2, $4, $4        # min(N, i C)
	stl	$4, LO($31)
	stl	$5, HI($31)
	ldl	$6, JOB + J_IDX($31)
	cmpult	$31, $6, $6
	addl	$6, 1, $6
	stl	$6, NREQ($31)
	stl	$31, RES + R_PASSES($31)
	ret
	.end	setup

# ENTRY name / LEAVE name: a kernel entry: its return kept at RA, the job fetched and this
# CPE's elements set up; at the end back to the spawn's exit.
	.macro	ENTRY name
	.globl	\name
	.ent	\name
\name:
	stl	$26, RA($31)
	bsr	$26, setup
	.endm

	.macro	LEAVE name
	ldl	$26, RA($31)
	ret
	.end	\name
	.endm

# fetch(element $16, parity $17): start the gets of the block at element $16 (values, and
# indices with J_IDX) into the parity's buffers. The last vector of the block is zeroed first:
# the lanes past its end read as 0.0, never selected. Clobbers $1-$8, $29.
	.ent	fetch
fetch:
	ldl	$1, HI($31)
	subl	$1, $16, $1
	ldi	$2, BLOCK
	cmplt	$2, $1, $3
	selne	$3, $2, $1, $1        # count
	sll	$17, BLOCK_SHIFT, $4
	ldi	$5, BUF($4)
	subl	$1, 1, $6
	bic	$6, 7, $6
	s4addl	$6, $5, $6
	vstd	$31, 0($6)
	sll	$17, 2, $7
	ldi	$7, REPLY($7)
	stw	$31, 0($7)
	sll	$1, 2, $1
	ldi	$2, DMA_GET
	MAKE_DESC_REGS $8, $2, $1, $31, $31, $7
	sll	$16, 2, $3
	ldl	$6, JOB + J_X($31)
	addl	$6, $3, $6
	dma	$8, $6, $5
	ldl	$6, JOB + J_IDX($31)
	beq	$6, 1f
	addl	$6, $3, $6
	ldi	$5, IBUF($4)
	dma	$8, $6, $5
1:	ret
	.end	fetch

# pass: the body at BODY over this CPE's elements, a block at a time, the next block's gets
# in flight meanwhile. The body gets $16 the values, $17 their count, $18 their indices'
# buffer, $19 the first one's element number; it may clobber $1-$8, $16-$19, $27-$29 and
# keeps its state in $20-$25 from block to block.
	.ent	pass
pass:
	stl	$26, PASS_RA($31)
	ldl	$9, LO($31)           # the next get
	ldl	$10, HI($31)
	mov	$9, $12               # the block processed
	clr	$11                   # its parity
	cmplt	$9, $10, $1
	beq	$1, 3f
	mov	$9, $16
	clr	$17
	bsr	$26, fetch
	ldi	$9, BLOCK($9)
1:	cmplt	$9, $10, $1
	beq	$1, 2f
	mov	$9, $16
	xor	$11, 1, $17
	bsr	$26, fetch
	ldi	$9, BLOCK($9)
2:	ldl	$2, NREQ($31)
	sll	$11, 2, $3
	ldi	$3, REPLY($3)
4:	ldw	$1, 0($3)
	cmplt	$1, $2, $1
	bne	$1, 4b
	sll	$11, BLOCK_SHIFT, $16
	ldi	$18, IBUF($16)
	ldi	$16, BUF($16)
	subl	$10, $12, $17
	ldi	$1, BLOCK
	cmplt	$1, $17, $2
	selne	$2, $1, $17, $17
	mov	$12, $19
	ldl	$27, BODY($31)
	call	$26, ($27), 0
	ldi	$12, BLOCK($12)
	xor	$11, 1, $11
	cmplt	$12, $10, $1
	bne	$1, 1b
3:	ldl	$26, PASS_RA($31)
	ret
	.end	pass

# CHAIN get, put, position, buf, vectors, combine: the vectors at buf combined along a row
# (getr, putr; position: the column) or down column 7 (getc, putc; the row) from position
# 0: each CPE combines the partial it gets with its own and passes it on; the one at
# position 7 keeps the result at buf.
	.macro	CHAIN get, put, position, buf, vectors, combine
	ldi	$4, \buf($31)
	ldi	$5, \vectors
	addl	\position, 1, $8
1:	vldd	$6, 0($4)
	beq	\position, 2f
	\get	$7
	\combine $7, $6
2:	cmpeq	\position, 7, $1
	bne	$1, 3f
	\put	$6, $8
	br	4f
3:	vstd	$6, 0($4)
4:	ldi	$4, 32($4)
	subl	$5, 1, $5
	bgt	$5, 1b
	.endm

# ALLREDUCE name, buf, vectors, combine: the routine `name` combining the `vectors` vectors
# at LDM `buf` over the 64 CPEs with `combine recv, own` (own = recv (+) own; temporaries
# $16-$19): along each row from column 0 (the partial so far, then this CPE's), down column
# 7 from row 0; CPE 63 broadcasts the totals along column 7 and row 7, column 7 along the
# other rows. Every CPE ends with the totals at buf. CPE 63 starts broadcasting when its
# chain is done, so every chain value has been taken: no queue holds one behind a total.
# Clobbers $1-$8, $16-$19.
	.macro	ALLREDUCE name, buf, vectors, combine
	.ent	\name
\name:
	ldl	$1, MYID($31)
	and	$1, 7, $2             # column
	srl	$1, 3, $3             # row
	CHAIN	getr, putr, $2, \buf, \vectors, \combine
	cmpeq	$2, 7, $1
	beq	$1, 20f
	CHAIN	getc, putc, $3, \buf, \vectors, \combine
	cmpeq	$3, 7, $1
	beq	$1, 10f
	ldi	$4, \buf($31)         # CPE 63, its chain done: the totals up column 7 and row 7
	ldi	$5, \vectors
11:	vldd	$6, 0($4)
	putc	$6, 8
	putr	$6, 8
	ldi	$4, 32($4)
	subl	$5, 1, $5
	bgt	$5, 11b
	ret
10:
	ldi	$4, \buf($31)         # column 7 above row 7: the totals from below, to the row
	ldi	$5, \vectors
9:	getc	$6
	vstd	$6, 0($4)
	putr	$6, 8
	ldi	$4, 32($4)
	subl	$5, 1, $5
	bgt	$5, 9b
	ret
20:	ldi	$4, \buf($31)         # the other columns: the totals from column 7
	ldi	$5, \vectors
21:	getr	$6
	vstd	$6, 0($4)
	ldi	$4, 32($4)
	subl	$5, 1, $5
	bgt	$5, 21b
	ret
	.end	\name
	.endm

# The statistics record: lane 0 a sum (double), lane 1 a maximum, lane 2 a count.
	.macro	COMBINE_STATS recv, own
	vextf	\recv, 0, $16
	vextf	\own, 0, $17
	faddd	$16, $17, $17
	vinsf	$17, \own, 0, \own
	vextf	\recv, 1, $16
	vextf	\own, 1, $17
	cmplt	$17, $16, $18
	selne	$18, $16, $17, $17
	vinsf	$17, \own, 1, \own
	vextf	\recv, 2, $16
	vextf	\own, 2, $17
	addl	$16, $17, $17
	vinsf	$17, \own, 2, \own
	.endm

	.macro	COMBINE_COUNTS recv, own
	vaddl	\recv, \own, \own
	.endm

	ALLREDUCE allreduce_stats, RED, 1, COMBINE_STATS
	ALLREDUCE allreduce_hist, GHIST, BINS / 4, COMBINE_COUNTS
	ALLREDUCE allreduce_counts, CNTS, CPES / 4, COMBINE_COUNTS

# stats_body: $20 the largest key in each word lane, $21 + $22 the sum of |x| in double
# ($25 clears a double's sign).
	.ent	stats_body
stats_body:
	VECTORS
1:	vldd	$1, 0($16)
	vlds	$2, 0($16)
	vlds	$3, 16($16)
	KEY_VEC	$1, $4
	vsubw	$1, $20, $4
	vsraw	$4, 31, $5
	vandw	$4, $5, $4
	vsubw	$1, $4, $20           # max(key, $20)
	vandw	$2, $25, $2
	vandw	$3, $25, $3
	vaddd	$21, $2, $21
	vaddd	$22, $3, $22
	NEXT_VECTOR 1b
	ret
	.end	stats_body

# count_body: $20 += 1 in each word lane whose key is above the threshold in $22's words.
	.ent	count_body
count_body:
	VECTORS
1:	vldd	$1, 0($16)
	KEY_VEC	$1, $4
	vsubw	$22, $1, $1           # negative where key > threshold
	vsrlw	$1, 31, $1
	vaddw	$20, $1, $20
	NEXT_VECTOR 1b
	ret
	.end	count_body

# lanes_sum: $2 = the sum of the 4 double lanes of $21 + $22 (a fixed order). Clobbers $3, $4.
	.ent	lanes_sum
lanes_sum:
	vaddd	$21, $22, $21
	vextf	$21, 0, $2
	vextf	$21, 1, $3
	faddd	$2, $3, $2
	vextf	$21, 2, $3
	vextf	$21, 3, $4
	faddd	$3, $4, $3
	faddd	$2, $3, $2
	ret
	.end	lanes_sum

# sumsq_body: $21 + $22 the sum of x^2 in double (f32 squared in double: exact).
	.ent	sumsq_body
sumsq_body:
	VECTORS
1:	vlds	$2, 0($16)
	vlds	$3, 16($16)
	vmad	$2, $2, $21, $21
	vmad	$3, $3, $22, $22
	NEXT_VECTOR 1b
	ret
	.end	sumsq_body

# stats: MEAN = sum |x| / N (at most MAXV) and MAXV = the largest key (a float), over the
# core group.
	.ent	stats
stats:
	stl	$26, SUB_RA($31)
	VMASKS
	vaddw	$31, $31, $20
	vaddd	$31, $31, $21
	vaddd	$31, $31, $22
	ldi	$1, -1
	srl	$1, 1, $1
	vcpyf	$1, $25
	ldi	$1, stats_body
	stl	$1, BODY($31)
	bsr	$26, pass
	clr	$1                    # the largest of the 8 lanes
	.irp	lane, 0, 1, 2, 3, 4, 5, 6, 7
	vextw	$20, \lane, $2
	cmplt	$1, $2, $3
	selne	$3, $2, $1, $1
	.endr
	bsr	$26, lanes_sum
	vinsf	$2, $31, 0, $5
	vinsf	$1, $5, 1, $5
	vstd	$5, RED($31)
	bsr	$26, allreduce_stats
	fldd	$2, RED($31)
	ldl	$1, RED + 8($31)
	fstd	$2, RES + R_SUM($31)
	stl	$1, RES + R_MAX($31)
	ifmovs	$1, $1
	fstd	$1, MAXV($31)
	ldl	$3, JOB + J_N($31)
	ifmovd	$3, $3
	fcvtld	$3, $3
	fdivd	$2, $3, $2
	fldd	$1, MAXV($31)
	fcmplt	$1, $2, $3
	fbeq	$3, 1f
	mov	$1, $2
1:	fstd	$2, MEAN($31)         # at most MAXV (signed keys): thresholds fall as r does
	ldl	$26, SUB_RA($31)
	ret
	.end	stats

# count_at(threshold bits $16): MINE = this CPE's keys above it, RES's threshold and total,
# one more pass; returns the total in $0.
	.ent	count_at
count_at:
	stl	$26, SUB_RA($31)
	stl	$16, RES + R_THR($31)
	vcpyw	$16, $22
	VMASKS
	vaddw	$31, $31, $20
	ldi	$1, count_body
	stl	$1, BODY($31)
	bsr	$26, pass
	clr	$1
	.irp	lane, 0, 1, 2, 3, 4, 5, 6, 7
	vextw	$20, \lane, $2
	addl	$1, $2, $1
	.endr
	stl	$1, MINE($31)
	vinsf	$1, $31, 2, $5
	vstd	$5, RED($31)
	bsr	$26, allreduce_stats
	ldl	$0, RED + 16($31)
	stl	$0, RES + R_NNZ($31)
	ldl	$1, RES + R_PASSES($31)
	addl	$1, 1, $1
	stl	$1, RES + R_PASSES($31)
	ldl	$26, SUB_RA($31)
	ret
	.end	count_at

# threshold_bits(r $16, a double): the f32 bits of MEAN + r (MAXV - MEAN) in $0, 0 if negative.
	.ent	threshold_bits
threshold_bits:
	fldd	$1, MEAN($31)
	fldd	$2, MAXV($31)
	fsubd	$2, $1, $2
	fmad	$16, $2, $1, $1
	fimovs	$1, $0
	cmplt	$0, 0, $1
	selne	$1, $31, $0, $0
	ret
	.end	threshold_bits

# finish: this CPE's count to counts[id]; CPE 0 puts the result record. Waits for both.
	.ent	finish
finish:
	ldl	$1, MYID($31)
	ldl	$2, JOB + J_COUNTS($31)
	s8addl	$1, $2, $2
	stw	$31, PUT_REPLY($31)
	ldi	$3, DMA_PUT
	ldi	$4, 8
	ldi	$5, PUT_REPLY
	MAKE_DESC_REGS $6, $3, $4, $31, $31, $5
	ldi	$7, MINE
	dma	$6, $2, $7
	ldi	$8, 1
	bne	$1, 1f
	ldi	$4, RESULT_BYTES
	MAKE_DESC_REGS $6, $3, $4, $31, $31, $5
	ldl	$2, JOB + J_RESULT($31)
	ldi	$7, RES
	dma	$6, $2, $7
	ldi	$8, 2
1:	ldw	$1, PUT_REPLY($31)
	cmplt	$1, $8, $1
	bne	$1, 1b
	ret
	.end	finish

# trimmed_threshold: after stats, Algorithm 11's first stage: r from J_START down by J_STEP
# until at least J_K keys are above, below r = 0 every nonzero key; count_at's results (the
# total in $0, RES, MINE).
	.ent	trimmed_threshold
trimmed_threshold:
	stl	$26, STAGE_RA($31)
	ldl	$1, JOB + J_START($31)
	stl	$1, RATIO($31)
2:	fldd	$16, RATIO($31)
	bsr	$26, threshold_bits
	fblt	$16, 3f               # r below 0, under the mean: every nonzero key
	mov	$0, $16
	br	4f
3:	clr	$16
4:	bsr	$26, count_at
	ldl	$1, JOB + J_K($31)
	cmplt	$0, $1, $1
	beq	$1, 9f                # enough above
	ldl	$1, RES + R_THR($31)
	beq	$1, 9f                # every nonzero key is above
	fldd	$1, RATIO($31)
	fldd	$2, JOB + J_STEP($31)
	fsubd	$1, $2, $1
	fstd	$1, RATIO($31)
	br	2b
9:	ldl	$26, STAGE_RA($31)
	ret
	.end	trimmed_threshold

	ENTRY	sel_threshold
	ldl	$1, JOB + J_METHOD($31)
	cmpeq	$1, METHOD_FIXED, $2
	beq	$2, 1f
	ldl	$16, JOB + J_THR($31)
	bsr	$26, count_at
	br	9f
1:	bsr	$26, stats
	ldl	$1, JOB + J_METHOD($31)
	cmpeq	$1, METHOD_BINARY, $2
	bne	$2, 20f
	bsr	$26, trimmed_threshold
	br	9f
20:	stl	$31, LEFT($31)        # binary search: r in [LEFT, RIGHT]
	ldi	$1, 0x3FF
	sll	$1, 52, $1
	stl	$1, RIGHT($31)        # 1.0
	stl	$31, ITER($31)
	ldi	$1, -1
	stl	$1, BEST + 8($31)     # none yet
21:	fldd	$1, LEFT($31)
	fldd	$2, RIGHT($31)
	faddd	$1, $2, $1
	ldi	$2, 0x3FE
	sll	$2, 52, $2
	ifmovd	$2, $2
	fmuld	$1, $2, $16           # the middle
	fstd	$16, RATIO($31)
	bsr	$26, threshold_bits
	mov	$0, $16
	bsr	$26, count_at
	ldl	$1, JOB + J_K($31)
	cmplt	$0, $1, $2
	bne	$2, 23f
	ldl	$2, JOB + J_HIGH($31)
	cmple	$0, $2, $2
	bne	$2, 9f                # K <= selected <= HIGH: accepted
	ldl	$2, BEST + 8($31)     # too many: the fewest so far, and search above
	cmpult	$0, $2, $2            # (-1 unsigned: none yet)
	beq	$2, 22f
	ldl	$2, RES + R_THR($31)
	stl	$2, BEST($31)
	stl	$0, BEST + 8($31)
	ldl	$2, MINE($31)
	stl	$2, BEST + 16($31)
22:	ldl	$1, RATIO($31)
	stl	$1, LEFT($31)
	br	24f
23:	ldl	$1, RATIO($31)        # too few: search below
	stl	$1, RIGHT($31)
24:	ldl	$1, ITER($31)
	addl	$1, 1, $1
	stl	$1, ITER($31)
	ldl	$2, JOB + J_MAX_ITER($31)
	cmplt	$1, $2, $2
	beq	$2, 25f
	fldd	$1, LEFT($31)
	fldd	$2, RIGHT($31)
	fsubd	$2, $1, $1
	fldd	$2, JOB + J_EPS($31)
	fcmplt	$2, $1, $1
	fbne	$1, 21b
25:	ldl	$1, BEST + 8($31)     # not accepted: the fewest above K, else every nonzero key
	blt	$1, 26f
	stl	$1, RES + R_NNZ($31)
	ldl	$1, BEST($31)
	stl	$1, RES + R_THR($31)
	ldl	$1, BEST + 16($31)
	stl	$1, MINE($31)
	br	9f
26:	clr	$16
	bsr	$26, count_at
9:	bsr	$26, finish
	LEAVE	sel_threshold

# hist_body: HIST[digit] += 1 for the keys whose bits above SHIFT + 8 are the prefix ($22
# SHIFT, $25 the prefix, $23 and $24 the masks as 64-bit integers).
	.ent	hist_body
hist_body:
	addl	$22, 8, $7
	ble	$17, 2f
1:	ldw	$1, 0($16)
	KEY	$1
	srl	$1, $7, $2
	cmpeq	$2, $25, $2
	srl	$1, $22, $3
	and	$3, BINS - 1, $3
	s8addl	$3, $31, $3
	ldi	$3, HIST($3)
	ldl	$4, 0($3)
	addl	$4, $2, $4
	stl	$4, 0($3)
	ldi	$16, 4($16)
	subl	$17, 1, $17
	bgt	$17, 1b
2:	ret
	.end	hist_body

# radix: the exact J_K-th largest key of this CPE's elements over the core group: RES's
# threshold (the key - 1, keeping its ties; 0: every nonzero key) and total, MINE.
	.ent	radix
radix:
	stl	$26, SUB_RA($31)
	ldl	$1, JOB + J_K($31)
	stl	$1, NEED($31)
	stl	$31, PREFIX($31)
	stl	$31, ABOVE($31)
	stl	$31, MINE($31)
	ldi	$1, 24
	stl	$1, SHIFT($31)
	ldi	$1, hist_body
	stl	$1, BODY($31)
2:	ZERO_VECTORS HIST, BINS / 4   # a pass: the histogram of the next digit
	ldl	$22, SHIFT($31)
	ldl	$23, JOB + J_AND($31)
	ldl	$24, JOB + J_XOR($31)
	ldl	$25, PREFIX($31)
	bsr	$26, pass
	ldi	$1, HIST($31)         # the core group's histogram
	ldi	$2, GHIST($31)
	ldi	$3, BINS / 4
3:	vldd	$4, 0($1)
	vstd	$4, 0($2)
	ldi	$1, 32($1)
	ldi	$2, 32($2)
	subl	$3, 1, $3
	bgt	$3, 3b
	bsr	$26, allreduce_hist
	ldl	$1, NEED($31)         # the digit of the NEED-th largest key: from the top,
	clr	$2                    # bins 255..1 while they hold fewer; else bin 0
	clr	$3
	ldi	$4, BINS - 1
4:	s8addl	$4, $31, $5
	ldl	$6, GHIST($5)
	addl	$2, $6, $7
	cmplt	$7, $1, $8
	beq	$8, 5f
	mov	$7, $2
	ldl	$6, HIST($5)
	addl	$3, $6, $3
	subl	$4, 1, $4
	bgt	$4, 4b
5:	subl	$1, $2, $1
	stl	$1, NEED($31)
	ldl	$1, ABOVE($31)
	addl	$1, $2, $1
	stl	$1, ABOVE($31)
	ldl	$1, MINE($31)
	addl	$1, $3, $1
	stl	$1, MINE($31)
	stl	$4, DIGIT($31)
	ldl	$1, PREFIX($31)
	sll	$1, 8, $1
	addl	$1, $4, $1
	stl	$1, PREFIX($31)
	ldl	$1, RES + R_PASSES($31)
	addl	$1, 1, $1
	stl	$1, RES + R_PASSES($31)
	ldl	$1, SHIFT($31)
	subl	$1, 8, $1
	stl	$1, SHIFT($31)
	bge	$1, 2b
	ldl	$1, PREFIX($31)       # the key: threshold key - 1 keeps its ties (0: nonzero keys)
	ldl	$2, ABOVE($31)
	beq	$1, 6f
	subl	$1, 1, $1
	ldl	$4, DIGIT($31)
	s8addl	$4, $31, $5
	ldl	$6, GHIST($5)
	addl	$2, $6, $2
	ldl	$6, HIST($5)
	ldl	$7, MINE($31)
	addl	$7, $6, $7
	stl	$7, MINE($31)
6:	stl	$1, RES + R_THR($31)
	stl	$2, RES + R_NNZ($31)
	ldl	$26, SUB_RA($31)
	ret
	.end	radix

	ENTRY	sel_radix
	bsr	$26, radix
	bsr	$26, finish
	LEAVE	sel_radix

# compact_body: (index, value) of every selected element to OUTI/OUTV ($20, $21 the next
# slots), stored always and kept by advancing the slots only when selected; $25 sums the
# selected values (double), $22 the threshold. $18: the indices (J_IDX), else the positions.
	.ent	compact_body
compact_body:
	stl	$26, BODY_RA($31)
	ldl	$7, JOB + J_IDX($31)
	ble	$17, 3f
1:	ldw	$3, 0($16)
	mov	$3, $4
	KEY	$4
	cmplt	$22, $4, $5
	mov	$19, $2
	beq	$7, 2f
	ldw	$2, 0($18)
2:	stw	$2, 0($20)
	stw	$3, 0($21)
	flds	$6, 0($16)
	seleq	$5, $31, $6, $6
	faddd	$25, $6, $25
	s4addl	$5, $20, $20
	s4addl	$5, $21, $21
	addl	$19, 1, $19
	ldi	$18, 4($18)
	ldi	$16, 4($16)
	subl	$17, 1, $17
	bgt	$17, 1b
3:	ldi	$1, OUTI + BLOCK * 4($31)
	cmplt	$20, $1, $1
	bne	$1, 4f
	bsr	$26, flush
4:	ldl	$26, BODY_RA($31)
	ret
	.end	compact_body

# flush: put OUTI/OUTV up to $20 at OFFSET of the outputs and wait; $20, $21 to the start.
	.ent	flush
flush:
	ldi	$1, OUTI($31)
	subl	$20, $1, $1           # bytes
	beq	$1, 2f
	ldl	$2, OFFSET($31)
	sll	$2, 2, $3
	stw	$31, PUT_REPLY($31)
	ldi	$5, PUT_REPLY
	ldi	$6, DMA_PUT
	MAKE_DESC_REGS $7, $6, $1, $31, $31, $5
	ldl	$4, JOB + J_OUT_IDX($31)
	addl	$4, $3, $4
	ldi	$8, OUTI
	dma	$7, $4, $8
	ldl	$4, JOB + J_OUT_VAL($31)
	addl	$4, $3, $4
	ldi	$8, OUTV
	dma	$7, $4, $8
	srl	$1, 2, $1
	addl	$2, $1, $2
	stl	$2, OFFSET($31)
1:	ldw	$6, PUT_REPLY($31)
	cmplt	$6, 2, $6
	bne	$6, 1b
	ldi	$20, OUTI($31)
	ldi	$21, OUTV($31)
2:	ret
	.end	flush

# offset: OFFSET = the counts at CNTS of the CPEs before this one, RES's total = all of them.
	.ent	offset
offset:
	ldl	$1, MYID($31)
	clr	$2                    # the CPEs before
	clr	$5                    # all
	clr	$7                    # the CPE of the count
	ldi	$3, CNTS($31)
1:	ldl	$4, 0($3)
	addl	$5, $4, $5
	cmplt	$7, $1, $8
	seleq	$8, $31, $4, $4
	addl	$2, $4, $2
	ldi	$3, 8($3)
	addl	$7, 1, $7
	cmplt	$7, CPES, $8
	bne	$8, 1b
	stl	$2, OFFSET($31)
	stl	$5, RES + R_NNZ($31)
	ret
	.end	offset

# gather_counts: every CPE's MINE at CNTS (a reduction of the 64 slots, each CPE's own
# filled), then OFFSET.
	.ent	gather_counts
gather_counts:
	stl	$26, SUB_RA($31)
	ZERO_VECTORS CNTS, CPES / 4
	ldl	$1, MYID($31)
	s8addl	$1, $31, $1
	ldl	$2, MINE($31)
	stl	$2, CNTS($1)
	bsr	$26, allreduce_counts
	bsr	$26, offset
	ldl	$26, SUB_RA($31)
	ret
	.end	gather_counts

# compact: the elements whose key is above $22 (threshold bits) to J_OUT_IDX / J_OUT_VAL from
# OFFSET on, and RES's sum of the selected values over the core group.
	.ent	compact
compact:
	stl	$26, SUB_RA($31)
	ldl	$23, JOB + J_AND($31)
	ldl	$24, JOB + J_XOR($31)
	ldi	$20, OUTI($31)
	ldi	$21, OUTV($31)
	vaddd	$31, $31, $25
	ldi	$1, compact_body
	stl	$1, BODY($31)
	bsr	$26, pass
	bsr	$26, flush
	vinsf	$25, $31, 0, $5       # the sum of the selected values over the core group
	vstd	$5, RED($31)
	bsr	$26, allreduce_stats
	fldd	$1, RED($31)
	fstd	$1, RES + R_SELSUM($31)
	ldl	$26, SUB_RA($31)
	ret
	.end	compact

# swap_outputs: J_OUT_IDX / J_OUT_VAL exchanged with J_SCR_IDX / J_SCR_VAL (compact's outputs).
	.ent	swap_outputs
swap_outputs:
	ldl	$1, JOB + J_OUT_IDX($31)
	ldl	$2, JOB + J_SCR_IDX($31)
	ldl	$3, JOB + J_OUT_VAL($31)
	ldl	$4, JOB + J_SCR_VAL($31)
	stl	$2, JOB + J_OUT_IDX($31)
	stl	$1, JOB + J_SCR_IDX($31)
	stl	$4, JOB + J_OUT_VAL($31)
	stl	$3, JOB + J_SCR_VAL($31)
	ret
	.end	swap_outputs

	ENTRY	sel_compact
	ldl	$2, JOB + J_COUNTS($31)   # the counts the entry before left
	ldi	$3, CPES * 8
	ldi	$4, DMA_GET
	ldi	$5, REPLY
	stw	$31, REPLY($31)
	MAKE_DESC_REGS $6, $4, $3, $31, $31, $5
	ldi	$7, CNTS
	dma	$6, $2, $7
1:	ldw	$1, REPLY($31)
	beq	$1, 1b
	bsr	$26, offset
	ldl	$22, JOB + J_THR($31)
	bsr	$26, compact
	ldl	$2, MYID($31)
	s8addl	$2, $31, $2
	ldl	$3, CNTS($2)
	stl	$3, MINE($31)
	ldl	$1, JOB + J_THR($31)
	stl	$1, RES + R_THR($31)
	bsr	$26, finish
	LEAVE	sel_compact

	ENTRY	sel_trimmed
	bsr	$26, stats
	bsr	$26, trimmed_threshold
	ldl	$1, JOB + J_K($31)
	cmple	$0, $1, $1
	bne	$1, 8f                # at most J_K above: they are the set
	ldl	$1, LO($31)           # the survivors to this CPE's part of the scratch
	stl	$1, OFFSET($31)
	bsr	$26, swap_outputs
	ldl	$22, RES + R_THR($31)
	bsr	$26, compact
	bsr	$26, swap_outputs
	ldl	$1, LO($31)           # from now on this CPE's elements are its survivors
	ldl	$2, MINE($31)
	addl	$1, $2, $2
	stl	$2, HI($31)
	ldl	$1, JOB + J_SCR_VAL($31)
	stl	$1, JOB + J_X($31)
	bsr	$26, radix
	ldl	$1, JOB + J_SCR_IDX($31)   # the last compaction takes the survivors' indices
	stl	$1, JOB + J_IDX($31)
	ldi	$1, 2
	stl	$1, NREQ($31)
8:	bsr	$26, gather_counts
	ldl	$22, RES + R_THR($31)
	bsr	$26, compact
	bsr	$26, finish
	LEAVE	sel_trimmed

	ENTRY	sel_sumsq
	vaddd	$31, $31, $21
	vaddd	$31, $31, $22
	ldi	$1, sumsq_body
	stl	$1, BODY($31)
	bsr	$26, pass
	bsr	$26, lanes_sum
	vinsf	$2, $31, 0, $5
	vstd	$5, RED($31)
	bsr	$26, allreduce_stats
	fldd	$2, RED($31)
	fstd	$2, RES + R_SUM($31)
	stl	$31, MINE($31)
	bsr	$26, finish
	LEAVE	sel_sumsq

# scatter_body: dense[index] = dense[index] + alpha value for the block, one global load and
# store per element (at most one outstanding per CPE: the loop waits for each).
	.ent	scatter_body
scatter_body:
	ldl	$7, JOB + J_DENSE($31)
	fldd	$6, JOB + J_ALPHA($31)
	ble	$17, 2f
1:	ldw	$2, 0($18)
	flds	$3, 0($16)
	s4addl	$2, $7, $2
	flds	$4, 0($2)
	fmuls	$6, $3, $3
	fadds	$4, $3, $4
	fsts	$4, 0($2)
	ldi	$16, 4($16)
	ldi	$18, 4($18)
	subl	$17, 1, $17
	bgt	$17, 1b
2:	ret
	.end	scatter_body

	ENTRY	sel_scatter_add
	ldi	$1, scatter_body
	stl	$1, BODY($31)
	bsr	$26, pass
	ldl	$7, JOB + J_DENSE($31)
	flds	$1, 0($7)             # waits for this CPE's last store
	LEAVE	sel_scatter_add
