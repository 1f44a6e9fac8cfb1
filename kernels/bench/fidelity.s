# Micro-benchmarks for the fidelity table (MACHINE.md §11), run by `swsim bench fidelity`.
# Each entry measures one published quantity with rtc stamps or whole-run cycle counts; the
# host side (hostlib/tools/bench/fidelity.py) turns them into the numbers it prints.

	.set	noreorder
	.text
	.include "../include/dma.inc"

	REPLY = 0             # DMA reply word
	DMA_BUF = 0x80        # DMA buffer in LDM (up to 32 KiB)

# rc_latency(out): CPE 0 puts to CPE 1 while CPE 1 already waits in getr.
# out[0] = rtc just before the putr, out[1] = rtc just after the getr (both on P1, so the putr
# issues at out[0] + 1 and the getr at out[1] - 1).
	.globl	rc_latency
	.ent	rc_latency
rc_latency:
	rcid	$1
	bne	$1, 2f
	ldi	$3, 40                # let CPE 1 reach its getr first
1:	subl	$3, 1, $3
	bne	$3, 1b
	rtc	$4
	putr	$2, 1
	stl	$4, 0($16)
	ret
2:	getr	$2
	rtc	$5
	stl	$5, 8($16)
	ret
	.end	rc_latency

# P2P_LOOP target: put to column `target` of this row and get from the row queue. The gets lag
# the puts by 6 transfers (12 cycles > the 11-cycle latency), so neither side waits: 16 puts and
# 16 gets per iteration, $16 iterations.
	.macro	P2P_LOOP target
	.rept	6
	putr	$2, \target
	.endr
1:
	.rept	16
	putr	$2, \target
	getr	$3
	.endr
	subl	$16, 1, $16
	bne	$16, 1b
	.rept	6
	getr	$3
	.endr
	ret
	.endm

# rc_p2p(iters): every CPE (r, c) sends to (r, c xor 1) and receives from it.
	.globl	rc_p2p
	.ent	rc_p2p
rc_p2p:
	rcid	$1
	and	$1, 7, $1
	.irp	c, 0, 1, 2, 3, 4, 5, 6
	cmpeq	$1, \c, $4
	bne	$4, .Lp2p_\c
	.endr
	P2P_LOOP 6
	.irp	c, 0, 1, 2, 3, 4, 5, 6
.Lp2p_\c:
	P2P_LOOP (\c ^ 1)
	.endr
	.end	rc_p2p

# rc_bcast(iters): column-0 CPEs broadcast along their row 16 times per iteration; the other
# 7 CPEs of the row get.
	.globl	rc_bcast
	.ent	rc_bcast
rc_bcast:
	rcid	$1
	and	$1, 7, $1
	bne	$1, 2f
1:
	.rept	16
	putr	$2, 8
	.endr
	subl	$16, 1, $16
	bne	$16, 1b
	ret
2:
	.rept	16
	getr	$3
	.endr
	subl	$16, 1, $16
	bne	$16, 2b
	ret
	.end	rc_bcast

# dma_stream(src, cpe_step, request_bytes, requests, request_step, block; stride, out, ctrl,
# mask): every CPE issues `requests` DMA requests of `request_bytes` (blocks of `block` bytes
# separated by `stride` bytes, block 0 = contiguous) between memory and DMA_BUF, starting at
# src + id * cpe_step and advancing request_step per request, then waits for all. `ctrl` is the
# op and mode bits of the descriptor's DESC_CTRL word (0 = a PE-mode put), `mask` its broadcast
# mask. out[id] = cycles from the first dma to the reply count reaching `requests`.
	.globl	dma_stream
	.ent	dma_stream
dma_stream:
	rcid	$1
	mull	$1, $17, $2
	addl	$16, $2, $2           # this CPE's first memory address
	MAKE_DESC $6, DMA_GET, 0($18), REPLY
	ldl	$7, 16($sp)
	addl	$7, $21, $7
	vinsw	$7, $6, DESC_CTRL, $6
	ldl	$7, 24($sp)
	sll	$7, DESC_MASK_SHIFT, $7
	ldi	$7, REPLY($7)
	vinsw	$7, $6, DESC_REPLY, $6
	ldl	$7, 0($sp)
	DESC_SET_STRIDE $6, $7
	stw	$31, REPLY($31)
	mov	$19, $3
	ldi	$10, DMA_BUF
	rtc	$8
1:	dma	$6, $2, $10
	addl	$2, $20, $2
	subl	$3, 1, $3
	bgt	$3, 1b
2:	ldw	$4, REPLY($31)
	cmpeq	$4, $19, $5
	beq	$5, 2b
	rtc	$9
	subl	$9, $8, $9
	ldl	$7, 8($sp)
	s8addl	$1, $7, $7
	stl	$9, 0($7)
	ret
	.end	dma_stream

# empty(): returns at once (the launch cost of `swsim bench fidelity`).
	.globl	empty
	.ent	empty
empty:
	ret
	.end	empty

# gld_chain(addr, loads, with_store, out): a pointer chase of `loads` dependent global loads
# (the cell at addr is made to point to itself); with_store != 0 adds a dependent global store
# after each load. out[0] = cycles of the chase.
	.globl	gld_chain
	.ent	gld_chain
gld_chain:
	stl	$16, 0($16)
	ldl	$2, 0($16)
	bis	$2, $2, $2            # drain the set-up accesses before timing
	rtc	$8
	bne	$18, 2f
1:	ldl	$2, 0($2)
	subl	$17, 1, $17
	bgt	$17, 1b
	br	3f
2:	ldl	$2, 0($2)
	stl	$2, 8($2)
	subl	$17, 1, $17
	bgt	$17, 2b
3:	bis	$2, $2, $2            # wait for the last load
	rtc	$9
	subl	$9, $8, $9
	stl	$9, 0($19)
	ret
	.end	gld_chain

# gld_stream(addr, loads): every CPE does `loads` independent 32-byte global loads.
	.globl	gld_stream
	.ent	gld_stream
gld_stream:
	rcid	$1
	sll	$1, 5, $1
	addl	$16, $1, $16
1:	vldd	$2, 0($16)
	subl	$17, 1, $17
	bgt	$17, 1b
	ret
	.end	gld_stream

# barriers(n): 16 n whole-array barriers (synr 0xff then sync 0xff; 32 n barriers in all).
	.globl	barriers
	.ent	barriers
barriers:
1:
	.rept	16
	synr	0xff
	sync	0xff
	.endr
	subl	$16, 1, $16
	bgt	$16, 1b
	ret
	.end	barriers
