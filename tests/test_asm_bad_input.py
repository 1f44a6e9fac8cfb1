"""Bad input to `swsim asm` / `swsim disasm` and the assembler API: exit status 1 with a message
naming the input, never a traceback (issue 14); and a seeded campaign of random token soup
that must assemble or raise AsmError, nothing else."""
import json
import random
import struct
import subprocess
import sys
import zlib

import pytest

from swsim.asm import AsmError, assemble
from swsim.asm.swo import program_bytes
from swsim.cli import main
from swsim.isa import BY_NAME, PSEUDO_INSTRUCTIONS


def swo_with_null_code_base():
    data = program_bytes(assemble("\tnop\n"))
    preamble = struct.Struct("<8sIII")      # magic, version, header length, CRC-32 of the rest
    magic, version, length, _ = preamble.unpack_from(data)
    header = json.loads(data[preamble.size:preamble.size + length])
    header["code_base"] = None
    text = json.dumps(header).encode()
    body = text + data[preamble.size + length:]
    return preamble.pack(magic, version, len(text), zlib.crc32(body)) + body


CASES = [  # (command, files {name: content}, message in stderr)
    (["asm", "missing.s"], {}, "missing.s: cannot read: No such file or directory"),
    (["asm", "dir"], {"dir/": None}, "dir: a directory (a device, pipe or directory cannot"),
    (["asm", "bin.s"], {"bin.s": b"\x7fELF\x00\x01"}, "bin.s: a binary file"),
    (["asm", "deep.s"], {"deep.s": "\tldi $1, " + "(" * 5000 + "1" + ")" * 5000 + "\n"},
     "deep.s:1:10: error: expression nested too deeply"),
    (["asm", "rept.s"], {"rept.s": "\t.rept 100000000\n\tnop\n\t.endr\n"},
     "rept.s:1:2: error: .rept 100000000 would expand"),
    (["asm", "rec.s"], {"rec.s": '\t.include "rec.s"\n'}, "recursive .include: rec.s -> rec.s"),
    (["asm", "ok.s", "-o", "no/such/dir/ok.swo"], {"ok.s": "\tnop\n"},
     "ok.swo: cannot write: No such file or directory"),
    (["asm", "a.s", "b.s"], {"a.s": "\tbr $31, f\n", "b.s": "\tfoo\n"},   # f: for the linker
     "b.s:1:2: error: unknown instruction foo"),
    (["disasm", "missing.swo"], {}, "missing.swo: cannot read"),
    (["disasm", "empty.swo"], {"empty.swo": b""}, "bad magic number"),
    (["disasm", "null.swo"], {"null.swo": swo_with_null_code_base()},
     "code_base must be an integer, got NoneType null"),
    (["disasm", "bad.s"], {"bad.s": "\tvmda $1, $2, $3, $4\n"}, "did you mean vmad?"),
    (["asm", "frame.s"], {"frame.s": "k:\t.frame $30, -1, $26\n"},
     "frame.s:1:16: error: a frame size is a number of bytes (>= 0), got -1"),
    (["asm", "str.s"], {"str.s": '\t.ascii "abc\n'},
     'str.s:1:9: error: unterminated string: no closing " on this line'),
    (["asm", "chr.s"], {"chr.s": "\tldi $1, 'a\n"},
     "chr.s:1:10: error: unterminated character literal: no closing ' on this line"),
    (["asm", "two.s"], {"two.s": "\tldi $1, 'ab'\n"},
     "two.s:1:10: error: a character literal holds one character, got 'ab'"),
]


def test_a_two_megabyte_token_gives_a_short_message(tmp_path, capsys):
    (tmp_path / "big.s").write_text("\t" + "x" * 2_000_000 + "\n")
    assert main(["asm", str(tmp_path / "big.s")]) == 1
    err = capsys.readouterr().err
    assert "unknown instruction xxxx" in err and "(2000000 characters)" in err
    assert len(err) < 1000 + len(str(tmp_path))


@pytest.mark.parametrize("argv, files, message", CASES, ids=[c[0][1] for c in CASES])
def test_cli_bad_input_exits_1_with_a_message(tmp_path, monkeypatch, capsys, argv, files,
                                              message):
    monkeypatch.chdir(tmp_path)
    for name, content in files.items():
        if content is None:
            (tmp_path / name).mkdir()
        elif isinstance(content, bytes):
            (tmp_path / name).write_bytes(content)
        else:
            (tmp_path / name).write_text(content)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


WORDS = sorted(BY_NAME) + sorted(PSEUDO_INSTRUCTIONS) + [
    ".data", ".text", ".ldm", ".bss", ".section", ".align", ".p2align", ".skip", ".org",
    ".byte", ".quad", ".word", ".double", ".ascii", ".asciz", ".globl", ".weak", ".set",
    ".equ", ".macro", ".endm", ".rept", ".endr", ".irp", ".if", ".else", ".endif", ".ifdef",
    ".include", ".type", ".size", ".frame", ".tdata", ".tbss", "x", "m"]
LABELS = ["", "", "x:", "y:", "1:", "$ng..x:", "$5:"]
TOKENS = ["$1", "$31", "$sp", "$gp", "$f3", "$ng..x", "$99", "x", "y", "1b", "1f", ".", "0",
          "1", "-1", "255", "256", "0x7fffffff", "1.5", "'a'", '"s"', '"\\x"', "(", ")", "+",
          "-", "*", "/", "%", "<<", "&", "~", "=", ";", "#", "!gpdisp!1", "!literal!2",
          "!lituse_base!2", "!tprel", "!tprelhi", "!gprel", "@function", "@nobits", "\\x",
          "\\@", "($2)", "8($30)", ".data", ".sbss"]


GOOD = ["\tnop", "x:\tldi $1, 5", "\t.data", "\t.quad 1, x", "\t.text", "1:\tbr 1b",
        "\t.p2align 3", "\taddl $1, 2, $3", "\t.weak w", "\tldl $2, x($31)"]


def soup_line(rng):
    if rng.random() < 0.6:
        return rng.choice(GOOD)
    operands = [" ".join(rng.choice(TOKENS) for _ in range(rng.choice([1, 1, 1, 2, 3])))
                for _ in range(rng.randint(0, 4))]
    return f"{rng.choice(LABELS)}\t{rng.choice(WORDS)} {', '.join(operands)}"


def test_random_token_soup_assembles_or_raises_asm_error():
    """1,000 seeded files of 1-6 lines: good statements and random labels, words and operands
    of random tokens."""
    rng = random.Random(13)
    outcomes = {"assembled": 0, "refused": 0}
    for _ in range(1000):
        lines = [soup_line(rng) for _ in range(rng.randint(1, 6))]
        try:
            assemble("\n".join(lines), "soup.s")
            outcomes["assembled"] += 1
        except AsmError as exc:
            assert exc.diagnostics and all(d.message for d in exc.diagnostics)
            outcomes["refused"] += 1
    assert outcomes["assembled"] > 20 and outcomes["refused"] > 500, outcomes


HOSTILE = {  # inputs that once ran away or crashed (issues 14, 30); each must end within the limits
    "sum.s": "\tldi $1, " + "+".join(["1"] * 500) + "\n",
    "parens.s": "\tldi $1, " + "(" * 5000 + "1" + ")" * 5000 + "\n",
    "rept_huge.s": "\t.rept 100000000\n\tnop\n\t.endr\n",
    "rept_big.s": "\t.rept 1000000\n\tnop\n\t.endr\n",
    "rept_nested.s": "\t.rept 1000\n\t.rept 1000\n\tnop\n\t.endr\n\t.endr\n",
    "macro_fanout.s": "\t.macro m\n\tm\n\tm\n\t.endm\n\tm\n",
    "skip_text.s": "\t.skip 0x7fffffff\n",
    "skip_data.s": "\t.data\n\t.skip 0x7fffffff\n",
    "one_line.s": "; ".join(f"addl $1, {i % 256}, $2" for i in range(8000)) + "\n",
    "rec.s": 'here:\tnop\n\t.include "rec.s"\n',
    "shift.s": "\t.data\n\t.quad 1 << 549755813888\n",
    "squares.s": "\t.set x, 3\n\t.rept 40\n\t.set x, x * x\n\t.endr\n",
    "if_nested.s": "\t.if 1\n" * 100_000 + "\tnop\n" + "\t.endif\n" * 100_000,
    "macro_doubling.s": ("\t.macro d n, s\n\t.if \\n\n\td \\n-1, \\s\\s\n\t.else\n"
                         "\t.ascii \"\\s\"\n\t.endif\n\t.endm\n\t.data\n\td 34, x\n"),
    "float_overflow.s": "\t.data\n\t.float 1e39\n",
}
MEMORY_LIMIT = 1 << 30  # address space of the whole process, Python and numpy included
SECONDS_PER_CASE = 15      # CPU seconds
WALL_SECONDS_PER_CASE = 60  # only the child's overall timeout, for a host shared with others


def test_hostile_inputs_end_in_bounded_time_and_memory(tmp_path):
    """All cases in one child process under RLIMIT_AS = 1 GiB; each case's CPU time measured
    inside it (CPU, not wall-clock, time: a loaded host must not fail the test)."""
    import resource
    for name, text in HOSTILE.items():
        (tmp_path / name).write_text(text)
    script = (
        "import sys, time\n"
        "from swsim.asm import AsmError, build_files\n"
        "for path in sys.argv[1:]:\n"
        "    start = time.process_time()\n"
        "    try:\n"
        "        build_files([path], ())\n"
        "        outcome = 'assembled'\n"
        "    except AsmError as exc:\n"
        "        outcome = exc.diagnostics[0].message[:60]\n"
        "    print(f'{time.process_time() - start:.2f}', path, outcome, flush=True)\n")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    result = subprocess.run([sys.executable, "-c", script, *sorted(HOSTILE)], cwd=tmp_path,
                            capture_output=True, text=True, preexec_fn=limit,
                            timeout=WALL_SECONDS_PER_CASE * len(HOSTILE))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(HOSTILE), result.stdout
    for line in lines:
        seconds, name, outcome = line.split(" ", 2)
        assert float(seconds) < SECONDS_PER_CASE, line
        assert (outcome == "assembled") == (name == "one_line.s"), line
