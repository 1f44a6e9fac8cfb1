"""QingLong's data package (issue 25 item 1): a program linked with its main-memory data in
segments (``link(..., package=True)``) instead of at fixed addresses.

The sections ``.qconst`` (constants: weights, tables), ``.qscratch`` (work space) and ``.qio``
(the I/O table: one 8-byte slot per input or output, holding its address) are each placed in a
segment of their own from offset 0, the objects' pieces one after another (prefix sums). Code
reaches them only from a base register the launch passes (a0 = $16 the constants, a1 = $17
the scratch, a2 = $18 the I/O table, by QingLong's convention): ``ldl $r, W($16) !seg`` (a
16-bit offset), ``ldi $r, W($16) !seg`` (an ldih/ldi pair: any offset) and ``ldl $r, X($18) !io``
(the address in slot X). So the package is position independent: loading it anywhere, or binding
other inputs and outputs, changes no instruction and no constant.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ArgumentError
from .diagnostics import AsmError, Diagnostic
from .program import DATA, IO_SLOT_BYTES, SEGMENT_SECTIONS, Program, SegmentLayout

SEGMENT_BASE_REGISTERS = {"constants": 16, "scratch": 17, "io": 18}   # the launch's a0..a2


@dataclass(frozen=True)
class LinkedPackage:
    """`program` (code and LDM image, no main-memory data), the `constants` segment's bytes,
    each segment's size and alignment (bytes) and the I/O slots by name (slot index)."""
    program: Program
    constants: bytes
    sizes: dict
    alignment: dict
    slots: dict

    @property
    def image(self) -> bytes:
        """The data package as one blob: the code, then the constants."""
        return self.program.code.astype("<u4").tobytes() + self.constants

    def with_constant(self, name: str, data: bytes) -> "LinkedPackage":
        """This package with the constant `name` (a symbol of .qconst whose ``.size`` is
        ``len(data)``) holding `data`: weights bound after assembly, no relocation moves."""
        sym = self.program.symbols.get(name)
        if sym is None or sym.section != ".qconst":
            raise ArgumentError(f"with_constant: {name!r} is not a symbol of the constants "
                                f"segment (.qconst)")
        if sym.size != len(data):
            raise ArgumentError(f"with_constant: {name} is {sym.size} bytes (its .size), got "
                                f"{len(data)}")
        constants = self.constants[:sym.value] + bytes(data) + \
            self.constants[sym.value + len(data):]
        return replace(self, constants=constants)


def package_of(program: Program) -> LinkedPackage:
    """The package of a program linked with ``package=True``; AsmError for main-memory data
    outside the segments and for initialised bytes in scratch or the I/O table (neither is
    copied to the device, so the bytes would be lost)."""
    sections = {s.name: s for s in program.sections}
    problems = []
    for section in program.sections:
        segment = SEGMENT_SECTIONS.get(section.name)
        if section.kind == DATA and segment is None:
            problems.append((section, f"section {section.name} is main-memory data outside "
                                      f"the segments: a package keeps it in .qconst"))
        elif segment in ("scratch", "io") and any(section.data):
            problems.append((section, f"section {section.name} holds initialised bytes, but "
                                      f"the {segment} segment is not copied to the device "
                                      "(put them in .qconst; reserve with .skip)"))
    if problems:
        raise AsmError([_diagnostic(program, section, message) for section, message in problems])
    sizes, alignment = {}, {}
    for name, segment in SEGMENT_SECTIONS.items():
        section = sections.get(name)
        sizes[segment] = 0 if section is None else section.base + section.size
        alignment[segment] = max(IO_SLOT_BYTES if segment == "io" else 1,
                                 0 if section is None else section.align)
    constants = sections.get(".qconst")
    slots = {sym.name: sym.value // IO_SLOT_BYTES for sym in program.symbols.values()
             if sym.section == ".qio" and sym.type != "equ"}
    return LinkedPackage(program, bytes(constants.base) + bytes(constants.data)
                         if constants else b"", sizes, alignment, slots)


def segment_layout(program: Program) -> SegmentLayout:
    """The segments' sizes and their global symbols' offsets in a package-linked program."""
    return SegmentLayout(
        {s.name: s.base + s.size for s in program.sections if s.name in SEGMENT_SECTIONS},
        {sym.name: sym.value for sym in program.symbols.values()
         if sym.section in SEGMENT_SECTIONS and sym.type != "equ"})


def _diagnostic(program: Program, section, message: str) -> Diagnostic:
    """An error at the first symbol of `section` with a known source line (else the link)."""
    for sym in program.symbols.values():
        if sym.section == section.name and sym.source is not None:
            source = sym.source
            return Diagnostic(source.file, source.line, source.col, message, source.text)
    return Diagnostic("<link>", 0, 0, message)
