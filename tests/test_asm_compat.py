"""What GNU as accepts and the SW26010 compiler's CPE output uses (issue 13): $-labels, section
names as symbols, .section flag strings, non-loaded debug sections, .weak, the `or` alias, the gp
reload after a call and thread-local variables reached by !tprel* relocations."""
import pytest

import swsim
from swsim.asm import AsmError, assemble, assemble_object, link
from swsim.isa import BY_NAME, CODE_BASE, MEM_BASE, encode
from swsim.vm import Machine
from vm_helpers import reg


def run(source, engine="python"):
    machine = Machine()
    machine.run(assemble(source, "t.s"), cpes=[0], engine=engine)
    return machine


def only_error(text):
    with pytest.raises(AsmError) as info:
        assemble(text, "bad.s")
    (diag,) = info.value.diagnostics
    return diag


# ---- $-labels ---------------------------------------------------------------------------------
def test_dollar_labels_are_symbols_and_dollar_registers_stay_registers():
    program = assemble("""
        .globl kernel
    kernel:
    $ng..kernel:
        ldi $1, 3
        br $31, $ng..skip
        ldi $1, 99
    $ng..skip: addl $1, 1, $sp
        halt
    """)
    assert program.symbols["$ng..kernel"].value == CODE_BASE
    assert program.symbols["$ng..skip"].value == CODE_BASE + 12
    machine = Machine()
    machine.run(program, cpes=[0], engine="python")
    assert reg(machine, 1) == 3 and reg(machine, 30) == 4


@pytest.mark.parametrize("text, col, message", [
    ("\tldi $sq, 1\n", 6, "unknown register $sq (registers are $0..$31"),
    ("\tldi $44, 1\n", 6, "unknown register $44"),
    ("$5:\tnop\n", 1, "register name $5 cannot be a label"),
])
def test_dollar_names_that_are_not_registers(text, col, message):
    diag = only_error(text)
    assert diag.col == col and message in diag.message, str(diag)


# ---- sections ---------------------------------------------------------------------------------
def test_section_flag_strings_and_types_are_accepted():
    program = assemble("""
        .section .note.GNU-stack,"",@progbits
        .section .text.kernel,"ax",@progbits
        nop
        .section .rodata.cst8,"aM",@progbits,8
        .quad 1
        .section .sbss,"aw",%nobits
        .skip 8
        .section ".ldm.buf", "aw"
        .byte 7
        .section my_tls,"awT",@progbits
        .byte 8
        .section my_tls_zero,"awT",@nobits
        .skip 2
    """)
    kinds = {s.name: (s.kind, s.size) for s in program.sections}
    assert kinds == {".text.kernel": ("text", 4), ".rodata.cst8": ("data", 8),
                     ".ldm.buf": ("ldm", 1), "my_tls": ("ldm", 1), ".sbss": ("bss", 8),
                     "my_tls_zero": ("bss", 2)}


def test_a_section_name_is_the_address_of_its_start():
    program = assemble("""
        .text
        ldi $1, .rodata
        .data
        .quad 1
    table: .quad .data, .rodata + 8, .sbss
        .section .rodata
        .quad 2, 3
        .section .sbss,"aw",@nobits
        .skip 4
    """)
    rodata = program.address_of(".rodata") if ".rodata" in program.symbols else \
        next(s.base for s in program.sections if s.name == ".rodata")
    table = program.symbols["table"].value - MEM_BASE
    words = [int.from_bytes(program.data_image[table + 8 * i:table + 8 * i + 8], "little")
             for i in range(3)]
    assert words == [MEM_BASE, rodata + 8, 0]  # .sbss is the first LDM section: address 0


def test_another_objects_section_by_name():
    a = assemble_object("\t.data\n\t.quad .rodata\n", "a.s")
    b = assemble_object("\t.section .rodata\n\t.quad 5\n", "b.s")
    program = link([a, b])
    rodata = next(s.base for s in program.sections if s.name == ".rodata")
    assert int.from_bytes(program.data_image[:8], "little") == rodata


def test_the_contents_of_debug_sections_are_skipped():
    program = assemble("""
        .section .debug_info,"",@progbits
    .Ldebug_info0:
        .long .debug_info, .Ldebug_info0, .Ltext0
        .uleb128 0x11
        .section .debug_abbrev,"",@progbits
        .byte 1, 0x11, 300
        .sleb128 -8
        .text
    .Ltext0: nop
        .section .debug_line
        .2byte 2
        .text
        ldi $1, 2
    """)
    assert [s.name for s in program.sections] == [".text"] and len(program.words) == 2
    assert ".Ldebug_info0" not in program.symbols


def test_code_cannot_refer_to_debug_information():
    diag = only_error('\t.section .debug_str,""\nname: .byte 0\n\t.text\n\tldi $1, name\n')
    assert (diag.line, "not loaded") == (4, "not loaded") and ".debug_str" in diag.message


def test_section_needs_a_name():
    diag = only_error("\t.section ,\"aw\"\n")
    assert diag.col == 11 and ".section expects a section name" in diag.message
    diag = only_error("\t.section .a b\n")
    assert diag.col == 11 and ".section expects a section name" in diag.message


# ---- .weak ------------------------------------------------------------------------------------
def test_undefined_weak_symbol_is_zero():
    program = assemble("\t.weak hook\n\t.data\n\t.quad hook, hook + 8\n")
    assert program.data_image[:16] == (0).to_bytes(8, "little") + (8).to_bytes(8, "little")


def test_a_strong_definition_overrides_a_weak_one():
    weak = assemble_object("\t.weak f\nf:\tnop\n\t.data\n\t.quad f\n", "weak.s")
    strong = assemble_object("\t.globl f\n\tnop\nf:\tnop\n", "strong.s")
    other_weak = assemble_object("\t.weak f\nf:\tnop\n", "weak2.s")
    program = link([weak, other_weak, strong])
    assert program.symbols["f"].value == CODE_BASE + 12  # strong.s's second word
    assert int.from_bytes(program.data_image[:8], "little") == CODE_BASE + 12
    assert link([weak, other_weak]).symbols["f"].binding == "weak"


# ---- `or`, gp reload --------------------------------------------------------------------------
def test_or_is_bis():
    program = assemble("\tor $1, $2, $3\n\tor $1, 200, $3\n")
    bis = BY_NAME["bis"]
    assert program.words == [encode(bis, {"ra": 1, "rb": 2, "rc": 3}),
                             encode(bis, {"ra": 1, "lit": 200, "rc": 3}, literal=True)]


def test_gp_reload_after_a_call_loads_gp():
    machine = run("""
        .globl kernel
    kernel:
        ldih $gp, 0($27) !gpdisp!1
        ldi $gp, 0($gp) !gpdisp!1
        mov $26, $9
        bsr $26, callee
        ldih $gp, 0($26) !gpdisp!2
        ldi $gp, 0+4($gp) !gpdisp!2
        ldl $1, value($gp) !gprel
        halt
    callee:
        ldi $gp, 1
        ret
        .data
    value: .quad 41
    """)
    assert reg(machine, 29) == MEM_BASE + 0x8000 and reg(machine, 1) == 41


def test_gpdisp_displacement_must_be_a_number():
    diag = only_error("\tldih $gp, x($26) !gpdisp!1\n\tldi $gp, 0($gp) !gpdisp!1\nx:\n")
    assert diag.col == 12 and "must be a number" in diag.message


# ---- thread-local storage ---------------------------------------------------------------------
TLS_PROGRAM = """
    .section .tdata,"awT",@progbits
    .align 3
    .type counter, @object
counter: .quad 40
    .section .tbss,"awT",@nobits
    .align 2
    .type _MYID, @tls_object
_MYID: .skip 4
    .text
    .globl kernel
kernel:
    ldih $1, counter($31) !tprelhi
    ldl $2, counter($1) !tprello
    addl $2, 2, $2
    stl $2, counter($1) !tprello
    ldl $3, counter($31) !tprel
    ldi $4, 7
    stw $4, _MYID($31) !tprel
    ldw $5, _MYID($31) !tprel
    ldi $6, _MYID
    halt
"""


@pytest.mark.parametrize("engine", ["python", "c"])
def test_thread_local_variables_live_in_each_cpes_ldm(engine):
    program = assemble(TLS_PROGRAM)
    counter, myid = program.symbols["counter"].value, program.symbols["_MYID"].value
    assert (counter, myid) == (0, 8)  # .tdata then .tbss from LDM address 0
    machine = Machine()
    machine.run(program, cpes=[0, 5], engine=engine)
    for cpe in (0, 5):
        assert [reg(machine, r, cpe) for r in (2, 3, 5, 6)] == [42, 42, 7, 8]


def test_tdata_and_tbss_directives():
    program = assemble("\t.tdata\nv: .quad 9\n\t.tbss\nw: .skip 8\n")
    kinds = {s.name: s.kind for s in program.sections}
    assert kinds == {".tdata": "ldm", ".tbss": "bss"} and program.ldm_image[:8] == \
        (9).to_bytes(8, "little")


def test_tprel_of_a_main_memory_symbol_is_refused():
    diag = only_error("\tldl $1, x($31) !tprel\n\t.data\nx: .quad 0\n")
    assert (diag.line, diag.col) == (1, 10)
    assert "!tprel needs a thread-local (LDM) symbol; the target 0x40000000 is outside LDM" \
        in diag.message


def test_tprel_needs_a_memory_instruction():
    diag = only_error("\taddl $1, 2, $3 !tprello\n")
    assert "!tprello must be on a memory-format instruction" in diag.message


def test_a_thread_local_variable_of_another_object():
    runtime = assemble_object('\t.section .tbss,"awT",@nobits\n\t.globl _MYID\n\t.skip 16\n'
                              "_MYID: .skip 4\n", "runtime.s")
    user = assemble_object("\t.globl kernel\nkernel:\tldi $2, 9\n\tstw $2, _MYID($31) !tprel\n"
                           "\tldih $1, _MYID($31) !tprelhi\n\tldw $3, _MYID($1) !tprello\n"
                           "\thalt\n", "user.s")
    program = link([user, runtime])
    assert program.symbols["_MYID"].value == 16
    machine = Machine()
    machine.run(program, cpes=[3], engine="python")
    assert reg(machine, 3, cpe=3) == 9


# ---- a symbol as a jump's hint ------------------------------------------------------------------
def test_a_jump_hint_may_name_the_target_and_holds_its_word_displacement():
    from swsim.asm import disassemble
    from swsim.isa import decode
    program = assemble("""
	.globl f
f:	ldi $27, g
	call $26,($27),g
	jmp $31,($27),g+8
	ret $31,($26),1
	call $26,($27),back
back:	call $26,($27),f+0x40000
	halt
g:	ret
""")
    # (target - (pc + 4)) / 4 in the signed 16-bit field; f+0x40000 lies 0x10000 words ahead
    # (wrapped: 0x10000 - 7 keeps its low 16 bits, -7)
    assert [decode(int(w))[1]["disp16"] for w in program.code[2:7]] == [5, 6, 1, 0, -7]
    assert assemble(disassemble(program)).words == program.words


def test_a_hint_naming_a_symbol_of_another_object_is_resolved_at_link_time():
    caller = assemble_object("\t.globl f\nf:\tldi $27, h\n\tcall $26,($27),h\n\thalt\n", "a.s")
    callee = assemble_object("\t.globl h\nh:\tret\n", "b.s")
    program = link([caller, callee])
    from swsim.isa import decode
    assert decode(int(program.code[2]))[1]["disp16"] == 1    # h follows the halt
    with pytest.raises(AsmError, match="undefined symbol nowhere"):
        link([assemble_object("f:\tcall $26,($27),nowhere\n", "c.s")])
