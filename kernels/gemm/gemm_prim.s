# The LDM GEMM primitive (Fang 2019, ch. 4): C += A x B on matrices distributed over the 64
# LDMs in 8 x 8 non-overlapping blocks. docs/gemm.md describes the algorithm and the variants.
#
# Every CPE (i, j) holds block (i, j) of A, B and C (Mb = M/8, Nb = N/8, Kb = K/8). All 64 CPEs
# call the same entry at the same time. In 8 steps t, CPE (i, t) broadcasts its A block along
# row i and CPE (t, j) its B block along column j; every CPE adds A(i, t) B(t, j) to its C block.
# The register tile is 16 elements of the *vector* operand (4 vector registers) x 4 splatted
# values of the *splat* operand, accumulated in 16 registers; its inner loop is the thesis'
# 16-cycle schedule (KBODY in kernels/gemm_kbody.inc): one vmad per cycle on P0, fetches on P1.
#
# Layouts (all blocks k-major, i.e. the K dimension is the slowest):
#   A block: Kb x Mb (element (m, k) at A + (k*Mb + m)*es), B block: Kb x Nb (N contiguous).
#   gemm_prim_nm_*: C block stored Nb x Mb (C^T row-major, M contiguous). The vector operand is A
#       (vldr/getr along rows), the splat operand B (lddec/getc along columns).
#       Mb multiple of 16, Nb multiple of 4.
#   gemm_prim_mn_*: C block stored Mb x Nb (row-major, N contiguous). The vector operand is B
#       (vldc/getc along columns), the splat operand A (ldder/getr along rows).
#       Nb multiple of 16, Mb multiple of 4.
# Precision suffix: _d double; _s1 single, load + put in the loop (strategy 1); _s2 single,
# converted to double in LDM around the _d primitive (strategy 2, needs a work area).
#
# Arguments: a0 = A, a1 = B, a2 = C (LDM addresses; 32-byte aligned, 16 for _s1), a3 = Mb,
# a4 = Nb, a5 = Kb (>= 1); _s2 also 0($sp) = LDM work area of 8*(Kb*Mb + Kb*Nb + Mb*Nb) bytes,
# 32-byte aligned. Preserves $9-$15, $26 (returns with ret), $30, $31; clobbers the rest.
#
# Internally the operands are V (vector, Vb elements per k) and S (splat, Sb per k); C is stored
# Sb x Vb. Loop registers: $24 V pointer, $25 S pointer, $26 V stride (Vb*es = also the C stride
# between splat columns), $27 k counter, $28 S stride, $29 C tile; $0-$3 the V vectors,
# $4-$7 the S splats, $8-$23 the accumulators (register 8+c is the vmad of cycle c).

	.set	noreorder
	.include "gemm_prim.inc"
	.include "../include/convert.inc"
	.text

# Frame of the double / strategy-1 primitives (sp-relative, 32-byte aligned).
	F_SAVED = 0           # $9..$15, 32 bytes each
	F_RA = 224
	F_CBASE = 232
	F_SBASE = 240
	F_STEP = 248          # t
	F_VCOORD = 256        # this CPE sends V at step t iff F_VCOORD == t (j or i)
	F_SCOORD = 264        # ... sends S iff F_SCOORD == t
	FRAME = GEMM_PRIM_FRAME

# The tile loops keep their state in the upper 64-bit lanes of the loop's stride and C
# registers (vextf / vinsf issue on P0, which is idle between tiles, beside the P1 loads and
# stores of C; the loop's scalar instructions only read and write lane 0):
#   $26: V stride | Kb - 1 | V end (V + Vb*es) | 3 * V stride (C: end of a tile row -> next)
#   $28: S stride | S tile | S end (S + Sb*es) | V
#   $29: C tile   | V tile

	.include "gemm_kbody.inc"


# ROLE_TILES vs, ss: one step for a CPE that sends V (vs) / S (ss): every C register tile,
# V tiles inner. Entered with the tile state ($28, $29 lane 1) at the first tile.
	.macro	ROLE_TILES vs, ss
.Ltile\@:
	vextf	$29, 1, $24           # V tile
	addl	$29, $26, $2          # C splat columns 1..3 (these registers are fetched later)
	vextf	$28, 1, $25           # S tile
	addl	$2, $26, $3
	vextf	$26, 1, $27           # Kb - 1
	addl	$3, $26, $7
	PROLOGUE_FETCH \vs, \ss, 1
	.irp	r, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23
	CACC	vld, \r, $29, $2, $3, $7
	.endr
	PROLOGUE_FETCH \vs, \ss, 0
	ble	$27, .Llast\@
.Lk\@:
	KBODY	\vs, \ss, 0, .Lk\@
.Llast\@:
	KBODY	\vs, \ss, 1
	# The last 7 stores, each paired with a P0 step to the next tile along the row of tiles
	# ($0-$3 are free after the last vmad).
	CACC	vst, 17, $29, $24, $25, $27
	vextf	$29, 1, $0            # V tile
	CACC	vst, 18, $29, $24, $25, $27
	vextf	$26, 2, $1            # V end
	CACC	vst, 19, $29, $24, $25, $27
	ldi	$0, 16 * GEMM_ES($0)
	CACC	vst, 20, $29, $24, $25, $27
	ldi	$29, 16 * GEMM_ES($29)
	CACC	vst, 21, $29, $24, $25, $27
	cmpeq	$0, $1, $1
	CACC	vst, 22, $29, $24, $25, $27
	vinsf	$0, $29, 1, $29
	CACC	vst, 23, $29, $24, $25, $27
	vextf	$28, 3, $0            # V
	beq	$1, .Ltile\@
	# Next row of tiles: 4 splat columns further.
	vextf	$28, 1, $1            # S tile
	vextf	$28, 2, $2            # S end
	vextf	$26, 3, $3            # 3 * V stride
	vinsf	$0, $29, 1, $29       # V tile = V
	ldi	$1, 4 * GEMM_ES($1)
	addl	$29, $3, $29
	vinsf	$1, $28, 1, $28
	cmpeq	$1, $2, $2
	beq	$2, .Ltile\@
	.endm

# GEMM_BODY: the whole primitive for the current GEMM_DIR / GEMM_ES, with $16 = V, $17 = S,
# $18 = C, $19 = Vb, $20 = Sb, $21 = Kb.
	.macro	GEMM_BODY
	ldi	$sp, -FRAME($sp)
	.frame	$30, FRAME, $26, 0
	.irp	r, 9, 10, 11, 12, 13, 14, 15
	vstd	$\r, F_SAVED + 32 * (\r - 9)($sp)
	.endr
	stl	$26, F_RA($sp)
	stl	$18, F_CBASE($sp)
	stl	$17, F_SBASE($sp)
	sll	$19, 3 - GEMM_SINGLE, $26   # V stride (bytes per k)
	sll	$20, 3 - GEMM_SINGLE, $28   # S stride
	subl	$21, 1, $1
	vinsf	$1, $26, 1, $26
	addl	$16, $26, $1
	vinsf	$1, $26, 2, $26       # V end
	addl	$26, $26, $1
	addl	$1, $26, $1
	vinsf	$1, $26, 3, $26       # 3 * V stride
	addl	$17, $28, $1
	vinsf	$1, $28, 2, $28       # S end
	vinsf	$16, $28, 3, $28      # V
	rcid	$1
	srl	$1, 3, $2             # row i
	and	$1, 7, $3             # column j
	.if GEMM_DIR                  # V = B comes along the column from row t: send iff i == t
	stl	$2, F_VCOORD($sp)
	stl	$3, F_SCOORD($sp)
	.else                         # V = A comes along the row from column t: send iff j == t
	stl	$3, F_VCOORD($sp)
	stl	$2, F_SCOORD($sp)
	.endif
	stl	$31, F_STEP($sp)
.Lstep\@:
	ldl	$1, F_STEP($sp)
	ldl	$2, F_VCOORD($sp)
	ldl	$3, F_SCOORD($sp)
	ldl	$29, F_CBASE($sp)
	ldl	$5, F_SBASE($sp)
	vextf	$28, 3, $4
	vinsf	$4, $29, 1, $29       # V tile = V
	vinsf	$5, $28, 1, $28       # S tile = S
	cmpeq	$2, $1, $2
	cmpeq	$3, $1, $3
	bne	$2, .Lvsend\@
	bne	$3, .Lrecv_send\@
	ROLE_TILES 0, 0
	br	.Lstep_done\@
.Lrecv_send\@:
	ROLE_TILES 0, 1
	br	.Lstep_done\@
.Lvsend\@:
	bne	$3, .Lsend_send\@
	ROLE_TILES 1, 0
	br	.Lstep_done\@
.Lsend_send\@:
	ROLE_TILES 1, 1
.Lstep_done\@:
	ldl	$1, F_STEP($sp)
	addl	$1, 1, $1
	stl	$1, F_STEP($sp)
	cmplt	$1, 8, $1
	bne	$1, .Lstep\@
	.irp	r, 9, 10, 11, 12, 13, 14, 15
	vldd	$\r, F_SAVED + 32 * (\r - 9)($sp)
	.endr
	ldl	$26, F_RA($sp)
	ldi	$sp, FRAME($sp)
	ret
	.endm

# GEMM_ENTRY name, dir, single: a primitive with the (A, B, C, Mb, Nb, Kb) arguments.
	.macro	GEMM_ENTRY name, dir, single
	GEMM_DIR = \dir
	GEMM_SINGLE = \single
	GEMM_ES = 8 - 4 * \single
	.globl	\name
	.ent	\name
\name:
	.if \dir                     # V = B, S = A, Vb = Nb, Sb = Mb
	mov	$16, $1
	mov	$17, $16
	mov	$1, $17
	mov	$19, $1
	mov	$20, $19
	mov	$1, $20
	.endif
	GEMM_BODY
	.end	\name
	.endm

	GEMM_ENTRY gemm_prim_nm_d, 0, 0
	GEMM_ENTRY gemm_prim_mn_d, 1, 0
	GEMM_ENTRY gemm_prim_nm_s1, 0, 1
	GEMM_ENTRY gemm_prim_mn_s1, 1, 1

# ---- Strategy 2: single precision converted to double in LDM (CONVERT: convert.inc) ----

# Frame of the strategy-2 wrappers.
	S2_RA = 0
	S2_C32 = 8
	S2_C64 = 16
	S2_CCOUNT = 24        # Mb * Nb
	S2_ARGS = 32          # the callee has no stack arguments
	S2_FRAME = GEMM_PRIM_S2_FRAME

# GEMM_S2_ENTRY name, double_entry: widen A, B, C into the work area, run the double
# primitive there, narrow C back.
	.macro	GEMM_S2_ENTRY name, double_entry
	.globl	\name
	.ent	\name
\name:
	ldl	$22, 0($sp)           # work area
	ldi	$sp, -S2_FRAME($sp)
	.frame	$30, S2_FRAME, $26, 0
	stl	$26, S2_RA($sp)
	stl	$18, S2_C32($sp)
	mull	$21, $19, $23         # Kb * Mb
	mov	$22, $24              # A64
	CONVERT	$16, $22, $23, vlds, 16, vstd, 32
	mov	$22, $25              # B64
	mull	$21, $20, $23         # Kb * Nb
	CONVERT	$17, $22, $23, vlds, 16, vstd, 32
	stl	$22, S2_C64($sp)      # C64
	mull	$19, $20, $23
	stl	$23, S2_CCOUNT($sp)
	mov	$22, $27
	CONVERT	$18, $22, $23, vlds, 16, vstd, 32
	mov	$24, $16
	mov	$25, $17
	mov	$27, $18
	bsr	$26, \double_entry
	ldl	$16, S2_C64($sp)
	ldl	$17, S2_C32($sp)
	ldl	$18, S2_CCOUNT($sp)
	CONVERT	$16, $17, $18, vldd, 32, vsts, 16
	ldl	$26, S2_RA($sp)
	ldi	$sp, S2_FRAME($sp)
	ret
	.end	\name
	.endm

	GEMM_S2_ENTRY gemm_prim_nm_s2, gemm_prim_nm_d
	GEMM_S2_ENTRY gemm_prim_mn_s2, gemm_prim_mn_d
