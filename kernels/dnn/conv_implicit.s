# Implicit GEMM convolution (Fang 2019 §5.1.2, Algorithms 3 and 4; docs/dnn.md "Implicit
# convolution"): the convolution as a sequence of LDM GEMM primitive calls (gemm_prim.s,
# gemm_prim_nm_d, linked beside it) whose operands are DMAed straight out of the activation
# and the weights; no im2col matrix exists anywhere. hostlib/dnn/conv/implicit.py prepares the
# job and chooses the blocking with its model.
#
# Layouts in memory (es = 4 or 8 bytes):
#   x  (R_i, C_i, N_i, B)  the thesis' RCNB, batch innermost; with an input dilation
#                          (J_DR, J_DCSH: backward-data of stride > 1) R_i x C_i is the dilated
#                          size, x holds only the pixels at multiples of it (J_XC per row)
#   w  (T, N_i, N_o)       one N_i x N_o matrix per tap t = kr K_c + kc, taps J_WTAP bytes apart
#                          (negative: the taps in reverse order, i.e. the 180-degree rotation
#                          backward-data needs)
#   y  (R_o, C_o, N_o, B)
#   bias (N_o,)            added when a tile is written out (the host passes zeros for none)
#
# The GEMM. An output *tile* is (nb, bb, r_o, cb): N_o block nb (8 NB channels), batch block
# bb (BB images), output row r_o, output-column block cb (CB columns), with 8 MB = CB BB. Its
# C = Y[r_o, cb-columns, nb-channels, bb-images] is N_o-block x M (M = (column, image) pairs)
# and is accumulated in LDM over the tile's *steps* (kr, kg, kb): kernel row kr (only the rows
# whose input row lies inside the image: padding rows cost nothing), a group of G kernel
# columns kg (G taps fused into one K, the thesis' K_c N_i of Table 4.2 row 4) and an N_i
# block kb (8 KI channels). A step is one primitive call
#     C (N_o-block x M) += W_step^T (K x N_o-block) . X_step (K x M),  K = G x 8 KI,
# the primitive's nm variant: V = A = X_step (vector along M, i.e. along the batch, which is
# contiguous in RCNB), S = B = W_step (splatted), C stored N_o-block x M (M contiguous) as y's
# (N_o, B) slices. CPE (i, j) holds
#   X block (i, j): the M chunk of CPE row i, one output column c = cb CB + ROW_C[i] and images
#       bb BB + ROW_B[i] .. + MB, times K rows (g, channel j KI + 0..KI-1) of tap (kr, kg G + g):
#       one strided DMA per g (KI blocks of MB elements, B elements apart) from input pixel
#       (r_o s_r + kr - p_r, c s_c + kc - p_c); a pixel in a padding column is not fetched, its
#       rows stay zero;
#   W block (i, j): K rows (g, channel i KI + ..) x the NB channels j NB + .. of nb; streamed
#       per step (one DMA per g) or, when all of an nb's blocks fit, *resident*: fetched and
#       packed once per nb (the thesis' hoisted weight DMA). When N_o = 8 NB (J_WROW) a CPE
#       row's W rows are contiguous: CPE (i, 0) fetches them with one ROW-mode DMA that deals
#       every CPE of the row its NB-element rows, and the row meets at synr;
#   C block (i, j): N_o channels j NB + .. x the CPE row's M chunk, written out after the
#       tile's last step with one strided DMA (NB blocks of MB elements).
# So Algorithm 3 (batch-size-aware, M = the batch at one output pixel) is CB = 1, BB = 8 MB and
# Algorithm 4 (image-size-aware, blocking B and C_o) is CB > 1; the host picks.
#
# Each step double-buffers: the next step's X (and streamed W) DMAs are issued before this
# step's blocks are waited for, packed and multiplied. A CPE issues at most 3 DMAs per step
# (the host ensures G (1 + streamed) <= 3, the channel depth). The tile's put is issued
# after the next step's prefetch; when prefetch and put would be 4 requests, the last X
# piece waits until after the primitive call, so issuing never stalls on the channel.
# Packing: f32 blocks are widened to f64 (the primitive's strategy 2, done here once per
# block); partial blocks (image, channel, batch or padding boundaries) are zero-filled around
# their valid part; a full f64 block is used where the DMA put it. Lanes past B or N_o hold
# zeros and are never written out. All 64 CPEs walk the same steps, so the primitive's
# broadcasts pair up without a barrier (as in swgemm.s).
#
# The host may run a sample: J_TILES tiles from tile (J_START_*), for estimate().
#
# Argument: a0 = the job in main memory (JOB_BYTES, int64 fields J_*). Stack:
# conv_implicit_stack.

	.set	noreorder
	.include "../gemm/gemm_prim.inc"
	.include "../include/dma.inc"
	.include "../include/convert.inc"

# ---- the job -------------------------------------------------------------------------------
	J_ES = 0              # element bytes in memory: 4 or 8
	J_X = 8               # x, w, y, bias in main memory
	J_W = 16
	J_WTAP = 24           # signed bytes from tap t to tap t + 1
	J_Y = 32
	J_BIAS = 40
	J_B = 48              # the geometry
	J_NI = 56
	J_NO = 64
	J_RI = 72
	J_CI = 80
	J_RO = 88
	J_CO = 96
	J_KR = 104
	J_KC = 112
	J_SR = 120
	J_SC = 128
	J_PR = 136
	J_PC = 144
	J_MB = 152            # the blocking: M and N_o per CPE, channels per CPE and step,
	J_NB = 160            # taps per step, K per CPE (G KI), batch and columns per tile
	J_KI = 168
	J_G = 176
	J_KB = 184
	J_BB = 192
	J_CB = 200
	J_NNB = 208           # block counts: N_o, batch, column blocks, N_i blocks, tap groups
	J_NBB = 216
	J_NCB = 224
	J_NKB = 232
	J_NKG = 240
	J_RESIDENT = 248      # 1: all W blocks of an nb stay in LDM
	J_START_NB = 256      # the first tile run and how many
	J_START_BB = 264
	J_START_RO = 272
	J_START_CB = 280
	J_TILES = 288
	J_ROW_C = 296         # per CPE row i: its column and first image inside a tile (8 each)
	J_ROW_B = 360
	J_A_RAW0 = 424        # LDM buffers (the host places them from conv_implicit_ldm_end)
	J_A_RAW1 = 432
	J_A_PACK = 440        # K x MB doubles
	J_W_RAW0 = 448
	J_W_RAW1 = 456
	J_W_PACK = 464        # K x NB doubles, or every block of an nb when resident
	J_C = 472             # NB x MB doubles
	J_C_OUT = 480         # NB x MB elements
	J_BIAS_LDM = 488      # NB doubles
	J_BIAS_RAW = 496      # NB elements
	J_WROW = 504          # 1 (N_o = 8 NB): a W block comes as one ROW-mode DMA per CPE row
	J_DR = 512            # input dilation along rows (a power of 2; 1: none): input row q is
	J_DRSH = 520          # x's row q / DR when DR divides q, else zero (a dilated dy); its
	J_DCSH = 528          # log2, and log2 of the column dilation
	J_XC = 536            # pixels per row of x in memory (J_RI, J_CI: the dilated sizes)
	JOB_BYTES = 544

# A step's state (the current step CUR and the next one NXT).
	ST_NB = 0
	ST_BB = 8
	ST_RO = 16
	ST_CB = 24
	ST_KR = 32
	ST_KG = 40
	ST_KB = 48
	ST_FIRST = 56         # first step of its tile
	ST_NEWNB = 64         # first step of an nb (load the bias, and the weights if resident)
	ST_LAST = 72          # last step of its tile
	ST_VALID = 80         # (NXT) there is a next step
	ST_BYTES = 88

# A DMA slot's record: what the DMAs issued into it moved.
	SL_KV = 0             # valid channels (rows per piece)
	SL_LEN = 8            # valid elements per row (X: images, W: N_o channels)
	SL_MASK = 16          # bit g: piece g was fetched
	SL_ISSUED = 24        # DMAs issued with the slot's reply word (cumulative)
	SL_BYTES = 32

	DMA_DEPTH = 3         # requests a CPE's DMA channel holds (vm/config.py dma_channel_depth)
	CI_FRAME = 32         # 0: ra
	.globl	conv_implicit_stack
	conv_implicit_stack = CI_FRAME + GEMM_PRIM_FRAME

	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
	.align	3
CUR:	.skip	ST_BYTES
NXT:	.skip	ST_BYTES
TMP:	.skip	ST_BYTES      # the weight loader's step
A_SLOT:	.skip	2 * SL_BYTES
W_SLOT:	.skip	2 * SL_BYTES
TILES_LEFT:
	.quad	0
X_FIRST:                      # issue_x's piece range
	.quad	0
X_END:
	.quad	0
X_DEFERRED:                   # 1: the next step's last X piece is still to be issued
	.quad	0
C_ISSUED:
	.quad	0
A_OPERAND:
	.quad	0
W_OPERAND:
	.quad	0
PUT_ADDR:                     # the tile written out by the next issue_put (0: none)
	.quad	0
	.align	5
PUT_DESC:
	.skip	32
REPLIES:                      # reply words: A slots 0/1, W slots 0/1, C puts, job / bias
	.skip	24
	R_A = 0
	R_W = 8
	R_C = 16
	R_SYNC = 20
	.globl	conv_implicit_ldm_end
conv_implicit_ldm_end:

	.text

# ---- small helpers -------------------------------------------------------------------------

# CLAMP value, size, tmp: value = min(max(value, 0), size).
	.macro	CLAMP value, size, tmp
	sellt	\value, 0, \value, \value
	cmplt	\value, \size, \tmp
	seleq	\tmp, \size, \value, \value
	.endm

# SHARE first, valid, size, total, none: valid = clamp(JOB.total - first, 0, JOB.size) (first
# a register); branch to `none` when nothing is left. Temporaries $2, $3, $5.
	.macro	SHARE first, valid, size, total, none
	ldl	$3, JOB + \total($31)
	subl	$3, \first, \valid
	ldl	$2, JOB + \size($31)
	CLAMP	\valid, $2, $5
	ble	\valid, \none
	.endm

# BLOCK_SHARE state, field, coord, first, valid, size, total, none: along a dimension cut
# into blocks of 8 JOB.size, this CPE's part of block state.field (the state's address in a
# register): first = (block 8 + coord) JOB.size, valid as SHARE. Temporaries $1-$3, $5.
	.macro	BLOCK_SHARE state, field, coord, first, valid, size, total, none
	ldl	$1, \field(\state)
	s8addl	$1, \coord, $1
	ldl	$2, JOB + \size($31)
	mull	$1, $2, \first
	SHARE	\first, \valid, \size, \total, \none
	.endm

# TILE_PLACE state, c, b0, bv, none: this CPE row's output column c = cb CB + ROW_C[i] and
# its images from b0 = bb BB + ROW_B[i], bv of them, in the state's tile; branch to `none`
# if c is past C_o or no image is left. Uses $10 = i. Temporaries $1-$3, $5.
	.macro	TILE_PLACE state, c, b0, bv, none
	ldl	$1, ST_CB(\state)
	ldl	$2, JOB + J_CB($31)
	mull	$1, $2, $1
	s8addl	$10, $31, $2
	ldl	$2, JOB + J_ROW_C($2)
	addl	$1, $2, \c
	ldl	$2, JOB + J_CO($31)
	cmplt	\c, $2, $2
	beq	$2, \none
	ldl	$1, ST_BB(\state)
	ldl	$2, JOB + J_BB($31)
	mull	$1, $2, $1
	s8addl	$10, $31, $2
	ldl	$2, JOB + J_ROW_B($2)
	addl	$1, $2, \b0
	SHARE	\b0, \bv, J_MB, J_B, \none
	.endm

# ROWS_DESC desc, op, rows, len, pitch, reply: the descriptor of `rows` blocks of `len`
# elements (registers) JOB.pitch elements apart, reply word at the address in `reply`;
# leaves $7 = es, $24 = block bytes, $25 = size. Temporaries $3, $5.
	.macro	ROWS_DESC desc, op, rows, len, pitch, reply
	ldl	$7, JOB + J_ES($31)
	mull	\len, $7, $24
	mull	\rows, $24, $25
	ldl	$3, JOB + \pitch($31)
	mull	$3, $7, $3
	subl	$3, $24, $3
	ldi	$5, \op
	MAKE_DESC_REGS \desc, $5, $25, $24, $3, \reply
	.endm

# KR_RANGE ro, lo, hi: the kernel rows whose input row r_o s_r + kr - p_r lies in the image:
# lo = max(0, p_r - r_o s_r), raised to the first input row that is a multiple of J_DR (the
# valid rows are then lo, lo + DR, ..), hi = min(K_r, R_i + p_r - r_o s_r). Temporaries $2-$4.
	.macro	KR_RANGE ro, lo, hi
	ldl	$2, JOB + J_SR($31)
	mull	\ro, $2, $2
	ldl	$3, JOB + J_PR($31)
	subl	$2, $3, $2            # input row of kr = 0
	subl	$31, $2, \lo
	sellt	\lo, 0, \lo, \lo
	addl	$2, \lo, $3
	subl	$31, $3, $3
	ldl	$4, JOB + J_DR($31)
	subl	$4, 1, $4
	and	$3, $4, $3
	addl	\lo, $3, \lo
	ldl	$3, JOB + J_RI($31)
	subl	$3, $2, \hi
	ldl	$3, JOB + J_KR($31)
	cmplt	$3, \hi, $4
	selne	$4, $3, \hi, \hi
	.endm

# BUMP field, count, carry: NXT.field += 1; fall through (carry) if it reached JOB.count
# (resetting it to 0), else branch to `done`.
	.macro	BUMP field, count, done
	ldl	$1, NXT + \field($31)
	addl	$1, 1, $1
	ldl	$2, JOB + \count($31)
	cmplt	$1, $2, $2
	stl	$1, NXT + \field($31)
	bne	$2, \done
	stl	$31, NXT + \field($31)
	.endm

# AWAIT slot_issued, reply: spin until the reply word has counted every DMA issued with it.
	.macro	AWAIT issued, reply
	ldl	$1, \issued($31)
.Lawait\@:
	ldw	$2, REPLIES + \reply($31)
	cmplt	$2, $1, $2
	bne	$2, .Lawait\@
	.endm

# ---- the step sequence ---------------------------------------------------------------------

# advance(): NXT = the step after CUR (kb fastest, then kg, the valid kr, then the tiles: cb,
# r_o, bb, nb), NXT.VALID = 0 after the last tile to run; CUR.LAST = whether CUR ends its tile.
	.ent	advance
advance:
	.irp	f, ST_NB, ST_BB, ST_RO, ST_CB, ST_KR, ST_KG, ST_KB
	ldl	$1, CUR + \f($31)
	stl	$1, NXT + \f($31)
	.endr
	stl	$31, NXT + ST_FIRST($31)
	stl	$31, NXT + ST_NEWNB($31)
	stl	$31, CUR + ST_LAST($31)
	ldi	$1, 1
	stl	$1, NXT + ST_VALID($31)
	BUMP	ST_KB, J_NKB, .Ladv_done
	BUMP	ST_KG, J_NKG, .Ladv_done
	ldl	$5, NXT + ST_RO($31)
	KR_RANGE $5, $6, $7
	ldl	$1, NXT + ST_KR($31)
	ldl	$2, JOB + J_DR($31)
	addl	$1, $2, $1
	stl	$1, NXT + ST_KR($31)
	cmplt	$1, $7, $1
	bne	$1, .Ladv_done
	# CUR ends its tile
	ldi	$1, 1
	stl	$1, CUR + ST_LAST($31)
	stl	$1, NXT + ST_FIRST($31)
	ldl	$1, TILES_LEFT($31)
	subl	$1, 1, $1
	stl	$1, TILES_LEFT($31)
	ble	$1, .Ladv_end
	BUMP	ST_CB, J_NCB, .Ladv_tile
	BUMP	ST_RO, J_RO, .Ladv_tile
	BUMP	ST_BB, J_NBB, .Ladv_tile
	ldi	$1, 1
	stl	$1, NXT + ST_NEWNB($31)
	BUMP	ST_NB, J_NNB, .Ladv_tile
.Ladv_end:
	stl	$31, NXT + ST_VALID($31)
	ret
.Ladv_tile:
	ldl	$5, NXT + ST_RO($31)
	KR_RANGE $5, $6, $7
	stl	$6, NXT + ST_KR($31)
.Ladv_done:
	ret
	.end	advance

# ---- DMA issue -----------------------------------------------------------------------------

# issue_x(state $16, slot $17, pieces $18 .. $19 - 1): X pieces of the state's step into A
# raw slot `slot`; the slot record (reset when the range starts at piece 0) says what was
# fetched. Uses $10 = i, $11 = j.
	.ent	issue_x
issue_x:
	stl	$18, X_FIRST($31)
	stl	$19, X_END($31)
	sll	$17, 5, $18
	ldi	$18, A_SLOT($18)      # slot record (SL_BYTES = 32)
	ldl	$1, X_FIRST($31)
	bne	$1, 1f
	stl	$31, SL_MASK($18)
	stl	$31, SL_KV($18)
	stl	$31, SL_LEN($18)
1:
	TILE_PLACE $16, $19, $20, $21, .Lx_none               # c, b0, bv
	BLOCK_SHARE $16, ST_KB, $11, $22, $23, J_KI, J_NI, .Lx_none   # channels ni0, kv
	stl	$21, SL_LEN($18)
	stl	$23, SL_KV($18)
	# the descriptor: kv blocks of bv elements, B elements apart
	sll	$17, 2, $4
	ldi	$4, REPLIES + R_A($4)
	ROWS_DESC $6, DMA_GET, $23, $21, J_B, $4
	# memory address of pixel (r_i, c_i = 0), channel ni0, image b0
	ldl	$1, ST_RO($16)
	ldl	$2, JOB + J_SR($31)
	mull	$1, $2, $1
	ldl	$2, ST_KR($16)
	addl	$1, $2, $1
	ldl	$2, JOB + J_PR($31)
	subl	$1, $2, $1            # r_i (dilated)
	ldl	$2, JOB + J_DRSH($31)
	srl	$1, $2, $1            # x's row
	ldl	$2, JOB + J_XC($31)
	mull	$1, $2, $1            # its first pixel
	ldl	$2, JOB + J_SC($31)
	mull	$19, $2, $19
	ldl	$2, ST_KG($16)
	ldl	$3, JOB + J_G($31)
	mull	$2, $3, $2
	addl	$19, $2, $19
	ldl	$2, JOB + J_PC($31)
	subl	$19, $2, $19          # c_i of g = 0 (dilated)
	ldl	$2, JOB + J_NI($31)
	ldl	$3, JOB + J_B($31)
	mull	$2, $3, $2            # elements per pixel
	mull	$2, $7, $2
	mull	$22, $3, $4
	addl	$4, $20, $4
	mull	$4, $7, $4            # (ni0 B + b0) es
	mull	$1, $2, $1
	addl	$1, $4, $1
	ldl	$4, JOB + J_X($31)
	addl	$1, $4, $1            # address of the row's pixel 0
	s8addl	$17, $31, $4
	ldl	$8, JOB + J_A_RAW0($4)  # LDM destination
	ldl	$4, JOB + J_KI($31)
	ldl	$5, JOB + J_MB($31)
	mull	$4, $5, $4
	mull	$4, $7, $4            # raw piece pitch KI MB es
	ldl	$3, X_FIRST($31)      # skip to the first piece of the range
	mull	$3, $4, $5
	addl	$8, $5, $8
	addl	$19, $3, $19
	ldi	$0, 1
	sll	$0, $3, $0            # bit of g
	ldl	$5, X_END($31)
	subl	$5, $3, $3            # pieces to go
	ldl	$25, JOB + J_CI($31)
.Lx_piece:                    # fetched if 0 <= c_i < C_i and DC divides c_i
	cmplt	$19, $25, $5
	cmplt	$19, $31, $7
	cmpeq	$7, 0, $7
	and	$5, $7, $5
	ldl	$7, JOB + J_DCSH($31)
	ldi	$24, 1
	sll	$24, $7, $24
	subl	$24, 1, $24
	and	$19, $24, $24
	cmpeq	$24, 0, $24
	and	$5, $24, $5
	beq	$5, .Lx_next
	srl	$19, $7, $24          # x's column
	mull	$24, $2, $24
	addl	$1, $24, $24
	dma	$6, $24, $8
	ldl	$5, SL_ISSUED($18)
	addl	$5, 1, $5
	stl	$5, SL_ISSUED($18)
	ldl	$5, SL_MASK($18)
	bis	$5, $0, $5
	stl	$5, SL_MASK($18)
.Lx_next:
	addl	$19, 1, $19
	addl	$8, $4, $8
	addl	$0, $0, $0
	subl	$3, 1, $3
	bgt	$3, .Lx_piece
.Lx_none:
	ret
	.end	issue_x

# issue_w(state $16, slot $17, LDM destination $18 or 0 for the slot's raw buffer): the W
# pieces of the state's step into W slot `slot`. Uses $10 = i, $11 = j.
	.ent	issue_w
issue_w:
	sll	$17, 5, $19
	ldi	$19, W_SLOT($19)
	stl	$31, SL_MASK($19)
	stl	$31, SL_KV($19)
	stl	$31, SL_LEN($19)
	bne	$18, 1f
	s8addl	$17, $31, $18
	ldl	$18, JOB + J_W_RAW0($18)
1:	BLOCK_SHARE $16, ST_KB, $10, $22, $23, J_KI, J_NI, .Lw_none   # channels ni0, kv
	BLOCK_SHARE $16, ST_NB, $11, $20, $21, J_NB, J_NO, .Lw_none   # outputs no0, nv
	stl	$21, SL_LEN($19)
	stl	$23, SL_KV($19)
	sll	$17, 2, $4
	ldi	$4, REPLIES + R_W($4)
	ROWS_DESC $6, DMA_GET, $23, $21, J_NO, $4   # kv blocks of nv elements, N_o apart
	ldl	$5, JOB + J_WROW($31)
	beq	$5, .Lw_address
	# N_o = 8 NB: the row's kv x N_o elements are contiguous; CPE (i, 0) gets them in ROW
	# mode, NB-element blocks dealt round robin to the row's columns: each CPE receives its
	# kv x NB block packed. The others only record what arrives (their reply words stay).
	ldl	$5, JOB + J_G($31)
	ldi	$1, 1
	sll	$1, $5, $1
	subl	$1, 1, $1
	stl	$1, SL_MASK($19)
	bne	$11, .Lw_none
	sll	$25, 3, $25           # 8 CPEs' blocks
	ldi	$5, DMA_ROW
	MAKE_DESC_ARGS $6, DMA_GET, $5, $25, $24, $31, $4, $31, $29
.Lw_address:
	# tap t = kr K_c + kg G: address w + t WTAP + (ni0 N_o + no0) es
	ldl	$1, ST_KR($16)
	ldl	$2, JOB + J_KC($31)
	mull	$1, $2, $1
	ldl	$2, ST_KG($16)
	ldl	$3, JOB + J_G($31)
	mull	$2, $3, $2
	addl	$1, $2, $1
	ldl	$2, JOB + J_WTAP($31)
	mull	$1, $2, $1
	ldl	$2, JOB + J_NO($31)
	mull	$22, $2, $4
	addl	$4, $20, $4
	mull	$4, $7, $4
	addl	$1, $4, $1
	ldl	$4, JOB + J_W($31)
	addl	$1, $4, $1
	ldl	$4, JOB + J_KI($31)
	ldl	$5, JOB + J_NB($31)
	mull	$4, $5, $4
	mull	$4, $7, $4            # raw piece pitch KI NB es
	ldl	$3, JOB + J_G($31)
	ldi	$0, 1
	ldl	$8, JOB + J_WTAP($31)
.Lw_piece:
	dma	$6, $1, $18
	ldl	$5, SL_ISSUED($19)
	addl	$5, 1, $5
	stl	$5, SL_ISSUED($19)
	ldl	$5, SL_MASK($19)
	bis	$5, $0, $5
	stl	$5, SL_MASK($19)
	addl	$1, $8, $1
	addl	$18, $4, $18
	addl	$0, $0, $0
	subl	$3, 1, $3
	bgt	$3, .Lw_piece
.Lw_none:
	ret
	.end	issue_w

# ---- packing -------------------------------------------------------------------------------

# copy_rows(src $16, dst $17, rows $18, len $19, src pitch $20, dst pitch $21 bytes): widen or
# copy `rows` rows of `len` elements (memory precision) into doubles. Vectors when len % 4 = 0.
	.ent	copy_rows
copy_rows:
	ldl	$7, JOB + J_ES($31)
	sll	$19, 3, $1
	cmpeq	$1, $21, $1           # dst rows back to back: one long row if src's are too
	mull	$19, $7, $2
	cmpeq	$2, $20, $2
	and	$1, $2, $1
	beq	$1, 1f
	mull	$18, $19, $19
	ldi	$18, 1
1:	and	$19, 3, $1
	bne	$1, .Lcr_scalar
	cmpeq	$7, 8, $7
.Lcr_row:
	mov	$16, $22
	mov	$17, $23
	mov	$19, $24
	bne	$7, .Lcr_double
	CONVERT	$22, $23, $24, vlds, 16, vstd, 32
	br	.Lcr_next
.Lcr_double:
	CONVERT	$22, $23, $24, vldd, 32, vstd, 32
.Lcr_next:
	addl	$16, $20, $16
	addl	$17, $21, $17
	subl	$18, 1, $18
	bgt	$18, .Lcr_row
	ret
.Lcr_scalar:
	cmpeq	$7, 8, $7
.Lcr_srow:
	mov	$16, $22
	mov	$17, $23
	mov	$19, $24
.Lcr_elem:
	bne	$7, .Lcr_sdouble
	flds	$1, 0($22)
	ldi	$22, 4($22)
	br	.Lcr_store
.Lcr_sdouble:
	fldd	$1, 0($22)
	ldi	$22, 8($22)
.Lcr_store:
	fstd	$1, 0($23)
	ldi	$23, 8($23)
	subl	$24, 1, $24
	bgt	$24, .Lcr_elem
	addl	$16, $20, $16
	addl	$17, $21, $17
	subl	$18, 1, $18
	bgt	$18, .Lcr_srow
	ret
	.end	copy_rows

# pack(slot record $16, raw $17, packed $18, rows per piece KI $19, width MB or NB $20, $21 = 1
# if the raw buffer may be used in place): returns in $0 the block the primitive reads
# (K x width doubles): the raw buffer itself when that is allowed and the block is full and
# f64, else `packed`, zero-filled when partial, with each fetched
# piece's kv x len valid part widened into it.
	.ent	pack
pack:
	ldi	$sp, -32($sp)
	stl	$26, 0($sp)
	ldl	$1, SL_KV($16)
	ldl	$2, SL_LEN($16)
	ldl	$3, SL_MASK($16)
	ldl	$4, JOB + J_G($31)
	ldi	$5, 1
	sll	$5, $4, $5
	subl	$5, 1, $5             # every piece
	cmpeq	$3, $5, $5
	cmpeq	$1, $19, $6
	and	$5, $6, $5
	cmpeq	$2, $20, $6
	and	$5, $6, $5            # full
	ldl	$6, JOB + J_ES($31)
	cmpeq	$6, 8, $6
	and	$6, $5, $6
	and	$6, $21, $6
	mov	$17, $0
	bne	$6, .Lpack_done
	mov	$18, $0
	stl	$18, 8($sp)
	bne	$5, 1f
	mull	$19, $20, $21         # zero the packed block: G KI width doubles
	mull	$21, $4, $21
	sll	$21, 3, $21
	mov	$18, $22
	ZERO	$22, $21
1:	# piece g: raw + g KI width es (rows of len elements), packed + g KI width 8
	mull	$19, $20, $7
	ldl	$6, JOB + J_ES($31)
	stl	$3, 16($sp)           # mask
	stl	$4, 24($sp)           # pieces left
	mov	$17, $9
	mov	$18, $12
	mov	$1, $13               # kv
	mov	$2, $14               # len
	mov	$20, $15              # width
	mull	$7, $6, $10           # raw piece pitch
	sll	$7, 3, $11            # packed piece pitch
.Lpack_piece:
	ldl	$3, 16($sp)
	and	$3, 1, $1
	srl	$3, 1, $3
	stl	$3, 16($sp)
	beq	$1, 2f
	mov	$9, $16
	mov	$12, $17
	mov	$13, $18
	mov	$14, $19
	ldl	$20, JOB + J_ES($31)
	mull	$14, $20, $20
	sll	$15, 3, $21
	bsr	$26, copy_rows
2:	addl	$9, $10, $9
	addl	$12, $11, $12
	ldl	$4, 24($sp)
	subl	$4, 1, $4
	stl	$4, 24($sp)
	bgt	$4, .Lpack_piece
	ldl	$0, 8($sp)
.Lpack_done:
	ldl	$26, 0($sp)
	ldi	$sp, 32($sp)
	ret
	.end	pack

# pack_saved: pack with $9-$15 preserved.
	.ent	pack_saved
pack_saved:
	ldi	$sp, -64($sp)
	stl	$26, 0($sp)
	.irp	r, 9, 10, 11, 12, 13, 14, 15
	stl	$\r, 8 * (\r - 8)($sp)
	.endr
	bsr	$26, pack
	.irp	r, 9, 10, 11, 12, 13, 14, 15
	ldl	$\r, 8 * (\r - 8)($sp)
	.endr
	ldl	$26, 0($sp)
	ldi	$sp, 64($sp)
	ret
	.end	pack_saved

# ---- tile start and end --------------------------------------------------------------------

# load_nb(): at the first step of an N_o block: the NB bias values of this CPE's channels
# into BIAS_LDM as doubles (zero past N_o) and, when resident, every W block of the nb
# (all kr, kg, kb), fetched one after the other through W slot 0 and packed in place.
	.ent	load_nb
load_nb:
	ldi	$sp, -32($sp)
	stl	$26, 0($sp)
	ldl	$1, JOB + J_BIAS_LDM($31)
	ldl	$2, JOB + J_NB($31)
	sll	$2, 3, $2
	ZERO	$1, $2
	ldi	$16, CUR
	BLOCK_SHARE $16, ST_NB, $11, $20, $21, J_NB, J_NO, 2f   # no0, nv
	ldl	$7, JOB + J_ES($31)
	mull	$21, $7, $3
	ldi	$4, REPLIES + R_SYNC
	ldi	$5, DMA_GET
	MAKE_DESC_REGS $6, $5, $3, $31, $31, $4
	mull	$20, $7, $1
	ldl	$2, JOB + J_BIAS($31)
	addl	$1, $2, $1
	ldl	$2, JOB + J_BIAS_RAW($31)
	stw	$31, REPLIES + R_SYNC($31)
	dma	$6, $1, $2
1:	ldw	$1, REPLIES + R_SYNC($31)
	beq	$1, 1b
	mov	$2, $16
	ldl	$17, JOB + J_BIAS_LDM($31)
	ldi	$18, 1
	mov	$21, $19
	ldi	$20, 0
	ldi	$21, 0
	bsr	$26, copy_rows
2:	ldl	$1, JOB + J_RESIDENT($31)
	beq	$1, .Lnb_done
	# every (kr, kg, kb) block of this nb, in the order of the resident index
	.irp	f, ST_NB, ST_BB, ST_RO, ST_CB
	ldl	$1, CUR + \f($31)
	stl	$1, TMP + \f($31)
	.endr
	ldl	$1, JOB + J_W_PACK($31)
	stl	$1, 8($sp)            # where the next block goes
	stl	$31, TMP + ST_KR($31)
.Lnb_kr:
	stl	$31, TMP + ST_KG($31)
.Lnb_kg:
	stl	$31, TMP + ST_KB($31)
.Lnb_kb:
	ldi	$16, TMP
	clr	$17
	clr	$18
	bsr	$26, issue_w
	AWAIT	W_SLOT + SL_ISSUED, R_W
	ldl	$21, JOB + J_WROW($31)
	beq	$21, 4f
	synr	0xff                  # the row's block came with CPE (i, 0)'s DMA
4:	cmpeq	$21, 0, $21
	ldi	$16, W_SLOT
	ldl	$17, JOB + J_W_RAW0($31)
	ldl	$18, 8($sp)
	ldl	$19, JOB + J_KI($31)
	ldl	$20, JOB + J_NB($31)
	bsr	$26, pack_saved
	ldl	$1, JOB + J_WROW($31)
	beq	$1, 5f
	synr	0xff                  # every CPE of the row has packed it: the raw buffer is free
5:	ldl	$18, 8($sp)
	cmpeq	$0, $18, $1           # full f64 blocks come back in the raw buffer: copy
	bne	$1, 3f
	mov	$0, $16
	mov	$18, $17
	ldl	$19, JOB + J_KB($31)
	ldl	$20, JOB + J_NB($31)
	mull	$19, $20, $19
	ldi	$18, 1
	ldi	$20, 0
	ldi	$21, 0
	bsr	$26, copy_rows
	ldl	$18, 8($sp)
3:	ldl	$19, JOB + J_KB($31)
	ldl	$20, JOB + J_NB($31)
	mull	$19, $20, $19
	s8addl	$19, $18, $18
	stl	$18, 8($sp)
	ldl	$1, TMP + ST_KB($31)
	addl	$1, 1, $1
	stl	$1, TMP + ST_KB($31)
	ldl	$2, JOB + J_NKB($31)
	cmplt	$1, $2, $1
	bne	$1, .Lnb_kb
	ldl	$1, TMP + ST_KG($31)
	addl	$1, 1, $1
	stl	$1, TMP + ST_KG($31)
	ldl	$2, JOB + J_NKG($31)
	cmplt	$1, $2, $1
	bne	$1, .Lnb_kg
	ldl	$1, TMP + ST_KR($31)
	addl	$1, 1, $1
	stl	$1, TMP + ST_KR($31)
	ldl	$2, JOB + J_KR($31)
	cmplt	$1, $2, $1
	bne	$1, .Lnb_kr
.Lnb_done:
	ldl	$26, 0($sp)
	ldi	$sp, 32($sp)
	ret
	.end	load_nb

# finish(): after the tile's last step: C_OUT = C + bias (rounded to the memory precision),
# its valid nv x bv part, rows of bv elements, and the strided put to y that issue_put
# issues. The previous tile's put is waited for before C_OUT is rewritten. Uses $10 = i,
# $11 = j.
	.ent	finish
finish:
	ldi	$16, CUR
	TILE_PLACE $16, $19, $20, $21, .Lfin_none             # c, b0, bv
	BLOCK_SHARE $16, ST_NB, $11, $22, $23, J_NB, J_NO, .Lfin_none   # no0, nv
	AWAIT	C_ISSUED, R_C
	# rows: C (pitch MB doubles) + bias[no] -> C_OUT (pitch bv elements)
	ldl	$7, JOB + J_ES($31)
	ldl	$24, JOB + J_C($31)
	ldl	$25, JOB + J_C_OUT($31)
	ldl	$8, JOB + J_BIAS_LDM($31)
	mov	$23, $27              # rows left
	ldl	$28, JOB + J_MB($31)
	sll	$28, 3, $28
	and	$21, 3, $0
	cmpeq	$7, 8, $7
.Lfin_row:
	ldde	$6, 0($8)
	mov	$24, $16
	mov	$25, $17
	mov	$21, $18
	bne	$0, .Lfin_scalar
.Lfin_vec:
	vldd	$1, 0($16)
	ldi	$16, 32($16)
	vaddd	$1, $6, $1
	subl	$18, 4, $18
	bne	$7, 1f
	vsts	$1, 0($17)
	ldi	$17, 16($17)
	br	2f
1:	vstd	$1, 0($17)
	ldi	$17, 32($17)
2:	bgt	$18, .Lfin_vec
	br	.Lfin_next
.Lfin_scalar:
	fldd	$1, 0($16)
	ldi	$16, 8($16)
	faddd	$1, $6, $1
	subl	$18, 1, $18
	bne	$7, 1f
	fsts	$1, 0($17)
	ldi	$17, 4($17)
	br	2f
1:	fstd	$1, 0($17)
	ldi	$17, 8($17)
2:	bgt	$18, .Lfin_scalar
.Lfin_next:
	mov	$17, $25
	addl	$24, $28, $24
	ldi	$8, 8($8)
	subl	$27, 1, $27
	bgt	$27, .Lfin_row
	# the put: nv blocks of bv elements, B elements apart, at y[r_o, c, no0, b0]
	ldi	$4, REPLIES + R_C
	ROWS_DESC $6, DMA_PUT, $23, $21, J_B, $4
	ldl	$1, CUR + ST_RO($31)
	ldl	$2, JOB + J_CO($31)
	mull	$1, $2, $1
	addl	$1, $19, $1           # output pixel
	ldl	$2, JOB + J_NO($31)
	mull	$1, $2, $1
	addl	$1, $22, $1
	ldl	$2, JOB + J_B($31)
	mull	$1, $2, $1
	addl	$1, $20, $1
	mull	$1, $7, $1
	ldl	$2, JOB + J_Y($31)
	addl	$1, $2, $1
	vstd	$6, PUT_DESC($31)
	stl	$1, PUT_ADDR($31)
.Lfin_none:
	ret
	.end	finish

# issue_put(): the put finish prepared, if any (issued at the next step's start, after its
# prefetches).
	.ent	issue_put
issue_put:
	ldl	$1, PUT_ADDR($31)
	beq	$1, 1f
	vldd	$6, PUT_DESC($31)
	ldl	$2, JOB + J_C_OUT($31)
	dma	$6, $1, $2
	stl	$31, PUT_ADDR($31)
	ldl	$1, C_ISSUED($31)
	addl	$1, 1, $1
	stl	$1, C_ISSUED($31)
1:	ret
	.end	issue_put

# ---- the driver ----------------------------------------------------------------------------
# $9 the current slot (0/1), $10 = i, $11 = j (preserved by the primitive).

	.globl	conv_implicit
	.ent	conv_implicit
conv_implicit:
	ldi	$sp, -CI_FRAME($sp)
	.frame	$30, CI_FRAME, $26, 0
	stl	$26, 0($sp)
	FETCH_JOB $2, $3, REPLIES + R_SYNC
	.irp	r, R_A, R_A+4, R_W, R_W+4, R_C
	stw	$31, REPLIES + \r($31)
	.endr
	.irp	v, A_SLOT+SL_ISSUED, A_SLOT+SL_BYTES+SL_ISSUED, W_SLOT+SL_ISSUED, W_SLOT+SL_BYTES+SL_ISSUED, C_ISSUED, PUT_ADDR, X_DEFERRED
	stl	$31, \v($31)
	.endr
	rcid	$1
	srl	$1, 3, $10
	and	$1, 7, $11
	clr	$9
	# the first step: tile J_START_*, its first valid kr
	ldl	$1, JOB + J_TILES($31)
	stl	$1, TILES_LEFT($31)
	ble	$1, .Lreturn
	.irp	f, NB, BB, RO, CB
	ldl	$1, JOB + J_START_\f($31)
	stl	$1, CUR + ST_\f($31)
	.endr
	ldl	$5, CUR + ST_RO($31)
	KR_RANGE $5, $6, $7
	stl	$6, CUR + ST_KR($31)
	stl	$31, CUR + ST_KG($31)
	stl	$31, CUR + ST_KB($31)
	ldi	$1, 1
	stl	$1, CUR + ST_FIRST($31)
	stl	$1, CUR + ST_NEWNB($31)
	ldi	$16, CUR
	clr	$17
	clr	$18
	ldl	$19, JOB + J_G($31)
	bsr	$26, issue_x
	ldl	$1, JOB + J_RESIDENT($31)
	bne	$1, .Lstep
	ldi	$16, CUR
	clr	$17
	clr	$18
	bsr	$26, issue_w
.Lstep:
	bsr	$26, advance
	# Prefetch the next step's blocks, then issue the put of the tile finished last step. The
	# 64 CPEs' puts drain from the engine's FIFO one after the other, and requests waiting in
	# the FIFO fill a CPE's channel: with 3 X pieces and a put, the last dma would stall until
	# the put is served. So then the last X piece waits until after the primitive call.
	stl	$31, X_DEFERRED($31)
	ldl	$1, NXT + ST_VALID($31)
	beq	$1, 1f
	ldl	$19, JOB + J_G($31)
	ldl	$1, PUT_ADDR($31)
	cmpult	$31, $1, $1
	ldl	$2, JOB + J_RESIDENT($31)
	cmpeq	$2, 0, $2
	addl	$2, 1, $2
	mull	$2, $19, $2           # DMAs of the prefetch
	cmplt	$2, DMA_DEPTH, $2
	cmpeq	$2, 0, $2
	and	$1, $2, $1
	stl	$1, X_DEFERRED($31)
	subl	$19, $1, $19
	ldi	$16, NXT
	xor	$9, 1, $17
	clr	$18
	bsr	$26, issue_x
	ldl	$1, JOB + J_RESIDENT($31)
	bne	$1, 1f
	ldi	$16, NXT
	xor	$9, 1, $17
	clr	$18
	bsr	$26, issue_w
1:	bsr	$26, issue_put
	ldl	$1, CUR + ST_NEWNB($31)
	beq	$1, 2f
	bsr	$26, load_nb
2:	ldl	$1, CUR + ST_FIRST($31)
	beq	$1, 3f
	ldl	$1, JOB + J_C($31)
	ldl	$2, JOB + J_MB($31)
	ldl	$3, JOB + J_NB($31)
	mull	$2, $3, $2
	sll	$2, 3, $2
	ZERO	$1, $2
3:	# X: wait for this step's pieces and pack them
	sll	$9, 5, $16
	ldi	$16, A_SLOT($16)
	ldl	$1, SL_ISSUED($16)
	sll	$9, 2, $3
.Lwait_x:
	ldw	$2, REPLIES + R_A($3)
	cmplt	$2, $1, $2
	bne	$2, .Lwait_x
	s8addl	$9, $31, $17
	ldl	$17, JOB + J_A_RAW0($17)
	ldl	$18, JOB + J_A_PACK($31)
	ldl	$19, JOB + J_KI($31)
	ldl	$20, JOB + J_MB($31)
	ldi	$21, 1
	bsr	$26, pack_saved
	stl	$0, A_OPERAND($31)
	# W: resident block (kr NKG + kg) NKB + kb, or this step's streamed pieces
	ldl	$1, JOB + J_RESIDENT($31)
	beq	$1, 4f
	ldl	$1, CUR + ST_KR($31)
	ldl	$2, JOB + J_NKG($31)
	mull	$1, $2, $1
	ldl	$2, CUR + ST_KG($31)
	addl	$1, $2, $1
	ldl	$2, JOB + J_NKB($31)
	mull	$1, $2, $1
	ldl	$2, CUR + ST_KB($31)
	addl	$1, $2, $1
	ldl	$2, JOB + J_KB($31)
	ldl	$3, JOB + J_NB($31)
	mull	$2, $3, $2
	mull	$1, $2, $1
	ldl	$2, JOB + J_W_PACK($31)
	s8addl	$1, $2, $0
	br	5f
4:	sll	$9, 5, $16
	ldi	$16, W_SLOT($16)
	ldl	$1, SL_ISSUED($16)
	sll	$9, 2, $3
.Lwait_w:
	ldw	$2, REPLIES + R_W($3)
	cmplt	$2, $1, $2
	bne	$2, .Lwait_w
	ldl	$21, JOB + J_WROW($31)
	beq	$21, 7f
	synr	0xff                  # the row's W came with CPE (i, 0)'s DMA
7:	cmpeq	$21, 0, $21           # ROW-mode blocks are always packed (see load_nb)
	s8addl	$9, $31, $17
	ldl	$17, JOB + J_W_RAW0($17)
	ldl	$18, JOB + J_W_PACK($31)
	ldl	$19, JOB + J_KI($31)
	ldl	$20, JOB + J_NB($31)
	bsr	$26, pack_saved
5:	mov	$0, $17
	ldl	$16, A_OPERAND($31)
	ldl	$18, JOB + J_C($31)
	ldl	$19, JOB + J_MB($31)
	ldl	$20, JOB + J_NB($31)
	ldl	$21, JOB + J_KB($31)
	bsr	$26, gemm_prim_nm_d
	ldl	$1, X_DEFERRED($31)
	beq	$1, 8f
	ldi	$16, NXT
	xor	$9, 1, $17
	ldl	$19, JOB + J_G($31)
	subl	$19, 1, $18
	bsr	$26, issue_x
8:	ldl	$1, CUR + ST_LAST($31)
	beq	$1, 6f
	bsr	$26, finish
6:	ldl	$1, NXT + ST_VALID($31)
	beq	$1, .Lreturn
	.irp	f, ST_NB, ST_BB, ST_RO, ST_CB, ST_KR, ST_KG, ST_KB, ST_FIRST, ST_NEWNB
	ldl	$1, NXT + \f($31)
	stl	$1, CUR + \f($31)
	.endr
	xor	$9, 1, $9
	br	.Lstep
.Lreturn:
	bsr	$26, issue_put
	AWAIT	C_ISSUED, R_C
	ldl	$26, 0($sp)
	ldi	$sp, CI_FRAME($sp)
	ret
	.end	conv_implicit
