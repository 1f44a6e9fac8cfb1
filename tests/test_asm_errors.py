"""Every class of bad input gives file:line:col, a message saying what is wrong, the source line
and a caret; all errors of a file are reported."""
import pytest

import swsim
from swsim.asm import AsmError, assemble, assemble_object, link
from swsim.asm.diagnostics import MAX_ERRORS
from swsim.errors import SwsimError


def errors(text, filename="bad.s", **kwargs):
    with pytest.raises(AsmError) as info:
        assemble(text, filename, **kwargs)
    return info.value.diagnostics


def only_error(text):
    (diag,) = errors(text)
    return diag


@pytest.mark.parametrize("text, line, col, message", [
    # unknown mnemonic, with the closest known one
    ("\tnop\n\tvmadd $1, $2, $3, $4\n", 2, 2, "unknown instruction vmadd (did you mean vmad?)"),
    ("\tldd $1, 0($2)\n", 1, 2, "unknown instruction ldd (did you mean fldd, ldde or vldd?)"),
    # wrong operands: what the syntax template expects
    ("\tvldd $1, $2\n", 1, 11, "expected a memory operand disp(rb), got '$2'"),
    ("\taddl $1, $2\n", 1, 2, "addl takes 3 operands, got 2; expected: addl ra, rb|lit, rc"),
    ("\taddl $1, 2, 3\n", 1, 14, "expected a register for operand 'rc', got '3' "
                                  "(syntax: addl ra, rb|lit, rc)"),
    ("\tfaddd $1, 2, $3\n", 1, 12, "expected a register for operand 'rb'"),
    ("\tjmp $31, 8($26)\n", 1, 11, "expected a register in parentheses"),
    ("\tbeq $1, 4($2)\n", 1, 10, "expected a branch target"),
    ("\tmov $1\n", 1, 2, "mov expects 2 operands: mov ra, rc"),
    ("\taddl $1, $40, $2\n", 1, 11, "unknown register $40"),
    # out-of-range immediates and displacements, with the range
    ("\taddl $1, 256, $2\n", 1, 11, "literal operand 256 is out of range 0..255"),
    ("\tldl $1, 40000($2)\n", 1, 10, "displacement 40000 is out of range -32768..32767"),
    ("\tputr $1, 9\n", 1, 11, "operand 'n' 9 is out of range 0..8"),
    ("\tvinsw $1, $2, 8, $3\n", 1, 16, "operand 'lane' 8 is out of range 0..7"),
    ("\tsynr 256\n", 1, 7, "operand 'mask' 256 is out of range 0..255"),
    ("\tldi $1, 0x80000000\n", 1, 10, "does not fit 32 bits signed"),
    ("\t.data\n\t.byte 256\n", 2, 8, "1-byte value 256 is out of range -128..255"),
    # symbols
    ("a:\tnop\na:\tnop\n", 2, 1, "symbol a is already defined (first defined at bad.s:1)"),
    ("\tbr $31, nowhere\n", 1, 10, "undefined symbol nowhere"),
    ("\t.skip later\nlater:\n", 1, 8, "symbol later is not defined (here it must be defined "
                                      "before use)"),
    ("\tbr 1b\n", 1, 5, "no numeric label 1: before this reference"),
    ("\tbr 3f\n", 1, 5, "no numeric label 3: after this reference"),
    # expressions
    ("\tldi $1, 1 / 0\n", 1, 10, "division by zero"),
    ("\t.data\na:\t.quad a * 2\n", 2, 10, "operator * needs numbers, not addresses"),
    ("\tldi $1, 3(\n", 1, 12, "unexpected end of statement"),
    ("\tldi $1, 3 ? 4\n", 1, 12, "unexpected character '?'"),
    # directives
    ("\t.globl f\n\t.algin 3\n", 2, 2, "unknown directive .algin (did you mean .align?)"),
    ("\t.align x\n", 1, 9, "symbol x is not defined"),
    ("\t.align\n", 1, 2, ".align expects a power of two exponent"),
    ("\t.data\n\t.ascii 5\n", 2, 9, "expected a string, got '5'"),
    ("\t.data\n\t.org 4\n\t.org 2\n", 3, 7, ".org cannot move backwards"),
    ("\t.bss\n\t.byte 1\n", 2, 2, ".bss holds no data (nobits)"),
    ("\t.data\n\tnop\n", 2, 2, "instruction nop outside a code section"),
    ("\t.type f, @thing\n", 1, 11, "unknown symbol type thing"),
    ("\t.err\n", 1, 2, ".err encountered"),
    ('\t.error "custom stop"\n', 1, 2, ".error: custom stop"),
    # unterminated blocks
    ("\t.macro m\n\tnop\n", 1, 2, "unterminated .macro (missing .endm)"),
    ("\t.rept 3\n\tnop\n", 1, 2, "unterminated .rept (missing .endr)"),
    ("\t.irp r, 1, 2\n\tnop\n", 1, 2, "unterminated .irp (missing .endr)"),
    ("\t.if 1\n\tnop\n", 1, 2, "unterminated conditional (missing .endif)"),
    ("\t.endif\n", 1, 2, ".endif without a matching .if"),
    ("\t.endm\n", 1, 2, ".endm without a matching .macro"),
    ("\t.if 1\n\t.else\n\t.else\n\t.endif\n", 3, 2, ".else after .else"),
    ("\t.include \"missing.inc\"\n", 1, 2, "cannot find include file 'missing.inc'"),
    # relocation annotations
    ("\tldi $gp, 0($gp) !gpdisp!4\n", 1, 18, "!gpdisp!4 must be on an ldih followed by an ldi"),
    ("\tldih $gp, 0($27) !gpdisp!4\n", 1, 2, "!gpdisp!4 has no matching ldi"),
    ("\tldl $1, 0($2) !lituse_base!9\n", 1, 16, "!lituse_base!9 has no earlier !literal!9"),
    ("\tldl $1, 0($2) !tlsgd!1\n", 1, 16, "unsupported relocation annotation !tlsgd!1"),
    ("\tstl $1, x($gp) !literal!1\n\t.data\nx:\n", 1, 17, "!literal!1 must be on a load"),
    # link-time ranges
    ("\tldl $1, buf($31)\n\t.data\nbuf:\t.quad 0\n", 1, 10, "does not fit a 16-bit "
                                                             "displacement"),
    ("\tbeq $1, 0x20000000\n", 1, 10, "branch target 0x20000000 is not in the code"),
])
def test_error_classes(text, line, col, message):
    diag = only_error(text)
    assert (diag.file, diag.line, diag.col) == ("bad.s", line, col), str(diag)
    assert message in diag.message, str(diag)


def test_diagnostic_text_has_source_line_and_caret():
    diag = only_error("\tnop\n\taddl $1, 300, $2\n")
    assert str(diag) == ("bad.s:2:11: error: literal operand 300 is out of range 0..255\n"
                         "\taddl $1, 300, $2\n\t         ^")


def test_every_error_of_a_file_is_reported():
    diags = errors("\tfoo\n\tnop\n\tbar $1\n\tldi $1, 1(\n\tbr nowhere\n")
    # undefined symbols (a link error) come with the others, in line order
    assert [(d.line, d.col) for d in diags] == [(1, 2), (3, 2), (4, 12), (5, 5)]
    assert "undefined symbol nowhere" in diags[-1].message
    assert [d.line for d in errors("\tbr a\n\tbr b\n")] == [1, 2]


def test_error_count_is_limited():
    diags = errors("\tfoo\n" * (MAX_ERRORS + 20))
    assert len(diags) == MAX_ERRORS + 1 and "too many errors" in diags[-1].message


def test_errors_inside_macros_point_at_the_macro_body_and_name_the_call():
    diags = errors("\t.macro load r, d\n\tldl \\r, \\d($2)\n\t.endm\n\tnop\n\tload $1, 99999\n")
    (diag,) = diags
    assert (diag.line, diag.col) == (2, 10) and "displacement 99999" in diag.message
    assert diag.source == "\tldl $1, 99999($2)"
    assert "in expansion of macro 'load' at bad.s:5" in str(diag)


def test_errors_inside_includes_point_at_the_included_file(tmp_path):
    (tmp_path / "part.inc").write_text("\tnop\n\tfrob $1\n")
    main = tmp_path / "main.s"
    main.write_text('\tnop\n\t.include "part.inc"\n\tbogus\n')
    with pytest.raises(AsmError) as info:
        swsim.assemble_file(str(main))
    first, second = info.value.diagnostics
    assert first.file.endswith("part.inc") and (first.line, first.col) == (2, 2)
    assert second.file.endswith("main.s") and second.line == 3


def test_macro_argument_errors():
    diag = only_error("\t.macro m a\n\tnop\n\t.endm\n\tm 1, 2\n")
    assert diag.line == 4 and "too many arguments for macro m (it takes 1: a)" in diag.message
    assert "did you mean load2?" in only_error("\t.macro load2 a\n\t.endm\n\tlaod2 1\n").message


def test_runaway_macro_recursion_is_caught():
    diags = errors("\t.macro r\n\tr\n\t.endm\n\tr\n")
    assert any("nesting deeper than" in d.message for d in diags)


def test_link_refuses_duplicate_globals_and_undefined_symbols():
    a = assemble_object("\t.globl f\nf:\tnop\n\tbr $31, g\n", "a.s")
    b = assemble_object("\t.globl f\n\tnop\nf:\tnop\n", "b.s")
    with pytest.raises(AsmError) as info:
        link([a, b])
    dup, undefined = info.value.diagnostics
    assert (dup.file, dup.line, dup.col) == ("b.s", 3, 1)
    assert "duplicate global symbol f (first defined at a.s:2)" in dup.message
    assert (undefined.file, undefined.line, undefined.col) == ("a.s", 3, 10)
    assert "undefined symbol g" in undefined.message


def test_local_symbols_do_not_resolve_across_objects():
    a = assemble_object("\tbr $31, helper\n", "a.s")
    b = assemble_object("helper:\tnop\n", "b.s")
    with pytest.raises(AsmError, match="undefined symbol helper"):
        link([a, b])


def test_asm_error_is_a_swsim_error():
    assert issubclass(AsmError, SwsimError) and swsim.AsmError is AsmError
