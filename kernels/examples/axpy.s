# daxpy over LDM: y[i] = alpha * x[i] + y[i], four doubles per vmad.
#
# Register ABI (docs/asm.md "Calling convention"):
#   a0 = $16  n, the number of doubles (a multiple of 4; 0 does nothing)
#   a1 = $17  LDM address of x (32-byte aligned)
#   a2 = $18  LDM address of y (32-byte aligned), overwritten with the result
#   a3 = $19  alpha, the bits of an IEEE double
#   returns with `ret` to ra = $26; clobbers $1-$3 and a0-a2.

	.text
	.globl	axpy
	.ent	axpy
axpy:
	vcpyf	$19, $1			# alpha in all four lanes
	srl	$16, 2, $16		# vectors to do
	beq	$16, 2f
1:	vldd	$2, 0($17)		# x[i:i+4]
	vldd	$3, 0($18)		# y[i:i+4]
	vmad	$2, $1, $3, $3		# y = x * alpha + y
	addl	$17, 32, $17
	subl	$16, 1, $16
	vstd	$3, 0($18)
	addl	$18, 32, $18
	bne	$16, 1b
2:	ret
	.end	axpy
