"""The ``.swo`` file: a linked Program, saved so ``swsim`` can load it without the sources.

Layout (all integers little-endian)::

    8 bytes   magic  b"SWSIMPRG"
    u32       format version (FORMAT_VERSION)
    u32       length H of the header
    H bytes   header: UTF-8 JSON (bases, lengths, sections, symbols, relocations, lines)
    ...       code words (4 * code_words bytes), LDM image, data image, back to back

Section contents are not stored twice: they are cut from the three images on load.
"""
from __future__ import annotations

import dataclasses
import json
import struct

import numpy as np

from ..errors import SwsimError
from .program import BSS, LDM, TEXT, Program, Relocation, Section, SourceLine, Symbol

MAGIC = b"SWSIMPRG"
FORMAT_VERSION = 1
_PREAMBLE = struct.Struct("<8sII")


class SwoError(SwsimError):
    """A file that is not a readable .swo program."""


def _source(data):
    return SourceLine(**data) if data else None


def save_program(program: Program, path: str) -> None:
    with open(path, "wb") as f:
        f.write(program_bytes(program))


def program_bytes(program: Program) -> bytes:
    code = np.asarray(program.code, dtype="<u4").tobytes()
    header = {
        "code_base": program.code_base, "data_base": program.data_base,
        "stack_bytes": program.stack_bytes, "code_bytes": len(code),
        "ldm_bytes": len(program.ldm_image), "data_bytes": len(program.data_image),
        "sections": [{k: v for k, v in dataclasses.asdict(s).items() if k != "data"}
                     for s in program.sections],
        "symbols": [dataclasses.asdict(s) for s in program.symbols.values()],
        "relocations": [dataclasses.asdict(r) for r in program.relocations],
        "lines": [[address, dataclasses.asdict(line)] for address, line in program.lines.items()],
    }
    blob = json.dumps(header, separators=(",", ":")).encode()
    return (_PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(blob)) + blob + code
            + bytes(program.ldm_image) + bytes(program.data_image))


def load_program(path: str) -> Program:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SwoError(f"{path}: cannot read: {exc.strerror}") from None
    return program_from_bytes(data, path)


def program_from_bytes(data: bytes, name: str = "<swo>") -> Program:
    if len(data) < _PREAMBLE.size or data[:8] != MAGIC:
        raise SwoError(f"{name}: not a swsim program file (.swo): bad magic number")
    _, version, header_len = _PREAMBLE.unpack_from(data)
    if version != FORMAT_VERSION:
        raise SwoError(f"{name}: .swo format version {version}, this swsim reads version "
                       f"{FORMAT_VERSION}; reassemble the sources")
    try:
        header = json.loads(data[_PREAMBLE.size:_PREAMBLE.size + header_len])
        position = _PREAMBLE.size + header_len
        blobs = []
        for key in ("code_bytes", "ldm_bytes", "data_bytes"):
            blobs.append(data[position:position + header[key]])
            position += header[key]
        if position != len(data):
            raise ValueError(f"{len(data) - position:+d} bytes beyond the recorded sizes")
        code, ldm, memory = blobs
        program = Program(
            code=np.frombuffer(code, dtype="<u4").astype(np.uint32),
            code_base=header["code_base"], ldm_image=ldm, data_image=memory,
            data_base=header["data_base"],
            symbols={s["name"]: Symbol(**{**s, "source": _source(s["source"])})
                     for s in header["symbols"]},
            sections=[Section(**s) for s in header["sections"]],
            relocations=[Relocation(**{**r, "source": _source(r["source"])})
                         for r in header["relocations"]],
            lines={address: SourceLine(**line) for address, line in header["lines"]},
            stack_bytes=header["stack_bytes"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SwoError(f"{name}: corrupt .swo file: {exc}") from None
    for section in program.sections:
        section.data = bytearray(_section_bytes(program, section))
    return program


def _section_bytes(program: Program, section: Section) -> bytes:
    if section.kind == BSS:
        return b""
    if section.kind == TEXT:
        image, base = np.asarray(program.code, dtype="<u4").tobytes(), program.code_base
    elif section.kind == LDM:
        image, base = program.ldm_image, 0
    else:
        image, base = program.data_image, program.data_base
    return image[section.base - base:section.base - base + section.size]
