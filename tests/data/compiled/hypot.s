# sw5cc -slave style output of (a static helper called directly, libm calls, an initialised
# thread-local variable and a constant in .rodata):
#
#     #include <math.h>
#     #include <slave.h>
#     __thread_local double scale = 3.0;
#     __thread_local double v[2];
#     __thread_local volatile int reply;
#     static double norm2(double a, double b) { return sqrt(a * a + b * b); }
#     void hyp(double *io) {
#         reply = 0;
#         athread_get(PE_MODE, &io[2 * _MYID], v, 16, (void *)&reply, 0, 0, 0);
#         while (reply != 1);
#         v[0] = scale * norm2(v[0], v[1]) + 0.25;
#         v[1] = fabs(v[1]);
#         reply = 0;
#         athread_put(PE_MODE, v, &io[2 * _MYID], 16, (void *)&reply, 0, 0);
#         while (reply != 1);
#     }
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"hypot.c"
	.section	.tdata,"awT",@progbits
	.align 3
	.type	scale, @tls_object
	.size	scale, 8
scale:
	.long	0
	.long	1074266112
	.section	.tbss,"awT",@nobits
	.align 3
	.type	v, @tls_object
	.size	v, 16
v:	.skip 16
	.align 2
	.type	reply, @tls_object
	.size	reply, 4
reply:	.skip 4
	.section	.rodata.cst8,"aM",@progbits,8
	.align 3
$LC0:
	.long	0
	.long	1070596096
	.text
	.align 4
	.ent norm2
norm2:
	.frame $30,16,$26,0
	.mask 0x4000000,-16
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$norm2..ng:
	ldi $30,-16($30)
	stl $26,0($30)
	.prologue 1
	fmuld $f17,$f17,$f17
	fmad $f16,$f16,$f17,$f16
	ldl $27,sqrt($29)		!literal!2
	call $26,($27),sqrt		!lituse_jsr!2
	ldih $29,0($26)		!gpdisp!3
	ldi $29,0+4($29)		!gpdisp!3
	ldl $26,0($30)
	ldi $30,16($30)
	ret $31,($26),1
	.end norm2
	.align 4
	.globl hyp
	.type	hyp, @function
	.ent hyp
hyp:
	.frame $30,32,$26,0
	.mask 0x4000200,-16
$LFB1:
	ldih $29,0($27)		!gpdisp!4
	ldi $29,0($29)		!gpdisp!4
$hyp..ng:
	ldi $30,-32($30)
	stl $26,16($30)
	stl $9,24($30)
	.prologue 1
	ldih $1,_MYID($31)		!tprelhi
	ldw $1,_MYID($1)		!tprello
	sll $1,4,$1
	addl $16,$1,$9
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	stl $31,8($30)
	mov $9,$17
	ldi $18,v($31)		!tprel
	ldi $19,16($31)
	ldi $20,reply($31)		!tprel
	clr $21
	clr $16
	ldl $27,athread_get($29)		!literal!5
	call $26,($27),athread_get		!lituse_jsr!5
	ldih $29,0($26)		!gpdisp!6
	ldi $29,0+4($29)		!gpdisp!6
$L3:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L3
	fldd $f16,v($31)		!tprel
	fldd $f17,v+8($31)		!tprel
	bsr $26,$norm2..ng		!samegp
	fldd $f1,scale($31)		!tprel
	ldih $2,$LC0($29)		!gprelhigh
	fldd $f2,$LC0($2)		!gprellow
	fmad $f0,$f1,$f2,$f0
	fstd $f0,v($31)		!tprel
	fldd $f16,v+8($31)		!tprel
	ldl $27,fabs($29)		!literal!7
	call $26,($27),fabs		!lituse_jsr!7
	ldih $29,0($26)		!gpdisp!8
	ldi $29,0+4($29)		!gpdisp!8
	fstd $f0,v+8($31)		!tprel
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	clr $16
	ldi $17,v($31)		!tprel
	mov $9,$18
	ldi $19,16($31)
	ldi $20,reply($31)		!tprel
	clr $21
	ldl $27,athread_put($29)		!literal!9
	call $26,($27),athread_put		!lituse_jsr!9
	ldih $29,0($26)		!gpdisp!10
	ldi $29,0+4($29)		!gpdisp!10
$L4:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L4
	ldl $26,16($30)
	ldl $9,24($30)
	ldi $30,32($30)
	ret $31,($26),1
	.end hyp
$LFE1:
	.size	hyp, .-hyp
	.ident	"GCC: (GNU) 5.3.0 sw5cc"
	.section	.note.GNU-stack,"",@progbits
