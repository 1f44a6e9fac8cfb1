"""The ``.swo`` file: a linked Program, saved so ``swsim`` can load it without the sources.

Layout (all integers little-endian)::

    8 bytes   magic  b"SWSIMPRG"
    u32       format version (FORMAT_VERSION)
    u32       length H of the header
    u32       CRC-32 (zlib) of everything after the preamble: a flipped bit is refused
    H bytes   header: UTF-8 JSON (bases, lengths, sections, symbols, relocations, lines,
              texts: each distinct source-line text once; a SourceLine's "text" indexes it)
    ...       code words (4 * code_words bytes), LDM image, data image, back to back

Section contents are not stored twice: they are cut from the three images on load.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import struct
import typing
import zlib
from typing import Optional

import numpy as np

from ..errors import SwsimError
from ..isa import LDM_BASE
from .files import MAX_PROGRAM_BYTES, read_bounded
from .program import BSS, DATA, LDM, TEXT, Program, Relocation, Section, SourceLine, Symbol

MAGIC = b"SWSIMPRG"
FORMAT_VERSION = 3            # 3: the preamble's checksum
_PREAMBLE = struct.Struct("<8sIII")


class SwoError(SwsimError):
    """A file that is not a readable .swo program."""


def save_program(program: Program, path: str) -> None:
    try:
        with open(path, "wb") as f:
            f.write(program_bytes(program))
    except OSError as exc:
        raise SwoError(f"{path}: cannot write: {exc.strerror or exc}") from None


def program_bytes(program: Program) -> bytes:
    code = np.asarray(program.code, dtype="<u4").tobytes()
    texts: dict[str, int] = {}  # a line of many statements is stored once, not per statement
    source = functools.partial(source_record, texts=texts)
    header = {
        "code_base": program.code_base, "data_base": program.data_base,
        "stack_bytes": program.stack_bytes, "code_bytes": len(code),
        "ldm_bytes": len(program.ldm_image), "data_bytes": len(program.data_image),
        "sections": [{k: v for k, v in dataclasses.asdict(s).items() if k != "data"}
                     for s in program.sections],
        "symbols": [{**dataclasses.asdict(s), "source": source(s.source)}
                    for s in program.symbols.values()],
        "relocations": [{**dataclasses.asdict(r), "source": source(r.source)}
                        for r in program.relocations],
        "lines": [[address, source(line)] for address, line in program.lines.items()],
    }
    header["texts"] = list(texts)
    blob = json.dumps(header, separators=(",", ":")).encode()
    body = blob + code + bytes(program.ldm_image) + bytes(program.data_image)
    return _PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(blob), zlib.crc32(body)) + body


def source_record(line: Optional[SourceLine], texts: dict[str, int]):
    """A SourceLine as JSON, its text an index into ``texts`` (added if new)."""
    if line is None:
        return None
    return {**dataclasses.asdict(line), "text": texts.setdefault(line.text, len(texts))}


def load_program(path: str) -> Program:
    return program_from_bytes(read_file(path), path)


def read_file(path: str) -> bytes:
    try:
        return read_bounded(path, "a .swo file", MAX_PROGRAM_BYTES)
    except SwsimError as exc:
        raise SwoError(str(exc)) from None


def read_header(data: bytes, name: str, magic: bytes, version: int,
                kind: str) -> tuple[dict, int]:
    """(the JSON header, where the contents after it start) of a .swo of ``kind`` ("program",
    "object"); SwoError for another magic or version, a header length beyond the file, a
    checksum that does not match, or a header that is not a JSON object."""
    if len(data) < _PREAMBLE.size or data[:8] != magic:
        raise SwoError(f"{name}: not a swsim {kind} file (.swo): bad magic number")
    _, found, header_len, checksum = _PREAMBLE.unpack_from(data)
    if found != version:
        raise SwoError(f"{name}: {kind} .swo format version {found}, this swsim reads version "
                       f"{version}; reassemble the sources")
    if header_len > len(data) - _PREAMBLE.size:
        raise SwoError(f"{name}: corrupt .swo file: header length {header_len} is beyond the "
                       f"file's {len(data)} bytes")
    if zlib.crc32(data[_PREAMBLE.size:]) != checksum:
        raise SwoError(f"{name}: corrupt .swo file: the checksum does not match its contents "
                       "(damaged or edited; reassemble the sources)")
    try:
        header = json.loads(data[_PREAMBLE.size:_PREAMBLE.size + header_len])
    except ValueError as exc:  # JSON syntax, UTF-8
        raise SwoError(f"{name}: corrupt .swo file: {exc}") from None
    except RecursionError:
        raise SwoError(f"{name}: corrupt .swo file: the header nests too deep") from None
    if not isinstance(header, dict):
        raise SwoError(f"{name}: corrupt .swo file: the header is not a JSON object")
    return header, _PREAMBLE.size + header_len


def program_from_bytes(data: bytes, name: str = "<swo>") -> Program:
    """The Program in ``data``; SwoError naming the field for any malformed content."""
    header, position = read_header(data, name, MAGIC, FORMAT_VERSION, "program")
    try:
        blobs = []
        for key in ("code_bytes", "ldm_bytes", "data_bytes"):
            size = _integer(header, key, 0, len(data))
            blobs.append(data[position:position + size])
            position += size
        if position != len(data):
            raise _Corrupt(f"{len(data) - position:+d} bytes beyond the recorded sizes")
        code, ldm, memory = blobs
        if len(code) % 4:
            raise _Corrupt(f"code_bytes {len(code)} is not a whole number of words")
        texts = header.get("texts")
        if not (isinstance(texts, list) and all(isinstance(t, str) for t in texts)):
            raise _Corrupt(f"texts must be a list of strings, got {_describe(texts)}")
        program = Program(
            code=np.frombuffer(code, dtype="<u4").astype(np.uint32),
            code_base=_integer(header, "code_base", 0, ADDRESS_LIMIT - len(code), align=4),
            ldm_image=ldm, data_image=memory,
            data_base=_integer(header, "data_base", 0, ADDRESS_LIMIT - len(memory)),
            symbols={s.name: s for s in _records(header, "symbols", Symbol, texts)},
            sections=_records(header, "sections", Section, texts),
            relocations=_records(header, "relocations", Relocation, texts),
            lines=_lines(header, texts),
            stack_bytes=_integer(header, "stack_bytes", 0, ADDRESS_LIMIT))
        for index, section in enumerate(program.sections):
            section.data = bytearray(_section_bytes(program, section, f"sections[{index}]"))
    except _Corrupt as exc:
        raise SwoError(f"{name}: corrupt .swo file: {exc}") from None
    except ValueError as exc:  # contents the Program refuses
        raise SwoError(f"{name}: corrupt .swo file: {exc}") from None
    return program


# ---- header validation: every field is checked against the dataclass it fills ----------------
ADDRESS_LIMIT = 1 << 32     # addresses are 32-bit (docs/asm.md)
_VALUE_RANGE = (-(1 << 63), (1 << 64) - 1)  # symbol values, addends: 64-bit
_KINDS = (TEXT, LDM, DATA, BSS)


class _Corrupt(Exception):
    """A malformed header field (message names it)."""


def _describe(value) -> str:
    text = json.dumps(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _integer(record: dict, key: str, low: int, high: int, where: str = "",
             align: int = 1) -> int:
    if key not in record:
        raise _Corrupt(f"{where}{key} is missing")
    value = record[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Corrupt(f"{where}{key} must be an integer, got {_describe(value)}")
    if not low <= value <= high or value % align:
        raise _Corrupt(f"{where}{key} = {value} is out of range {low}..{high}"
                       + (f" or not a multiple of {align}" if align > 1 else ""))
    return value


def _records(header: dict, key: str, cls, texts: list[str], where: str = "",
             kinds: tuple[str, ...] = _KINDS) -> list:
    items = header.get(key)
    if not isinstance(items, list):
        raise _Corrupt(f"{where}{key} must be a list, got {_describe(items)}")
    return [_record(cls, item, f"{where}{key}[{index}]", texts, kinds)
            for index, item in enumerate(items)]


@functools.lru_cache(maxsize=None)
def _schema(cls) -> dict:
    """Field name -> (field, whether it may be None, its type) of a record class, worked out
    once per class (``typing.get_type_hints`` per record made loading slow)."""
    hints = typing.get_type_hints(cls)
    schema = {}
    for f in dataclasses.fields(cls):
        if f.name == "data":
            continue
        hint, optional = hints[f.name], False
        if typing.get_origin(hint) is typing.Union:  # Optional[X]
            (hint,) = [h for h in typing.get_args(hint) if h is not type(None)]
            optional = True
        schema[f.name] = (f, optional, hint)
    return schema


def _record(cls, data, where: str, texts: list[str], kinds: tuple[str, ...] = _KINDS):
    """``cls(**data)`` with every field of ``cls`` present and of its annotated type (a
    SourceLine's text is an index into ``texts``)."""
    if cls is SourceLine:
        line = _plain_source_line(data, texts)
        if line is not None:
            return line
    if not isinstance(data, dict):
        raise _Corrupt(f"{where} must be an object, got {_describe(data)}")
    if cls is SourceLine and "text" in data:
        index = data["text"]
        if not (isinstance(index, int) and not isinstance(index, bool)
                and 0 <= index < len(texts)):
            raise _Corrupt(f"{where}.text must be an index into texts (0..{len(texts) - 1}), "
                           f"got {_describe(index)}")
        data = {**data, "text": texts[index]}
    schema = _schema(cls)
    unknown = sorted(set(data) - set(schema))
    if unknown:
        raise _Corrupt(f"{where} has unknown field {unknown[0]!r}")
    values = {}
    for name, (f, optional, hint) in schema.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _Corrupt(f"{where}.{name} is missing")
            continue
        value = data[name]
        values[name] = None if optional and value is None else \
            _typed(hint, value, f"{where}.{name}", texts)
    record = cls(**values)
    _check_ranges(record, where, kinds)
    return record


def _plain_source_line(data, texts: list[str]) -> Optional[SourceLine]:
    """The SourceLine of a record with all four fields valid (a program has one per
    instruction: the common case, checked in one expression), else None (``_record`` then
    checks field by field and names what is wrong)."""
    if type(data) is dict and len(data) == 4:
        file, line, text, col = (data.get(key) for key in ("file", "line", "text", "col"))
        if type(file) is str and type(line) is int and type(text) is int \
                and type(col) is int and line >= 0 and col >= 0 and 0 <= text < len(texts):
            return SourceLine(file, line, texts[text], col)
    return None


def _typed(hint, value, where: str, texts: list[str]):
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Corrupt(f"{where} must be an integer, got {_describe(value)}")
    if hint is str and isinstance(value, str):
        return value
    if dataclasses.is_dataclass(hint):
        return _record(hint, value, where, texts)
    raise _Corrupt(f"{where} must be a {'string' if hint is str else hint}, got "
                   f"{_describe(value)}")


def _check_ranges(record, where: str, kinds: tuple[str, ...]) -> None:
    checks = {
        Section: lambda r: [("kind", r.kind in kinds, f"one of {', '.join(kinds)}"),
                            ("base", 0 <= r.base < ADDRESS_LIMIT, "a 32-bit address"),
                            ("size", 0 <= r.size <= ADDRESS_LIMIT, "0..2^32"),
                            ("align", r.align > 0 and r.align & (r.align - 1) == 0 and
                             r.align <= ADDRESS_LIMIT, "a power of two")],
        Symbol: lambda r: [("value", _VALUE_RANGE[0] <= r.value <= _VALUE_RANGE[1], "64-bit"),
                           ("size", 0 <= r.size <= ADDRESS_LIMIT, "0..2^32")],
        Relocation: lambda r: [("offset", 0 <= r.offset < ADDRESS_LIMIT, "0..2^32-1"),
                               ("addend", _VALUE_RANGE[0] <= r.addend <= _VALUE_RANGE[1],
                                "64-bit")],
        SourceLine: lambda r: [("line", r.line >= 0, ">= 0"), ("col", r.col >= 0, ">= 0")],
    }
    for field, ok, expected in checks[type(record)](record):
        if not ok:
            raise _Corrupt(f"{where}.{field} = {getattr(record, field)!r} must be {expected}")


def _lines(header: dict, texts: list[str]) -> dict:
    items = header.get("lines")
    if not isinstance(items, list):
        raise _Corrupt(f"lines must be a list, got {_describe(items)}")
    lines = {}
    for index, item in enumerate(items):
        where = f"lines[{index}]"
        if not (isinstance(item, list) and len(item) == 2):
            raise _Corrupt(f"{where} must be [address, source line], got {_describe(item)}")
        address = _integer({"address": item[0]}, "address", 0, ADDRESS_LIMIT - 1, where + ".")
        lines[address] = _record(SourceLine, item[1], where, texts)
    return lines


def _section_bytes(program: Program, section: Section, where: str) -> bytes:
    """The section's bytes, cut from its image (it must lie inside it)."""
    if section.kind == TEXT:
        image, base = np.asarray(program.code, dtype="<u4").tobytes(), program.code_base
    elif section.kind in (LDM, BSS):  # the LDM image holds .bss as zeros
        image, base = program.ldm_image, LDM_BASE
    else:
        image, base = program.data_image, program.data_base
    start = section.base - base
    if start < 0 or start + section.size > len(image):
        raise _Corrupt(f"{where} ({section.name}) at {section.base:#x}, {section.size} bytes, "
                       f"is outside its image ({base:#x}, {len(image)} bytes)")
    return b"" if section.kind == BSS else image[start:start + section.size]
