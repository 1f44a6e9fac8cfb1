# Workloads of `swsim bench speed` (the DMA-bound one is dma_stream in fidelity.s).

	.set	noreorder
	.text

# Both loops: every CPE runs `iters` (>= 1) iterations of 16 independent vmads on P0 while P1
# broadcasts one register along the row (putr 8) and takes the 7 broadcasts of its row mates
# (getr x 7): 26 instructions per iteration.

# vmad_comm: software-pipelined, the getrs of iteration i take the broadcasts of iteration
# i - 1 (one putr primes the loop, 7 getrs drain it), so the row runs in step at 16 cycles per
# iteration and 100% EE, as a GEMM inner loop does.
	.globl	vmad_comm
	.ent	vmad_comm
vmad_comm:
	.irp	r, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24
	vcpyf	$31, $\r
	.endr
	putr	$1, 8
1:	vmad	$0, $4, $8, $8
	putr	$1, 8
	vmad	$0, $4, $9, $9
	vmad	$0, $4, $10, $10
	getr	$2
	vmad	$0, $4, $11, $11
	vmad	$0, $4, $12, $12
	getr	$2
	vmad	$0, $4, $13, $13
	vmad	$0, $4, $14, $14
	getr	$2
	vmad	$0, $4, $15, $15
	vmad	$0, $4, $17, $17
	getr	$2
	vmad	$0, $4, $18, $18
	vmad	$0, $4, $19, $19
	getr	$2
	vmad	$0, $4, $20, $20
	vmad	$0, $4, $21, $21
	getr	$2
	vmad	$0, $4, $22, $22
	subl	$16, 1, $16
	vmad	$0, $4, $23, $23
	getr	$2
	vmad	$0, $4, $24, $24
	bgt	$16, 1b
	.rept	7
	getr	$2
	.endr
	ret
	.end	vmad_comm

# vmad_comm_unpipelined: the getrs take the broadcasts of the same iteration, so every
# iteration waits for the register-communication latency: 25 cycles per iteration, 64% EE.
	.globl	vmad_comm_unpipelined
	.ent	vmad_comm_unpipelined
vmad_comm_unpipelined:
	.irp	r, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24
	vcpyf	$31, $\r
	.endr
1:	vmad	$0, $4, $8, $8
	putr	$1, 8
	vmad	$0, $4, $9, $9
	getr	$2
	vmad	$0, $4, $10, $10
	getr	$2
	vmad	$0, $4, $11, $11
	getr	$2
	vmad	$0, $4, $12, $12
	getr	$2
	vmad	$0, $4, $13, $13
	getr	$2
	vmad	$0, $4, $14, $14
	getr	$2
	vmad	$0, $4, $15, $15
	getr	$2
	vmad	$0, $4, $17, $17
	subl	$16, 1, $16
	vmad	$0, $4, $18, $18
	vmad	$0, $4, $19, $19
	vmad	$0, $4, $20, $20
	vmad	$0, $4, $21, $21
	vmad	$0, $4, $22, $22
	vmad	$0, $4, $23, $23
	vmad	$0, $4, $24, $24
	bgt	$16, 1b
	ret
	.end	vmad_comm_unpipelined

# int_chain: an unpipelined integer loop, as unscheduled compiled code for
# x[i] = x[i] * k + c over a 2 KiB ring of LDM words: each instruction waits for the one
# before it (ldl 3 cycles, mull 5, addl 1), so most cycles stall on raw. a0 = iterations.
	.globl	int_chain
	.ent	int_chain
int_chain:
	ldi	$18, 3($31)
	ldi	$19, 7($31)
	ldi	$20, 2047($31)
	bis	$31, $31, $17
1:	ldl	$1, 0($17)
	mull	$1, $18, $1
	addl	$1, $19, $1
	stl	$1, 0($17)
	addl	$17, 8, $17
	and	$17, $20, $17
	subl	$16, 1, $16
	bgt	$16, 1b
	ret
	.end	int_chain

# rc_exchange: register communication only: every iteration each CPE broadcasts one register
# along its row and takes its 7 row mates' broadcasts of the previous iteration (software-
# pipelined like vmad_comm), adding them up: 8 of the 17 instructions of an iteration are puts
# and gets, and P1 is busy with them every cycle. a0 = iterations (>= 1).
	.globl	rc_exchange
	.ent	rc_exchange
rc_exchange:
	rcid	$1
	putr	$1, 8
1:	putr	$1, 8
	.rept	7
	getr	$2
	addl	$3, $2, $3
	.endr
	subl	$16, 1, $16
	bgt	$16, 1b
	.rept	7
	getr	$2
	.endr
	ret
	.end	rc_exchange
