# QingLong's persistent FC kernel (docs/qinglong.md "Persistent FC"): y = W x in float64 for a
# stream of samples, W (FC_ROWS x 64 rows, FC_IN columns) resident in the 64 LDMs: each CPE
# DMAs its FC_ROWS rows from the package's constants ONCE, then every sample only moves x in
# (CPE 0's broadcast get into every LDM) and y out (each CPE puts its FC_ROWS outputs), through
# 3-slot rings: at step k the group meets once x of k is in, CPE 0 gets x of k+2 (into the slot
# of k-1, which every CPE is done with), and each CPE computes its rows of y_k and puts them
# while earlier puts may be in flight.
# x and y are FC_ELEM-byte elements: 8 float64, or 4 float32 (widened by vlds, the sums rounded
# once by fsts); W is float64 either way.
# The host defines before this file FC_IN (a multiple of 16), FC_ROWS, FC_ELEM and FC_STAGES: 3 the
# kernel, 1 its compute alone (no per-sample DMA: T_c) and 2 its transfers alone (T_in + T_out),
# so the bench and the tests measure each term with the same code.
# The I/O slot `samples` holds the address of the stream's table: the count word, then each
# sample's (input, output) address pair, padded to whole chunks of CHUNK samples. The stream has
# no length limit: CPE 0 broadcasts the table a chunk at a time into a 2-chunk ring of every LDM,
# chunk c+1 at step 32c+1 (after the meeting that follows every leader's last use of chunk c-1,
# whose half it takes), and waits for it only at step 32c+30, when it first needs it; the
# meeting of that step tells the row leaders it is in.

	.include "../include/dma.inc"
	.include "../include/vector.inc"

	LOG_CHUNK = 5
	CHUNK = 1 << LOG_CHUNK   # samples per chunk of the table
	PAIR_BYTES = 16
	CHUNK_BYTES = CHUNK * PAIR_BYTES
	REQ_MESH_ROWS = 8     # the broadcast's mask 0xff: 8 rows; a row leader puts 8 CPEs' rows
	REQ_MESH_COLS = 8
	X_BYTES = FC_IN * FC_ELEM
	X_VECTOR = 4 * FC_ELEM    # bytes of x a vector load reads
	Y_BYTES = FC_ROWS * FC_ELEM
	Y_SLOT = (Y_BYTES + 31) / 32 * 32
	W_BYTES = FC_ROWS * FC_IN * 8   # this CPE's rows
	COMPUTE = FC_STAGES & 1
	TRANSFER = FC_STAGES & 2

	.qio
	.globl	samples
samples:
	.quad	0

	.qconst
	.align	7
	.globl	weights
weights:
	.skip	64 * W_BYTES
	.size	weights, 64 * W_BYTES

	.ldm
	.align	5
ACC:	.skip	32                # a row's four partial sums
TREPLY:	.skip	4
GETS:	.skip	4
PUTS:	.skip	4
CHUNKS:	.skip	4                 # the table's chunks 1, 2, ... landed
	.align	3
TBASE:	.skip	8                 # the table's main-memory address
TABLE:	.skip	2 * CHUNK_BYTES
	.align	5
YRING:	.skip	3 * Y_SLOT
	.align	7
XRING:	.skip	3 * X_BYTES
WBUF:	.skip	W_BYTES
	.globl	fc_ldm_end
fc_ldm_end:

	.text

# LOAD_X reg, offset: the 4 elements of x at `offset` bytes from $2, as doubles.
	.macro	LOAD_X reg, offset
	.if	FC_ELEM - 4
	vldd	\reg, \offset($2)
	.else
	vlds	\reg, \offset($2)
	.endif
	.endm

# ADVANCE slot, start, end, step: the ring's next slot after the register `slot`; takes $3
# (and the local label 9).
	.macro	ADVANCE slot, start, end, step
	addl	\slot, \step, \slot
	cmplt	\slot, \end, $3
	bne	$3, 9f
	mov	\start, \slot
9:
	.endm

# $4 count, $9 this CPE, $11 its byte offset in y, $12 X_BYTES, $14 / $15 the get / put
# descriptors, $19 Y_SLOT, $21 / $5 the x / y slots of k, $23 / $22 and $24 / $20 the x and y
# rings' start / end, $25 k.
	.globl	persistent_fc
	.ent	persistent_fc
persistent_fc:                # $16 the constants, $18 the I/O table
	rcid	$9
	ldl	$1, samples($18) !io  # the table: its count (a global load), then chunk 0
	ldl	$4, 0($1)
	stl	$1, TBASE($31)
	stw	$31, CHUNKS($31)
	bne	$9, 3f
	clr	$1
	bsr	$3, get_chunk
	ldi	$2, 1
	WAIT_COUNT CHUNKS, $2, $3
3:	MAKE_DESC $13, DMA_GET, 0, TREPLY
	ldi	$1, weights($16) !seg # this CPE's rows of W, once
	ldi	$10, W_BYTES
	mull	$9, $10, $2
	addl	$1, $2, $1
	DESC_SET_SIZE $13, $10
	ldi	$3, WBUF
	DMA_WAIT $13, $1, $3, TREPLY
	MAKE_DESC $14, DMA_GET, X_BYTES, GETS, DMA_BCAST, $31, 0xff
	MAKE_DESC $15, DMA_PUT, 8 * Y_BYTES, PUTS, DMA_ROW
	stw	$31, GETS($31)
	stw	$31, PUTS($31)
	bic	$9, 7, $11            # a row's leader puts its 8 CPEs' rows of y at once
	ldi	$2, Y_BYTES
	mull	$11, $2, $11
	ldi	$12, X_BYTES
	ldi	$19, Y_SLOT
	ldi	$23, XRING
	mov	$23, $21
	ldi	$22, 3 * X_BYTES
	addl	$22, $23, $22
	ldi	$24, YRING
	mov	$24, $5
	mov	$24, $28
	ldi	$20, 3 * Y_SLOT
	addl	$20, $24, $20
	clr	$25
	.if	TRANSFER
	bne	$9, .Lstep            # CPE 0 gets x of samples 0 and 1
	ldl	$1, TABLE($31)
	dma	$14, $1, $21
	cmplt	$4, 2, $2
	bne	$2, .Lstep
	ldl	$1, TABLE + PAIR_BYTES($31)
	mov	$21, $6
	ADVANCE $6, $23, $22, $12
	dma	$14, $1, $6
	.endif
.Lstep:
	.if	TRANSFER
	bne	$9, 5f                # CPE 0 waits for x of k (WAIT_COUNT takes the label 1)
	addl	$25, 1, $2
	WAIT_COUNT GETS, $2, $3
	addl	$25, 2, $1            # and, when k+2 starts chunk c of the stream, for that chunk
	and	$1, CHUNK - 1, $2
	bne	$2, 5f
	cmplt	$1, $4, $2
	beq	$2, 5f
	srl	$1, LOG_CHUNK, $2
	addl	$2, 1, $2
	WAIT_COUNT CHUNKS, $2, $3
5:	and	$9, 7, $1             # a leader waits for its puts of 0..k-3: y's slot of k is
	bne	$1, 8f                # free for its row after the meeting
	subl	$25, 2, $2
	WAIT_COUNT PUTS, $2, $3
8:
	.endif
	synr	0xff                  # x of k is in; every CPE is done with k-1
	sync	0xff
	.if	TRANSFER
	bne	$9, 2f                # CPE 0 gets x of k+2 into the slot k-1 used: issued before
	addl	$25, 2, $1            # the puts of k, it overlaps two steps
	cmplt	$1, $4, $2
	beq	$2, 2f
	mov	$21, $6
	ADVANCE $6, $23, $22, $12
	ADVANCE $6, $23, $22, $12
	and	$1, 2 * CHUNK - 1, $2
	sll	$2, 4, $2
	ldl	$3, TABLE($2)
	dma	$14, $3, $6
2:
	.endif
	.if	TRANSFER
	and	$9, 7, $1             # a leader puts y of k-1, which its row computed before the
	bne	$1, 6f                # meeting, from the slot $28
	beq	$25, 6f
	subl	$25, 1, $1
	bsr	$3, put_y
	bne	$9, 6f                # step 32c+1: CPE 0 gets chunk c+1 if the stream has it
	and	$25, CHUNK - 1, $1
	cmpeq	$1, 1, $1
	beq	$1, 6f
	srl	$25, LOG_CHUNK, $1
	addl	$1, 1, $1
	sll	$1, LOG_CHUNK, $2
	cmplt	$2, $4, $2
	beq	$2, 6f
	bsr	$3, get_chunk
6:
	.endif
	.if	COMPUTE
	ldi	$1, WBUF              # y_k's rows: four partial sums a row, 16 columns a step
	mov	$5, $8
	ldi	$7, FC_ROWS
3:	mov	$21, $2
	vcpyf	$31, $0
	vcpyf	$31, $6
	vcpyf	$31, $10
	vcpyf	$31, $13
	ldi	$3, FC_IN / 16
4:	vldd	$16, 0($1)
	LOAD_X	$17, 0
	vldd	$18, 32($1)
	LOAD_X	$27, X_VECTOR
	vmad	$16, $17, $0, $0
	vldd	$16, 64($1)
	LOAD_X	$17, 2 * X_VECTOR
	vmad	$18, $27, $6, $6
	vldd	$18, 96($1)
	LOAD_X	$27, 3 * X_VECTOR
	vmad	$16, $17, $10, $10
	vmad	$18, $27, $13, $13
	addl	$1, 128, $1
	addl	$2, 4 * X_VECTOR, $2
	subl	$3, 1, $3
	bne	$3, 4b
	SUM_LANES $0, $6, $10, $13, ACC
	.if	FC_ELEM - 4
	fstd	$0, 0($8)
	.else
	fsts	$0, 0($8)
	.endif
	addl	$8, FC_ELEM, $8
	subl	$7, 1, $7
	bne	$7, 3b
	.endif
	ADVANCE $21, $23, $22, $12
	mov	$5, $28
	ADVANCE $5, $24, $20, $19
	addl	$25, 1, $25
	cmplt	$25, $4, $1
	bne	$1, .Lstep
	.if	TRANSFER
	synr	0xff                  # every row has computed the last sample
	sync	0xff
	and	$9, 7, $1
	bne	$1, 7f
	subl	$4, 1, $1
	bsr	$3, put_y
	WAIT_COUNT PUTS, $4, $3
7:
	.endif
	ret
	.end	persistent_fc

# put_y (bsr $3): a leader puts its row's y of sample $1 from the slot $28 (ROW mode: column j's
# Y_BYTES from the same slot of each LDM); takes $2, $6.
	.ent	put_y
put_y:
	and	$1, 2 * CHUNK - 1, $2
	sll	$2, 4, $2
	ldl	$6, TABLE + 8($2)
	addl	$6, $11, $6
	dma	$15, $6, $28
	ret	$31, ($3)
	.end	put_y

# get_chunk (bsr $3): broadcast chunk $1 of the table into its half of every LDM's ring (counted
# in CPE 0's CHUNKS); takes $2, $6, $8, $29.
	.ent	get_chunk
get_chunk:
	sll	$1, LOG_CHUNK + 4, $2
	ldl	$6, TBASE($31)
	addl	$6, $2, $6
	addl	$6, 8, $6
	and	$1, 1, $2
	sll	$2, LOG_CHUNK + 4, $2
	ldi	$2, TABLE($2)
	MAKE_DESC $8, DMA_GET, CHUNK_BYTES, CHUNKS, DMA_BCAST, $31, 0xff
	dma	$8, $6, $2
	ret	$31, ($3)
	.end	get_chunk
