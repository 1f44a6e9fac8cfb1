# swGEMM (Fang 2019, §4.2): C = alpha A B + beta C on matrices in main memory, driven by the
# CPEs around the LDM GEMM primitive gemm_prim_mn_d (gemm_prim.s, linked beside it). docs/gemm.md
# ("swGEMM") describes the algorithm; hostlib/blas/swgemm.py prepares the job.
#
# The host reduces every call to one product C (M x N) += A (M x K) B (K x N) whose C is
# stored row-major in memory. Each operand X is seen as a logical matrix of rows x cols that
# is cut into blocks of R x L per CPE and 8R x 8L per core group (CG), the primitive's
# layouts: A as K x M (R = Kb, L = Mb), B as K x N (R = Kb, L = Nb), C as M x N (R = Mb,
# L = Nb). In memory each is row-major with `ldb` bytes per row, either in this orientation
# (natural) or transposed (memory rows are the logical columns).
#
# One call of swgemm runs the whole product: every CPE walks the steps (mB, nB, kB) over the
# CG blocks, K innermost. At each step it
#   - issues the DMA of the next step's A and B blocks into the other half of their double
#     buffers (skipped for an operand whose block does not change, e.g. GEPB's B);
#   - waits for this step's blocks and packs them into the primitive's layout when needed
#     (f32 -> f64, transposition, zero padding of a partial boundary block; a full natural
#     f64 block is used where the DMA put it);
#   - zeroes the C block in LDM at kB = 0, calls the primitive (all 64 CPEs, no barrier: the
#     primitive's row/column broadcasts are causally ordered, so consecutive calls cannot mix
#     their messages), and after the last kB writes alpha C_ldm + beta C_in to the output
#     buffer and DMAs it out; C_in is fetched during the block's first K steps.
# A DMA only moves the valid part of a block; padding exists only in LDM (§4.2.4, zero-filled
# on the CPE), so nothing of O(M K) is ever copied.
#
# Argument: a0 = the job in main memory (JOB_BYTES, int64 fields J_* and the operand
# records O_* below). Stack: swgemm_stack (this frame + the primitive's).

	.set	noreorder
	.include "gemm_prim.inc"
	.include "../include/dma.inc"
	.include "../include/convert.inc"

# ---- the job -------------------------------------------------------------------------------
	J_ES = 0              # element size in memory: 4 or 8
	J_MB = 8              # per-CPE block: Mb, Nb, Kb
	J_NB = 16
	J_KB = 24
	J_NM = 32             # number of CG blocks along M, N, K
	J_NN = 40
	J_NK = 48
	J_ALPHA = 56          # f64 bits
	J_BETA = 64
	J_HAS_BETA = 72       # 0: C is not read
	J_CLDM = 80           # LDM: the C block (Mb x Nb doubles)
	J_OP_A = 128          # operand records
	J_OP_B = 440
	J_OP_C = 752
	JOB_BYTES = 1064

# Operand record (host fills O_BASE..O_PACK, O_GRAIN and the slots' SL_RAW, zeroes the rest,
# O_CUR = 1).
	O_BASE = 0            # main-memory address of element (0, 0)
	O_LDB = 8             # bytes per memory row
	O_TRANS = 16          # 1: memory rows are the logical columns
	O_ROWS = 24           # logical rows and columns (valid sizes)
	O_COLS = 32
	O_R = 40              # per-CPE block rows and columns
	O_L = 48
	O_SWAP = 56           # 1: block rows follow the CPE column j (A: K-block j), else row i
	O_PACK = 64           # LDM: packed block (R x L doubles), 0 if never needed
	O_ROWOFF = 72         # this CPE's first row / column inside a CG block
	O_COLOFF = 80
	O_CUR = 88            # slot holding the current block (A, B)
	O_PENDING = 96        # 1: the next step's block is in flight to the other slot
	O_OPERAND = 104       # LDM address the primitive reads
	O_FRESH = 112         # 1: the current block still has to be waited for and packed
	O_GRAIN = 120         # a block's valid columns are rounded up to a multiple of this power
	                      # of two (C: whole 128-byte lines when its rows are padded to them)
	O_SHARED = 128        # DMA_ROW / DMA_RANK: the group's memory rows are whole CG block rows,
	                      # moved by its CPEs together in that mode (docs/gemm.md "Shared
	                      # DMA"); 0: each CPE moves its own block in PE mode
	O_SHARE = 136         # this CPE's place in its sharing group (its column j for ROW, row i)
	O_PANEL = 144         # shared: bytes from one column panel (one CG block of the memory
	                      # row, its rows contiguous) to the next (docs/gemm.md "Wide rows")
	O_SLOT = 152          # two slots (A, B: the double buffer; C: 0 = C_in, 1 = C_out)
	SLOT_BYTES = 80
	OP_BYTES = 312
# Slot fields: the geometry of the block it holds and its DMA bookkeeping.
	SL_RV = 0             # valid rows / columns of the block
	SL_CV = 8
	SL_ADDR = 16          # memory address, DMA block bytes, stride, total size
	SL_BLK = 24
	SL_STRIDE = 32
	SL_SIZE = 40
	SL_ISSUED = 48        # DMAs issued with this slot's reply word (cumulative)
	SL_RAW = 56           # LDM buffer
	SL_REPLY = 64         # reply word (the engine counts completions)
	SL_OFFSET = 72        # LDM offset of this CPE's DMA in the buffer (shared: its rows)

	SW_FRAME = 32         # 0: ra
	.globl	swgemm_stack          # the stack of the call chain, for the host's LDM plan
	swgemm_stack = SW_FRAME + GEMM_PRIM_FRAME

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
JOB_REPLY:
	.skip	32
	.globl	swgemm_ldm_end        # the host places the buffers from here up
swgemm_ldm_end:

	.text

# ---- leaf routines: arguments in $16.., clobber $0-$8, $16-$25, $27-$29, keep $9-$15 --------

# SLOT_ADDRESS op, slot: slot <- the address of slot `slot` of operand record `op`.
	.macro	SLOT_ADDRESS op, slot
	mull	\slot, SLOT_BYTES, \slot
	addl	\op, \slot, \slot
	addl	\slot, O_SLOT, \slot
	.endm

# EXTENT size, offset, total, index, first, valid: along one dimension of the operand record
# $16, this CPE's first element of CG block `index` and how many of its `size` are valid,
# clamp(total - first, 0, size). Temporaries $1, $3.
	.macro	EXTENT size, offset, total, index, first, valid
	ldl	$1, \size($16)
	sll	$1, 3, \first
	mull	\index, \first, \first
	ldl	$3, \offset($16)
	addl	\first, $3, \first
	ldl	$3, \total($16)
	subl	$3, \first, \valid
	sellt	\valid, 0, \valid, \valid
	cmplt	\valid, $1, $3
	seleq	$3, $1, \valid, \valid
	.endm

# locate(op $16, rb $17, cb $18, slot $19): the geometry of CG block (rb, cb) for this CPE
# into the slot: valid rows rv = clamp(rows - r0, 0, R), cols likewise (rounded up to the
# grain), and the DMA that moves it, landing contiguous in LDM. PE mode: exactly this CPE's
# part, one strided DMA (natural: rv memory rows of cv elements; transposed: cv rows of rv).
# Shared: the group's memory rows are whole rows of a column panel (one block per sharer;
# the panel of the CG block along the memory row), so this CPE moves its share of them,
# [share * rows / 8, (share + 1) * rows / 8), contiguous, dealt block by block to the
# sharers (whose buffers lie at the same LDM address).
	.ent	locate
locate:
	SLOT_ADDRESS $16, $19
	EXTENT	O_R, O_ROWOFF, O_ROWS, $17, $2, $4      # r0, rv
	EXTENT	O_L, O_COLOFF, O_COLS, $18, $5, $6      # c0, cv
	ldl	$1, O_GRAIN($16)
	subl	$1, 1, $1
	addl	$6, $1, $6
	bic	$6, $1, $6
	stl	$4, SL_RV($19)
	stl	$6, SL_CV($19)
	ldl	$7, JOB + J_ES($31)
	mull	$4, $6, $8
	mull	$8, $7, $8
	stl	$8, SL_SIZE($19)
	stl	$31, SL_OFFSET($19)
	ldl	$1, O_TRANS($16)
	bne	$1, 1f
	mov	$2, $20               # natural: memory row r0, column c0, rv rows of cv
	mov	$5, $21
	mov	$6, $22
	mov	$4, $23
	br	2f
1:	mov	$5, $20               # transposed: memory row c0, column r0, cv rows of rv
	mov	$2, $21
	mov	$4, $22
	mov	$6, $23
2:	mull	$22, $7, $22
	stl	$22, SL_BLK($19)
	ldl	$1, O_LDB($16)
	subl	$1, $22, $3
	stl	$3, SL_STRIDE($19)
	ldl	$3, O_BASE($16)
	ldl	$0, O_SHARED($16)
	bne	$0, 3f
	mull	$20, $1, $20
	mull	$21, $7, $21
	addl	$3, $20, $3
	addl	$3, $21, $3
	stl	$3, SL_ADDR($19)
	ret
3:	ldl	$2, O_TRANS($16)
	seleq	$2, $18, $17, $2      # the CG block along the memory row: its panel
	ldl	$6, O_PANEL($16)
	mull	$2, $6, $2
	addl	$3, $2, $3
	ldl	$0, O_SHARE($16)
	mull	$0, $23, $4
	srl	$4, 3, $4             # first row of this CPE's share
	addl	$0, 1, $0
	mull	$0, $23, $0
	srl	$0, 3, $0
	subl	$0, $4, $0            # its rows
	mull	$0, $1, $0
	stl	$0, SL_SIZE($19)
	stl	$31, SL_STRIDE($19)
	mull	$4, $22, $5
	stl	$5, SL_OFFSET($19)
	addl	$20, $4, $20
	mull	$20, $1, $20
	addl	$3, $20, $3
	stl	$3, SL_ADDR($19)
	ret
	.end	locate

# issue(op $16, slot $17, DMA op $18: DMA_GET or DMA_PUT): the slot's DMA in the operand's
# mode (none if it is empty).
	.ent	issue
issue:
	ldl	$7, O_SHARED($16)
	sll	$7, DESC_MODE_SHIFT - DESC_OP_SHIFT, $7
	addl	$18, $7, $18          # the mode above the op
	SLOT_ADDRESS $16, $17
	ldl	$1, SL_SIZE($17)
	beq	$1, 1f
	ldl	$2, SL_ISSUED($17)
	addl	$2, 1, $2
	stl	$2, SL_ISSUED($17)
	ldl	$2, SL_BLK($17)
	ldl	$3, SL_STRIDE($17)
	addl	$17, SL_REPLY, $4
	MAKE_DESC_REGS $6, $18, $1, $2, $3, $4
	ldl	$4, SL_ADDR($17)
	ldl	$5, SL_RAW($17)
	ldl	$7, SL_OFFSET($17)
	addl	$5, $7, $5
	dma	$6, $4, $5
1:	ret
	.end	issue

# await(op $16, slot $17): spin until every DMA issued with the slot's reply word is done;
# for a shared operand then also the sharers' (group_barrier).
	.ent	await
await:
	SLOT_ADDRESS $16, $17
	ldl	$1, SL_ISSUED($17)
1:	ldw	$2, SL_REPLY($17)
	cmplt	$2, $1, $2
	bne	$2, 1b
	br	group_barrier
	.end	await

# group_barrier(op $16): for a shared operand, a barrier of its sharing group (ROW: this CPE's
# row, RANK: its column): the sharers' DMAs into this LDM are done, or they may read it.
	.ent	group_barrier
group_barrier:
	ldl	$1, O_SHARED($16)
	beq	$1, 2f
	cmpeq	$1, DMA_ROW, $1
	beq	$1, 1f
	synr	0xff
	ret
1:	sync	0xff
2:	ret
	.end	group_barrier

# pack(op $16): make O_OPERAND point at the current block in the primitive's layout (R x L
# doubles): the raw buffer itself for a full natural f64 block, else the packed buffer, zeroed
# if the block is partial and filled with the valid part by a copy routine (tail call).
	.ent	pack
pack:
	ldl	$1, O_CUR($16)
	SLOT_ADDRESS $16, $1
	ldl	$18, SL_RV($1)
	ldl	$19, SL_CV($1)
	ldl	$2, SL_RAW($1)
	ldl	$3, O_R($16)
	ldl	$4, O_L($16)
	ldl	$5, O_TRANS($16)
	ldl	$6, JOB + J_ES($31)
	cmpeq	$18, $3, $7
	cmpeq	$19, $4, $8
	and	$7, $8, $7            # full block
	cmpeq	$6, 8, $8
	and	$7, $8, $8
	cmpeq	$5, 0, $0
	and	$8, $0, $8
	beq	$8, 1f
	stl	$2, O_OPERAND($16)    # used in place
	ret
1:	ldl	$17, O_PACK($16)
	stl	$17, O_OPERAND($16)
	sll	$4, 3, $20            # packed row pitch
	bne	$7, 2f
	mull	$3, $20, $21
	mov	$17, $22
	ZERO	$22, $21
2:	beq	$18, 3f
	beq	$19, 3f
	mov	$2, $16
	cmpeq	$6, 8, $6
	bne	$5, 4f
	bne	$6, pack_natural_d
	br	pack_natural_s
4:	bne	$6, pack_transposed_d
	br	pack_transposed_s
3:	ret
	.end	pack

# Copy routines: $16 raw block (LDM, contiguous), $17 packed block, $18 rv, $19 cv, $20 packed
# row pitch (bytes). Vector loops where the rows keep vector alignment, scalar otherwise
# (boundary blocks only).

# COPY_SCALAR sload, es, rows, length, step, row_step: for each of `rows` raw rows ($16, $21
# bytes apart), copy `length` elements to the packed block ($17) `step` bytes apart, the next
# row's first `row_step` bytes further; returns. The boundary-block path of both copies.
	.macro	COPY_SCALAR sload, es, rows, length, step, row_step
.Lrow\@:
	mov	$16, $23
	mov	$17, $24
	mov	\length, $29
.Lelem\@:
	\sload	$1, 0($23)
	ldi	$23, \es($23)
	subl	$29, 1, $29
	fstd	$1, 0($24)
	addl	$24, \step, $24
	bgt	$29, .Lelem\@
	addl	$16, $21, $16
	addl	$17, \row_step, $17
	subl	\rows, 1, \rows
	bgt	\rows, .Lrow\@
	ret
	.endm

# PACK_NATURAL name, shift, es, sload, vload: raw rows of cv elements -> packed rows.
	.macro	PACK_NATURAL name, shift, es, sload, vload
	.ent	\name
\name:
	sll	$19, 3, $21
	cmpeq	$21, $20, $21
	beq	$21, .Lrows\@
	mull	$18, $19, $19         # full width: the block is one row
	ldi	$18, 1
.Lrows\@:
	sll	$19, \shift, $21      # raw row bytes
	and	$19, 3, $22
	bne	$22, .Lscalar\@
.Lvrow\@:
	mov	$16, $23
	mov	$17, $24
	mov	$19, $25
	CONVERT	$23, $24, $25, \vload, 4*\es, vstd, 32
	addl	$16, $21, $16
	addl	$17, $20, $17
	subl	$18, 1, $18
	bgt	$18, .Lvrow\@
	ret
.Lscalar\@:
	ldi	$0, 8
	COPY_SCALAR \sload, \es, $18, $19, $0, $20
	.end	\name
	.endm

# PACK_TRANSPOSED name, shift, es, sload, vload: raw rows are the packed columns: raw row c (rv
# elements) -> packed column c, 4 elements (one vector) at a time when rv % 4 == 0.
	.macro	PACK_TRANSPOSED name, shift, es, sload, vload
	.ent	\name
\name:
	sll	$18, \shift, $21      # raw row bytes
	and	$18, 3, $22
	bne	$22, .Lscalar\@
	sll	$20, 2, $0            # 4 packed rows
.Lvrow\@:
	mov	$16, $23
	mov	$17, $24
	addl	$24, $20, $25
	addl	$25, $20, $27
	addl	$27, $20, $28
	mov	$18, $29
.Lvec\@:
	\vload	$1, 0($23)
	ldi	$23, 4*\es($23)
	subl	$29, 4, $29
	vextf	$1, 0, $2
	vextf	$1, 1, $3
	vextf	$1, 2, $4
	vextf	$1, 3, $5
	fstd	$2, 0($24)
	addl	$24, $0, $24
	fstd	$3, 0($25)
	addl	$25, $0, $25
	fstd	$4, 0($27)
	addl	$27, $0, $27
	fstd	$5, 0($28)
	addl	$28, $0, $28
	bgt	$29, .Lvec\@
	addl	$16, $21, $16
	ldi	$17, 8($17)
	subl	$19, 1, $19
	bgt	$19, .Lvrow\@
	ret
.Lscalar\@:
	ldi	$0, 8
	COPY_SCALAR \sload, \es, $19, $18, $20, $0
	.end	\name
	.endm

	PACK_NATURAL pack_natural_d, 3, 8, fldd, vldd
	PACK_NATURAL pack_natural_s, 2, 4, flds, vlds
	PACK_TRANSPOSED pack_transposed_d, 3, 8, fldd, vldd
	PACK_TRANSPOSED pack_transposed_s, 2, 4, flds, vlds

# finish(): C_out = alpha C_ldm + beta C_in over the valid part of the C block (slot 1's
# geometry; C_out and C_in are raw, rv x cv in the memory's precision). $0 alpha and $8 beta
# in all lanes. Tail-calls one of the loops below with $16 C_ldm, $17 C_in, $18 C_out, $19 rv,
# $20 cv, $21 C_ldm row pitch.
	.ent	finish
finish:
	ldi	$1, JOB + J_OP_C($31)
	ldl	$19, O_SLOT + SLOT_BYTES + SL_RV($1)
	ldl	$20, O_SLOT + SLOT_BYTES + SL_CV($1)
	beq	$19, 2f
	beq	$20, 2f
	ldl	$18, O_SLOT + SLOT_BYTES + SL_RAW($1)
	ldl	$17, O_SLOT + SL_RAW($1)
	ldl	$21, O_L($1)
	sll	$21, 3, $21
	ldl	$16, JOB + J_CLDM($31)
	ldde	$0, JOB + J_ALPHA($31)
	ldde	$8, JOB + J_BETA($31)
	sll	$20, 3, $2            # full width: one row
	cmpeq	$2, $21, $2
	beq	$2, 1f
	mull	$19, $20, $20
	ldi	$19, 1
1:	ldl	$2, JOB + J_HAS_BETA($31)
	ldl	$3, JOB + J_ES($31)
	cmpeq	$3, 8, $3
	and	$20, 3, $4
	bne	$4, 3f
	bne	$2, 4f
	bne	$3, finish_vector_d
	br	finish_vector_s
4:	bne	$3, finish_vector_beta_d
	br	finish_vector_beta_s
3:	bne	$2, 4f
	bne	$3, finish_scalar_d
	br	finish_scalar_s
4:	bne	$3, finish_scalar_beta_d
	br	finish_scalar_beta_s
2:	ret
	.end	finish

# FINISH name, shift, es, load, store, beta, vector: the rows of the valid part. vector = 1:
# rows of cv % 4 == 0 elements, 16 per iteration (4 independent chains hide the load and
# multiply latencies), then 4 at a time (load/store: vlds/vsts or vldd/vstd); vector = 0: any
# cv, one element at a time (flds/fsts or fldd/fstd).
	.macro	FINISH name, shift, es, load, store, beta, vector
	.ent	\name
\name:
	sll	$20, \shift, $22      # raw row bytes
.Lrow\@:
	mov	$16, $23
	mov	$17, $24
	mov	$18, $25
	mov	$20, $27
	.if	\vector
	br	.Lcheck16\@
.Lvec16\@:
	vldd	$1, 0($23)
	vldd	$2, 32($23)
	vldd	$3, 64($23)
	vldd	$4, 96($23)
	.if	\beta
	\load	$5, 0($24)
	\load	$6, 4*\es($24)
	\load	$7, 8*\es($24)
	\load	$28, 12*\es($24)
	ldi	$24, 16*\es($24)
	.endif
	vmuld	$1, $0, $1
	vmuld	$2, $0, $2
	vmuld	$3, $0, $3
	vmuld	$4, $0, $4
	.if	\beta
	vmad	$5, $8, $1, $1
	vmad	$6, $8, $2, $2
	vmad	$7, $8, $3, $3
	vmad	$28, $8, $4, $4
	.endif
	ldi	$23, 128($23)
	subl	$27, 16, $27
	\store	$1, 0($25)
	\store	$2, 4*\es($25)
	\store	$3, 8*\es($25)
	\store	$4, 12*\es($25)
	ldi	$25, 16*\es($25)
.Lcheck16\@:
	cmplt	$27, 16, $1
	beq	$1, .Lvec16\@
	br	.Lcheck4\@
.Lvec4\@:
	vldd	$1, 0($23)
	.if	\beta
	\load	$5, 0($24)
	ldi	$24, 4*\es($24)
	.endif
	vmuld	$1, $0, $1
	.if	\beta
	vmad	$5, $8, $1, $1
	.endif
	ldi	$23, 32($23)
	subl	$27, 4, $27
	\store	$1, 0($25)
	ldi	$25, 4*\es($25)
.Lcheck4\@:
	bgt	$27, .Lvec4\@
	.else
.Lelem\@:
	fldd	$1, 0($23)
	fmuld	$1, $0, $1
	.if	\beta
	\load	$2, 0($24)
	ldi	$24, \es($24)
	fmad	$2, $8, $1, $1
	.endif
	ldi	$23, 8($23)
	subl	$27, 1, $27
	\store	$1, 0($25)
	ldi	$25, \es($25)
	bgt	$27, .Lelem\@
	.endif
	addl	$16, $21, $16
	addl	$17, $22, $17
	addl	$18, $22, $18
	subl	$19, 1, $19
	bgt	$19, .Lrow\@
	ret
	.end	\name
	.endm

	FINISH	finish_vector_d, 3, 8, vldd, vstd, 0, 1
	FINISH	finish_vector_s, 2, 4, vlds, vsts, 0, 1
	FINISH	finish_vector_beta_d, 3, 8, vldd, vstd, 1, 1
	FINISH	finish_vector_beta_s, 2, 4, vlds, vsts, 1, 1
	FINISH	finish_scalar_d, 3, 8, fldd, fstd, 0, 0
	FINISH	finish_scalar_s, 2, 4, flds, fsts, 0, 0
	FINISH	finish_scalar_beta_d, 3, 8, fldd, fstd, 1, 0
	FINISH	finish_scalar_beta_s, 2, 4, flds, fsts, 1, 0

# ---- the driver ----------------------------------------------------------------------------
# Loop state in the registers the primitive preserves: $9 mB, $10 nB, $11 kB (this step),
# $12 mB', $13 nB', $14 kB' (the next step), $15 = 1 if there is a next step.

# CALL routine, op, a1, a2, a3: call a leaf routine with $16 = the operand record.
	.macro	CALL routine, op, a1=$31, a2=$31, a3=$31
	mov	\a1, $17
	mov	\a2, $18
	mov	\a3, $19
	ldi	$16, JOB + J_OP_\op($31)
	bsr	$26, \routine
	.endm

# PREFETCH op, rb, cb: the DMA of block (rb, cb) into the slot that is not current.
	.macro	PREFETCH op, rb, cb
	ldl	$1, JOB + J_OP_\op + O_CUR($31)
	xor	$1, 1, $1
	CALL	locate, \op, \rb, \cb, $1
	ldl	$1, JOB + J_OP_\op + O_CUR($31)
	xor	$1, 1, $1
	CALL	issue, \op, $1, DMA_GET
	ldi	$1, 1
	stl	$1, JOB + J_OP_\op + O_PENDING($31)
	.endm

# SWITCH op: at the start of a step, make the block fetched for it current (its slot is then
# no longer a prefetch target).
	.macro	SWITCH op
	ldl	$1, JOB + J_OP_\op + O_PENDING($31)
	beq	$1, .Lswitched\@
	stl	$31, JOB + J_OP_\op + O_PENDING($31)
	stl	$1, JOB + J_OP_\op + O_FRESH($31)
	ldl	$1, JOB + J_OP_\op + O_CUR($31)
	xor	$1, 1, $1
	stl	$1, JOB + J_OP_\op + O_CUR($31)
.Lswitched\@:
	.endm

# NEXT op, rb, cb, now_rb, now_cb, shared: if there is a next step, prefetch its block
# (rb, cb) of `op` when it differs from this step's (now_rb, now_cb) and the operand is
# shared (1) or not (0). A PE operand's prefetch is issued before this step's wait; a shared
# one's after the group's barrier in ACTIVATE, when no sharer still reads the slot it fills.
	.macro	NEXT op, rb, cb, now_rb, now_cb, shared
	beq	$15, .Lnext\@
	ldl	$1, JOB + J_OP_\op + O_SHARED($31)
	.if	\shared
	beq	$1, .Lnext\@
	.else
	bne	$1, .Lnext\@
	.endif
	cmpeq	\rb, \now_rb, $1
	cmpeq	\cb, \now_cb, $2
	and	$1, $2, $1
	bne	$1, .Lnext\@
	PREFETCH \op, \rb, \cb
.Lnext\@:
	.endm

# ACTIVATE op: if the current block is new, wait for its DMA and pack it.
	.macro	ACTIVATE op
	ldl	$1, JOB + J_OP_\op + O_FRESH($31)
	beq	$1, .Lactive\@
	stl	$31, JOB + J_OP_\op + O_FRESH($31)
	ldl	$1, JOB + J_OP_\op + O_CUR($31)
	CALL	await, \op, $1
	CALL	pack, \op
.Lactive\@:
	.endm

	.globl	swgemm
	.ent	swgemm
swgemm:
	ldi	$sp, -SW_FRAME($sp)
	.frame	$30, SW_FRAME, $26, 0
	stl	$26, 0($sp)
	stw	$31, JOB_REPLY($31)
	MAKE_DESC $2, DMA_GET, JOB_BYTES, JOB_REPLY
	ldi	$3, JOB
	dma	$2, $16, $3
1:	ldw	$1, JOB_REPLY($31)
	beq	$1, 1b
	BIND_IO
	# This CPE's offsets inside a CG block: rows follow i (or j if O_SWAP), columns the other.
	rcid	$1
	srl	$1, 3, $2             # i
	and	$1, 7, $3             # j
	.irp	op, A, B, C
	ldl	$4, JOB + J_OP_\op + O_SWAP($31)
	mov	$2, $5
	mov	$3, $6
	beq	$4, 2f
	mov	$3, $5
	mov	$2, $6
2:	ldl	$4, JOB + J_OP_\op + O_R($31)
	mull	$4, $5, $5
	stl	$5, JOB + J_OP_\op + O_ROWOFF($31)
	ldl	$4, JOB + J_OP_\op + O_L($31)
	mull	$4, $6, $6
	stl	$6, JOB + J_OP_\op + O_COLOFF($31)
	ldl	$4, JOB + J_OP_\op + O_SHARED($31)
	cmpeq	$4, DMA_ROW, $4
	seleq	$4, $2, $3, $5        # ROW: the sharers are the row, so the place is j; RANK: i
	stl	$5, JOB + J_OP_\op + O_SHARE($31)
	.endr
	clr	$9
	clr	$10
	clr	$11
	PREFETCH A, $31, $31
	PREFETCH B, $31, $31
	ldl	$1, JOB + J_HAS_BETA($31)
	beq	$1, .Lstep
	CALL	locate, C, $31, $31, $31
	CALL	issue, C, $31, DMA_GET
.Lstep:
	SWITCH	A
	SWITCH	B
	# the next step: kB fastest, then nB, then mB
	addl	$11, 1, $14
	mov	$10, $13
	mov	$9, $12
	ldl	$1, JOB + J_NK($31)
	cmplt	$14, $1, $1
	bne	$1, 1f
	clr	$14
	addl	$13, 1, $13
	ldl	$1, JOB + J_NN($31)
	cmplt	$13, $1, $1
	bne	$1, 1f
	clr	$13
	addl	$12, 1, $12
1:	ldl	$1, JOB + J_NM($31)
	cmplt	$12, $1, $15
	# prefetch the next step's blocks that differ from this step's
	NEXT	A, $14, $12, $11, $9, 0
	NEXT	B, $14, $13, $11, $10, 0
	ACTIVATE A
	ACTIVATE B
	NEXT	A, $14, $12, $11, $9, 1
	NEXT	B, $14, $13, $11, $10, 1
	bne	$11, 3f
	ldl	$1, JOB + J_CLDM($31)
	ldl	$2, JOB + J_MB($31)
	ldl	$3, JOB + J_NB($31)
	mull	$2, $3, $2
	sll	$2, 3, $2
	ZERO	$1, $2
3:	ldl	$16, JOB + J_OP_A + O_OPERAND($31)
	ldl	$17, JOB + J_OP_B + O_OPERAND($31)
	ldl	$18, JOB + J_CLDM($31)
	ldl	$19, JOB + J_MB($31)
	ldl	$20, JOB + J_NB($31)
	ldl	$21, JOB + J_KB($31)
	bsr	$26, gemm_prim_mn_d
	# after the last K step: finish the C block and write it out
	ldl	$1, JOB + J_NK($31)
	subl	$1, 1, $1
	cmpeq	$11, $1, $1
	beq	$1, 4f
	ldl	$1, JOB + J_HAS_BETA($31)
	beq	$1, 5f
	CALL	await, C, $31
5:	ldi	$1, 1
	CALL	await, C, $1          # the previous block's put has left C_out
	ldi	$1, 1
	CALL	locate, C, $9, $10, $1
	bsr	$26, finish
	CALL	group_barrier, C      # shared: the sharers' C_out are ready to be read
	ldi	$1, 1
	CALL	issue, C, $1, DMA_PUT
	ldl	$1, JOB + J_HAS_BETA($31)
	beq	$1, 4f
	beq	$15, 4f
	CALL	locate, C, $12, $13, $31
	CALL	issue, C, $31, DMA_GET
4:	mov	$12, $9
	mov	$13, $10
	mov	$14, $11
	bne	$15, .Lstep
	ldi	$1, 1
	CALL	await, C, $1
	ldl	$26, 0($sp)
	ldi	$sp, SW_FRAME($sp)
	ret
	.end	swgemm
