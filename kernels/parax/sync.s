# Gradient synchronisation across ParaX instances (docs/parax.md "Gradient synchronisation";
# hostlib/parax/sync.py is the host side). Each instance k has written its gradient G_k (n f32,
# n a multiple of the job's chunk) to main memory, as the unfused backward operators leave it; the
# update is W = W - s sum_k G_k (s = lr / instances), the sum taken over k = 0, 1, ... in that
# order for every element, one fused f32 multiply-add per element (vnmas), so both strategies
# give the same bits:
#   PS (parameter server): CPE 0 serves and computes nothing else. Per chunk it gets every
#     G_k and W, sums, updates, puts W, and copies the chunk into every worker's private W_k;
#     the array meets; every worker then gets its W_k (its pull, as ParaX's PS workers copy
#     the weights before the next iteration).
#   GS (gradient server): no dedicated CPE, one shared W. CPE j owns the chunks j, j + P, ...
#     and does the same for them, without copies or pulls. The host cuts W into about P
#     chunks (whole 128-byte lines, at most CHUNK f32) so that every CPE takes a share.
#
# parax_sync(jobs $16): CPE id takes the job record at jobs + id JOB_BYTES.

	.set	noreorder
	.include "../include/dma.inc"
	.include "parax.inc"

	J_ROLE = 0            # ROLE_*
	J_N = 8               # chunks this CPE updates (PS server, GS) or pulls (PS worker)
	J_FIRST = 16          # byte offset of its first chunk, and between its chunks
	J_STEP = 24
	J_G = 32              # G_0, and the bytes from G_k to G_k+1
	J_GSTRIDE = 40
	J_NG = 48             # the gradients summed
	J_W = 56              # the shared W
	J_WP = 64             # PS: W_1 (the first worker's private copy), bytes between copies,
	J_WPSTRIDE = 72       # copies written per chunk; a worker: its own W_k
	J_NWP = 80
	J_SCALE = 88          # s, a double
	J_RMASK = 96          # the meeting (PS: after the server's updates)
	J_CMASK = 104
	J_CHUNK = 112         # bytes per chunk: a multiple of 128, at most CHUNK_BYTES
	JOB_BYTES = 120

	ROLE_IDLE = 0
	ROLE_GS = 1
	ROLE_SERVER = 2
	ROLE_WORKER = 3

	CHUNK = 1024          # f32 per chunk at most (the LDM buffers)
	CHUNK_BYTES = CHUNK * 4

	.ldm
	.align	5
RPLY:	.long	0
	.long	0
SAVE_RA:
	.quad	0
	.align	5
JOB:	.skip	JOB_BYTES
	.align	5
ACC:	.skip	CHUNK_BYTES   # the running sum, then the updated W
	.align	5
IN:	.skip	CHUNK_BYTES   # the next G_k, or W
	.align	5
	.globl	sync_ldm_end
sync_ldm_end:

	.text

# GET_CHUNK mem, ldm: get a chunk from the memory address in `mem` to LDM label `ldm`.
	.macro	GET_CHUNK mem, ldm
	ldi	$2, \ldm
	DMA_WAIT $9, \mem, $2, RPLY
	.endm

# PUT_CHUNK mem: put ACC to the memory address in `mem`.
	.macro	PUT_CHUNK mem
	ldi	$2, ACC
	DMA_WAIT $10, \mem, $2, RPLY
	.endm

	.globl	parax_sync
	.ent	parax_sync
parax_sync:
	ENTER_WITH_JOB JOB, JOB_BYTES
	ldl	$1, JOB + J_CHUNK($31)
	MAKE_DESC $9, DMA_GET, 0, RPLY
	DESC_SET_SIZE $9, $1
	MAKE_DESC $10, DMA_PUT, 0, RPLY
	DESC_SET_SIZE $10, $1
	ldl	$11, JOB + J_N($31)
	ldl	$12, JOB + J_FIRST($31)
	ldl	$1, JOB + J_ROLE($31)
	cmpeq	$1, ROLE_WORKER, $3
	bne	$3, 5f
	beq	$1, 5f                # idle: only meets
	ble	$11, 5f
1:	ldl	$13, JOB + J_G($31)   # a chunk: ACC = G_0 + G_1 + ..., in order
	addl	$13, $12, $13
	GET_CHUNK $13, ACC
	ldl	$14, JOB + J_NG($31)
	subl	$14, 1, $14
	ble	$14, 3f
12:	ldl	$3, JOB + J_GSTRIDE($31)
	addl	$13, $3, $13
	GET_CHUNK $13, IN
	ldi	$16, ACC
	ldi	$17, IN
	ldl	$18, JOB + J_CHUNK($31)
	srl	$18, 4, $18
	bsr	$26, vadd_f32
	subl	$14, 1, $14
	bgt	$14, 12b
3:	ldl	$13, JOB + J_W($31)   # W = W - s ACC
	addl	$13, $12, $13
	GET_CHUNK $13, IN
	ldde	$5, JOB + J_SCALE($31)
	ldi	$16, ACC
	ldi	$17, IN
	ldl	$18, JOB + J_CHUNK($31)
	srl	$18, 4, $18
	bsr	$26, vupdate_f32
	PUT_CHUNK $13
	ldl	$14, JOB + J_NWP($31)   # PS: the workers' private copies
	ble	$14, 4f
	ldl	$13, JOB + J_WP($31)
	addl	$13, $12, $13
6:	PUT_CHUNK $13
	ldl	$3, JOB + J_WPSTRIDE($31)
	addl	$13, $3, $13
	subl	$14, 1, $14
	bgt	$14, 6b
4:	ldl	$3, JOB + J_STEP($31)
	addl	$12, $3, $12
	subl	$11, 1, $11
	bgt	$11, 1b
5:	ldl	$1, JOB + J_RMASK($31)  # the meeting
	synr	$1
	ldl	$1, JOB + J_CMASK($31)
	sync	$1
	ldl	$1, JOB + J_ROLE($31)
	cmpeq	$1, ROLE_WORKER, $1
	beq	$1, 9f
	ldl	$13, JOB + J_WP($31)  # a PS worker pulls its copy
	ble	$11, 9f
7:	GET_CHUNK $13, IN
	ldl	$3, JOB + J_CHUNK($31)
	addl	$13, $3, $13
	subl	$11, 1, $11
	bgt	$11, 7b
9:	ldl	$26, SAVE_RA($31)
	ret
	.end	parax_sync

# VECTOR_LOOP name, op, fused: the routine `name`($16 = a, $17 = b, $18 = vectors of 4 f32,
# $5 = s): a = op a, b (fused: a = op a, s, b) vector by vector (clobbers $1, $2, $16-$18).
	.macro	VECTOR_LOOP name, op, fused
	.ent	\name
\name:
1:	vlds	$1, 0($16)
	vlds	$2, 0($17)
	.if \fused
	\op	$1, $5, $2, $1
	.else
	\op	$1, $2, $1
	.endif
	subl	$18, 1, $18
	vsts	$1, 0($16)
	ldi	$16, 16($16)
	ldi	$17, 16($17)
	bgt	$18, 1b
	ret
	.end	\name
	.endm

	VECTOR_LOOP vadd_f32, vadds, 0          # a += b
	VECTOR_LOOP vupdate_f32, vnmas, 1       # a = b - s a, one rounding

# ---- RAR: ring all-reduce over register communication ------------------------------------
# The instances form a ring (a mesh row, or a snake over whole rows: row r left to right when
# r is even, right to left when odd, rows joined along a column). The gradient is cut into
# blocks of P segments of R_SEG f32; per block, P - 1 reduce-scatter steps (send the partial
# sum of a segment to the next CPE, add the own G_p piece to the one received) leave position p
# with the sum of segment (p + 1) mod P, taken in ring order from that segment's next position;
# it updates that segment of its private W_p; P - 1 all-gather steps pass the updated segments
# round. A message is one vector (4 f32). A block of G_p comes into the LDM (BLOCK) in one get;
# every step sends a segment of BLOCK and receives into another in place (the partial sums,
# then the updated W), and the block goes to W_p in one put: per step only register messages,
# no DMA and no copies (a get or put of one segment per step made 64 rings of short segments
# request-bound on the shared engine).

	R_POS = 0             # this CPE's ring position p, the instances P
	R_P = 8
	R_SEG = 16            # f32 per segment (a multiple of 4), blocks
	R_BLOCKS = 24
	R_G = 32              # its G_p and W_p (R_BLOCKS P R_SEG f32 each)
	R_WP = 40
	R_SCALE = 48          # s, a double
	R_SENDTO = 56         # the next position's column (putr) or row (putc)
	R_LINKS = 64          # bit 0: send by putc, bit 1: receive by getc
	RJOB_BYTES = 72
	RAR_SEG_MAX = 1024
	RAR_BLOCK_MAX = 4096  # f32 of a block (P segments) at most

	.ldm
	.align	5
RJOB:	.skip	RJOB_BYTES
RING_FN:
	.quad	0, 0          # this CPE's ring step without and with the add (ring_forms)
	.align	5
OWN:	.skip	RAR_SEG_MAX * 4   # this CPE's W_p segment
	.align	5
BLOCK:	.skip	RAR_BLOCK_MAX * 4 # this block of G_p, then of the updated W
	.align	5
	.globl	rar_ldm_end
rar_ldm_end:

	.text

# RING_STEP put, get, add: one step over R_SEG f32: send the segment at $22 by `put` to
# R_SENDTO, take the same count by `get` into the segment at $23, adding what is there if
# `add`. $17 = R_SENDTO, $18 = messages.
	.macro	RING_STEP put, get, add
	mov	$22, $1
	mov	$23, $2
1:	vlds	$4, 0($1)
	\put	$4, $17
	\get	$5
	.if \add
	vlds	$6, 0($2)
	vadds	$5, $6, $5
	.endif
	subl	$18, 1, $18
	vsts	$5, 0($2)
	ldi	$1, 16($1)
	ldi	$2, 16($2)
	bgt	$18, 1b
	ret
	.endm

# ring_step(add $16): this CPE's put/get form (RING_FN, chosen at entry). $16 = 0 or 1.
	.ent	ring_step
ring_step:
	ldl	$17, RJOB + R_SENDTO($31)
	ldl	$18, RJOB + R_SEG($31)
	srl	$18, 2, $18
	s8addl	$16, $31, $16
	ldl	$20, RING_FN($16)
	jmp	$31, ($20)
	.end	ring_step

# RING_FORM name, put, get, add: the routine `name` running RING_STEP.
	.macro	RING_FORM name, put, get, add
	.ent	\name
\name:
	RING_STEP \put, \get, \add
	.end	\name
	.endm

	.irp	add, 0, 1
	RING_FORM ring_rr\add, putr, getr, \add
	RING_FORM ring_cr\add, putc, getr, \add
	RING_FORM ring_rc\add, putr, getc, \add
	RING_FORM ring_cc\add, putc, getc, \add
	.endr

	.data
	.align	3
ring_forms:                   # by links | add << 2
	.quad	ring_rr0, ring_cr0, ring_rc0, ring_cc0, ring_rr1, ring_cr1, ring_rc1, ring_cc1

	.text
# SEG_DMA desc, segment, base_field, ldm: get or put from segment `segment` (a register:
# block index P + segment, not $4-$6) of the array at RJOB field `base_field`, to or from LDM
# label `ldm`.
	.macro	SEG_DMA desc, segment, base_field, ldm
	ldl	$4, RJOB + R_SEG($31)
	mull	\segment, $4, $5
	s4addl	$5, $31, $5           # bytes
	ldl	$6, RJOB + \base_field($31)
	addl	$6, $5, $6
	ldi	$5, \ldm
	DMA_WAIT \desc, $6, $5, RPLY
	.endm

# MOD_RING x, d, r: r = x mod d for 0 <= x < 2 d (one subtraction).
	.macro	MOD_RING x, d, r
	cmplt	\x, \d, $2
	subl	\x, \d, $3
	selne	$2, \x, $3, \r
	.endm

# PREVIOUS_SEGMENT: $27 = ($27 - 1) mod P ($11 = P).
	.macro	PREVIOUS_SEGMENT
	subl	$27, 1, $27
	addl	$27, $11, $1
	MOD_RING $1, $11, $27
	.endm

# SEGMENT_IN_BLOCK index, reg: reg = the LDM address of segment `index` (a register, not
# $4) of BLOCK.
	.macro	SEGMENT_IN_BLOCK index, reg
	ldl	$4, RJOB + R_SEG($31)
	mull	\index, $4, $4
	s4addl	$4, $31, $4
	ldi	\reg, BLOCK($4)
	.endm

# parax_rar(jobs $16): position p's blocks (the loop keeps $7-$15, $22, $27; the routines it
# calls clobber $1-$6, $16-$20).
	.globl	parax_rar
	.ent	parax_rar
parax_rar:
	ENTER_WITH_JOB RJOB, RJOB_BYTES
	ldl	$19, RJOB + R_LINKS($31)  # this CPE's ring-step forms, once
	ldi	$20, ring_forms
	s8addl	$19, $20, $20
	ldl	$1, 0($20)
	stl	$1, RING_FN($31)
	ldl	$1, 32($20)
	stl	$1, RING_FN + 8($31)
	ldl	$1, RJOB + R_SEG($31)
	s4addl	$1, $31, $1
	MAKE_DESC $9, DMA_GET, 0, RPLY
	DESC_SET_SIZE $9, $1
	ldl	$11, RJOB + R_P($31)
	ldl	$12, RJOB + R_POS($31)
	mull	$1, $11, $1           # a block's bytes
	MAKE_DESC $7, DMA_GET, 0, RPLY
	DESC_SET_SIZE $7, $1
	MAKE_DESC $8, DMA_PUT, 0, RPLY
	DESC_SET_SIZE $8, $1
	clr	$13                   # block
21:	mull	$13, $11, $14         # this block's first segment
	SEG_DMA $7, $14, R_G, BLOCK
	SEGMENT_IN_BLOCK $12, $22     # send G_p[segment p] first
	subl	$11, 1, $15           # reduce-scatter steps left; $27 = the segment received
	mov	$12, $27
22:	ble	$15, 23f
	PREVIOUS_SEGMENT
	SEGMENT_IN_BLOCK $27, $23
	ldi	$16, 1
	bsr	$26, ring_step
	mov	$23, $22
	subl	$15, 1, $15
	br	22b
23:	addl	$12, 1, $27           # the owned segment (p + 1) mod P: W_p - s sum
	MOD_RING $27, $11, $27
	addl	$14, $27, $1
	SEG_DMA $9, $1, R_WP, OWN
	ldde	$5, RJOB + R_SCALE($31)   # sum = OWN - s sum, in BLOCK
	SEGMENT_IN_BLOCK $27, $16
	mov	$16, $22              # sent first in the all-gather
	ldi	$17, OWN
	ldl	$18, RJOB + R_SEG($31)
	srl	$18, 2, $18
	bsr	$26, vupdate_f32
	subl	$11, 1, $15           # all-gather steps left; $27 = the segment received
	mov	$12, $27
24:	ble	$15, 25f
	SEGMENT_IN_BLOCK $27, $23
	clr	$16
	bsr	$26, ring_step
	mov	$23, $22
	PREVIOUS_SEGMENT
	subl	$15, 1, $15
	br	24b
25:	SEG_DMA $8, $14, R_WP, BLOCK
	addl	$13, 1, $13
	ldl	$1, RJOB + R_BLOCKS($31)
	cmplt	$13, $1, $1
	bne	$1, 21b
	ldl	$26, SAVE_RA($31)
	ret
	.end	parax_rar
