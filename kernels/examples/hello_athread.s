# What sw5cc -slave makes of (athread's slave side):
#
#     #include <slave.h>
#     __thread_local long t0;
#     void hello(long *out) {
#         penv_slave_cycle_count(&t0);
#         out[_MYID] = _ROW * 10 + _COL;
#         printf("hello from CPE %d (row %d, col %d), cycle %ld\n", _MYID, _ROW, _COL, t0);
#     }
#
# in the compiler's style, unmodified: run it with `swsim run kernels/examples/hello_athread.s
# --entry hello --cpes 4 --arg @out.npy`; the athread runtime (kernels/athread) is linked
# because it calls printf and reads _MYID (docs/runtime.md).
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"hello.c"
	.section	.rodata.str1.1,"aMS",@progbits,1
$LC0:
	.ascii "hello from CPE %d (row %d, col %d), cycle %ld\n\000"
	.section	.tbss,"awT",@nobits
	.align 3
	.type	t0, @tls_object
	.size	t0, 8
t0:	.skip 8
	.text
	.align 4
	.globl hello
	.ent hello
hello:
	.frame $15,32,$26,0
	.mask 0x4008200,-32
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$hello..ng:
	ldi $30,-32($30)
	stl $26,0($30)
	stl $15,8($30)
	stl $9,16($30)
	mov $30,$15
	.prologue 1
	mov $16,$9
	ldi $16,t0($31)		!tprel
	ldl $27,penv_slave_cycle_count($29)		!literal!2
	call $26,($27),0		!lituse_jsr!2
	ldih $29,0($26)		!gpdisp!3
	ldi $29,0+4($29)		!gpdisp!3
	ldih $1,_MYID($31)		!tprelhi
	ldw $17,_MYID($1)		!tprello
	ldih $1,_ROW($31)		!tprelhi
	ldw $18,_ROW($1)		!tprello
	ldih $1,_COL($31)		!tprelhi
	ldw $19,_COL($1)		!tprello
	s4addw $18,$18,$1
	addw $1,$1,$1
	addw $1,$19,$1
	s8addl $17,$9,$2
	stl $1,0($2)
	ldih $1,t0($31)		!tprelhi
	ldl $20,t0($1)		!tprello
	ldih $16,$LC0($29)		!gprelhigh
	ldi $16,$LC0($16)		!gprellow
	ldl $27,printf($29)		!literal!4
	call $26,($27),0		!lituse_jsr!4
	ldih $29,0($26)		!gpdisp!5
	ldi $29,0+4($29)		!gpdisp!5
	mov $15,$30
	ldl $26,0($30)
	ldl $15,8($30)
	ldl $9,16($30)
	ldi $30,32($30)
	ret $31,($26),1
	.end hello
	.section	.note.GNU-stack,"",@progbits
