# sw5cc -slave style output of:
#
#     #include <slave.h>
#     __thread_local double buf[4];
#     __thread_local unsigned long cnt[4];
#     __thread_local volatile int reply;
#     void counters(double *data, unsigned long *out) {
#         penv_slave1_get_init(); penv_slave2_put_init();
#         penv_slave3_float_ops_init(); penv_slave0_cycle_init();
#         reply = 0;
#         athread_get(PE_MODE, &data[_MYID * 4], buf, 32, (void *)&reply, 0, 0, 0);
#         while (reply != 1);
#         buf[0] = buf[0] * buf[1] + buf[2];
#         reply = 0;
#         athread_put(PE_MODE, buf, &data[_MYID * 4], 32, (void *)&reply, 0, 0);
#         while (reply != 1);
#         penv_slave1_get_count(&cnt[0]); penv_slave2_put_count(&cnt[1]);
#         penv_slave3_float_ops_count(&cnt[2]); penv_slave0_cycle_count(&cnt[3]);
#         reply = 0;
#         athread_put(PE_MODE, cnt, &out[_MYID * 4], 32, (void *)&reply, 0, 0);
#         while (reply != 1);
#     }
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.file	"counters.c"
	.section	.tbss,"awT",@nobits
	.align 3
	.type	buf, @tls_object
	.size	buf, 32
buf:	.skip 32
	.type	cnt, @tls_object
	.size	cnt, 32
cnt:	.skip 32
	.align 2
	.type	reply, @tls_object
	.size	reply, 4
reply:	.skip 4
	.text
	.align 4
	.globl counters
	.type	counters, @function
	.ent counters
counters:
	.frame $30,48,$26,0
	.mask 0x4000600,-32
$LFB0:
	ldih $29,0($27)		!gpdisp!1
	ldi $29,0($29)		!gpdisp!1
$counters..ng:
	ldi $30,-48($30)
	stl $26,16($30)
	stl $9,24($30)
	stl $10,32($30)
	.prologue 1
	ldih $1,_MYID($31)		!tprelhi
	ldw $1,_MYID($1)		!tprello
	sll $1,5,$1
	addl $16,$1,$9
	addl $17,$1,$10
	ldl $27,penv_slave1_get_init($29)		!literal!2
	call $26,($27),penv_slave1_get_init		!lituse_jsr!2
	ldih $29,0($26)		!gpdisp!3
	ldi $29,0+4($29)		!gpdisp!3
	ldl $27,penv_slave2_put_init($29)		!literal!4
	call $26,($27),penv_slave2_put_init		!lituse_jsr!4
	ldih $29,0($26)		!gpdisp!5
	ldi $29,0+4($29)		!gpdisp!5
	ldl $27,penv_slave3_float_ops_init($29)		!literal!6
	call $26,($27),penv_slave3_float_ops_init		!lituse_jsr!6
	ldih $29,0($26)		!gpdisp!7
	ldi $29,0+4($29)		!gpdisp!7
	ldl $27,penv_slave0_cycle_init($29)		!literal!8
	call $26,($27),penv_slave0_cycle_init		!lituse_jsr!8
	ldih $29,0($26)		!gpdisp!9
	ldi $29,0+4($29)		!gpdisp!9
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	stl $31,8($30)
	mov $9,$17
	ldi $18,buf($31)		!tprel
	ldi $19,32($31)
	ldi $20,reply($31)		!tprel
	clr $21
	clr $16
	ldl $27,athread_get($29)		!literal!10
	call $26,($27),athread_get		!lituse_jsr!10
	ldih $29,0($26)		!gpdisp!11
	ldi $29,0+4($29)		!gpdisp!11
$L2:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L2
	ldi $2,buf($31)		!tprel
	fldd $f3,0($2)
	fldd $f4,8($2)
	fldd $f5,16($2)
	fmad $f3,$f4,$f5,$f3
	fstd $f3,0($2)
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	clr $16
	ldi $17,buf($31)		!tprel
	mov $9,$18
	ldi $19,32($31)
	ldi $20,reply($31)		!tprel
	clr $21
	ldl $27,athread_put($29)		!literal!12
	call $26,($27),athread_put		!lituse_jsr!12
	ldih $29,0($26)		!gpdisp!13
	ldi $29,0+4($29)		!gpdisp!13
$L3:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L3
	ldi $16,cnt+0($31)		!tprel
	ldl $27,penv_slave1_get_count($29)		!literal!14
	call $26,($27),penv_slave1_get_count		!lituse_jsr!14
	ldih $29,0($26)		!gpdisp!15
	ldi $29,0+4($29)		!gpdisp!15
	ldi $16,cnt+8($31)		!tprel
	ldl $27,penv_slave2_put_count($29)		!literal!16
	call $26,($27),penv_slave2_put_count		!lituse_jsr!16
	ldih $29,0($26)		!gpdisp!17
	ldi $29,0+4($29)		!gpdisp!17
	ldi $16,cnt+16($31)		!tprel
	ldl $27,penv_slave3_float_ops_count($29)		!literal!18
	call $26,($27),penv_slave3_float_ops_count		!lituse_jsr!18
	ldih $29,0($26)		!gpdisp!19
	ldi $29,0+4($29)		!gpdisp!19
	ldi $16,cnt+24($31)		!tprel
	ldl $27,penv_slave0_cycle_count($29)		!literal!20
	call $26,($27),penv_slave0_cycle_count		!lituse_jsr!20
	ldih $29,0($26)		!gpdisp!21
	ldi $29,0+4($29)		!gpdisp!21
	stw $31,reply($31)		!tprel
	stl $31,0($30)
	clr $16
	ldi $17,cnt($31)		!tprel
	mov $10,$18
	ldi $19,32($31)
	ldi $20,reply($31)		!tprel
	clr $21
	ldl $27,athread_put($29)		!literal!22
	call $26,($27),athread_put		!lituse_jsr!22
	ldih $29,0($26)		!gpdisp!23
	ldi $29,0+4($29)		!gpdisp!23
$L4:
	ldw $1,reply($31)		!tprel
	cmpeq $1,1,$1
	beq $1,$L4
	ldl $26,16($30)
	ldl $9,24($30)
	ldl $10,32($30)
	ldi $30,48($30)
	ret $31,($26),1
	.end counters
$LFE0:
	.size	counters, .-counters
	.ident	"GCC: (GNU) 5.3.0 sw5cc"
	.section	.note.GNU-stack,"",@progbits
