"""Program -> assembly text that reassembles to the same words, bit for bit.

Each code word is printed by ``swsim.isa.disasm.format_instruction`` (``.word 0x...`` if it is
not an instruction there, so that the round trip still holds), with the program's labels as
branch targets; the data sections follow as bytes.
"""
from __future__ import annotations

from typing import Optional

from ..errors import ArgumentTypeError
from ..isa.disasm import disassemble_word, format_instruction
from .program import BSS, LDM, SEGMENT_SECTIONS, TEXT, Program, Section

__all__ = ["disassemble", "disassemble_word", "format_instruction"]

BYTES_PER_LINE = 16


def disassemble(program: Program) -> str:
    """The whole program as assembly: code with labels, then the data sections."""
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"disassemble expects a Program (swsim.assemble, load_program), "
                                f"got {type(program).__name__}")
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
    if section.name in SEGMENT_SECTIONS and section.base < program.data_base:
        image, image_base = section.data, section.base   # a package's segment (asm/package.py)
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
