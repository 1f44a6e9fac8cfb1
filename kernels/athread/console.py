"""The host side of the CPE ``printf``: read the records the runtime (athread.s) left in its
console ``__swsim_console`` and format them with C printf semantics (docs/runtime.md "printf").

A record is a 16-byte header (quad: length in bytes | truncated << 32 | stream << 33, the
stream 0 for _slave_stdout and 1 for _slave_stderr; quad: the cycle at which
printf began), the NUL-terminated format padded to 8 bytes, then for every conversion (and
every ``*`` width or precision) its argument: a quad, or for ``%s`` the string copied at call
time, NUL-terminated and padded to 8 bytes.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

# The letters that athread.s's printf reads as length modifiers (compared in lower case): a
# conversion is '%', then anything up to the first other ASCII letter or '%'.
LENGTH_LETTERS = b"hjlqtz"
# What lies between '%' and the letter: flags, width, precision, length (C99 7.19.6.1).
SPEC = re.compile(r"([-+ #0']*)(\*|\d+)?(?:\.(\*|\d*))?(hh|ll|[hljztqL])?")
INT_BITS = {None: 32, "hh": 8, "h": 16, "l": 64, "ll": 64, "j": 64, "z": 64, "t": 64,
            "q": 64, "L": 64}
SIGNED, UNSIGNED, FLOATS = "di", "uoxX", "fFeEgG"
CONSOLE_SYMBOL = "__swsim_console"      # the runtime's console regions (athread.s)
STREAMS = ("stdout", "stderr")          # a record's stream number names one


@dataclass(frozen=True)
class ConsoleRecord:
    cg: int
    cpe: int
    sequence: int          # the how-manieth printf of this CPE
    cycle: int             # the CG cycle at which the printf began
    text: str
    truncated: bool        # the record did not fit RECORD_BYTES: text formatted up to the cut
    stream: str = "stdout"  # "stdout" (printf, fprintf(_slave_stdout, ...)) or "stderr"


def _layout() -> dict[str, int]:
    from . import runtime_object
    symbols = runtime_object().symbols
    return {name: symbols[name].value for name in (
        "CONSOLE_CGS", "CONSOLE_CPES", "CONSOLE_REGION_BYTES", "CONSOLE_HEADER_BYTES",
        "RECORD_BYTES", "RECORD_HEADER_BYTES", "STREAM_SHIFT")}


def read_console(machine, program, cgs=None) -> tuple[list[ConsoleRecord], dict]:
    """(records of core groups ``cgs`` (default: every CG of the machine that has a console
    slot), ordered by CG, cycle, CPE and sequence; {(cg, cpe): printfs dropped because the
    CPE's region was full})."""
    layout = _layout()
    base = program.symbols[CONSOLE_SYMBOL].value
    region_bytes, cpes = layout["CONSOLE_REGION_BYTES"], layout["CONSOLE_CPES"]
    if cgs is None:
        cgs = range(min(machine.config.num_cgs, layout["CONSOLE_CGS"]))
    records, dropped = [], {}
    for cg in cgs:
        start = base + cg * cpes * region_bytes
        regions = machine.mem.get(start, (cpes, region_bytes), np.uint8)
        for cpe in range(cpes):
            region = regions[cpe].tobytes()
            used, lost = struct.unpack_from("<QQ", region)
            if lost:
                dropped[cg, cpe] = lost
            offset, sequence = layout["CONSOLE_HEADER_BYTES"], 0
            end = offset + min(used, region_bytes - offset)
            while offset < end:
                header, cycle = struct.unpack_from("<QQ", region, offset)
                length = header & 0xFFFFFFFF
                if length < layout["RECORD_HEADER_BYTES"] or offset + length > end:
                    break          # a record the runtime did not write: stop reading here
                body = region[offset + layout["RECORD_HEADER_BYTES"]:offset + length]
                truncated = bool(header >> 32 & 1)
                stream = STREAMS[header >> layout["STREAM_SHIFT"] & 1]
                records.append(ConsoleRecord(cg, cpe, sequence, cycle,
                                             format_record(body), truncated, stream))
                offset += length
                sequence += 1
    records.sort(key=lambda r: (r.cg, r.cycle, r.cpe, r.sequence))
    return records, dropped


def console_text(machine, program, cgs=None, streams=STREAMS) -> str:
    """What the CPEs printed on ``streams``, in the order of ``read_console``, with a note for
    each record cut short and (with "stdout") each CPE whose printfs were dropped."""
    records, dropped = read_console(machine, program, cgs)
    layout = _layout()
    parts = []
    for record in (r for r in records if r.stream in streams):
        parts.append(record.text)
        if record.truncated:
            parts.append(f"[swsim: CG {record.cg} CPE {record.cpe}: printf record cut at "
                         f"{layout['RECORD_BYTES']} bytes]\n")
    for (cg, cpe), lost in sorted(dropped.items()) if "stdout" in streams else ():
        parts.append(f"[swsim: CG {cg} CPE {cpe}: {lost} printf call(s) dropped, its "
                     f"{layout['CONSOLE_REGION_BYTES']}-byte console region is full]\n")
    return "".join(parts)


def format_record(body: bytes) -> str:
    """The text of one record's body (format, then its arguments), formatted as C printf
    would; a record cut short gives the text up to its first missing argument."""
    fmt_end = body.find(b"\0")
    fmt = body[:fmt_end if fmt_end >= 0 else len(body)]
    arguments = _Arguments(body, -(-(len(fmt) + 1) // 8) * 8)
    out, position = [], 0
    for start, end, letter in _conversions(fmt):
        out.append(fmt[position:start].decode("utf-8", "replace"))
        position = end
        try:
            out.append(_convert(fmt[start:end].decode("utf-8", "replace"), letter, arguments))
        except _Exhausted:
            return "".join(out)
    out.append(fmt[position:].decode("utf-8", "replace"))
    return "".join(out)


def _conversions(fmt: bytes):
    """(start, end, letter) of every conversion, found exactly as athread.s's printf finds
    them (letter None: the format ends inside the conversion)."""
    start = fmt.find(b"%")
    while start >= 0:
        end, letter = start + 1, None
        while end < len(fmt):
            char = fmt[end:end + 1]
            end += 1
            if char == b"%" or (char.isalpha() and char.isascii() and
                                char.lower() not in LENGTH_LETTERS):
                letter = char.decode()
                break
        yield start, end, letter
        start = fmt.find(b"%", end)


class _Exhausted(Exception):
    """The record ends before this argument."""


class _Arguments:
    def __init__(self, body: bytes, offset: int):
        self.body, self.offset = body, offset

    def quad(self) -> int:
        if self.offset + 8 > len(self.body):
            raise _Exhausted
        (value,) = struct.unpack_from("<Q", self.body, self.offset)
        self.offset += 8
        return value

    def string(self) -> bytes:
        end = self.body.find(b"\0", self.offset)
        if end < 0:
            raise _Exhausted
        text = self.body[self.offset:end]
        self.offset = -(-(end + 1) // 8) * 8
        return text


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _convert(text: str, letter, arguments: _Arguments) -> str:
    """One conversion ``text`` ('%' ... letter) with the arguments the runtime recorded."""
    if letter == "%":
        return "%" if text == "%%" else text
    spec = SPEC.fullmatch(text[1:-1]) if letter is not None else None
    if spec is None or letter not in SIGNED + UNSIGNED + FLOATS + "csp":
        for _ in range(text.count("*")):   # take what the runtime recorded for it
            arguments.quad()
        if letter is not None:
            arguments.string() if letter == "s" else arguments.quad()
        return text                        # not a conversion C defines (%n, %a, ...): as is
    flags, width, precision, length = spec.groups()
    flags = flags.replace("'", "")         # grouping: the C locale has none
    if width == "*":
        width = _signed(arguments.quad(), 32)
        if width < 0:                      # C: a negative width is the '-' flag
            flags, width = flags + "-", -width
    if precision == "*":
        precision = _signed(arguments.quad(), 32)
        precision = None if precision < 0 else str(precision)
    width = str(width) if width is not None else ""
    spec = "%" + flags + width + ("." + precision if precision is not None else "")
    if letter == "s":
        return (spec + "s") % arguments.string().decode("utf-8", "replace")
    value = arguments.quad()      # the runtime took an argument for every conversion letter
    bits = INT_BITS[length]
    if letter in SIGNED:
        return (spec + "d") % _signed(value, bits)
    if letter == "o" and "#" in flags:     # C's alternative form is a leading 0, not 0o
        digits = "0" + format(value & ((1 << bits) - 1), "o")
        return ("%" + flags.replace("#", "") + width + "s") % digits.replace("00", "0", 1)
    if letter in UNSIGNED:
        return (spec + ("d" if letter == "u" else letter)) % (value & ((1 << bits) - 1))
    if letter == "c":
        return ("%" + flags + width + "c") % chr(value & 0xFF)
    if letter == "p":                      # glibc: 0x-prefixed hex, "(nil)" for 0
        return ("%" + flags.replace("#", "").replace("0", "") + width + "s") % \
            (f"0x{value:x}" if value else "(nil)")
    return (spec + letter) % struct.unpack("<d", struct.pack("<Q", value))[0]
