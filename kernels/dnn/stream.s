# The DNN library's streaming driver (thesis §5.3: memory-bound operators are data parallel
# over the 64 CPEs with large contiguous DMA and no register communication), and the
# element-wise bodies it runs. hostlib/dnn/stream.py prepares the job; docs/dnn.md
# ("Memory-bound operators") describes the scheme.
#
# Every stream (up to 3 inputs, 2 outputs) holds N elements of ES bytes (4: f32, 8: f64) in
# main memory. They are cut into chunks of CHUNK elements (CHUNK * ES a multiple of 128 bytes,
# so every chunk starts on a line and a put writes whole lines); CPE id takes chunks
# id, id + CPES, ... Two parities of LDM buffers double-buffer them: while a CPE computes chunk
# c, the gets of its next chunk and the puts of its previous one are in flight. Before a
# buffer parity is reused the CPE waits for the puts issued from it.
#
# A body routine does the arithmetic of one chunk in LDM: $16 = the parity's frame (LDM
# addresses of in0, in1, in2, out0, out1, 8 bytes each), $17 = the elements in the chunk. It
# processes whole vectors of 4 (the buffers are whole lines, the extra lanes are never put),
# computes in double (f32 is widened by vlds and rounded once by vsts), reads its parameters
# from J_P, and clobbers only $1-$8, $16-$25, $27-$29.
#
# Argument: a0 = the job in main memory (JOB_BYTES, int64 fields J_*).

	.set	noreorder
	.include "../include/dma.inc"

	J_N = 0               # elements of every stream
	J_ES = 8              # element size: 4 or 8
	J_CHUNK = 16          # elements per chunk
	J_CPES = 24           # CPEs taking chunks round robin
	J_NIN = 32            # input streams (1..3)
	J_NOUT = 40           # output streams (1..2)
	J_BODY = 48           # code address of the body routine
	J_IN = 56             # input base addresses (3)
	J_OUT = 80            # output base addresses (2)
	J_CHUNKS = 96         # ceil(N / CHUNK)
	J_FRAME = 104         # two frames (parity 0, 1) of FRAME_BYTES
	FRAME_BYTES = 40      # LDM addresses of in0, in1, in2, out0, out1
	FRAME_OUT = 24        # offset of out0 in a frame
	J_P = 184             # body parameters: 4 doubles
	JOB_BYTES = 224

	FRAME_SIZE = 32       # 0: ra
	.globl	stream_stack
	stream_stack = FRAME_SIZE

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
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

# COUNT chunk, count: count = the elements of chunk `chunk`, min(CHUNK, N - chunk * CHUNK);
# $2 = its first element. Temporaries $1, $4.
	.macro	COUNT chunk, count
	ldl	$1, JOB + J_CHUNK($31)
	mull	\chunk, $1, $2
	ldl	\count, JOB + J_N($31)
	subl	\count, $2, \count
	cmplt	\count, $1, $4
	seleq	$4, $1, \count, \count
	.endm

# transfer(chunk $16, parity $17, put $18): the DMAs of chunk `chunk` between every input
# (put = 0: gets) or output (put = 1: puts) stream and the parity's buffers. Leaf.
	.ent	transfer
transfer:
	COUNT	$16, $3
	ldl	$4, JOB + J_ES($31)
	mull	$2, $4, $2            # byte offset
	mull	$3, $4, $3            # bytes
	vinsw	$18, $31, DESC_OP, $5
	vinsw	$3, $5, DESC_SIZE, $5
	s4addl	$17, $31, $6
	ldi	$7, GET_REPLY($6)
	beq	$18, 1f
	ldi	$7, PUT_REPLY($6)
1:	vinsw	$7, $5, DESC_REPLY, $5
	s8addl	$17, $31, $6          # issued counter of the parity
	ldi	$7, GET_ISSUED($6)
	ldl	$19, JOB + J_NIN($31)
	ldi	$20, JOB + J_IN($31)
	mull	$17, FRAME_BYTES, $21
	ldi	$21, JOB + J_FRAME($21)   # the parity's frame
	beq	$18, 2f
	ldi	$7, PUT_ISSUED($6)
	ldl	$19, JOB + J_NOUT($31)
	ldi	$20, JOB + J_OUT($31)
	ldi	$21, FRAME_OUT($21)
2:	ldl	$8, 0($7)
	addl	$8, $19, $8
	stl	$8, 0($7)
3:	ldl	$22, 0($20)           # stream base
	addl	$22, $2, $22
	ldl	$23, 0($21)           # LDM buffer
	dma	$5, $22, $23
	ldi	$20, 8($20)
	ldi	$21, 8($21)
	subl	$19, 1, $19
	bgt	$19, 3b
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

# stream_run(job): the driver. $9 chunk, $10 chunks, $11 parity, $12 next chunk, $13 CPES.
	.globl	stream_run
	.ent	stream_run
stream_run:
	ldi	$sp, -FRAME_SIZE($sp)
	.frame	$30, FRAME_SIZE, $26, 0
	stl	$26, 0($sp)
	ldi	$1, JOB_BYTES
	vinsw	$1, $31, DESC_SIZE, $2 # get, contiguous
	ldi	$1, JOB_REPLY
	vinsw	$1, $2, DESC_REPLY, $2
	ldi	$3, JOB
	DMA_WAIT $2, $16, $3, JOB_REPLY
	rcid	$9
	ldl	$13, JOB + J_CPES($31)
	ldl	$10, JOB + J_CHUNKS($31)
	clr	$11
	cmplt	$9, $10, $1
	beq	$1, .Ldone
	mov	$9, $16
	clr	$17
	clr	$18
	bsr	$26, transfer
.Lchunk:
	addl	$9, $13, $12
	cmplt	$12, $10, $1
	beq	$1, 1f
	mov	$12, $16
	xor	$11, 1, $17
	clr	$18
	bsr	$26, transfer         # the next chunk's gets
1:	AWAIT	GET_REPLY, GET_ISSUED, $11
	AWAIT	PUT_REPLY, PUT_ISSUED, $11
	COUNT	$9, $17
	mull	$11, FRAME_BYTES, $16
	ldi	$16, JOB + J_FRAME($16)
	ldl	$27, JOB + J_BODY($31)
	call	$26, ($27), 0
	mov	$9, $16
	mov	$11, $17
	ldi	$18, 1
	bsr	$26, transfer         # this chunk's puts
	xor	$11, 1, $11
	mov	$12, $9
	cmplt	$9, $10, $1
	bne	$1, .Lchunk
.Ldone:
	AWAIT	PUT_REPLY, PUT_ISSUED, $31
	ldi	$4, 1
	AWAIT	PUT_REPLY, PUT_ISSUED, $4
	ldl	$26, 0($sp)
	ldi	$sp, FRAME_SIZE($sp)
	ret
	.end	stream_run

# ---- bodies ----------------------------------------------------------------------------------
# ELEMENTWISE name, nin, nout, op: the body routines name_s (f32) and name_d (f64). Per vector
# of 4 elements they load in0..in(nin-1) into $20-$22, run the macro `op` with the parameters
# J_P[0..3] in every lane of $5-$8, and store out0 from $23 (and out1 from $24).
	.macro	ELEMENTWISE name, nin, nout, op
	BODY	\name\()_s, \nin, \nout, \op, vlds, vsts, 16
	BODY	\name\()_d, \nin, \nout, \op, vldd, vstd, 32
	.endm

	.macro	BODY label, nin, nout, op, load, store, step
	.globl	\label
	.ent	\label
\label:
	ldl	$1, 0($16)            # in0, in1, in2
	ldl	$2, 8($16)
	ldl	$3, 16($16)
	ldl	$4, FRAME_OUT($16)    # out0, out1
	ldl	$25, FRAME_OUT + 8($16)
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
	ret
	.end	\label
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
