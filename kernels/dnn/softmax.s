# Softmax with cross-entropy loss (docs/dnn.md "Softmax with cross-entropy loss");
# hostlib/dnn/softmax.py is the host side.
#
# softmax_split_run (its own entry, job record SX_*): a row of the logits (B, C) is worked on
# by a group: the 8 CPEs of a mesh row (SX_G = 8, the row cut over them) or one CPE (SX_G = 1,
# whole rows). Group g takes the rows [first_g, last_g) of SX_RANGES, one after the other.
# A row is moved as the 128-byte lines it touches, in blocks of PB bytes, block k to the
# group's member k: with SX_G = 8 in one ROW-mode DMA by the getter (column 2) and put back
# the same way by the putter (column 1), so every transaction is a whole line; with SX_G = 1
# in PE mode. SX_NBUF rows are in flight (the get SX_NBUF - 1 rows ahead, the put after the
# next row's meeting). Each member takes the part of the row in its block: the partial
# maximum, then the row's maximum M by a row broadcast (putr / getr); z = x - M, exp by
# vmath.inc's vexp_d (vexp_ds for float32), the partial sum, broadcast with the member's slot (lanes: partial sum,
# z_label or 0, the slot's LDM address), so every member adds the slots in the same order and
# has the same s; then dlogits = e (1/s) (1/B) into the output buffer, the label's element
# ((e (1/s)) - 1) (1/B). A line the row shares with the next row of the range is put with
# that row: the member holding it passes its 128 bytes to member 0 by putr, which copies the
# previous row's part in front of the next row's. Shared rows' ranges start on a line (the
# host cuts them so); whole rows' ranges may start and end inside a line (PE-mode puts from
# the range's first byte to its last); the last row of the batch may write to the end of its
# last line (the host pads the arrays). Everything is computed in double (f32 rounded once by
# the stores). After the last row, member i mod G computes the losses log(s) - z_label
# (log_d below) of rows i and column 0 collects the mesh row's; it puts them, or with SX_MEAN
# (one launch on one CG) sends them along the column to CPE 0, which stores the mean: their
# sum in order / B, as one reduce unit below. Argument: a0 = the job record.
#
# reduce_plan / reduce_{s,d} (on the streaming driver, stream.s; stream.inc has its interface):
# unit u sums the doubles [u K, min(N, (u + 1) K)) of in0 and stores the sum / J_P[0] to
# out0[u] (double for _d, rounded to f32 for _s). The host runs passes until one value is left,
# the last dividing by B: the mean loss, when the batch is not done in one launch on one CG.
#
# Linked before stream.s.

	.set	noreorder

	.ldm
	.align	5
SM_VEC:	.skip	32            # a vector's lanes, summed by scalar loads
SM_ONE:	.double	1.0
SM_NEG_INF:
	.quad	0xFFF0000000000000
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

	SX_X = 0              # job record (int64 words): the logits, 128-byte aligned, readable
	SX_LABELS = 8         # to the end of their last line; the labels (int32)
	SX_DLOGITS = 16       # dlogits: 128-byte aligned, writable to the end of the last line
	SX_LOSSES = 24        # the row losses (doubles, all B)
	SX_MEAN = 32          # where the mean loss goes (ES bytes); 0: the host reduces the losses
	SX_BATCH = 40         # B
	SX_C = 48             # classes
	SX_ES = 56            # 4 or 8
	SX_PB = 64            # bytes of a row's block per CPE: whole lines
	SX_INV_B = 72         # 1 / B (double)
	SX_B = 80             # B (double)
	SX_IN = 88            # LDM: the input buffers (SX_NBUF, PB each)
	SX_OUT = 120          # LDM: the output buffers (SX_NBUF, PB each)
	SX_SCRATCH = 152      # LDM: PB / ES doubles
	SX_LBL = 160          # LDM: the range's labels
	SX_LOSS = 168         # LDM: the mesh row's losses (column 0); all B for the mean (CPE 0)
	SX_PAIRS = 176        # LDM: (s, z_label) of the group's rows whose loss this CPE computes
	SX_G = 184            # CPEs sharing a row: SX_COLS (a mesh row) or 1 (whole rows per CPE)
	SX_RANGES = 192       # per group (mesh row or CPE): first, last row (64 pairs)
	SX_JOB_BYTES = 1216
	SX_COLS = 8           # the columns of a mesh row
	REQ_MESH_COLS = SX_COLS   # checked at launch: a mesh row shares a row of logits,
	REQ_MESH_ROWS = 8         # and the job's broadcast and barriers span 8 rows (0xff)
	SX_NBUF = 4           # buffers of each kind: rows in flight

	.align	5
SX_JOB:	.skip	SX_JOB_BYTES
	.align	5
SX_SLOTS:
	.skip	32 * SX_COLS  # the row's partial sums, one vector per column
SX_MSG:	.skip	32            # a message being built
SX_CARRY:
	.skip	128           # the line the previous row shares with this one (member 0)
SXR_GET:			# reply words: gets and puts per buffer, the others
	.skip	4 * SX_NBUF
SXR_PUT:
	.skip	4 * SX_NBUF
SXR_MISC:
	.skip	8
	.align	3
SV_RA:	.quad	0             # the entry's return
SV_K:	.quad	0             # this CPE's place in its group (0 when SX_G = 1)
SV_COL:	.quad	0             # its column
SV_GETTER:	.quad	0     # the members that issue the gets and the puts: 2 and 1 (the
SV_PUTTER:	.quad	0     # merge is 0's), or 0 and 0 when SX_G = 1
SV_MASK:	.quad	0     # the group's columns (synr)
SV_GSHIFT:	.quad	0     # log2 SX_G
SV_MODE:	.quad	0     # the group's DMA: ROW (SX_G = 8) or PE
SV_ROWB:	.quad	0     # bytes of a row
SV_KPB:	.quad	0             # K PB: this CPE's block within a row's lines
SV_S0:	.quad	0             # R0's first byte
SV_R0:	.quad	0             # the group's rows [R0, R1)
SV_R1:	.quad	0
SV_M0:	.quad	0             # the mesh row's rows [M0, M1) (its groups' ranges)
SV_M1:	.quad	0
SV_R:	.quad	0             # the row
SV_P:	.quad	0             # its buffers: (R - R0) mod SX_NBUF
SV_A:	.quad	0             # its first line (offset from the array's base)
SV_SPAN:	.quad	0     # bytes of the lines it touches
SV_S:	.quad	0             # its first byte, one past its last
SV_E:	.quad	0
SV_LO:	.quad	0             # this CPE's part: bytes [LO, HI) of its block
SV_HI:	.quad	0
SV_VLO:	.quad	0             # the vectors covering it: NVEC from VLO
SV_NVEC:	.quad	0
SV_LB:	.quad	0             # the label's byte in this block, or -1
SV_IN:	.quad	0             # this row's buffers
SV_OUT:	.quad	0
SV_EXP:	.quad	0             # exp of the part: scratch + 32 VLO
SV_M:	.double	0             # the row's maximum, sum, z_label, 1 / sum
SV_SUM:	.double	0
SV_ZL:	.double	0
SV_INV:	.double	0
SV_CARRY:	.quad	0     # the row's last line goes with the next row
SV_PUT_LO:	.quad	0     # the previous row's put: bytes [LO, HI) of its lines
SV_PUT:	.quad	0

	.include "vmath.inc"
	.include "stream.inc"
	.include "../include/dma.inc"
	.include "../include/vector.inc"

	X_N = 0               # J_X words of reduce: values, values per unit
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


# SX_SPAN row: the geometry of a row (a register other than $0-$4): $0 = its first line's
# offset from the array's base, $1 = the bytes of the lines it touches, $2 = its first byte,
# $3 = one past its last. Clobbers $4.
	.macro	SX_SPAN row
	ldl	$1, SV_ROWB($31)
	mull	\row, $1, $2
	addl	$2, $1, $3
	ldi	$4, -128
	and	$2, $4, $0
	subl	$3, $0, $1
	ldi	$1, 127($1)
	and	$1, $4, $1
	.endm

# sx_row_dma(row $16, op $18 = DMA_GET or DMA_PUT, bytes [$23, $19) of the row's lines): move
# them between memory and the group's buffers of the row, (row - R0) mod SX_NBUF (SV_MODE:
# ROW, blocks of PB, block k to / from column k; or PE); none when the range is empty (the
# reply word is set at once). Leaf; clobbers $0-$8, $17, $19-$22, $29.
	.ent	sx_row_dma
sx_row_dma:
	ldl	$17, SV_R0($31)
	subl	$16, $17, $17
	and	$17, SX_NBUF - 1, $17
	SX_SPAN	$16
	s4addl	$17, $31, $5
	ldi	$5, SXR_GET($5)
	s8addl	$17, $31, $6
	ldl	$7, SX_JOB + SX_X($31)
	ldl	$6, SX_JOB + SX_IN($6)
	cmpeq	$18, DMA_GET, $8
	bne	$8, 1f
	ldi	$5, SXR_PUT - SXR_GET($5)
	ldl	$7, SX_JOB + SX_DLOGITS($31)
	s8addl	$17, $31, $6
	ldl	$6, SX_JOB + SX_OUT($6)
1:	addl	$7, $0, $7            # the row's first line in memory, the range's first byte
	addl	$7, $23, $7
	addl	$6, $23, $6
	subl	$19, $23, $19
	ldi	$8, 1
	stw	$8, 0($5)
	ble	$19, 3f
	stw	$31, 0($5)
	ldl	$20, SX_JOB + SX_PB($31)
	ldl	$21, SV_MODE($31)
	bne	$18, 2f               # DMA_PUT is 0
	MAKE_DESC_ARGS $22, DMA_PUT, $21, $19, $20, $31, $5, $31, $8
	br	4f
2:	MAKE_DESC_ARGS $22, DMA_GET, $21, $19, $20, $31, $5, $31, $8
4:	dma	$22, $7, $6
3:	ret
	.end	sx_row_dma

# SX_FETCH: the get of row $16 when it is in the range (the getter). Clobbers as sx_row_dma.
	.macro	SX_FETCH
	ldl	$18, SV_R1($31)
	cmplt	$16, $18, $18
	beq	$18, 89f
	SX_SPAN	$16
	mov	$1, $19
	clr	$23
	ldi	$18, DMA_GET
	bsr	$26, sx_row_dma
89:
	.endm

# sx_put(row $16): the putter puts bytes [SV_PUT_LO, SV_PUT) of the row's lines. Leaf but
# for sx_row_dma; clobbers as it and $23.
	.ent	sx_put
sx_put:
	mov	$26, $28
	ldl	$23, SV_PUT_LO($31)
	ldl	$19, SV_PUT($31)
	ldi	$18, DMA_PUT
	bsr	$26, sx_row_dma
	mov	$28, $26
	ret
	.end	sx_put

# SX_IN_BLOCK byte, out: `byte`, an offset from the array's base within the row's lines,
# becomes its offset in this CPE's block; out = 1 when it lies outside the block. Clobbers $29.
	.macro	SX_IN_BLOCK byte, out
	ldl	$29, SV_A($31)
	subl	\byte, $29, \byte
	ldl	$29, SV_KPB($31)
	subl	\byte, $29, \byte
	cmplt	\byte, 0, \out
	ldl	$29, SX_JOB + SX_PB($31)
	cmple	$29, \byte, $29
	bis	\out, $29, \out
	.endm

# SX_UNLESS role, label: branch to label unless this CPE is the group's getter or putter
# (role SV_GETTER or SV_PUTTER). Clobbers $5, $6.
	.macro	SX_UNLESS role, label
	ldl	$5, SV_K($31)
	ldl	$6, \role($31)
	cmpeq	$5, $6, $6
	beq	$6, \label
	.endm

# SX_WAIT reply: spin until the reply word at LDM address `reply` ($r) is set. Temporary $29.
	.macro	SX_WAIT reply
88:	ldw	$29, \reply
	beq	$29, 88b
	.endm

# ZERO_DOUBLES from, to, t: zero the doubles at LDM [from, to) (from is used up; t a
# temporary).
	.macro	ZERO_DOUBLES from, to, t
	br	74f
73:	stl	$31, 0(\from)
	ldi	\from, 8(\from)
74:	cmplt	\from, \to, \t
	bne	\t, 73b
	.endm

# SX_ROWS sfx, load, store, vload, vstore, shift, vexp: the row loop for elements of
# 1 << shift bytes (from SV_R = R0, SV_P = 0, the first rows' gets issued), then sx_finish;
# vexp: vmath.inc's exp of double arrays to the elements' accuracy.
	.macro	SX_ROWS sfx, load, store, vload, vstore, shift, vexp
sx_rows_\sfx:
	ldl	$16, SV_R($31)        # the row's geometry and this CPE's part of it
	SX_SPAN	$16
	stl	$0, SV_A($31)
	stl	$1, SV_SPAN($31)
	stl	$2, SV_S($31)
	stl	$3, SV_E($31)
	ldl	$5, SV_K($31)
	ldl	$6, SX_JOB + SX_PB($31)
	ldl	$7, SV_KPB($31)
	addl	$0, $7, $7            # the block's offset b0 = A + k PB
	subl	$2, $7, $8
	cmplt	$8, 0, $9
	selne	$9, $31, $8, $8       # LO = max(s - b0, 0)
	subl	$3, $7, $9
	cmplt	$6, $9, $10
	selne	$10, $6, $9, $9       # HI = min(e - b0, PB)
	cmplt	$8, $9, $10
	seleq	$10, $31, $8, $8      # nothing of the row here: 0, 0
	seleq	$10, $31, $9, $9
	stl	$8, SV_LO($31)
	stl	$9, SV_HI($31)
	srl	$8, \shift + 2, $10
	ldi	$11, (4 << \shift) - 1($9)
	srl	$11, \shift + 2, $11
	subl	$11, $10, $11
	stl	$10, SV_VLO($31)
	stl	$11, SV_NVEC($31)
	ldl	$12, SV_R1($31)       # the last line goes with the next row: the row ends
	ldi	$13, 1($16)           # within a line and the next row is this range's
	cmplt	$13, $12, $12
	and	$3, 127, $13
	cmpult	$31, $13, $13
	and	$12, $13, $12
	stl	$12, SV_CARRY($31)
	ldl	$17, SV_P($31)
	s8addl	$17, $31, $18
	ldl	$1, SX_JOB + SX_IN($18)
	ldl	$4, SX_JOB + SX_OUT($18)
	stl	$1, SV_IN($31)
	stl	$4, SV_OUT($31)
	SX_UNLESS SV_GETTER, 1f      # the getter: this row's data is in; the get SX_NBUF - 1
				# rows ahead (after the wait: a channel holds 3 requests)
	ldl	$17, SV_P($31)
	s4addl	$17, $31, $17
	SX_WAIT	SXR_GET($17)
	ldl	$16, SV_R($31)
	ldi	$16, SX_NBUF - 1($16)
	SX_FETCH
1:	SX_UNLESS SV_PUTTER, 2f      # the putter: this row's output buffers are free
	ldl	$17, SV_P($31)
	s4addl	$17, $31, $17
	SX_WAIT	SXR_PUT($17)
2:	ldl	$1, SV_MASK($31)      # the data is in; the previous row's output complete
	synr	$1
	ldl	$16, SV_R($31)
	ldl	$1, SV_R0($31)
	cmpeq	$16, $1, $1
	bne	$1, 1f
	SX_UNLESS SV_PUTTER, 1f
	subl	$16, 1, $16
	bsr	$26, sx_put
1:	ldl	$2, SV_R($31)         # the label's byte in this block, or -1
	ldl	$3, SV_R0($31)
	subl	$2, $3, $2
	ldl	$3, SX_JOB + SX_LBL($31)
	s4addl	$2, $3, $3
	ldw	$3, 0($3)
	sll	$3, \shift, $3
	ldl	$4, SV_S($31)
	addl	$4, $3, $3
	SX_IN_BLOCK $3, $4
	ldi	$6, -1
	selne	$4, $6, $3, $3
	stl	$3, SV_LB($31)

	ldl	$1, SV_IN($31)        # the part's maximum, eight chains (-inf: no part)
	ldl	$7, SV_LO($31)
	ldl	$17, SV_HI($31)
	subl	$17, $7, $17
	srl	$17, \shift, $17
	addl	$1, $7, $7
	ldl	$6, SM_NEG_INF($31)
	beq	$17, 1f
	\load	$6, 0($7)
1:
	.irp	m, 9, 10, 11, 12, 13, 14, 15
	mov	$6, $\m
	.endr
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
4:	MAX_STEP $6, $9, $0         # the chains, by a tree
	MAX_STEP $10, $11, $1
	MAX_STEP $12, $13, $2
	MAX_STEP $14, $15, $3
	MAX_STEP $6, $10, $0
	MAX_STEP $12, $14, $1
	MAX_STEP $6, $12, $0
	ldl	$1, SV_GSHIFT($31)
	beq	$1, 6f                # whole rows: no exchange
	putr	$6, 8                 # the row's maximum: every column's, by a tree
	.irp	r, 20, 21, 22, 23, 24, 25, 27
	getr	$\r
	.endr
	MAX_STEP $6, $20, $0
	MAX_STEP $21, $22, $1
	MAX_STEP $23, $24, $2
	MAX_STEP $25, $27, $3
	MAX_STEP $6, $21, $0
	MAX_STEP $23, $25, $1
	MAX_STEP $6, $23, $0
6:	fstd	$6, SV_M($31)

	ldde	$6, SV_M($31)         # z = x - max: n mod 4 single vectors, then fours
	ldl	$18, SV_NVEC($31)
	ldl	$9, SV_VLO($31)
	ldl	$7, SV_IN($31)
	sll	$9, \shift + 2, $1
	addl	$7, $1, $7
	ldl	$19, SX_JOB + SX_SCRATCH($31)
	sll	$9, 5, $1
	addl	$19, $1, $19
	stl	$19, SV_EXP($31)
	mov	$18, $8
	and	$8, 3, $9
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
9:	ldl	$16, SV_EXP($31)
	mov	$16, $17
	bsr	$26, \vexp
	ldl	$3, SX_JOB + SX_SCRATCH($31)   # zero the lanes outside the part
	ldl	$1, SV_EXP($31)
	ldl	$2, SV_LO($31)
	srl	$2, \shift, $2
	s8addl	$2, $3, $2
	ZERO_DOUBLES $1, $2, $4
	ldl	$1, SV_HI($31)
	srl	$1, \shift, $1
	s8addl	$1, $3, $1
	ldl	$2, SV_NVEC($31)
	sll	$2, 5, $2
	ldl	$4, SV_EXP($31)
	addl	$4, $2, $2
	ZERO_DOUBLES $1, $2, $4
	ldl	$18, SV_NVEC($31)
	vaddd	$31, $31, $20         # four partial sums: n mod 4 single vectors into the
	vaddd	$31, $31, $21         # first, then fours
	vaddd	$31, $31, $22
	vaddd	$31, $31, $23
	ldl	$7, SV_EXP($31)
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
9:	SUM_LANES $20, $21, $22, $23, SM_VEC   # the part's sum: (p0 + p1) + (p2 + p3)
	fstd	$20, SX_MSG($31)
	stl	$31, SX_MSG + 8($31)  # z_label: 0 unless the label is here
	ldl	$5, SV_LB($31)
	blt	$5, 1f
	ldl	$1, SV_IN($31)
	addl	$1, $5, $1
	\load	$6, 0($1)
	fldd	$7, SV_M($31)
	fsubd	$6, $7, $6
	fstd	$6, SX_MSG + 8($31)
1:	ldl	$5, SV_K($31)         # the message: sum, z_label, this column's slot
	sll	$5, 5, $5
	ldi	$5, SX_SLOTS($5)
	stl	$5, SX_MSG + 16($31)
	vldd	$6, SX_MSG($31)
	vstd	$6, 0($5)
	ldl	$1, SV_GSHIFT($31)
	beq	$1, 3f                # whole rows: the other slots stay 0
	putr	$6, 8
	ldi	$8, SX_COLS - 1
2:	getr	$6
	vextf	$6, 2, $5             # the sender's slot
	vstd	$6, 0($5)
	subl	$8, 1, $8
	bgt	$8, 2b
3:	vldd	$20, SX_SLOTS($31)    # lanes 0, 1: s and z_label (one column's, zeros
	vldd	$21, SX_SLOTS + 32($31)   # elsewhere), both ((0 + 1) + (2 + 3)) + ((4 + 5)
	vldd	$22, SX_SLOTS + 64($31)   # + (6 + 7)) over the columns
	vldd	$23, SX_SLOTS + 96($31)
	vldd	$24, SX_SLOTS + 128($31)
	vldd	$25, SX_SLOTS + 160($31)
	vldd	$27, SX_SLOTS + 192($31)
	vldd	$28, SX_SLOTS + 224($31)
	vaddd	$20, $21, $20
	vaddd	$22, $23, $22
	vaddd	$24, $25, $24
	vaddd	$27, $28, $27
	vaddd	$20, $22, $20
	vaddd	$24, $27, $24
	vaddd	$20, $24, $20
	ldl	$2, SV_R($31)         # the row's loss is member i mod G's, at the end: (s, z_label)
	ldl	$3, SV_R0($31)        # at pair i / G there
	subl	$2, $3, $2
	ldl	$4, SV_GSHIFT($31)
	srl	$2, $4, $6
	sll	$6, $4, $3
	subl	$2, $3, $3
	ldl	$5, SV_K($31)
	cmpeq	$3, $5, $3
	beq	$3, 4f
	sll	$6, 5, $2
	ldl	$3, SX_JOB + SX_PAIRS($31)
	addl	$2, $3, $3
	vstd	$20, 0($3)
4:	mov	$20, $16
	ldl	$7, SM_ONE($31)
	fdivd	$7, $16, $7           # 1 / s
	fstd	$7, SV_INV($31)
	ldde	$6, SV_INV($31)
	ldde	$8, SX_JOB + SX_INV_B($31)
	ldl	$19, SV_EXP($31)
	ldl	$20, SV_VLO($31)
	sll	$20, \shift + 2, $20
	ldl	$1, SV_OUT($31)
	addl	$1, $20, $20
	ldl	$18, SV_NVEC($31)
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
9:	ldl	$2, SV_LB($31)        # the label's element: (softmax - 1) / B
	blt	$2, 1f
	srl	$2, \shift, $3
	ldl	$4, SX_JOB + SX_SCRATCH($31)
	s8addl	$3, $4, $3
	fldd	$21, 0($3)
	fldd	$7, SV_INV($31)
	fmuld	$21, $7, $21
	ldl	$22, SM_ONE($31)
	fsubd	$21, $22, $21
	fldd	$8, SX_JOB + SX_INV_B($31)
	fmuld	$21, $8, $21
	ldl	$4, SV_OUT($31)
	addl	$4, $2, $4
	\store	$21, 0($4)
1:	bsr	$26, sx_lines
	ldl	$16, SV_R($31)
	ldi	$16, 1($16)
	ldl	$1, SV_SPAN($31)      # what the putter puts after the next synr: from the range's
	ldl	$2, SV_CARRY($31)     # first byte if it starts in the row's first line (PE mode),
	sll	$2, 7, $2             # to the shared line, or to the row's last byte if the range
	subl	$1, $2, $1            # ends in a line before another row
	ldl	$3, SV_R1($31)
	cmpeq	$16, $3, $3
	ldl	$4, SX_JOB + SX_BATCH($31)
	cmplt	$16, $4, $4
	and	$3, $4, $3
	ldl	$4, SV_E($31)
	ldl	$5, SV_A($31)
	subl	$4, $5, $4
	selne	$3, $4, $1, $1
	stl	$1, SV_PUT($31)
	ldl	$1, SV_S0($31)        # never before the range's first byte
	subl	$1, $5, $1
	cmplt	$1, 0, $2
	selne	$2, $31, $1, $1
	stl	$1, SV_PUT_LO($31)
	stl	$16, SV_R($31)
	ldl	$17, SV_P($31)
	ldi	$17, 1($17)
	and	$17, SX_NBUF - 1, $17
	stl	$17, SV_P($31)
	ldl	$18, SV_R1($31)
	cmplt	$16, $18, $18
	bne	$18, sx_rows_\sfx
	br	sx_finish
	.endm

# sx_lines: the row's output is complete in every column's buffer but for the line shared with
# the previous row: member 0 copies that row's part of it in front, and the member holding the
# row's last line hands it to member 0 when the next row shares it. Leaf.
	.ent	sx_lines
sx_lines:
	ldl	$5, SV_K($31)
	bne	$5, 1f
	ldl	$1, SV_R($31)         # member 0, not the range's first row: the previous
	ldl	$2, SV_R0($31)        # row's bytes of the shared line
	cmpeq	$1, $2, $3
	bne	$3, 1f
	ldl	$1, SV_S($31)
	ldl	$2, SV_A($31)
	subl	$1, $2, $1
	ldl	$2, SV_OUT($31)
	ldi	$3, SX_CARRY
	br	3f
2:	vldd	$4, 0($3)             # whole vectors, then words
	vstd	$4, 0($2)
	ldi	$3, 32($3)
	ldi	$2, 32($2)
	subl	$1, 32, $1
3:	cmplt	$1, 32, $4
	beq	$4, 2b
	br	5f
4:	ldw	$4, 0($3)
	stw	$4, 0($2)
	ldi	$3, 4($3)
	ldi	$2, 4($2)
	subl	$1, 4, $1
5:	bgt	$1, 4b
1:	ldl	$1, SV_CARRY($31)
	beq	$1, 6f
	ldl	$1, SV_E($31)         # the row's last line: in this block?
	ldi	$2, -128
	and	$1, $2, $1
	SX_IN_BLOCK $1, $8
	ldl	$2, SV_OUT($31)
	addl	$2, $1, $2
	bne	$8, 4f
	bne	$5, 3f                # here: copy it (member 0) or send it there
	.irp	o, 0, 32, 64, 96
	vldd	$20, \o($2)
	vstd	$20, SX_CARRY + \o($31)
	.endr
	br	6f
3:	.irp	o, 0, 32, 64, 96
	vldd	$20, \o($2)
	putr	$20, 0
	.endr
	br	6f
4:	bne	$5, 6f                # elsewhere: member 0 takes it
	.irp	o, 0, 32, 64, 96
	getr	$20
	vstd	$20, SX_CARRY + \o($31)
	.endr
6:	ret
	.end	sx_lines

	SX_ROWS	s, flds, fsts, vlds, vsts, 2, vexp_ds
	SX_ROWS	d, fldd, fstd, vldd, vstd, 3, vexp_d

# softmax_split_run(job $16): CPE 0 broadcasts the job; this CPE's group, place and range; the
# getter gets the range's labels into every member (BROW) and the first rows; the rows; then
# the losses and the mean (sx_finish).
	.globl	softmax_split_run
	.ent	softmax_split_run
softmax_split_run:
	stl	$26, SV_RA($31)
	rcid	$1                    # CPE 0 gets the job into every CPE (BCAST), the group meets
	bne	$1, 1f
	MAKE_DESC $1, DMA_GET, SX_JOB_BYTES, SXR_MISC, DMA_BCAST, $31, 0xff
	ldi	$2, SX_JOB
	DMA_WAIT $1, $16, $2, SXR_MISC
1:	synr	0xff
	sync	0xff
	rcid	$1                    # the group: a mesh row (SX_G = 8) or this CPE
	and	$1, SX_COLS - 1, $2
	stl	$2, SV_COL($31)
	ldl	$3, SX_JOB + SX_G($31)
	cmpeq	$3, SX_COLS, $3
	ldi	$4, 1
	sll	$4, $2, $4
	ldi	$5, 0xff
	selne	$3, $5, $4, $4
	stl	$4, SV_MASK($31)
	ldi	$4, 3
	selne	$3, $4, $31, $4
	stl	$4, SV_GSHIFT($31)
	ldi	$5, DMA_ROW
	ldi	$6, DMA_PE
	selne	$3, $5, $6, $5
	stl	$5, SV_MODE($31)
	stl	$3, SV_PUTTER($31)    # 1 for a mesh row, else 0
	sll	$3, 1, $5
	stl	$5, SV_GETTER($31)    # 2 for a mesh row, else 0
	selne	$3, $2, $31, $2
	stl	$2, SV_K($31)
	srl	$1, $4, $3            # group id = CPE id >> log2 G
	sll	$3, 4, $3
	ldl	$4, SX_JOB + SX_RANGES($3)
	ldl	$5, SX_JOB + SX_RANGES + 8($3)
	stl	$4, SV_R0($31)
	stl	$5, SV_R1($31)
	stl	$4, SV_R($31)
	stl	$31, SV_P($31)
	ldl	$7, SX_JOB + SX_C($31)
	ldl	$8, SX_JOB + SX_ES($31)
	mull	$7, $8, $7
	stl	$7, SV_ROWB($31)
	mull	$4, $7, $7
	stl	$7, SV_S0($31)
	ldl	$7, SX_JOB + SX_PB($31)
	mull	$2, $7, $7
	stl	$7, SV_KPB($31)
	srl	$1, 3, $6             # the mesh row's rows: its first and last group's
	sll	$6, 3, $6
	ldl	$7, SV_GSHIFT($31)
	srl	$6, $7, $6
	sll	$6, 4, $6
	ldl	$8, SX_JOB + SX_RANGES($6)
	stl	$8, SV_M0($31)
	ldi	$8, SX_COLS
	srl	$8, $7, $8            # groups in a mesh row
	sll	$8, 4, $8
	addl	$6, $8, $6
	ldl	$8, SX_JOB + SX_RANGES - 8($6)
	stl	$8, SV_M1($31)
	.irp	o, 32, 64, 96, 128, 160, 192, 224
	vstd	$31, SX_SLOTS + \o($31)
	.endr
	ldi	$6, 1                 # no put in flight
	.irp	b, 0, 1, 2, 3
	stw	$6, SXR_PUT + 4 * \b($31)
	.endr
	cmplt	$4, $5, $6
	beq	$6, sx_finish         # no rows here
	SX_UNLESS SV_GETTER, 1f
	ldl	$4, SV_R0($31)        # the getter: the labels, the first rows
	ldl	$5, SV_R1($31)
	subl	$5, $4, $7
	sll	$7, 2, $7
	ldl	$8, SX_JOB + SX_LABELS($31)
	s4addl	$4, $8, $8
	ldl	$9, SX_JOB + SX_LBL($31)
	ldi	$10, DMA_BROW
	ldl	$11, SV_MASK($31)
	ldi	$12, SXR_MISC
	stw	$31, SXR_MISC($31)
	MAKE_DESC_ARGS $13, DMA_GET, $10, $7, $31, $31, $12, $11, $14
	dma	$13, $8, $9
	.irp	ahead, 0, 1
	ldl	$16, SV_R0($31)
	ldi	$16, \ahead($16)
	SX_FETCH
	.endr
	SX_WAIT	SXR_MISC($31)
	ldl	$16, SV_R0($31)
	ldi	$16, 2($16)
	SX_FETCH
1:	ldl	$1, SX_JOB + SX_ES($31)
	cmpeq	$1, 4, $1
	bne	$1, sx_rows_s
	br	sx_rows_d
	.end	softmax_split_run

# MEAN_IN_ORDER p, n, divisor: $3 = (the n > 0 doubles from LDM address p added in order) /
# divisor (a memory operand); p and n are used up, $4 clobbered. The split kernel's mean and
# a reduction unit are this, so their results agree.
	.macro	MEAN_IN_ORDER p, n, divisor
	fldd	$3, 0(\p)
	br	72f
71:	fldd	$4, 0(\p)
	faddd	$3, $4, $3
72:	ldi	\p, 8(\p)
	subl	\n, 1, \n
	bgt	\n, 71b
	fldd	$4, \divisor
	fdivd	$3, $4, $3
	.endm

# sx_finish: after the last row the group meets, the putter puts it (and waits for its puts
# after its losses); the member k computes the losses log(s) - z_label of the group's rows i = k mod G and sends them
# (putr) to column 0, which collects the mesh row's losses [M0, M1) by row. Without SX_MEAN it
# puts them; with it, it sends them along the column (putc) to CPE 0, which places them by row,
# sums the B losses in order, divides by B and stores the mean.
	.ent	sx_finish
sx_finish:
	clr	$11                   # losses this CPE computed
	ldl	$4, SV_R0($31)
	ldl	$5, SV_R1($31)
	cmplt	$4, $5, $6
	beq	$6, 4f                # no rows here
	ldl	$1, SV_MASK($31)
	synr	$1
	SX_UNLESS SV_PUTTER, 2f
	ldl	$16, SV_R1($31)
	subl	$16, 1, $16
	bsr	$26, sx_put
2:	ldl	$9, SV_K($31)         # the losses of rows R0 + i, i = k, k + G, ...
	ldl	$10, SX_JOB + SX_PAIRS($31)
	br	3f
1:	fldd	$16, 0($10)
	bsr	$26, log_d
	fldd	$1, 8($10)
	fsubd	$0, $1, $0
	ldl	$2, SV_R0($31)        # its place in column 0's losses: row - M0
	addl	$2, $9, $2
	ldl	$3, SV_M0($31)
	subl	$2, $3, $2
	ldl	$3, SX_JOB + SX_LOSS($31)
	s8addl	$2, $3, $2
	ldl	$3, SV_COL($31)
	bne	$3, 5f
	fstd	$0, 0($2)             # column 0's own
	br	6f
5:	fstd	$0, SX_MSG($31)       # to column 0: the loss and where it goes
	stl	$2, SX_MSG + 8($31)
	vldd	$1, SX_MSG($31)
	putr	$1, 0
6:	ldi	$11, 1($11)
	ldl	$3, SV_GSHIFT($31)
	ldi	$4, 1
	sll	$4, $3, $4
	addl	$9, $4, $9
	ldi	$10, 32($10)
3:	ldl	$4, SV_R0($31)
	ldl	$5, SV_R1($31)
	subl	$5, $4, $5
	cmplt	$9, $5, $6
	bne	$6, 1b
4:	SX_UNLESS SV_PUTTER, 4f      # the putter: its puts are done (meanwhile the losses)
	.irp	b, 0, 1, 2, 3
	SX_WAIT	SXR_PUT + 4 * \b($31)
	.endr
4:	ldl	$3, SV_COL($31)
	bne	$3, 9f
	ldl	$4, SV_M0($31)        # column 0: the mesh row's other losses
	ldl	$5, SV_M1($31)
	subl	$5, $4, $6
	subl	$6, $11, $6
	bsr	$26, sx_place_r
	ldl	$4, SV_M0($31)
	ldl	$5, SV_M1($31)
	subl	$5, $4, $6
	ldl	$9, SX_JOB + SX_LOSS($31)
	ldl	$1, SX_JOB + SX_MEAN($31)
	bne	$1, 7f
	sll	$6, 3, $7             # no mean here: put them
	beq	$7, 9f
	ldl	$8, SX_JOB + SX_LOSSES($31)
	s8addl	$4, $8, $8
	ldi	$10, DMA_PUT
	ldi	$12, SXR_MISC
	MAKE_DESC_REGS $13, $10, $7, $31, $31, $12
	DMA_WAIT $13, $8, $9, SXR_MISC
	br	9f
7:	rcid	$2
	beq	$2, 9f
	s8addl	$4, $9, $7            # CPE (i, 0), i > 0: to CPE 0, each with its place there
	br	2f
1:	fldd	$1, 0($9)
	fstd	$1, SX_MSG($31)
	stl	$7, SX_MSG + 8($31)
	vldd	$1, SX_MSG($31)
	putc	$1, 0
	ldi	$9, 8($9)
	ldi	$7, 8($7)
	subl	$6, 1, $6
2:	bgt	$6, 1b
9:	ldl	$1, SX_JOB + SX_MEAN($31)
	beq	$1, 9f
	rcid	$2
	bne	$2, 9f
	ldl	$6, SX_JOB + SX_BATCH($31)   # CPE 0: the other mesh rows' losses; the mean
	ldl	$4, SV_M0($31)
	ldl	$5, SV_M1($31)
	subl	$6, $5, $6
	addl	$6, $4, $6
	bsr	$26, sx_place_c
	ldl	$7, SX_JOB + SX_BATCH($31)
	ldl	$9, SX_JOB + SX_LOSS($31)
	MEAN_IN_ORDER $9, $7, SX_JOB + SX_B($31)
	ldl	$7, SX_JOB + SX_ES($31)
	fstd	$3, SX_MSG($31)
	cmpeq	$7, 4, $2
	beq	$2, 4f
	fsts	$3, SX_MSG($31)
4:	ldl	$8, SX_JOB + SX_MEAN($31)
	ldi	$9, SX_MSG
	ldi	$10, DMA_PUT
	ldi	$12, SXR_MISC
	MAKE_DESC_REGS $13, $10, $7, $31, $31, $12
	DMA_WAIT $13, $8, $9, SXR_MISC
9:	ldl	$26, SV_RA($31)
	ret
	.end	sx_finish

# sx_place_r / sx_place_c($6 = count): take $6 messages (a value, the LDM address it goes to)
# from the row / column queue and store them. Leaf; clobbers $1, $2, $6.
	.macro	SX_PLACE label, get
	.ent	\label
\label:
	br	2f
1:	\get	$1
	vextf	$1, 1, $2
	fstd	$1, 0($2)
	subl	$6, 1, $6
2:	bgt	$6, 1b
	ret
	.end	\label
	.endm
	SX_PLACE sx_place_r, getr
	SX_PLACE sx_place_c, getc


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
	MEAN_IN_ORDER $1, $17, JOB + J_P($31)
	\store	$3, 0($2)
	ret
	.end	\label
	.endm
	REDUCE	reduce_s, fsts
	REDUCE	reduce_d, fstd
