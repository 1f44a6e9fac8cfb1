# The CPE side of the athread runtime (docs/runtime.md): what sw5cc -slave output expects the
# vendor library to provide. kernels/athread/__init__.py links this object to a program that
# refers to one of its global symbols.
#
# Written in the compiler's ABI: arguments in $16-$21 (more at 0($sp), 8($sp), ...), result in
# $0, return address $26; only the temporaries $1-$8, $22-$25, $27, $28 are clobbered, so
# $9-$15, $29 (gp) and $30 (sp) survive every call. The functions are weak: a program's own
# definition (its own printf, say) wins.

	.set	noreorder
	.include "../include/dma.inc"

	CONSOLE_CGS = 8			# core groups with a console slot (>= num_cgs of every preset)
	CONSOLE_CPES_SHIFT = 6
	CONSOLE_CPES = 1 << CONSOLE_CPES_SHIFT
	CONSOLE_REGION_SHIFT = 10
	CONSOLE_REGION_BYTES = 1 << CONSOLE_REGION_SHIFT	# one CPE's share of _slave_stdout
	CONSOLE_HEADER_BYTES = 16	# quad: bytes of records that follow; quad: printfs dropped
	RECORD_BYTES = 256		# the largest record: 16-byte header, format, arguments
	RECORD_HEADER_BYTES = 16	# quad: length | truncated << 32 | stream << 33; quad: cycle stamp
	STREAM_SHIFT = 33		# the record's stream: 0 _slave_stdout, 1 _slave_stderr
	REGISTER_ARGS = 5		# printf's values in $17-$21; the sixth and later on the stack
	LENGTH_LETTERS = (1 << ('h' - 'a')) | (1 << ('j' - 'a')) | (1 << ('l' - 'a')) | (1 << ('q' - 'a')) | (1 << ('t' - 'a')) | (1 << ('z' - 'a'))
	ROW_SCOPE = 0			# athread_syn scopes [choice: the order of the athread enum]
	COL_SCOPE = 1
	ARRAY_SCOPE = 2
	CYCLE_CSR = 4			# rcsr 4: the core group's cycle counter
	FLOAT_OPS_CSR = 8		# rcsr 8: this CPE's floating-point operations (isa/table.py)
	CONSOLE_CSR = 12		# rcsr 12: 0 once the host has served the call (console_call_cycles)
	PENV_SLOTS = 4			# penv_slave0_* .. penv_slave3_* [choice: four counter slots]
	PENV_EVENTS = 4			# cycle, float_ops, get, put (PENV_COUNTER below)

# ---- thread-local variables: every CPE's own, in its LDM (set by __swsim_start) -------------
# Declared int by the athread headers; each sits in an 8-byte slot whose upper half is zero,
# so ldw and ldl both read the value.
	.section .tbss,"awT",@nobits
	.align	5
	.globl	_MYID, _PEN, _ROW, _COL, _CGN
	.type	_MYID, @tls_object
_MYID:	.skip	8			# thread id 0..63 = the CPE id (rcid)
_PEN:	.skip	8			# physical CPE number: the same as _MYID in swsim
_ROW:	.skip	8			# _MYID / 8
_COL:	.skip	8			# _MYID % 8
_CGN:	.skip	8			# core group number
console_used:	.skip	8		# bytes of records this CPE has written
console_dropped: .skip	8		# printfs that did not fit its region
printf_args:	.skip	8 * REGISTER_ARGS
printf_stack:	.skip	8		# where the values after the register ones start
printf_stream:	.skip	8		# the record's stream (STREAM_SHIFT)
dma_counts:	.skip	8 * 2		# DMA requests issued through the runtime: puts, gets
penv_bases:	.skip	8 * PENV_SLOTS * PENV_EVENTS	# each penv_slaveN_<event>_init's count
float_ops_base:	.skip	8		# the count at penv_slave_float_ops_init
dma_reply:	.skip	8		# reply word of the blocking athread_dma_* calls
	.align	3
printf_record:	.skip	RECORD_BYTES	# a record is built here, then copied out

	MYID = _MYID - _MYID		# offsets in the block, from its base _MYID
	PEN = _PEN - _MYID
	ROW = _ROW - _MYID
	COL = _COL - _MYID
	CGN = _CGN - _MYID
	USED = console_used - _MYID
	DROPPED = console_dropped - _MYID
	ARGS = printf_args - _MYID
	STACK_ARGS = printf_stack - _MYID
	STREAM = printf_stream - _MYID
	DMA_COUNTS = dma_counts - _MYID	# indexed by the op: DMA_PUT 0, DMA_GET 1
	PENV_BASES = penv_bases - _MYID
	FLOAT_OPS_BASE = float_ops_base - _MYID
	DMA_REPLY = dma_reply - _MYID
	RECORD = printf_record - _MYID

# ---- the console: one region per (CG, CPE), read and printed by the host after the run ------
	.data
	.align	7
	.globl	__swsim_console
__swsim_console:
	.skip	CONSOLE_CGS * CONSOLE_CPES * CONSOLE_REGION_BYTES

# The streams fprintf writes to. Each holds its own address, so the stream handle is the same
# whether the code passes the variable's value (FILE *_slave_stdout) or its address.
	.globl	_slave_stdout, _slave_stderr
	.align	3
_slave_stdout:	.quad	_slave_stdout
_slave_stderr:	.quad	_slave_stderr
	.section .rodata
puts_format:	.asciz	"%s\n"
char_format:	.asciz	"%c"
string_format:	.asciz	"%s"
bytes_format:	.asciz	"%.*s"

	.text
# __swsim_start: where Machine.spawn starts every CPE of a program that defines it, with
# $27 = the entry's address, $28 = the CG number, the arguments and $26 (the exit) as for any
# entry. Sets the thread-local variables, then jumps to the entry, which returns to the exit.
	.globl	__swsim_start
	.ent	__swsim_start
__swsim_start:
	ldi	$1, _MYID
	rcid	$2
	stl	$2, MYID($1)
	stl	$2, PEN($1)
	srl	$2, 3, $3
	stl	$3, ROW($1)
	and	$2, 7, $3
	stl	$3, COL($1)
	stl	$28, CGN($1)
	jmp	$31, ($27)
	.end	__swsim_start

# int athread_get_id(int core): core -1 is this CPE's thread id (_MYID); swsim numbers threads
# as the physical CPEs, so any other core is its own id.
	.weak	athread_get_id
	.ent	athread_get_id
athread_get_id:
	ldi	$1, _MYID
	ldw	$0, MYID($1)
	br	$31, this_or_argument
	.end	athread_get_id

# int athread_get_core(int id): id -1 is this CPE's physical number (_PEN), else id itself.
	.weak	athread_get_core
	.ent	athread_get_core
athread_get_core:
	ldi	$1, _MYID
	ldw	$0, PEN($1)
this_or_argument:
	addw	$16, 1, $2
	beq	$2, 1f
	addw	$16, 0, $0
1:	ret
	.end	athread_get_core

# int athread_syn(scope, int mask): ROW_SCOPE: synr mask (the columns of this row in the low
# 8 bits); COL_SCOPE: sync mask; ARRAY_SCOPE: synr (mask & 0xff) then sync (mask >> 8 & 0xff),
# so 0xffff is all 64 CPEs. Returns 0, or -1 for an unknown scope.
	.weak	athread_syn
	.ent	athread_syn
athread_syn:
	clr	$0
	cmpeq	$16, ROW_SCOPE, $1
	bne	$1, row
	cmpeq	$16, COL_SCOPE, $1
	bne	$1, column
	cmpeq	$16, ARRAY_SCOPE, $1
	bne	$1, array
	ldi	$0, -1
	ret
row:	synr	$17
	ret
column:	sync	$17
	ret
array:	and	$17, 0xff, $1
	srl	$17, 8, $2
	and	$2, 0xff, $2
	synr	$1
	sync	$2
	ret
	.end	athread_syn

# void penv_slave_cycle_count(unsigned long *cycles): *cycles = the CG's cycle counter (rcsr 4,
# the cycle at which it issues); also returned in $0.
	.weak	penv_slave_cycle_count
	.ent	penv_slave_cycle_count
penv_slave_cycle_count:
	rcsr	$0, CYCLE_CSR
	stl	$0, 0($16)
	ret
	.end	penv_slave_cycle_count

# void penv_slave_float_ops_init(void): start counting this CPE's floating-point operations
# (rcsr 8, isa/table.py Instr.flops): later counts are taken from here.
	.weak	penv_slave_float_ops_init
	.ent	penv_slave_float_ops_init
penv_slave_float_ops_init:
	rcsr	$1, FLOAT_OPS_CSR
	ldi	$2, _MYID
	stl	$1, FLOAT_OPS_BASE($2)
	ret
	.end	penv_slave_float_ops_init

# void penv_slave_float_ops_count(unsigned long *count): *count = the floating-point operations
# this CPE issued since penv_slave_float_ops_init (since its start without one); also in $0.
	.weak	penv_slave_float_ops_count
	.ent	penv_slave_float_ops_count
penv_slave_float_ops_count:
	rcsr	$0, FLOAT_OPS_CSR
	ldi	$1, _MYID
	ldl	$2, FLOAT_OPS_BASE($1)
	subl	$0, $2, $0
	stl	$0, 0($16)
	ret
	.end	penv_slave_float_ops_count

# The counter slots: void penv_slaveN_<event>_init(void) starts counting <event> in slot N,
# void penv_slaveN_<event>_count(unsigned long *n) sets *n (and $0) to the count since that
# init (since the start without one). Events: cycle (the CG's cycles, rcsr 4), float_ops (this
# CPE's floating-point operations, rcsr 8), get and put (the DMA requests this CPE issued
# through athread_get/athread_put/athread_dma_*; a `dma` instruction of its own is not seen).
# READ_<event> reg, tls: the event's current count into reg ($1-$3 free, tls = _MYID's block).
	.macro	READ_cycle reg, tls
	rcsr	\reg, CYCLE_CSR
	.endm
	.macro	READ_float_ops reg, tls
	rcsr	\reg, FLOAT_OPS_CSR
	.endm
	.macro	READ_get reg, tls
	ldl	\reg, DMA_COUNTS + 8 * DMA_GET(\tls)
	.endm
	.macro	READ_put reg, tls
	ldl	\reg, DMA_COUNTS + 8 * DMA_PUT(\tls)
	.endm

	.macro	WEAK_FUNCTION name
	.weak	\name
	.ent	\name
\name:
	.endm

	.macro	PENV_COUNTER slot, event, index
	BASE = PENV_BASES + 8 * (\slot * PENV_EVENTS + \index)
	WEAK_FUNCTION penv_slave\slot\()_\event\()_init
	ldi	$2, _MYID
	READ_\event $1, $2
	stl	$1, BASE($2)
	ret
	.end	penv_slave\slot\()_\event\()_init
	WEAK_FUNCTION penv_slave\slot\()_\event\()_count
	ldi	$2, _MYID
	READ_\event $0, $2
	ldl	$1, BASE($2)
	subl	$0, $1, $0
	stl	$0, 0($16)
	ret
	.end	penv_slave\slot\()_\event\()_count
	.endm

	.irp	slot, 0, 1, 2, 3
	PENV_COUNTER \slot, cycle, 0
	PENV_COUNTER \slot, float_ops, 1
	PENV_COUNTER \slot, get, 2
	PENV_COUNTER \slot, put, 3
	.endr

# The libm functions that are one instruction: double sqrt(double), float sqrtf(float),
# double fabs(double) (a float argument and result are $f16 and $f0: $16 and $0 in swsim).
	.weak	sqrt, sqrtf, fabs
	.ent	sqrt
sqrt:	fsqrtd	$16, $0
	ret
sqrtf:	fsqrts	$16, $0
	ret
fabs:	fcpys	$31, $16, $0
	ret
	.end	sqrt

# int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask,
#                 int stride, int bsize): starts a GET of len bytes from memory src to LDM dest
# in the given mode (PE_MODE 0, BCAST_MODE 1, ROW_MODE 2, BROW_MODE 3, RANK_MODE 4: the
# descriptor's), mask the broadcast mask, bsize bytes per block with stride bytes skipped in
# memory between blocks (bsize 0: contiguous); returns 0 at once. The engine adds 1 to the
# LDM int *reply when the transfer has landed; the caller waits for it.
# COUNT_DMA op: one more request of `op` (DMA_PUT, DMA_GET) for the penv_slaveN_get/put
# counters; leaves $1 = the thread-local block, clobbers $3.
	.macro	COUNT_DMA op
	ldi	$1, _MYID
	ldl	$3, DMA_COUNTS + 8 * \op($1)
	addl	$3, 1, $3
	stl	$3, DMA_COUNTS + 8 * \op($1)
	.endm

	.weak	athread_get
	.ent	athread_get
athread_get:
	COUNT_DMA DMA_GET
	ldw	$1, 0($30)			# stride: the 7th argument, on the stack
	ldw	$2, 8($30)			# bsize
	MAKE_DESC_ARGS $22, DMA_GET, $16, $19, $2, $1, $20, $21, $23
	dma	$22, $17, $18
	clr	$0
	ret
	.end	athread_get

# int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride,
#                 int bsize): as athread_get, a PUT of len bytes from LDM src to memory dest.
	.weak	athread_put
	.ent	athread_put
athread_put:
	COUNT_DMA DMA_PUT
	ldw	$2, 0($30)			# bsize: the 7th argument, on the stack
	MAKE_DESC_ARGS $22, DMA_PUT, $16, $19, $2, $21, $20, $31, $23
	dma	$22, $18, $17
	clr	$0
	ret
	.end	athread_put

# The athread_dma_* calls: PE-mode transfers in memcpy's argument order (destination first),
# LDM <-> memory, `size` bytes, for the _stride forms in blocks of `bsize` bytes with `stride`
# bytes skipped in memory between blocks. The i-forms return at once and the engine adds 1 to
# the LDM int *rply when the transfer has landed; the others wait for it on the runtime's own
# reply word.
#
# DMA_CALL name, op, ldm, mem, size, bsize, stride, rply, wait, mode: a call of `op` (DMA_GET,
# DMA_PUT) with those registers (bsize $31: contiguous); without rply a blocking call. A mode
# other than PE (DMA_BCAST, DMA_BROW: gets) has the mask 0xff: every row of the array
# (BCAST), every column of the caller's row (BROW).
	.macro	DMA_CALL name, op, ldm, mem, size, bsize=$31, stride=$31, rply=$2, wait=1, mode=0
	.weak	\name
	.ent	\name
\name:
	COUNT_DMA \op
	.if	\wait
	ldi	$2, DMA_REPLY($1)
	stw	$31, 0($2)
	.endif
	.if	\mode
	ldi	$24, \mode
	ldi	$25, 0xff
	MAKE_DESC_ARGS $22, \op, $24, \size, \bsize, \stride, \rply, $25, $23
	.else
	MAKE_DESC_ARGS $22, \op, $31, \size, \bsize, \stride, \rply, $31, $23
	.endif
	dma	$22, \mem, \ldm
	.if	\wait
	br	$31, wait_for_one
	.else
	ret
	.endif
	.end	\name
	.endm

# void athread_dma_iget(void *ldm, void *mem, int size, athread_rply_t *rply)
	DMA_CALL athread_dma_iget, DMA_GET, $16, $17, $18, rply=$19, wait=0
# void athread_dma_iput(void *mem, void *ldm, int size, athread_rply_t *rply)
	DMA_CALL athread_dma_iput, DMA_PUT, $17, $16, $18, rply=$19, wait=0
# void athread_dma_iget_stride(void *ldm, void *mem, int size, int bsize, int stride,
#                              athread_rply_t *rply)
	DMA_CALL athread_dma_iget_stride, DMA_GET, $16, $17, $18, $19, $20, $21, 0
# void athread_dma_iput_stride(void *mem, void *ldm, int size, int bsize, int stride,
#                              athread_rply_t *rply)
	DMA_CALL athread_dma_iput_stride, DMA_PUT, $17, $16, $18, $19, $20, $21, 0
# void athread_dma_get(void *ldm, void *mem, int size), athread_dma_put(void *mem, void *ldm,
# int size) and their _stride forms (..., int bsize, int stride): the same, waiting.
	DMA_CALL athread_dma_get, DMA_GET, $16, $17, $18
	DMA_CALL athread_dma_put, DMA_PUT, $17, $16, $18
	DMA_CALL athread_dma_get_stride, DMA_GET, $16, $17, $18, $19, $20
	DMA_CALL athread_dma_put_stride, DMA_PUT, $17, $16, $18, $19, $20

# The broadcast forms [choice: the SW26010-Pro athread names, arguments in the order of the PE
# forms]: one CPE's get lands at the same LDM address in every CPE of the array (bcast: BCAST
# mode) or of the caller's row (row_bcast: BROW mode); only the caller's reply word counts it,
# the others learn of it from the caller (athread_syn).
# void athread_dma_[row_]bcast(void *ldm, void *mem, int size),
#      athread_dma_[row_]ibcast(void *ldm, void *mem, int size, athread_rply_t *rply),
#      athread_dma_[row_]bcast_stride(void *ldm, void *mem, int size, int bsize, int stride),
#      athread_dma_[row_]ibcast_stride(ldm, mem, size, bsize, stride, athread_rply_t *rply)
	DMA_CALL athread_dma_bcast, DMA_GET, $16, $17, $18, mode=DMA_BCAST
	DMA_CALL athread_dma_ibcast, DMA_GET, $16, $17, $18, rply=$19, wait=0, mode=DMA_BCAST
	DMA_CALL athread_dma_bcast_stride, DMA_GET, $16, $17, $18, $19, $20, mode=DMA_BCAST
	DMA_CALL athread_dma_ibcast_stride, DMA_GET, $16, $17, $18, $19, $20, $21, 0, DMA_BCAST
	DMA_CALL athread_dma_row_bcast, DMA_GET, $16, $17, $18, mode=DMA_BROW
	DMA_CALL athread_dma_row_ibcast, DMA_GET, $16, $17, $18, rply=$19, wait=0, mode=DMA_BROW
	DMA_CALL athread_dma_row_bcast_stride, DMA_GET, $16, $17, $18, $19, $20, mode=DMA_BROW
	DMA_CALL athread_dma_row_ibcast_stride, DMA_GET, $16, $17, $18, $19, $20, $21, 0, DMA_BROW

# void athread_dma_barrier(void): wait until every DMA this CPE issued before has landed (a
# BARRIER request on the runtime's reply word: it replies after the CPE's earlier requests).
	.weak	athread_dma_barrier
	.ent	athread_dma_barrier
athread_dma_barrier:
	ldi	$1, _MYID
	ldi	$2, DMA_REPLY($1)
	stw	$31, 0($2)
	MAKE_DESC_ARGS $22, DMA_BARRIER, $31, $31, $31, $31, $2, $31, $23
	dma	$22, $31, $31
	br	$31, wait_for_one
	.end	athread_dma_barrier

# void athread_dma_wait_value(athread_rply_t *rply, int value): spin until the reply word
# *rply (an LDM int) equals value.
	.weak	athread_dma_wait_value
	.ent	athread_dma_wait_value
athread_dma_wait_value:
	mov	$16, $2
	addw	$17, 0, $1
	br	$31, 1f
wait_for_one:				# the blocking calls: until their reply word at $2 is 1
	ldi	$1, 1
1:	ldw	$3, 0($2)
	cmpeq	$3, $1, $3
	beq	$3, 1b
	ret
	.end	athread_dma_wait_value

# int printf(const char *format, ...): appends a record to this CPE's console region: the
# format (copied), then per conversion its argument as a quad, except %s, whose string is
# copied. Formatting is the host's (kernels/athread/console.py). Returns 0.
#   $1 TLS base   $2 record   $3 record end   $4 write pointer   $5 truncated flag
#   $22 format scan pointer   $23 argument index   $28 cycle stamp
	.weak	printf, fprintf, puts, putchar, fputs, fputc, putc, fwrite, fflush
	.ent	printf
# int fprintf(FILE *stream, const char *format, ...): printf's record, marked with the stream
# (_slave_stdout or _slave_stderr); another stream returns -1 and prints nothing.
fprintf:
	rcsr	$28, CYCLE_CSR
	ldi	$1, _MYID
	ldi	$2, _slave_stdout
	cmpeq	$16, $2, $3
	ldi	$2, _slave_stderr
	cmpeq	$16, $2, $4			# 1: stderr
	bis	$3, $4, $3
	beq	$3, no_stream
	stl	$4, STREAM($1)
	stl	$18, ARGS + 0($1)		# the values: four in registers, then the stack
	stl	$19, ARGS + 8($1)
	stl	$20, ARGS + 16($1)
	stl	$21, ARGS + 24($1)
	ldl	$2, 0($30)
	stl	$2, ARGS + 32($1)
	addl	$30, 8, $2
	stl	$2, STACK_ARGS($1)
	mov	$17, $16
	br	$31, record
no_stream:
	ldi	$0, -1
	ret

# The C library's other ways to print, as the compiler emits them for printf and fprintf
# calls (printf("x\n") -> puts("x"), fprintf(f, "abc") -> fwrite("abc", 1, 3, f)): each is
# a printf or fprintf with one of the formats above. They return 0.
puts:	mov	$16, $17
	ldi	$16, puts_format
	br	$31, printf
putchar: mov	$16, $17
	ldi	$16, char_format
	br	$31, printf
fputs:	mov	$16, $18
	mov	$17, $16
	ldi	$17, string_format
	br	$31, fprintf
fputc:
putc:	mov	$16, $18
	mov	$17, $16
	ldi	$17, char_format
	br	$31, fprintf
fwrite:	mulw	$17, $18, $18			# (ptr, size, count, stream): "%.*s", size * count, ptr
	mov	$16, $1
	mov	$19, $16
	mov	$1, $19
	ldi	$17, bytes_format
	br	$31, fprintf
# int fflush(FILE *stream): records are complete when written; nothing to do.
fflush:	clr	$0
	ret

# int printf(const char *format, ...)
printf:
	rcsr	$28, CYCLE_CSR
	ldi	$1, _MYID
	stl	$17, ARGS + 0($1)
	stl	$18, ARGS + 8($1)
	stl	$19, ARGS + 16($1)
	stl	$20, ARGS + 24($1)
	stl	$21, ARGS + 32($1)
	stl	$30, STACK_ARGS($1)
	stl	$31, STREAM($1)
record:	ldi	$2, RECORD($1)
	ldi	$3, RECORD_BYTES($2)
	ldi	$4, RECORD_HEADER_BYTES($2)
	mov	$4, $22
	clr	$5
	clr	$23
	subl	$3, 1, $7			# the last byte, kept for a NUL
copy_format:
	ldbu	$6, 0($16)
	cmpult	$4, $7, $8
	bne	$8, 1f
	clr	$6				# no room: the format ends here
	ldi	$5, 1
1:	stb	$6, 0($4)
	addl	$4, 1, $4
	addl	$16, 1, $16
	bne	$6, copy_format
	bne	$5, finish
	addl	$4, 7, $4
	bic	$4, 7, $4
scan:	ldbu	$6, 0($22)			# outside a conversion
	addl	$22, 1, $22
	beq	$6, finish
	cmpeq	$6, '%', $8
	beq	$8, scan
spec:	ldbu	$6, 0($22)			# inside one: flags, width, precision, length
	addl	$22, 1, $22
	beq	$6, finish
	cmpeq	$6, '%', $8			# %%
	bne	$8, scan
	cmpeq	$6, '*', $8			# a width or precision argument
	bne	$8, star
	bis	$6, 0x20, $8
	subl	$8, 'a', $8
	cmpult	$8, 26, $24
	beq	$24, spec			# not a letter: a flag, digit or '.'
	ldi	$24, LENGTH_LETTERS
	srl	$24, $8, $24
	blbs	$24, spec			# a length modifier
	bsr	$25, take_argument		# a conversion letter
	cmpeq	$6, 's', $8
	bne	$8, string
	bsr	$25, store_quad
	br	$31, scan
star:	bsr	$25, take_argument
	bsr	$25, store_quad
	br	$31, spec
string:	subl	$3, 1, $24			# copy the string, NUL included
2:	ldbu	$8, 0($7)
	cmpult	$4, $24, $27
	beq	$27, 3f
	stb	$8, 0($4)
	addl	$4, 1, $4
	addl	$7, 1, $7
	bne	$8, 2b
	addl	$4, 7, $4
	bic	$4, 7, $4
	br	$31, scan
3:	stb	$31, 0($4)			# no room: end the string here
	addl	$4, 1, $4
	ldi	$5, 1
finish:	addl	$4, 7, $4
	bic	$4, 7, $4
	subl	$4, $2, $6			# record bytes, a multiple of 8
	sll	$5, 32, $8
	bis	$8, $6, $8
	ldl	$7, STREAM($1)
	sll	$7, STREAM_SHIFT, $7
	bis	$8, $7, $8
	stl	$8, 0($2)
	stl	$28, 8($2)
	ldl	$7, CGN($1)			# this CPE's region
	cmpult	$7, CONSOLE_CGS, $8
	beq	$8, no_slot
	ldl	$8, MYID($1)
	sll	$7, CONSOLE_CPES_SHIFT, $7
	addl	$7, $8, $7
	sll	$7, CONSOLE_REGION_SHIFT, $7
	ldi	$24, __swsim_console
	addl	$24, $7, $24
	ldl	$7, USED($1)
	addl	$7, $6, $8			# used after this record
	ldi	$22, CONSOLE_REGION_BYTES - CONSOLE_HEADER_BYTES
	cmpule	$8, $22, $27
	beq	$27, drop
	addl	$24, $7, $25
	addl	$25, CONSOLE_HEADER_BYTES, $25
4:	ldl	$22, 0($2)			# copy the record out
	stl	$22, 0($25)
	addl	$2, 8, $2
	addl	$25, 8, $25
	subl	$6, 8, $6
	bne	$6, 4b
	stl	$8, USED($1)
	stl	$8, 0($24)
	br	$31, served
drop:	ldl	$7, DROPPED($1)
	addl	$7, 1, $7
	stl	$7, DROPPED($1)
	stl	$7, 8($24)
no_slot:					# a CG beyond the console: the printf is lost
served:	rcsr	$1, CONSOLE_CSR			# the host serves the call (printed or not):
	mov	$1, $0				# wait for it, return 0
	ret

# $7 = argument $23 (from printf_args, or the caller's stack from the sixth on); $23 += 1.
take_argument:
	cmpult	$23, REGISTER_ARGS, $8
	beq	$8, 5f
	s8addl	$23, $1, $8
	ldl	$7, ARGS($8)
	br	$31, 6f
5:	subl	$23, REGISTER_ARGS, $8
	ldl	$7, STACK_ARGS($1)
	s8addl	$8, $7, $8
	ldl	$7, 0($8)
6:	addl	$23, 1, $23
	ret	$31, ($25), 1

# Append the quad $7 at $4, or mark the record truncated and finish it.
store_quad:
	addl	$4, 8, $8
	cmpule	$8, $3, $27
	beq	$27, 7f
	stl	$7, 0($4)
	mov	$8, $4
	ret	$31, ($25), 1
7:	ldi	$5, 1
	br	$31, finish
	.end	printf
