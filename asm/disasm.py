"""Program -> assembly text that reassembles to the same words, bit for bit.

Operands are printed from the ISA table's syntax templates. A word that no instruction encodes,
or whose unused bits are not canonical, or whose operands the assembler would refuse (e.g.
``putr $1, 200``), or whose branch leaves the code, is printed as ``.word 0x...`` so that the
round trip still holds.
"""
from __future__ import annotations

from typing import Optional

from ..isa import decode, encode, operand_fields
from .assembler import IMMEDIATE_RANGES
from .program import BSS, LDM, TEXT, Program, Section

BYTES_PER_LINE = 16


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
        elif template == "rb|lit":
            parts.append(str(values["lit"]) if literal else f"${values['rb']}")
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
        else:  # lane, n, mask, hint
            (field,) = operand_fields(template)
            value = values[field]
            low, high = IMMEDIATE_RANGES[template]
            if not low <= value <= high:
                return None
            parts.append(str(value))
    return f"{instr.name}\t{', '.join(parts)}" if parts else instr.name


def disassemble_word(word: int, address: Optional[int] = None) -> str:
    """One word as text (``.word 0x...`` if it is not an instruction)."""
    return format_instruction(word, address) or f".word\t{word:#010x}"


def disassemble(program: Program) -> str:
    """The whole program as assembly: code with labels, then the data sections."""
    code_labels: dict[int, list[str]] = {}                 # address -> names
    labels: dict[tuple[str, int], list[str]] = {}          # (section, address) -> names
    for name, sym in sorted(program.symbols.items(), key=lambda kv: kv[1].binding != "global"):
        if sym.section is None:
            continue
        if program._section_kind(sym.section) == TEXT:
            code_labels.setdefault(sym.value, []).append(name)
        else:
            labels.setdefault((sym.section, sym.value), []).append(name)

    def label_at(target: int) -> Optional[str]:
        return code_labels.get(target, [None])[0]

    out = ["\t.text"]
    for index, word in enumerate(program.words):
        address = program.code_base + 4 * index
        out.extend(f"{name}:" for name in code_labels.get(address, []))
        text = format_instruction(word, address, label_at, (program.code_base, program.code_end))
        out.append(f"\t{text or f'.word {word:#010x}'}")
    out.extend(f"{name}:" for name in code_labels.get(program.code_end, []))
    for section in program.sections:
        if section.kind != TEXT:
            out.extend(_data_lines(section, labels, program))
    return "\n".join(out) + "\n"


def _data_lines(section: Section, labels: dict, program: Program) -> list[str]:
    """The section as ``.byte`` runs (``.skip`` if nobits), broken at every label."""
    in_ldm = section.kind in (LDM, BSS)
    image, image_base = (program.ldm_image, 0) if in_ldm else (program.data_image,
                                                              program.data_base)
    end = section.base + section.size
    stops = sorted({end} | {address for name, address in labels
                            if name == section.name and section.base < address < end})
    # T (thread-local) keeps a section of any name in LDM when reassembled
    flags = {BSS: '"wa", "nobits"', LDM: '"waT"'}.get(section.kind, '"wa"')
    out = [f"\t.section\t{section.name}, {flags}", f"\t.balign\t{section.align}"]
    position = section.base
    for stop in stops:
        out.extend(f"{name}:" for name in labels.get((section.name, position), []))
        if section.kind == BSS:
            out.append(f"\t.skip\t{stop - position}")
        for start in range(position, stop if section.kind != BSS else position, BYTES_PER_LINE):
            chunk = image[start - image_base:min(stop, start + BYTES_PER_LINE) - image_base]
            out.append("\t.byte\t" + ", ".join(f"{b:#04x}" for b in chunk))
        position = stop
    out.extend(f"{name}:" for name in labels.get((section.name, end), []))
    return out
