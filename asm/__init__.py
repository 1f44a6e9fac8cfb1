"""The assembler, linker and disassembler for SW26010 CPE code (docs/asm.md).

``assemble(text)`` -> Program (one source, linked); ``build`` / ``build_files`` -> Program
(several sources, every error of all of them in one AsmError); ``assemble_object`` ->
ObjectFile; ``link(objects)`` -> Program; ``disassemble(program)`` -> text; ``save_program`` /
``load_program`` for the ``.swo`` file format. Bad input raises ``AsmError`` listing every
diagnostic.
"""
from __future__ import annotations

import os
from dataclasses import replace

from ..errors import SwsimError
from .assembler import Assembler
from .diagnostics import AsmError, Diagnostic
from .disasm import disassemble, disassemble_word
from .files import MAX_SOURCE_BYTES, read_bounded
from .linker import link
from .program import ObjectFile, Program
from .swo import SwoError, load_program, save_program


def assemble_object(text: str, filename: str = "<input>",
                    include_dirs: tuple[str, ...] = ()) -> ObjectFile:
    """Assemble one source into an object file (sections, symbols, relocations)."""
    return Assembler(filename, tuple(include_dirs)).assemble(text)


def assemble(text: str, filename: str = "<input>",
             include_dirs: tuple[str, ...] = ()) -> Program:
    """Assemble one source and link it into a Program."""
    return build([(text, filename)], include_dirs)


def assemble_file(path: str, include_dirs: tuple[str, ...] = ()) -> Program:
    """Assemble and link a source file (``.include`` also searches ``include_dirs``)."""
    return build_files([path], include_dirs)


def build_files(paths: list[str], include_dirs: tuple[str, ...] = ()) -> Program:
    """Assemble source files and link them into one Program (see ``build``)."""
    return build([(_read(path), os.fspath(path)) for path in paths], include_dirs)


def build(sources: list[tuple[str, str]], include_dirs: tuple[str, ...] = ()) -> Program:
    """Assemble ``(text, filename)`` sources and link them. AsmError lists the errors of all
    of them, link errors such as undefined symbols included, in statement order."""
    for text, filename in sources:
        if not isinstance(text, str):
            hint = " (decode bytes first, or give a path to assemble_file)" \
                if isinstance(text, (bytes, bytearray)) else ""
            raise AsmError([Diagnostic(os.fspath(filename), 0, 0, f"expected assembly source "
                                       f"text (a str), got {type(text).__name__}{hint}")])
    assemblers = [Assembler(filename, tuple(include_dirs)) for _, filename in sources]
    objects = [assembler.run(text) for assembler, (text, _) in zip(assemblers, sources)]
    diagnostics = [replace(d, position=(index, *d.position))
                   for index, assembler in enumerate(assemblers)
                   for d in assembler.log.diagnostics]
    try:
        program = link(objects)
    except AsmError as exc:  # a line with an assembly error gets no link errors on top
        lines = {(d.file, d.line) for d in diagnostics}
        diagnostics += [_placed(d, assemblers) for d in exc.diagnostics
                        if (d.file, d.line) not in lines]
    if diagnostics:
        raise AsmError(diagnostics)
    return program


def _placed(diagnostic: Diagnostic, assemblers: list[Assembler]) -> Diagnostic:
    """A link diagnostic with the position of the first statement of its source line."""
    for index, assembler in enumerate(assemblers):
        position = assembler.positions.get((diagnostic.file, diagnostic.line))
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
           "save_program", "load_program", "SwoError"]
