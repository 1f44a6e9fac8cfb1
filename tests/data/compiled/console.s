# sw5cc -slave style output of:
#
#     #include <stdio.h>
#     #include <slave.h>
#     void report(int n) {
#         fprintf(_slave_stdout, "CPE %d/%d row %d col %d: %s %.2f\n", _MYID, n, _ROW, _COL,
#                 "ok", 0.5 * _MYID);
#         fprintf(_slave_stderr, "CPE %d: warning %d\n", _MYID, -n);
#         fprintf(_slave_stdout, "--\n");        /* GCC: fwrite("--\n", 1, 3, _slave_stdout) */
#         printf("bye\n");                       /* GCC: puts("bye") */
#         putchar('#');
#         fputs("!\n", _slave_stdout);
#     }
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"console.c"
	.section	.rodata.str1.1,"aMS",@progbits,1
$LC0:
	.ascii "CPE %d/%d row %d col %d: %s %.2f\12\0"
$LC1:
	.ascii "ok\0"
$LC2:
	.ascii "CPE %d: warning %d\12\0"
$LC4:
	.ascii "--\12\0"
$LC5:
	.ascii "bye\0"
$LC6:
	.ascii "!\12\0"
	.section	.rodata.cst8,"aM",@progbits,8
	.align 3
$LC3:
	.long	0
	.long	1071644672
	.text
	.align 4
	.globl report
	.type	report, @function
	.ent report
report:
	.frame $30,32,$26,0
	.mask 0x4000200,-16
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$report..ng:
	ldi $30,-32($30)
	stl $26,16($30)
	stl $9,24($30)
	.prologue 1
	mov $16,$9
	ldih $1,_MYID($31)		!tprelhi
	ldw $18,_MYID($1)		!tprello
	fcvtld $18,$f2
	ldih $3,$LC3($29)		!gprelhigh
	fldd $f3,$LC3($3)		!gprellow
	fmuld $f2,$f3,$f2
	fstd $f2,8($30)
	ldih $1,$LC1($29)		!gprelhigh
	ldi $1,$LC1($1)		!gprellow
	stl $1,0($30)
	ldih $1,_COL($31)		!tprelhi
	ldw $21,_COL($1)		!tprello
	ldih $1,_ROW($31)		!tprelhi
	ldw $20,_ROW($1)		!tprello
	mov $9,$19
	ldih $17,$LC0($29)		!gprelhigh
	ldi $17,$LC0($17)		!gprellow
	ldl $1,_slave_stdout($29)		!literal!2
	ldl $16,0($1)		!lituse_base!2
	ldl $27,fprintf($29)		!literal!3
	call $26,($27),fprintf		!lituse_jsr!3
	ldih $29,0($26)		!gpdisp!4
	ldi $29,0+4($29)		!gpdisp!4
	subw $31,$9,$19
	ldih $1,_MYID($31)		!tprelhi
	ldw $18,_MYID($1)		!tprello
	ldih $17,$LC2($29)		!gprelhigh
	ldi $17,$LC2($17)		!gprellow
	ldl $1,_slave_stderr($29)		!literal!5
	ldl $16,0($1)		!lituse_base!5
	ldl $27,fprintf($29)		!literal!6
	call $26,($27),fprintf		!lituse_jsr!6
	ldih $29,0($26)		!gpdisp!7
	ldi $29,0+4($29)		!gpdisp!7
	ldl $1,_slave_stdout($29)		!literal!8
	ldl $19,0($1)		!lituse_base!8
	ldi $18,3($31)
	ldi $17,1($31)
	ldih $16,$LC4($29)		!gprelhigh
	ldi $16,$LC4($16)		!gprellow
	ldl $27,fwrite($29)		!literal!9
	call $26,($27),fwrite		!lituse_jsr!9
	ldih $29,0($26)		!gpdisp!10
	ldi $29,0+4($29)		!gpdisp!10
	ldih $16,$LC5($29)		!gprelhigh
	ldi $16,$LC5($16)		!gprellow
	ldl $27,puts($29)		!literal!11
	call $26,($27),puts		!lituse_jsr!11
	ldih $29,0($26)		!gpdisp!12
	ldi $29,0+4($29)		!gpdisp!12
	ldi $16,35($31)
	ldl $27,putchar($29)		!literal!13
	call $26,($27),putchar		!lituse_jsr!13
	ldih $29,0($26)		!gpdisp!14
	ldi $29,0+4($29)		!gpdisp!14
	ldl $1,_slave_stdout($29)		!literal!15
	ldl $17,0($1)		!lituse_base!15
	ldih $16,$LC6($29)		!gprelhigh
	ldi $16,$LC6($16)		!gprellow
	ldl $27,fputs($29)		!literal!16
	call $26,($27),fputs		!lituse_jsr!16
	ldih $29,0($26)		!gpdisp!17
	ldi $29,0+4($29)		!gpdisp!17
	ldl $26,16($30)
	ldl $9,24($30)
	ldi $30,32($30)
	ret $31,($26),1
	.end report
$LFE0:
	.size	report, .-report
	.ident	"GCC: (GNU) 5.3.0 sw5cc"
	.section	.note.GNU-stack,"",@progbits
