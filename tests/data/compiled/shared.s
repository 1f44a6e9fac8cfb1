# sw5cc -slave style output of (globals that are not __thread_local live in main memory,
# shared by the CPEs: GCC declares them .comm, a static one .local + .comm):
#
#     #include <slave.h>
#     int hits[64];
#     static int calls;
#     void mark(int k) {
#         hits[_MYID] = k * _MYID;
#         calls = 1;
#     }
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"shared.c"
	.text
	.align 4
	.globl mark
	.type	mark, @function
	.ent mark
mark:
	.frame $30,0,$26,0
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$mark..ng:
	.prologue 1
	ldih $2,_MYID($31)		!tprelhi
	ldw $2,_MYID($2)		!tprello
	mulw $16,$2,$3
	ldl $1,hits($29)		!literal!2
	s4addl $2,$1,$2
	stw $3,0($2)
	ldih $1,calls($29)		!gprelhigh
	ldi $4,1($31)
	stw $4,calls($1)		!gprellow
	ret $31,($26),1
	.end mark
$LFE0:
	.size	mark, .-mark
	.local	calls
	.comm	calls,4,4
	.comm	hits,256,4
	.ident	"GCC: (GNU) 5.3.0 sw5cc"
	.section	.note.GNU-stack,"",@progbits
