"""Relocatable objects (issue 28): `swsim asm` leaves symbols a source uses and does not define
to the linker (an object .swo, as GNU as does); `swsim run` on the object links it as it links
the source, and `Machine.run` builds programs the way `swsim run` does."""
import json
import random
import zlib

import numpy as np
import pytest

import swsim
from swsim.asm import (AsmError, ObjectFile, assemble_objects, build_files, file_kind, link,
                       load_objects, undefined_symbols)
from swsim.asm.objfile import objects_bytes, objects_from_bytes
from swsim.asm.swo import SwoError
from swsim.cli import main
from swsim.kernels import source_path
from test_asm_swo import paths, randomly_mutated

HELLO = source_path("examples/hello_athread.s")
CALLER = """\t.globl f
f:\tldl $27, helper($29)\t!literal!1
\tcall $26, ($27), helper\t!lituse_jsr!1
\tldw $1, _MYID($31)\t!tprel
\tret
\t.section .debug_info
\t.quad 5
"""


def test_objects_round_trip_through_bytes():
    objects = assemble_objects([(CALLER, "c.s"), (HELLO.read_text(), str(HELLO))])
    assert objects_from_bytes(objects_bytes(objects)) == objects
    assert set(undefined_symbols(objects)) >= {"helper", "_MYID", "printf"}


def test_undefined_symbols_name_their_first_use_and_skip_weak_references():
    (obj,) = assemble_objects([("\t.weak w\n\tldi $1, w\n" + CALLER, "c.s")])
    missing = undefined_symbols([obj])
    assert sorted(missing) == ["_MYID", "helper"]
    assert (missing["helper"].source.file, missing["helper"].source.line) == ("c.s", 4)


def test_asm_writes_an_object_when_symbols_are_left_and_run_links_it_like_the_source(
        tmp_path, capsys):
    out = tmp_path / "o.npy"
    np.save(out, np.zeros(64))
    obj = tmp_path / "hello.swo"
    assert main(["asm", str(HELLO), "-o", str(obj)]) == 0
    note = capsys.readouterr().err
    assert "relocatable object; symbols left to the linker: _COL (" in note and "printf (" in note
    assert file_kind(obj) == "object"
    runs = []
    for program in (obj, HELLO):
        assert main(["run", str(program), "--entry", "hello", "--cpes", "3",
                     "--arg", f"@{out}"]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] and "hello from CPE 2 (row 0, col 2)" in runs[0]


def test_asm_links_objects_with_sources_and_c_keeps_an_object(tmp_path, capsys):
    (tmp_path / "a.s").write_text("\t.globl f\nf:\tldi $1, 3\n\tbr g\n")
    (tmp_path / "b.s").write_text("\t.globl g\ng:\tret\n")
    assert main(["asm", "-c", str(tmp_path / "b.s")]) == 0
    assert file_kind(tmp_path / "b.swo") == "object"
    assert main(["asm", str(tmp_path / "a.s"), str(tmp_path / "b.swo"), "-o",
                 str(tmp_path / "p.swo"), "--listing"]) == 0
    assert file_kind(tmp_path / "p.swo") == "program"
    assert "b.s:2: g:\tret" in capsys.readouterr().out
    assert main(["asm", str(tmp_path / "p.swo"), str(tmp_path / "b.s")]) == 1
    assert "a linked program cannot be linked again" in capsys.readouterr().err


def test_a_symbol_nothing_defines_is_refused_at_link_time_where_it_is_used(tmp_path, capsys):
    (tmp_path / "c.s").write_text(CALLER)
    assert main(["asm", str(tmp_path / "c.s")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "c.swo"), "--entry", "f"]) == 1
    err = capsys.readouterr().err
    assert "c.s:2:13: error: undefined symbol helper\n" in err and "Traceback" not in err
    assert "c.s:3:" in err     # every use is named; _MYID comes from the runtime


def test_machine_run_links_the_runtime_as_swsim_run_does(tmp_path, capsys):
    out = tmp_path / "o.npy"
    np.save(out, np.zeros(64))
    assert main(["run", str(HELLO), "--entry", "hello", "--cpes", "2", "--arg", f"@{out}",
                 "--json"]) == 0
    cli_cycles = json.loads(capsys.readouterr().out)["cycles"]
    (obj,) = assemble_objects([(HELLO.read_text(), str(HELLO))])
    for program in (str(HELLO), HELLO.read_text(), obj, [obj]):
        machine = swsim.Machine()
        result = machine.run(program, entry="hello", cpes=range(2),
                             args=[machine.mem.put(np.zeros(64))])
        assert result.cycles == cli_cycles


def test_machine_program_refuses_other_things():
    with pytest.raises(swsim.vm.HostError, match="an ObjectFile or a list of them"):
        swsim.Machine.program(42)
    with pytest.raises(AsmError, match="undefined symbol helper"):
        swsim.Machine.program(CALLER)


PREAMBLE_BYTES = 20       # magic, version, header length, CRC-32


def split(data: bytes) -> tuple[dict, bytes]:
    """(the JSON header, the contents after it) of an object file."""
    head = PREAMBLE_BYTES + int.from_bytes(data[12:16], "little")
    return json.loads(data[PREAMBLE_BYTES:head]), data[head:]


def with_header(data: bytes, header: dict) -> bytes:
    """The object file ``data`` with another header, its length and checksum made consistent
    (so the loader's field checks, not the checksum, see the change)."""
    blob = json.dumps(header).encode()
    body = blob + split(data)[1]
    return data[:12] + len(blob).to_bytes(4, "little") + zlib.crc32(body).to_bytes(4, "little") \
        + body


def corrupted(mutate):
    data = objects_bytes(assemble_objects([(CALLER, "c.s")]))
    header = split(data)[0]
    mutate(header)
    return with_header(data, header)


@pytest.mark.parametrize("mutate, message", [
    (lambda h: h.pop("objects"), "objects must be a list, got NoneType null"),
    (lambda h: h["objects"][0]["sections"][0].update(kind="rom"),
     "objects[0].sections[0].kind = 'rom' must be one of text, ldm, data, bss, noload"),
    (lambda h: h["objects"][0]["sections"][0].update(data_bytes=3),
     "objects[0].sections[0].data_bytes = 3 does not fit a text section of 20 bytes"),
    (lambda h: h["objects"][0]["symbols"][0].update(section=".nowhere"),
     "objects[0].symbol names section '.nowhere', which the object does not have"),
    (lambda h: h["objects"][0]["relocations"][0].update(kind=7),
     "objects[0].relocations[0].kind must be a string, got int 7"),
    (lambda h: h["objects"][0].update(lines=[[".text", -4, None]]),
     "objects[0].lines[0].offset = -4 is out of range"),
])
def test_corrupt_objects_give_a_swo_error_naming_the_field(mutate, message):
    with pytest.raises(SwoError) as info:
        objects_from_bytes(corrupted(mutate), "c.swo")
    assert str(info.value).startswith("c.swo: corrupt .swo file: ") and message in str(info.value)


def test_object_files_load_from_disk_and_link(tmp_path):
    (tmp_path / "c.s").write_text("\t.globl helper\nhelper:\tret\n")
    assert main(["asm", "-c", str(tmp_path / "c.s")]) == 0
    (obj,) = load_objects(str(tmp_path / "c.swo"))
    assert isinstance(obj, ObjectFile) and obj.symbols["helper"].binding == "global"
    assert len(build_files([str(tmp_path / "c.swo")]).code) == 1


def test_mutated_objects_load_and_link_or_fail_with_a_swsim_error():
    """600 seeded mutations of an object file (a header field replaced, removed or added, or
    bytes flipped): each loads and links, or raises SwoError (load) or AsmError (link)."""
    data = objects_bytes(assemble_objects([(CALLER + "\t.text\n\t.globl helper\nhelper:\tret\n"
                                            "\t.data\nv:\t.quad helper\n\t.section .tbss\n"
                                            "\t.globl _MYID\n_MYID:\t.skip 8\n", "c.s")]))
    header = split(data)[0]
    every_path = list(paths(header))
    rng = random.Random(28)
    outcomes = {"linked": 0, "refused": 0}
    for _ in range(600):
        if rng.random() < 0.85:
            changed = with_header(data, randomly_mutated(header, every_path, rng))
        else:
            changed = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                changed[rng.randrange(len(changed))] = rng.randrange(256)
            changed = bytes(changed)
        try:
            link(objects_from_bytes(changed, "m.swo"))
            outcomes["linked"] += 1
        except (SwoError, AsmError):
            outcomes["refused"] += 1
    assert outcomes["linked"] > 20 and outcomes["refused"] > 300, outcomes
