"""Compiler-style CPE code (issue 28): the files in tests/data/compiled are written as sw5cc
-slave emits C (gp set-up and reloads, !literal/!lituse_jsr calls through $27, !gprel and
!tprel addressing, .tdata/.tbss, .rodata.cst8, !samegp calls, .ent/.frame/.mask/.prologue,
.type/.size, .ident, .note.GNU-stack). Each assembles to an object, survives the object .swo
format, links with the athread runtime and runs with a checked result on both engines."""
from pathlib import Path

import numpy as np
import pytest

import swsim
from swsim.asm import AsmError, assemble_objects, undefined_symbols
from swsim.asm.objfile import objects_bytes, objects_from_bytes
from swsim.cli import main
from swsim.kernels.athread import console_text
from vm_helpers import freg, reg

CORPUS = Path(__file__).resolve().parent / "data" / "compiled"


def vadd(machine):
    x, y = np.arange(128.0), np.arange(128.0) * 10 - 3
    z = machine.mem.put(np.zeros(128))
    return [machine.mem.put(x), machine.mem.put(y), z], 4, \
        lambda: np.array_equal(machine.mem.get(z, (128,), np.float64), x + y)


def counters(machine):
    data = np.arange(16.0) + 1
    at, out = machine.mem.put(data.copy()), machine.mem.put(np.zeros(16, np.uint64))

    def check():
        rows = data.reshape(4, 4)
        counts = machine.mem.get(out, (4, 4), np.uint64)
        return (np.array_equal(machine.mem.get(at, (16,), np.float64)[::4],
                               rows[:, 0] * rows[:, 1] + rows[:, 2])
                # one get, one put, one fmad (2 operations) since the inits; cycles since one
                and counts[:, :3].tolist() == [[1, 1, 2]] * 4
                and all(0 < c < machine.last_result.kernel_cycles for c in counts[:, 3]))
    return [at, out], 4, check


def gather(machine):
    matrix = np.arange(128.0)
    out = machine.mem.put(np.zeros(128))
    expected = np.stack([matrix.reshape(8, 16)[:, 2 * i:2 * i + 2].ravel() for i in range(8)])
    return [machine.mem.put(matrix), out], 8, \
        lambda: np.array_equal(machine.mem.get(out, (8, 16), np.float64), expected)


def hypot(machine):
    values = np.array([3.0, -4.0, 5.0, 12.0, -8.0, -15.0, 0.0, -0.5])
    at = machine.mem.put(values.copy())
    pairs = values.reshape(4, 2)
    expected = np.stack([3.0 * np.hypot(pairs[:, 0], pairs[:, 1]) + 0.25,
                         np.abs(pairs[:, 1])], axis=1).ravel()
    return [at], 4, lambda: np.array_equal(machine.mem.get(at, (8,), np.float64), expected)


CONSOLE_STDOUT = ("CPE 0/7 row 0 col 0: ok 0.00\nCPE 1/7 row 0 col 1: ok 0.50\n"
                  "--\n--\nbye\nbye\n##!\n!\n")
CONSOLE_STDERR = "CPE 0: warning -7\nCPE 1: warning -7\n"


def console(machine):
    def check():
        program = machine.last_program
        return (console_text(machine, program, [0], ("stdout",)) == CONSOLE_STDOUT and
                console_text(machine, program, [0], ("stderr",)) == CONSOLE_STDERR)
    return [7], 2, check


def shared(machine):
    def check():
        program = machine.last_program
        return (machine.mem.get(program.address_of("hits"), (64,), np.int32).tolist() ==
                [5 * i for i in range(8)] + [0] * 56 and
                machine.mem.get(program.address_of("calls"), (1,), np.int32)[0] == 1)
    return [5], 8, check


def extern(machine):
    a = np.arange(256.0)
    total = machine.mem.put(np.zeros(64))
    machine.host_symbols = {"A": machine.mem.put(a), "total": total}
    return [], 8, lambda: np.array_equal(machine.mem.get(total, (8,), np.float64),
                                         a.reshape(64, 4).sum(axis=1)[:8])


CASES = {"vadd.s": ("vadd", vadd), "counters.s": ("counters", counters),
         "shared.s": ("mark", shared), "extern.s": ("sum4", extern),
         "gather.s": ("gather", gather), "hypot.s": ("hyp", hypot),
         "console.s": ("report", console)}


def test_the_corpus_is_what_the_cases_check():
    assert sorted(p.name for p in CORPUS.glob("*.s")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_file_assembles_to_an_object_links_and_runs_on_both_engines(name):
    path = CORPUS / name
    objects = assemble_objects([(path.read_text(), str(path))])
    assert undefined_symbols(objects)            # it needs the runtime: left to the linker
    objects = objects_from_bytes(objects_bytes(objects))
    entry, setup = CASES[name]
    cycles = []
    for engine in ("c", "python"):
        machine = swsim.Machine()
        args, cpes, check = setup(machine)
        machine.last_program = swsim.Machine.program(
            objects, symbols=getattr(machine, "host_symbols", None))
        machine.last_result = machine.run(machine.last_program, entry=entry, args=args,
                                          cpes=range(cpes), engine=engine)
        assert check(), (name, engine)
        cycles.append(machine.last_result.cycles)
    assert cycles[0] == cycles[1]


def test_swsim_asm_then_run_prints_both_streams_like_the_source(tmp_path, capsys):
    source = CORPUS / "console.s"
    assert main(["asm", str(source), "-o", str(tmp_path / "c.swo")]) == 0
    capsys.readouterr()
    runs = []
    for program in (tmp_path / "c.swo", source):
        assert main(["run", str(program), "--entry", "report", "--cpes", "2", "--arg", "7"]) == 0
        runs.append(capsys.readouterr())
    assert runs[0] == runs[1]
    assert runs[0].out.startswith(CONSOLE_STDOUT) and runs[0].err == CONSOLE_STDERR


@pytest.mark.parametrize("symbol, reason", [
    ("penv_slave1_gld_count", "would need a counter the emulator does not keep"),
    ("ldm_malloc", "there is no LDM heap"),
    ("exp", "the runtime's libm is sqrt, sqrtf and fabs"),
    ("athread_lock", "a lock needs an atomic read-modify-write of memory"),
    ("athread_unlock", "order the CPEs with athread_syn"),
])
def test_calls_the_runtime_does_not_provide_are_refused_by_name_and_why(symbol, reason):
    text = (f"\t.globl k\nk:\tldih $29,0($27)\t!gpdisp!1\n\tldi $29,0($29)\t!gpdisp!1\n"
            f"\tldl $27,{symbol}($29)\t!literal!2\n\tcall $26,($27),{symbol}\t!lituse_jsr!2\n"
            "\tret $31,($26),1\n")
    with pytest.raises(AsmError) as info:
        swsim.Machine().run(text, entry="k", cpes=[0])
    first = info.value.diagnostics[0]
    assert (first.file, first.line) == ("<input>", 4)
    assert first.message.startswith(f"undefined symbol {symbol}: the athread runtime does "
                                    "not provide it (") and reason in first.message


def test_fprintf_to_another_stream_prints_nothing_and_returns_minus_one():
    machine = swsim.Machine()
    program = swsim.Machine.program(
        "\t.globl k\nk:\tldi $30,-16($30)\n\tstl $26,0($30)\n\tldi $16,8($31)\n"
        "\tldi $17,fmt\n\tbsr $26,fprintf\n\tldl $26,0($30)\n\tldi $30,16($30)\n\tret\n"
        "\t.data\nfmt:\t.asciz \"lost\\n\"\n")
    machine.run(program, entry="k", cpes=[0], engine="python")
    assert reg(machine, 0) == (1 << 64) - 1 and console_text(machine, program) == ""


def test_the_other_stdio_calls_and_sqrtf():
    machine = swsim.Machine()
    program = swsim.Machine.program("""
\t.globl k
k:\tldi $30,-16($30)
\tstl $26,0($30)
\tldi $16,'a'($31)
\tldi $17,_slave_stdout
\tbsr $26,fputc
\tldi $16,'b'($31)
\tldi $17,_slave_stderr
\tbsr $26,putc
\tldi $16,_slave_stdout
\tbsr $26,fflush
\tmov $0,$9
\tldi $1,two
\tfldd $f16,0($1)
\tfcvtds $f16,$f16
\tbsr $26,sqrtf
\tldl $26,0($30)
\tldi $30,16($30)
\tret
\t.data
two:\t.double 2.25
""")
    machine.run(program, entry="k", cpes=[0], engine="python")
    assert console_text(machine, program, None, ("stdout",)) == "a"
    assert console_text(machine, program, None, ("stderr",)) == "b"
    assert reg(machine, 9) == 0 and freg(machine, 0) == 1.5


def test_comm_variables_are_shared_main_memory_and_merge_across_objects():
    program = swsim.link(assemble_objects([
        ("\t.comm buf,64,32\n\t.lcomm t,4\n\t.globl k\nk:\tldi $1,buf\n\tret\n", "a.s"),
        ("\t.comm buf,64,32\n\t.globl j\nj:\tldi $1,buf\n\tret\n", "b.s")]))
    buf = program.symbols["buf"]
    assert buf.value % 32 == 0 and buf.value >= program.data_base and buf.binding == "weak"
    assert program.symbols["t"].binding == "local"
    for text, message in (("\t.comm x,8,3\n", "alignment 3 is not a power of two"),
                          ("\t.comm x,-1\n", ".comm size must be >= 0, got -1"),
                          ("x:\tnop\n\t.comm x,8\n", "symbol x is already defined")):
        with pytest.raises(AsmError, match=message):
            assemble_objects([(text, "c.s")])


def test_host_symbols_are_linked_by_name_and_refused_when_wrong(tmp_path, capsys):
    source = CORPUS / "extern.s"
    with pytest.raises(AsmError, match="extern.s:79:9: error: undefined symbol total"):
        swsim.Machine.program(str(source), symbols={"A": 0x41000000})
    with pytest.raises(ValueError, match="address 0x100000000 of A is not a 32-bit address"):
        swsim.Machine.program(str(source), symbols={"A": 1 << 32, "total": 0})
    with pytest.raises(AsmError, match="symbol k is defined by the host"):
        swsim.Machine.program("\t.globl k\nk:\tret\n", symbols={"k": 0x41000000})
    np.save(tmp_path / "a.npy", np.arange(256.0))
    np.save(tmp_path / "t.npy", np.zeros(64))
    assert main(["run", str(source), "--entry", "sum4", "--cpes", "2",
                 "--symbol", f"A=@{tmp_path / 'a.npy'}", "--symbol", f"total=@{tmp_path / 't.npy'}",
                 "--dump", f"total:2:f8:{tmp_path / 'out.npy'}"]) == 0
    assert np.load(tmp_path / "out.npy").tolist() == [6.0, 22.0]
    assert main(["run", str(source), "--entry", "sum4", "--symbol", "A"]) == 1
    assert "--symbol expects NAME=VALUE, got 'A'" in capsys.readouterr().err
