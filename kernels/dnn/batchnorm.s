# Batch normalisation on the streaming driver (stream.s, linked after this file; docs/dnn.md
# "Batch normalisation"); hostlib/dnn/batchnorm.py is the host side and chains the launches.
# x is (B, C, H, W); its elements are cut into *pieces* of at most a few KiB, three ways:
#   channels (X_K = -M): the planes of M consecutive channels of one image, one contiguous DMA
#     (small planes of a multiple of 4 elements: whole vectors per plane);
#   planes (X_K = K > 0): K planes of one channel, one strided DMA (blocks of H W elements,
#     C - 1 planes skipped);
#   segments (X_K = 0): a segment of one plane, when a plane is larger than a piece.
# Any shape fits: nothing holds a whole channel. bn_planes runs a body once per channel plane
# of the piece (once for the other two ways), stepping every stream.
#
# Launches (unit = piece, or channel / group of records), everything in double:
#   forward, training:  bn_stats (per piece: count, mean, M2 = sum (x - mean)^2)
#                       bn_fold_stats (Chan et al.'s pairwise update, records in order) until
#                       one record per channel is left
#   forward:            bn_finish_forward (per channel: the statistics, or the running ones in
#                       inference; running averages; the apply record), bn_apply_forward
#                       y = (x - mean) (gamma invstd) + beta
#   backward:           bn_backward_stats (per piece: count, sum dy, sum dy (x - mean)),
#                       bn_fold_sums, bn_finish_backward (dgamma, dbeta; the apply record),
#                       bn_apply_backward dx = gamma invstd (dy - dbeta/N - xhat dgamma/N)
# The records between launches are doubles: REC_BYTES (4 doubles) per piece or channel,
# APPLY_BYTES (8 doubles) per channel. The folds combine records in a fixed order, so the
# results do not depend on how many core groups share the units.

	.set	noreorder
	.include "stream.inc"
	.include "batchnorm.inc"

	X_B = 0               # J_X words: batch, H W, channels
	X_HW = 8
	X_C = 16
	X_PPC = 24            # units per channel (unit u: channel u / PPC, piece u mod PPC)
	X_K = 32              # planes per piece, 0: segments of one plane
	X_SEG = 40            # segment mode: elements per segment, segments per plane
	X_SEGS = 48
	X_G = 56              # fold: records per group, records per channel
	X_RECS = 64
	X_KIND = 72           # per stream (in0-2, out0-1): bytes << 3 | mode
	X_INNER = 112         # bn_planes: the body it runs per plane
	X_RSC = X_SEG         # fold: record strides between channels and within a channel
	X_RSR = X_SEGS
	UX_PLANES = 0         # unit word: the piece's channel planes (records)

	MODE_NONE = 0
	MODE_PIECE = 1        # the unit's piece of an x-shaped array
	MODE_CHANNEL = 2      # a record of `bytes` per channel
	MODE_UNIT = 3         # a record of `bytes` per channel plane of the unit
	MODE_GROUP = 4        # fold: the unit's group of records of `bytes` (count: the records,
	                      # X_RSR apart; channel c's first at c X_RSC)
	REC_BYTES = 32
	APPLY_BYTES = 64

	.ldm
	.align	5
BN_LANES:
	.skip	32            # a vector's lanes, summed by scalar loads
BN_BCAST:
	.skip	8             # a double, broadcast by ldde
BN_FRAME:
	.skip	8 * (STREAM_OUT + 1)  # bn_planes: the current plane's buffers (in0-2, out0),
BN_STEP:
	.skip	8 * (STREAM_OUT + 1)  # their steps, the count, planes left, return
BN_COUNT:
	.skip	8
BN_LEFT:
	.skip	8
BN_RA:
	.skip	8

	.text

# bn_plan(unit $16, record $17). $2 channel (channels: the first; folds: the channel), $3
# piece (group), $4 the piece's first element, $5 planes, $6 elements per plane, $7 es,
# $18-$20 the stream walk, $21 a stream's kind, $27 the unit's records.
	.globl	bn_plan
	.ent	bn_plan
bn_plan:
	ldl	$1, JOB + J_X + X_PPC($31)
	QUOTIENT $16, $1, $2
	mull	$2, $1, $3
	subl	$16, $3, $3
	ldl	$6, JOB + J_X + X_HW($31)
	ldi	$5, 1
	stl	$5, U_X + UX_PLANES($17)
	ldl	$7, JOB + J_X + X_K($31)
	blt	$7, 11f
	beq	$7, 1f
	mull	$3, $7, $8            # planes: b0 = piece K, min(K, B - b0) of them
	ldl	$5, JOB + J_X + X_B($31)
	subl	$5, $8, $5
	cmplt	$5, $7, $19
	seleq	$19, $7, $5, $5
	clr	$19                   # from the plane's start
	br	2f
11:	subl	$31, $7, $7           # channels: image b = $2, block $3 of M = -K channels
	mov	$2, $8
	mull	$3, $7, $2            # c0
	ldl	$5, JOB + J_X + X_C($31)
	subl	$5, $2, $5
	cmplt	$5, $7, $19
	seleq	$19, $7, $5, $5       # min(M, C - c0) planes
	stl	$5, U_X + UX_PLANES($17)
	clr	$19
	br	2f
1:	ldl	$18, JOB + J_X + X_SEGS($31)
	QUOTIENT $3, $18, $8          # segment: plane b0 = piece / SEGS, one of them
	mull	$8, $18, $19
	subl	$3, $19, $19
	ldl	$20, JOB + J_X + X_SEG($31)
	mull	$19, $20, $19         # from element seg SEG
	subl	$6, $19, $6
	cmplt	$6, $20, $21
	seleq	$21, $20, $6, $6      # min(SEG, HW - offset)
2:
	ldl	$18, JOB + J_X + X_C($31)
	mull	$8, $18, $4
	addl	$4, $2, $4
	ldl	$18, JOB + J_X + X_HW($31)
	mull	$4, $18, $4
	addl	$4, $19, $4           # (b0 C + c) HW + offset
	mull	$5, $6, $1
	ldl	$27, U_X + UX_PLANES($17)   # the records (channel planes) of the unit
	cmpeq	$27, 1, $24
	seleq	$24, $6, $1, $1
	stl	$1, U_COUNT($17)      # a plane's elements, or the piece's (a group's records, below)
	ldl	$7, JOB + J_ES($31)
	ldi	$18, JOB + J_IN($31)  # bases (J_OUT follows J_IN)
	ldi	$19, JOB + J_X + X_KIND($31)
	ldi	$20, 5
3:	ldl	$21, 0($19)
	and	$21, 7, $22           # mode
	srl	$21, 3, $21           # bytes
	ldl	$23, 0($18)
	stl	$31, U_BYTES($17)
	stl	$31, U_BLOCK($17)
	stl	$31, U_STRIDE($17)
	cmpeq	$22, MODE_PIECE, $24
	bne	$24, 4f
	cmpeq	$22, MODE_CHANNEL, $24
	bne	$24, 5f
	cmpeq	$22, MODE_UNIT, $24
	bne	$24, 6f
	cmpeq	$22, MODE_GROUP, $24
	bne	$24, 7f
	br	9f                    # none
4:	mull	$4, $7, $24           # piece
	addl	$23, $24, $23
	mull	$5, $6, $24
	mull	$24, $7, $24
	stl	$24, U_BYTES($17)
	ldl	$24, JOB + J_X + X_K($31)
	ble	$24, 8f               # channels, segments: contiguous
	cmpeq	$5, 1, $24
	bne	$24, 8f               # one plane
	ldl	$24, JOB + J_X + X_C($31)
	subl	$24, 1, $24
	beq	$24, 8f               # one channel: the planes touch
	mull	$24, $6, $24
	mull	$24, $7, $24
	stl	$24, U_STRIDE($17)    # the other channels' planes
	mull	$6, $7, $24
	stl	$24, U_BLOCK($17)
	br	8f
5:	mull	$2, $21, $24          # the piece's channels' records
	mull	$27, $21, $21
	br	10f
6:	ldl	$24, JOB + J_X + X_K($31)   # the unit's records: M per unit (channels), else one
	subl	$31, $24, $24
	cmple	$24, 0, $25
	selne	$25, 1, $24, $24
	mull	$16, $24, $24
	mull	$24, $21, $24
	mull	$27, $21, $21
	br	10f
7:	ldl	$24, JOB + J_X + X_G($31)   # records p G .. + min(G, RECS - p G) of channel c
	mull	$3, $24, $25
	ldl	$1, JOB + J_X + X_RECS($31)
	subl	$1, $25, $1
	cmplt	$1, $24, $8
	seleq	$8, $24, $1, $1
	stl	$1, U_COUNT($17)
	ldl	$8, JOB + J_X + X_RSR($31)
	mull	$25, $8, $25
	ldl	$24, JOB + J_X + X_RSC($31)
	mull	$2, $24, $24
	addl	$24, $25, $24
	mull	$24, $21, $24
	cmpeq	$8, 1, $25
	bne	$25, 12f
	subl	$8, 1, $8             # records X_RSR apart
	mull	$8, $21, $8
	stl	$8, U_STRIDE($17)
	stl	$21, U_BLOCK($17)
12:	mull	$1, $21, $21          # the group's bytes
10:	addl	$23, $24, $23
	stl	$21, U_BYTES($17)
8:	stl	$23, U_ADDR($17)
9:	ldi	$18, 8($18)
	ldi	$19, 8($19)
	ldi	$17, 8($17)
	subl	$20, 1, $20
	bgt	$20, 3b
	ret
	.end	bn_plan

# bn_planes(frame $16, count $17, record $18): the body X_INNER once per channel plane of the
# unit (UX_PLANES), each time on the next plane's elements and records: the piece streams step
# by count elements, the record streams by their bytes (a piece launch's bodies have one
# output: in0-2 and out0 step).
	.globl	bn_planes
	.ent	bn_planes
bn_planes:
	stl	$26, BN_RA($31)
	stl	$17, BN_COUNT($31)
	ldl	$1, U_X + UX_PLANES($18)
	stl	$1, BN_LEFT($31)
	ldl	$2, JOB + J_ES($31)
	mull	$2, $17, $2           # a piece stream's step
	ldi	$3, JOB + J_X + X_KIND($31)
	clr	$4
1:	ldl	$5, 0($16)
	stl	$5, BN_FRAME($4)
	ldl	$5, 0($3)
	and	$5, 7, $6
	srl	$5, 3, $5             # a record's bytes
	cmpeq	$6, MODE_PIECE, $7
	selne	$7, $2, $5, $5
	cmpeq	$6, MODE_GROUP, $7
	selne	$7, $31, $5, $5
	cmpeq	$6, MODE_NONE, $7
	selne	$7, $31, $5, $5
	stl	$5, BN_STEP($4)
	ldi	$16, 8($16)
	ldi	$3, 8($3)
	ldi	$4, 8($4)
	cmplt	$4, 8 * (STREAM_OUT + 1), $7
	bne	$7, 1b
2:	ldi	$16, BN_FRAME($31)
	ldl	$17, BN_COUNT($31)
	ldl	$27, JOB + J_X + X_INNER($31)
	call	$26, ($27), 0
	ldi	$1, BN_FRAME($31)
	ldi	$2, BN_STEP($31)
	ldi	$3, STREAM_OUT + 1
3:	ldl	$4, 0($1)
	ldl	$5, 0($2)
	addl	$4, $5, $4
	stl	$4, 0($1)
	ldi	$1, 8($1)
	ldi	$2, 8($2)
	subl	$3, 1, $3
	bgt	$3, 3b
	ldl	$1, BN_LEFT($31)
	subl	$1, 1, $1
	stl	$1, BN_LEFT($31)
	bgt	$1, 2b
	ldl	$26, BN_RA($31)
	ret
	.end	bn_planes

# BROADCAST value, vreg: every lane of vreg = the double in value.
	.macro	BROADCAST value, vreg
	fstd	\value, BN_BCAST($31)
	ldde	\vreg, BN_BCAST($31)
	.endm

# AS_DOUBLE ireg, freg: freg = the integer in ireg as a double.
	.macro	AS_DOUBLE ireg, freg
	ifmovd	\ireg, \freg
	fcvtld	\freg, \freg
	.endm

# BN_STATS label, load, vload, shift: out0 = (count, mean, M2, 0) of the piece in0 ($17
# elements): the sum by vectors (4 lane sums) and a scalar tail, mean = sum / count, then
# M2 = sum (x - mean)^2 the same way.
	.macro	BN_STATS label, load, vload, shift
	BODY_START \label
	SPLIT_COUNT $17, $2, $3
	vaddd	$31, $31, $5
	mov	$1, $6
	mov	$2, $7
	beq	$7, 2f
1:	\vload	$8, 0($6)
	vaddd	$5, $8, $5
	ldi	$6, 4 << \shift($6)
	subl	$7, 1, $7
	bgt	$7, 1b
2:	LANE_SUM $5, $5, BN_LANES
	mov	$3, $7
	beq	$7, 4f
3:	\load	$8, 0($6)
	faddd	$5, $8, $5
	ldi	$6, 1 << \shift($6)
	subl	$7, 1, $7
	bgt	$7, 3b
4:	AS_DOUBLE $17, $18
	fdivd	$5, $18, $5           # mean
	BROADCAST $5, $19
	vaddd	$31, $31, $20
	mov	$1, $6
	mov	$2, $7
	beq	$7, 6f
5:	\vload	$8, 0($6)
	vsubd	$8, $19, $8
	vmad	$8, $8, $20, $20
	ldi	$6, 4 << \shift($6)
	subl	$7, 1, $7
	bgt	$7, 5b
6:	LANE_SUM $20, $20, BN_LANES
	mov	$3, $7
	beq	$7, 8f
7:	\load	$8, 0($6)
	fsubd	$8, $5, $8
	fmad	$8, $8, $20, $20
	ldi	$6, 1 << \shift($6)
	subl	$7, 1, $7
	bgt	$7, 7b
8:	fstd	$18, 0($4)
	fstd	$5, 8($4)
	fstd	$20, 16($4)
	stl	$31, 24($4)
	BODY_END \label
	.endm
	BN_STATS bn_stats_s, flds, vlds, 2
	BN_STATS bn_stats_d, fldd, vldd, 3

# BN_BACKWARD_STATS label, load, vload, shift: out0 = (count, sum dy, sum dy (x - mean), 0)
# of the piece (in0 dy, in1 x; in2 the channel's (gamma, mean, invstd, 0) elements).
	.macro	BN_BACKWARD_STATS label, load, vload, shift
	BODY_START \label
	\load	$19, 1 << \shift($3)  # mean
	BROADCAST $19, $20
	SPLIT_COUNT $17, $7, $25
	BACKWARD_SUMS_RUN \load, \vload, \shift, $1, $2, $7, $25, $19, $20, $5, $21, $22, $23, BN_LANES
	AS_DOUBLE $17, $18
	fstd	$18, 0($4)
	fstd	$5, 8($4)
	fstd	$21, 16($4)
	stl	$31, 24($4)
	BODY_END \label
	.endm
	BN_BACKWARD_STATS bn_backward_stats_s, flds, vlds, 2
	BN_BACKWARD_STATS bn_backward_stats_d, fldd, vldd, 3

# bn_fold_stats: out0 = in0's $17 records (count, mean, M2, 0) combined in order (Chan, Golub
# and LeVeque: n = na + nb, d = mb - ma, mean = ma + d nb / n, M2 = M2a + M2b + d^2 na nb / n).
	BODY_START bn_fold_stats
	fldd	$5, 0($1)             # n, mean, M2
	fldd	$6, 8($1)
	fldd	$7, 16($1)
	br	2f
1:	fldd	$18, 0($1)
	fldd	$19, 8($1)
	fldd	$20, 16($1)
	faddd	$5, $18, $21          # n'
	fsubd	$19, $6, $22          # d
	ONE	$24
	fdivd	$24, $21, $24         # 1 / n' (one divide: the unit does not pipeline them)
	fmuld	$18, $24, $24         # nb / n'
	fmuld	$5, $24, $23          # na nb / n'
	fmad	$22, $24, $6, $6
	faddd	$7, $20, $7
	fmuld	$22, $22, $22
	fmad	$22, $23, $7, $7
	mov	$21, $5
2:	ldi	$1, REC_BYTES($1)
	subl	$17, 1, $17
	bgt	$17, 1b
	fstd	$5, 0($4)
	fstd	$6, 8($4)
	fstd	$7, 16($4)
	stl	$31, 24($4)
	BODY_END bn_fold_stats

# bn_fold_sums: out0 = in0's $17 records (count, s1, s2, 0) summed field by field, in order.
	BODY_START bn_fold_sums
	vldd	$5, 0($1)
	br	2f
1:	vldd	$6, 0($1)
	vaddd	$5, $6, $5
2:	ldi	$1, REC_BYTES($1)
	subl	$17, 1, $17
	bgt	$17, 1b
	vstd	$5, 0($4)
	BODY_END bn_fold_sums

# BN_FINISH_FORWARD label, load, store, shift: per channel, in0 its (count, mean, M2, 0)
# (training) and in1 (gamma, beta, running mean, running var) elements; J_P: momentum, eps,
# training (1.0 / 0.0). out0 = (new running mean, new running var, mean used, invstd used)
# elements, out1 = the apply record (mean, gamma invstd, beta) in double. Training: biased
# variance M2 / N for the normalisation, running stats (1 - momentum) r + momentum s with the
# unbiased M2 / (N - 1); inference: the running stats, returned unchanged.
	.macro	BN_FINISH_FORWARD label, load, store, shift
	BODY_START \label
	\load	$21, 2 << \shift($2)  # running mean, var
	\load	$22, 3 << \shift($2)
	ldl	$24, JOB + J_P + 16($31)   # training
	fbeq	$24, 3f
	fldd	$18, 0($1)            # N
	fldd	$5, 8($1)             # mean
	fldd	$19, 16($1)           # M2
	fdivd	$19, $18, $20         # biased variance
	ONE	$7
	fsubd	$18, $7, $3
	fdivd	$19, $3, $3           # unbiased variance
	ldl	$23, JOB + J_P($31)   # momentum
	fsubd	$7, $23, $6           # 1 - momentum
	fmuld	$6, $21, $21
	fmad	$23, $5, $21, $21     # new running mean
	fmuld	$6, $22, $22
	fmad	$23, $3, $22, $22     # new running var
	\store	$21, 0($4)
	\store	$22, 1 << \shift($4)
	br	4f
3:	\store	$21, 0($4)            # inference: the running stats, unchanged
	\store	$22, 1 << \shift($4)
	mov	$21, $5
	mov	$22, $20
4:	ldl	$23, JOB + J_P + 8($31)    # eps
	faddd	$20, $23, $20
	fsqrtd	$20, $20
	ONE	$7
	fdivd	$7, $20, $20          # invstd
	\store	$5, 2 << \shift($4)
	\store	$20, 3 << \shift($4)
	\load	$21, 0($2)            # gamma
	\load	$22, 1 << \shift($2)  # beta
	fmuld	$21, $20, $21         # gamma invstd
	fstd	$5, 0($25)
	fstd	$21, 8($25)
	fstd	$22, 16($25)
	BODY_END \label
	.endm
	BN_FINISH_FORWARD bn_finish_forward_s, flds, fsts, 2
	BN_FINISH_FORWARD bn_finish_forward_d, fldd, fstd, 3

# BN_FINISH_BACKWARD label, load, store, shift: per channel, in0 its (count, sum dy,
# sum dy (x - mean), 0), in1 (gamma, mean, invstd, 0) elements. out0 = (dgamma, dbeta)
# elements, out1 = the apply record (mean, invstd, dbeta / N, dgamma / N, gamma invstd) in
# double.
	.macro	BN_FINISH_BACKWARD label, load, store, shift
	BODY_START \label
	fldd	$18, 0($1)            # N
	fldd	$5, 8($1)             # dbeta
	fldd	$21, 16($1)
	\load	$19, 1 << \shift($2)  # mean
	\load	$20, 2 << \shift($2)  # invstd
	fmuld	$21, $20, $21         # dgamma
	\store	$21, 0($4)
	\store	$5, 1 << \shift($4)
	fdivd	$5, $18, $5           # dbeta / N
	fdivd	$21, $18, $21         # dgamma / N
	\load	$24, 0($2)
	fmuld	$24, $20, $24         # gamma invstd
	fstd	$19, 0($25)
	fstd	$20, 8($25)
	fstd	$5, 16($25)
	fstd	$21, 24($25)
	fstd	$24, 32($25)
	BODY_END \label
	.endm
	BN_FINISH_BACKWARD bn_finish_backward_s, flds, fsts, 2
	BN_FINISH_BACKWARD bn_finish_backward_d, fldd, fstd, 3

# BN_APPLY_FORWARD label, vload, vstore, shift: out0 = (in0 - mean) a + beta by vectors over
# the piece's $17 elements (whole vectors: the lanes past the end are never put); in1 is the
# channel's apply record (mean, a, beta).
	.macro	BN_APPLY_FORWARD label, vload, vstore, shift
	BODY_START \label
	ldde	$5, 0($2)
	ldde	$6, 8($2)
	ldde	$7, 16($2)
	addl	$17, 3, $17
	srl	$17, 2, $17
1:	\vload	$8, 0($1)
	vsubd	$8, $5, $8
	vmad	$8, $6, $7, $8
	\vstore	$8, 0($4)
	ldi	$1, 4 << \shift($1)
	ldi	$4, 4 << \shift($4)
	subl	$17, 1, $17
	bgt	$17, 1b
	BODY_END \label
	.endm
	BN_APPLY_FORWARD bn_apply_forward_s, vlds, vsts, 2
	BN_APPLY_FORWARD bn_apply_forward_d, vldd, vstd, 3

# BN_APPLY_BACKWARD label, vload, vstore, shift: out0 = ((dy - dbeta/N) - xhat dgamma/N)
# gamma invstd, xhat = (x - mean) invstd, by vectors (in0 dy, in1 x, in2 the apply record).
	.macro	BN_APPLY_BACKWARD label, vload, vstore, shift
	BODY_START \label
	ldde	$5, 0($3)             # mean
	ldde	$6, 8($3)             # invstd
	ldde	$7, 16($3)            # dbeta / N
	ldde	$8, 24($3)            # dgamma / N
	ldde	$18, 32($3)           # gamma invstd
	addl	$17, 3, $17
	srl	$17, 2, $17
1:	\vload	$22, 0($1)
	\vload	$23, 0($2)
	DX_COMPUTE $22, $23, $5, $6, $7, $8, $18
	\vstore	$22, 0($4)
	ldi	$1, 4 << \shift($1)
	ldi	$2, 4 << \shift($2)
	ldi	$4, 4 << \shift($4)
	subl	$17, 1, $17
	bgt	$17, 1b
	BODY_END \label
	.endm
	BN_APPLY_BACKWARD bn_apply_backward_s, vlds, vsts, 2
	BN_APPLY_BACKWARD bn_apply_backward_d, vldd, vstd, 3
