# Gradient synchronisation across ParaX instances (docs/parax.md "Gradient synchronisation";
# hostlib/parax/sync.py is the host side). Each instance k has written its gradient G_k (n f32,
# n a multiple of CHUNK) to main memory, as the unfused backward operators leave it; the
# update is W = W - s sum_k G_k (s = lr / instances), the sum taken over k = 0, 1, ... in that
# order for every element, one fused f32 multiply-add per element (vnmas), so both strategies
# give the same bits:
#   PS (parameter server): CPE 0 serves and computes nothing else. Per chunk it gets every
#     G_k and W, sums, updates, puts W, and copies the chunk into every worker's private W_k;
#     the array meets; every worker then gets its W_k (its pull, as ParaX's PS workers copy
#     the weights before the next iteration).
#   GS (gradient server): no dedicated CPE, one shared W. CPE j owns the chunks j, j + P, ...
#     and does the same for them, without copies or pulls.
#
# parax_sync(jobs $16): CPE id takes the job record at jobs + id JOB_BYTES.

	.set	noreorder
	.include "../include/dma.inc"

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
	JOB_BYTES = 112

	ROLE_IDLE = 0
	ROLE_GS = 1
	ROLE_SERVER = 2
	ROLE_WORKER = 3

	CHUNK = 1024          # f32 per chunk
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

# GET_CHUNK mem, ldm: get CHUNK_BYTES from the memory address in `mem` to LDM label `ldm`.
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
	stl	$26, SAVE_RA($31)
	rcid	$1
	ldi	$2, JOB_BYTES
	mull	$1, $2, $2
	addl	$16, $2, $16
	FETCH_JOB $1, $2, RPLY
	MAKE_DESC $9, DMA_GET, CHUNK_BYTES, RPLY
	MAKE_DESC $10, DMA_PUT, CHUNK_BYTES, RPLY
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
	bsr	$26, add_chunk
	subl	$14, 1, $14
	bgt	$14, 12b
3:	ldl	$13, JOB + J_W($31)   # W = W - s ACC
	addl	$13, $12, $13
	GET_CHUNK $13, IN
	bsr	$26, update_chunk
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
	ldi	$13, CHUNK_BYTES($13)
	subl	$11, 1, $11
	bgt	$11, 7b
9:	ldl	$26, SAVE_RA($31)
	ret
	.end	parax_sync

# add_chunk(acc $16, in $17): acc += in, CHUNK f32.
	.ent	add_chunk
add_chunk:
	ldi	$18, CHUNK / 8
1:	vlds	$1, 0($16)
	vlds	$2, 0($17)
	vlds	$3, 16($16)
	vlds	$4, 16($17)
	vadds	$1, $2, $1
	vadds	$3, $4, $3
	subl	$18, 1, $18
	vsts	$1, 0($16)
	vsts	$3, 16($16)
	ldi	$16, 32($16)
	ldi	$17, 32($17)
	bgt	$18, 1b
	ret
	.end	add_chunk

# update_chunk: ACC = IN - s ACC (one fused f32 operation per element), CHUNK f32.
	.ent	update_chunk
update_chunk:
	ldde	$5, JOB + J_SCALE($31)
	ldi	$16, ACC
	ldi	$17, IN
	ldi	$18, CHUNK / 8
1:	vlds	$1, 0($16)
	vlds	$2, 0($17)
	vlds	$3, 16($16)
	vlds	$4, 16($17)
	vnmas	$1, $5, $2, $1
	vnmas	$3, $5, $4, $3
	subl	$18, 1, $18
	vsts	$1, 0($16)
	vsts	$3, 16($16)
	ldi	$16, 32($16)
	ldi	$17, 32($17)
	bgt	$18, 1b
	ret
	.end	update_chunk
