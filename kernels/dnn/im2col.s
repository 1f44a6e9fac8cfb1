# im2col and col2im of explicit GEMM convolution (thesis §5.1.1, Fig. 5.4; docs/dnn.md
# "Convolution"). hostlib/dnn/conv/__init__.py is the host side.
#
# Image x: planes of R_i x C_i elements (rows of C_i contiguous), plane q = o INNER + i at
# x + o X_OUTER + i X_INNER; explicit convolution passes x as CNHW (N_i, B, R_i, C_i): o = c
# the channel, i = b the image, INNER = B (or a chunk of the batch, X_OUTER stepping over the
# whole batch). col: rows (c, kr, kc), each of B P elements ordered (b, r_o, c_o)
# with P = R_o C_o: col[(c, kr, kc)][(b, r_o, c_o)] = xpad[c, b, r_o s_r + kr, c_o s_c + kc],
# xpad the planes zero-padded by (p_r, p_c): one K x (B P) matrix for the whole batch (the
# thesis' batch layout trick, one GEMM for all images). The host gives the byte strides: row
# (o, kr, kc) of plane q starts at col + o COL_OUTER + i COL_INNER + (kr K_c + kc) COL_PITCH
# (COL_OUTER = K_r K_c COL_PITCH, COL_INNER = P es, COL_PITCH = B P es).
#
# A task is a group of G consecutive input rows i0 .. i0+n-1 of one plane q (the thesis' one
# input row per task is G = 1; the host takes G as large as LDM allows, so col is written in
# long runs of whole 128-byte lines). Task t runs on CPE t mod 64. Input row r_i feeds output
# row r_o through kernel row kr when r_i + p_r = r_o s_r + kr: for each kr the group feeds a
# run of output rows lo..hi, and for each kc a contiguous run of (hi - lo + 1) C_o elements of
# col row (o, kr, kc); the K_c runs, COL_PITCH bytes apart, are one strided DMA.
#   OP_IM2COL: get the n rows (one DMA each) into ROW_BUF, one padded row of ROW_LEN elements
#     each at offset p_c (the pad columns are zeroed once and never written); for each kr
#     select ROW_BUF[row][c_o s_c + kc] into COL_BUF (K_c runs) and put it. Pad rows of col are
#     never written: the host allocates col zeroed, so padding costs no DMA.
#   OP_COL2IM: zero ROW_BUF, for each kr get the K_c runs of col and add them into
#     ROW_BUF[row][c_o s_c + kc] in (kr, r_o, kc, c_o) order, then pack the n rows' C_i
#     elements into PACK_BUF and put them (one contiguous DMA). Every image row belongs to
#     exactly one task, so the sums need no locking.
# Divisions by the groups per plane and by s_r are multiplications by ceil(2^32 / d) (exact
# below 2^32 / d; the host checks the sizes). DMAs are synchronous: a CPE waits for its
# transfers before it goes on. Planes are split into outer and inner index by the
# reciprocal of INNER the same way.
#
# Argument: a0 = the job (JOB_BYTES in main memory, int64 fields J_*).

	.set	noreorder
	.include "../include/dma.inc"

	J_OP = 0              # OP_IM2COL or OP_COL2IM
	J_ES = 8              # element bytes: 4 (float32) or 8 (float64)
	J_X = 16              # the image (read by im2col, written by col2im)
	J_COL = 24            # col (written by im2col, read by col2im)
	J_TASKS = 32          # B N_i GROUPS
	J_GROUP = 40          # G: input rows per task
	J_GROUPS = 48         # tasks per plane: ceil(R_i / G)
	J_GROUPS_INV = 56     # ceil(2^32 / GROUPS)
	J_RI = 64
	J_CI = 72
	J_RO = 80
	J_CO = 88
	J_KR = 96
	J_KC = 104
	J_SR = 112            # strides
	J_SC = 120
	J_SR_INV = 128        # ceil(2^32 / s_r)
	J_PR = 136            # padding
	J_PC = 144
	J_ROW_BUF = 152       # LDM: G padded rows of ROW_LEN elements
	J_ROW_LEN = 160       # a multiple of 8 bytes
	J_COL_BUF = 168       # LDM: K_c runs of at most ceil(G / s_r) C_o elements
	J_PACK_BUF = 176      # LDM: G C_i elements (col2im)
	J_INNER = 184         # planes per outer index
	J_INNER_INV = 192     # ceil(2^32 / INNER)
	J_COL_OUTER = 200     # col bytes per outer index
	J_COL_INNER = 208     # col bytes per inner index
	J_COL_PITCH = 216     # col bytes from one row (c, kr, kc) to the next
	J_X_OUTER = 224       # x bytes per outer index
	J_X_INNER = 232       # x bytes per inner index (a plane's, or more)
	JOB_BYTES = 240

	OP_IM2COL = 0
	OP_COL2IM = 1
	REQ_MESH_ROWS = 8     # checked at launch: tasks are dealt NUM_CPES apart
	REQ_MESH_COLS = 8
	NUM_CPES = REQ_MESH_ROWS * REQ_MESH_COLS

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
REPLY:	.word	0
	.align	3
RET:	.quad	0             # return address
X_ROWS:	.quad	0             # the task's first row in memory
NROWS:	.quad	0             # its rows n
	.globl	im2col_ldm_end        # the host places the buffers from here up
im2col_ldm_end:

	.text

# ROW_COL ld, st, es, sum[, add]: for kc < K_c, c_o < C_o, with row = $8[c_o s_c + kc] (a
# padded row of ROW_BUF) and run = $24[kc run_pitch + c_o], run_pitch = $25 bytes:
# sum = 0: run = row (im2col's selection); sum = 1: row = row add run (col2im's sums).
# Clobbers $0-$7.
	.macro	ROW_COL ld, st, es, sum, add=faddd
	mov	$8, $1                   # row + kc es
	mov	$24, $0                  # the run of kc
	ldl	$3, JOB + J_KC($31)
1:	mov	$1, $4
	mov	$0, $2
	ldl	$5, JOB + J_CO($31)
2:	\ld	$6, 0($4)
	.if	\sum
	\ld	$7, 0($2)
	\add	$6, $7, $6
	\st	$6, 0($4)
	.else
	\st	$6, 0($2)
	.endif
	addl	$4, $13, $4
	addl	$2, \es, $2
	subl	$5, 1, $5
	bgt	$5, 2b
	addl	$1, \es, $1
	addl	$0, $25, $0
	subl	$3, 1, $3
	bgt	$3, 1b
	.endm

# SELECTIONS sum: ROW_COL for the output rows r = lo ($18) .. lo + $19 - 1: input row
# r s_r - a of ROW_BUF, run offset (r - lo) C_o es from $24. Clobbers $0-$8, $20, $23, $24.
	.macro	SELECTIONS sum
	mov	$18, $20
	mov	$19, $23
3:	ldl	$1, JOB + J_SR($31)
	mull	$20, $1, $1
	subl	$1, $16, $1
	mull	$1, $15, $1
	ldl	$8, JOB + J_ROW_BUF($31)
	addl	$8, $1, $8
	cmpeq	$10, 4, $1
	bne	$1, 4f
	.if	\sum
	ROW_COL fldd, fstd, 8, 1, faddd
	.else
	ROW_COL ldl, stl, 8, 0
	.endif
	br	5f
4:
	.if	\sum
	ROW_COL flds, fsts, 4, 1, fadds
	.else
	ROW_COL ldw, stw, 4, 0
	.endif
5:	addl	$24, $12, $24
	addl	$20, 1, $20
	subl	$23, 1, $23
	bgt	$23, 3b
	.endm

# PLANE_OFFSET dst, outer, inner: dst = o JOB.outer + i JOB.inner (o in $1, i in $2; the
# fields are byte strides). Clobbers $3.
	.macro	PLANE_OFFSET dst, outer, inner
	ldl	$3, JOB + \outer($31)
	mull	$1, $3, \dst
	ldl	$3, JOB + \inner($31)
	mull	$2, $3, $3
	addl	\dst, $3, \dst
	.endm

# ZERO from, to: zero LDM [from, to) in 8-byte steps (from < to). Clobbers from, $29.
	.macro	ZERO from, to
1:	stl	$31, 0(\from)
	addl	\from, 8, \from
	cmplt	\from, \to, $29
	bne	$29, 1b
	.endm

# ROW_DMAS op, mem, ldm, mem_step, ldm_step: n ($28 counts down) transfers of C_i elements,
# then wait for all of them. Clobbers $1-$5, $28, $29 and the address registers.
	.macro	ROW_DMAS op, mem, ldm, mem_step, ldm_step
	ldl	$2, JOB + J_CI($31)
	mull	$2, $10, $2
	MAKE_DESC $1, \op, 0($2), REPLY
	stw	$31, REPLY($31)
	ldl	$28, NROWS($31)
	mov	$28, $5
1:	dma	$1, \mem, \ldm
	addl	\mem, \mem_step, \mem
	addl	\ldm, \ldm_step, \ldm
	subl	$28, 1, $28
	bgt	$28, 1b
2:	ldw	$29, REPLY($31)
	cmplt	$29, $5, $29
	bne	$29, 2b
	.endm

	.globl	im2col
	.ent	im2col
# Registers through the task loop: $9 t, $10 es, $11 COL_PITCH, $12 C_o es, $13 s_c es, $14 op,
# $15 ROW_LEN es (the row pitch in LDM), $17 plane q, $22 col rows (q, 0, 0).
# Through the kr loop: $16 a = i0 + p_r - kr, $18 lo, $19 runs' rows, $21 kr, $25 run pitch.
im2col:
	stl	$26, RET($31)
	FETCH_JOB $1, $2, REPLY
	ldl	$10, JOB + J_ES($31)
	ldl	$14, JOB + J_OP($31)
	ldl	$11, JOB + J_COL_PITCH($31)
	ldl	$12, JOB + J_CO($31)
	mull	$12, $10, $12            # C_o es
	ldl	$13, JOB + J_SC($31)
	mull	$13, $10, $13            # s_c es
	ldl	$15, JOB + J_ROW_LEN($31)
	mull	$15, $10, $15            # row pitch
	rcid	$9
.Ltask:
	ldl	$1, JOB + J_TASKS($31)
	cmplt	$9, $1, $1
	beq	$1, .Lreturn
	ldl	$1, JOB + J_GROUPS_INV($31)
	mull	$9, $1, $1
	srl	$1, 32, $17              # q = t / GROUPS
	ldl	$2, JOB + J_GROUPS($31)
	mull	$17, $2, $2
	subl	$9, $2, $2               # the group in its plane
	ldl	$3, JOB + J_GROUP($31)
	mull	$2, $3, $20              # i0
	ldl	$4, JOB + J_RI($31)
	subl	$4, $20, $5
	cmplt	$5, $3, $6
	selne	$6, $5, $3, $5           # n = min(G, R_i - i0)
	stl	$5, NROWS($31)
	ldl	$1, JOB + J_INNER_INV($31)
	mull	$17, $1, $1
	srl	$1, 32, $1               # o = q / INNER
	ldl	$2, JOB + J_INNER($31)
	mull	$1, $2, $2
	subl	$17, $2, $2              # i = q - o INNER
	PLANE_OFFSET $6, J_X_OUTER, J_X_INNER
	ldl	$7, JOB + J_CI($31)
	mull	$20, $7, $7
	mull	$7, $10, $7
	addl	$6, $7, $6
	ldl	$7, JOB + J_X($31)
	addl	$6, $7, $6
	stl	$6, X_ROWS($31)          # x + o X_OUTER + i X_INNER + i0 C_i es
	PLANE_OFFSET $22, J_COL_OUTER, J_COL_INNER
	ldl	$3, JOB + J_COL($31)
	addl	$22, $3, $22             # col rows (q, 0, 0)
	ldl	$1, JOB + J_PR($31)
	addl	$20, $1, $16             # a for kr = 0
	ldl	$3, JOB + J_ROW_BUF($31)
	mull	$5, $15, $4
	addl	$3, $4, $4               # end of the task's rows in ROW_BUF
	bne	$14, .Lzero_sums
	# im2col: get the rows (ROW_BUF's pad columns are zeroed at this CPE's first task)
	cmplt	$9, NUM_CPES, $5
	beq	$5, .Lget_rows
	ldl	$4, JOB + J_GROUP($31)
	mull	$4, $15, $4
	addl	$3, $4, $4
	ZERO	$3, $4
.Lget_rows:
	ldl	$6, X_ROWS($31)
	ldl	$7, JOB + J_PC($31)
	mull	$7, $10, $7
	ldl	$8, JOB + J_ROW_BUF($31)
	addl	$8, $7, $8
	ldl	$0, JOB + J_CI($31)
	mull	$0, $10, $0
	ROW_DMAS DMA_GET, $6, $8, $0, $15
	br	.Lkr_first
.Lzero_sums:
	ZERO	$3, $4                   # col2im: zero the sums
.Lkr_first:
	mov	$31, $21
.Lkr:
	# the output rows lo..hi fed: lo = ceil(max(a, 0) / s_r), hi = min(R_o - 1,
	# floor((a + n - 1) / s_r)); none when a + n - 1 < 0
	ldl	$1, NROWS($31)
	addl	$16, $1, $2
	subl	$2, 1, $2
	blt	$2, .Lnext_kr
	ldl	$3, JOB + J_SR_INV($31)
	mull	$2, $3, $2
	srl	$2, 32, $2               # hi before the clamp
	ldl	$4, JOB + J_RO($31)
	subl	$4, 1, $4
	cmplt	$2, $4, $5
	seleq	$5, $4, $2, $2
	ldl	$5, JOB + J_SR($31)
	sellt	$16, $31, $16, $6
	addl	$6, $5, $6
	subl	$6, 1, $6
	mull	$6, $3, $6
	srl	$6, 32, $18              # lo
	subl	$2, $18, $19
	addl	$19, 1, $19              # runs' rows
	ble	$19, .Lnext_kr
	mull	$19, $12, $25            # run pitch: rows C_o es
	ldl	$24, JOB + J_COL_BUF($31)
	bne	$14, .Lgather
	SELECTIONS 0
	bsr	$26, col_dma
	br	.Lnext_kr
.Lgather:
	bsr	$26, col_dma
	SELECTIONS 1
.Lnext_kr:
	ldl	$1, JOB + J_KR($31)
	addl	$21, 1, $21
	subl	$16, 1, $16
	cmplt	$21, $1, $1
	bne	$1, .Lkr
	beq	$14, .Lnext_task
	# col2im: pack the rows' C_i sums (4-byte words) into PACK_BUF and put them
	ldl	$1, JOB + J_PC($31)
	mull	$1, $10, $1
	ldl	$2, JOB + J_ROW_BUF($31)
	addl	$2, $1, $2               # row
	ldl	$3, JOB + J_PACK_BUF($31)
	ldl	$4, JOB + J_CI($31)
	mull	$4, $10, $4
	srl	$4, 2, $4                # words per row
	ldl	$5, NROWS($31)
1:	mov	$2, $6
	mov	$4, $7
2:	ldw	$0, 0($6)
	addl	$6, 4, $6
	subl	$7, 1, $7
	stw	$0, 0($3)
	addl	$3, 4, $3
	bgt	$7, 2b
	addl	$2, $15, $2
	subl	$5, 1, $5
	bgt	$5, 1b
	ldl	$2, JOB + J_CI($31)
	mull	$2, $10, $2
	ldl	$1, NROWS($31)
	mull	$2, $1, $2
	MAKE_DESC $1, DMA_PUT, 0($2), REPLY
	ldl	$6, X_ROWS($31)
	ldl	$7, JOB + J_PACK_BUF($31)
	DMA_WAIT $1, $6, $7, REPLY
.Lnext_task:
	addl	$9, NUM_CPES, $9
	br	.Ltask
.Lreturn:
	ldl	$26, RET($31)
	ret
	.end	im2col

# col_dma: the K_c runs of kr ($21) from output row lo ($18), $25 bytes each, between col and
# COL_BUF: a put for im2col, a get for col2im; waits for it. Clobbers $1-$5, $29.
	.ent	col_dma
col_dma:
	ldl	$1, JOB + J_KC($31)
	mull	$1, $25, $2
	vinsw	$2, $31, DESC_SIZE, $1
	subl	$11, $25, $2
	vinsw	$2, $1, DESC_STRIDE, $1
	ldi	$2, REPLY
	vinsw	$2, $1, DESC_REPLY, $1
	ldih	$2, (DMA_PUT << (DESC_OP_SHIFT - 16))($31)
	ldih	$5, (DMA_GET << (DESC_OP_SHIFT - 16))($31)
	cmpeq	$14, OP_IM2COL, $3
	seleq	$3, $5, $2, $2           # im2col puts col, col2im gets it
	addl	$2, $25, $2              # the op | the block size ($25)
	vinsw	$2, $1, DESC_CTRL, $1
	ldl	$3, JOB + J_KC($31)
	mull	$21, $3, $3
	mull	$3, $11, $3
	addl	$22, $3, $3
	mull	$18, $12, $4
	addl	$3, $4, $3               # col rows (q, kr, 0), column (lo, 0)
	ldl	$4, JOB + J_COL_BUF($31)
	DMA_WAIT $1, $3, $4, REPLY
	ret
	.end	col_dma
