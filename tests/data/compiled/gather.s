# sw5cc -slave style output of (a strided get: CPE i takes columns 2i, 2i+1 of an 8 x 16
# matrix of doubles, then the row of CPEs meets at a barrier before putting them back):
#
#     #include <slave.h>
#     __thread_local double col[16];
#     __thread_local volatile int reply;
#     void gather(double *m, double *out) {
#         reply = 0;
#         athread_get(PE_MODE, &m[2 * _MYID], col, 128, (void *)&reply, 0, 112, 16);
#         while (reply != 1);
#         athread_syn(ROW_SCOPE, 0xff);
#         reply = 0;
#         athread_put(PE_MODE, col, &out[16 * _MYID], 128, (void *)&reply, 0, 0);
#         while (reply != 1);
#     }
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"gather.c"
	.section	.tbss,"awT",@nobits
	.align 3
	.type	col, @tls_object
	.size	col, 128
col:	.skip 128
	.align 2
	.type	reply, @tls_object
	.size	reply, 4
reply:	.skip 4
	.text
	.align 4
	.globl gather
	.type	gather, @function
	.ent gather
gather:
	.frame $30,32,$26,0
	.mask 0x4000200,-16
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$gather..ng:
	ldi $30,-32($30)
	stl $26,16($30)
	stl $9,24($30)
	.prologue 1
	ldih $1,_MYID($31)		!tprelhi
	ldw $1,_MYID($1)		!tprello
	sll $1,7,$2
	addl $17,$2,$9
	sll $1,4,$1
	addl $16,$1,$17
	stw $31,reply($31)		!tprel
	ldi $1,112($31)
	stl $1,0($30)
	ldi $1,16($31)
	stl $1,8($30)
	ldi $18,col($31)		!tprel
	ldi $19,128($31)
	ldi $20,reply($31)		!tprel
	clr $21
	clr $16
	ldl $27,athread_get($29)		!literal!2
	call $26,($27),athread_get		!lituse_jsr!2
	ldih $29,0($26)		!gpdisp!3
	ldi $29,0+4($29)		!gpdisp!3
$L2:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L2
	ldi $17,255($31)
	clr $16
	ldl $27,athread_syn($29)		!literal!4
	call $26,($27),athread_syn		!lituse_jsr!4
	ldih $29,0($26)		!gpdisp!5
	ldi $29,0+4($29)		!gpdisp!5
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	clr $16
	ldi $17,col($31)		!tprel
	mov $9,$18
	ldi $19,128($31)
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
	.end gather
$LFE0:
	.size	gather, .-gather
	.ident	"GCC: (GNU) 5.3.0 sw5cc"
	.section	.note.GNU-stack,"",@progbits
