# The DNN library's streaming driver (thesis §5.3: memory-bound operators are data parallel
# over the 64 CPEs with large contiguous DMA and no register communication), and the
# element-wise plan and bodies, pooling and layout transforms it runs. stream.inc has the job and
# unit records and the plan / body conventions; hostlib/dnn/stream.py prepares the job;
# docs/dnn.md ("Memory-bound operators") describes the scheme.
#
# Operators whose routines live in their own file (activation.s, softmax.s, batchnorm.s) are
# linked BEFORE this one: the linker places LDM data in link order, and stream_ldm_end must stay
# the end of the static LDM (the host's buffers start there).

	.set	noreorder
	.include "../include/dma.inc"
	.include "stream.inc"

	FRAME_SIZE = 32       # 0: ra
	.globl	stream_stack
	stream_stack = FRAME_SIZE

	.ldm
	.align	5
	.globl	JOB
JOB:	.skip	JOB_BYTES
UNIT:	.skip	2 * UNIT_BYTES        # unit records per parity
JOB_REPLY:
	.skip	4
GET_REPLY:                    # reply words per parity (32-bit)
	.skip	8
PUT_REPLY:
	.skip	8
	.align	3
GET_ISSUED:                   # requests issued per parity (cumulative)
	.skip	16
PUT_ISSUED:
	.skip	16
	.align	5
	.globl	stream_ldm_end
stream_ldm_end:

	.text

# transfer(parity $16, put $17): the DMAs of the parity's unit record between its input
# (put = 0: gets) or output (put = 1: puts) streams and the parity's buffers. Leaf; $4 holds
# the descriptor's control lane without the block size.
	.ent	transfer
transfer:
	ldih	$4, (DMA_GET << (DESC_OP_SHIFT - 16))($31)   # the op in the control lane (mode PE)
	beq	$17, 5f
	ldih	$4, (DMA_PUT << (DESC_OP_SHIFT - 16))($31)
5:	vinsw	$4, $31, DESC_CTRL, $5
	s4addl	$16, $31, $6
	ldi	$7, GET_REPLY($6)
	beq	$17, 1f
	ldi	$7, PUT_REPLY($6)
1:	vinsw	$7, $5, DESC_REPLY, $5
	s8addl	$16, $31, $6          # the parity's issued counter
	ldi	$7, GET_ISSUED($6)
	ldl	$19, JOB + J_NIN($31)
	mull	$16, FRAME_BYTES, $21
	ldi	$21, JOB + J_FRAME($21)   # the parity's buffers
	mull	$16, UNIT_BYTES, $22
	ldi	$22, UNIT($22)        # the parity's unit record
	beq	$17, 2f
	ldi	$7, PUT_ISSUED($6)
	ldl	$19, JOB + J_NOUT($31)
	ldi	$21, 8 * STREAM_OUT($21)
	ldi	$22, 8 * STREAM_OUT($22)
2:	ldl	$8, 0($7)
3:	ldl	$3, U_BYTES($22)
	beq	$3, 4f                # nothing to move for this stream
	vinsw	$3, $5, DESC_SIZE, $5
	ldl	$3, U_BLOCK($22)
	addl	$3, $4, $3            # block size | op
	vinsw	$3, $5, DESC_CTRL, $5
	ldl	$3, U_STRIDE($22)
	vinsw	$3, $5, DESC_STRIDE, $5
	ldl	$23, U_ADDR($22)
	ldl	$24, 0($21)
	dma	$5, $23, $24
	addl	$8, 1, $8
4:	ldi	$21, 8($21)
	ldi	$22, 8($22)
	subl	$19, 1, $19
	bgt	$19, 3b
	stl	$8, 0($7)
	ret
	.end	transfer

# AWAIT reply, issued, parity: spin until the parity's reply word counts its issued requests.
	.macro	AWAIT reply, issued, parity
	s8addl	\parity, $31, $1
	ldl	$2, \issued($1)
	s4addl	\parity, $31, $1
1:	ldw	$3, \reply($1)
	cmplt	$3, $2, $3
	bne	$3, 1b
	.endm

# PLAN unit, parity: call the operator's plan for `unit` into the parity's unit record, then
# issue its gets.
	.macro	PLAN unit, parity
	mov	\unit, $16
	mull	\parity, UNIT_BYTES, $17
	ldi	$17, UNIT($17)
	ldl	$27, JOB + J_PLAN($31)
	call	$26, ($27), 0
	mov	\parity, $16
	clr	$17
	bsr	$26, transfer
	.endm

# stream_run(job): the driver. $9 unit, $10 units, $11 parity, $12 next unit, $13 CPES.
	.globl	stream_run
	.ent	stream_run
stream_run:
	ldi	$sp, -FRAME_SIZE($sp)
	.frame	$30, FRAME_SIZE, $26, 0
	stl	$26, 0($sp)
	FETCH_JOB $2, $3, JOB_REPLY
	rcid	$9
	ldl	$1, JOB + J_FIRST($31)
	addl	$9, $1, $9
	ldl	$13, JOB + J_CPES($31)
	ldl	$10, JOB + J_CHUNKS($31)
	clr	$11
	cmplt	$9, $10, $1
	beq	$1, .Ldone
	PLAN	$9, $11
.Lunit:
	addl	$9, $13, $12
	cmplt	$12, $10, $1
	beq	$1, 1f
	xor	$11, 1, $14
	PLAN	$12, $14              # the next unit's gets
1:	AWAIT	GET_REPLY, GET_ISSUED, $11
	AWAIT	PUT_REPLY, PUT_ISSUED, $11
	mull	$11, FRAME_BYTES, $16
	ldi	$16, JOB + J_FRAME($16)
	mull	$11, UNIT_BYTES, $18
	ldi	$18, UNIT($18)
	ldl	$17, U_COUNT($18)
	ldl	$27, JOB + J_BODY($31)
	call	$26, ($27), 0
	mov	$11, $16
	ldi	$17, 1
	bsr	$26, transfer         # this unit's puts
	xor	$11, 1, $11
	mov	$12, $9
	cmplt	$9, $10, $1
	bne	$1, .Lunit
.Ldone:
	AWAIT	PUT_REPLY, PUT_ISSUED, $31
	ldi	$4, 1
	AWAIT	PUT_REPLY, PUT_ISSUED, $4
	ldl	$26, 0($sp)
	ldi	$sp, FRAME_SIZE($sp)
	ret
	.end	stream_run

# elementwise_plan(chunk $16, record $17): elements [chunk * CHUNK, min(N, ...)) of every
# stream; the count is the elements.
	.globl	elementwise_plan
	.ent	elementwise_plan
elementwise_plan:
	ldl	$1, JOB + J_CHUNK($31)
	mull	$16, $1, $2           # first element
	ldl	$3, JOB + J_N($31)
	subl	$3, $2, $3
	cmplt	$3, $1, $4
	seleq	$4, $1, $3, $3        # count = min(CHUNK, N - first)
	stl	$3, U_COUNT($17)
	ldl	$4, JOB + J_ES($31)
	mull	$2, $4, $2            # byte offset
	mull	$3, $4, $3            # bytes
	ldi	$5, JOB + J_IN($31)   # bases: in0..in2, out0, out1 (J_OUT follows J_IN)
	ldi	$6, 5
1:	ldl	$7, 0($5)
	addl	$7, $2, $7
	stl	$7, U_ADDR($17)
	stl	$3, U_BYTES($17)
	ldi	$5, 8($5)
	ldi	$17, 8($17)
	subl	$6, 1, $6
	bgt	$6, 1b
	ret
	.end	elementwise_plan

# ---- bodies ----------------------------------------------------------------------------------
# ELEMENTWISE name, nin, nout, op: the body routines name_s (f32) and name_d (f64). Per vector
# of 4 elements they load in0..in(nin-1) into $20-$22, run the macro `op` with the parameters
# J_P[0..3] in every lane of $5-$8, and store out0 from $23 (and out1 from $24).
	.macro	ELEMENTWISE name, nin, nout, op
	BODY	\name\()_s, \nin, \nout, \op, vlds, vsts, 16
	BODY	\name\()_d, \nin, \nout, \op, vldd, vstd, 32
	.endm

	.macro	BODY label, nin, nout, op, load, store, step
	BODY_START \label
	ldde	$5, JOB + J_P($31)
	ldde	$6, JOB + J_P + 8($31)
	ldde	$7, JOB + J_P + 16($31)
	ldde	$8, JOB + J_P + 24($31)
	addl	$17, 3, $17
	srl	$17, 2, $17           # vectors
1:	\load	$20, 0($1)
	.if	\nin >> 1             # nin > 1
	\load	$21, 0($2)
	.endif
	.if	(\nin + 1) >> 2       # nin = 3
	\load	$22, 0($3)
	.endif
	\op
	\store	$23, 0($4)
	.if	\nout >> 1            # nout = 2
	\store	$24, 0($25)
	.endif
	.irp	ptr, $1, $2, $3, $4, $25
	ldi	\ptr, \step(\ptr)
	.endr
	subl	$17, 1, $17
	bgt	$17, 1b
	BODY_END \label
	.endm

# axpby: out0 = p0 in0 + p1 in1 (add, residuals).
	.macro	OP_AXPBY
	vmuld	$6, $21, $23
	vmad	$5, $20, $23, $23
	.endm
	ELEMENTWISE axpby, 2, 1, OP_AXPBY

# scale: out0 = p0 in0.
	.macro	OP_SCALE
	vmuld	$5, $20, $23
	.endm
	ELEMENTWISE scale, 1, 1, OP_SCALE

# sgd (Caffe's SGD with momentum and weight decay): in param, grad, history; p0 learning rate,
# p1 momentum, p2 weight decay. diff = lr (grad + wd param) + momentum history;
# out0 = param - diff, out1 = diff (the new history).
	.macro	OP_SGD
	vmad	$7, $20, $21, $21
	vmuld	$6, $22, $22
	vmad	$5, $21, $22, $24
	vsubd	$20, $24, $23
	.endm
	ELEMENTWISE sgd, 3, 2, OP_SGD

# Adam (Caffe's AdamSolver) in two passes: the driver's 3 inputs cannot hold param, grad and
# both moments (a weight decay is an axpby pass before them: hostlib/dnn/elementwise.py).
# adam_moments: in grad, m, v; p0 beta1, p1 1 - beta1, p2 beta2, p3 1 - beta2.
# out0 = beta1 m + (1 - beta1) grad, out1 = beta2 v + (1 - beta2) grad^2.
	.macro	OP_ADAM_MOMENTS
	vmuld	$6, $20, $23
	vmad	$5, $21, $23, $23
	vmuld	$20, $20, $24
	vmuld	$8, $24, $24
	vmad	$7, $22, $24, $24
	.endm
	ELEMENTWISE adam_moments, 3, 2, OP_ADAM_MOMENTS

# adam_step: in param, m, v (the new moments); p0 lr_t, p1 eps.
# out0 = param - lr_t m / (sqrt(v) + eps).
	.macro	OP_ADAM_STEP
	vsqrtd	$22, $24
	vaddd	$24, $6, $24
	vmuld	$5, $21, $23
	vdivd	$23, $24, $23
	vsubd	$20, $23, $23
	.endm
	ELEMENTWISE adam_step, 3, 1, OP_ADAM_STEP
	.include "pool.inc"
	.include "transform.inc"
