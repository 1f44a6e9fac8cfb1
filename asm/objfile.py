"""The relocatable object ``.swo``: assembled sources not yet linked, so symbols they use but
do not define (``printf``, ``_MYID``) are resolved when the object is linked, as with GNU as's
``.o`` files (docs/asm.md "The .swo format").

Layout (all integers little-endian)::

    8 bytes   magic  b"SWSIMOBJ"
    u32       format version (OBJECT_FORMAT_VERSION)
    u32       length H of the header
    u32       CRC-32 (zlib) of everything after the preamble, as in a program .swo
    H bytes   header: UTF-8 JSON {"objects": [...], "texts": [...]}; per object its file name,
              stack bytes, weak names, sections (with "data_bytes", the length of its stored
              contents), symbols, relocations and source lines [section, offset, line]
    ...       the contents of every section of every object, back to back in header order

Every field is checked as in a program ``.swo`` (swo.py): a malformed file is a SwoError
naming the field.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import zlib

from .linker import RELOCATION_BYTES
from .program import BSS, DATA, LDM, NOLOAD, TEXT, ObjectFile, Relocation, Section, SourceLine, \
    Symbol
from .swo import (_PREAMBLE, ADDRESS_LIMIT, SwoError, _Corrupt, _describe, _integer, _record,
                  _records, read_file, read_header, source_record)

OBJECT_MAGIC = b"SWSIMOBJ"
OBJECT_FORMAT_VERSION = 1
_OBJECT_KINDS = (TEXT, LDM, DATA, BSS, NOLOAD)   # objects keep debug sections for the linker
BINDINGS = ("local", "global", "weak")


def save_objects(objects: list[ObjectFile], path: str) -> None:
    try:
        with open(path, "wb") as f:
            f.write(objects_bytes(objects))
    except OSError as exc:
        raise SwoError(f"{path}: cannot write: {exc.strerror or exc}") from None


def objects_bytes(objects: list[ObjectFile]) -> bytes:
    texts: dict[str, int] = {}
    source = functools.partial(source_record, texts=texts)
    records, contents = [], []
    for obj in objects:
        sections = list(obj.sections.values())
        contents += [bytes(section.data) for section in sections]
        records.append({
            "filename": obj.filename, "stack_bytes": obj.stack_bytes,
            "weak": sorted(obj.weak),
            "sections": [{**{k: v for k, v in dataclasses.asdict(s).items() if k != "data"},
                          "data_bytes": len(s.data)} for s in sections],
            "symbols": [{**dataclasses.asdict(s), "source": source(s.source)}
                        for s in obj.symbols.values()],
            "relocations": [{**dataclasses.asdict(r), "source": source(r.source)}
                            for r in obj.relocations],
            "lines": [[section, offset, source(line)]
                      for (section, offset), line in obj.lines.items()]})
    blob = json.dumps({"objects": records, "texts": list(texts)},
                      separators=(",", ":")).encode()
    body = blob + b"".join(contents)
    return _PREAMBLE.pack(OBJECT_MAGIC, OBJECT_FORMAT_VERSION, len(blob), zlib.crc32(body)) + body


def load_objects(path: str) -> list[ObjectFile]:
    return objects_from_bytes(read_file(path), path)


def objects_from_bytes(data: bytes, name: str = "<swo>") -> list[ObjectFile]:
    """The objects in ``data``; SwoError naming the field for any malformed content."""
    header, position = read_header(data, name, OBJECT_MAGIC, OBJECT_FORMAT_VERSION, "object")
    try:
        texts = header.get("texts")
        if not (isinstance(texts, list) and all(isinstance(t, str) for t in texts)):
            raise _Corrupt(f"texts must be a list of strings, got {_describe(texts)}")
        items = header.get("objects")
        if not isinstance(items, list):
            raise _Corrupt(f"objects must be a list, got {_describe(items)}")
        reader = _Contents(data, position)
        objects = [_object(item, f"objects[{index}].", texts, reader)
                   for index, item in enumerate(items)]
        if reader.position != len(data):
            raise _Corrupt(f"{len(data) - reader.position:+d} bytes beyond the recorded sizes")
    except _Corrupt as exc:
        raise SwoError(f"{name}: corrupt .swo file: {exc}") from None
    return objects


class _Contents:
    """Section contents, read one after another from ``position``."""

    def __init__(self, data: bytes, position: int):
        self.data, self.position = data, position

    def take(self, size: int, where: str) -> bytes:
        if self.position + size > len(self.data):
            raise _Corrupt(f"{where} runs past the end of the file")
        self.position += size
        return self.data[self.position - size:self.position]


def _object(item, where: str, texts: list[str], reader: _Contents) -> ObjectFile:
    if not isinstance(item, dict):
        raise _Corrupt(f"{where[:-1]} must be an object, got {_describe(item)}")
    filename = item.get("filename")
    weak = item.get("weak")
    if not isinstance(filename, str):
        raise _Corrupt(f"{where}filename must be a string, got {_describe(filename)}")
    if not (isinstance(weak, list) and all(isinstance(w, str) for w in weak)):
        raise _Corrupt(f"{where}weak must be a list of strings, got {_describe(weak)}")
    sections = {}
    for index, record in enumerate(item.get("sections") if isinstance(item.get("sections"),
                                                                      list) else [None]):
        at = f"{where}sections[{index}]"
        if not isinstance(record, dict):
            raise _Corrupt(f"{where}sections must be a list of objects, got "
                           f"{_describe(item.get('sections'))}")
        record = dict(record)
        size = _integer(record, "data_bytes", 0, ADDRESS_LIMIT, at + ".")
        del record["data_bytes"]
        section = _record(Section, record, at, texts, _OBJECT_KINDS)
        if size not in (0, section.size) or (size and section.kind in (BSS, NOLOAD)):
            raise _Corrupt(f"{at}.data_bytes = {size} does not fit a {section.kind} section "
                           f"of {section.size} bytes")
        section.data = bytearray(reader.take(size, at))
        sections[section.name] = section
    symbols = {s.name: s for s in _records(item, "symbols", Symbol, texts, where)}
    relocations = _records(item, "relocations", Relocation, texts, where)
    for kind, names in (("symbol", [s.section for s in symbols.values()]),
                        ("relocation", [n for r in relocations
                                        for n in (r.section, r.target_section)])):
        unknown = [n for n in names if n is not None and n not in sections]
        if unknown:
            raise _Corrupt(f"{where}{kind} names section {unknown[0]!r}, which the object "
                           "does not have")
    for name, symbol in symbols.items():
        if symbol.binding not in BINDINGS:
            raise _Corrupt(f"{where}symbol {name!r} has binding {symbol.binding!r}, not one "
                           f"of {', '.join(BINDINGS)}")
    for index, reloc in enumerate(relocations):
        size = RELOCATION_BYTES.get(reloc.kind)
        if size is None:
            raise _Corrupt(f"{where}relocations[{index}].kind {reloc.kind!r} is not one of "
                           f"{', '.join(RELOCATION_BYTES)}")
        if reloc.offset + size > len(sections[reloc.section].data):
            raise _Corrupt(f"{where}relocations[{index}] patches bytes {reloc.offset}.."
                           f"{reloc.offset + size - 1}, outside its section's contents")
    lines = {}
    for index, line in enumerate(item.get("lines") if isinstance(item.get("lines"), list)
                                 else [None]):
        if not (isinstance(line, list) and len(line) == 3 and isinstance(line[0], str)
                and line[0] in sections):
            raise _Corrupt(f"{where}lines[{index}] must be [section, offset, source line], "
                           f"got {_describe(line)}")
        offset = _integer({"offset": line[1]}, "offset", 0, ADDRESS_LIMIT - 1,
                          f"{where}lines[{index}].")
        lines[line[0], offset] = _record(SourceLine, line[2], f"{where}lines[{index}]", texts)
    return ObjectFile(filename, sections, symbols, relocations, lines,
                      _integer(item, "stack_bytes", 0, ADDRESS_LIMIT, where), set(weak))
