"""ObjectFiles -> one Program image: place sections, resolve symbols, apply relocations.

Placement: code sections (in object order, then section order) from ``CODE_BASE``; initialised
LDM sections then zeroed (.bss) ones from LDM address 0; main-memory data from ``MEM_BASE``.
Sections of the same name from several objects are merged, each piece at its own alignment.
Non-loaded sections (debug information, notes) and their symbols are dropped.
Thread-local sections (.tdata, .tbss) are LDM sections: every CPE has its own LDM, so its TLS
block is simply its LDM, and the thread pointer is TLS_THREAD_POINTER.

A package link (``link(..., package=True)``, QingLong's data package, asm/package.py) places
the segment sections (SEGMENT_SECTIONS) each in a segment of its own from offset 0, prefix
summing the objects' pieces, and fills the ``!seg`` / ``!io`` relocations with offsets from the
segment's base: the segments' addresses are known only when the package is loaded, so no other
relocation may name them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from ..isa import CODE_BASE, LDM_BASE, MEM_BASE
from ..isa.encoding import FIELDS, put_field
from .words import DISP16, GP_OFFSET, GP_SYMBOL, NOP_WORD, split_hi_lo
from .diagnostics import DiagnosticLog, Origin, StatementError
from .program import (BSS, DATA, IO_SLOT_BYTES, LDM, NOLOAD, SEGMENT_SECTIONS, TEXT, ObjectFile,
                      Program, Relocation, Section, SourceLine, Symbol)

# Output regions: the section kinds placed one after another, and where they start.
REGIONS = ((CODE_BASE, (TEXT,)), (LDM_BASE, (LDM, BSS)), (MEM_BASE, (DATA,)))
# What a relocation patches, by kind: the field (a 4-byte instruction's) or the datum's bytes.
RELOCATION_BYTES = {**dict.fromkeys(("branch21", "hint16", "hi16", "lo16", "disp16",
                                     "gprel_hi16", "gprel_lo16", "gprel16", "tprel_hi16",
                                     "tprel_lo16", "tprel16"), 4), "abs32": 4, "abs64": 8}
SEGMENT_KINDS = ("seg16", "seg_hi16", "seg_lo16", "io16")
RELOCATION_BYTES.update(dict.fromkeys(SEGMENT_KINDS, 4))
# [choice] !tprel* offsets are LDM addresses: a CPE's thread pointer is LDM address 0.
TLS_THREAD_POINTER = LDM_BASE


@dataclass(frozen=True)
class Library:
    """Objects linked after a program's only if it uses a global symbol they define (as ld
    takes a member from an archive), and the names the library knows but does not provide,
    each with why: a program using one is refused with that reason."""
    name: str
    objects: tuple[ObjectFile, ...]
    refused: Mapping[str, str] = field(default_factory=dict)


def link(objects: list[ObjectFile], libraries: tuple[Library, ...] = (),
         symbols: Optional[Mapping[str, int]] = None, package: bool = False) -> Program:
    """One Program from ``objects`` and, after them, each library they use (in order).
    ``symbols``: addresses of symbols the objects use and the host defines (C's ``extern
    double A[]`` of a host array), as ``ld --defsym``; an object may not define one too.
    ``package``: segment sections in segments of their own (module docstring); their bytes are
    the Program's ``sections``, not its ``data_image``."""
    objects = list(objects)
    for obj in objects:
        if not isinstance(obj, ObjectFile):
            raise ArgumentTypeError(f"objects must be ObjectFiles (swsim.asm.assemble_object, "
                                    f"load_object), got {type(obj).__name__}")
    symbols = dict(symbols or {})
    for name, value in symbols.items():
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentTypeError(f"symbols must map names to int addresses, got "
                                    f"{name!r}: {value!r}")
        if not 0 <= value < 1 << 32:
            raise ArgumentError(f"symbols: address {value:#x} of {name} is not a 32-bit "
                                "address")
    for library in libraries:
        provided = {name for obj in library.objects for name, sym in obj.symbols.items()
                    if sym.binding != "local"}
        if provided & (set(undefined_symbols(objects)) - set(symbols)):
            objects += library.objects
    return _Linker(objects, libraries, symbols, package).link()


def undefined_symbols(objects: list[ObjectFile]) -> dict[str, Relocation]:
    """Symbols that relocations of ``objects`` use and none of them defines (nor the linker:
    _gp), each with its first use. A ``.weak`` reference that nothing defines is not one: it
    links as 0 and, as with ld, does not pull in a library."""
    defined = {name for obj in objects for name, sym in obj.symbols.items()
               if sym.binding != "local"} | {name for obj in objects for name in obj.sections}
    defined.add(GP_SYMBOL)
    missing: dict[str, Relocation] = {}
    for obj in objects:
        for reloc in obj.relocations:
            if reloc.target_section is None and reloc.symbol and reloc.symbol not in defined \
                    and reloc.symbol not in obj.symbols and reloc.symbol not in obj.weak:
                missing.setdefault(reloc.symbol, reloc)
    return missing


def _origin(source: Optional[SourceLine]) -> Optional[Origin]:
    if source is None:
        return None
    start = source.col - 1
    return Origin(source.file, source.line, source.text[start:], source.text, start)


class _Linker:
    def __init__(self, objects: list[ObjectFile], libraries: tuple[Library, ...],
                 symbols: dict[str, int], package: bool = False):
        self.objects = objects
        self.package = package
        self.libraries = libraries
        self.defined = symbols
        self.log = DiagnosticLog()
        self.bases: dict[tuple[int, str], int] = {}   # (object index, section) -> address
        self.output: dict[str, Section] = {}
        self.globals: dict[str, Symbol] = {}

    def link(self) -> Program:
        for base, kinds in REGIONS:
            self._place(base, kinds)
        if self.package:
            for name in SEGMENT_SECTIONS:   # each segment from its own offset 0
                self._place(0, (DATA,), segment=name)
        symbols = self._symbols()
        for index, obj in enumerate(self.objects):
            for reloc in obj.relocations:
                try:
                    self._apply(index, reloc)
                except StatementError as exc:
                    self.log.error(_origin(reloc.source), exc.message)
        self.log.raise_if_errors()
        return self._program(symbols)

    def segment(self, name: Optional[str]) -> Optional[str]:
        """The segment section ``name`` is placed in (a package link only), else None."""
        return SEGMENT_SECTIONS.get(name) if self.package else None

    def _place(self, base: int, kinds: tuple[str, ...], segment: Optional[str] = None) -> None:
        """Place the sections of ``kinds`` from ``base``: the segment section ``segment`` only,
        or (None) every section that is not a segment's."""
        address = base
        for kind in kinds:
            names = dict.fromkeys(name for obj in self.objects
                                  for name, section in obj.sections.items()
                                  if section.kind == kind and section.size and
                                  (name == segment if segment else not self.segment(name)))
            for name in names:
                out = self.output[name] = Section(name, kind)
                for index, obj in enumerate(self.objects):
                    piece = obj.sections.get(name)
                    if piece is None or not piece.size:
                        continue
                    padding = -address % piece.align
                    if out.size:
                        self._grow(out, padding)
                    else:
                        out.base = address + padding
                    address += padding
                    out.align = max(out.align, piece.align)
                    self.bases[(index, name)] = address
                    if kind != BSS:
                        out.data += piece.data
                    out.size += piece.size
                    address += piece.size
                    if kind == TEXT:  # code stays word aligned
                        self._grow(out, -address % 4)
                        address += -address % 4
        for index, obj in enumerate(self.objects):  # empty sections start where the region ends
            for name, section in obj.sections.items():
                if section.kind in kinds and (name == segment if segment
                                              else not self.segment(name)):
                    self.bases.setdefault((index, name), address)

    @staticmethod
    def _grow(section: Section, count: int) -> None:
        if section.kind == TEXT and count % 4 == 0:
            section.data += NOP_WORD.to_bytes(4, "little") * (count // 4)
        elif section.kind != BSS:
            section.data += bytes(count)
        section.size += count

    def _address(self, index: int, section: Optional[str], value: int) -> int:
        if section is None:
            return value
        if self.objects[index].sections[section].kind == NOLOAD:
            raise StatementError(f"{section} is not loaded (debug information and notes "
                                 "have no address)")
        return self.bases[(index, section)] + value

    def _symbols(self) -> dict[str, Symbol]:
        """Every symbol at its final address: globals (duplicates refused, plus the linker's
        _gp), then locals whose name is still free. Fills ``self.globals``."""
        locals_ = {}
        for index, obj in enumerate(self.objects):
            for sym in obj.symbols.values():
                if sym.section is not None and obj.sections[sym.section].kind == NOLOAD:
                    continue
                final = replace(sym, value=self._address(index, sym.section, sym.value))
                first = self.globals.get(sym.name)
                if sym.binding == "local":
                    locals_.setdefault(sym.name, final)
                elif first is None or (first.binding == "weak" and sym.binding == "global"):
                    self.globals[sym.name] = final
                elif sym.binding == "global" and first.binding == "global":
                    where = f" (first defined at {first.source.file}:{first.source.line})" \
                        if first.source else ""
                    self.log.error(_origin(sym.source),
                                   f"duplicate global symbol {sym.name}{where}")
        for name, value in self.defined.items():
            if name in self.globals:
                first = self.globals[name]
                self.log.error(_origin(first.source), f"symbol {name} is defined by the host "
                                                      "(symbols=) and by an object")
            self.globals[name] = Symbol(name, None, value, "global", "object")
        data = [s.base for s in self.output.values() if s.kind == DATA and
                not self.segment(s.name)]
        self.globals.setdefault(GP_SYMBOL, Symbol(GP_SYMBOL, None, min(data, default=MEM_BASE)
                                                  + GP_OFFSET, "global"))
        return {**{k: v for k, v in locals_.items() if k not in self.globals}, **self.globals}

    def _target(self, index: int, reloc: Relocation) -> int:
        if reloc.target_section is not None:
            return self._address(index, reloc.target_section, reloc.addend)
        if not reloc.symbol:
            return reloc.addend  # an absolute address
        obj = self.objects[index]
        own = obj.symbols.get(reloc.symbol)
        if own is not None and own.binding == "local":
            return self._address(index, own.section, own.value) + reloc.addend
        if reloc.symbol in self.globals:
            return self.globals[reloc.symbol].value + reloc.addend
        if reloc.symbol in obj.weak:
            return reloc.addend  # an undefined weak symbol is 0
        if reloc.symbol in self.output:  # another object's section, by name: its start
            return self.output[reloc.symbol].base + reloc.addend
        for library in self.libraries:
            if reloc.symbol in library.refused:
                raise StatementError(f"undefined symbol {reloc.symbol}: {library.name} does "
                                     f"not provide it ({library.refused[reloc.symbol]})")
        raise StatementError(f"undefined symbol {reloc.symbol}")

    def _target_section(self, index: int, reloc: Relocation) -> Optional[str]:
        """The section the target of ``reloc`` is in (None: absolute or undefined)."""
        if reloc.target_section is not None:
            return reloc.target_section
        own = self.objects[index].symbols.get(reloc.symbol)
        if own is not None and own.binding == "local":
            return own.section
        if reloc.symbol in self.globals:
            return self.globals[reloc.symbol].section
        return reloc.symbol if reloc.symbol in self.output else None

    def _apply(self, index: int, reloc: Relocation) -> None:
        target = self._target(index, reloc)
        where = self._address(index, reloc.section, reloc.offset)
        out = self.output[reloc.section]
        at = where - out.base
        segment = self.segment(self._target_section(index, reloc))
        if reloc.kind in SEGMENT_KINDS:
            self._patch_segment(out, at, reloc, target, segment)
            return
        if segment:
            raise StatementError(f"{reloc.symbol if reloc.target_section is None else 'the target'}"
                                 f" is in the {segment} segment, whose address "
                                 "is known only when the package is loaded: reach it from "
                                 "the segment's base register with !seg (an I/O slot: !io)")
        if reloc.kind.startswith("gprel"):
            target -= self.globals[GP_SYMBOL].value
        elif reloc.kind.startswith("tprel"):
            target = self._thread_offset(target, reloc)
        if reloc.kind == "branch21":
            self._patch(out, at, "disp21", self._branch(target, where))
        elif reloc.kind == "hint16":
            self._patch(out, at, "disp16", self._hint(target, where))
        elif reloc.kind in ("hi16", "gprel_hi16", "tprel_hi16"):
            self._patch(out, at, "disp16", split_hi_lo(target)[0])
        elif reloc.kind in ("lo16", "gprel_lo16", "tprel_lo16"):
            self._patch(out, at, "disp16", split_hi_lo(target)[1])
        elif reloc.kind in ("disp16", "gprel16", "tprel16"):
            if not DISP16[0] <= target <= DISP16[1]:
                raise StatementError(f"address {target:#x} of {reloc.symbol} does not fit a "
                                     f"16-bit displacement ({DISP16[0]}..{DISP16[1]}); load "
                                     "it with ldi (an ldih+ldi pair) first")
            self._patch(out, at, "disp16", target)
        else:  # abs32 / abs64 data
            size = int(reloc.kind[3:]) // 8
            if target >= 1 << (8 * size):
                raise StatementError(f"address {target:#x} does not fit {size} bytes")
            out.data[at:at + size] = target.to_bytes(size, "little")

    def _patch_segment(self, out: Section, at: int, reloc: Relocation, offset: int,
                       segment: Optional[str]) -> None:
        """Fill a !seg / !io relocation with the target's ``offset`` in its ``segment``."""
        name = reloc.symbol if reloc.target_section is None else "the target"
        if not self.package:
            raise StatementError(f"{reloc.annotation} needs a package link (link_package): "
                                 "only a package has segments")
        if segment is None:
            raise StatementError(f"{reloc.annotation}: {name} is not in a segment (sections "
                                 f"{', '.join(SEGMENT_SECTIONS)})")
        if (segment == "io") != (reloc.kind == "io16"):
            raise StatementError(
                f"!io: {name} is in the {segment} segment, not an I/O slot (.qio)"
                if reloc.kind == "io16" else
                f"{reloc.annotation}: {name} is an I/O slot: load the address it holds with "
                "!io (ldl $r, slot($io_base) !io)")
        if segment == "io" and offset % IO_SLOT_BYTES:
            raise StatementError(f"!io: {name} is at byte {offset} of the I/O table, not at "
                                 f"the start of an {IO_SLOT_BYTES}-byte slot")
        if reloc.kind in ("seg_hi16", "seg_lo16"):
            self._patch(out, at, "disp16", split_hi_lo(offset)[reloc.kind == "seg_lo16"])
            return
        if offset > DISP16[1]:
            raise StatementError(
                f"{name} is at offset {offset} of the {segment} segment, beyond a 16-bit "
                f"displacement (at most {DISP16[1]}): "
                + ("the I/O table has too many slots" if segment == "io" else
                   "take its address with ldi $r, sym($base) !seg (an ldih/ldi pair) and load "
                   "through it"))
        self._patch(out, at, "disp16", offset)

    def _thread_offset(self, target: int, reloc: Relocation) -> int:
        """A !tprel* target's offset from the thread pointer; it must be in LDM."""
        if not any(s.kind in (LDM, BSS) and s.base <= target <= s.base + s.size
                   for s in self.output.values()):
            raise StatementError(f"{reloc.annotation} needs a thread-local (LDM) symbol; "
                                 f"the target {target:#x} is outside LDM (put it in "
                                 ".tdata/.tbss)")
        return target - TLS_THREAD_POINTER

    def _branch(self, target: int, where: int) -> int:
        text = [s for s in self.output.values() if s.kind == TEXT]
        if not any(s.base <= target <= s.base + s.size for s in text):
            raise StatementError(f"branch target {target:#x} is not in the code")
        displacement = (target - where - 4) // 4
        low, high = -(1 << (FIELDS["disp21"][1] - 1)), (1 << (FIELDS["disp21"][1] - 1)) - 1
        if target % 4 or not low <= displacement <= high:
            raise StatementError(f"branch target {target:#x} out of reach (word displacement "
                                 f"{displacement} not in {low}..{high})")
        return displacement

    @staticmethod
    def _hint(target: int, where: int) -> int:
        """A jump's hint for ``target`` [choice]: the low 16 bits of the word displacement from
        the next instruction, as GNU as fills Alpha's 14-bit hint; any target, never an error
        (the hint only guides branch prediction, which swsim does not model)."""
        width = FIELDS["disp16"][1]
        half = 1 << (width - 1)
        return (((target - where - 4) >> 2) + half) % (1 << width) - half

    @staticmethod
    def _patch(section: Section, at: int, field: str, value: int) -> None:
        low, width, _ = FIELDS[field]
        word = int.from_bytes(section.data[at:at + 4], "little")
        word = put_field(word & ~(((1 << width) - 1) << low), field, value)
        section.data[at:at + 4] = word.to_bytes(4, "little")

    def _program(self, symbols: dict[str, Symbol]) -> Program:
        lines = {}
        for index, obj in enumerate(self.objects):
            for (section, offset), line in obj.lines.items():
                lines[self._address(index, section, offset)] = line
        return Program(
            code=np.frombuffer(self._image(CODE_BASE, (TEXT,)), dtype="<u4").astype(np.uint32),
            code_base=CODE_BASE,
            ldm_image=self._image(LDM_BASE, (LDM, BSS)),
            data_image=self._image(MEM_BASE, (DATA,)),
            data_base=MEM_BASE,
            symbols=symbols,
            sections=list(self.output.values()),
            relocations=[r for obj in self.objects for r in obj.relocations],
            lines=lines,
            stack_bytes=max((obj.stack_bytes for obj in self.objects), default=0),
        )

    def _image(self, base: int, kinds: tuple[str, ...]) -> bytes:
        """The bytes of the sections of ``kinds`` from address ``base`` on (gaps zeroed)."""
        out = bytearray()
        for section in sorted((s for s in self.output.values()
                               if s.kind in kinds and not self.segment(s.name)),
                              key=lambda s: s.base):
            out += bytes(section.base - base - len(out))
            out += section.data if section.kind != BSS else bytes(section.size)
        return bytes(out)
