# Softmax with cross-entropy loss on the streaming driver (stream.s; docs/dnn.md "Softmax with
# cross-entropy loss"); hostlib/dnn/softmax.py is the host side.
#
# softmax_plan / softmax_xent_{s,d}: a unit is one row of the logits (B, C). Streams: in0 the
# row (C elements), in1 its label (int32), in2 a scratch buffer of C doubles (nothing moved),
# out0 the row of dlogits = (softmax - onehot) / B, out1 the row's loss (double)
# log(sum exp(x - max)) - (x_label - max). Everything is computed in double (f32 rounded once
# by the stores); exp by vmath.inc's vexp_d, log by log_d below.
# reduce_plan / reduce_{s,d}: unit u sums the doubles [u K, min(N, (u + 1) K)) of in0 and
# stores the sum / J_P[0] to out0[u] (double for _d, rounded to f32 for _s). The host runs
# passes until one value is left, the last dividing by B: the mean loss.
#
# Linked before stream.s (stream.inc has the driver's interface).

	.set	noreorder

	.ldm
	.align	5
SM_VEC:	.skip	32            # a vector's lanes, summed by scalar loads
SM_SAVE:			# KEEP_DRIVER's area (across vexp_d)
	.skip	64
SM_PTRS:	.skip	48      # x, label, scratch, dlogits, loss, count
SM_MAX:	.quad	0
SM_ONE:	.double	1.0
SM_SQRT2_FRAC:
	.quad	0x6A09E667F3BCD       # fraction bits of sqrt(2)
SM_LN2HI:	.quad	0x3FE62E42FEFA39EF
SM_LN2LO:	.quad	0x3C7ABC9E3B39803F
SM_ATANH:			# 1 / (2j + 1), j = 11 .. 1: log(m) = 2f (1 + f^2/3 + f^4/5 + ...)
	.double	0.043478260869565216, 0.047619047619047616, 0.05263157894736842
	.double	0.058823529411764705, 0.06666666666666667, 0.07692307692307693
	.double	0.09090909090909091, 0.1111111111111111, 0.14285714285714285
	.double	0.2, 0.3333333333333333
	SM_ATANH_TERMS = 11

	.include "vmath.inc"
	.include "stream.inc"

	X_C = 0               # J_X words: softmax: classes
	X_N = 0               # reduce: values, values per unit
	X_K = 8

	.text

# log_d: $0 = log($16) for a positive normal double or NaN (NaN -> NaN), in double.
# $16 = 2^k m with m in [sqrt(1/2), sqrt(2)); f = (m - 1) / (m + 1) (m - 1 exact),
# log m = 2 atanh f by its series to f^23 (|f| <= 0.1716: truncation < 2^-60 relative),
# log = k LN2HI + (k LN2LO + log m). Leaf; clobbers $0-$8, $16, $28.
	.globl	log_d
	.ent	log_d
log_d:
	fimovd	$16, $1
	srl	$1, 52, $2            # biased exponent
	sll	$1, 12, $3
	srl	$3, 12, $3            # fraction
	ldl	$4, SM_SQRT2_FRAC($31)
	cmplt	$4, $3, $4            # m > sqrt(2): halve m, k + 1
	ldi	$5, 1023
	subl	$5, $4, $5
	sll	$5, 52, $5
	bis	$3, $5, $3
	ifmovd	$3, $3                # m
	ldi	$5, 1023
	subl	$2, $5, $2
	addl	$2, $4, $2            # k
	ifmovd	$2, $2
	fcvtld	$2, $2                # k as a double
	ldl	$5, SM_ONE($31)
	fsubd	$3, $5, $6            # m - 1 (exact)
	faddd	$3, $5, $7
	fdivd	$6, $7, $6            # f
	faddd	$6, $6, $6            # u = 2f
	fmuld	$6, $6, $7
	ldi	$1, 0x3FD
	sll	$1, 52, $1
	ifmovd	$1, $1                # 0.25
	fmuld	$7, $1, $7            # t = f^2
	ldl	$5, SM_ATANH($31)       # q = 1/23
	ldi	$28, SM_ATANH + 8($31)
	ldi	$8, SM_ATANH_TERMS - 1
1:	ldl	$4, 0($28)
	fmad	$5, $7, $4, $5        # q = q t + 1/(2j + 1)
	ldi	$28, 8($28)
	subl	$8, 1, $8
	bgt	$8, 1b
	fmuld	$5, $7, $5            # q t
	fmad	$6, $5, $6, $5        # log m = u + u q t
	ldl	$4, SM_LN2LO($31)
	fmad	$2, $4, $5, $5
	ldl	$4, SM_LN2HI($31)
	fmad	$2, $4, $5, $0
	fcmpeq	$16, $16, $1
	seleq	$1, $16, $0, $0       # NaN in, NaN out
	ret
	.end	log_d

# softmax_plan(row $16, record $17).
	.globl	softmax_plan
	.ent	softmax_plan
softmax_plan:
	ldl	$1, JOB + J_X + X_C($31)
	stl	$1, U_COUNT($17)
	ldl	$2, JOB + J_ES($31)
	mull	$1, $2, $2            # row bytes
	mull	$16, $2, $3
	ldl	$4, JOB + J_IN($31)
	addl	$4, $3, $4
	stl	$4, U_ADDR($17)
	stl	$2, U_BYTES($17)
	ldl	$4, JOB + J_OUT($31)
	addl	$4, $3, $4
	stl	$4, U_ADDR + 8 * STREAM_OUT($17)
	stl	$2, U_BYTES + 8 * STREAM_OUT($17)
	ldl	$4, JOB + J_IN + 8($31)   # the labels, int32
	s4addl	$16, $4, $4
	stl	$4, U_ADDR + 8($17)
	ldi	$5, 4
	stl	$5, U_BYTES + 8($17)
	stl	$31, U_BYTES + 16($17)    # in2: scratch only
	ldl	$4, JOB + J_OUT + 8($31)  # the row losses, double
	s8addl	$16, $4, $4
	stl	$4, U_ADDR + 8 * STREAM_OUT + 8($17)
	ldi	$5, 8
	stl	$5, U_BYTES + 8 * STREAM_OUT + 8($17)
	ret
	.end	softmax_plan

# MAX_STEP m, v, t: m = v when m < v (t a temporary). A NaN in the row need not win: it
# reaches the row sum, and with it the loss and every gradient element, either way.
# MAX_STEP8: eight independent ones (m0 v0 t0 m1 v1 t1 ...), interleaved to hide the
# compare's latency.
	.macro	MAX_STEP m, v, t
	fcmplt	\m, \v, \t
	selne	\t, \v, \m, \m
	.endm

	.macro	MAX_STEP8 m0, v0, t0, m1, v1, t1, m2, v2, t2, m3, v3, t3, m4, v4, t4, m5, v5, t5, m6, v6, t6, m7, v7, t7
	fcmplt	\m0, \v0, \t0
	fcmplt	\m1, \v1, \t1
	fcmplt	\m2, \v2, \t2
	fcmplt	\m3, \v3, \t3
	fcmplt	\m4, \v4, \t4
	fcmplt	\m5, \v5, \t5
	fcmplt	\m6, \v6, \t6
	fcmplt	\m7, \v7, \t7
	selne	\t0, \v0, \m0, \m0
	selne	\t1, \v1, \m1, \m1
	selne	\t2, \v2, \m2, \m2
	selne	\t3, \v3, \m3, \m3
	selne	\t4, \v4, \m4, \m4
	selne	\t5, \v5, \m5, \m5
	selne	\t6, \v6, \m6, \m6
	selne	\t7, \v7, \m7, \m7
	.endm

# SOFTMAX label, load, store, vload, vstore, shift: the body for elements of 1 << shift bytes.
	.macro	SOFTMAX label, load, store, vload, vstore, shift
	.globl	\label
	.ent	\label
\label:
	KEEP_DRIVER SM_SAVE
	ldl	$1, 0($16)            # x
	ldl	$2, 8($16)            # label
	ldl	$3, 16($16)           # scratch
	ldl	$4, 8 * STREAM_OUT($16)
	ldl	$5, 8 * STREAM_OUT + 8($16)
	stl	$1, SM_PTRS($31)
	stl	$2, SM_PTRS + 8($31)
	stl	$3, SM_PTRS + 16($31)
	stl	$4, SM_PTRS + 24($31)
	stl	$5, SM_PTRS + 32($31)
	stl	$17, SM_PTRS + 40($31)
	\load	$6, 0($1)             # the row's maximum, eight chains
	.irp	m, 9, 10, 11, 12, 13, 14, 15
	mov	$6, $\m
	.endr
	mov	$1, $7
	srl	$17, 3, $8
	beq	$8, 2f
1:
	\load	$18, 0 << \shift($7)
	\load	$19, 1 << \shift($7)
	\load	$20, 2 << \shift($7)
	\load	$21, 3 << \shift($7)
	\load	$22, 4 << \shift($7)
	\load	$23, 5 << \shift($7)
	\load	$24, 6 << \shift($7)
	\load	$25, 7 << \shift($7)
	MAX_STEP8 $6, $18, $0, $9, $19, $1, $10, $20, $2, $11, $21, $3, $12, $22, $4, $13, $23, $5, $14, $24, $27, $15, $25, $28
	ldi	$7, 8 << \shift($7)
	subl	$8, 1, $8
	bgt	$8, 1b
2:	and	$17, 7, $8            # the rest, on chain 0
	beq	$8, 4f
3:	\load	$20, 0($7)
	MAX_STEP $6, $20, $0
	ldi	$7, 1 << \shift($7)
	subl	$8, 1, $8
	bgt	$8, 3b
4:
	.irp	m, 9, 10, 11, 12, 13, 14, 15
	MAX_STEP $6, $\m, $0
	.endr
	ldl	$1, SM_PTRS($31)
	ldl	$3, SM_PTRS + 16($31)
	fstd	$6, SM_MAX($31)
	ldde	$6, SM_MAX($31)
	addl	$17, 3, $18
	srl	$18, 2, $18           # vectors
	mov	$18, $8
	mov	$1, $7
	mov	$3, $19
	and	$8, 3, $9             # z = x - max: n mod 4 single vectors, then fours
	beq	$9, 8f
3:	\vload	$20, 0($7)
	vsubd	$20, $6, $20
	vstd	$20, 0($19)
	ldi	$7, 4 << \shift($7)
	ldi	$19, 32($19)
	subl	$9, 1, $9
	bgt	$9, 3b
8:	srl	$8, 2, $8
	beq	$8, 9f
3:	\vload	$20, 0($7)
	\vload	$21, 4 << \shift($7)
	\vload	$22, 8 << \shift($7)
	\vload	$23, 12 << \shift($7)
	vsubd	$20, $6, $20
	vsubd	$21, $6, $21
	vsubd	$22, $6, $22
	vsubd	$23, $6, $23
	vstd	$20, 0($19)
	vstd	$21, 32($19)
	vstd	$22, 64($19)
	vstd	$23, 96($19)
	ldi	$7, 16 << \shift($7)
	ldi	$19, 128($19)
	subl	$8, 1, $8
	bgt	$8, 3b
9:
	mov	$3, $16
	mov	$3, $17
	bsr	$26, vexp_d
	ldl	$3, SM_PTRS + 16($31)
	ldl	$17, SM_PTRS + 40($31)
	addl	$17, 3, $18
	srl	$18, 2, $18
	s8addl	$17, $3, $7           # zero the lanes past C
	sll	$18, 5, $8
	addl	$8, $3, $8
	br	5f
4:	stl	$31, 0($7)
	ldi	$7, 8($7)
5:	cmplt	$7, $8, $21
	bne	$21, 4b
	vaddd	$31, $31, $20         # four partial sums: n mod 4 single vectors into the
	vaddd	$31, $31, $21         # first, then fours
	vaddd	$31, $31, $22
	vaddd	$31, $31, $23
	mov	$3, $7
	and	$18, 3, $8
	beq	$8, 8f
6:	vldd	$24, 0($7)
	vaddd	$20, $24, $20
	ldi	$7, 32($7)
	subl	$8, 1, $8
	bgt	$8, 6b
8:	srl	$18, 2, $8
	beq	$8, 9f
6:	vldd	$24, 0($7)
	vldd	$25, 32($7)
	vldd	$27, 64($7)
	vldd	$28, 96($7)
	vaddd	$20, $24, $20
	vaddd	$21, $25, $21
	vaddd	$22, $27, $22
	vaddd	$23, $28, $23
	ldi	$7, 128($7)
	subl	$8, 1, $8
	bgt	$8, 6b
9:	vaddd	$20, $21, $20         # (p0 + p1) + (p2 + p3)
	vaddd	$22, $23, $22
	vaddd	$20, $22, $20
	vstd	$20, SM_VEC($31)
	fldd	$20, SM_VEC($31)
	fldd	$21, SM_VEC + 8($31)
	fldd	$22, SM_VEC + 16($31)
	fldd	$23, SM_VEC + 24($31)
	faddd	$20, $21, $20
	faddd	$22, $23, $22
	faddd	$20, $22, $16         # s = sum exp(x - max)
	fstd	$16, SM_VEC($31)
	bsr	$26, log_d
	ldl	$1, SM_PTRS($31)
	ldl	$2, SM_PTRS + 8($31)
	ldl	$5, SM_PTRS + 32($31)
	ldw	$2, 0($2)             # label
	sll	$2, \shift, $6
	addl	$1, $6, $6
	\load	$6, 0($6)
	fldd	$7, SM_MAX($31)
	fsubd	$6, $7, $6            # z_label
	fsubd	$0, $6, $0
	fstd	$0, 0($5)             # the row's loss
	fldd	$16, SM_VEC($31)
	ldl	$7, SM_ONE($31)
	fdivd	$7, $16, $7           # 1 / s
	fstd	$7, SM_VEC($31)
	ldde	$6, SM_VEC($31)
	ldde	$8, JOB + J_P($31)    # 1 / B
	ldl	$3, SM_PTRS + 16($31)
	ldl	$4, SM_PTRS + 24($31)
	mov	$3, $19
	mov	$4, $20
	and	$18, 3, $9            # softmax / B: n mod 4 single vectors, then fours
	beq	$9, 8f
7:	vldd	$21, 0($19)
	vmuld	$21, $6, $21
	vmuld	$21, $8, $21
	\vstore	$21, 0($20)
	ldi	$19, 32($19)
	ldi	$20, 4 << \shift($20)
	subl	$9, 1, $9
	bgt	$9, 7b
8:	srl	$18, 2, $18
	beq	$18, 9f
7:	vldd	$21, 0($19)
	vldd	$22, 32($19)
	vldd	$23, 64($19)
	vldd	$24, 96($19)
	vmuld	$21, $6, $21          # softmax
	vmuld	$22, $6, $22
	vmuld	$23, $6, $23
	vmuld	$24, $6, $24
	vmuld	$21, $8, $21          # / B
	vmuld	$22, $8, $22
	vmuld	$23, $8, $23
	vmuld	$24, $8, $24
	\vstore	$21, 0($20)
	\vstore	$22, 4 << \shift($20)
	\vstore	$23, 8 << \shift($20)
	\vstore	$24, 12 << \shift($20)
	ldi	$19, 128($19)
	ldi	$20, 16 << \shift($20)
	subl	$18, 1, $18
	bgt	$18, 7b
9:
	s8addl	$2, $3, $19           # the label's element: (softmax - 1) / B
	fldd	$21, 0($19)
	fmuld	$21, $7, $21
	ldl	$22, SM_ONE($31)
	fsubd	$21, $22, $21
	fldd	$8, JOB + J_P($31)
	fmuld	$21, $8, $21
	sll	$2, \shift, $2
	addl	$4, $2, $4
	\store	$21, 0($4)
	RESUME_DRIVER SM_SAVE
	ret
	.end	\label
	.endm
	SOFTMAX	softmax_xent_s, flds, fsts, vlds, vsts, 2
	SOFTMAX	softmax_xent_d, fldd, fstd, vldd, vstd, 3

# reduce_plan(unit $16, record $17): in0 = values [u K, min(N, u K + K)) (doubles),
# out0 = element u of ES bytes.
	.globl	reduce_plan
	.ent	reduce_plan
reduce_plan:
	ldl	$1, JOB + J_X + X_K($31)
	mull	$16, $1, $2           # first value
	ldl	$3, JOB + J_X + X_N($31)
	subl	$3, $2, $3
	cmplt	$3, $1, $4
	seleq	$4, $1, $3, $3        # count = min(K, N - first)
	stl	$3, U_COUNT($17)
	s8addl	$3, $31, $3
	stl	$3, U_BYTES($17)
	ldl	$4, JOB + J_IN($31)
	s8addl	$2, $4, $4
	stl	$4, U_ADDR($17)
	ldl	$5, JOB + J_ES($31)
	stl	$5, U_BYTES + 8 * STREAM_OUT($17)
	mull	$16, $5, $5
	ldl	$4, JOB + J_OUT($31)
	addl	$4, $5, $4
	stl	$4, U_ADDR + 8 * STREAM_OUT($17)
	ret
	.end	reduce_plan

# REDUCE label, store: out0 = (sum of the unit's doubles, in order) / J_P[0].
	.macro	REDUCE label, store
	.globl	\label
	.ent	\label
\label:
	ldl	$1, 0($16)
	ldl	$2, 8 * STREAM_OUT($16)
	fldd	$3, 0($1)
	br	2f
1:	fldd	$4, 0($1)
	faddd	$3, $4, $3
2:	ldi	$1, 8($1)
	subl	$17, 1, $17
	bgt	$17, 1b
	fldd	$4, JOB + J_P($31)
	fdivd	$3, $4, $3
	\store	$3, 0($2)
	ret
	.end	\label
	.endm
	REDUCE	reduce_s, fsts
	REDUCE	reduce_d, fstd
