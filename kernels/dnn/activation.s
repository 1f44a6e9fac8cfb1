# Element-wise activation operators as bodies of the streaming driver (stream.s, linked after
# this file; swDNN §5.3: memory bound, data parallel, no register communication). docs/dnn.md
# describes them; hostlib/dnn/activation.py is the host side. The driver's element-wise plan
# (elementwise_plan) moves the chunks: in0 = x (forward, relu backward) or y (sigmoid, tanh
# backward), in1 = dy (backward only), out0 = the result.
#
#   act_exp_{s,d}               out = exp(x)
#   act_relu_{s,d}              out = max(x, 0)          (NaN stays NaN, -0 -> +0)
#   act_sigmoid_{s,d}           out = 1 / (1 + exp(-x))
#   act_tanh_{s,d}              out = tanh(x)
#   act_relu_backward_{s,d}     out = dy if x > 0 else 0          (in0 = x)
#   act_sigmoid_backward_{s,d}  out = dy y (1 - y)                (in0 = y)
#   act_tanh_backward_{s,d}     out = dy (1 - y^2)                (in0 = y)
#
# A chunk may end inside a vector: the routines compute whole vectors (the buffers are whole
# lines; the lanes past the end are never put).

	.set	noreorder
	.include "stream.inc"

	.ldm
	.align	5
ACT_SAVE:                     # KEEP_DRIVER's area (vmath.inc's routines clobber everything)
	.skip	64

	.include "vmath.inc"

	.text
# ACT_BODY name, routine: the body act_<name> running the LDM routine `routine` (vmath.inc's
# arguments: $16 in, $17 out, $18 vectors; and $19 dy) over the unit's elements.
	.macro	ACT_BODY name, routine
	.globl	act_\name
	.ent	act_\name
act_\name:
	KEEP_DRIVER ACT_SAVE
	addl	$17, 3, $18
	srl	$18, 2, $18           # vectors
	ldl	$19, 8($16)           # in1: dy
	ldl	$17, 8 * STREAM_OUT($16)
	ldl	$16, 0($16)
	bsr	$26, \routine
	RESUME_DRIVER ACT_SAVE
	ret
	.end	act_\name
	.endm

	.irp	sfx, s, d
	ACT_BODY exp_\sfx, vexp_\sfx
	ACT_BODY sigmoid_\sfx, vsigmoid_\sfx
	ACT_BODY tanh_\sfx, vtanh_\sfx
	ACT_BODY relu_\sfx, relu_\sfx
	ACT_BODY relu_backward_\sfx, relu_backward_\sfx
	ACT_BODY sigmoid_backward_\sfx, sigmoid_backward_\sfx
	ACT_BODY tanh_backward_\sfx, tanh_backward_\sfx
	.endr

# ---- the element-wise routines besides vmath.inc's (same arguments, $19 = dy) ----------------
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
