# sw5cc -slave style output of (a corpus file of tests/test_compiled_corpus.py):
#
#     #include <slave.h>
#     #define N 32
#     __thread_local double a[N], b[N];
#     __thread_local volatile int reply;
#     void vadd(double *x, double *y, double *z) {
#         int i, off = _MYID * N;
#         reply = 0;
#         athread_get(PE_MODE, &x[off], a, N * 8, (void *)&reply, 0, 0, 0);
#         athread_get(PE_MODE, &y[off], b, N * 8, (void *)&reply, 0, 0, 0);
#         while (reply != 2);
#         for (i = 0; i < N; i++) a[i] += b[i];
#         reply = 0;
#         athread_put(PE_MODE, a, &z[off], N * 8, (void *)&reply, 0, 0);
#         while (reply != 1);
#     }
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"vadd.c"
	.section	.tbss,"awT",@nobits
	.align 3
	.type	a, @tls_object
	.size	a, 256
a:	.skip 256
	.type	b, @tls_object
	.size	b, 256
b:	.skip 256
	.align 2
	.type	reply, @tls_object
	.size	reply, 4
reply:	.skip 4
	.text
	.align 4
	.globl vadd
	.type	vadd, @function
	.ent vadd
vadd:
	.frame $30,48,$26,0
	.mask 0x4000e00,-32
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$vadd..ng:
	ldi $30,-48($30)
	stl $26,16($30)
	stl $9,24($30)
	stl $10,32($30)
	stl $11,40($30)
	.prologue 1
	mov $17,$10
	mov $18,$11
	ldih $1,_MYID($31)		!tprelhi
	ldw $1,_MYID($1)		!tprello
	sll $1,8,$9
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	stl $31,8($30)
	addl $16,$9,$17
	ldi $18,a($31)		!tprel
	ldi $19,256($31)
	ldi $20,reply($31)		!tprel
	clr $21
	clr $16
	ldl $27,athread_get($29)		!literal!2
	call $26,($27),athread_get		!lituse_jsr!2
	ldih $29,0($26)		!gpdisp!3
	ldi $29,0+4($29)		!gpdisp!3
	stl $31,0($30)
	stl $31,8($30)
	addl $10,$9,$17
	ldi $18,b($31)		!tprel
	ldi $19,256($31)
	ldi $20,reply($31)		!tprel
	clr $21
	clr $16
	ldl $27,athread_get($29)		!literal!4
	call $26,($27),athread_get		!lituse_jsr!4
	ldih $29,0($26)		!gpdisp!5
	ldi $29,0+4($29)		!gpdisp!5
$L2:
	ldw $1,reply($31)		!tprel
	cmpeq $1,2,$1
	beq $1,$L2
	ldi $2,a($31)		!tprel
	ldi $3,b($31)		!tprel
	ldi $4,32($31)
	.align 4
$L3:
	fldd $f5,0($2)
	fldd $f6,0($3)
	faddd $f5,$f6,$f5
	fstd $f5,0($2)
	ldi $2,8($2)
	ldi $3,8($3)
	subw $4,1,$4
	bne $4,$L3
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	clr $16
	ldi $17,a($31)		!tprel
	addl $11,$9,$18
	ldi $19,256($31)
	ldi $20,reply($31)		!tprel
	clr $21
	ldl $27,athread_put($29)		!literal!6
	call $26,($27),athread_put		!lituse_jsr!6
	ldih $29,0($26)		!gpdisp!7
	ldi $29,0+4($29)		!gpdisp!7
$L4:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L4
	ldl $26,16($30)
	ldl $9,24($30)
	ldl $10,32($30)
	ldl $11,40($30)
	ldi $30,48($30)
	ret $31,($26),1
	.end vadd
$LFE0:
	.size	vadd, .-vadd
	.ident	"GCC: (GNU) 5.3.0 sw5cc"
	.section	.note.GNU-stack,"",@progbits
