# im2col and col2im of explicit GEMM convolution (thesis §5.1.1, Fig. 5.4; docs/dnn.md
# "Convolution"). hostlib/dnn/conv.py is the host side.
#
# Image x: (B, N_i, R_i, C_i), rows of C_i contiguous elements. col: per image b a K x P
# row-major matrix, K = N_i K_r K_c rows ordered (c, kr, kc), P = R_o C_o columns ordered
# (r_o, c_o): col[b][(c, kr, kc)][(r_o, c_o)] = xpad[b, c, r_o s_r + kr, c_o s_c + kc] with xpad
# the image zero-padded by (p_r, p_c). So the rows (b, c, kr, 0..K_c-1) of col start at
# ((bc K_r + kr) K_c) P elements, bc = b N_i + c: N_i itself is never needed.
#
# One task per input row t = (bc, r_i) (thesis: one input image row per task); task t runs on
# CPE t mod 64. The input row r_i feeds output row r_o through kernel row kr when
# r_i + p_r = r_o s_r + kr.
#   OP_IM2COL: get the row (C_i contiguous elements) into ROW_BUF at offset p_c, whose pad
#     columns stay zero; for each (kr, r_o) it feeds, copy the K_c strided selections
#     ROW_BUF[c_o s_c + kc] into COL_BUF (K_c x C_o) and put them with one strided DMA (K_c
#     blocks of C_o elements, P apart). Pad rows of col are never written: the host allocates
#     col zeroed, so padding costs no DMA.
#   OP_COL2IM: zero ROW_BUF, for each (kr, r_o) get the K_c x C_o block of col (one strided
#     DMA) and add it into ROW_BUF[c_o s_c + kc] in (kr, kc, c_o) order, then put the row's C_i
#     elements. Every image row belongs to exactly one task, so the sums need no locking.
# Divisions by R_i and s_r are multiplications by ceil(2^32 / d) (exact below 2^32 / d; the
# host checks the sizes). DMAs are synchronous: a CPE waits for each of its transfers.
#
# Argument: a0 = the job (JOB_BYTES in main memory, int64 fields J_*).

	.set	noreorder
	.include "../include/dma.inc"

	J_OP = 0              # OP_IM2COL or OP_COL2IM
	J_ES = 8              # element bytes: 4 (float32) or 8 (float64)
	J_X = 16              # the image (read by im2col, written by col2im)
	J_COL = 24            # col (written by im2col, read by col2im)
	J_TASKS = 32          # input rows: B N_i R_i
	J_RI = 40
	J_RI_INV = 48         # ceil(2^32 / R_i)
	J_CI = 56
	J_RO = 64
	J_CO = 72
	J_KR = 80
	J_KC = 88
	J_SR = 96             # strides
	J_SC = 104
	J_SR_INV = 112        # ceil(2^32 / s_r)
	J_PR = 120            # padding
	J_PC = 128
	J_ROW_BUF = 136       # LDM: the padded row, ROW_LEN elements
	J_ROW_LEN = 144
	J_COL_BUF = 152       # LDM: K_c x C_o elements
	JOB_BYTES = 160

	OP_IM2COL = 0
	OP_COL2IM = 1
	NUM_CPES = 64

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
REPLY:	.word	0
	.globl	im2col_ldm_end        # the host places ROW_BUF and COL_BUF from here up
im2col_ldm_end:

	.text

# ROW_COL ld, st, es, sum[, add]: for kc < K_c, c_o < C_o, with row = ROW_BUF[c_o s_c + kc] and
# block = COL_BUF[kc C_o + c_o] ($24): sum = 0: block = row (im2col's selection); sum = 1:
# row = row add block (col2im's sums). Clobbers $1-$7.
	.macro	ROW_COL ld, st, es, sum, add=faddd
	ldl	$1, JOB + J_ROW_BUF($31) # ROW_BUF + kc es
	mov	$24, $2
	ldl	$3, JOB + J_KC($31)
1:	mov	$1, $4
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
	subl	$3, 1, $3
	bgt	$3, 1b
	.endm

	.globl	im2col
	.ent	im2col
# Registers through the task loop: $9 t, $10 es, $11 P es, $12 C_o es, $13 s_c es,
# $14 op, $15 ROW_BUF + p_c es (the image row in LDM), $16 the descriptor of the col DMAs.
im2col:
	MAKE_DESC $1, DMA_GET, JOB_BYTES, REPLY
	ldi	$2, JOB
	DMA_WAIT $1, $16, $2, REPLY
	ldl	$10, JOB + J_ES($31)
	ldl	$14, JOB + J_OP($31)
	ldl	$1, JOB + J_RO($31)
	ldl	$12, JOB + J_CO($31)
	mull	$1, $12, $11
	mull	$11, $10, $11            # P es
	mull	$12, $10, $12            # C_o es
	ldl	$13, JOB + J_SC($31)
	mull	$13, $10, $13            # s_c es
	ldl	$15, JOB + J_PC($31)
	mull	$15, $10, $15
	ldl	$1, JOB + J_ROW_BUF($31)
	addl	$15, $1, $15
	# the col DMAs: K_c blocks of C_o elements, P elements apart
	ldl	$2, JOB + J_KC($31)
	mull	$2, $12, $2
	vinsw	$2, $31, DESC_SIZE, $16
	vinsw	$12, $16, DESC_BLOCK, $16
	subl	$11, $12, $2
	vinsw	$2, $16, DESC_STRIDE, $16
	ldi	$2, REPLY
	vinsw	$2, $16, DESC_REPLY, $16
	ldi	$2, DMA_PUT
	cmpeq	$14, OP_IM2COL, $3
	seleq	$3, DMA_GET, $2, $2      # im2col puts col, col2im gets it
	vinsw	$2, $16, DESC_OP, $16
	rcid	$9
.Ltask:
	ldl	$1, JOB + J_TASKS($31)
	cmplt	$9, $1, $1
	beq	$1, .Lreturn
	ldl	$1, JOB + J_RI_INV($31)
	mull	$9, $1, $1
	srl	$1, 32, $17              # bc = t / R_i
	ldl	$2, JOB + J_RI($31)
	mull	$17, $2, $2
	subl	$9, $2, $18              # r_i
	ldl	$2, JOB + J_CI($31)
	mull	$2, $10, $2              # C_i es: the row's bytes
	mull	$9, $2, $19
	ldl	$3, JOB + J_X($31)
	addl	$19, $3, $19             # the row in memory
	ldl	$3, JOB + J_ROW_BUF($31)
	ldl	$4, JOB + J_ROW_LEN($31)
	mull	$4, $10, $4
	addl	$3, $4, $4               # ROW_BUF end
	bne	$14, .Lzero_sums
	# im2col: get the row (ROW_BUF's pad columns are zeroed at this CPE's first task)
	cmplt	$9, NUM_CPES, $5
	beq	$5, .Lget_row
.Lzero_row:
	stl	$31, 0($3)               # 8-byte steps: ROW_BUF is a whole number of vectors
	addl	$3, 8, $3
	cmplt	$3, $4, $5
	bne	$5, .Lzero_row
.Lget_row:
	vinsw	$31, $31, DESC_OP, $1    # DMA_GET is 0
	vinsw	$2, $1, DESC_SIZE, $1
	ldi	$5, REPLY
	vinsw	$5, $1, DESC_REPLY, $1
	DMA_WAIT $1, $19, $15, REPLY
	br	.Lfeeds
.Lzero_sums:
	stl	$31, 0($3)               # col2im: zero the sums
	addl	$3, 8, $3
	cmplt	$3, $4, $5
	bne	$5, .Lzero_sums
.Lfeeds:
	# the (kr, r_o) this row feeds: r_i + p_r = r_o s_r + kr, kr < K_r, 0 <= r_o < R_o
	ldl	$1, JOB + J_PR($31)
	addl	$18, $1, $1
	ldl	$2, JOB + J_SR_INV($31)
	mull	$1, $2, $2
	srl	$2, 32, $20              # r_o
	ldl	$3, JOB + J_SR($31)
	mull	$20, $3, $3
	subl	$1, $3, $21              # kr
	ldl	$1, JOB + J_KR($31)
	ldl	$2, JOB + J_KC($31)
	mull	$17, $1, $22
	mull	$22, $2, $22
	mull	$22, $11, $22
	ldl	$3, JOB + J_COL($31)
	addl	$22, $3, $22             # col rows (bc, 0, 0)
.Lkr:
	ldl	$1, JOB + J_KR($31)
	cmplt	$21, $1, $1
	beq	$1, .Lrow_done
	blt	$20, .Lrow_done
	ldl	$1, JOB + J_RO($31)
	cmplt	$20, $1, $1
	beq	$1, .Lnext_kr
	ldl	$1, JOB + J_KC($31)
	mull	$21, $1, $1
	mull	$1, $11, $1
	mull	$20, $12, $2
	addl	$1, $2, $1
	addl	$22, $1, $23             # col rows (bc, kr, 0), column (r_o, 0)
	ldl	$24, JOB + J_COL_BUF($31)
	bne	$14, .Lgather
	cmpeq	$10, 4, $1
	bne	$1, .Lselect_s
	ROW_COL ldl, stl, 8, 0
	br	.Lput_col
.Lselect_s:
	ROW_COL ldw, stw, 4, 0
.Lput_col:
	DMA_WAIT $16, $23, $24, REPLY
	br	.Lnext_kr
.Lgather:
	DMA_WAIT $16, $23, $24, REPLY
	cmpeq	$10, 4, $1
	bne	$1, .Laccumulate_s
	ROW_COL fldd, fstd, 8, 1, faddd
	br	.Lnext_kr
.Laccumulate_s:
	ROW_COL flds, fsts, 4, 1, fadds
.Lnext_kr:
	ldl	$1, JOB + J_SR($31)
	addl	$21, $1, $21
	subl	$20, 1, $20
	br	.Lkr
.Lrow_done:
	beq	$14, 8f
	# col2im: put the row's C_i sums
	ldl	$2, JOB + J_CI($31)
	mull	$2, $10, $2
	ldi	$1, DMA_PUT
	vinsw	$1, $31, DESC_OP, $1
	vinsw	$2, $1, DESC_SIZE, $1
	ldi	$5, REPLY
	vinsw	$5, $1, DESC_REPLY, $1
	DMA_WAIT $1, $19, $15, REPLY
8:	addl	$9, NUM_CPES, $9
	br	.Ltask
.Lreturn:
	ret
	.end	im2col
