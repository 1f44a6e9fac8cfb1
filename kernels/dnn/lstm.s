# The tensorized LSTM forward time loop (thesis Algorithm 6, §5.2): ONE launch for all T steps.
# docs/dnn.md ("LSTM") describes it; hostlib/dnn/lstm.py prepares the job.
#
# The host has already run the hoisted input projection I = [x_0..x_{T-1}] W^T as one swGEMM
# (I: T Bp rows x 4 Hp columns in memory, the gate columns permuted as below). Per step t the
# gate pre-activations G = I_t + b + h_{t-1} R^T are one fused product on the 64 CPEs through
# the LDM GEMM primitive gemm_prim_mn_d (C += A B, A = h^T, B = R^T), and the element-wise part
# (sigmoid, tanh from vmath.inc, c = f c + i g, h = o tanh(c)) runs on the same CPEs on the
# same LDM blocks. h (as the primitive's A block), c and the gates never leave LDM between
# steps: per step only I_t (and, when R^T does not fit in LDM, R^T in chunks of KC rows) come
# in by DMA and h_t goes out (y), or, when the job asks for the reserve (training: what the
# backward pass needs), the activated gates, c_t and h_t go out in one record (reserve_out).
#
# Distribution (mesh 8 x 8, CPE (i, j) = id 8 i + j; Mb = Bp / 8, Hb = Hp / 8, Nb = 4 Hb):
#   A  (h_{t-1}^T)  Hb x Mb doubles: hidden block j, batch block i   (the primitive's A(i, j))
#   B  (R^T)        Hb x Nb doubles: hidden block i, gate columns of block j
#   C  (gates)      Mb x Nb doubles: batch block i, the gate columns of hidden block j, in the
#                   order [i f g o] (Hb each): column j Nb + g Hb + u <-> gate g of unit j Hb + u
#   CST (c)         Mb x Hb doubles: batch block i, hidden block j
# so the h block CPE (i, j) computes from its C block is exactly its A block of the next step.
# All LDM state is float64; float32 operands are widened on arrival (vlds/vstd) and h, c are
# rounded once to float32 when they are written out.
#
# Argument: a0 = the job (JOB_BYTES in main memory, int64 fields J_*; the LDM buffers are
# placed by the host from lstm_ldm_end, below the stack lstm_stack).

	.set	noreorder
	.include "../include/dma.inc"
	.include "../gemm/gemm_prim.inc"

	J_T = 0               # time steps, >= 1
	J_ES = 8              # element bytes in memory: 4 or 8
	J_MB = 16             # batch rows per CPE (multiple of 4)
	J_HB = 24             # hidden units per CPE (multiple of 4)
	J_KC = 32             # rows of R^T per chunk (divides Hb)
	J_RES = 40            # 1: R^T stays in LDM for the whole run (KC = Hb)
	J_PRE = 48            # 1: I_{t+1} is prefetched into STAGE while step t computes
	J_I = 56              # memory: I (T Bp x 4 Hp), gate columns permuted
	J_IPITCH = 64         # bytes of one row of I (4 Hp es)
	J_R = 72              # memory: R^T blocks, 64 x (Hb x Nb), CPE id's at id Hb Nb es
	J_BIAS = 80           # memory: b permuted, 8 x Nb (block j's Nb columns at j Nb es)
	J_H0 = 88             # memory: h0^T blocks, 64 x (Hb x Mb)
	J_C0 = 96             # memory: c0 blocks, 64 x (Mb x Hb)
	J_Y = 104             # memory: y blocks, T x 64 x (Mb x Hb)
	J_CT = 112            # memory: c_T blocks, 64 x (Mb x Hb)
	J_TIMES = 120         # memory: 64 x TIMES_BYTES, each CPE's cycle split
	J_A = 128             # LDM buffers (32-byte aligned)
	J_C = 136
	J_CST = 144
	J_G = 152             # Mb x Hb doubles: tanh(g), then tanh(c), then h
	J_STAGE = 160         # Mb x Nb elements of I_{t+1} (prefetch only)
	J_YBUF = 168          # Mb x Hb elements: h_t (then c_T) in memory precision
	J_RBUF = 176          # KC x Nb doubles
	J_BBUF = 184          # Nb doubles: this column block's bias
	J_RSV = 192           # memory: the reserve, T x 64 records (Mb x Nb gates, Mb x Hb c,
	                      # Mb x Hb h), 0: none is written (then y and c_T go to J_Y, J_CT)
	J_SBUF = 200          # LDM: one record in memory precision (staged reserve), 0: the
	                      # record is narrowed in C and put from there (in place)
	J_DEFER = 208         # 1: a staged record's put is issued in the next step's
	                      # element-wise phase (when the GEMM phase streams R^T by DMA)
	JOB_BYTES = 216

	# A reserve record, in parts of Mb x Hb elements: the four gates, then c_t, then h_t
	RECORD_C = 4
	RECORD_H = 5
	RECORD_PARTS = 6

	# TIMES record (per CPE, cycles by rtc): init, I in + GEMM, element-wise, whole kernel
	TM_INIT = 0
	TM_GEMM = 8
	TM_ELEM = 16
	TM_TOTAL = 24
	TIMES_BYTES = 32

	LSTM_FRAME = 32       # 0: ra
	.globl	lstm_stack            # the stack of the call chain, for the host's LDM plan
	lstm_stack = LSTM_FRAME + GEMM_PRIM_FRAME

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
TIMES:	.skip	TIMES_BYTES
JOB_REPLY:
	.word	0
LOAD_REPLY:
	.word	0             # synchronous loads (DMA_WAIT)
I_REPLY:
	.word	0             # gets of I completed (one per step)
Y_REPLY:
	.word	0             # puts of y completed (one per step)
RSV_REPLY:
	.word	0             # puts of reserve records completed
RSV_ISSUED:
	.word	0             # puts of reserve records issued
	.align	3
PENDING:
	.quad	0             # 1: SBUF holds the previous step's record, not yet put (J_DEFER)
	.align	3
MY_ID:	.quad	0
STEP:	.quad	0             # t
CHUNK:	.quad	0             # R^T chunk in the current step
MARK:	.quad	0             # rtc at the start of the current phase

	.include "vmath.inc"

	.ldm
	.globl	lstm_ldm_end          # the host places the buffers from here up (after VM_*)
lstm_ldm_end:

	.text

# ---- leaf routines: arguments in $16.., clobber $0-$8, $16-$25, $27-$29 ------------------------

	.include "lstm.inc"

# load(mem = $16, dst = $17, n = $18 elements, a multiple of 16): get n contiguous elements of
# memory precision and widen them to doubles at dst, in place (the get lands at the top of the
# n doubles). Waits for the get.
	.ent	load
load:
	mov	$26, $7
	ldl	$1, JOB + J_ES($31)
	mull	$18, $1, $2              # bytes
	sll	$18, 3, $3
	subl	$3, $2, $3
	addl	$17, $3, $4              # landing address
	MAKE_DESC $5, DMA_GET, 0($2), LOAD_REPLY
	DMA_WAIT $5, $16, $4, LOAD_REPLY
	mov	$4, $16
	mov	$1, $19
	bsr	$26, widen
	mov	$7, $26
	ret
	.end	load

# issue_i(t = $16, dst = $17): start the get of this CPE's Mb x Nb block of I_t (rows
# t Bp + i Mb .., columns j Nb ..) into dst, one strided DMA counted on I_REPLY.
	.ent	issue_i
issue_i:
	ldl	$1, JOB + J_MB($31)
	ldl	$2, JOB + J_HB($31)
	ldl	$3, JOB + J_ES($31)
	ldl	$4, MY_ID($31)
	sll	$2, 2, $2                # Nb
	mull	$2, $3, $2               # block bytes: Nb es
	mull	$1, $2, $5               # size: Mb Nb es
	srl	$4, 3, $6                # i
	and	$4, 7, $4                # j
	sll	$1, 3, $8                # Bp = 8 Mb
	mull	$16, $8, $8
	mull	$6, $1, $6
	addl	$8, $6, $8               # first row: t Bp + i Mb
	ldl	$6, JOB + J_IPITCH($31)
	mull	$8, $6, $8
	mull	$4, $2, $4
	addl	$8, $4, $8
	ldl	$4, JOB + J_I($31)
	addl	$4, $8, $4               # address
	subl	$6, $2, $6               # stride: the rest of the row
	ldi	$8, DMA_GET
	ldi	$1, I_REPLY
	MAKE_DESC_REGS $3, $8, $5, $2, $6, $1
	dma	$3, $4, $17
	ret
	.end	issue_i


# MBHB reg: reg = Mb Hb (elements of an h or c block; Mb Nb / 4). Clobbers $29.
	.macro	MBHB reg
	ldl	\reg, JOB + J_MB($31)
	ldl	$29, JOB + J_HB($31)
	mull	\reg, $29, \reg
	.endm

# RECORD_BYTES reg: reg = a reserve record's bytes, RECORD_PARTS Mb Hb es. Clobbers $29.
	.macro	RECORD_BYTES reg
	MBHB	\reg
	ldl	$29, JOB + J_ES($31)
	mull	\reg, $29, \reg
	mull	\reg, RECORD_PARTS, \reg
	.endm

# RECORD_PART_NARROW field, part (reserve_out): narrow the Mb x Hb doubles at LDM J_<field>
# to the record at $9, at part x Mb Hb elements.
	.macro	RECORD_PART_NARROW field, part
	ldl	$16, JOB + \field($31)
	MBHB	$18
	ldl	$19, JOB + J_ES($31)
	mull	$18, $19, $17
	mull	$17, \part, $17
	addl	$9, $17, $17
	srl	$18, 2, $18
	bsr	$26, narrow
	.endm

# RECORD_PART_PUT field, part (reserve_out, float64): put the Mb x Hb doubles at LDM
# J_<field> to the record's part x Mb Hb elements.
	.macro	RECORD_PART_PUT field, part
	ldl	$16, JOB + \field($31)
	MBHB	$17
	sll	$17, 3, $17
	mull	$17, \part, $18
	bsr	$26, rsv_put_now
	.endm

# PHASE field: add the cycles since MARK to TIMES + field and start the next phase.
# Clobbers $1-$3.
	.macro	PHASE field
	rtc	$1
	ldl	$2, MARK($31)
	subl	$1, $2, $2
	ldl	$3, TIMES + \field($31)
	addl	$3, $2, $3
	stl	$3, TIMES + \field($31)
	stl	$1, MARK($31)
	.endm

# Vector bodies of ROW_LOOP ($20 = byte offset of the vector in the row).
# C[r] += b: $1 = row of C, $2 = BBUF.
	.macro	BIAS_ADD
	addl	$1, $20, $21
	addl	$2, $20, $22
	vldd	$10, 0($21)
	vldd	$11, 0($22)
	vaddd	$10, $11, $10
	vstd	$10, 0($21)
	.endm
# G[r] = C[r][2 Hb ..]: $1 = row of C + 2 Hb, $2 = row of G.
	.macro	COPY_G
	addl	$1, $20, $21
	addl	$2, $20, $22
	vldd	$10, 0($21)
	vstd	$10, 0($22)
	.endm
# c = f c + i g: $1 = row of C (i), $9 = Hb doubles in bytes (f), $2 = row of G (tanh g),
# $8 = row of CST.
	.macro	CELL
	addl	$1, $20, $21
	addl	$2, $20, $22
	addl	$8, $20, $23
	addl	$21, $9, $24
	vldd	$10, 0($21)
	vldd	$11, 0($22)
	vldd	$12, 0($23)
	vldd	$13, 0($24)
	vmuld	$10, $11, $10
	vmad	$13, $12, $10, $12
	vstd	$12, 0($23)
	.endm
# CELL_SAVE: CELL, and tanh(g) stored over σ(g) in C's g columns (the reserve's activated g).
	.macro	CELL_SAVE
	CELL
	addl	$24, $9, $25
	vstd	$11, 0($25)
	.endm
# h = o tanh(c): $1 = row of C, $9 = 3 Hb doubles in bytes (o), $2 = row of G (tanh c).
	.macro	HIDDEN
	addl	$1, $20, $21
	addl	$21, $9, $21
	addl	$2, $20, $22
	vldd	$10, 0($21)
	vldd	$11, 0($22)
	vmuld	$10, $11, $10
	vstd	$10, 0($22)
	.endm

# ROW_LOOP body: for each of $3 rows, run `body` for the $4 vectors of the row ($20 = the
# vector's byte offset in the row), then advance $1 by $7, $2 by $6 and $8 by $6 bytes.
# Clobbers $3, $5, $20.
	.macro	ROW_LOOP body
1:	mov	$4, $5
	mov	$31, $20
2:	\body
	addl	$20, 32, $20
	subl	$5, 1, $5
	bgt	$5, 2b
	addl	$1, $7, $1
	addl	$2, $6, $2
	addl	$8, $6, $8
	subl	$3, 1, $3
	bgt	$3, 1b
	.endm

# ---- the kernel ---------------------------------------------------------------------------------

	.globl	lstm
	.ent	lstm
lstm:
	ldi	$sp, -LSTM_FRAME($sp)
	.frame	$30, LSTM_FRAME, $26, 0
	stl	$26, 0($sp)
	rtc	$1
	stl	$1, TIMES + TM_TOTAL($31)
	stl	$1, MARK($31)
	FETCH_JOB $1, $2, JOB_REPLY
	rcid	$1
	stl	$1, MY_ID($31)
	stw	$31, I_REPLY($31)
	stw	$31, Y_REPLY($31)
	stw	$31, RSV_REPLY($31)
	stw	$31, RSV_ISSUED($31)
	stl	$31, PENDING($31)
	stl	$31, TIMES + TM_INIT($31)
	stl	$31, TIMES + TM_GEMM($31)
	stl	$31, TIMES + TM_ELEM($31)
	# bias: Nb doubles of column block j
	ldl	$2, JOB + J_HB($31)
	ldl	$3, JOB + J_ES($31)
	sll	$2, 2, $18               # Nb
	and	$1, 7, $4
	mull	$4, $18, $4
	mull	$4, $3, $4
	ldl	$16, JOB + J_BIAS($31)
	addl	$16, $4, $16
	ldl	$17, JOB + J_BBUF($31)
	bsr	$26, load
	# h0^T into A, c0 into CST: Hb Mb elements at id Hb Mb es each
	ldl	$1, JOB + J_MB($31)
	ldl	$2, JOB + J_HB($31)
	ldl	$3, JOB + J_ES($31)
	ldl	$4, MY_ID($31)
	mull	$1, $2, $18
	mull	$18, $3, $5
	mull	$5, $4, $5
	ldl	$16, JOB + J_H0($31)
	addl	$16, $5, $16
	ldl	$17, JOB + J_A($31)
	stl	$5, CHUNK($31)           # (scratch: the block offset)
	bsr	$26, load
	MBHB	$18
	ldl	$16, JOB + J_C0($31)
	ldl	$5, CHUNK($31)
	addl	$16, $5, $16
	ldl	$17, JOB + J_CST($31)
	bsr	$26, load
	# R^T resident: the whole Hb x Nb block, once
	ldl	$1, JOB + J_RES($31)
	beq	$1, 1f
	bsr	$26, r_offset
	ldl	$16, JOB + J_R($31)
	addl	$16, $0, $16
	ldl	$17, JOB + J_RBUF($31)
	ldl	$2, JOB + J_HB($31)
	mull	$2, $2, $18
	sll	$18, 2, $18              # Hb Nb
	bsr	$26, load
1:	ldl	$1, JOB + J_PRE($31)
	beq	$1, 2f
	mov	$31, $16
	ldl	$17, JOB + J_STAGE($31)
	bsr	$26, issue_i
2:	stl	$31, STEP($31)
	PHASE	TM_INIT

.Lstep:
	# ---- I_t + b into C (a reserve record put from C must have left it) ----
	ldl	$1, JOB + J_SBUF($31)
	bne	$1, 1f
	ldl	$1, JOB + J_RSV($31)
	beq	$1, 1f
	bsr	$26, wait_rsv
1:	ldl	$1, JOB + J_PRE($31)
	bne	$1, 1f
	bsr	$26, stage_in_c          # no prefetch: the get lands at the top of C
	mov	$0, $17
	ldl	$16, STEP($31)
	bsr	$26, issue_i
1:	ldl	$1, STEP($31)
	addl	$1, 1, $1
	WAIT_COUNT I_REPLY, $1
	ldl	$1, JOB + J_PRE($31)
	ldl	$16, JOB + J_STAGE($31)
	bne	$1, 3f
	bsr	$26, stage_in_c
	mov	$0, $16
3:	ldl	$17, JOB + J_C($31)
	MBHB	$18
	sll	$18, 2, $18
	ldl	$19, JOB + J_ES($31)
	bsr	$26, widen
	ldl	$1, JOB + J_PRE($31)
	beq	$1, 4f
	ldl	$16, STEP($31)
	addl	$16, 1, $16
	ldl	$1, JOB + J_T($31)
	cmplt	$16, $1, $1
	beq	$1, 4f
	ldl	$17, JOB + J_STAGE($31)
	bsr	$26, issue_i             # I_{t+1} travels while step t computes
4:	ldl	$1, JOB + J_C($31)       # C[r] += b, row by row
	ldl	$3, JOB + J_MB($31)
	ldl	$4, JOB + J_HB($31)      # Nb / 4 = Hb vectors per row
	ldl	$2, JOB + J_BBUF($31)
	sll	$4, 5, $7                # a row of C in bytes
	mov	$31, $6                  # (the bias row stays)
	ROW_LOOP BIAS_ADD

	# ---- C += h^T R^T by the primitive (R^T resident, or chunk by chunk) ----
	ldl	$1, JOB + J_RES($31)
	beq	$1, .Lchunks
	ldl	$16, JOB + J_A($31)
	ldl	$17, JOB + J_RBUF($31)
	ldl	$18, JOB + J_C($31)
	ldl	$19, JOB + J_MB($31)
	ldl	$20, JOB + J_HB($31)
	sll	$20, 2, $20
	ldl	$21, JOB + J_HB($31)
	bsr	$26, gemm_prim_mn_d
	br	.Lelementwise
.Lchunks:
	stl	$31, CHUNK($31)
.Lchunk:
	bsr	$26, r_offset            # this CPE's block, then chunk c: + c KC Nb es
	ldl	$1, CHUNK($31)
	ldl	$2, JOB + J_KC($31)
	ldl	$3, JOB + J_HB($31)
	ldl	$4, JOB + J_ES($31)
	sll	$3, 2, $3
	mull	$2, $3, $18              # KC Nb
	mull	$18, $1, $5
	mull	$5, $4, $5
	addl	$0, $5, $0
	ldl	$16, JOB + J_R($31)
	addl	$16, $0, $16
	ldl	$17, JOB + J_RBUF($31)
	bsr	$26, load
	ldl	$1, CHUNK($31)
	ldl	$2, JOB + J_KC($31)
	ldl	$3, JOB + J_MB($31)
	mull	$1, $2, $4
	mull	$4, $3, $4
	sll	$4, 3, $4                # c KC Mb doubles: the chunk's rows of A
	ldl	$16, JOB + J_A($31)
	addl	$16, $4, $16
	ldl	$17, JOB + J_RBUF($31)
	ldl	$18, JOB + J_C($31)
	mov	$3, $19
	ldl	$20, JOB + J_HB($31)
	sll	$20, 2, $20
	mov	$2, $21
	bsr	$26, gemm_prim_mn_d
	ldl	$1, CHUNK($31)
	addl	$1, 1, $1
	stl	$1, CHUNK($31)
	ldl	$2, JOB + J_KC($31)
	mull	$1, $2, $1
	ldl	$3, JOB + J_HB($31)
	cmplt	$1, $3, $1
	bne	$1, .Lchunk

.Lelementwise:
	PHASE	TM_GEMM
	ldl	$1, PENDING($31)
	beq	$1, 1f
	bsr	$26, put_pending         # the engine is free of R^T until the next step
1:	# G = g columns of C (row r: C + r Nb + 2 Hb)
	ldl	$1, JOB + J_C($31)
	ldl	$2, JOB + J_G($31)
	ldl	$3, JOB + J_MB($31)
	ldl	$4, JOB + J_HB($31)
	sll	$4, 4, $5                # 2 Hb doubles in bytes
	addl	$1, $5, $1
	srl	$4, 2, $4                # Hb / 4 vectors
	sll	$4, 5, $6                # a row of G
	sll	$4, 7, $7                # a row of C
	ROW_LOOP COPY_G
	# sigmoid over all of C (the g columns too; their values are in G), tanh over G
	ldl	$16, JOB + J_C($31)
	mov	$16, $17
	ldl	$1, JOB + J_MB($31)
	ldl	$2, JOB + J_HB($31)
	mull	$1, $2, $18              # Mb Nb / 4 vectors = Mb Hb
	bsr	$26, vsigmoid_d
	ldl	$16, JOB + J_G($31)
	mov	$16, $17
	MBHB	$18
	srl	$18, 2, $18
	bsr	$26, vtanh_d
	# c = f c + i g
	ldl	$1, JOB + J_C($31)
	ldl	$2, JOB + J_G($31)
	ldl	$8, JOB + J_CST($31)
	ldl	$3, JOB + J_MB($31)
	ldl	$4, JOB + J_HB($31)
	sll	$4, 3, $9                # Hb doubles in bytes: the f columns' offset
	srl	$4, 2, $4
	sll	$4, 5, $6
	sll	$4, 7, $7
	ldl	$5, JOB + J_RSV($31)
	bne	$5, 5f
	ROW_LOOP CELL
	br	6f
5:	ROW_LOOP CELL_SAVE
6:
	# G = tanh(c); h = o tanh(c) into G
	ldl	$16, JOB + J_CST($31)
	ldl	$17, JOB + J_G($31)
	MBHB	$18
	srl	$18, 2, $18
	bsr	$26, vtanh_d
	ldl	$1, JOB + J_C($31)
	ldl	$2, JOB + J_G($31)
	ldl	$3, JOB + J_MB($31)
	ldl	$4, JOB + J_HB($31)
	sll	$4, 3, $9
	mull	$9, 3, $9                # 3 Hb doubles: the o columns' offset
	srl	$4, 2, $4
	sll	$4, 5, $6
	sll	$4, 7, $7
	ROW_LOOP HIDDEN
	ldl	$1, JOB + J_RSV($31)
	bne	$1, 2f
	# y_t: wait for the put of y_{t-1} to leave YBUF, round h into it, put it
	ldl	$1, STEP($31)
	WAIT_COUNT Y_REPLY, $1
	ldl	$16, JOB + J_G($31)
	bsr	$26, narrow_y
	ldl	$16, STEP($31)
	ldl	$17, JOB + J_Y($31)
	bsr	$26, put_block           # y + (t 64 + id) Mb Hb es
	br	3f
2:	bsr	$26, reserve_out         # h_t in the record, with the gates and c_t
3:	bsr	$26, transpose_h         # A = h^T for the next step
	PHASE	TM_ELEM
	ldl	$1, STEP($31)
	addl	$1, 1, $1
	stl	$1, STEP($31)
	ldl	$2, JOB + J_T($31)
	cmplt	$1, $2, $2
	bne	$2, .Lstep

	# ---- c_T out (without the reserve: with it, it is the last record's), the times ----
	ldl	$1, PENDING($31)
	beq	$1, 1f
	bsr	$26, put_pending
1:	ldl	$1, JOB + J_RSV($31)
	bne	$1, 2f
	ldl	$1, STEP($31)
	WAIT_COUNT Y_REPLY, $1
	ldl	$16, JOB + J_CST($31)
	bsr	$26, narrow_y
	mov	$31, $16
	ldl	$17, JOB + J_CT($31)
	bsr	$26, put_block
	ldl	$1, STEP($31)
	addl	$1, 1, $1
	WAIT_COUNT Y_REPLY, $1
2:	bsr	$26, wait_rsv
	rtc	$1
	ldl	$2, TIMES + TM_TOTAL($31)
	subl	$1, $2, $2
	stl	$2, TIMES + TM_TOTAL($31)
	ldl	$3, MY_ID($31)
	sll	$3, 5, $3                # TIMES_BYTES
	ldl	$4, JOB + J_TIMES($31)
	addl	$4, $3, $4
	MAKE_DESC $5, DMA_PUT, TIMES_BYTES, LOAD_REPLY
	ldi	$6, TIMES
	DMA_WAIT $5, $4, $6, LOAD_REPLY
	ldl	$26, 0($sp)
	ldi	$sp, LSTM_FRAME($sp)
	ret
	.end	lstm

# stage_in_c: $0 = where a get of Mb Nb elements must land in C to be widened in place.
	.ent	stage_in_c
stage_in_c:
	ldl	$1, JOB + J_MB($31)
	ldl	$2, JOB + J_HB($31)
	ldl	$3, JOB + J_ES($31)
	mull	$1, $2, $1
	sll	$1, 2, $1                # Mb Nb
	ldi	$4, 8
	subl	$4, $3, $4
	mull	$1, $4, $1
	ldl	$0, JOB + J_C($31)
	addl	$0, $1, $0
	ret
	.end	stage_in_c

# r_offset: $0 = byte offset of this CPE's R^T block: id Hb Nb es.
	.ent	r_offset
r_offset:
	ldl	$1, JOB + J_HB($31)
	ldl	$2, JOB + J_ES($31)
	ldl	$3, MY_ID($31)
	mull	$1, $1, $0
	sll	$0, 2, $0
	mull	$0, $2, $0
	mull	$0, $3, $0
	ret
	.end	r_offset

# narrow_y(src = $16): YBUF = the Mb x Hb doubles at src in memory precision.
	.ent	narrow_y
narrow_y:
	MBHB	$18
	srl	$18, 2, $18              # vectors
	ldl	$17, JOB + J_YBUF($31)
	ldl	$19, JOB + J_ES($31)
	br	narrow
	.end	narrow_y

# put_block(k = $16, base = $17): put YBUF (Mb Hb elements) to base + (k 64 + id) Mb Hb es,
# counted on Y_REPLY.
	.ent	put_block
put_block:
	ldl	$1, JOB + J_MB($31)
	ldl	$2, JOB + J_HB($31)
	ldl	$3, JOB + J_ES($31)
	ldl	$4, MY_ID($31)
	mull	$1, $2, $1
	mull	$1, $3, $1               # bytes
	sll	$16, 6, $5
	addl	$5, $4, $5
	mull	$5, $1, $5
	addl	$17, $5, $5
	ldl	$6, JOB + J_YBUF($31)
	MAKE_DESC $7, DMA_PUT, 0($1), Y_REPLY
	dma	$7, $5, $6
	ret
	.end	put_block

# wait_rsv: spin until every reserve put issued has completed (leaf: clobbers $1, $2).
	.ent	wait_rsv
wait_rsv:
	ldw	$1, RSV_ISSUED($31)
	WAIT_COUNT RSV_REPLY, $1
	ret
	.end	wait_rsv

# reserve_out: the record of step t on this CPE in memory precision, the activated gates (C,
# Mb x Nb), c_t (CST) and h_t (G, Mb x Hb each): 6 Mb Hb elements, whole 128-byte lines (Mb Hb
# is a multiple of 16), at J_RSV + (t 64 + id) 6 Mb Hb es; h_t goes out only here (y), and c_T
# is the last record's. Its puts travel while the next step computes. Staged (J_SBUF): wait
# for the previous record to leave SBUF, narrow the three into it, one put (now, or in the
# next step's element-wise phase: J_DEFER). In place: narrow C in place, c_t and h_t behind
# it (float32: the record takes 3/4 of C), one put; float64 needs no narrowing: C, CST and G
# are put as they are, three puts. The next step waits for them before it writes C.
	.ent	reserve_out
reserve_out:
	mov	$26, $15
	ldl	$9, JOB + J_SBUF($31)
	beq	$9, 1f
	bsr	$26, wait_rsv
	br	2f
1:	ldl	$9, JOB + J_C($31)       # in place
	ldl	$1, JOB + J_ES($31)
	cmpeq	$1, 8, $1
	beq	$1, 2f
	mov	$9, $16                  # float64: put C, CST and G
	MBHB	$17
	sll	$17, 5, $17              # Mb Nb 8 bytes
	mov	$31, $18
	bsr	$26, rsv_put_now
	RECORD_PART_PUT J_CST, RECORD_C
	RECORD_PART_PUT J_G, RECORD_H
	mov	$15, $26
	ret
2:	ldl	$16, JOB + J_C($31)      # narrow C to $9, CST and G behind it, one put (or later)
	mov	$9, $17
	MBHB	$18                      # Mb Nb / 4 vectors
	ldl	$19, JOB + J_ES($31)
	bsr	$26, narrow
	RECORD_PART_NARROW J_CST, RECORD_C
	RECORD_PART_NARROW J_G, RECORD_H
	ldl	$1, JOB + J_DEFER($31)
	beq	$1, 3f
	ldi	$1, 1
	stl	$1, PENDING($31)
	mov	$15, $26
	ret
3:	mov	$9, $16
	RECORD_BYTES $17
	mov	$31, $18
	bsr	$26, rsv_put_now
	mov	$15, $26
	ret
	.end	reserve_out

# put_pending: put SBUF, the record of the step before STEP.
	.ent	put_pending
put_pending:
	stl	$31, PENDING($31)
	ldl	$16, JOB + J_SBUF($31)
	RECORD_BYTES $17
	mov	$31, $18
	ldl	$19, STEP($31)
	subl	$19, 1, $19
	br	rsv_put
	.end	put_pending

# rsv_put(src = $16, bytes = $17, offset = $18, step = $19 (rsv_put_now: STEP)): put bytes
# from LDM src to the reserve record of (step, this CPE) + offset, counted on RSV_REPLY /
# RSV_ISSUED. Leaf: clobbers $1-$7, $29.
	.ent	rsv_put
rsv_put_now:
	ldl	$19, STEP($31)
rsv_put:
	RECORD_BYTES $1
	ldl	$4, MY_ID($31)
	sll	$19, 6, $5
	addl	$5, $4, $5
	mull	$5, $1, $5
	ldl	$6, JOB + J_RSV($31)
	addl	$6, $5, $6
	addl	$6, $18, $6
	MAKE_DESC $7, DMA_PUT, 0($17), RSV_REPLY
	dma	$7, $6, $16
	ldw	$1, RSV_ISSUED($31)
	addl	$1, 1, $1
	stw	$1, RSV_ISSUED($31)
	ret
	.end	rsv_put

# transpose_h: A (Hb x Mb) = G (Mb x Hb), four elements at a time along a row of G.
	.ent	transpose_h
transpose_h:
	ldl	$1, JOB + J_G($31)
	ldl	$2, JOB + J_A($31)
	ldl	$3, JOB + J_MB($31)
	ldl	$4, JOB + J_HB($31)
	sll	$3, 3, $5                # a row of A in bytes
	sll	$5, 2, $6                # four rows of A
	mov	$3, $7
1:	mov	$2, $8                   # A[0][r]
	srl	$4, 2, $9
2:	fldd	$10, 0($1)
	fldd	$11, 8($1)
	fldd	$12, 16($1)
	fldd	$13, 24($1)
	addl	$1, 32, $1
	addl	$8, $5, $16
	addl	$16, $5, $17
	addl	$17, $5, $18
	fstd	$10, 0($8)
	fstd	$11, 0($16)
	fstd	$12, 0($17)
	fstd	$13, 0($18)
	addl	$8, $6, $8
	subl	$9, 1, $9
	bgt	$9, 2b
	addl	$2, 8, $2
	subl	$7, 1, $7
	bgt	$7, 1b
	ret
	.end	transpose_h
