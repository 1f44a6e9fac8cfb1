# The transforms of Winograd F(2x2, 3x3) convolution (thesis §5.1.3, Algorithm 5; docs/dnn.md
# "Winograd convolution"); hostlib/dnn/conv/winograd.py is the host side, swGEMM does the 16
# products between the transforms.
#
# Activations are NHWC (channels innermost), so a pixel's channels are contiguous and the
# transforms are vectorised across channels: 4 channels per vector register when the channel
# block is a multiple of 4 (J_VEC = 1), else one channel at a time (same code, scalar loads).
# Arithmetic is in double (float32 is widened by the loads and rounded once by the stores).
# A tile is 4 x 4 input pixels at stride 2; tile p = (b TR + tr) TC + tc, P tiles in all.
#
#   OP_INPUT   x (B, R_i, C_i, N) -> V (16, P, N):  V[xi][p] = (B^T d B)[xi] of the tile's d,
#              d = x zero-padded by (p_r, p_c): the padding is fused (no padded copy): rows
#              outside the image are zeroed in LDM without a DMA, partial rows get only their
#              valid pixels and the rest of the LDM row is zeroed.
#   OP_OUTPUT  M (16, P, N) -> y (B, R_o, C_o, N):  the tile's 2 x 2 outputs (A^T m A) + bias;
#              outputs past R_o or C_o (odd sizes) are computed and not written.
#   OP_FILTER  w (N_o, N_i, 3, 3) -> U (16, K, N): U[xi][k][n] = (G g G^T)[xi] with (k, n) =
#              (i, o), or for J_ROT = 1 (backward data) g rotated by 180 degrees and (k, n) =
#              (o, i): the transposed, flipped filter of dx = conv(dy, w').
#   OP_DY      dy (B, R_o, C_o, N) -> Z (16, P, N): Z[xi][p] = (A d A^T)[xi] of the tile's 2 x 2
#              pixels of dy, zeros past R_o or C_o (backward filter).
#   OP_DW      dU (16, N_i, N_o) -> dw (N_o, N_i, 3, 3): dw[o][i] = G^T u G of the 16 values
#              dU[xi][i][o] (backward filter).
#
# A task of OP_INPUT / OP_OUTPUT / OP_DY is M consecutive tiles of one tile row and a block of
# CB channels; task t runs on CPE t mod 64 and is (tile row, tile group, channel block) with
# the channel block innermost. Its data: 4 input rows of 2m+2 pixels (m = the group's tiles),
# or 2 rows of 2m pixels of y / dy, and the 16 m tile vectors of V, M or Z. With the whole
# channel range in the block a row is one contiguous DMA and the 16 xi-slices one strided DMA
# (blocks of m N elements), else each pixel is a block and the slices are 16 DMAs (blocks of
# CB elements). A task of OP_FILTER / OP_DW is a BO x BI block of (o, i) filters (LDM: the
# filters [o][i][9] in IN_BUF, the slices [xi][k][n] in OUT_BUF): one strided DMA of BO rows
# of 9 BI elements of w (contiguous when BI = N_i) and one of the 16 slices when the block
# spans whole rows of U, else 16 of bk rows of bn elements; the host picks the block.
# B^T d B runs as two passes of 4 add/sub per 4-vector (32 per 4 x 4 x 4 tile, the thesis'
# one-expression form takes 48), A^T m A as 16 + 8 and the bias 4, A d A^T as 6 + 12; the
# filter transforms are scalar. DMAs are synchronous per CPE (the transforms are DMA bound,
# eq. 5-7; the 64 CPEs keep the engine busy).
# Divisions by the task counts are multiplications by ceil(2^32 / d) (exact below 2^32 / d;
# the host checks the sizes).
#
# Argument: a0 = the job (JOB_BYTES in main memory, int64 fields J_*).

	.set	noreorder
	.include "../include/dma.inc"

	J_OP = 0              # OP_INPUT, OP_OUTPUT, OP_FILTER, OP_DW or OP_DY
	J_ES = 8              # element bytes: 4 or 8
	J_VEC = 16            # 1: 4 channels per vector (N and CB multiples of 4); 0: scalar
	J_TASKS = 24
	J_SRC = 32            # x, M, dy, w or dU
	J_DST = 40            # V, y, Z, U or dw
	J_BIAS = 48           # OP_OUTPUT: the bias (N elements)
	J_NCB = 56            # channel blocks per tile group (OP_FILTER / OP_DW: blocks of i)
	J_NCB_INV = 64
	J_GROUPS = 72         # tile groups per tile row
	J_GROUPS_INV = 80
	J_TR = 88             # tile rows per image
	J_TR_INV = 96
	J_RI = 104            # image rows and columns: of x (OP_INPUT) or y / dy
	J_CI = 112
	J_PR = 120            # padding (OP_INPUT)
	J_PC = 128
	J_CH = 136            # channels N (OP_FILTER / OP_DW: N_i)
	J_CB = 144            # channels per block (OP_FILTER / OP_DW: BI)
	J_M = 152             # tiles per group (OP_FILTER / OP_DW: BO)
	J_TC = 160            # tiles per tile row
	J_P = 168             # tiles in all (OP_FILTER / OP_DW: N_o)
	J_ROT = 176           # OP_FILTER: 1 = rotated and transposed (backward data)
	J_IN_BUF = 184        # LDM buffers, placed by the host from winograd_ldm_end
	J_OUT_BUF = 192
	J_BIAS_BUF = 200
	JOB_BYTES = 208

	OP_INPUT = 0
	OP_OUTPUT = 1
	OP_FILTER = 2
	OP_DW = 3
	OP_DY = 4
	REQ_MESH_ROWS = 8     # checked at launch: tasks are dealt NUM_CPES apart
	REQ_MESH_COLS = 8
	NUM_CPES = REQ_MESH_ROWS * REQ_MESH_COLS
	XI = 16               # tile vectors per tile (alpha^2)

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
REPLY:	.word	0
	.align	3
HALF:	.double	0.5
RET:	.quad	0
TASK:	.quad	0             # this CPE's task (its registers are all taken by the loops)
F_STEP:	.quad	0             # OP_FILTER: bytes of a filter (9 es) and of a row of o in LDM
F_OSTEP: .quad	0
NDMA:	.quad	0             # DMAs issued for the current wait
T_B:	.quad	0             # the task: image,
T_ROW:	.quad	0             #   first image row of its tiles (2 tr),
T_COL:	.quad	0             #   first image column (2 tc0),
T_MT:	.quad	0             #   tiles m,
T_PIX:	.quad	0             #   bytes of a pixel's channel block (ncv es),
T_C0:	.quad	0             #   first channel's byte offset (c0 es),
T_P0:	.quad	0             #   first tile p0,
T_BLOCK: .quad	0             #   DMA block of a pixel's channels (0: all, contiguous)
T_SKIP:	.quad	0             #   and the channels skipped between pixels, in bytes
	.globl	winograd_ldm_end      # the host places the buffers from here up
winograd_ldm_end:

	.text

# DIVMOD n, d, inv, q, r: q = n / JOB[d], r = n mod JOB[d] (JOB[inv] = ceil(2^32 / JOB[d])).
# Clobbers $29.
	.macro	DIVMOD n, d, inv, q, r
	ldl	$29, JOB + \inv($31)
	mull	\n, $29, \q
	srl	\q, 32, \q
	ldl	$29, JOB + \d($31)
	mull	\q, $29, $29
	subl	\n, $29, \r
	.endm

# MIN a, b, d: d = min(a, b) (signed). Clobbers $29.
	.macro	MIN a, b, d
	cmplt	\a, \b, $29
	selne	$29, \a, \b, \d
	.endm

# ZERO from, to: zero LDM [from, to) in 4-byte steps (nothing if from >= to). Clobbers from, $29.
	.macro	ZERO from, to
1:	cmplt	\from, \to, $29
	beq	$29, 2f
	stw	$31, 0(\from)
	addl	\from, 4, \from
	br	1b
2:
	.endm

# ISSUE op, mem, ldm, size, block, skip: one DMA (op a register: DMA_GET / DMA_PUT; block 0 =
# contiguous, else blocks of `block` bytes `skip` bytes apart in memory), counted in NDMA.
# `reply` is $18 (= REPLY); the descriptor is built in $19. Clobbers $19, $29.
	.macro	ISSUE op, mem, ldm, size, block, skip
	MAKE_DESC_REGS $19, \op, \size, \block, \skip, $18
	dma	$19, \mem, \ldm
	ldl	$29, NDMA($31)
	addl	$29, 1, $29
	stl	$29, NDMA($31)
	.endm

# ROW_ISSUE: a row of pixels between memory ($23) and LDM ($21), $17 bytes, op $24, blocks of
# a pixel's channels (T_BLOCK, T_SKIP). Clobbers $5, $6, $19, $29.
	.macro	ROW_ISSUE
	ldl	$5, T_BLOCK($31)
	ldl	$6, T_SKIP($31)
	ISSUE	$24, $23, $21, $17, $5, $6
	.endm

# TILE_REGS: the registers the tile loops share: $24 pix, $28 = m tiles, $27 m pix, $22 / $23
# IN / OUT, $25 channel steps. Clobbers $1, $2.
	.macro	TILE_REGS
	ldl	$24, T_PIX($31)
	ldl	$28, T_MT($31)
	mull	$28, $24, $27            # m pix
	ldl	$22, JOB + J_IN_BUF($31)
	ldl	$23, JOB + J_OUT_BUF($31)
	bsr	$26, channel_steps
	.endm

# --- the 4 x 4 tile transforms on registers $0-$19 (values) ---------------------------------
# BT4 a, b, c, d, t: (a, b, t, d) = B^T (a, b, c, d) = (a - c, b + c, c - b, b - d); c is free.
	.macro	BT4 add, sub, a, b, c, d, t
	\sub	\a, \c, \a
	\sub	\c, \b, \t
	\sub	\b, \d, \d
	\add	\b, \c, \b
	.endm

# WALK4 op, step, last, r0..r3: four loads or stores at $20, stepping `step` bytes between
# them and `last` after the fourth (the next row of the input tile, or the next tile vector).
	.macro	WALK4 op, step, last, r0, r1, r2, r3
	\op	\r0, 0($20)
	addl	$20, \step, $20
	\op	\r1, 0($20)
	addl	$20, \step, $20
	\op	\r2, 0($20)
	addl	$20, \step, $20
	\op	\r3, 0($20)
	addl	$20, \last, $20
	.endm

# INPUT_LOOP ld, st, add, sub, step: for every tile j < m and channel step of the task:
# d[r][c] = IN[r pitch + (2 j + c) pix + ch], V[xi] -> OUT[(xi m + j) pix + ch].
# Registers: $22 / $23 the tile's in / out pointers, $24 pix, $21 pitch - 3 pix, $27 m pix,
# $25 pix / step channel steps, $26 channel-step counter, $28 tile counter.
	.macro	INPUT_LOOP ld, st, add, sub, step
1:	mov	$25, $26
2:	mov	$22, $20
	WALK4	\ld, $24, $21, $0, $1, $2, $3
	WALK4	\ld, $24, $21, $4, $5, $6, $7
	WALK4	\ld, $24, $21, $8, $9, $10, $11
	WALK4	\ld, $24, $21, $12, $13, $14, $15
	# columns: rows (0, 1, 2, 3) of column c -> registers, column c's row 2 lands in $16+c
	BT4	\add, \sub, $0, $4, $8, $12, $16
	BT4	\add, \sub, $1, $5, $9, $13, $17
	BT4	\add, \sub, $2, $6, $10, $14, $18
	BT4	\add, \sub, $3, $7, $11, $15, $19
	# rows: row 0 = $0-$3, row 1 = $4-$7, row 2 = $16-$19, row 3 = $12-$15
	BT4	\add, \sub, $0, $1, $2, $3, $8
	BT4	\add, \sub, $4, $5, $6, $7, $9
	BT4	\add, \sub, $16, $17, $18, $19, $10
	BT4	\add, \sub, $12, $13, $14, $15, $11
	mov	$23, $20
	WALK4	\st, $27, $27, $0, $1, $8, $3
	WALK4	\st, $27, $27, $4, $5, $9, $7
	WALK4	\st, $27, $27, $16, $17, $10, $19
	WALK4	\st, $27, $27, $12, $13, $11, $15
	addl	$22, \step, $22
	addl	$23, \step, $23
	subl	$26, 1, $26
	bgt	$26, 2b
	addl	$22, $24, $22            # next tile: 2 pixels on, one passed by the channel steps
	subl	$28, 1, $28
	bgt	$28, 1b
	.endm

# AT4 add, sub, a, b, c, d: (a, b) = A^T (a, b, c, d) = (a + b + c, b - c - d).
	.macro	AT4 add, sub, a, b, c, d
	\add	\a, \b, \a
	\sub	\b, \c, \b
	\add	\a, \c, \a
	\sub	\b, \d, \b
	.endm

# OUTPUT_LOOP ld, st, add, sub, step: for every tile j < m and channel step:
# m[xi] = IN[(xi m + j) pix + ch], OUT[r (2 m pix) + (2 j + c) pix + ch] = (A^T m A)[r][c] +
# bias[ch]. Registers: $22 / $23 the tile's in / out pointers, $21 the bias pointer, $24 pix,
# $27 m pix (also the xi step of the loads), $25 channel steps, $26 / $28 counters.
	.macro	OUTPUT_LOOP ld, st, add, sub, step
1:	mov	$25, $26
	ldl	$21, JOB + J_BIAS_BUF($31)
2:	mov	$22, $20
	.irp	r, $0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
	\ld	\r, 0($20)
	addl	$20, $27, $20
	.endr
	# columns: (m0c, m1c, m2c, m3c) -> (s0c, s1c) in rows 0 and 1 of column c
	AT4	\add, \sub, $0, $4, $8, $12
	AT4	\add, \sub, $1, $5, $9, $13
	AT4	\add, \sub, $2, $6, $10, $14
	AT4	\add, \sub, $3, $7, $11, $15
	AT4	\add, \sub, $0, $1, $2, $3
	AT4	\add, \sub, $4, $5, $6, $7
	\ld	$16, 0($21)
	\add	$0, $16, $0
	\add	$1, $16, $1
	\add	$4, $16, $4
	\add	$5, $16, $5
	\st	$0, 0($23)
	addl	$23, $24, $20
	\st	$1, 0($20)
	addl	$23, $27, $20
	addl	$20, $27, $20
	\st	$4, 0($20)
	addl	$20, $24, $20
	\st	$5, 0($20)
	addl	$21, \step, $21
	addl	$22, \step, $22
	addl	$23, \step, $23
	subl	$26, 1, $26
	bgt	$26, 2b
	addl	$23, $24, $23            # next tile: 2 output pixels on, one passed
	subl	$28, 1, $28
	bgt	$28, 1b
	.endm

# FROW st, a, b, c: store the 4 values of G (a, b, c) (a, (a + b + c)/2, (a - b + c)/2, c) at
# $29, stepping $27 bytes; $18 = 0.5. Clobbers $15, $19.
	.macro	FROW st, a, b, c
	\st	\a, 0($29)
	addl	$29, $27, $29
	faddd	\a, \c, $15
	faddd	$15, \b, $19
	fsubd	$15, \b, $15
	fmuld	$19, $18, $19
	fmuld	$15, $18, $15
	\st	$19, 0($29)
	addl	$29, $27, $29
	\st	$15, 0($29)
	addl	$29, $27, $29
	\st	\c, 0($29)
	addl	$29, $27, $29
	.endm

# FILTER_LOOP ld, st: for o < bo ($28), i < bi ($17): the filter at $20 (9 elements, loaded from
# $20 + $22 stepping $23: forward or reversed), U_blk[xi] = (G g G^T)[xi] at $24 + xi $27 ($24
# = OUT + o F_OSTEP + i $25). Values $0-$15, $19; $18 = 0.5.
	.macro	FILTER_LOOP ld, st
1:	mov	$21, $24
	mov	$17, $26
2:	addl	$20, $22, $29
	\ld	$0, 0($29)
	.irp	r, $1, $2, $3, $4, $5, $6, $7, $8
	addl	$29, $23, $29
	\ld	\r, 0($29)
	.endr
	# G g: rows (g0c, (g0c + g1c + g2c)/2, (g0c - g1c + g2c)/2, g2c) of column c
	faddd	$0, $6, $15
	faddd	$15, $3, $9
	fsubd	$15, $3, $12
	fmuld	$9, $18, $9
	fmuld	$12, $18, $12
	faddd	$1, $7, $15
	faddd	$15, $4, $10
	fsubd	$15, $4, $13
	fmuld	$10, $18, $10
	fmuld	$13, $18, $13
	faddd	$2, $8, $15
	faddd	$15, $5, $11
	fsubd	$15, $5, $14
	fmuld	$11, $18, $11
	fmuld	$14, $18, $14
	mov	$24, $29
	FROW	\st, $0, $1, $2
	FROW	\st, $9, $10, $11
	FROW	\st, $12, $13, $14
	FROW	\st, $6, $7, $8
	ldl	$29, F_STEP($31)
	addl	$20, $29, $20
	addl	$24, $25, $24
	subl	$26, 1, $26
	bgt	$26, 2b
	ldl	$29, F_OSTEP($31)
	addl	$21, $29, $21
	subl	$28, 1, $28
	bgt	$28, 1b
	.endm

# A4 add, sub, x, y, t1, t2: (x, t1, t2, y) = A (x, y) = (x, x + y, x - y, -y).
	.macro	A4 add, sub, x, y, t1, t2
	\add	\x, \y, \t1
	\sub	\x, \y, \t2
	\sub	$31, \y, \y
	.endm

# DY_LOOP ld, st, add, sub, step: for every tile j < m and channel step: d = the 2 x 2 pixels
# IN[r (2 m pix) + (2 j + c) pix + ch], OUT[(xi m + j) pix + ch] = (A d A^T)[xi]. Registers as
# OUTPUT_LOOP's ($27 = m pix is also half the LDM row pitch).
	.macro	DY_LOOP ld, st, add, sub, step
1:	mov	$25, $26
2:	\ld	$0, 0($22)
	addl	$22, $24, $20
	\ld	$1, 0($20)
	addl	$22, $27, $20
	addl	$20, $27, $20
	\ld	$2, 0($20)
	addl	$20, $24, $20
	\ld	$3, 0($20)
	# columns (d0c, d1c) -> rows 0-3 of column c; then each row (x, y) -> 4 values
	A4	\add, \sub, $0, $2, $4, $5
	A4	\add, \sub, $1, $3, $6, $7
	A4	\add, \sub, $0, $1, $8, $9
	A4	\add, \sub, $4, $6, $10, $11
	A4	\add, \sub, $5, $7, $12, $13
	A4	\add, \sub, $2, $3, $14, $15
	mov	$23, $20
	WALK4	\st, $27, $27, $0, $8, $9, $1
	WALK4	\st, $27, $27, $4, $10, $11, $6
	WALK4	\st, $27, $27, $5, $12, $13, $7
	WALK4	\st, $27, $27, $2, $14, $15, $3
	addl	$22, \step, $22
	addl	$23, \step, $23
	subl	$26, 1, $26
	bgt	$26, 2b
	addl	$22, $24, $22            # next tile: 2 pixels on, one passed
	subl	$28, 1, $28
	bgt	$28, 1b
	.endm

# GT4 a, b, c, d: (a, b, d) = G^T (a, b, c, d) = (a + (b + c)/2, (b - c)/2, (b + c)/2 + d); c
# is free. $18 = 0.5; clobbers $16.
	.macro	GT4 a, b, c, d
	faddd	\b, \c, $16
	fsubd	\b, \c, \b
	fmuld	$16, $18, $16
	fmuld	\b, $18, \b
	faddd	\a, $16, \a
	faddd	$16, \d, \d
	.endm

# DW_LOOP ld, st, es: for o < bo ($28), i < bi ($17): u[xi] = U_blk[xi][i][o] at $24 + xi $27
# ($24 = OUT + o es + i $25), the 9 values of G^T u G stored in order at $20 (the [o][i][9]
# block). Values $0-$16; $18 = 0.5.
	.macro	DW_LOOP ld, st, es
1:	mov	$21, $24
	mov	$17, $26
2:	mov	$24, $29
	.irp	r, $0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
	\ld	\r, 0($29)
	addl	$29, $27, $29
	.endr
	GT4	$0, $4, $8, $12
	GT4	$1, $5, $9, $13
	GT4	$2, $6, $10, $14
	GT4	$3, $7, $11, $15
	GT4	$0, $1, $2, $3
	GT4	$4, $5, $6, $7
	GT4	$12, $13, $14, $15
	.irp	r, $0, $1, $3, $4, $5, $7, $12, $13, $15
	\st	\r, 0($20)
	addl	$20, \es, $20
	.endr
	addl	$24, $25, $24
	subl	$26, 1, $26
	bgt	$26, 2b
	ldl	$29, F_OSTEP($31)
	addl	$21, $29, $21
	subl	$28, 1, $28
	bgt	$28, 1b
	.endm

# DISPATCH loop: LOOP instantiated for the task's element size and vector mode.
	.macro	DISPATCH loop
	ldl	$1, JOB + J_VEC($31)
	ldl	$2, JOB + J_ES($31)
	cmpeq	$2, 4, $2
	beq	$1, 3f
	beq	$2, 4f
	\loop	vlds, vsts, vaddd, vsubd, 16
	br	9f
4:	\loop	vldd, vstd, vaddd, vsubd, 32
	br	9f
3:	beq	$2, 5f
	\loop	flds, fsts, faddd, fsubd, 4
	br	9f
5:	\loop	fldd, fstd, faddd, fsubd, 8
9:
	.endm

	.globl	winograd
	.ent	winograd
winograd:
	stl	$26, RET($31)
	FETCH_JOB $1, $2, REPLY
	rcid	$9
.Ltask:
	ldl	$1, JOB + J_TASKS($31)
	cmplt	$9, $1, $1
	beq	$1, .Lreturn
	stl	$9, TASK($31)
	stl	$31, NDMA($31)
	stw	$31, REPLY($31)
	ldl	$1, JOB + J_OP($31)
	cmpeq	$1, OP_FILTER, $2
	bne	$2, .Lfilter
	cmpeq	$1, OP_DW, $2
	bne	$2, .Lfilter
	bsr	$26, task_geometry
	ldl	$1, JOB + J_OP($31)
	cmpeq	$1, OP_DY, $2
	bne	$2, .Ldy
	bne	$1, .Loutput

# ---- OP_INPUT: 4 rows of 2m + 2 pixels in, B^T d B, the 16 m tile vectors out to V -------
	ldl	$10, T_PIX($31)
	ldl	$1, T_MT($31)
	addl	$1, 1, $1
	addl	$1, $1, $11              # w = 2 m + 2 pixels
	mull	$11, $10, $12            # pitch
	ldl	$13, T_COL($31)
	ldl	$1, JOB + J_PC($31)
	subl	$13, $1, $13             # cs: the first pixel's image column
	sellt	$13, $31, $13, $14       # lo = max(cs, 0)
	addl	$13, $11, $15
	ldl	$1, JOB + J_CI($31)
	MIN	$15, $1, $15             # hi = min(cs + w, C_i)
	subl	$14, $13, $16
	mull	$16, $10, $16            # LDM offset of pixel lo in a row
	subl	$15, $14, $17
	mull	$17, $10, $17            # bytes of the valid pixels (<= 0: none)
	ldl	$1, T_ROW($31)
	ldl	$2, JOB + J_PR($31)
	subl	$1, $2, $20              # ir for r = 0
	ldl	$21, JOB + J_IN_BUF($31) # the row in LDM
	ldl	$22, JOB + J_RI($31)
	ldl	$1, T_B($31)
	mull	$1, $22, $23
	addl	$23, $20, $23            # b R_i + ir
	ldl	$1, JOB + J_CI($31)
	mull	$23, $1, $23
	addl	$23, $14, $23
	ldl	$1, JOB + J_CH($31)
	mull	$23, $1, $23
	ldl	$1, JOB + J_ES($31)
	mull	$23, $1, $23
	ldl	$1, T_C0($31)
	addl	$23, $1, $23
	ldl	$1, JOB + J_SRC($31)
	addl	$23, $1, $23             # x address of (b, ir, lo, c0)
	ldl	$1, JOB + J_CI($31)
	ldl	$2, JOB + J_CH($31)
	mull	$1, $2, $1
	ldl	$2, JOB + J_ES($31)
	mull	$1, $2, $25              # bytes of an image row
	ldi	$18, REPLY
	ldi	$24, DMA_GET
	ldi	$28, 4
.Lin_row:
	addl	$21, $12, $8             # end of the LDM row
	cmplt	$20, $31, $1
	cmplt	$20, $22, $2
	cmpeq	$2, 0, $2
	bis	$1, $2, $1
	cmple	$17, $31, $2
	bis	$1, $2, $1
	beq	$1, .Lin_valid
	mov	$21, $3                  # a padding row: zero it, no DMA
	ZERO	$3, $8
	br	.Lin_next
.Lin_valid:
	mov	$21, $3
	addl	$21, $16, $4
	ZERO	$3, $4                   # the pad pixels before lo
	addl	$4, $17, $3
	ZERO	$3, $8                   # and after hi
	addl	$21, $16, $4
	ldl	$5, T_BLOCK($31)
	ldl	$6, T_SKIP($31)
	ISSUE	$24, $23, $4, $17, $5, $6
.Lin_next:
	addl	$21, $12, $21
	addl	$20, 1, $20
	addl	$23, $25, $23
	subl	$28, 1, $28
	bgt	$28, .Lin_row
	bsr	$26, dma_wait
	TILE_REGS
	addl	$28, $28, $2
	addl	$2, 2, $2
	mull	$2, $24, $21             # pitch: (2 m + 2) pix
	s4subl	$24, $24, $1             # 4 pix - pix = 3 pix
	subl	$21, $1, $21             # pitch - 3 pix
	DISPATCH INPUT_LOOP
	ldi	$1, DMA_PUT
	bsr	$26, xi_dma
	bsr	$26, dma_wait
	br	.Lnext_task

# ---- OP_OUTPUT: the 16 m tile vectors of M in, A^T m A + bias, 2 rows of 2m pixels out ----
.Loutput:
	ldl	$1, JOB + J_BIAS($31)    # the block's bias
	ldl	$2, T_C0($31)
	addl	$1, $2, $1
	ldl	$2, JOB + J_BIAS_BUF($31)
	ldl	$3, T_PIX($31)
	MAKE_DESC $4, DMA_GET, 0($3), REPLY
	dma	$4, $1, $2
	ldl	$29, NDMA($31)
	addl	$29, 1, $29
	stl	$29, NDMA($31)
	ldi	$1, DMA_GET
	bsr	$26, xi_dma
	bsr	$26, dma_wait
	TILE_REGS
	DISPATCH OUTPUT_LOOP
	stl	$31, NDMA($31)
	stw	$31, REPLY($31)
	# put the rows r < 2 with 2 tr + r < R_o, their columns 2 tc0 + c < C_o
	ldl	$1, JOB + J_DST($31)
	ldl	$21, JOB + J_OUT_BUF($31)
	bsr	$26, pixel_rows
	ldi	$24, DMA_PUT
.Lout_row:
	cmplt	$20, $22, $1
	beq	$1, .Lout_done
	ROW_ISSUE
	addl	$21, $12, $21
	addl	$20, 1, $20
	addl	$23, $25, $23
	subl	$28, 1, $28
	bgt	$28, .Lout_row
.Lout_done:
	bsr	$26, dma_wait
	br	.Lnext_task

# ---- OP_DY: 2 rows of 2m pixels of dy in (zeros past R_o, C_o), A d A^T, 16 m vectors out --
.Ldy:
	ldl	$1, JOB + J_SRC($31)
	ldl	$21, JOB + J_IN_BUF($31)
	bsr	$26, pixel_rows
	ldi	$24, DMA_GET
.Ldy_row:
	addl	$21, $12, $8             # end of the LDM row
	cmplt	$20, $22, $1
	bne	$1, .Ldy_valid
	mov	$21, $3                  # past R_o: zeros, no DMA
	ZERO	$3, $8
	br	.Ldy_next
.Ldy_valid:
	addl	$21, $17, $3             # the columns past C_o
	ZERO	$3, $8
	ble	$17, .Ldy_next
	ROW_ISSUE
.Ldy_next:
	addl	$21, $12, $21
	addl	$20, 1, $20
	addl	$23, $25, $23
	subl	$28, 1, $28
	bgt	$28, .Ldy_row
	bsr	$26, dma_wait
	TILE_REGS
	DISPATCH DY_LOOP
	ldi	$1, DMA_PUT
	bsr	$26, xi_dma
	bsr	$26, dma_wait
	br	.Lnext_task

# ---- OP_FILTER: a BO x BI block of 3 x 3 filters in, G g G^T, 16 slices of U out --------
.Lfilter:
	DIVMOD	$9, J_NCB, J_NCB_INV, $10, $11   # $10 = o block, $11 = i block
	ldl	$12, JOB + J_M($31)
	mull	$10, $12, $10            # o0
	ldl	$1, JOB + J_P($31)
	subl	$1, $10, $1
	MIN	$1, $12, $12             # bo
	ldl	$13, JOB + J_CB($31)
	mull	$11, $13, $11            # i0
	ldl	$1, JOB + J_CH($31)
	subl	$1, $11, $1
	MIN	$1, $13, $13             # bi
	stl	$10, T_B($31)            # keep o0, i0, bo, bi
	stl	$11, T_ROW($31)
	stl	$12, T_COL($31)
	stl	$13, T_MT($31)
	ldl	$1, JOB + J_OP($31)
	cmpeq	$1, OP_DW, $1
	bne	$1, .Ldw
	ldi	$1, DMA_GET
	bsr	$26, w_dma
	bsr	$26, dma_wait
	# the LDM output U_blk[xi][k][n]: (k, n) = (i, o) or, rotated, (o, i)
	ldl	$14, JOB + J_ES($31)
	ldl	$15, JOB + J_ROT($31)
	mull	$12, $14, $1             # bo es
	mull	$13, $14, $2             # bi es
	selne	$15, $2, $14, $16        # o step in LDM: rotated bi es, else es
	seleq	$15, $1, $14, $17        # i step: rotated es, else bo es
	mull	$12, $13, $18
	mull	$18, $14, $18            # xi step: bo bi es
	ldl	$20, JOB + J_IN_BUF($31) # the filter (o, i) in LDM
	ldl	$21, JOB + J_OUT_BUF($31) # U_blk of o
	mull	$14, 9, $1
	stl	$1, F_STEP($31)
	stl	$16, F_OSTEP($31)
	mov	$17, $25                 # i step
	mov	$18, $27                 # xi step
	subl	$31, $14, $23            # load step: rotated -es from the last element
	s8addl	$14, $31, $22
	seleq	$15, $14, $23, $23
	seleq	$15, $31, $22, $22
	mov	$13, $17                 # bi
	mov	$12, $28                 # bo
	fldd	$18, HALF($31)
	cmpeq	$14, 4, $1
	bne	$1, .Lfilter_s
	FILTER_LOOP fldd, fstd
	br	.Lfilter_put
.Lfilter_s:
	FILTER_LOOP flds, fsts
.Lfilter_put:
	ldi	$1, DMA_PUT
	bsr	$26, u_dma
	bsr	$26, dma_wait
	br	.Lnext_task

# ---- OP_DW: 16 slices of dU in, G^T u G, a BO x BI block of 3 x 3 filter gradients out ----
.Ldw:
	ldi	$1, DMA_GET
	bsr	$26, u_dma
	bsr	$26, dma_wait
	ldl	$14, JOB + J_ES($31)
	ldl	$12, T_COL($31)
	ldl	$13, T_MT($31)
	mull	$12, $14, $25            # i step in U_blk: bo es
	mull	$25, $13, $27            # xi step: bo bi es
	stl	$14, F_OSTEP($31)        # o step: es
	ldl	$20, JOB + J_IN_BUF($31) # the gradients, [o][i][9]
	ldl	$21, JOB + J_OUT_BUF($31)
	mov	$13, $17
	mov	$12, $28
	fldd	$18, HALF($31)
	cmpeq	$14, 4, $1
	bne	$1, .Ldw_s
	DW_LOOP	fldd, fstd, 8
	br	.Ldw_put
.Ldw_s:
	DW_LOOP	flds, fsts, 4
.Ldw_put:
	ldi	$1, DMA_PUT
	bsr	$26, w_dma
	bsr	$26, dma_wait
.Lnext_task:
	ldl	$9, TASK($31)
	addl	$9, NUM_CPES, $9
	br	.Ltask
.Lreturn:
	ldl	$26, RET($31)
	ret
	.end	winograd

# task_geometry: OP_INPUT / OP_OUTPUT task $9 -> T_* (LDM). Clobbers $1-$8, $29.
	.ent	task_geometry
task_geometry:
	DIVMOD	$9, J_NCB, J_NCB_INV, $1, $2     # $2 = channel block
	DIVMOD	$1, J_GROUPS, J_GROUPS_INV, $3, $4   # $3 = tile row (b TR + tr), $4 = group
	DIVMOD	$3, J_TR, J_TR_INV, $5, $6       # $5 = b, $6 = tr
	stl	$5, T_B($31)
	addl	$6, $6, $6
	stl	$6, T_ROW($31)
	ldl	$7, JOB + J_M($31)
	mull	$4, $7, $4               # tc0
	addl	$4, $4, $8
	stl	$8, T_COL($31)
	ldl	$8, JOB + J_TC($31)
	mull	$3, $8, $5
	addl	$5, $4, $5
	stl	$5, T_P0($31)
	subl	$8, $4, $8
	MIN	$8, $7, $8
	stl	$8, T_MT($31)            # m = min(M, TC - tc0)
	ldl	$7, JOB + J_CB($31)
	mull	$2, $7, $2               # c0
	ldl	$8, JOB + J_CH($31)
	subl	$8, $2, $5
	MIN	$5, $7, $5               # ncv
	ldl	$6, JOB + J_ES($31)
	mull	$2, $6, $2
	stl	$2, T_C0($31)
	mull	$5, $6, $7
	stl	$7, T_PIX($31)
	subl	$8, $5, $8
	mull	$8, $6, $8
	stl	$8, T_SKIP($31)
	selne	$8, $7, $31, $7          # whole pixels: contiguous
	stl	$7, T_BLOCK($31)
	ret
	.end	task_geometry

# channel_steps: $25 = channel steps per pixel (pix / 16 or 32 with vectors, else pix / es).
# Clobbers $1, $2.
	.ent	channel_steps
channel_steps:
	ldl	$1, JOB + J_ES($31)
	ldl	$2, JOB + J_VEC($31)
	beq	$2, 1f
	s4addl	$1, $31, $1
1:	ldl	$2, T_PIX($31)
	mov	$31, $25
2:	subl	$2, $1, $2
	addl	$25, 1, $25
	bgt	$2, 2b
	ret
	.end	channel_steps

# xi_dma: the 16 m tile vectors between OUT (OP_INPUT, OP_DY: a put, $1 = DMA_PUT) or IN
# (OP_OUTPUT: a get) and V / M / Z, as slices_dma moves them. Clobbers $1-$7, $16-$19, $29.
	.ent	xi_dma
xi_dma:
	ldl	$2, JOB + J_ES($31)
	ldl	$3, JOB + J_CH($31)
	mull	$2, $3, $3               # bytes of a tile vector in memory
	ldl	$4, T_P0($31)
	mull	$4, $3, $4
	ldl	$5, T_C0($31)
	addl	$4, $5, $4
	ldl	$5, JOB + J_DST($31)
	ldl	$6, JOB + J_SRC($31)
	cmpeq	$1, DMA_PUT, $7
	seleq	$7, $6, $5, $5
	addl	$4, $5, $4               # V / M address of (0, p0, c0)
	ldl	$5, JOB + J_OUT_BUF($31)
	ldl	$6, JOB + J_IN_BUF($31)
	seleq	$7, $6, $5, $5           # the LDM side
	ldl	$6, JOB + J_P($31)
	mull	$6, $3, $6               # xi step in memory: P N es
	ldl	$7, T_MT($31)
	ldl	$2, T_PIX($31)
	mull	$7, $2, $2               # m pix: an xi slice in LDM
	ldl	$16, T_BLOCK($31)
	ldl	$17, T_SKIP($31)
	br	slices_dma
	.end	xi_dma

# slices_dma: a task's 16 slices between LDM ($5, $2 bytes each, one after the other) and
# memory ($4, $6 bytes apart), $1 = DMA_GET or DMA_PUT: one DMA of 16 blocks when $16 = 0
# (each slice contiguous in memory), else 16 DMAs of blocks of $16 bytes, $17 bytes apart.
# Clobbers $3-$7, $17-$19, $29.
	.ent	slices_dma
slices_dma:
	ldi	$18, REPLY
	bne	$16, 2f
	subl	$6, $2, $17
	s4addl	$2, $31, $3
	s4addl	$3, $31, $3              # 16 slices
	ISSUE	$1, $4, $5, $3, $2, $17
	ret
2:	ldi	$7, XI
1:	ISSUE	$1, $4, $5, $2, $16, $17
	addl	$4, $6, $4
	addl	$5, $2, $5
	subl	$7, 1, $7
	bgt	$7, 1b
	ret
	.end	slices_dma

# pixel_rows: for OP_OUTPUT / OP_DY, the task's 2 image rows of 2m pixels (R_o x C_o) at
# $1 (y or dy) and $21 (the LDM rows): $12 LDM pitch (2 m pix), $17 bytes of a row's pixels
# inside C_o (<= 0: none), $20 the first row 2 tr, $22 R_o, $23 the memory address of (b, 2 tr,
# 2 tc0, c0), $25 bytes of an image row, $28 = 2 rows, $18 = REPLY. Clobbers $1-$6, $10-$14.
	.ent	pixel_rows
pixel_rows:
	mov	$1, $6
	ldl	$10, T_PIX($31)
	ldl	$1, T_MT($31)
	addl	$1, $1, $11
	mull	$11, $10, $12            # LDM pitch: 2 m pix
	ldl	$13, T_COL($31)
	ldl	$1, JOB + J_CI($31)
	subl	$1, $13, $14
	MIN	$14, $11, $14
	mull	$14, $10, $17            # bytes per row
	ldl	$20, T_ROW($31)
	ldl	$1, T_B($31)
	ldl	$22, JOB + J_RI($31)
	mull	$1, $22, $23
	addl	$23, $20, $23
	ldl	$1, JOB + J_CI($31)
	mull	$23, $1, $23
	addl	$23, $13, $23
	ldl	$2, JOB + J_CH($31)
	mull	$23, $2, $23
	ldl	$3, JOB + J_ES($31)
	mull	$23, $3, $23
	ldl	$4, T_C0($31)
	addl	$23, $4, $23
	addl	$23, $6, $23             # address of (b, 2 tr, 2 tc0, c0)
	mull	$1, $2, $25
	mull	$25, $3, $25             # bytes of an image row
	ldi	$18, REPLY
	ldi	$28, 2
	ret
	.end	pixel_rows

# w_dma: the block's filters between IN_BUF and w (OP_FILTER: a get from SRC, $1 = DMA_GET;
# OP_DW: a put to DST): bo rows of 9 bi elements, 9 (N_i - bi) apart (contiguous when bi =
# N_i). Clobbers $1-$7, $18, $19, $29.
	.ent	w_dma
w_dma:
	ldl	$2, JOB + J_ES($31)
	ldl	$3, JOB + J_CH($31)
	ldl	$4, T_B($31)
	mull	$4, $3, $4
	ldl	$5, T_ROW($31)
	addl	$4, $5, $4
	mull	$4, $2, $4
	s8addl	$4, $4, $4               # 9 (o0 N_i + i0) es
	ldl	$5, JOB + J_SRC($31)
	ldl	$6, JOB + J_DST($31)
	cmpeq	$1, DMA_PUT, $7
	seleq	$7, $5, $6, $5
	addl	$4, $5, $4
	ldl	$5, T_MT($31)
	subl	$3, $5, $3
	s8addl	$3, $3, $3
	mull	$3, $2, $3               # skip: 9 (N_i - bi) es
	s8addl	$5, $5, $5
	mull	$5, $2, $5               # block: 9 bi es
	ldl	$6, T_COL($31)
	mull	$6, $5, $6               # size
	selne	$3, $5, $31, $5          # no skip: contiguous
	ldl	$7, JOB + J_IN_BUF($31)
	ldi	$18, REPLY
	ISSUE	$1, $4, $7, $6, $5, $3
	ret
	.end	w_dma

# u_dma: the block's 16 slices U[xi][k0 + k][n0 + n] between OUT_BUF and U (OP_FILTER: a put
# to DST, $1 = DMA_PUT; OP_DW: a get from SRC), (k, n) = (i, o), rotated (o, i), as slices_dma
# moves them: bk rows of bn elements, one DMA when they are whole rows of U (bn = NN).
# Clobbers $1-$7, $10-$17, $18, $19, $29.
	.ent	u_dma
u_dma:
	ldl	$14, JOB + J_ES($31)
	ldl	$15, JOB + J_ROT($31)
	ldl	$10, T_B($31)            # o0
	ldl	$11, T_ROW($31)          # i0
	ldl	$12, T_COL($31)          # bo
	ldl	$13, T_MT($31)           # bi
	ldl	$2, JOB + J_P($31)       # N_o
	ldl	$3, JOB + J_CH($31)      # N_i
	selne	$15, $10, $11, $4        # k0
	selne	$15, $11, $10, $5        # n0
	selne	$15, $3, $2, $16         # NN
	selne	$15, $13, $12, $17       # bn
	mull	$2, $3, $6
	mull	$6, $14, $6              # xi step in U: NK NN es
	mull	$4, $16, $4
	addl	$4, $5, $4
	mull	$4, $14, $4
	ldl	$5, JOB + J_DST($31)
	ldl	$7, JOB + J_SRC($31)
	cmpeq	$1, DMA_PUT, $2
	seleq	$2, $7, $5, $5
	addl	$4, $5, $4               # U address of (0, k0, n0)
	mull	$12, $13, $2
	mull	$2, $14, $2              # an xi slice: bo bi es
	ldl	$5, JOB + J_OUT_BUF($31)
	subl	$16, $17, $3
	mull	$3, $14, $3              # skip: (NN - bn) es
	mull	$17, $14, $16            # block: bn es
	seleq	$3, $31, $16, $16        # bn = NN: whole rows
	mov	$3, $17
	br	slices_dma
	.end	u_dma

# dma_wait: spin until the NDMA DMAs issued since the task began have replied. Clobbers $29, $1.
	.ent	dma_wait
dma_wait:
	ldl	$1, NDMA($31)
1:	ldw	$29, REPLY($31)
	cmplt	$29, $1, $29
	bne	$29, 1b
	ret
	.end	dma_wait
