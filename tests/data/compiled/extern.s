# sw5cc -slave style output of (arrays the host program defines, reached through !literal):
#
#     #include <slave.h>
#     extern double A[256], total[64];
#     __thread_local double part[4];
#     __thread_local volatile int reply;
#     void sum4(void) {
#         reply = 0;
#         athread_get(PE_MODE, &A[4 * _MYID], part, 32, (void *)&reply, 0, 0, 0);
#         while (reply != 1);
#         part[0] = part[0] + part[1] + part[2] + part[3];
#         reply = 0;
#         athread_put(PE_MODE, part, &total[_MYID], 8, (void *)&reply, 0, 0);
#         while (reply != 1);
#     }
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"extern.c"
	.section	.tbss,"awT",@nobits
	.align 3
	.type	part, @tls_object
	.size	part, 32
part:	.skip 32
	.align 2
	.type	reply, @tls_object
	.size	reply, 4
reply:	.skip 4
	.text
	.align 4
	.globl sum4
	.type	sum4, @function
	.ent sum4
sum4:
	.frame $30,32,$26,0
	.mask 0x4000200,-16
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$sum4..ng:
	ldi $30,-32($30)
	stl $26,16($30)
	stl $9,24($30)
	.prologue 1
	ldih $9,_MYID($31)		!tprelhi
	ldw $9,_MYID($9)		!tprello
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	stl $31,8($30)
	ldl $1,A($29)		!literal!2
	sll $9,5,$2
	addl $1,$2,$17
	ldi $18,part($31)		!tprel
	ldi $19,32($31)
	ldi $20,reply($31)		!tprel
	clr $21
	clr $16
	ldl $27,athread_get($29)		!literal!3
	call $26,($27),athread_get		!lituse_jsr!3
	ldih $29,0($26)		!gpdisp!4
	ldi $29,0+4($29)		!gpdisp!4
$L2:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L2
	fldd $f1,part($31)		!tprel
	fldd $f2,part+8($31)		!tprel
	faddd $f1,$f2,$f1
	fldd $f2,part+16($31)		!tprel
	faddd $f1,$f2,$f1
	fldd $f2,part+24($31)		!tprel
	faddd $f1,$f2,$f1
	fstd $f1,part($31)		!tprel
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	clr $16
	ldi $17,part($31)		!tprel
	ldl $1,total($29)		!literal!5
	s8addl $9,$1,$18
	ldi $19,8($31)
	ldi $20,reply($31)		!tprel
	clr $21
	ldl $27,athread_put($29)		!literal!6
	call $26,($27),athread_put		!lituse_jsr!6
	ldih $29,0($26)		!gpdisp!7
	ldi $29,0+4($29)		!gpdisp!7
$L3:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L3
	ldl $26,16($30)
	ldl $9,24($30)
	ldi $30,32($30)
	ret $31,($26),1
	.end sum4
$LFE0:
	.size	sum4, .-sum4
	.ident	"GCC: (GNU) 5.3.0 sw5cc"
	.section	.note.GNU-stack,"",@progbits
