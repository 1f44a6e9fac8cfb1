"""The assembler, linker and disassembler for SW26010 CPE code (docs/asm.md).

``assemble(text)`` -> Program (one source, linked); ``build`` / ``build_files`` -> Program
(several sources or objects, every error of all of them in one AsmError); ``assemble_object``
/ ``assemble_objects`` -> ObjectFile(s), symbols they use and do not define left to the
linker; ``link(objects, libraries)`` -> Program; ``disassemble(program)`` -> text;
``save_program`` / ``load_program`` and ``save_objects`` / ``load_objects`` for the two kinds
of ``.swo`` file. Bad input raises ``AsmError`` listing every diagnostic.
"""
from __future__ import annotations

import os
from dataclasses import replace

from ..errors import SwsimError
from .diagnostics import AsmError, Diagnostic
from .disasm import disassemble, disassemble_word
from .files import MAX_PROGRAM_BYTES, MAX_SOURCE_BYTES, read_bounded, regular_file_size
from .linker import Library, link, undefined_symbols
from .objfile import OBJECT_MAGIC, load_objects, save_objects
from .program import ObjectFile, Program
from .package import LinkedPackage, package_of, segment_layout
from .swo import MAGIC, SwoError, load_program, save_program


def assemble_object(text: str, filename: str = "<input>",
                    include_dirs: tuple[str, ...] = ()) -> ObjectFile:
    """Assemble one source into an object file (sections, symbols, relocations)."""
    from .assembler import Assembler   # here: its parser (lark) only when something is assembled
    return Assembler(filename, tuple(include_dirs)).assemble(text)


def assemble(text: str, filename: str = "<input>",
             include_dirs: tuple[str, ...] = ()) -> Program:
    """Assemble one source and link it into a Program."""
    return build([(text, filename)], include_dirs)


def assemble_file(path: str, include_dirs: tuple[str, ...] = ()) -> Program:
    """Assemble and link a source file (``.include`` also searches ``include_dirs``)."""
    return build_files([path], include_dirs)


def build_files(paths: list[str], include_dirs: tuple[str, ...] = (),
                libraries: tuple[Library, ...] = (), symbols=None) -> Program:
    """Assemble source files, load object ``.swo`` files, and link them all, with each of
    ``libraries`` they use, into one Program (see ``build``). A program ``.swo`` (linked
    already) is returned as it is when it is the only input."""
    if len(paths) == 1 and _kind(paths[0]) == "program" and not symbols:
        return load_program(os.fspath(paths[0]))
    return build(read_inputs(paths), include_dirs, libraries, symbols)


def read_inputs(paths: list[str]) -> list:
    """What ``build`` takes for files: the objects of object ``.swo`` files, ``(text,
    filename)`` of sources. SwoError for a program ``.swo``: it is linked already."""
    inputs = []
    for path in paths:
        kind = _kind(path)
        if kind == "program":
            raise SwoError(f"{path}: a linked program cannot be linked again (give its "
                           "sources, or objects from swsim asm -c, instead)")
        inputs += load_objects(os.fspath(path)) if kind == "object" else \
            [(_read(path), os.fspath(path))]
    return inputs


def _kind(path) -> str:
    """``file_kind``, with a ``.swo`` of neither kind a program (load_program then names what
    is wrong with it)."""
    kind = file_kind(path)
    return "program" if kind == "source" and os.fspath(path).endswith(".swo") else kind


def build(sources: list, include_dirs: tuple[str, ...] = (),
          libraries: tuple[Library, ...] = (), symbols=None, package: bool = False,
          segment_layout=None) -> Program:
    """Assemble ``(text, filename)`` sources and link them, with the ObjectFiles among
    ``sources`` in their place, each of ``libraries`` they use and the host's ``symbols``
    (``link``; ``package``: a package link, see ``build_package``). AsmError lists the errors
    of all of them, link errors such as undefined symbols included, in statement order."""
    objects, assemblers, diagnostics = _assemble_all(sources, include_dirs, segment_layout)
    try:
        program = link(objects, libraries, symbols, package)
    except AsmError as exc:  # a line with an assembly error gets no link errors on top
        lines = {(d.file, d.line) for d in diagnostics}
        diagnostics += [_placed(d, assemblers) for d in exc.diagnostics
                        if (d.file, d.line) not in lines]
    if diagnostics:
        raise AsmError(diagnostics)
    return program


def build_package(sources: list, include_dirs: tuple[str, ...] = ()) -> LinkedPackage:
    """QingLong's data package of ``(text, filename)`` sources (asm/package.py): linked with
    their segments apart; AsmError as ``build``. Relaxed: the sources are assembled again with
    the first link's segment layout, so an ``ldi !seg`` whose offset fits 16 bits is one word
    (segment offsets do not depend on the code's size; if the second build fails or its
    segments change, e.g. constants holding code addresses, the first link stands)."""
    first = package_of(build(sources, include_dirs, package=True))
    try:
        relaxed = package_of(build(sources, include_dirs, package=True,
                                   segment_layout=segment_layout(first.program)))
    except AsmError:    # e.g. a later local symbol named as another object's global
        return first
    same = relaxed.constants == first.constants and relaxed.sizes == first.sizes
    return relaxed if same else first


def assemble_objects(sources: list, include_dirs: tuple[str, ...] = ()) -> list[ObjectFile]:
    """The objects of ``(text, filename)`` sources (ObjectFiles among them stay as they are),
    not linked: symbols they use and do not define are left to the linker. AsmError lists
    every assembly error of all of them."""
    objects, _, diagnostics = _assemble_all(sources, include_dirs)
    if diagnostics:
        raise AsmError(diagnostics)
    return objects


def _assemble_all(sources: list, include_dirs: tuple[str, ...], segment_layout=None):
    """(objects, assemblers, diagnostics in statement order) of sources and ObjectFiles."""
    for source in sources:
        if isinstance(source, ObjectFile):
            continue
        text, filename = source
        if not isinstance(text, str):
            hint = " (decode bytes first, or give a path to assemble_file)" \
                if isinstance(text, (bytes, bytearray)) else ""
            raise AsmError([Diagnostic(os.fspath(filename), 0, 0, f"expected assembly source "
                                       f"text (a str), got {type(text).__name__}{hint}")])
    from .assembler import Assembler
    assemblers = [None if isinstance(source, ObjectFile) else
                  Assembler(source[1], tuple(include_dirs), segment_layout)
                  for source in sources]
    objects = [source if assembler is None else assembler.run(source[0])
               for assembler, source in zip(assemblers, sources)]
    diagnostics = [replace(d, position=(index, *d.position))
                   for index, assembler in enumerate(assemblers) if assembler is not None
                   for d in assembler.log.diagnostics]
    return objects, assemblers, diagnostics


def file_kind(path) -> str:
    """"program" (a linked .swo), "object" (an object .swo) or "source" (anything else),
    from the file's first bytes."""
    regular_file_size(path, "a source or .swo file", MAX_PROGRAM_BYTES)   # not a device or pipe
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as exc:
        raise SwsimError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return {MAGIC: "program", OBJECT_MAGIC: "object"}.get(head, "source")


def _placed(diagnostic: Diagnostic, assemblers: list) -> Diagnostic:
    """A link diagnostic with the position of the first statement of its source line."""
    for index, assembler in enumerate(assemblers):
        position = None if assembler is None else \
            assembler.positions.get((diagnostic.file, diagnostic.line))
        if position is not None:
            return replace(diagnostic, position=(index, position, diagnostic.col))
    return diagnostic


def _read(path: str) -> str:
    text = read_bounded(path, "assembly source", MAX_SOURCE_BYTES).decode("utf-8", "replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")   # as text-mode open() reads it
    if "\0" in text:
        raise SwsimError(f"{path}: a binary file, neither a .swo program nor assembly source")
    return text


__all__ = ["assemble", "assemble_file", "assemble_object", "build", "build_files", "link",
           "disassemble", "disassemble_word", "AsmError", "Diagnostic", "Program", "ObjectFile",
           "save_program", "load_program", "SwoError", "Library", "undefined_symbols",
           "assemble_objects", "save_objects", "load_objects", "file_kind", "read_inputs",
           "build_package", "LinkedPackage"]
