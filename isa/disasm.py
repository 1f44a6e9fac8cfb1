"""The text of one instruction word, from the ISA table's operand syntax templates.

The text reassembles to the same word, bit for bit: a word that no instruction encodes, whose
unused bits are not canonical, whose operands the assembler would refuse (e.g. ``putr $1,
200``) or whose branch leaves the code is not an instruction here (``format_instruction`` gives
None, ``disassemble_word`` a ``.word`` directive). Whole programs with labels and data are
``swsim.asm.disasm``'s.
"""
from __future__ import annotations

from typing import Optional

from .encoding import decode, encode
from .table import IMMEDIATE_RANGES, immediate_value, operand_fields, register_or_immediate


def format_instruction(word: int, address: Optional[int] = None,
                       label_at=lambda address: None, code_range=None) -> Optional[str]:
    """``mnemonic\\toperands`` for a word, or None if it does not round-trip.

    Branch targets use ``label_at(target)`` if that names a label, else ``.+N`` (needs
    ``address``); a branch may go to ``code_range`` (start, end), both included (the end of
    the code is a valid label).
    """
    decoded = decode(word)
    if decoded is None:
        return None
    instr, values, literal = decoded
    if encode(instr, values, literal) != word:
        return None  # bits outside the operand fields are set
    parts = []
    for template in instr.operands:
        if template in ("ra", "rb", "rc", "r3"):
            parts.append(f"${values[template]}")
        elif register_or_immediate(template) and not literal:
            parts.append(f"${values[register_or_immediate(template)[0]]}")
        elif template == "disp(rb)":
            parts.append(f"{values['disp16']}(${values['rb']})")
        elif template == "(rb)":
            parts.append(f"(${values['rb']})")
        elif template == "label":
            offset = 4 + 4 * values["disp21"]
            if address is None:
                parts.append(f".{offset:+d}")
                continue
            target = address + offset
            if code_range is not None and not code_range[0] <= target <= code_range[1]:
                return None
            parts.append(label_at(target) or f".{offset:+d}")
        else:  # an immediate, or the immediate of a reg|imm template in the literal form
            immediate = (register_or_immediate(template) or (None, template))[1]
            value = immediate_value(operand_fields(template, literal), values)
            low, high = IMMEDIATE_RANGES[immediate]
            if not low <= value <= high:
                return None
            parts.append(str(value))
    return f"{instr.name}\t{', '.join(parts)}" if parts else instr.name


def disassemble_word(word: int, address: Optional[int] = None) -> str:
    """One word as text (``.word 0x...`` if it is not an instruction)."""
    return format_instruction(word, address) or f".word\t{word:#010x}"
