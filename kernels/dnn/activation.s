# Element-wise activation operators over arrays in main memory (swDNN §5.3: memory bound, data
# parallel, no register communication). docs/dnn.md describes them; hostlib/dnn/activation.py
# is the host side.
#
#   OP_EXP              out = exp(x)
#   OP_RELU             out = max(x, 0)          (NaN stays NaN, -0 -> +0)
#   OP_SIGMOID          out = 1 / (1 + exp(-x))
#   OP_TANH             out = tanh(x)
#   OP_RELU_BACKWARD    out = dy if x > 0 else 0          (in = x)
#   OP_SIGMOID_BACKWARD out = dy y (1 - y)                (in = y)
#   OP_TANH_BACKWARD    out = dy (1 - y^2)                (in = y)
#
# The array (n elements of es = 4 or 8 bytes) is cut into BLOCK_BYTES blocks; block b belongs
# to CPE b mod 64, so every DMA but the last is a whole aligned block. Each CPE double-buffers:
# while it computes block j, the gets of block j+1 and the put of block j-1 are in flight. Each
# buffer has its own reply words, so the completions of different blocks are never confused.
# The last block may end inside a vector: the routines compute whole vectors (the lanes past
# the end hold stale LDM data and are never written back).
#
# Argument: a0 = the job (JOB_BYTES in main memory, int64 fields J_*).

	.set	noreorder
	.include "../include/dma.inc"

	J_N = 0               # number of elements, >= 1
	J_ES = 8              # element bytes: 4 (float32) or 8 (float64)
	J_OP = 16             # OP_*
	J_IN = 24             # x (forward, relu backward) or y (sigmoid, tanh backward)
	J_DY = 32             # dy (backward only)
	J_OUT = 40            # the result
	JOB_BYTES = 48

	OP_EXP = 0
	OP_RELU = 1
	OP_SIGMOID = 2
	OP_TANH = 3
	OP_RELU_BACKWARD = 4  # from here on two inputs (in and dy)
	OP_SIGMOID_BACKWARD = 5
	OP_TANH_BACKWARD = 6
	NUM_OPS = 7

	BLOCK_SHIFT = 13
	BLOCK_BYTES = 1 << BLOCK_SHIFT
	NUM_CPES = 64

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
JOB_REPLY:
	.word	0
	.align	3
RET:	.quad	0             # return address
MY_ID:	.quad	0
MY_BLOCKS:
	.quad	0             # blocks of this CPE
NBYTES:	.quad	0             # n es
NINPUTS:
	.quad	0             # 1 or 2 gets per block
ROUTINE:
	.quad	0             # the element-wise routine for this job
J:	.quad	0             # the block being computed (this CPE's count)
GET_REPLY:
	.word	0, 0          # per buffer: completed gets and puts
PUT_REPLY:
	.word	0, 0
# The element-wise routines by op, float64 then float32 (a0 in, a1 out, a2 vectors, a3 dy).
ROUTINES:
	.quad	vexp_d, vexp_s
	.quad	relu_d, relu_s
	.quad	vsigmoid_d, vsigmoid_s
	.quad	vtanh_d, vtanh_s
	.quad	relu_backward_d, relu_backward_s
	.quad	sigmoid_backward_d, sigmoid_backward_s
	.quad	tanh_backward_d, tanh_backward_s

	.bss
	.align	7
IN_BUF:	.skip	2 * BLOCK_BYTES
DY_BUF:	.skip	2 * BLOCK_BYTES
OUT_BUF:
	.skip	2 * BLOCK_BYTES
	.globl	activation_ldm_end    # the kernel places its buffers itself; nothing follows
activation_ldm_end:

	.include "vmath.inc"

	.text
	.globl	activation
	.ent	activation
activation:
	stl	$26, RET($31)
	FETCH_JOB $1, $2, JOB_REPLY
	rcid	$1
	stl	$1, MY_ID($31)
	ldl	$2, JOB + J_N($31)
	ldl	$3, JOB + J_ES($31)
	mull	$2, $3, $2
	stl	$2, NBYTES($31)
	ldi	$4, BLOCK_BYTES - 1
	addl	$2, $4, $2
	srl	$2, BLOCK_SHIFT, $2      # blocks
	ldi	$4, NUM_CPES - 1
	addl	$2, $4, $2
	subl	$2, $1, $2
	srl	$2, 6, $2                # this CPE's: ceil((blocks - id) / 64)
	stl	$2, MY_BLOCKS($31)
	beq	$2, .Lreturn
	ldl	$4, JOB + J_OP($31)      # the routine: ROUTINES[2 op + (es == 4)]
	cmpeq	$3, 4, $5
	s8addl	$4, $31, $6
	s8addl	$5, $6, $6
	s8addl	$4, $6, $6
	ldl	$6, ROUTINES($6)
	stl	$6, ROUTINE($31)
	cmplt	$4, OP_RELU_BACKWARD, $5
	ldi	$6, 2
	subl	$6, $5, $6
	stl	$6, NINPUTS($31)
	stl	$31, J($31)
	mov	$31, $16
	bsr	$26, fetch               # block 0 into buffer 0
.Lblock:
	ldl	$1, J($31)
	ldl	$2, MY_BLOCKS($31)
	addl	$1, 1, $16
	cmplt	$16, $2, $3
	beq	$3, 1f
	bsr	$26, fetch               # block j+1 into the other buffer
1:	ldl	$1, J($31)
	and	$1, 1, $2                # buffer
	srl	$1, 1, $3
	addl	$3, 1, $4
	ldl	$5, NINPUTS($31)
	mull	$4, $5, $4               # gets expected on this buffer
	s4addl	$2, $31, $6
2:	ldw	$7, GET_REPLY($6)
	cmplt	$7, $4, $7
	bne	$7, 2b
3:	ldw	$7, PUT_REPLY($6)        # the put of block j-2 has read the output buffer
	cmplt	$7, $3, $7
	bne	$7, 3b
	bsr	$26, block_bytes         # $0 = bytes of block j
	ldl	$3, JOB + J_ES($31)
	cmpeq	$3, 4, $3
	ldi	$4, 5
	subl	$4, $3, $4               # log2 of the vector bytes 4 es
	ldi	$18, 1
	sll	$18, $4, $18
	addl	$0, $18, $18
	subl	$18, 1, $18
	srl	$18, $4, $18             # vectors: ceil(bytes / (4 es))
	ldl	$1, J($31)
	and	$1, 1, $2
	sll	$2, BLOCK_SHIFT, $2
	ldi	$16, IN_BUF($2)
	ldi	$17, OUT_BUF($2)
	ldi	$19, DY_BUF($2)
	ldl	$27, ROUTINE($31)
	call	$26, ($27), 0
	bsr	$26, block_bytes         # the put of block j
	ldl	$1, J($31)
	and	$1, 1, $2
	s4addl	$2, $31, $4
	MAKE_DESC $3, DMA_PUT, 0($0), PUT_REPLY($4)
	bsr	$26, block_offset
	ldl	$4, JOB + J_OUT($31)
	addl	$4, $0, $4
	sll	$2, BLOCK_SHIFT, $5
	ldi	$5, OUT_BUF($5)
	dma	$3, $4, $5
	ldl	$1, J($31)
	ldl	$2, MY_BLOCKS($31)
	addl	$1, 1, $1
	stl	$1, J($31)
	cmplt	$1, $2, $3
	bne	$3, .Lblock
	addl	$2, 1, $3                # wait for the last puts: ceil(blocks/2), floor(blocks/2)
	srl	$3, 1, $3
	srl	$2, 1, $4
4:	ldw	$5, PUT_REPLY($31)
	cmplt	$5, $3, $5
	bne	$5, 4b
5:	ldw	$5, PUT_REPLY + 4($31)
	cmplt	$5, $4, $5
	bne	$5, 5b
.Lreturn:
	ldl	$26, RET($31)
	ret
	.end	activation

# block_offset: $0 = byte offset of this CPE's block J in the array. Clobbers $0, $28.
	.ent	block_offset
block_offset:
	ldl	$0, J($31)
	ldl	$28, MY_ID($31)
	sll	$0, 6, $0
	addl	$0, $28, $0
	sll	$0, BLOCK_SHIFT, $0
	ret
	.end	block_offset

# block_bytes: $0 = bytes of this CPE's block J: min(BLOCK_BYTES, NBYTES - offset).
# Clobbers $0, $25, $28.
	.ent	block_bytes
block_bytes:
	mov	$26, $25
	bsr	$26, block_offset
	mov	$25, $26
	ldl	$28, NBYTES($31)
	subl	$28, $0, $0
	ldi	$28, BLOCK_BYTES
	cmplt	$0, $28, $25
	seleq	$25, $28, $0, $0
	ret
	.end	block_bytes

# fetch(j = $16): issue the gets of block j into buffer j & 1. Clobbers $0-$7, $16, $25, $28.
	.ent	fetch
fetch:
	mov	$26, $7
	ldl	$6, J($31)
	stl	$16, J($31)              # block_* work on J
	bsr	$26, block_bytes
	and	$16, 1, $2
	s4addl	$2, $31, $3
	MAKE_DESC $1, DMA_GET, 0($0), GET_REPLY($3)
	sll	$2, BLOCK_SHIFT, $2
	bsr	$26, block_offset
	ldl	$3, JOB + J_IN($31)
	addl	$3, $0, $3
	ldi	$4, IN_BUF($2)
	dma	$1, $3, $4
	ldl	$5, NINPUTS($31)
	cmpeq	$5, 2, $5
	beq	$5, 1f
	ldl	$3, JOB + J_DY($31)
	addl	$3, $0, $3
	ldi	$4, DY_BUF($2)
	dma	$1, $3, $4
1:	stl	$6, J($31)
	mov	$7, $26
	ret
	.end	fetch

# ---- the element-wise routines besides vmath.inc's (same arguments) --------------------------
# kind: 0 relu forward, 1 relu backward (per
# element, on the integer bits), 2 sigmoid backward, 3 tanh backward (per vector, in double,
# rounded once to the element type by the store).
# relu forward: zero the elements whose sign is set unless they are NaN: bits + SIGN <= INF
# (unsigned) exactly for -0 .. -inf. relu backward: dx = dy where x > 0, i.e.
# 0 < bits <= INF, i.e. bits - 1 < INF unsigned.
	.macro	ELEMENTWISE name, ld, st, step, kind, sign_shift=0, inf=0, inf_shift=0
	.ent	\name
\name:
	.if \kind / 2
	ldde	$1, VM_ONE($31)
	.else
	sll	$18, 2, $18              # elements
	ldi	$1, 1
	sll	$1, \sign_shift, $1
	ldi	$2, \inf
	sll	$2, \inf_shift, $2
	.endif
	ble	$18, 2f
1:	\ld	$3, 0($16)
	.if \kind
	\ld	$5, 0($19)
	.endif
	ELEMENTWISE_BODY \kind
	addl	$16, \step, $16
	addl	$19, \step, $19
	subl	$18, 1, $18
	\st	$3, 0($17)
	addl	$17, \step, $17
	bgt	$18, 1b
2:	ret
	.end	\name
	.endm

# $3 = x or y (the result goes back to $3), $5 = dy, $1/$2 = constants.
	.macro	ELEMENTWISE_BODY kind
	.if \kind / 2
	.if \kind & 1
	vnmad	$3, $3, $1, $4           # 1 - y^2
	.else
	vsubd	$1, $3, $4
	vmuld	$4, $3, $4               # y (1 - y)
	.endif
	vmuld	$4, $5, $3
	.elseif \kind
	subl	$3, 1, $4
	cmpult	$4, $2, $4
	selne	$4, $5, $31, $3
	.else
	addl	$3, $1, $4
	cmpule	$4, $2, $4
	selne	$4, $31, $3, $3
	.endif
	.endm
	ELEMENTWISE relu_d, ldl, stl, 8, 0, 63, 0x7FF, 52
	ELEMENTWISE relu_s, ldw, stw, 4, 0, 31, 0x7F8, 20
	ELEMENTWISE relu_backward_d, ldl, stl, 8, 1, 63, 0x7FF, 52
	ELEMENTWISE relu_backward_s, ldw, stw, 4, 1, 31, 0x7F8, 20
	ELEMENTWISE sigmoid_backward_d, vldd, vstd, 32, 2
	ELEMENTWISE sigmoid_backward_s, vlds, vsts, 16, 2
	ELEMENTWISE tanh_backward_d, vldd, vstd, 32, 3
	ELEMENTWISE tanh_backward_s, vlds, vsts, 16, 3
