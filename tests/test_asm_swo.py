""".swo files with malformed headers give a SwoError naming the field, never a raw Python
exception (issue 14): targeted cases and a seeded campaign of mutated files."""
import json
import random
import struct
import zlib

import pytest

from swsim.asm import assemble, disassemble, file_kind
from swsim.asm.asm_commands import listing
from swsim.asm.swo import (FORMAT_VERSION, SwoError, program_bytes,
                           program_from_bytes)
from swsim.cli import main
from swsim.errors import SwsimError
from swsim.vm import Machine

SOURCE = """
    .globl kernel
kernel:
    ldih $gp, 0($27) !gpdisp!1
    ldi $gp, 0($gp) !gpdisp!1
    ldl $1, table($gp) !gprel
1:  subl $1, 1, $1
    bne $1, 1b
    ldl $2, tls($31) !tprel
    halt
    .data
table: .quad 3, kernel
    .ldm
buf: .byte 1, 2, 3
    .tbss
tls: .skip 8
"""
PREAMBLE = struct.Struct("<8sIII")


def split(data):
    _, version, length, _ = PREAMBLE.unpack_from(data)
    header = json.loads(data[PREAMBLE.size:PREAMBLE.size + length])
    return header, data[PREAMBLE.size + length:]


def join(header, blobs):
    body = json.dumps(header).encode() + blobs
    return PREAMBLE.pack(b"SWSIMPRG", FORMAT_VERSION, len(json.dumps(header).encode()),
                         zlib.crc32(body)) + body


VALID = program_bytes(assemble(SOURCE, "k.s"))


def mutated(header, **changes):
    header = json.loads(json.dumps(header))
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = header
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    return header


@pytest.mark.parametrize("changes, message", [
    ({"code_base": None}, "code_base must be an integer, got NoneType null"),
    ({"code_base": 10 ** 12}, "code_base = 1000000000000 is out of range"),
    ({"code_base": 2}, "not a multiple of 4"),
    ({"stack_bytes": "64"}, 'stack_bytes must be an integer, got str "64"'),
    ({"data_base": True}, "data_base must be an integer, got bool true"),
    ({"symbols__0__value": "x"}, "symbols[0].value must be an integer"),
    ({"symbols__0__name": 5}, "symbols[0].name must be a string"),
    ({"symbols__0__source": {"file": "k.s"}}, "symbols[0].source.line is missing"),
    ({"sections__0__base": None}, "sections[0].base must be an integer"),
    ({"sections__0__size": 1 << 40}, "sections[0].size = 1099511627776 must be 0..2^32"),
    ({"sections__0__size": 1 << 20}, "sections[0] (.text) at 0x10000000, 1048576 bytes, is "
                                     "outside its image"),
    ({"sections__0__kind": "rom"}, "sections[0].kind = 'rom' must be one of"),
    ({"sections__0__align": 3}, "sections[0].align = 3 must be a power of two"),
    ({"sections__1__extra": 1}, "sections[1] has unknown field 'extra'"),
    ({"relocations__0__offset": -4}, "relocations[0].offset = -4 must be 0..2^32-1"),
    ({"lines__0": [1, 2, 3]}, "lines[0] must be [address, source line]"),
    ({"lines": {}}, "lines must be a list, got dict {}"),
    ({"code_bytes": -4}, "code_bytes = -4 is out of range"),
    ({"lines__0__1__text": 99}, "lines[0].text must be an index into texts (0..10), got int 99"),
    ({"texts": ["a", None]}, "texts must be a list of strings"),
])
def test_bad_header_fields_are_named(changes, message):
    header, blobs = split(VALID)
    with pytest.raises(SwoError) as info:
        program_from_bytes(join(mutated(header, **changes), blobs), "m.swo")
    assert str(info.value).startswith("m.swo: corrupt .swo file: ")
    assert message in str(info.value)


def test_a_line_of_many_statements_is_stored_once():
    statements = [f"addl $1, {i % 200:3d}, $3" for i in range(2000)]
    one_line = program_bytes(assemble("; ".join(statements)))
    separate = program_bytes(assemble("\n".join(statements)))
    line = "; ".join(statements)  # 38 kB, stored once, not 2000 times
    assert len(one_line) < len(separate) + 2 * len(line)
    assert program_from_bytes(one_line).lines[0x1000_0000 + 4 * 1999].col == 1999 * 18 + 1


def test_a_header_that_is_not_an_object():
    with pytest.raises(SwoError, match="the header is not a JSON object"):
        program_from_bytes(join([1, 2], b""), "m.swo")


# values a careless or hostile writer puts into a field
WRONG_VALUES = [None, True, "7", 1.5, -1, 3, 10 ** 12, 1 << 70, [], {}, [1, 2], {"a": 1}, ""]


def paths(node, prefix=()):
    """Every (container, key) in the JSON tree."""
    items = enumerate(node) if isinstance(node, list) else node.items()
    for key, value in items:
        yield prefix + (key,)
        if isinstance(value, (list, dict)):
            yield from paths(value, prefix + (key,))


def randomly_mutated(header: dict, every_path: list, rng: random.Random) -> dict:
    """A copy of ``header`` with one field (a path of ``paths``) replaced by one of
    WRONG_VALUES, removed, or joined by an unexpected one."""
    copy = json.loads(json.dumps(header))
    *parents, last = rng.choice(every_path)
    node = copy
    for key in parents:
        node = node[key]
    if rng.random() < 0.15 and isinstance(node, dict):
        del node[last]
    elif rng.random() < 0.05 and isinstance(node, dict):
        node["unexpected"] = 1
    else:
        node[last] = rng.choice(WRONG_VALUES)
    return copy


def test_mutated_files_load_or_fail_with_a_swo_error():
    """1,500 seeded mutations of a valid file (one header field replaced, removed or added, or
    raw bytes flipped or cut): each loads as a usable Program or raises SwoError."""
    header, blobs = split(VALID)
    every_path = list(paths(header))
    rng = random.Random(14)
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(1500):
        roll = rng.random()
        if roll < 0.8:
            data = join(randomly_mutated(header, every_path, rng), blobs)
        else:
            data = bytearray(VALID)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data[:rng.randint(len(data) // 2, len(data))] if roll > 0.95 else data)
        try:
            program = program_from_bytes(data, "m.swo")
        except SwoError:
            outcomes["refused"] += 1
            continue
        outcomes["loaded"] += 1
        disassemble(program)  # a loaded program is usable
        listing(program)
    assert outcomes["refused"] > 1000 and outcomes["loaded"] > 50, outcomes


def raw(header_text: bytes, blobs=b"", length=None):
    """A file of this header text, its length field `length` (default: the true one)."""
    body = header_text + blobs
    return PREAMBLE.pack(b"SWSIMPRG", FORMAT_VERSION, len(header_text) if length is None
                         else length, zlib.crc32(body)) + body


def test_one_flipped_bit_is_refused_by_the_checksum():
    for position in (PREAMBLE.size, len(VALID) // 2, len(VALID) - 1):
        data = bytearray(VALID)
        data[position] ^= 0x10
        with pytest.raises(SwoError, match="the checksum does not match"):
            program_from_bytes(bytes(data), "m.swo")


def test_a_deeply_nested_or_overlong_header_is_a_swo_error():
    with pytest.raises(SwoError, match="the header nests too deep"):
        program_from_bytes(raw(b"[" * 100_000 + b"]" * 100_000), "m.swo")
    with pytest.raises(SwoError, match="header length 4294967295 is beyond the file's"):
        program_from_bytes(raw(b"{}", length=2**32 - 1), "m.swo")


def test_a_program_file_is_known_by_its_magic_not_its_name(tmp_path):
    machine = Machine()
    halt = program_bytes(assemble(".text\n.globl kernel\nkernel:\n\thalt\n"))
    for name in ("prog.bin", "PROG.SWO"):
        path = tmp_path / name
        path.write_bytes(halt)
        assert file_kind(path) == "program"
        assert main(["disasm", str(path)]) == 0
        assert machine.run(path, entry="kernel", cpes=[0]).cycles > 0   # a PathLike
    with pytest.raises(SwsimError, match="a directory"):
        file_kind(tmp_path)
    with pytest.raises(SwsimError, match="cannot read"):
        file_kind(tmp_path / "missing.swo")
