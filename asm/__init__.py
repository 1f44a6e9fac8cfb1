"""The assembler, linker and disassembler for SW26010 CPE code (docs/asm.md).

``assemble(text)`` -> Program (one source, linked); ``assemble_object`` -> ObjectFile;
``link(objects)`` -> Program; ``disassemble(program)`` -> text; ``save_program`` /
``load_program`` for the ``.swo`` file format. Bad input raises ``AsmError`` listing every
diagnostic.
"""
from __future__ import annotations

import os

from .assembler import Assembler
from .diagnostics import AsmError, Diagnostic
from .disasm import disassemble, disassemble_word
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
    return link([assemble_object(text, filename, include_dirs)])


def assemble_file(path: str, include_dirs: tuple[str, ...] = ()) -> Program:
    """Assemble and link a source file (``.include`` also searches ``include_dirs``)."""
    return link([_object_from_file(path, include_dirs)])


def _object_from_file(path: str, include_dirs: tuple[str, ...] = ()) -> ObjectFile:
    with open(path, encoding="utf-8", errors="replace") as f:
        return assemble_object(f.read(), os.fspath(path), include_dirs)


__all__ = ["assemble", "assemble_file", "assemble_object", "link", "disassemble",
           "disassemble_word", "AsmError", "Diagnostic", "Program", "ObjectFile", "save_program",
           "load_program", "SwoError"]
