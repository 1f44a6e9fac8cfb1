"""Encode and decode instruction words from the ISA table (``swsim.isa.table``)."""
from __future__ import annotations

from typing import Optional

from .table import (FIELDS, FORMATS, INSTRUCTIONS, UNUSED_REGISTER, Instr, encoding_forms,
                    field_range, literal_register, operand_fields, register_fields)


def get_field(word: int, name: str) -> int:
    low, width, signed = FIELDS[name]
    value = (word >> low) & ((1 << width) - 1)
    if signed and value >> (width - 1):
        value -= 1 << width
    return value


def put_field(word: int, name: str, value: int) -> int:
    low, width, _ = FIELDS[name]
    lo, hi = field_range(name)
    if not lo <= value <= hi:
        raise ValueError(f"value {value} out of range {lo}..{hi} for field {name}")
    return word | ((value & ((1 << width) - 1)) << low)


def encode(instr: Instr, values: dict[str, int], literal: bool = False) -> int:
    """Encode ``instr`` with field ``values`` (e.g. {"ra": 1, "lit": 5, "rc": 2}).

    Register fields the syntax names but ``values`` omits, and register fields the format has
    but the instruction does not use, are encoded as $31.
    """
    opcode = instr.opcode
    func = instr.func
    if literal:
        if instr.lit_opcode is not None:
            opcode = instr.lit_opcode
        elif instr.lit_func is not None:
            func = instr.lit_func
        else:
            raise ValueError(f"{instr.name} has no literal form")
    word = put_field(0, "opcode", opcode)
    func_field = FORMATS[instr.format(literal)]
    if func_field is not None:
        word = put_field(word, func_field, func)
    for reg in _format_registers(instr, literal):
        word = put_field(word, reg, values.get(reg, UNUSED_REGISTER))
    for name, value in values.items():
        if name not in ("ra", "rb", "rc", "r3"):
            word = put_field(word, name, value)
    return word


def _format_registers(instr: Instr, literal: bool) -> list[str]:
    """Register fields the instruction's format carries (used or not)."""
    regs = {"mem": ["ra", "rb"], "jump": ["ra", "rb"], "branch": ["ra"],
            "opr": ["ra", "rb", "rc"], "sel": ["ra", "rb", "r3", "rc"], "fp": ["ra", "rb", "rc"],
            "fma": ["ra", "rb", "r3", "rc"], "vec": ["ra", "rb", "rc"], "misc": ["ra"],
            "cpe": ["ra", "rb"], "dma": ["ra", "rb", "rc"], "vlog": ["ra", "rb", "r3", "rc"],
            "shfi": ["ra", "rb", "rc"]}[instr.format(literal)]
    if literal:
        regs = [r for r in regs if r != literal_register(instr)]
    if "lane" in instr.operands:
        regs = [r for r in regs if r != "r3"]
    return regs


def _build_decode_table() -> dict[int, tuple[Optional[str], dict]]:
    table: dict[int, tuple[Optional[str], dict]] = {}
    for instr in INSTRUCTIONS:
        for opcode, func, literal in encoding_forms(instr):
            func_field = FORMATS[instr.format(literal)]
            entry = table.setdefault(opcode, (func_field, {}))
            if entry[0] != func_field:
                raise AssertionError(f"opcode {opcode:#x} used by two formats")
            key = func if func_field is not None else None
            if key in entry[1]:
                raise AssertionError(f"duplicate encoding {opcode:#x}/{key} ({instr.name})")
            entry[1][key] = (instr, literal)
    return table


DECODE_TABLE = _build_decode_table()


def lookup(word: int) -> Optional[tuple[Instr, bool]]:
    """(instruction, is literal form) for a word, or None if no instruction has its encoding."""
    entry = DECODE_TABLE.get(get_field(word, "opcode"))
    if entry is None:
        return None
    func_field, funcs = entry
    return funcs.get(get_field(word, func_field) if func_field else None)


def decode(word: int) -> Optional[tuple[Instr, dict[str, int], bool]]:
    """Decode a word into (instruction, field values of its operands, is literal form).

    Returns None for a word no instruction encodes. Only the fields the operand syntax names
    are returned; other bits are ignored.
    """
    hit = lookup(word)
    if hit is None:
        return None
    instr, literal = hit
    values = {}
    for op in instr.operands:
        for name in operand_fields(op, literal):
            values[name] = get_field(word, name)
    return instr, values, literal


__all__ = ["encode", "decode", "lookup", "get_field", "put_field", "field_range",
           "operand_fields", "register_fields", "DECODE_TABLE"]
