# The LSTM cell as separate element-wise kernels over arrays in main memory, one launch per
# time step: the forward of the cuDNN/Appleyard-style baseline and the backward through time
# (hostlib/dnn/lstm.py; docs/dnn.md "LSTM"). Nothing stays in LDM between launches.
#
#   OP_FORWARD   in:  pre-activations Gi Gf Go Gg, bias Bi Bf Bo Bg, c_{t-1}
#                out: i = σ(Gi + Bi), f, o (σ), g = tanh(Gg + Bg), c_t = f c_{t-1} + i g,
#                     h_t = o tanh(c_t)
#   OP_BACKWARD  in:  i f o g, c_{t-1}, c_t, dy_t, dh (from step t+1), dc (from step t+1)
#                out: the pre-activation gradients dGi dGf dGo dGg and dc_{t-1}:
#                     dh' = dy_t + dh, tc = tanh(c_t), dc' = dc + dh' o (1 - tc^2),
#                     dGi = dc' g i (1 - i), dGf = dc' c_{t-1} f (1 - f),
#                     dGo = dh' tc o (1 - o), dGg = dc' i (1 - g^2), dc_{t-1} = dc' f
#
# Every operand is a plane of B rows x H columns given by its address and row pitch in bytes
# (pitch 0: the same row for every batch row, the bias). A unit is (row, chunk of HC columns);
# CPE id takes units id, id + 64, ...; a unit's input planes come in by one DMA each into
# their LDM slots (HCP = HC rounded up to 16 doubles each), are widened to double, computed,
# narrowed in place and put. Slot k holds plane k: the inputs first, then the outputs.
#
# Argument: a0 = the job (JOB_BYTES in main memory, int64 fields J_*, planes P_* at J_PLANES).

	.set	noreorder
	.include "../include/dma.inc"

	J_OP = 0              # OP_*
	J_ROWS = 8            # B
	J_COLS = 16           # H
	J_ES = 24             # element bytes: 4 or 8
	J_HC = 32             # columns per unit
	J_CHUNKS = 40         # ceil(H / HC)
	J_SLOT = 48           # bytes of an LDM slot: HCP doubles
	J_BUF = 56            # LDM address of slot 0 (32-byte aligned)
	J_PLANES = 64         # MAX_PLANES x PLANE_BYTES
	P_ADDR = 0
	P_PITCH = 8
	PLANE_BYTES = 16
	MAX_PLANES = 15
	JOB_BYTES = J_PLANES + MAX_PLANES * PLANE_BYTES

	OP_FORWARD = 0
	OP_BACKWARD = 1
	FORWARD_IN = 9        # planes read and written by each op
	FORWARD_OUT = 6
	BACKWARD_IN = 9
	BACKWARD_OUT = 5
	REQ_MESH_ROWS = 8     # checked at launch: tasks are dealt NUM_CPES apart
	REQ_MESH_COLS = 8
	NUM_CPES = REQ_MESH_ROWS * REQ_MESH_COLS

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
JOB_REPLY:
	.word	0
GET_REPLY:
	.word	0
PUT_REPLY:
	.word	0
	.align	3
RET:	.quad	0
ROW:	.quad	0             # the unit: its row and chunk
CHUNK:	.quad	0
NIN:	.quad	0
NOUT:	.quad	0
VECS:	.quad	0             # HCP / 4
COL0:	.quad	0             # the unit's first column and its width
WIDTH:	.quad	0
K:	.quad	0             # the slot being widened or narrowed
CALC_RET:
	.quad	0

	.include "vmath.inc"

	.ldm
	.globl	lstm_cell_ldm_end     # the host places the slots from here up
lstm_cell_ldm_end:

	.text

# SLOT reg, k: reg = LDM address of slot k (k a constant). Clobbers $29.
	.macro	SLOT reg, k
	ldl	\reg, JOB + J_BUF($31)
	ldl	$29, JOB + J_SLOT($31)
	.rept	\k
	addl	\reg, $29, \reg
	.endr
	.endm

# ON_SLOTS routine, src, dst, slots: call a vmath.inc routine on `slots` adjacent slots from
# slot src into slot dst.
	.macro	ON_SLOTS routine, src, dst, slots=1
	SLOT	$16, \src
	SLOT	$17, \dst
	ldl	$18, VECS($31)
	.if	\slots - 1
	mull	$18, \slots, $18
	.endif
	bsr	$26, \routine
	.endm

	.globl	lstm_cell
	.ent	lstm_cell
lstm_cell:
	stl	$26, RET($31)
	FETCH_JOB $1, $2, JOB_REPLY
	ldl	$1, JOB + J_OP($31)
	ldi	$2, FORWARD_IN
	ldi	$3, FORWARD_OUT
	beq	$1, 1f
	ldi	$2, BACKWARD_IN
	ldi	$3, BACKWARD_OUT
1:	stl	$2, NIN($31)
	stl	$3, NOUT($31)
	ldl	$1, JOB + J_SLOT($31)
	srl	$1, 5, $1
	stl	$1, VECS($31)
	rcid	$1                       # first unit: id = row * chunks + chunk
	stl	$31, ROW($31)
	stl	$1, CHUNK($31)
.Lunit:
	ldl	$1, ROW($31)             # normalise: chunk < chunks
	ldl	$2, CHUNK($31)
	ldl	$3, JOB + J_CHUNKS($31)
1:	cmplt	$2, $3, $4
	bne	$4, 2f
	subl	$2, $3, $2
	addl	$1, 1, $1
	br	1b
2:	stl	$1, ROW($31)
	stl	$2, CHUNK($31)
	ldl	$4, JOB + J_ROWS($31)
	cmplt	$1, $4, $4
	beq	$4, .Ldone
	ldl	$4, JOB + J_HC($31)
	mull	$2, $4, $5
	stl	$5, COL0($31)
	ldl	$6, JOB + J_COLS($31)
	subl	$6, $5, $6
	cmplt	$6, $4, $7
	seleq	$7, $4, $6, $6           # min(HC, H - col0)
	stl	$6, WIDTH($31)
	# the gets, into the top of each slot (widened in place)
	stw	$31, GET_REPLY($31)
	mov	$31, $16
	ldl	$17, NIN($31)
	ldi	$18, DMA_GET
	bsr	$26, planes_dma
	ldl	$1, NIN($31)
3:	ldw	$2, GET_REPLY($31)
	cmplt	$2, $1, $2
	bne	$2, 3b
	ldl	$1, NIN($31)
	mov	$31, $9
4:	ldl	$16, JOB + J_BUF($31)    # widen slot k
	ldl	$2, JOB + J_SLOT($31)
	mull	$2, $9, $3
	addl	$16, $3, $17
	ldl	$3, JOB + J_ES($31)
	srl	$2, 3, $18               # HCP
	ldi	$4, 8
	subl	$4, $3, $4
	mull	$18, $4, $4
	addl	$17, $4, $16
	stl	$9, K($31)
	ldl	$19, JOB + J_ES($31)
	bsr	$26, widen
	ldl	$9, K($31)
	addl	$9, 1, $9
	ldl	$1, NIN($31)
	cmplt	$9, $1, $1
	bne	$1, 4b
	# compute
	ldl	$1, JOB + J_OP($31)
	bne	$1, 5f
	bsr	$26, cell_forward
	ldi	$1, FORWARD_OUT
	br	6f
5:	bsr	$26, cell_backward
	ldi	$1, BACKWARD_OUT
6:	stl	$1, NOUT($31)
	# narrow the outputs in place and put them
	ldl	$9, NIN($31)
7:	ldl	$16, JOB + J_BUF($31)
	ldl	$2, JOB + J_SLOT($31)
	mull	$2, $9, $3
	addl	$16, $3, $16
	srl	$2, 5, $18
	mov	$16, $17
	ldl	$19, JOB + J_ES($31)
	stl	$9, K($31)
	bsr	$26, narrow
	ldl	$9, K($31)
	addl	$9, 1, $9
	ldl	$1, NIN($31)
	ldl	$2, NOUT($31)
	addl	$1, $2, $1
	cmplt	$9, $1, $1
	bne	$1, 7b
	stw	$31, PUT_REPLY($31)
	ldl	$16, NIN($31)
	ldl	$17, NOUT($31)
	addl	$16, $17, $17
	ldi	$18, DMA_PUT
	bsr	$26, planes_dma
	ldl	$1, NOUT($31)
8:	ldw	$2, PUT_REPLY($31)
	cmplt	$2, $1, $2
	bne	$2, 8b
	ldl	$2, CHUNK($31)           # next unit: 64 further
	addl	$2, NUM_CPES, $2
	stl	$2, CHUNK($31)
	br	.Lunit
.Ldone:
	ldl	$26, RET($31)
	ret
	.end	lstm_cell

# planes_dma(first = $16, end = $17, op = $18): for planes first .. end-1, a DMA of the unit's
# WIDTH elements between plane k (row ROW, column COL0) and slot k (a get lands at the top of
# the slot, to be widened in place; a put leaves from its start). Gets count on GET_REPLY,
# puts on PUT_REPLY.
	.ent	planes_dma
planes_dma:
	ldl	$1, JOB + J_ES($31)
	ldl	$2, WIDTH($31)
	mull	$2, $1, $2               # bytes
	ldi	$3, GET_REPLY
	ldi	$4, PUT_REPLY
	cmpeq	$18, DMA_GET, $5
	selne	$5, $3, $4, $3           # reply word
	ldl	$4, JOB + J_SLOT($31)
	srl	$4, 3, $6
	ldi	$7, 8
	subl	$7, $1, $7
	mull	$6, $7, $6
	seleq	$5, $31, $6, $6          # landing offset in the slot: HCP (8 - es) for a get
	ldl	$7, COL0($31)
	mull	$7, $1, $7               # column offset in bytes
	ldl	$8, ROW($31)
	ldi	$19, 0
	MAKE_DESC_REGS $20, $18, $2, $19, $19, $3
1:	cmplt	$16, $17, $21
	beq	$21, 2f
	sll	$16, 4, $21              # plane record
	ldl	$22, JOB + J_PLANES + P_ADDR($21)
	ldl	$23, JOB + J_PLANES + P_PITCH($21)
	mull	$23, $8, $23
	addl	$22, $23, $22
	addl	$22, $7, $22             # memory address
	ldl	$23, JOB + J_BUF($31)
	mull	$4, $16, $24
	addl	$23, $24, $23
	addl	$23, $6, $23             # LDM address
	dma	$20, $22, $23
	addl	$16, 1, $16
	br	1b
2:	ret
	.end	planes_dma

	.include "lstm.inc"

# cell_forward: slots 0-3 Gi Gf Go Gg, 4-7 the biases, 8 c_{t-1}; 9-12 i f o g, 13 c_t, 14 h_t.
	.ent	cell_forward
cell_forward:
	stl	$26, CALC_RET($31)
	SLOT	$1, 0                    # G += B over slots 0-3
	SLOT	$2, 4
	ldl	$3, VECS($31)
	sll	$3, 2, $3
1:	vldd	$4, 0($1)
	vldd	$5, 0($2)
	addl	$2, 32, $2
	subl	$3, 1, $3
	vaddd	$4, $5, $4
	vstd	$4, 0($1)
	addl	$1, 32, $1
	bgt	$3, 1b
	ON_SLOTS vsigmoid_d, 0, 9, 3     # i f o
	ON_SLOTS vtanh_d, 3, 12          # g
	SLOT	$1, 9                    # c = f c_{t-1} + i g
	SLOT	$2, 10
	SLOT	$3, 12
	SLOT	$4, 8
	SLOT	$5, 13
	ldl	$6, VECS($31)
2:	vldd	$10, 0($1)
	vldd	$11, 0($3)
	vldd	$12, 0($2)
	vldd	$13, 0($4)
	vmuld	$10, $11, $10
	vmad	$12, $13, $10, $10
	vstd	$10, 0($5)
	addl	$1, 32, $1
	addl	$2, 32, $2
	addl	$3, 32, $3
	addl	$4, 32, $4
	addl	$5, 32, $5
	subl	$6, 1, $6
	bgt	$6, 2b
	ON_SLOTS vtanh_d, 13, 14         # tanh(c)
	SLOT	$1, 11                   # h = o tanh(c)
	SLOT	$2, 14
	ldl	$6, VECS($31)
3:	vldd	$10, 0($1)
	vldd	$11, 0($2)
	vmuld	$10, $11, $10
	vstd	$10, 0($2)
	addl	$1, 32, $1
	addl	$2, 32, $2
	subl	$6, 1, $6
	bgt	$6, 3b
	ldl	$26, CALC_RET($31)
	ret
	.end	cell_forward

# cell_backward: slots 0-3 i f o g, 4 c_{t-1}, 5 c_t, 6 dy_t, 7 dh, 8 dc; 9-12 dGi dGf dGo
# dGg, 13 dc_{t-1}.
	.ent	cell_backward
cell_backward:
	stl	$26, CALC_RET($31)
	ON_SLOTS vtanh_d, 5, 5           # slot 5 = tc
	SLOT	$1, 0
	ldl	$14, JOB + J_SLOT($31)
	ldl	$15, VECS($31)
	ldde	$13, VM_ONE($31)
1:	mov	$1, $2                   # $2..: slot k of this vector
	vldd	$3, 0($2)                # i
	addl	$2, $14, $2
	vldd	$4, 0($2)                # f
	addl	$2, $14, $2
	vldd	$5, 0($2)                # o
	addl	$2, $14, $2
	vldd	$6, 0($2)                # g
	addl	$2, $14, $2
	vldd	$7, 0($2)                # c_{t-1}
	addl	$2, $14, $2
	vldd	$8, 0($2)                # tc
	addl	$2, $14, $2
	vldd	$9, 0($2)                # dy
	addl	$2, $14, $2
	vldd	$10, 0($2)               # dh
	addl	$2, $14, $2
	vldd	$11, 0($2)               # dc
	addl	$2, $14, $2              # slot 9
	vaddd	$9, $10, $9              # dh' = dy + dh
	vnmad	$8, $8, $13, $10         # 1 - tc^2
	vmuld	$9, $5, $12              # dh' o
	vmad	$12, $10, $11, $11       # dc' = dc + dh' o (1 - tc^2)
	vsubd	$13, $3, $10             # 1 - i
	vmuld	$10, $3, $10             # i (1 - i)
	vmuld	$11, $6, $12             # dc' g
	vmuld	$12, $10, $12
	vstd	$12, 0($2)               # dGi
	addl	$2, $14, $2
	vsubd	$13, $4, $10
	vmuld	$10, $4, $10             # f (1 - f)
	vmuld	$11, $7, $12             # dc' c_{t-1}
	vmuld	$12, $10, $12
	vstd	$12, 0($2)               # dGf
	addl	$2, $14, $2
	vsubd	$13, $5, $10
	vmuld	$10, $5, $10             # o (1 - o)
	vmuld	$9, $8, $12              # dh' tc
	vmuld	$12, $10, $12
	vstd	$12, 0($2)               # dGo
	addl	$2, $14, $2
	vnmad	$6, $6, $13, $10         # 1 - g^2
	vmuld	$11, $3, $12             # dc' i
	vmuld	$12, $10, $12
	vstd	$12, 0($2)               # dGg
	addl	$2, $14, $2
	vmuld	$11, $4, $12             # dc_{t-1} = dc' f
	vstd	$12, 0($2)
	addl	$1, 32, $1
	subl	$15, 1, $15
	bgt	$15, 1b
	ldl	$26, CALC_RET($31)
	ret
	.end	cell_backward
