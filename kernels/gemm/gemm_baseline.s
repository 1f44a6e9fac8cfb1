# Baseline GEMM for `swsim bench gemm` experiment 4: C = A B in double precision, the
# straightforward way the issue defines it. Each CPE computes whole Mt x Nt tiles of C by
# itself (tiles dealt round-robin over the 64 CPEs): for each K chunk it fetches the A and B
# panels it needs with two DMAs, waits for them, and runs a register-blocked vmad loop over
# 4 x 16 micro-tiles; then it writes the tile out. No register communication, no double
# buffering. docs/gemm.md ("Baseline GEMM") has the measurements; hostlib/blas/baseline.py the host.
#
# Arguments: a0 = A (K x M, k-major: element (k, m) at A + (k M + m) 8), a1 = B (K x N,
# row-major), a2 = C (M x N, row-major), a3 = M, a4 = N, a5 = K; on the stack Mt, Nt, Kc.
# The host guarantees Mt | M, Nt | N, Mt % 4 = 0, Nt % 16 = 0 and that the buffers fit.
#
# LDM: the A panel (Kc x Mt), the B panel (Kc x Nt), then the C tile as Mt/4 x Nt/16
# contiguous micro-tiles of 4 x 16 doubles (512 bytes, row-major inside), so the inner loop
# addresses C with constant offsets. The inner loop reads one row past the end of each panel
# (values it never uses): the A panel is followed by the B panel, the B panel by the C tile.

	.set	noreorder
	.include "../include/dma.inc"

	MICRO_BYTES = 512      # one 4 x 16 micro-tile of doubles
	REQ_MESH_ROWS = 8      # checked at launch: tiles are dealt 64 apart (next_tile)
	REQ_MESH_COLS = 8
	P_BASE = 0             # panel record fields
	P_LD = 8
	P_FIRST = 16
	P_WIDTH = 24
	P_LDM = 32

# WAIT_REPLIES count: spin until the reply word reaches `count` (a register).
	.macro	WAIT_REPLIES count
3:	ldw	$29, REPLY
	cmplt	$29, \count, $29
	bne	$29, 3b
	.endm


	.ldm
	.align	5
REPLY:	.skip	32             # DMA reply word
# The two panel records, same field order (P_*): what get_panel needs to fetch a panel.
PANEL_A:
ARG_A:	.quad	0              # P_BASE: the operand in memory
ARG_M:	.quad	0              # P_LD: its row length in elements
ROW0:	.quad	0              # P_FIRST: the current tile's first row m0 / column n0
TILE_M:	.quad	0              # P_WIDTH: Mt / Nt
A_PAN:	.quad	0              # P_LDM: the panel's LDM buffer
A_END:	.quad	0              # its first row's end
PANEL_B:
ARG_B:	.quad	0
ARG_N:	.quad	0
COL0:	.quad	0
TILE_N:	.quad	0
B_PAN:	.quad	0
B_END:	.quad	0
ARG_C:	.quad	0              # the other arguments
ARG_K:	.quad	0
CHUNK_K:                       # Kc
	.quad	0
RET:	.quad	0              # return address
C_TILE:	.quad	0              # the C tile in LDM and its end
C_END:	.quad	0
K0:	.quad	0              # the current K chunk: first k and length
KCUR:	.quad	0
A_MT:	.quad	0              # the current micro-tile: A, B and C addresses
B_MT:	.quad	0
C_MT:	.quad	0
	.align	5
	.globl	baseline_ldm_end      # the buffers start here
baseline_ldm_end:

	.text
	.globl	gemm_baseline
	.ent	gemm_baseline
gemm_baseline:
	stl	$26, RET
	stl	$16, ARG_A
	stl	$17, ARG_B
	stl	$18, ARG_C
	stl	$19, ARG_M
	stl	$20, ARG_N
	stl	$21, ARG_K
	ldl	$1, 0($30)
	stl	$1, TILE_M
	ldl	$2, 8($30)
	stl	$2, TILE_N
	ldl	$3, 16($30)
	stl	$3, CHUNK_K
	# buffers: A panel Kc Mt, B panel Kc Nt, C tile Mt Nt doubles
	ldi	$4, baseline_ldm_end
	stl	$4, A_PAN
	s8addl	$1, $4, $5
	stl	$5, A_END
	mull	$3, $1, $5
	s8addl	$5, $4, $4
	stl	$4, B_PAN
	s8addl	$2, $4, $5
	stl	$5, B_END
	mull	$3, $2, $5
	s8addl	$5, $4, $4
	stl	$4, C_TILE
	mull	$1, $2, $5
	s8addl	$5, $4, $4
	stl	$4, C_END
	# first tile: number id in row-major tile order, as column n0 = id Nt of row 0
	rcid	$1
	mull	$1, $2, $1
	stl	$1, COL0
	stl	$31, ROW0

next_tile:
	# carry n0 past the right edge into m0 (tiles are dealt 64 apart)
	ldl	$1, COL0
	ldl	$2, ROW0
	ldl	$3, ARG_N
	ldl	$4, TILE_M
1:	cmplt	$1, $3, $5
	bne	$5, 2f
	subl	$1, $3, $1
	addl	$2, $4, $2
	br	1b
2:	stl	$1, COL0
	stl	$2, ROW0
	ldl	$5, ARG_M
	cmplt	$2, $5, $5
	beq	$5, done

	# zero the C tile
	ldl	$1, C_TILE
	ldl	$2, C_END
1:	vstd	$31, 0($1)
	addl	$1, 32, $1
	cmplt	$1, $2, $3
	bne	$3, 1b
	stl	$31, K0

next_chunk:
	# kc = min(Kc, K - k0)
	ldl	$1, K0
	ldl	$2, ARG_K
	subl	$2, $1, $2
	ldl	$3, CHUNK_K
	cmplt	$2, $3, $4
	seleq	$4, $3, $2, $2
	stl	$2, KCUR
	stw	$31, REPLY
	ldi	$16, PANEL_A
	bsr	$26, get_panel
	ldi	$16, PANEL_B
	bsr	$26, get_panel
	ldi	$1, 2
	WAIT_REPLIES $1

	# every micro-tile of the C tile: C_MT walks them in order, A_MT down the panel
	# columns (4 at a time), B_MT across them (16 at a time)
	ldl	$1, A_PAN
	stl	$1, A_MT
	ldl	$1, C_TILE
	stl	$1, C_MT
next_micro_row:
	ldl	$1, B_PAN
	stl	$1, B_MT
next_micro:
	bsr	$26, micro_tile
	ldl	$1, C_MT
	ldi	$1, MICRO_BYTES($1)
	stl	$1, C_MT
	ldl	$1, B_MT
	addl	$1, 128, $1
	stl	$1, B_MT
	ldl	$2, B_END
	cmplt	$1, $2, $3
	bne	$3, next_micro
	ldl	$1, A_MT
	addl	$1, 32, $1
	stl	$1, A_MT
	ldl	$2, A_END
	cmplt	$1, $2, $3
	bne	$3, next_micro_row

	ldl	$1, K0
	ldl	$2, KCUR
	addl	$1, $2, $1
	stl	$1, K0
	ldl	$2, ARG_K
	cmplt	$1, $2, $3
	bne	$3, next_chunk

	# write the tile: one put per micro-tile, 4 rows of 16 doubles, row stride N
	ldl	$4, ARG_N
	subl	$4, 16, $1
	sll	$1, 3, $1
	ldi	$2, 128
	MAKE_DESC $3, DMA_PUT, MICRO_BYTES, REPLY, block=$2
	DESC_SET_STRIDE $3, $1
	stw	$31, REPLY
	ldl	$1, ROW0                # $5 = C + (m0 N + n0) 8: the micro-row's first element
	mull	$1, $4, $1
	ldl	$2, COL0
	addl	$1, $2, $1
	ldl	$5, ARG_C
	s8addl	$1, $5, $5
	sll	$4, 5, $4               # $4 = 4 rows of C in bytes
	ldl	$6, C_TILE
	ldl	$7, C_END
	ldl	$8, TILE_N
	srl	$8, 4, $8               # micro-tiles per micro-row
	clr	$0                      # puts issued
1:	mov	$5, $2
	mov	$8, $1
2:	dma	$3, $2, $6
	addl	$0, 1, $0
	addl	$2, 128, $2
	ldi	$6, MICRO_BYTES($6)
	subl	$1, 1, $1
	bne	$1, 2b
	addl	$5, $4, $5
	cmplt	$6, $7, $1
	bne	$1, 1b
	WAIT_REPLIES $0

	ldl	$1, COL0                # the next tile of this CPE: 64 tiles on
	ldl	$2, TILE_N
	sll	$2, 6, $2
	addl	$1, $2, $1
	stl	$1, COL0
	br	next_tile

done:	ldl	$26, RET
	ret
	.end	gemm_baseline

# get_panel: DMA the current K chunk's panel of the record $16 (KCUR rows of P_WIDTH elements
# from row K0, column P_FIRST of the operand, row stride P_LD) to P_LDM, contiguous; counts on
# REPLY. Clobbers $1-$5, $29.
	.ent	get_panel
get_panel:
	ldl	$1, K0                  # $5 = the panel's first element in memory
	ldl	$4, P_LD($16)
	mull	$1, $4, $1
	ldl	$2, P_FIRST($16)
	addl	$1, $2, $1
	ldl	$5, P_BASE($16)
	s8addl	$1, $5, $5
	ldl	$2, KCUR
	ldl	$3, P_WIDTH($16)
	mull	$2, $3, $2
	sll	$2, 3, $2
	sll	$3, 3, $3                       # block: one panel row
	sll	$4, 3, $4
	subl	$4, $3, $4                      # stride: the rest of the memory row
	MAKE_DESC $1, DMA_GET, 0($2), REPLY, block=$3
	DESC_SET_STRIDE $1, $4
	ldl	$2, P_LDM($16)
	dma	$1, $5, $2
	ret
	.end	get_panel

# micro_tile: C_MT (4 x 16) += A_MT (KCUR x 4 of the A panel) B_MT (KCUR x 16 of the B panel).
# Accumulators: c[r][v] = $(4r + v) for row r, vector v (columns 4v..4v+3); A splats
# a0..a3 = $16-$19, B vectors b0..b3 = $20-$23; $24 / $25 the A / B row, $27 / $28 their row
# strides, $29 the k count. Clobbers every register but $26, $30.
	.ent	micro_tile
micro_tile:
	ldl	$24, A_MT
	ldl	$25, B_MT
	ldl	$29, C_MT
	ldde	$16, 0($24)
	ldde	$17, 8($24)
	vldd	$20, 0($25)
	vldd	$21, 32($25)
	vldd	$22, 64($25)
	.irp	acc, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vldd	$\acc, \acc * 32($29)
	.endr
	ldl	$27, TILE_M
	sll	$27, 3, $27
	ldl	$28, TILE_N
	sll	$28, 3, $28
	ldl	$29, KCUR
	# 16 cycles per k: P0 does the 16 vmad in 2 x 2 quadrants (a0 a1 x b0 b1, a0 a1 x
	# b2 b3, a2 a3 x b0 b1, a2 a3 x b2 b3); P1 loads b3, a2, a3 of this row first and a0,
	# a1, b0, b1, b2 of the next row as soon as their last use has issued (load latency 4).
1:	vmad	$16, $20, $0, $0
	vldd	$23, 96($25)
	vmad	$17, $20, $4, $4
	ldde	$18, 16($24)
	vmad	$16, $21, $1, $1
	ldde	$19, 24($24)
	vmad	$17, $21, $5, $5
	addl	$24, $27, $24
	vmad	$16, $22, $2, $2
	addl	$25, $28, $25
	vmad	$17, $22, $6, $6
	subl	$29, 1, $29
	vmad	$16, $23, $3, $3
	vmad	$17, $23, $7, $7
	vmad	$18, $20, $8, $8
	ldde	$16, 0($24)
	vmad	$19, $20, $12, $12
	ldde	$17, 8($24)
	vmad	$18, $21, $9, $9
	vldd	$20, 0($25)
	vmad	$19, $21, $13, $13
	vmad	$18, $22, $10, $10
	vldd	$21, 32($25)
	vmad	$19, $22, $14, $14
	vmad	$18, $23, $11, $11
	vldd	$22, 64($25)
	vmad	$19, $23, $15, $15
	bne	$29, 1b
	ldl	$29, C_MT
	.irp	acc, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vstd	$\acc, \acc * 32($29)
	.endr
	ret
	.end	micro_tile
