"""``swsim asm`` and ``swsim disasm``."""
from __future__ import annotations

import argparse
import os
import sys

from . import (assemble_objects, build, build_files, disassemble, read_inputs, save_objects,
               undefined_symbols)
from .diagnostics import AsmError
from .program import Program
from .swo import save_program
from ..errors import SwsimError


def register(subparsers) -> None:
    asm = subparsers.add_parser(
        "asm", help="assemble .s files (and link them, objects too) into a .swo",
        description="Assemble and link into a program .swo; sources that use symbols they do "
                    "not define (printf, _MYID: the athread runtime's) give a relocatable "
                    "object .swo instead, linked when it runs (swsim run) or with others "
                    "(swsim asm a.swo b.s).")
    asm.add_argument("sources", nargs="+", metavar="FILE", help=".s sources or object .swo files")
    asm.add_argument("-o", "--output", help="output .swo (default: first source with .swo)")
    asm.add_argument("-c", "--object", action="store_true",
                     help="write a relocatable object, do not link (as GNU as)")
    asm.add_argument("--listing", action="store_true",
                     help="print address, words and source lines (of a linked program)")
    asm.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                     help="search DIR for .include files")
    asm.set_defaults(func=_asm)

    dis = subparsers.add_parser("disasm", help="disassemble a .swo (or a .s, assembled first)")
    dis.add_argument("program", metavar="FILE")
    dis.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    dis.set_defaults(func=_disasm)


def _report(exc: AsmError) -> int:
    print(exc, file=sys.stderr)
    count = sum(d.severity == "error" for d in exc.diagnostics)
    print(f"{count} error{'s' if count != 1 else ''}", file=sys.stderr)
    return 1


def _asm(args: argparse.Namespace) -> int:
    output = args.output or os.path.splitext(args.sources[0])[0] + ".swo"
    try:
        objects = assemble_objects(read_inputs(args.sources), tuple(args.include_dirs))
        _refuse_overwriting_a_source(output, args.sources)
        missing = undefined_symbols(objects)
        if args.object or missing:
            save_objects(objects, output)
            if missing:   # left to the linker, as GNU as does
                print(f"{output}: relocatable object; symbols left to the linker: " + ", ".join(
                    f"{name} ({reloc.source.file}:{reloc.source.line})" if reloc.source
                    else name for name, reloc in sorted(missing.items())), file=sys.stderr)
            if args.listing:
                print(f"{output}: no listing: an object has no addresses yet", file=sys.stderr)
            return 0
        program = build(objects)
    except AsmError as exc:
        return _report(exc)
    save_program(program, output)
    if args.listing:
        print(listing(program))
    return 0


def _refuse_overwriting_a_source(output: str, sources: list) -> None:
    """An output that is one of the sources (the same file, by inode: also through a link or
    another spelling of the path) would replace the assembly by the object."""
    try:
        written = os.stat(output)
    except OSError:
        return                    # a new file (or one save_program reports on)
    for source in sources:
        if os.path.samestat(written, os.stat(source)):
            raise SwsimError(f"asm: output {output} is the source {source}: refusing to "
                             "overwrite it (choose another -o)")


def _disasm(args: argparse.Namespace) -> int:
    try:
        program = build_files([args.program], tuple(args.include_dirs))
    except AsmError as exc:
        return _report(exc)
    sys.stdout.write(disassemble(program))
    return 0


def _statement(line) -> str:
    """The source of one statement: the whole line, or its part if ``;`` separates several."""
    if ";" not in line.text:
        return line.text.strip()
    return line.text[line.col - 1:].split(";", 1)[0].strip()


def listing(program: Program) -> str:
    """Code address, word and the source statement it came from; then the data layout."""
    out = ["address     word        source"]
    previous = None
    for index, word in enumerate(program.words):
        address = program.code_base + 4 * index
        line = program.lines.get(address)
        where = "" if line is None or line == previous else \
            f"{os.path.basename(line.file)}:{line.line}: {_statement(line)}"
        previous = line
        out.append(f"{address:08x}    {word:08x}    {where}".rstrip())
    for section in program.sections:
        if section.kind != "text":
            out.append(f"{section.base:08x}    {section.name} ({section.kind}, "
                       f"{section.size} bytes)")
    out.append(f"stack: {program.stack_bytes} bytes (largest .frame)")
    return "\n".join(out)
