"""Instruction semantics (docs/semantics.md) on the reference engine, incl. float edge cases.

Inputs arrive in a0..a2 ($16..$18; Python floats are passed as their double bits), results are
read from $0.
"""
import math
import struct
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim import isa
from swsim.vm import floats
from swsim.vm.semantics import SEMANTICS
from vm_helpers import freg, lanes, ldm, reg, run

M64 = (1 << 64) - 1
NAN = 0x7FF8000000000000
TWO = 0x4000000000000000


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f32(x: float) -> float:
    return float(np.float32(x))


def result(body, *args, ldm_data=""):
    _, m = run(body + "\n halt\n" + (f".section .ldm\n{ldm_data}\n" if ldm_data else ""),
               args=args)
    return m


def test_every_instruction_has_semantics():
    assert {i.name for i in isa.INSTRUCTIONS} <= set(SEMANTICS)


@pytest.mark.parametrize("body, args, expected", [
    ("addw $16, $17, $0", (0x7FFFFFFF, 1), 0xFFFFFFFF80000000),
    ("subw $16, $17, $0", (0, 1), M64),
    ("s4addw $16, $17, $0", (0x40000000, 1), 1),
    ("s8subl $16, $17, $0", (2, 1), 15),
    ("s4subw $16, $17, $0", (1, 5), M64),
    ("s8addw $16, $17, $0", (1, 1), 9),
    ("s4addl $16, $17, $0", (1, 1), 5),
    ("s4subl $16, $17, $0", (1, 1), 3),
    ("s8addl $16, $17, $0", (1, 1), 9),
    ("addl $16, $17, $0", (M64, 2), 1),
    ("subl $16, $17, $0", (0, 1), M64),
    ("addl $16, 255, $0", (1,), 256),
    ("mulw $16, $17, $0", (0x10000, 0x8000), 0xFFFFFFFF80000000),
    ("mull $16, $17, $0", (1 << 40, 1 << 30), 1 << 70 & M64),
    ("umulh $16, $17, $0", (1 << 63, 4), 2),
    ("cmpeq $16, $17, $0", (5, 5), 1),
    ("cmplt $16, $17, $0", (M64, 0), 1),
    ("cmple $16, $17, $0", (3, 3), 1),
    ("cmpult $16, $17, $0", (M64, 0), 0),
    ("cmpule $16, $17, $0", (0, M64), 1),
    ("and $16, $17, $0", (0b1100, 0b1010), 0b1000),
    ("bic $16, $17, $0", (0b1100, 0b1010), 0b0100),
    ("bis $16, $17, $0", (0b1100, 0b1010), 0b1110),
    ("ornot $16, $17, $0", (0, 1), M64 - 1),
    ("xor $16, $17, $0", (0b1100, 0b1010), 0b0110),
    ("eqv $16, $17, $0", (0, 0), M64),
    ("sll $16, $17, $0", (1, 65), 2),               # count & 63
    ("srl $16, $17, $0", (1 << 63, 63), 1),
    ("sra $16, $17, $0", (1 << 63, 63), M64),
    ("seleq $16, $17, $18, $0", (0, 1, 2), 1),
    ("selne $16, $17, $18, $0", (0, 1, 2), 2),
    ("sellt $16, $17, $18, $0", (M64, 1, 2), 1),
    ("selle $16, $17, $18, $0", (1, 1, 2), 2),
    ("selgt $16, $17, $18, $0", (M64, 1, 2), 2),
    ("selge $16, 7, $18, $0", (0, 0, 2), 7),
    ("ldi $0, -2($16)", (1,), M64),
    ("ldih $0, -1($16)", (0,), 0xFFFFFFFFFFFF0000),
])
def test_integer(body, args, expected):
    assert reg(result(body, *args), 0) == expected


def test_scalar_results_keep_the_upper_lanes():
    m = result("vcpyf $16, $0\n addl $31, 9, $0", 7)
    assert lanes(m, 0) == [9, 7, 7, 7]


@pytest.mark.parametrize("body, expected", [
    ("vaddw $1, $2, $0", [0xFFFFFFFF + 1 & 0xFFFFFFFF, 3]),   # word 0 wraps
    ("vsubw $1, $2, $0", [0xFFFFFFFF - 1, 3 - 0]),
    ("vaddw $1, 1, $0", [0, 4]),
    ("vsllw $1, $2, $0", [0xFFFFFFFE, 6]),                    # count = word 0 of $2 = 1
    ("vsrlw $1, 1, $0", [0x7FFFFFFF, 1]),
    ("vsraw $1, 1, $0", [0xFFFFFFFF, 1]),
])
def test_vector_word_operations(body, expected):
    m = result("vldd $1, 0($31)\n vldd $2, 32($31)\n" + body,
               ldm_data=".word 0xFFFFFFFF, 3, 0, 0, 0, 0, 0, 0\n.word 1, 0, 0, 0, 0, 0, 0, 0")
    got = lanes(m, 0)
    assert [got[0] & 0xFFFFFFFF, got[0] >> 32] == expected


def test_vector_long_operations():
    m = result("vldd $1, 0($31)\n vaddl $1, $1, $0\n vsubl $1, 2, $2",
               ldm_data=".quad -1, 1, 2, 3")
    assert lanes(m, 0) == [M64 - 1, 2, 4, 6]
    assert lanes(m, 2) == [M64 - 2, M64, 0, 1]


# ---- floating point -------------------------------------------------------------------------
TINY = 2.0 ** -30


@pytest.mark.parametrize("body, args, expected", [
    ("faddd $16, $17, $0", (1.5, 2.25), 3.75),
    ("fsubd $16, $17, $0", (1.0, 3.0), -2.0),
    ("fmuld $16, $17, $0", (1e300, 1e300), math.inf),
    ("fdivd $16, $17, $0", (1.0, 0.0), math.inf),
    ("fdivd $16, $17, $0", (-1.0, 0.0), -math.inf),
    ("fsqrtd $16, $0", (2.0,), math.sqrt(2.0)),
    ("fsqrtd $16, $0", (-0.0,), -0.0),
    # single precision: operands rounded to binary32 first, result rounded once
    ("fadds $16, $17, $0", (1.0, 2.0 ** -25), 1.0),
    ("fadds $16, $17, $0", (1.0 + 2.0 ** -24 + 2.0 ** -50, 0.0), 1.0 + 2.0 ** -23),
    ("fmuls $16, $17, $0", (0.1, 3.0), f32(f32(0.1) * 3.0)),
    ("fsubs $16, $17, $0", (1.0, 0.1), f32(1.0 - f32(0.1))),
    ("fdivs $16, $17, $0", (1.0, 3.0), f32(1.0 / 3.0)),
    ("fsqrts $16, $0", (2.0,), f32(math.sqrt(2.0))),
    ("fmuls $16, $17, $0", (1e20, 1e20), math.inf),          # overflows binary32
    # fused: a*b - 1 exactly -2^-60; unfused (fmuld then faddd) gives 0
    ("fmad $16, $17, $18, $0", (1 + TINY, 1 - TINY, -1.0), -(2.0 ** -60)),
    ("fmuld $16, $17, $1\n faddd $1, $18, $0", (1 + TINY, 1 - TINY, -1.0), 0.0),
    ("fmsd $16, $17, $18, $0", (1 + TINY, 1 - TINY, 1.0), -(2.0 ** -60)),
    ("fnmad $16, $17, $18, $0", (1 + TINY, 1 - TINY, 1.0), 2.0 ** -60),
    ("fnmsd $16, $17, $18, $0", (2.0, 3.0, 1.0), -7.0),
    ("fmas $16, $17, $18, $0", (1 + 2.0 ** -12, 1 - 2.0 ** -12, -1.0), -(2.0 ** -24)),
    ("fmss $16, $17, $18, $0", (2.0, 3.0, 1.0), 5.0),
    ("fnmas $16, $17, $18, $0", (2.0, 3.0, 1.0), -5.0),
    ("fnmss $16, $17, $18, $0", (2.0, 3.0, 1.0), -7.0),
    # signed zeros
    ("faddd $16, $17, $0", (-0.0, -0.0), -0.0),
    ("faddd $16, $17, $0", (-0.0, 0.0), 0.0),
    ("fmad $16, $17, $18, $0", (0.0, -1.0, -0.0), -0.0),
    ("fnmad $16, $17, $18, $0", (0.0, 1.0, 0.0), 0.0),
    ("fmad $16, $17, $18, $0", (1.0, 1.0, -1.0), 0.0),
    # conversions
    ("fcvtds $16, $0", (0.1,), f32(0.1)),
    ("fcvtsd $16, $0", (0.5,), 0.5),
    ("fcvtld $16, $0", ((1 << 63) - 1,), 2.0 ** 63),
])
def test_float(body, args, expected):
    got = freg(result(body, *args), 0)
    assert bits(got) == bits(expected), (got, expected)


@pytest.mark.parametrize("body, args", [
    ("faddd $16, $17, $0", (0x7FF0000000000001, bits(1.0))),    # signalling NaN operand
    ("fmuld $16, $17, $0", (bits(math.inf), bits(0.0))),
    ("fsubd $16, $17, $0", (bits(math.inf), bits(math.inf))),
    ("fdivd $16, $17, $0", (bits(0.0), bits(0.0))),
    ("fsqrtd $16, $0", (bits(-1.0),)),
    ("fmad $16, $17, $18, $0", (bits(math.inf), bits(0.0), bits(1.0))),
    ("fmad $16, $17, $18, $0", (bits(math.inf), bits(1.0), bits(-math.inf))),
    ("fadds $16, $17, $0", (0xFFF0000000000123, bits(1.0))),
    ("fcvtsd $16, $0", (0xFFF8000000000001,)),
    ("vaddd $16, $17, $0", (0x7FF0000000000001, 0)),
])
def test_nan_results_are_canonical(body, args):
    assert reg(result(body, *args), 0) == NAN


@pytest.mark.parametrize("op, a, b, expected", [
    ("fcmpeq", 1.0, 1.0, TWO), ("fcmpeq", -0.0, 0.0, TWO), ("fcmplt", 1.0, 2.0, TWO),
    ("fcmple", 2.0, 1.0, 0), ("fcmpeq", math.nan, math.nan, 0), ("fcmplt", math.nan, 1.0, 0),
    ("fcmpun", math.nan, 1.0, TWO), ("fcmpun", 1.0, 1.0, 0),
])
def test_float_compare(op, a, b, expected):
    assert reg(result(f"{op} $16, $17, $0", a, b), 0) == expected


@pytest.mark.parametrize("value, expected", [
    (-2.7, (-2) & M64), (2.0 ** 62, 1 << 62), (math.nan, 1 << 63), (1e300, 1 << 63),
    (-(2.0 ** 63), 1 << 63), (math.inf, 1 << 63),
])
def test_double_to_long_truncates(value, expected):
    assert reg(result("fcvtdl $16, $0", value), 0) == expected


@pytest.mark.parametrize("body, args, expected", [
    ("fcpys $16, $17, $0", (bits(-1.0), bits(2.0)), bits(-2.0)),
    ("fcpysn $16, $17, $0", (bits(-1.0), bits(2.0)), bits(2.0)),
    ("fcpyse $16, $17, $0", (bits(4.0), bits(1.5)), bits(6.0)),
    ("fcpys $16, $17, $0", (0, 0x7FF0000000000001), 0x7FF0000000000001),   # keeps NaN bits
    ("fimovd $16, $0", (0x7FF0000000000001,), 0x7FF0000000000001),
    ("ifmovd $16, $0", (0x7FF0000000000001,), 0x7FF0000000000001),
    ("fimovs $16, $0", (bits(-1.0),), 0xFFFFFFFFBF800000),
    ("ifmovs $16, $0", (0x3FC00000,), bits(1.5)),
    ("ifmovs $16, $0", (0x7F800001,), NAN),
])
def test_moves(body, args, expected):
    assert reg(result(body, *args), 0) == expected


def test_vector_float_lanes():
    m = result("vldd $1, 0($31)\n vldd $2, 32($31)\n vmad $1, $2, $2, $0\n vadds $1, $2, $3",
               ldm_data=".double 1.0, 2.0, 0.1, -0.0\n.double 3.0, 4.0, 0.2, -0.0")
    fused = float(Fraction(0.1) * Fraction(0.2) + Fraction(0.2))
    assert [freg(m, 0, lane=i) for i in range(4)] == [6.0, 12.0, fused, 0.0]
    assert freg(m, 3, lane=2) == f32(f32(0.1) + f32(0.2))
    assert bits(freg(m, 3, lane=3)) == bits(-0.0)


# ---- instructions of compiled code (docs/semantics.md "Compiled-code extras") --------------
S63 = 1 << 63


def run_on(body, *args, ldm_data=""):
    """Run on both engines (vm_helpers.run checks that they agree)."""
    _, m = run(body + "\n halt\n" + (f".section .ldm\n{ldm_data}\n" if ldm_data else ""),
               args=args)
    return m


@pytest.mark.parametrize("body, args, expected", [
    ("zap $16, $17, $0", (0x1122334455667788, 0b10000001), 0x0022334455667700),
    ("zapnot $16, 0x0F, $0", (0x1122334455667788,), 0x55667788),   # zero-extend 32 bits
    ("zapnot $16, $17, $0", (M64, 0x100 | 3), 0xFFFF),             # mask: bits 0-7 of rb
    ("sextb $16, $0", (0x1FF,), M64),
    ("sextb 0x7F, $0", (), 0x7F),
    ("sexth $16, $0", (0x18000,), 0xFFFFFFFFFFFF8000),
    ("sextw $16, $0", (0x1_8000_0000,), 0xFFFFFFFF80000000),
    ("andnot $16, $17, $0", (0b1100, 0b1010), 0b0100),
    ("addo_carry $16, $17, $0", (S63 - 1, 1), 1),
    ("addo_carry $16, $17, $0", (M64, 1), 0),                       # -1 + 1: no overflow
    ("uaddo_carry $16, $17, $0", (M64, 1), 1),
    ("uaddo_carry $16, $17, $0", (S63, S63 - 1), 0),
    ("subo_carry $16, $17, $0", (S63, 1), 1),                       # INT64_MIN - 1
    ("subo_carry $16, $17, $0", (0, S63), 1),                       # 0 - INT64_MIN
    ("usubo_carry $16, $17, $0", (1, 2), 1),
    ("usubo_carry $16, $17, $0", (2, 2), 0),
    ("ldi $0, 1\n addo_take_carry $16, $17, $0", (S63 - 1, 0), 1),
    ("ldi $0, 2\n addo_take_carry $16, $17, $0", (S63 - 1, 0), 0),  # carry in: bit 0 only
    ("ldi $0, 1\n uaddo_take_carry $16, $17, $0", (M64, 0), 1),
    ("ldi $0, 1\n uaddo_take_carry $16, 255, $0", (0, 0), 0),
    ("ldi $0, 1\n subo_take_carry $16, $17, $0", (S63, 0), 1),
    ("ldi $0, 1\n usubo_take_carry $16, $17, $0", (5, 5), 1),
    ("ldi $0, 0\n usubo_take_carry $16, $17, $0", (5, 5), 0),
    ("ldi $0, 7\n umulqa $16, $17, $0", (1 << 62, 6), (6 << 62) + 7 & M64),
    ("ldi $0, 7\n umulqa $16, 3, $0", (5,), 22),
    ("rcsr $0, 4", (), 0),                                           # issues at cycle 0
])
def test_compiled_code_integer(body, args, expected):
    assert reg(run_on(body, *args), 0) == expected


def test_carry_chain_adds_128_bit_numbers():
    # (2^64 - 1) + 1 = 2^64: low words with the carry out, high words with the carry in
    m = result("uaddo_carry $16, $17, $1\n addl $16, $17, $0\n"
               "bis $1, $1, $2\n uaddo_take_carry $18, $18, $2\n addl $18, $18, $3\n"
               "addl $3, $1, $3", M64, 1, 0)
    assert [reg(m, 0), reg(m, 3), reg(m, 2)] == [0, 1, 0]


@pytest.mark.parametrize("body, expected", [
    ("sllow $1, 0, $0", [1, 2, 3, S63 | 4]),
    ("sllow $1, 4, $0", [0x10, 0x20, 0x30, 0x40]),                   # bit 255 shifted out
    ("sllow $1, 68, $0", [0, 0x10, 0x20, 0x30]),
    ("sllow $1, $2, $0", [0, 0, 0, 1 << 63]),                        # count = rb[7:0] = 255
    ("srlow $1, 1, $0", [0, 1 | S63, 1, 0x4000000000000002]),
    ("srlow $1, 128, $0", [3, S63 | 4, 0, 0]),
    ("srlow $1, $2, $0", [1, 0, 0, 0]),
    ("vfmov $1, $0", [1, 2, 3, S63 | 4]),
    ("vandw $1, $3, $0", [1, 2, 3, 4]),
    ("vbicw $1, $3, $0", [0, 0, 0, S63]),
    ("vbisw $1, $3, $0", [M64 >> 1] * 3 + [M64]),
    ("vornotw $1, $3, $0", [S63 | 1, S63 | 2, S63 | 3, S63 | 4]),
    ("vxorw $1, $3, $0", [(M64 >> 1) ^ 1, (M64 >> 1) ^ 2, (M64 >> 1) ^ 3, M64 ^ 4]),
    ("veqvw $1, $3, $0", [S63 | 1, S63 | 2, S63 | 3, 4]),
    ("vlog $1, $3, $1, $0, 0xE8", [1, 2, 3, S63 | 4]),              # majority(a, b, a) = a
    ("vlog $31, $31, $31, $0, 1", [M64] * 4),                        # NOR of zeros
    ("vshff $1, $3, 0b00011011, $0", [S63 | 4, 3, M64 >> 1, M64 >> 1]),
])
def test_whole_register_operations(body, expected):
    m = run_on("vldd $1, 0($31)\n vldd $3, 32($31)\n ldi $2, 0x1FF\n" + body,
               ldm_data=".quad 1, 2, 3, 0x8000000000000004\n.quad " + ", ".join(
                   [str(M64 >> 1)] * 4))
    assert lanes(m, 0) == expected


def test_register_operand_forms_of_put_and_barrier():
    body = """
        rcid $1
        bne $1, 1f
        ldi $2, 1
        putr $16, $2        # to CPE 1 of this row
        ldi $3, 2
        putc $16, $3        # to row 2 of this column (CPE 16)
        1:
        cmpeq $1, 16, $5
        bne $5, 4f          # CPE 16: only the column barrier
        ldi $4, 0xff
        synr $4             # row 0
        bne $1, 5f          # of row 0, CPE 0 also joins the column barrier
        4:
        ldi $6, 0b101
        sync $6             # rows 0 and 2 of column 0
        5:
        cmpeq $1, 1, $5
        beq $5, 2f
        getr $0
        2:
        cmpeq $1, 16, $5
        beq $5, 3f
        getc $0
        3:
    """
    _, m = run(body + " halt\n", cpes=list(range(8)) + [16], args=(41,))
    assert reg(m, 0, cpe=1) == 41 and reg(m, 0, cpe=16) == 41


# ---- lanes and shuffles ---------------------------------------------------------------------
def test_lane_insert_extract_copy_shuffle():
    m = result("""
        vldd $1, 0($31)
        vldd $2, 32($31)
        vinsw $16, $1, 3, $3
        vinsf $16, $1, 2, $4
        vextw $1, 1, $5
        vextf $1, 3, $6
        vcpyw $16, $7
        vcpyf $16, $8
        vshff $1, $2, $17, $9
        vshfw $1, $2, $18, $10
    """, 0x1_2345_6789, 0x0167, 0x0F0E0D0C_00000000,
               ldm_data=".quad 0x80000000F0000000, 1, 2, 3\n.quad 4, 5, 6, 7")
    assert lanes(m, 3) == [0x80000000F0000000, 1 | 0x23456789 << 32, 2, 3]
    assert lanes(m, 4) == [0x80000000F0000000, 1, 0x1_2345_6789, 3]
    assert reg(m, 5) == 0xFFFFFFFF80000000
    assert reg(m, 6) == 3
    assert lanes(m, 7) == [0x23456789_23456789] * 4
    assert lanes(m, 8) == [0x1_2345_6789] * 4
    assert lanes(m, 9) == [7, 6, 1, 0x80000000F0000000]       # selectors 7, 6, 1, 0
    words = [lane >> s & 0xFFFFFFFF for lane in lanes(m, 10) for s in (0, 32)]
    pool = [0xF0000000, 0x80000000, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0]
    assert words == [pool[0x0F0E0D0C_00000000 >> 4 * i & 15] for i in range(8)]


# ---- memory ---------------------------------------------------------------------------------
def test_loads():
    m = result("""
        ldbu $1, 7($31)
        ldhu $2, 6($31)
        ldw $3, 4($31)
        ldl $4, 0($31)
        flds $5, 8($31)
        fldd $6, 32($31)
        vlds $7, 64($31)
        ldse $8, 8($31)
        ldde $9, 16($31)
        vldd $10, 32($31)
        flds $11, 12($31)
    """, ldm_data=""".quad 0x8765432112345678
        .float 1.5
        .word 0x7F800001
        .double -2.0, 0.0
        .quad 0x7FF0000000000001, 0, 0, 0
        .float 1.0, 2.0, 0.5, -1.0""")
    assert reg(m, 1) == 0x87 and reg(m, 2) == 0x8765
    assert reg(m, 3) == 0xFFFFFFFF87654321 and reg(m, 4) == 0x8765432112345678
    assert freg(m, 5) == 1.5
    assert reg(m, 6) == NAN                                    # float load: canonical NaN
    assert [freg(m, 7, lane=i) for i in range(4)] == [1.0, 2.0, 0.5, -1.0]
    assert [freg(m, 8, lane=i) for i in range(4)] == [1.5] * 4
    assert [freg(m, 9, lane=i) for i in range(4)] == [-2.0] * 4
    assert lanes(m, 10)[0] == 0x7FF0000000000001               # vldd keeps the bits
    assert reg(m, 11) == NAN


def test_stores():
    m = result("""
        vldd $1, 0($31)
        stb $1, 64($31)
        sth $1, 66($31)
        stw $1, 68($31)
        stl $1, 72($31)
        fsts $17, 80($31)
        fstd $17, 88($31)
        vstd $1, 128($31)
    """, 0, bits(0.1), ldm_data=".quad 0x1122334455667788, 2, 3, 4")
    raw = bytes(ldm(m, 0, 64, 96))
    assert raw[0] == 0x88 and raw[2:4] == bytes.fromhex("8877")
    assert raw[4:8] == bytes.fromhex("88776655") and raw[8:16] == bytes.fromhex("8877665544332211")
    assert raw[16:20] == struct.pack("<f", 0.1) and raw[24:32] == struct.pack("<d", 0.1)
    assert raw[64:96] == bytes(ldm(m, 0, 0, 32))


def test_single_store_rounds_and_canonicalises():
    m = result("vldd $1, 0($31)\n vsts $1, 64($31)",
               ldm_data=".quad 0x7FF0000000000001\n.double 1e300, 0.1, -0.0")
    assert list(ldm(m, 0, 64, 4, np.uint32)) == [0x7FC00000, 0x7F800000,
                                                 struct.unpack("<I", struct.pack("<f", 0.1))[0],
                                                 0x80000000]


# ---- control --------------------------------------------------------------------------------
@pytest.mark.parametrize("branch, value, taken", [
    ("beq", 0, True), ("bne", 0, False), ("blt", M64, True), ("ble", 1, False),
    ("bgt", 1, True), ("bge", M64, False), ("blbc", 2, True), ("blbs", 3, True),
    ("fbeq", bits(-0.0), True), ("fbne", bits(math.nan), True), ("fblt", bits(math.nan), False),
    ("fble", bits(-1.0), True), ("fbgt", bits(1.0), True), ("fbge", bits(math.nan), False),
])
def test_conditional_branches(branch, value, taken):
    m = result(f"""
        {branch} $16, yes
        ldi $0, 1($31)
        halt
    yes:
        ldi $0, 2($31)
    """, value)
    assert reg(m, 0) == (2 if taken else 1)


def test_call_and_return():
    m = result("""
        ldi $27, 0x10($31)
        ldih $27, 0x1000($27)       # $27 = code_base + 0x10 (sub)
        call $26, ($27), 0          # at 0x10000008: $26 = 0x1000000c
        halt
    sub:
        rcid $0
        ret $31, ($26), 1
    """)
    assert reg(m, 26) == 0x1000000C


def test_returning_from_the_entry_halts():
    res, m = run("""
        ldi $0, 3($31)
        ret $31, ($26), 1
    """)
    assert reg(m, 0) == 3 and res.cpe[0].pc == 0x1000_0000 - 4


# ---- the exact float helpers ----------------------------------------------------------------
def nearest_double(exact: Fraction) -> float:
    if abs(exact) >= Fraction(sys.float_info.max):       # Fraction -> float raises here
        return sys.float_info.max if exact > 0 else -sys.float_info.max
    return float(exact)


def nearest_single(exact: Fraction) -> float:
    """Independent binary32 rounding: the nearest of the binary32 neighbours, ties to even."""
    with np.errstate(over="ignore"):
        guess = np.float32(float(exact))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess,
                  np.nextafter(guess, np.float32(np.inf))]
    candidates = [c for c in candidates if np.isfinite(c)]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact),
                                          int(c.view(np.uint32)) & 1))
    return float(best)


def assert_rounded_once(got: float, exact: Fraction, emax: int, precision: int, nearest):
    """``got`` is ``exact`` rounded to nearest even (zero: +0 since the test values are not
    both zeros of one sign; beyond the largest finite value + half an ulp: infinity)."""
    if exact == 0:
        assert got == 0.0
    elif abs(exact) >= Fraction(2) ** (emax + 1) * (1 - Fraction(1, 2 ** (precision + 1))):
        assert got == (math.inf if exact > 0 else -math.inf)
    else:
        assert got == nearest(exact)


@settings(max_examples=300, deadline=None)
@given(*[st.floats(allow_nan=False, allow_infinity=False, width=64)] * 3)
def test_double_fma_is_correctly_rounded(a, b, c):
    assert_rounded_once(floats.fma(a, b, c), Fraction(a) * Fraction(b) + Fraction(c),
                        1023, 53, nearest_double)


@settings(max_examples=300, deadline=None)
@given(*[st.floats(allow_nan=False, allow_infinity=False, width=32)] * 3)
def test_single_fma_is_rounded_once(a, b, c):
    assert_rounded_once(floats.fma_single(a, b, c), Fraction(a) * Fraction(b) + Fraction(c),
                        127, 24, nearest_single)
