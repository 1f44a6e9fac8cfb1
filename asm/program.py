"""The objects the assembler produces and the VM loads.

``ObjectFile``: one assembled source (sections, symbols, relocations).
``Program``: one or more objects linked into an image the VM can run:

* ``code``: the instruction words (numpy uint32), the first at ``code_base``;
* ``ldm_image``: the initialised per-CPE LDM bytes (.ldm, then .bss zeros), placed at LDM
  address 0 upward in every spawned CPE;
* ``data_image``: the .data/.rodata bytes, placed in main memory at ``data_base``;
* ``symbols``: every symbol with its final address;
* ``stack_bytes``: the stack the program declares (largest ``.frame`` size), used by the VM's
  load-time check that LDM data plus stack fit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import ArgumentTypeError

# Section kinds: where a section's bytes live (NOLOAD: nowhere; debug information and notes
# are assembled but not linked into the Program).
TEXT, LDM, DATA, BSS, NOLOAD = "text", "ldm", "data", "bss", "noload"
# QingLong's segments (main-memory sections a package link places apart, asm/package.py), in
# the data package's order: constants (copied once), scratch (allocated, never copied) and the
# I/O table (8-byte slots, each the address of an input or an output, written at every compute).
SEGMENT_SECTIONS = {".qconst": "constants", ".qscratch": "scratch", ".qio": "io"}
IO_SLOT_BYTES = 8


@dataclass(frozen=True)
class SegmentLayout:
    """What a first package link learnt for the second assembly (asm.build_package's
    relaxation): each segment section's linked size and each global segment symbol's offset."""
    sizes: dict
    offsets: dict


@dataclass
class Section:
    name: str                 # e.g. ".text1", ".ldm", ".data"
    kind: str                 # TEXT, LDM (initialised LDM), DATA (main memory), BSS (zeroed LDM)
    data: bytearray = field(default_factory=bytearray)  # empty for BSS; size says how big
    size: int = 0
    align: int = 4
    base: int = 0             # address after linking


@dataclass
class Symbol:
    name: str
    section: Optional[str]    # section name, None for absolute (.equ) symbols
    value: int                # offset in the section before linking, address after
    binding: str = "local"    # "local", "global" or "weak"
    type: str = "notype"      # "func", "object", "notype"
    size: int = 0
    source: Optional["SourceLine"] = None   # where it is defined (for diagnostics)


@dataclass
class Relocation:
    section: str              # section holding the field to patch
    offset: int               # byte offset of the instruction / datum in that section
    kind: str                 # "branch21", "disp16", "hi16", "lo16", "hint16", "abs32", ...
    symbol: str
    addend: int = 0
    annotation: str = ""      # e.g. "!gpdisp!3" as written in the source
    target_section: Optional[str] = None    # set: target is this object's section + addend
    source: Optional["SourceLine"] = None   # the statement that needs it (for diagnostics)


@dataclass
class SourceLine:
    file: str
    line: int
    text: str
    col: int = 1              # 1-based column of the statement (or operand) in ``text``


@dataclass
class ObjectFile:
    filename: str
    sections: dict[str, Section]
    symbols: dict[str, Symbol]
    relocations: list[Relocation]
    lines: dict[tuple[str, int], SourceLine] = field(default_factory=dict)  # (section, offset)
    stack_bytes: int = 0
    weak: set[str] = field(default_factory=set)   # names declared .weak (defined or not)


@dataclass
class Program:
    code: np.ndarray                      # uint32 instruction words
    code_base: int
    ldm_image: bytes
    data_image: bytes
    data_base: int
    symbols: dict[str, Symbol]
    sections: list[Section]
    relocations: list[Relocation]
    lines: dict[int, SourceLine] = field(default_factory=dict)  # code address -> source
    stack_bytes: int = 0

    def __post_init__(self):
        if not isinstance(self.code, np.ndarray) or self.code.dtype != np.uint32 or \
                self.code.ndim != 1:
            raise ArgumentTypeError(f"Program.code must be a 1-D uint32 numpy array of "
                                    f"instruction words, got {_described(self.code)}")
        for name in ("code_base", "data_base", "stack_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentTypeError(f"Program.{name} must be an int, got "
                                        f"{_described(value)}")
        for name in ("ldm_image", "data_image"):
            if not isinstance(getattr(self, name), bytes):
                raise ArgumentTypeError(f"Program.{name} must be bytes, got "
                                        f"{_described(getattr(self, name))}")

    @property
    def words(self) -> list[int]:
        return [int(w) for w in self.code]

    @property
    def code_end(self) -> int:
        return self.code_base + 4 * len(self.code)

    def address_of(self, name: str) -> int:
        """Final address of a symbol; KeyError with the known names if there is none."""
        try:
            return self.symbols[name].value
        except KeyError:
            known = ", ".join(sorted(self.symbols)[:20])
            raise KeyError(f"no symbol {name!r} in the program (known: {known})") from None

    def symbol_at(self, address: int) -> Optional[str]:
        """A label naming exactly this code address, if any (for disassembly)."""
        for sym in self.symbols.values():
            if sym.value == address and sym.section is not None and \
                    self._section_kind(sym.section) == TEXT:
                return sym.name
        return None

    def _section_kind(self, name: str) -> Optional[str]:
        for s in self.sections:
            if s.name == name:
                return s.kind
        return None


def _described(value) -> str:
    kind = type(value).__name__
    return f"{kind} of {value.dtype}" if isinstance(value, np.ndarray) else kind
