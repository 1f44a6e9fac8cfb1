"""QingLong's segments and relocations (issue 25 item 1): the package link (asm/package.py,
asm/linker.py) and the package on a device (hostlib/qinglong/package.py)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from swsim.asm import AsmError, assemble_objects, build, build_package, disassemble_word, link, \
    load_objects, save_objects
from swsim.asm.package import package_of
from swsim.asm import assembler as assembler_module
from swsim.asm.words import split_hi_lo
from swsim.errors import ArgumentError
from swsim.hostlib.qinglong import Device
from swsim.hostlib.qinglong.net import QingLongError
from swsim.hostlib.qinglong.package import BiasAdd, PackageKernel
from swsim.vm import Machine

FIRST = """
	.qconst
	.align	7
w1:	.skip	200
	.size	w1, 200
	.qio
x_in:	.quad	0
	.text
	.globl	main
main:	ldl	$1, x_in($18) !io
	ldl	$2, w1+8($16) !seg
	ldi	$3, w2($16) !seg
	ldi	$4, tmp($17) !seg
	ret
"""
SECOND = """
	.qconst
	.align	3
	.globl	w2
w2:	.quad	7
	.qscratch
	.globl	tmp
	.skip	24
tmp:	.skip	8
	.qio
	.globl	y_out
y_out:	.quad	0
"""


def words_of(package):
    return [int(w) for w in package.program.code]


def test_segments_are_prefix_summed_and_the_package_orders_code_then_constants():
    package = build_package([(FIRST, "a.s"), (SECOND, "b.s")])
    assert package.sizes == {"constants": 208, "scratch": 32, "io": 16}
    assert package.slots == {"x_in": 0, "y_out": 1}
    assert package.program.symbols["w2"].value == 200          # after a.s's 200 bytes
    assert package.program.data_image == b""                   # nothing at a fixed address
    assert package.constants[200:208] == (7).to_bytes(8, "little")
    code = package.program.code.astype("<u4").tobytes()
    assert package.image == code + package.constants
    disp = [w & 0xFFFF for w in words_of(package)[:4]]
    rb = [(w >> 16) & 31 for w in words_of(package)[:4]]
    assert (disp[0], rb[0]) == (0, 18)        # slot 0 of the table in $18
    assert (disp[1], rb[1]) == (8, 16)        # w1 + 8 from the constants' base
    assert (disp[2], rb[2]) == (200, 16)      # ldi !seg relaxed to one word: $3 = $16 + 200
    assert (disp[3], rb[3]) == (24, 17)
    unrelaxed = package_of(build([(FIRST, "a.s"), (SECOND, "b.s")], package=True))
    disp = [w & 0xFFFF for w in words_of(unrelaxed)[:6]]
    assert (disp[2], disp[3], disp[4], disp[5]) == (0, 200, 0, 24)   # one link: the pairs
    assert unrelaxed.constants == package.constants and unrelaxed.sizes == package.sizes


def test_segment_relocations_survive_an_object_file(tmp_path):
    save_objects(assemble_objects([(FIRST, "a.s"), (SECOND, "b.s")]), tmp_path / "ab.swo")
    package = package_of(link(load_objects(tmp_path / "ab.swo"), package=True))
    direct = package_of(build([(FIRST, "a.s"), (SECOND, "b.s")], package=True))
    assert package.image == direct.image and package.sizes == direct.sizes


def test_an_offset_past_16_bits_takes_the_pair_and_a_single_displacement_is_refused():
    far = """
	.qconst
	.skip	70000
far:	.quad	1
	.text
main:	ldi	$3, far($16) !seg
	ret
"""
    package = build_package([(far, "far.s")])
    hi, lo = (int(w) & 0xFFFF for w in package.program.code[:2])
    signed = lo - (1 << 16) if lo >= 1 << 15 else lo
    assert (hi << 16) + signed == 70000 == package.program.symbols["far"].value
    assert (hi, lo) == tuple(v & 0xFFFF for v in split_hi_lo(70000))
    with pytest.raises(AsmError) as info:
        build_package([(far.replace("ldi\t$3", "ldl\t$3"), "far.s")])
    text = str(info.value)
    assert "far.s:6:15: error: the target is at offset 70000 of the constants segment, " \
        "beyond a 16-bit displacement (at most 32767): take its address with ldi" in text
    assert "main:\tldl\t$3, far($16) !seg\n     \t   \t    ^" in text   # caret: the operand


def test_relaxation_keeps_the_pair_where_16_bits_may_not_reach():
    """An ldi !seg is one word only when the first link bounds its offset within 16 bits: a
    global symbol by its offset plus the addend, a local one by its whole segment's size."""
    source = """
	.qconst
near:	.skip	32760
	.size	near, 32760
	.globl	edge
edge:	.quad	1
	.text
	.globl	main
main:	ldi	$3, near($16) !seg
	ldi	$4, edge($16) !seg
	ret
"""
    other = """
	.text
	.globl	f
f:	ldi	$5, edge($16) !seg
	ldi	$6, edge+8($16) !seg
	ret
"""
    package = build_package([(source, "a.s"), (other, "b.s")])
    names = [disassemble_word(int(word)).split()[0] for word in package.program.code]
    # a.s: near (local) is bounded by the segment's 32768 bytes: the pair; edge (global, at
    # 32760) one word, in b.s too; edge + 8 = 32768 is not
    assert names == ["ldih", "ldi", "ldi", "ret", "ldi", "ldih", "ldi", "ret"]
    assert package.program.symbols["edge"].value == 32760


@pytest.mark.parametrize("line, message", [
    ("ldl $5, w1($18) !io", "!io: the target is in the constants segment, not an I/O slot"),
    ("ldl $5, x_in($18) !seg", "!seg: the target is an I/O slot: load the address it holds "
                               "with !io"),
    ("ldi $5, w1", "the target is in the constants segment, whose address is known only when "
                   "the package is loaded"),
    ("ldw $5, x_in($18) !io", "!io must be on an ldl"),
    ("ldl $5, main($16) !seg", "!seg: the target is not in a segment"),
    ("ldl $5, 8($16) !seg", "!seg needs a symbol of a segment, got the number 8"),
])
def test_bad_relocations_are_refused_with_the_reason_and_the_place(line, message):
    source = FIRST.replace("\tret\n", f"\t{line}\n\tret\n")
    with pytest.raises(AsmError) as info:
        build_package([(source, "a.s"), (SECOND, "b.s")])
    assert "a.s:14:" in str(info.value) and message in str(info.value)


def test_segments_need_a_package_link_and_a_package_keeps_its_data_in_them():
    with pytest.raises(AsmError, match="!io needs a package link"):
        build([(FIRST, "a.s"), (SECOND, "b.s")])
    with pytest.raises(AsmError, match=r"a.s:3:1: error: section .data is main-memory data "
                                       "outside the segments"):
        build_package([("\t.data\n\t.quad 0\nd:\t.quad 1\n\t.text\nmain:\tret\n", "a.s")])
    with pytest.raises(AsmError, match="section .qio holds initialised bytes, but the io "
                                       "segment is not copied"):
        build_package([("\t.qio\ns:\t.quad 5\n\t.text\nmain:\tret\n", "a.s")])


def test_with_constant_binds_a_sized_symbol_only():
    package = build_package([(FIRST, "a.s"), (SECOND, "b.s")])
    bound = package.with_constant("w1", bytes(range(200)))
    assert bound.constants[:200] == bytes(range(200)) and bound.program is package.program
    with pytest.raises(ArgumentError, match="w1 is 200 bytes"):
        package.with_constant("w1", b"1")
    with pytest.raises(ArgumentError, match="'x_in' is not a symbol of the constants"):
        package.with_constant("x_in", b"1")


FAR_READ = """
	.qio
	.globl	out
out:	.quad	0
	.qconst
	.skip	70000
	.align	3
far:	.quad	0x123456789
	.text
	.globl	main
main:	ldi	$1, far($16) !seg
	ldl	$2, 0($1)
	ldl	$3, out($18) !io
	stl	$2, 0($3)
	ret
"""


@pytest.mark.parametrize("engine", ["c", "python"])
def test_a_package_runs_through_its_segment_bases(engine):
    device = Device(machine=Machine())
    kernel = PackageKernel(build_package([(FAR_READ, "far.s")]), "main", device)
    kernel.copy_constant()
    out = device.malloc(8)
    kernel.compute({"out": out}, engine=engine)
    assert device.copy_out(out, (1,), np.int64)[0] == 0x123456789
    with pytest.raises(QingLongError, match=r"I/O slot\(s\) \['out'\] of the package are "
                                            "unbound"):
        kernel.compute({})
    with pytest.raises(QingLongError, match=r"no I/O slot\(s\) \['in'\]"):
        kernel.compute({"out": out, "in": out})


N = 512


@pytest.fixture(scope="module")
def bias_add():
    rng = np.random.default_rng(25)
    bias, x = rng.standard_normal(N), rng.standard_normal(N)
    device = Device(machine=Machine())
    op = BiasAdd(bias, device)
    op.copy_constant()
    return op, device, bias, x


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pad_in=st.integers(1, 8192), pad_out=st.integers(1, 8192))
def test_moving_the_inputs_and_outputs_never_needs_reassembly(bias_add, pad_in, pad_out,
                                                              monkeypatch):
    op, device, bias, x = bias_add
    monkeypatch.setattr(assembler_module.Assembler, "run",
                        lambda *_: pytest.fail("re-assembled"))
    mem, constants = device.machine.mem, op.kernel.segments["constants"]
    before = mem.get(constants.address, (constants.nbytes,), np.uint8).copy()
    code = op.kernel.package.program.code.copy()
    blocks = [device.malloc(pad_in), device.malloc(N * 8), device.malloc(pad_out),
              device.malloc(N * 8)]
    try:
        device.copy_in(blocks[1], x)
        stats = op.compute(blocks[1], blocks[3])
        assert np.array_equal(device.copy_out(blocks[3], (N,), np.float64), x + bias)
        assert np.array_equal(mem.get(constants.address, (constants.nbytes,), np.uint8), before)
        assert np.array_equal(op.kernel.package.program.code, code)
        table = op.kernel.segments["io"]
        assert list(mem.get(table.address, (2,), np.int64)) == [blocks[1].address,
                                                                blocks[3].address]
        assert stats.details["copy_cycles"] > 0
    finally:
        for block in blocks:
            device.free(block)


def test_bias_add_refuses_what_it_cannot_run():
    device = Device(machine=Machine())
    with pytest.raises(QingLongError, match="n must be a positive multiple of 256"):
        BiasAdd(np.zeros(100), device)
    with pytest.raises(ArgumentError, match="1-D float64"):
        BiasAdd(np.zeros(256, np.float32), device)
