"""The ISA table is consistent: every encoding is unique and decodes back to its instruction."""
import pytest

from swsim import isa
from swsim.isa.table import FIELDS, MEM_BASE, CODE_BASE


def test_every_instruction_has_known_classes():
    for instr in isa.INSTRUCTIONS:
        assert instr.latency in isa.LATENCY_CLASSES, instr.name
        assert instr.cls in isa.CLASSES, instr.name
        assert instr.pipe in ("P0", "P1", "P01"), instr.name


def test_names_are_unique():
    names = [i.name for i in isa.INSTRUCTIONS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("instr", isa.INSTRUCTIONS, ids=lambda i: i.name)
def test_encoding_decodes_back(instr):
    values = {}
    for op in instr.operands:
        for f in isa.operand_fields(op):
            lo, hi = isa.field_range(f)
            values[f] = hi if f in ("ra", "rb", "rc", "r3") else lo
    word = isa.encode(instr, values)
    got, got_values, literal = isa.decode(word)
    assert got is instr and not literal
    assert got_values == values
    if instr.has_literal_form:
        register, immediate = next(filter(None, map(isa.register_or_immediate, instr.operands)))
        lit_values = {k: v for k, v in values.items() if k != register}
        lit_values.update(isa.split_immediate(immediate, isa.IMMEDIATE_RANGES[immediate][1]))
        got, got_values, literal = isa.decode(isa.encode(instr, lit_values, literal=True))
        assert got is instr and literal and got_values == lit_values


def test_spec_encoding_examples():
    # MACHINE.md §4 examples
    assert isa.BY_NAME["ldi"].opcode == 0x3E and isa.BY_NAME["ldih"].opcode == 0x3F
    assert isa.BY_NAME["vmad"].opcode == 0x1B and isa.BY_NAME["vmad"].func == 0x01
    assert isa.BY_NAME["addl"].func == 0x08 and isa.BY_NAME["addl"].lit_opcode == 0x12
    assert isa.BY_NAME["rcid"].func == 0x0040 and isa.BY_NAME["rcid"].opcode == 0x06
    assert isa.BY_NAME["vaddw"].lit_func == 0x20


def test_appendix_numbers_of_the_compiled_code_instructions():
    # MACHINE.md appendix: the public SW64 numbers where the table has them
    for name, func in [("zap", 0x68), ("zapnot", 0x69), ("sextb", 0x6A), ("sexth", 0x6B)]:
        instr = isa.BY_NAME[name]
        assert (instr.opcode, instr.func, instr.lit_opcode) == (0x10, func, 0x12), name
    for name, func, lit in [("sllow", 0x0C, 0x2C), ("srlow", 0x0D, 0x2D)]:
        instr = isa.BY_NAME[name]
        assert (instr.opcode, instr.func, instr.lit_func) == (0x1A, func, lit), name
    # vlog: opcode 0x14 with the truth table's bits 7-6 in [27:26] and bits 5-0 in [15:10]
    word = isa.encode(isa.BY_NAME["vlog"], {"ra": 1, "rb": 2, "r3": 3, "rc": 4,
                                              **isa.split_immediate("truth", 0b10_110011)})
    assert word >> 28 == 0x14 >> 2 and word >> 26 & 3 == 0b10 and word >> 10 & 63 == 0b110011
    assert {opcode for opcode, _, _ in isa.encoding_forms(isa.BY_NAME["vlog"])} == \
        {0x14, 0x15, 0x16, 0x17}


def test_register_and_immediate_forms_share_a_mnemonic():
    for name in ("putr", "putc", "synr", "sync", "vshff"):
        instr = isa.BY_NAME[name]
        register, _ = next(filter(None, map(isa.register_or_immediate, instr.operands)))
        assert instr.has_literal_form
        assert register in isa.source_fields(instr)
        assert register not in isa.source_fields(instr, literal=True)


def test_field_out_of_range_is_refused():
    with pytest.raises(ValueError, match="out of range"):
        isa.encode(isa.BY_NAME["ldi"], {"ra": 1, "rb": 2, "disp16": 40000})


def test_address_map_is_disjoint():
    assert CODE_BASE < MEM_BASE and 0x10000 <= CODE_BASE
    assert FIELDS["opcode"] == (26, 6, False)
