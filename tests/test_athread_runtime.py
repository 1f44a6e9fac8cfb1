"""The athread CPE runtime (kernels/athread, docs/runtime.md): compiled-style CPE code that reads
_MYID/_ROW/_COL through TLS relocations, calls printf, penv_slave_cycle_count and the athread_*
helpers through the gp, runs unmodified on both engines, from Python and from `swsim run`."""
import ctypes
import struct

import numpy as np
import pytest

import swsim
from swsim.asm import assemble_object, link
from swsim.kernels.athread import console_text, link_with_runtime, read_console
from swsim.kernels.athread.console import format_record
from swsim.vm import Machine
from swsim.vm.config import PUBLISHED

ENGINES = ["c", "python"]
# The CPEs of a DMA test: all 64 on the C core; on the Python reference (10-100x slower per
# simulated cycle, and these kernels spin on their replies) one CPE of each row and column.
DMA_CPES = {"c": range(64), "python": range(0, 64, 9)}

# The prologue and epilogue sw5cc -slave emits: gp from pv, a frame with ra, fp and s0 saved
# above the outgoing-argument area, the gp reload after every call.
PROLOGUE = """
	.set noreorder
	.set volatile
	.set noat
	.arch sw2
	.text
	.align 4
	.globl {name}
	.ent {name}
{name}:
	.frame $15,48,$26,0
	.mask 0x4008200,-48
$LFB{n}:
	ldih $29,0($27)		!gpdisp!{n}
	ldi $29,0($29)		!gpdisp!{n}
$ng..{name}:
	ldi $30,-48($30)
	stl $26,16($30)
	stl $15,24($30)
	stl $9,32($30)
	mov $30,$15
	.prologue 1
"""
EPILOGUE = """
	mov $15,$30
	ldl $26,16($30)
	ldl $15,24($30)
	ldl $9,32($30)
	ldi $30,48($30)
	ret $31,($26),1
	.end {name}
	.section	.note.GNU-stack,"",@progbits
"""


def compiled(name, body, n=1):
    return PROLOGUE.format(name=name, n=n) + body + EPILOGUE.format(name=name)


def call(function, n):
    """A call as sw5cc emits it: the address from the literal pool, the gp reloaded after."""
    return f"""
	ldl $27,{function}($29)		!literal!{n}
	call $26,($27),{function}		!lituse_jsr!{n}
	ldih $29,0($26)		!gpdisp!{n + 1}
	ldi $29,0+4($29)		!gpdisp!{n + 1}
"""


def build(*sources):
    return link_with_runtime([assemble_object(text, f"u{i}.s") for i, text in enumerate(sources)])


# void ids(long *out): out[_MYID*5 ..] = _MYID, _ROW, _COL, _PEN, _CGN (each read as the
# compiler reads a thread-local int: ldih !tprelhi + ldw !tprello)
IDS = compiled("ids", """
	mov $16,$9
	ldih $1,_MYID($31)		!tprelhi
	ldw $1,_MYID($1)		!tprello
	ldi $2,40($31)
	mulw $1,$2,$2
	addl $9,$2,$9
	stl $1,0($9)
""" + "".join(f"""
	ldih $1,{var}($31)		!tprelhi
	ldw $1,{var}($1)		!tprello
	stl $1,{8 * k}($9)
""" for k, var in enumerate(["_ROW", "_COL", "_PEN", "_CGN"], 1)))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cg", [0, 2])
def test_each_cpe_sees_its_own_thread_local_ids(engine, cg):
    machine = Machine()
    out = machine.mem.alloc(64 * 40)
    cpes = [0, 1, 7, 8, 37, 63]
    machine.run(build(IDS), entry="ids", args=[out], cg=cg, cpes=cpes, engine=engine)
    got = machine.mem.get(out, (64, 5), np.int64)
    for cpe in cpes:
        assert got[cpe].tolist() == [cpe, cpe // 8, cpe % 8, cpe, cg]
    assert not got[[c for c in range(64) if c not in cpes]].any()


def test_the_runtime_is_linked_only_when_called():
    plain = "\t.globl kernel\nkernel:\tldi $1, 3\n\tret\n"
    program = build(plain)
    assert "_slave_stdout" not in program.symbols and "__swsim_start" not in program.symbols
    assert program.code.tolist() == swsim.assemble(plain).code.tolist()
    assert "__swsim_start" in build(IDS).symbols


# printf: format in .rodata reached by !gprelhigh/!gprellow, the values in $17-$21 and the
# sixth on the stack; %s of a thread-local string and of a main-memory string.
HELLO = """
	.section	.rodata.str1.1,"aMS",@progbits,1
$LC0:
	.ascii "CPE %2d (%d,%d) %s/%s x=%.3f n=%ld\\n\\000"
$LC1:
	.ascii "main\\000"
	.section	.tdata,"awT",@progbits
	.type	tag, @tls_object
tag:	.ascii "ldm\\000"
""" + compiled("hello", """
	ldih $1,_MYID($31)		!tprelhi
	ldw $17,_MYID($1)		!tprello
	ldih $1,_ROW($31)		!tprelhi
	ldw $18,_ROW($1)		!tprello
	ldih $1,_COL($31)		!tprelhi
	ldw $19,_COL($1)		!tprello
	ldi $20,tag($31)		!tprel
	ldih $21,$LC1($29)		!gprelhigh
	ldi $21,$LC1($21)		!gprellow
	ifmovd $17,$1
	fcvtld $1,$1
	ldih $2,0x3fc0($31)
	sll $2,32,$2
	ifmovd $2,$2
	fmuld $1,$2,$1
	stl $1,0($30)
	ldi $2,-5
	stl $2,8($30)
	ldih $16,$LC0($29)		!gprelhigh
	ldi $16,$LC0($16)		!gprellow
""" + call("printf", 2))


def expected_hello(cpes):
    return "".join(f"CPE {c:2d} ({c // 8},{c % 8}) ldm/main x={c * 0.125:.3f} n=-5\n"
                   for c in cpes)


@pytest.mark.parametrize("engine", ENGINES)
def test_printf_from_several_cpes_in_cycle_order(engine):
    machine = Machine()
    program = build(HELLO)
    cpes = [3, 9, 12, 60]
    machine.run(program, entry="hello", cpes=cpes, engine=engine)
    records, dropped = read_console(machine, program)
    assert not dropped and [r.cpe for r in records] == cpes   # same start: cycle, then id
    assert [r.cycle for r in records] == sorted(r.cycle for r in records)
    assert console_text(machine, program) == expected_hello(cpes)


def test_swsim_run_prints_what_the_cpes_printed(tmp_path, capsys):
    from swsim.cli import main
    source = tmp_path / "slave.s"
    source.write_text(HELLO)
    assert main(["run", str(source), "--entry", "hello", "--cpes", "3"]) == 0
    out = capsys.readouterr().out.splitlines(keepends=True)
    assert "".join(out[:3]) == expected_hello(range(3))
    assert len(out) == 4 and " cycles (" in out[3]
    assert main(["run", str(source), "--entry", "hello", "--cpes", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == expected_hello(range(2)) and captured.out.startswith("{")


LOOP = """
	.section	.rodata.str1.1,"aMS",@progbits,1
$LC0:
	.ascii "line %d\\n\\000"
$LC1:
	.ascii "%s\\n\\000"
""" + compiled("chatter", """
	mov $16,$9
1:	ldih $16,$LC0($29)		!gprelhigh
	ldi $16,$LC0($16)		!gprellow
	mov $9,$17
""" + call("printf", 2) + """
	subl $9,1,$9
	bne $9,1b
""") + compiled("long_string", """
	mov $16,$9
	ldih $16,$LC1($29)		!gprelhigh
	ldi $16,$LC1($16)		!gprellow
	mov $9,$17
""" + call("printf", 3) + """
""", n=5)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_full_console_region_drops_printfs_and_says_so(engine):
    machine = Machine()
    program = build(LOOP)
    machine.run(program, entry="chatter", args=[100], cpes=[5], engine=engine)
    text = console_text(machine, program).splitlines()
    kept = (1024 - 16) // 40     # a record: 16 header + "line %d\n\0" padded to 16 + 1 quad
    assert text[:kept] == [f"line {n}" for n in range(100, 100 - kept, -1)]
    assert text[kept:] == [f"[swsim: CG 0 CPE 5: {100 - kept} printf call(s) dropped, its "
                           "1024-byte console region is full]"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_record_longer_than_the_limit_is_cut_with_a_note(engine):
    machine = Machine()
    program = build(LOOP)
    text = b"x" * 300 + b"\0"
    machine.run(program, entry="long_string", args=[machine.mem.put(np.frombuffer(text,
                                                                                  np.uint8))],
                cpes=[0], engine=engine)
    (record,), _ = read_console(machine, program)
    # 256-byte record: 16 header, "%s\n\0" padded to 8, the string cut to 231 bytes + NUL
    assert record.truncated and record.text == "x" * 231 + "\n"
    assert console_text(machine, program).endswith(
        "[swsim: CG 0 CPE 0: printf record cut at 256 bytes]\n")


# ---- penv and athread helpers ------------------------------------------------------------------
PENV = compiled("timed", """
	mov $16,$9
	rtc $1
	stl $1,0($9)
	ldi $16,8($9)
""" + call("penv_slave_cycle_count", 2) + """
	stl $0,16($9)
	ldi $16,24($9)
""" + call("penv_slave_cycle_count", 4))


@pytest.mark.parametrize("engine", ENGINES)
def test_penv_cycle_count_reads_the_cycle_counter(engine):
    machine = Machine()
    out = machine.mem.alloc(32)
    result = machine.run(build(PENV), entry="timed", args=[out], cpes=[0], engine=engine)
    before, first, returned, second = machine.mem.get(out, (4,), np.int64).tolist()
    assert returned == first and before < first < second < result.kernel_cycles
    assert second - first > 101       # the first count's store is a global access (gst)


# void flops(long *out): out[4 id ..] = the count before init, after init and 2 vmads and a
# fadds (17), that count as returned, and a count taken again (still 17: no float op between).
FLOPS = compiled("flops", """
	rcid $1
	s4addl $1,0,$1
	s8addl $1,$16,$9
	vmad $1,$2,$3,$4
	mov $9,$16
""" + call("penv_slave_float_ops_count", 2) + call("penv_slave_float_ops_init", 4) + """
	vmad $1,$2,$3,$4
	fadds $1,$2,$3
	vmad $1,$2,$3,$5
	ldi $16,8($9)
""" + call("penv_slave_float_ops_count", 6) + """
	stl $0,16($9)
	ldi $16,24($9)
""" + call("penv_slave_float_ops_count", 8))


@pytest.mark.parametrize("engine", ENGINES)
def test_penv_float_ops_count_from_init(engine):
    machine = Machine()
    out = machine.mem.alloc(64 * 32)
    machine.run(build(FLOPS), entry="flops", args=[out], engine=engine)
    assert machine.mem.get(out, (64, 4), np.int64).tolist() == [[8, 17, 17, 17]] * 64


HELPERS = compiled("helpers", """
	mov $16,$9
	ldi $16,-1($31)
""" + call("athread_get_id", 2) + """
	rcid $1
	s8addl $1,$9,$9
	stl $0,0($9)
	ldi $16,-1($31)
""" + call("athread_get_core", 4) + """
	stl $0,512($9)
	ldi $16,42($31)
""" + call("athread_get_id", 6) + """
	stl $0,1024($9)
	ldi $16,2($31)
	ldi $17,-1($31)
	ldih $17,0($17)
	zapnot $17,3,$17
""" + call("athread_syn", 8) + """
	stl $0,1536($9)
	ldi $16,7($31)
""" + call("athread_syn", 10) + """
	stl $0,2048($9)
""")


@pytest.mark.parametrize("engine", ENGINES)
def test_athread_helpers_and_a_whole_array_barrier(engine):
    machine = Machine()
    out = machine.mem.alloc(5 * 512)
    result = machine.run(build(HELPERS), entry="helpers", args=[out], engine=engine)
    ids, cores, other, syn, bad = machine.mem.get(out, (5, 64), np.int64)
    assert ids.tolist() == list(range(64)) and cores.tolist() == list(range(64))
    assert set(other.tolist()) == {42} and set(syn.tolist()) == {0}
    assert set(bad.tolist()) == {-1}                 # an unknown scope
    assert result.counters["barriers"] == 16         # 8 row + 8 column barriers


ROW_SYNC = compiled("row_sync", """
	ldi $16,0($31)
	ldi $17,0xff($31)
""" + call("athread_syn", 2))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_row_barrier_needs_the_whole_row(engine):
    assert Machine().run(build(ROW_SYNC), entry="row_sync", cpes=range(8),
                         engine=engine).counters["barriers"] == 1
    with pytest.raises(swsim.VMFault, match="not spawned"):
        Machine().run(build(ROW_SYNC), entry="row_sync", cpes=range(4), engine=engine)


# ---- the host's formatting is C's -------------------------------------------------------------
def record(fmt, *args):
    body = fmt + b"\0" + b"\0" * (-(len(fmt) + 1) % 8)
    for arg in args:
        if isinstance(arg, bytes):
            body += arg + b"\0" + b"\0" * (-(len(arg) + 1) % 8)
        else:
            body += struct.pack("<d", arg) if isinstance(arg, float) else \
                struct.pack("<Q", arg & (2**64 - 1))
    return body


def c_type(arg):
    if isinstance(arg, bytes):
        return arg
    return ctypes.c_double(arg) if isinstance(arg, float) else ctypes.c_longlong(arg)


@pytest.mark.parametrize("fmt, args", [
    (b"%d %i %u %x %X %o", (-7, 7, -7, -7, 255, 8)),
    (b"%ld %lu %lx %lld %hd %hhu", (-7, -7, -7, 1 << 40, 70000, 300)),
    (b"[%5d|%-5d|%05d|%+d|% d|%.3d]", (42, 42, 42, 42, 42, 42)),
    (b"%c%c %s|%10s|%-6s|%.2s", (72, 105, b"str", b"right", b"left", b"cut")),
    (b"%f %.2f %10.4f %e %.3E %g %G %g", (3.14159, -2.5, 1 / 3, 12345.678, 1e-10, 1e-5,
                                           1e20, 100000.0)),
    (b"%f %e %g", (float("inf"), float("-inf"), float("nan"))),
    (b"%*d|%-*d|%.*f", (6, 12, 4, 3, 2, 2.71828)),
    (b"%p %#x %#o %% 100%%", (0x4000_0040, 255, 8)),
    (b"no conversions\n", ()),
])
def test_records_format_as_c_printf_does(fmt, args):
    buffer = ctypes.create_string_buffer(512)
    libc = ctypes.CDLL(None)
    libc.snprintf(buffer, 512, fmt, *[c_type(a) for a in args])
    assert format_record(record(fmt, *args)) == buffer.value.decode()


def test_a_record_cut_short_formats_up_to_the_first_missing_argument():
    assert format_record(record(b"a=%d b=%d c", 1)) == "a=1 b="


@pytest.mark.parametrize("engine", ENGINES)
def test_the_example_runs_through_kernels_program(engine):
    from swsim.kernels import program
    hello = program("examples/hello_athread.s")
    machine = Machine()
    out = machine.mem.alloc(8 * 64)
    machine.run(hello, entry="hello", args=[out], cpes=range(16), engine=engine)
    assert machine.mem.get(out, (16,), np.int64).tolist() == \
        [row * 10 + col for row in range(2) for col in range(8)]
    records, _ = read_console(machine, hello)
    stamp = records[0].text.split()[-1]    # every CPE reads the counter in the same cycle
    assert [r.text for r in records] == [
        f"hello from CPE {c} (row {c // 8}, col {c % 8}), cycle {stamp}\n" for c in range(16)]
    assert 0 < int(stamp) < records[0].cycle    # printf began after the count


def test_a_core_group_without_a_console_slot_loses_its_printfs_and_nothing_else():
    machine = Machine(num_cgs=9)
    program = build(HELLO)
    # slot 8 would lie past the end of the program's data: writing it would fault
    machine.run(program, entry="hello", cpes=[0, 1], cg=8, engine="c")
    assert console_text(machine, program) == ""


def test_a_programs_own_definition_beats_the_runtimes():
    own = "\t.globl printf\nprintf:\tldi $0, 77\n\tret\n"
    program = build(compiled("f", """
	ldih $1,_MYID($31)		!tprelhi
	ldw $9,_MYID($1)		!tprello
""" + call("printf", 2) + """
	addl $0,$9,$0
"""), own)
    machine = Machine()
    machine.run(program, entry="f", cpes=[4], engine="python")
    assert machine.last_job.regs[4, 0, 0] == 77 + 4 and console_text(machine, program) == ""


def test_each_core_group_prints_into_its_own_slot():
    machine = Machine()
    program = build(HELLO)
    machine.run(program, entry="hello", cpes=[6], cg=3, engine="c")
    records, _ = read_console(machine, program)
    assert [(r.cg, r.cpe) for r in records] == [(3, 6)]
    assert console_text(machine, program, [3]) == expected_hello([6])
    assert console_text(machine, program, [0]) == ""


def test_swsim_run_prints_the_console_of_a_run_that_faults(tmp_path, capsys):
    from swsim.cli import main
    source = tmp_path / "slave.s"
    source.write_text(HELLO.replace("\tret $31,($26),1", "\tldl $1,1($31)\n\tret $31,($26),1"))
    assert main(["run", str(source), "--entry", "hello", "--cpes", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.out == expected_hello([0]) and "CPE 0" in captured.err


# ---- the DMA wrappers ---------------------------------------------------------------------------
# Thread-local buffer and reply word in LDM, as `__thread_local long buf[16]; __thread_local
# volatile int reply;` compile; the seventh and eighth arguments go to 0($sp) and 8($sp).
DMA_DATA = """
	.section	.tbss,"awT",@nobits
	.align 5
	.type	buf, @tls_object
buf:	.skip 128
	.type	reply, @tls_object
reply:	.skip 4
"""


def dma_call(function, mode, src, dest, size, extra, n):
    """reply = 0; function(mode, src, dest, size, &reply, *extra); while (reply != 1);
    `extra`: the arguments after reply, each a register or a literal."""
    setup = "".join(f"\tldi ${21 + k},{value}($31)\n" if k == 0 else
                    f"\tldi $1,{value}($31)\n\tstl $1,{8 * (k - 1)}($30)\n"
                    for k, value in enumerate(extra))
    return f"""
	ldih $1,reply($31)		!tprelhi
	stw $31,reply($1)		!tprello
	ldi $16,{mode}($31)
	{src}
	{dest}
	ldi $19,{size}($31)
	ldi $20,reply($31)		!tprel
{setup}""" + call(function, n) + f"""
$Lwait{n}:
	ldih $1,reply($31)		!tprelhi
	ldw $1,reply($1)		!tprello
	cmpeq $1,1,$1
	beq $1,$Lwait{n}
"""


# void roundtrip(long *a, long *b): each CPE gets its 8 longs a[8*id ..], adds id + 1 to each
# in LDM and puts them to b[8*id ..].
ROUNDTRIP = DMA_DATA + compiled("roundtrip", """
	ldih $1,_MYID($31)		!tprelhi
	ldw $9,_MYID($1)		!tprello
	sll $9,6,$1
	addl $17,$1,$2
	stl $2,40($30)
	addl $16,$1,$17
""" + dma_call("athread_get", 0, "", "ldi $18,buf($31)\t\t!tprel", 64, [0, 0, 0], 2) + """
	ldi $2,buf($31)		!tprel
	ldi $3,8($31)
	addl $9,1,$4
1:	ldl $1,0($2)
	addl $1,$4,$1
	stl $1,0($2)
	ldi $2,8($2)
	subl $3,1,$3
	bne $3,1b
""" + dma_call("athread_put", 0, "ldi $17,buf($31)\t\t!tprel", "ldl $18,40($30)", 64, [0, 0], 4))


@pytest.mark.parametrize("engine", ENGINES)
def test_athread_get_then_put_round_trip_on_every_cpe(engine):
    machine = Machine()
    a = np.arange(512, dtype=np.int64) * 3 - 700
    src, dst = machine.mem.put(a), machine.mem.alloc(512 * 8)
    cpes = DMA_CPES[engine]
    result = machine.run(build(ROUNDTRIP), entry="roundtrip", args=[src, dst], cpes=cpes,
                         engine=engine)
    expected = (a + np.repeat(np.arange(64) + 1, 8)).reshape(64, 8)
    got = machine.mem.get(dst, (64, 8), np.int64)
    assert (got[cpes] == expected[cpes]).all() and got.any(axis=1).sum() == len(cpes)
    assert result.counters["dma_requests"] == 2 * len(cpes)


# void columns(long *a, long *out): a is 8 rows of 128 longs; CPE id gets a[r][2id], a[r][2id+1]
# of every row r (bsize 16, stride 1008: a strided get) and puts those 16 longs to out[16 id ..].
COLUMNS = DMA_DATA + compiled("columns", """
	ldih $1,_MYID($31)		!tprelhi
	ldw $9,_MYID($1)		!tprello
	sll $9,7,$1
	addl $17,$1,$2
	stl $2,40($30)
	sll $9,4,$1
	addl $16,$1,$17
""" + dma_call("athread_get", 0, "", "ldi $18,buf($31)\t\t!tprel", 128, [0, 1008, 16], 2)
  + dma_call("athread_put", 0, "ldi $17,buf($31)\t\t!tprel", "ldl $18,40($30)", 128, [0, 0], 4))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_strided_athread_get_takes_a_block_from_every_row(engine):
    machine = Machine()
    a = np.arange(8 * 128, dtype=np.int64).reshape(8, 128) * 7 + 1
    src, out = machine.mem.put(a), machine.mem.alloc(64 * 16 * 8)
    cpes = DMA_CPES[engine]
    machine.run(build(COLUMNS), entry="columns", args=[src, out], cpes=cpes, engine=engine)
    got = machine.mem.get(out, (64, 16), np.int64)
    for cpe in cpes:
        assert got[cpe].tolist() == a[:, 2 * cpe:2 * cpe + 2].ravel().tolist(), cpe


# void bcast(long *a, long *out): CPE 0 broadcasts a[0..8] into buf of rows 0, 2 and 7 (mask
# (char)0x85, negative as a signed char), waits, then all 64 CPEs meet at an array barrier and
# put their buf to out[8 id ..].
def from_cpe_0(name, broadcast, n):
    """void name(long *a, long *out): CPE 0 runs `broadcast` (a in $17; its calls numbered
    below n), then all 64 CPEs meet at an array barrier and put their buf to out[8 id ..]."""
    return DMA_DATA + compiled(name, """
	stl $17,40($30)
	mov $16,$17
	rcid $9
	bne $9,$Lsync
""" + broadcast + """
$Lsync:
	ldi $16,2($31)
	ldi $17,-1($31)
	zapnot $17,3,$17
""" + call("athread_syn", n) + """
	ldl $18,40($30)
	sll $9,6,$1
	addl $18,$1,$18
""" + dma_call("athread_put", 0, "ldi $17,buf($31)\t\t!tprel", "", 64, [0, 0], n + 2))


BCAST = from_cpe_0("bcast", dma_call("athread_get", 1, "", "ldi $18,buf($31)\t\t!tprel", 64,
                                     [-123, 0, 0], 2), 4)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bcast_athread_get_fills_the_rows_in_the_mask(engine):
    machine = Machine()
    a = np.arange(8, dtype=np.int64) - 3
    src, out = machine.mem.put(a), machine.mem.alloc(64 * 64)
    result = machine.run(build(BCAST), entry="bcast", args=[src, out], engine=engine)
    got = machine.mem.get(out, (8, 8, 8), np.int64)
    for row in range(8):
        assert (got[row] == (a if row in (0, 2, 7) else 0)).all(), row
    assert result.counters["dma_requests"] == 65


# A second thread-local reply word, `__thread_local volatile int r2;`.
SECOND_REPLY = """
	.align 2
	.type	r2, @tls_object
r2:	.skip 4
"""


def clear(word):
    """word = 0; for a thread-local reply word."""
    return f"""
	ldih $1,{word}($31)		!tprelhi
	stw $31,{word}($1)		!tprello
"""


def wait_for_one(word, n):
    """athread_dma_wait_value(&word, 1);"""
    return f"""
	ldi $16,{word}($31)		!tprel
	ldi $17,1($31)
""" + call("athread_dma_wait_value", n)


# void idma(long *a, long *b): CPE id: athread_dma_iget of a[8 id ..] into buf (reply r1),
# athread_dma_wait_value(&r1, 1), adds id + 1 to each long, athread_dma_iput_stride of the 64
# bytes to b + 128 id in 16-byte blocks 16 bytes apart (reply r2), athread_dma_barrier, then
# stores r2 (1 once the barrier returned) to b[16 id + 15].
IDMA = DMA_DATA + SECOND_REPLY + compiled("idma", """
	ldih $1,_MYID($31)		!tprelhi
	ldw $9,_MYID($1)		!tprello
	stl $17,40($30)
""" + clear("reply") + clear("r2") + """
	sll $9,6,$1
	addl $16,$1,$17
	ldi $16,buf($31)		!tprel
	ldi $18,64($31)
	ldi $19,reply($31)		!tprel
""" + call("athread_dma_iget", 2) + wait_for_one("reply", 4) + """
	ldi $2,buf($31)		!tprel
	ldi $3,8($31)
	addl $9,1,$4
1:	ldl $1,0($2)
	addl $1,$4,$1
	stl $1,0($2)
	ldi $2,8($2)
	subl $3,1,$3
	bne $3,1b
	ldl $16,40($30)
	sll $9,7,$1
	addl $16,$1,$16
	ldi $17,buf($31)		!tprel
	ldi $18,64($31)
	ldi $19,16($31)
	ldi $20,16($31)
	ldi $21,r2($31)		!tprel
""" + call("athread_dma_iput_stride", 6) + call("athread_dma_barrier", 8) + """
	ldih $1,r2($31)		!tprelhi
	ldw $2,r2($1)		!tprello
	ldl $16,40($30)
	sll $9,7,$1
	addl $16,$1,$16
	stl $2,120($16)
""")


@pytest.mark.parametrize("engine", ENGINES)
def test_athread_dma_iget_wait_iput_stride_and_barrier(engine):
    machine = Machine()
    a = np.arange(512, dtype=np.int64) * 5 - 900
    src, dst = machine.mem.put(a), machine.mem.alloc(64 * 128)
    cpes = DMA_CPES[engine]
    result = machine.run(build(IDMA), entry="idma", args=[src, dst], cpes=cpes, engine=engine)
    got = machine.mem.get(dst, (64, 8, 2), np.int64)[cpes]
    expected = (a + np.repeat(np.arange(64) + 1, 8)).reshape(64, 4, 2)[cpes]
    assert (got[:, ::2] == expected).all()               # the strided put's blocks
    assert (got[:, 1::2, :].reshape(len(cpes), -1)[:, :-1] == 0).all()   # gaps stay untouched
    assert got[:, 7, 1].tolist() == [1] * len(cpes)   # r2 had landed when the barrier returned
    assert result.counters["dma_requests"] == 3 * len(cpes)   # get, put and the barrier


# void columns(long *a, long *out) again, with the blocking calls: athread_dma_get_stride of
# a[r][2id], a[r][2id+1] of every row (bsize 16, stride 1008), athread_dma_put of the 16 longs.
BLOCKING = DMA_DATA + compiled("columns", """
	ldih $1,_MYID($31)		!tprelhi
	ldw $9,_MYID($1)		!tprello
	stl $17,40($30)
	sll $9,4,$1
	addl $16,$1,$17
	ldi $16,buf($31)		!tprel
	ldi $18,128($31)
	ldi $19,16($31)
	ldi $20,1008($31)
""" + call("athread_dma_get_stride", 2) + """
	ldl $16,40($30)
	sll $9,7,$1
	addl $16,$1,$16
	ldi $17,buf($31)		!tprel
	ldi $18,128($31)
""" + call("athread_dma_put", 4))


@pytest.mark.parametrize("engine", ENGINES)
def test_blocking_athread_dma_calls_wait_for_their_transfer(engine):
    machine = Machine()
    a = np.arange(8 * 128, dtype=np.int64).reshape(8, 128) * 7 + 1
    src, out = machine.mem.put(a), machine.mem.alloc(64 * 16 * 8)
    cpes = DMA_CPES[engine]
    machine.run(build(BLOCKING), entry="columns", args=[src, out], cpes=cpes, engine=engine)
    got = machine.mem.get(out, (64, 16), np.int64)
    for cpe in cpes:
        assert got[cpe].tolist() == a[:, 2 * cpe:2 * cpe + 2].ravel().tolist(), cpe


# void others(long *a, long *b, long *c, long *d): CPE id: athread_dma_get of a[8 id ..] (64
# bytes), athread_dma_put_stride of them to b + 128 id in 32-byte blocks 32 bytes apart; then
# athread_dma_iget_stride of c[r][2id], c[r][2id+1] of every row (bsize 16, stride 1008, reply
# r2) and athread_dma_iput of the 128 bytes to d + 128 id (reply), each waited for with
# athread_dma_wait_value.
OTHERS = DMA_DATA + SECOND_REPLY + compiled("others", """
	ldih $1,_MYID($31)		!tprelhi
	ldw $9,_MYID($1)		!tprello
	stl $17,40($30)
	stl $18,0($30)
	stl $19,8($30)
	sll $9,6,$1
	addl $16,$1,$17
	ldi $16,buf($31)		!tprel
	ldi $18,64($31)
""" + call("athread_dma_get", 2) + """
	ldl $16,40($30)
	sll $9,7,$1
	addl $16,$1,$16
	ldi $17,buf($31)		!tprel
	ldi $18,64($31)
	ldi $19,32($31)
	ldi $20,32($31)
""" + call("athread_dma_put_stride", 4) + clear("r2") + """
	ldl $17,0($30)
	sll $9,4,$1
	addl $17,$1,$17
	ldi $16,buf($31)		!tprel
	ldi $18,128($31)
	ldi $19,16($31)
	ldi $20,1008($31)
	ldi $21,r2($31)		!tprel
""" + call("athread_dma_iget_stride", 6) + wait_for_one("r2", 8) + clear("reply") + """
	ldl $16,8($30)
	sll $9,7,$1
	addl $16,$1,$16
	ldi $17,buf($31)		!tprel
	ldi $18,128($31)
	ldi $19,reply($31)		!tprel
""" + call("athread_dma_iput", 10) + wait_for_one("reply", 12))


@pytest.mark.parametrize("engine", ENGINES)
def test_the_other_athread_dma_forms(engine):
    machine = Machine()
    a = np.arange(512, dtype=np.int64) * 3 + 5
    c = np.arange(8 * 128, dtype=np.int64).reshape(8, 128) * 7 + 1
    args = [machine.mem.put(a), machine.mem.alloc(64 * 128), machine.mem.put(c),
            machine.mem.alloc(64 * 128)]
    cpes = DMA_CPES[engine]
    machine.run(build(OTHERS), entry="others", args=args, cpes=cpes, engine=engine)
    b = machine.mem.get(args[1], (64, 4, 4), np.int64)[cpes]
    assert (b[:, ::2].reshape(-1, 8) == a.reshape(64, 8)[cpes]).all() and not b[:, 1::2].any()
    d = machine.mem.get(args[3], (64, 16), np.int64)
    for cpe in cpes:
        assert d[cpe].tolist() == c[:, 2 * cpe:2 * cpe + 2].ravel().tolist(), cpe


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bad_mode_faults_at_the_wrappers_dma_with_the_reason(engine):
    program = build(ROUNDTRIP.replace("ldi $16,0($31)", "ldi $16,5($31)", 1))
    machine = Machine()
    with pytest.raises(swsim.VMFault, match="mode") as fault:
        machine.run(program, entry="roundtrip", args=[machine.mem.alloc(4096)] * 2, cpes=[0],
                    engine=engine)
    assert "dma" in str(fault.value)


# CPE 0 calls `function` (an athread_dma_*bcast* form) on buf, a and the registers `arguments`
# set, waiting on `reply` for the i-forms; then every CPE puts its buf (from_cpe_0).
def bcast_form(function, arguments, wait):
    return from_cpe_0("bc", clear("reply") + """
	ldi $16,buf($31)		!tprel
	ldi $18,64($31)
""" + arguments + call(function, 2) + (wait_for_one("reply", 4) if wait else ""), 6)


REPLY_IN = "\tldi ${},reply($31)\t\t!tprel\n"
STRIDE = "\tldi $19,16($31)\n\tldi $20,16($31)\n"     # blocks of 16 bytes, 16 skipped


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("function, arguments, wait, rows, strided", [
    ("athread_dma_bcast", "", False, range(8), False),
    ("athread_dma_ibcast", REPLY_IN.format(19), True, range(8), False),
    ("athread_dma_bcast_stride", STRIDE, False, range(8), True),
    ("athread_dma_ibcast_stride", STRIDE + REPLY_IN.format(21), True, range(8), True),
    ("athread_dma_row_bcast", "", False, [0], False),
    ("athread_dma_row_ibcast", REPLY_IN.format(19), True, [0], False),
    ("athread_dma_row_bcast_stride", STRIDE, False, [0], True),
    ("athread_dma_row_ibcast_stride", STRIDE + REPLY_IN.format(21), True, [0], True),
])
def test_the_broadcast_athread_dma_forms_reach_the_array_or_the_row(engine, function, arguments,
                                                                     wait, rows, strided):
    machine = Machine()
    a = np.arange(16, dtype=np.int64) * 5 + 3
    src, out = machine.mem.put(a), machine.mem.alloc(64 * 64)
    result = machine.run(build(bcast_form(function, arguments, wait)), entry="bc",
                         args=[src, out], engine=engine)
    sent = a.reshape(4, 4)[:, :2].ravel() if strided else a[:8]
    got = machine.mem.get(out, (8, 8, 8), np.int64)
    for row in range(8):
        assert (got[row] == (sent if row in rows else 0)).all(), row
    assert result.counters["dma_requests"] == 65     # CPE 0's broadcast, every CPE's put


# ---- the host console's service time (console_call_cycles) ---------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_each_console_call_waits_console_call_cycles_for_the_host(engine):
    program = build(LOOP)
    cycles = {}
    for wait in (1, 1001, 5001):
        machine = Machine(console_call_cycles=wait)
        cycles[wait] = machine.run(program, entry="chatter", args=[3], cpes=[5],
                                   engine=engine).kernel_cycles
        assert console_text(machine, program) == "line 3\nline 2\nline 1\n"
    # once the wait outlasts the call's outstanding main-memory stores, every cycle more is one
    # more per call; a short wait overlaps with them (the gst latency, 101 cycles)
    assert cycles[5001] - cycles[1001] == 3 * 4000
    assert 3 * 1000 - 3 * Machine().config.gst_latency <= cycles[1001] - cycles[1] <= 3 * 1000


@pytest.mark.parametrize("engine", ENGINES)
def test_a_printf_costs_what_it_costs_on_hardware_and_a_dropped_one_too(engine):
    program = build(LOOP)
    machine = Machine()
    runs = [machine.run(program, entry="chatter", args=[n], cpes=[0], engine=engine).kernel_cycles
            for n in (1, 2, 60)]
    printf = runs[1] - runs[0]
    assert abs(printf / PUBLISHED["cpe_printf"].value - 1) < 0.15, printf
    # from the 26th on the region is full: the calls are dropped, and still wait for the host
    assert (runs[2] - runs[1]) / 58 > machine.config.console_call_cycles


# [choice] the host serves the CPEs' calls side by side (the sources time one printf only)
def test_printfs_of_several_cpes_wait_side_by_side():
    program = build(HELLO)
    machine = Machine()
    one = machine.run(program, entry="hello", cpes=[0]).kernel_cycles
    many = machine.run(program, entry="hello", cpes=range(64)).kernel_cycles
    # their loads of the format share the CG's memory interface; the waits overlap
    assert one < many < one + machine.config.console_call_cycles // 4
