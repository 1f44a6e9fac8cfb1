"""Directives, pseudo-instructions, expressions, labels, macros and relocation annotations."""
import struct

import pytest

from swsim import isa
from swsim.asm import assemble
from swsim.asm.words import GP_OFFSET

ENC = isa.encode
B = isa.BY_NAME


def words(text):
    return assemble(text).words


def word(name, **fields):
    instr = B[name]
    literal = "lit" in fields
    return ENC(instr, fields, literal)


# ---- pseudo-instructions ---------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("mov $1, $2", word("bis", ra=31, rb=1, rc=2)),
    ("mov 7, $2", word("ldi", ra=2, rb=31, disp16=7)),
    ("clr $3", word("bis", ra=31, rb=31, rc=3)),
    ("negw $1, $2", word("subw", ra=31, rb=1, rc=2)),
    ("negl $1, $2", word("subl", ra=31, rb=1, rc=2)),
    ("not $1, $2", word("ornot", ra=31, rb=1, rc=2)),
    ("nop", word("bis", ra=31, rb=31, rc=31)),
    ("unop", word("ldl", ra=31, rb=31, disp16=0)),
    ("fnop", word("fcpys", ra=31, rb=31, rc=31)),
    ("ret", word("ret", ra=31, rb=26, disp16=1)),
    ("ret $31, ($26)", word("ret", ra=31, rb=26, disp16=0)),   # hint is optional
    ("jmp $31, ($27), 5", word("jmp", ra=31, rb=27, disp16=5)),
    ("ldi $1, 100", word("ldi", ra=1, rb=31, disp16=100)),
    ("ldi $1, -32768", word("ldi", ra=1, rb=31, disp16=-32768)),
])
def test_single_word_pseudo_and_forms(text, expected):
    assert words(f"\t{text}\n") == [expected]


def test_br_label_pseudo():
    assert words("x:\tbr x\n") == [word("br", ra=31, disp21=-1)]


@pytest.mark.parametrize("value", [0x8000, -0x8001, 0x12345678, 0x7FFF8000 - 1, -0x80000000,
                                   0x0000FFFF, 0x40008000])
def test_ldi_of_a_32_bit_value_is_a_carry_correct_pair(value):
    hi_word, lo_word = words(f"\tldi $5, {value}\n")
    hi = isa.decode(hi_word)[1]["disp16"]
    lo = isa.decode(lo_word)[1]["disp16"]
    assert isa.decode(hi_word)[0].name == "ldih" and isa.decode(lo_word)[0].name == "ldi"
    assert (hi << 16) + lo == value
    assert isa.decode(lo_word)[1]["rb"] == 5


def test_ldi_of_a_symbol_is_always_a_pair_with_the_address():
    program = assemble("\tldi $1, buf+4\n\tldi $2, 8($3)\n\t.data\n\t.quad 0\nbuf:\t.quad 1\n")
    address = program.address_of("buf") + 4
    ldih, ldi, plain = (isa.decode(w)[1] for w in program.words)
    assert (ldih["disp16"] << 16) + ldi["disp16"] == address
    assert plain == {"ra": 2, "disp16": 8, "rb": 3}


def test_mov_of_a_symbol_loads_its_address():
    program = assemble("\tmov buf, $4\n\t.ldm\nbuf:\t.quad 0\n")
    assert len(program.words) == 2


# ---- registers -------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling, number", [("$0", 0), ("$f12", 12), ("$sp", 30), ("sp", 30),
                                              ("$a0", 16), ("a5", 21), ("$ra", 26),
                                              ("zero", 31), ("$t12", 27), ("$gp", 29)])
def test_register_names(spelling, number):
    assert words(f"\taddl {spelling}, 1, $1\n") == [word("addl", ra=number, lit=1, rc=1)]


def test_memory_operand_forms():
    assert words("\tldl $1, ($2)\n\tldl $1, -8($sp)\n\tldl $1, 16\n") == [
        word("ldl", ra=1, rb=2, disp16=0), word("ldl", ra=1, rb=30, disp16=-8),
        word("ldl", ra=1, rb=31, disp16=16)]


# ---- labels and expressions ------------------------------------------------------------------
def test_numeric_local_labels():
    code = words("1:\tnop\n1:\tbr 1b\n\tbr 1f\n\tbr 2f\n1:\tnop\n2:\tbr 1b\n")
    assert [isa.decode(w)[1].get("disp21") for w in code] == [None, -1, 1, 1, None, -2]


@pytest.mark.parametrize("expression, value", [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("-4 + 1", -3), ("~0 & 0xff", 255),
    ("1 << 4 | 1", 17), ("0x100 >> 4", 16), ("17 % 5", 2), ("-7 / 2", -3), ("6 ^ 3", 5),
    ("'A'", 65), ("0b101", 5), ("N * 2", 64), ("end - start", 8), ("+3", 3),
])
def test_expressions(expression, value):
    program = assemble(f"\t.equ N, 32\n\t.data\nstart:\t.quad 0\nend:\n\t.quad {expression}\n")
    assert int.from_bytes(program.data_image[8:16], "little", signed=True) == value


def test_comments_and_separators():
    assert words("\tnop # comment\n\tnop // another\n\tnop; nop ; nop # ; not a statement\n"
                 "# only a comment\n") == [word("bis", ra=31, rb=31, rc=31)] * 5


def test_assignment_and_equ_and_set():
    program = assemble("A = 3\n\t.equ B, A + 1\n\t.set C, B * 2\n\t.set noreorder\n"
                       "\tldi $1, C\n\t.set C, 1\n\tldi $2, C\n")
    assert [isa.decode(w)[1]["disp16"] for w in program.words] == [8, 1]


def test_location_counter():
    program = assemble("\t.data\n\t.quad 0\nhere:\t.quad .\n\t.quad . - here\n")
    assert program.data_image[8:16] == (program.data_base + 8).to_bytes(8, "little")
    assert program.data_image[16:24] == (8).to_bytes(8, "little")


# ---- data and layout -------------------------------------------------------------------------
def test_data_directives():
    program = assemble('\t.data\n\t.byte 1, -1\n\t.short 2\n\t.half 3\n\t.word 4\n\t.long 5\n'
                       '\t.quad -6\n\t.float 1.5\n\t.double -2.25\n\t.ascii "ab"\n'
                       '\t.asciz "c"\n\t.string "d\\n"\n')
    expected = (bytes([1, 255]) + struct.pack("<hhiiq", 2, 3, 4, 5, -6) + struct.pack("<f", 1.5)
                + struct.pack("<d", -2.25) + b"ab" + b"c\0" + b"d\n\0")
    assert program.data_image == expected


def test_data_directive_aliases():
    program = assemble("\t.data\n\t.hword 1\n\t.int 2\n\t.single 0.5\n\t.ident \"x\"\n"
                       "\t.eflag 48\n")
    assert program.data_image == struct.pack("<hif", 1, 2, 0.5)


def test_section_flags_decide_the_kind():
    program = assemble('\t.section .mycode, "ax"\n\tnop\n\t.section .lots, "aw", @nobits\n'
                       '\t.skip 8\n\t.section .tables, "a"\n\t.byte 1\n')
    assert [(s.name, s.kind) for s in program.sections] == [
        (".mycode", "text"), (".lots", "bss"), (".tables", "data")]


def test_addresses_in_data():
    program = assemble("\t.text\nf:\tnop\n\t.data\n\t.word f\n\t.quad g + 8\ng:\n")
    assert program.data_image[:4] == isa.CODE_BASE.to_bytes(4, "little")
    assert program.data_image[4:12] == (program.data_base + 12 + 8).to_bytes(8, "little")


def test_align_is_a_power_of_two_and_pads_code_with_nops():
    program = assemble("\tnop\n\t.align 4\nx:\tnop\n\t.data\n\t.byte 1\n\t.p2align 3\ny:"
                       "\t.byte 2\n\t.balign 4, 0xee\n\t.byte 3\n")
    assert program.address_of("x") == isa.CODE_BASE + 16
    assert program.words[1:4] == [word("bis", ra=31, rb=31, rc=31)] * 3
    assert program.data_image == bytes([1, 0, 0, 0, 0, 0, 0, 0, 2, 0xEE, 0xEE, 0xEE, 3])


def test_skip_space_zero_org():
    program = assemble("\t.data\n\t.byte 1\n\t.skip 3\n\t.space 2, 7\n\t.zero 2\n\t.org 12\n"
                       "\t.byte 9\n")
    assert program.data_image == bytes([1, 0, 0, 0, 7, 7, 0, 0, 0, 0, 0, 0, 9])


def test_sections_land_in_their_images():
    program = assemble("\t.text\n\tnop\n\t.ldm\na:\t.quad 1\n\t.bss\nb:\t.skip 8\n\t.data\n"
                       "c:\t.quad 2\n\t.rodata\nd:\t.quad 3\n"
                       '\t.section .text2, "ax"\ne:\tnop\n\t.section .tdata_x, "aw"\nf:\t.byte 5\n')
    kinds = {s.name: s.kind for s in program.sections}
    assert kinds == {".text": "text", ".text2": "text", ".ldm": "ldm", ".tdata_x": "ldm",
                     ".bss": "bss", ".data": "data", ".rodata": "data"}
    assert program.address_of("a") == 0 and program.address_of("b") >= 9
    assert len(program.ldm_image) == program.address_of("b") + 8
    assert program.address_of("c") == isa.MEM_BASE and program.address_of("e") == \
        isa.CODE_BASE + 4
    assert program.data_image[8:16] == (3).to_bytes(8, "little")


def test_symbol_attributes_and_frame():
    program = assemble("\t.globl f\n\t.global g\n\t.ent f\n\t.type g, @object\nf:\n\t.frame $30,"
                       " 64, $26, 0\n\t.mask 0x4000000, -64\n\t.fmask 0, 0\n\t.prologue 1\n"
                       "\tnop\n\t.end f\n\t.size f, . - f\n\t.data\ng:\t.quad 0\n\t.frame $15, 128,"
                       " $26\n")
    f, g = program.symbols["f"], program.symbols["g"]
    assert (f.binding, f.type, f.size) == ("global", "func", 4)
    assert (g.binding, g.type) == ("global", "object")
    assert program.stack_bytes == 128


def test_stack_bytes_default_zero():
    assert assemble("\tnop\n").stack_bytes == 0


# ---- preprocessor ----------------------------------------------------------------------------
def test_macro_with_named_arguments_defaults_and_counter():
    code = words("\t.macro add3 dst, src=$2, n=3\n\taddl \\src, \\n, \\dst\nl\\@:\tbr l\\@\n"
                 "\t.endm\n\tadd3 $1\n\tadd3 $4, n=9, src=$5\n")
    assert code[0] == word("addl", ra=2, lit=3, rc=1)
    assert code[2] == word("addl", ra=5, lit=9, rc=4)
    assert code[1] == code[3] == word("br", ra=31, disp21=-1)


def test_rept_and_irp():
    code = words("\t.rept 2\n\tnop\n\t.endr\n\t.irp r, 1, 2\n\tclr $\\r\n\t.endr\n")
    assert code == [word("bis", ra=31, rb=31, rc=31)] * 2 + [
        word("bis", ra=31, rb=31, rc=r) for r in (1, 2)]


@pytest.mark.parametrize("condition, taken", [
    (".if 1", True), (".if N - 4", False), (".ifdef N", True), (".ifndef N", False),
    (".ifdef nothing", False), (".ifndef nothing", True)])
def test_conditionals(condition, taken):
    code = words(f"\t.equ N, 4\n\t{condition}\n\tnop\n\t.else\n\tclr $1\n\t.endif\n")
    assert code == [word("bis", ra=31, rb=31, rc=31 if taken else 1)]


def test_nested_conditionals_and_elseif():
    code = words("\t.if 0\n\t.if 1\n\tclr $1\n\t.endif\n\t.elseif 1\n\tclr $2\n\t.else\n"
                 "\tclr $3\n\t.endif\n")
    assert code == [word("bis", ra=31, rb=31, rc=2)]


def test_include(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "defs.inc").write_text("\t.equ K, 5\n")
    (tmp_path / "local.inc").write_text("\tldi $1, K\n")
    main = tmp_path / "main.s"
    main.write_text('\t.include "defs.inc"\n\t.include "local.inc"\n')
    from swsim.asm import assemble_file
    assert assemble_file(str(main), include_dirs=(str(tmp_path / "inc"),)).words == [
        word("ldi", ra=1, rb=31, disp16=5)]


# ---- relocation annotations ------------------------------------------------------------------
def test_gpdisp_pair_loads_gp():
    program = assemble("\tldih $gp, 0($27) !gpdisp!1\n\tldi $gp, 0($gp) !gpdisp!1\n"
                       "\t.data\n\t.quad 0\n")
    ldih, ldi = (isa.decode(w)[1] for w in program.words)
    assert ldih["rb"] == 31 and ldi["rb"] == 29
    assert (ldih["disp16"] << 16) + ldi["disp16"] == program.address_of("_gp") == \
        isa.MEM_BASE + GP_OFFSET


def test_literal_load_becomes_the_symbol_address():
    program = assemble("\tldl $1, buf($gp) !literal!2\n\tldl $2, 8($1) !lituse_base!2\n"
                       "\t.data\n\t.quad 0\nbuf:\t.quad 7\n")
    ldih, ldi, use = (isa.decode(w) for w in program.words)
    assert (ldih[0].name, ldi[0].name, use[0].name) == ("ldih", "ldi", "ldl")
    assert (ldih[1]["disp16"] << 16) + ldi[1]["disp16"] == program.address_of("buf")


def test_gprel_high_low():
    program = assemble("\tldih $1, v($gp) !gprelhigh\n\tldi $1, v($1) !gprellow\n\t.data\n"
                       "v:\t.quad 0\n")
    hi, lo = (isa.decode(w)[1]["disp16"] for w in program.words)
    assert (hi << 16) + lo == program.address_of("v") - program.address_of("_gp")
