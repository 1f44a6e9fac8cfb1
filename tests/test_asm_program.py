"""Whole programs: compiler output, the kernels, linking, the .swo format and the CLI."""
from pathlib import Path

import numpy as np
import pytest

import swsim
from swsim import isa
from swsim.asm import (assemble, assemble_object, disassemble, link, load_program,
                       save_program)
from swsim.asm.swo import SwoError, program_bytes, program_from_bytes
from swsim.cli import main

KERNEL_DIR = Path(__file__).resolve().parents[1] / "kernels"

COMPILER_OUTPUT = """\
	.set noreorder
	.set noat
	.arch sw3
	.file	1	"/home/user/conv.c"
	.section .text1, "ax", "progbits"
	.section .bss, "wa", "nobits"
	.org 0x40
	.align	0
	.type	tmp_vec3, @object
	.size	tmp_vec3, 32
tmp_vec3:	# 0x40
	.skip 32
	.section .text1, "ax", "progbits"
	.globl	conv_tile
	.ent	conv_tile#
conv_tile:	# 0x0
	.loc	1	42	0
.BB1_conv_tile:
	.prologue
	ldih	$gp,0($27)	!gpdisp!3	# [0]
	ldi	$gp,0($gp)	!gpdisp!3
	ldi	$sp,-512($sp)
	.frame $15,512,$26,0
	.mask 0x4000000,-512
	stl	$26, 0($sp)
	vinsw	$31,$28,5,$28
	vmad	$2,$9,$12,$12
	putr	$2, 8
	lddec	$9,0($6)
	getc	$10
.Louter:
	br	$31,.Louter # [3]
	.end conv_tile
"""


def test_compiler_output_assembles():
    program = assemble(COMPILER_OUTPUT, "conv.s")
    assert len(program.words) == 10 and program.stack_bytes == 512
    assert program.address_of("conv_tile") == isa.CODE_BASE
    assert program.symbols["conv_tile"].type == "func"
    assert program.address_of("tmp_vec3") == 0x40 and program.symbols["tmp_vec3"].size == 32
    assert len(program.ldm_image) == 0x60 and not any(program.ldm_image)
    instr, values, _ = isa.decode(program.words[4])
    assert instr.name == "vinsw" and values == {"ra": 31, "rb": 28, "lane": 5, "rc": 28}
    assert isa.decode(program.words[-1])[1]["disp21"] == -1
    assert program.lines[isa.CODE_BASE + 8].line == 22
    assert assemble(disassemble(program)).words == program.words


def test_axpy_kernel():
    program = swsim.assemble_file(str(KERNEL_DIR / "examples" / "axpy.s"))
    assert program.symbols["axpy"].binding == "global"
    names = [isa.decode(w)[0].name for w in program.words]
    assert {"vldd", "vmad", "vstd", "bne", "ret"} <= set(names)
    assert assemble(disassemble(program)).words == program.words


def test_link_places_objects_and_resolves_globals():
    main_obj = assemble_object("\t.globl main\nmain:\tbsr $26, helper\n\tldi $1, table\n"
                               "\t.ldm\nbuf:\t.quad 1\n\t.data\n\t.quad helper\n", "m.s")
    lib = assemble_object("\t.globl helper, table\n\t.align 3\nhelper:\tret\n\t.ldm\n"
                          "\t.align 5\nlocal:\t.quad 2\n\t.data\ntable:\t.word 9\n"
                          "\t.frame $30, 96, $26\n", "lib.s")
    program = link([main_obj, lib])
    helper = program.address_of("helper")
    nop = isa.encode(isa.BY_NAME["bis"], {"ra": 31, "rb": 31, "rc": 31})
    assert helper == isa.CODE_BASE + 16 and program.words[3] == nop  # .align 3 padding
    assert isa.decode(program.words[0])[1]["disp21"] == (helper - isa.CODE_BASE - 4) // 4
    assert program.address_of("local") == 32 and program.ldm_image[32] == 2
    assert program.address_of("table") == isa.MEM_BASE + 8
    assert program.data_image[:8] == helper.to_bytes(8, "little")
    assert program.stack_bytes == 96
    assert [s.name for s in program.sections] == [".text", ".ldm", ".data"]
    assert program.lines[helper].file == "lib.s"


def test_swo_round_trip(tmp_path):
    program = assemble(COMPILER_OUTPUT + "\t.data\nd:\t.quad 5\n\t.ldm\nl:\t.byte 1\n", "conv.s")
    path = tmp_path / "p.swo"
    save_program(program, str(path))
    loaded = load_program(str(path))
    assert isinstance(loaded.code, np.ndarray) and loaded.code.dtype == np.uint32
    assert loaded.words == program.words
    for field in ("code_base", "ldm_image", "data_image", "data_base", "symbols", "lines",
                  "stack_bytes", "relocations"):
        assert getattr(loaded, field) == getattr(program, field), field
    assert [(s.name, s.kind, s.base, s.size, bytes(s.data)) for s in loaded.sections] == \
        [(s.name, s.kind, s.base, s.size, bytes(s.data)) for s in program.sections]


@pytest.mark.parametrize("corrupt, message", [
    (lambda b: b"NOTASWO!" + b[8:], "bad magic number"),
    (lambda b: b[:8] + (99).to_bytes(4, "little") + b[12:], "format version 99"),
    (lambda b: b[:-3], "corrupt .swo file"),
    (lambda b: b[:20], "corrupt .swo file"),
    (lambda b: b[:5], "bad magic number"),
])
def test_bad_swo_files_give_clear_errors(corrupt, message):
    data = corrupt(program_bytes(assemble("\tnop\n\t.data\n\t.quad 1\n")))
    with pytest.raises(SwoError, match=message):
        program_from_bytes(data, "x.swo")


def test_cli_asm_listing_and_disasm(tmp_path, capsys):
    source = tmp_path / "k.s"
    source.write_text(COMPILER_OUTPUT)
    output = tmp_path / "k.swo"
    assert main(["asm", str(source), "-o", str(output), "--listing"]) == 0
    listing = capsys.readouterr().out
    assert "10000008    fbdefe00    k.s:22: ldi\t$sp,-512($sp)" in listing
    assert main(["disasm", str(output)]) == 0
    text = capsys.readouterr().out
    assert "conv_tile:" in text and "vinsw\t$31, $28, 5, $28" in text
    assert main(["disasm", str(source)]) == 0
    assert capsys.readouterr().out == text


def test_cli_links_several_files_with_include_dirs(tmp_path, capsys):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "n.inc").write_text("\t.equ N, 3\n")
    (tmp_path / "a.s").write_text('\t.include "n.inc"\n\t.globl f\nf:\tldi $1, N\n\tbr g\n')
    (tmp_path / "b.s").write_text("\t.globl g\ng:\tret\n")
    assert main(["asm", str(tmp_path / "a.s"), str(tmp_path / "b.s"),
                 "-I", str(tmp_path / "inc")]) == 0
    assert len(load_program(str(tmp_path / "a.swo")).words) == 3


def test_cli_errors_exit_1_without_traceback(tmp_path, capsys):
    (tmp_path / "bad.s").write_text("\tnop\n\tvmadd $1, $2, $3, $4\n\tldl $1, 1(\n")
    assert main(["asm", str(tmp_path / "bad.s")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'bad.s'}:2:2: error: unknown instruction vmadd (did you mean vmad?)" \
        in err
    assert "\tvmadd $1, $2, $3, $4\n\t^" in err and "2 errors" in err
    assert "Traceback" not in err
    (tmp_path / "x.swo").write_bytes(b"junk")
    assert main(["disasm", str(tmp_path / "x.swo")]) == 1
    assert "bad magic number" in capsys.readouterr().err
    (tmp_path / "x.npy").write_bytes(b"\x93NUMPY\x01\x00v\x00")
    assert main(["disasm", str(tmp_path / "x.npy")]) == 1
    assert "neither a .swo program nor assembly source" in capsys.readouterr().err


def test_top_level_exports():
    for name in ("assemble", "assemble_file", "link", "disassemble", "AsmError", "Program"):
        assert getattr(swsim, name) is getattr(swsim.asm, name)


@pytest.mark.parametrize("data", [
    '\t.data\nd:\t.quad 5, d\n\t.rodata\nr:\t.ascii "a long enough string"\nrend:\n\t.ldm\n'
    '\t.align 5\nl:\t.byte 1\n',
    # thread-local sections of any name stay in LDM; debug information is not loaded
    '\t.section my_tls,"awT"\nmine:\t.quad 5\n\t.tbss\nt:\t.skip 8\n'
    '\t.section .debug_info,""\n\t.long 1\n',
])
def test_disassembly_reassembles_data_sections_and_symbols(data):
    program = assemble(COMPILER_OUTPUT + data)
    again = assemble(disassemble(program))
    assert (again.words, again.ldm_image, again.data_image) == \
        (program.words, program.ldm_image, program.data_image)
    assert {k: v.value for k, v in again.symbols.items()} == \
        {k: v.value for k, v in program.symbols.items()}
