"""Exact IEEE 754 arithmetic in pure Python for the reference engine (docs/semantics.md).

Python floats are binary64 with round-to-nearest-even, so double add/sub/mul/div/sqrt are
already correctly rounded. What Python lacks is a fused multiply-add and binary32: both are
done here on exact dyadic values (integer mantissa × 2**exponent) with one explicit rounding.
Single add/sub/mul/div/sqrt may be computed in double and then rounded to binary32: double
rounding is harmless for these operations because 53 >= 2·24 + 2.
"""
from __future__ import annotations

import math
import struct
from typing import NamedTuple

_DOUBLE = struct.Struct("<d")
_U64 = struct.Struct("<Q")
_SINGLE = struct.Struct("<f")
_U32 = struct.Struct("<I")

CANONICAL_NAN64 = 0x7FF8000000000000
CANONICAL_NAN32 = 0x7FC00000


class Format(NamedTuple):
    precision: int    # significand bits including the implicit one
    emin: int         # exponent of the smallest normal number
    emax: int         # exponent of the largest finite number


BINARY64 = Format(53, -1022, 1023)
BINARY32 = Format(24, -126, 127)


def bits_to_double(bits: int) -> float:
    return _DOUBLE.unpack(_U64.pack(bits))[0]


def double_to_bits(value: float) -> int:
    """Bits of a float result; every NaN becomes the canonical quiet NaN."""
    if value != value:
        return CANONICAL_NAN64
    return _U64.unpack(_DOUBLE.pack(value))[0]


def single_bits_to_double(bits: int) -> float:
    """Widen binary32 bits exactly (NaN: canonical)."""
    return _SINGLE.unpack(_U32.pack(bits & 0xFFFFFFFF))[0]


def double_to_single_bits(value: float) -> int:
    """Round a double to binary32 and return its bits (NaN: canonical single NaN)."""
    if value != value:
        return CANONICAL_NAN32
    return _U32.unpack(_SINGLE.pack(round_single(value)))[0]


def round_dyadic(mantissa: int, exponent: int, fmt: Format) -> float:
    """Round the exact value mantissa × 2**exponent (mantissa != 0) to ``fmt``, nearest even."""
    negative = mantissa < 0
    mantissa = abs(mantissa)
    leading = mantissa.bit_length() - 1 + exponent
    quantum = max(leading, fmt.emin) - (fmt.precision - 1)
    shift = quantum - exponent
    if shift > 0:
        rounded = mantissa >> shift
        rest = mantissa & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and rounded & 1):
            rounded += 1
    else:
        rounded = mantissa << -shift
    if rounded and rounded.bit_length() + quantum > fmt.emax + 1:
        result = math.inf
    else:
        result = math.ldexp(rounded, quantum)
    return -result if negative else result


def to_dyadic(value: float) -> tuple[int, int]:
    """A finite float as (mantissa, exponent) with value == mantissa × 2**exponent."""
    numerator, denominator = value.as_integer_ratio()
    return numerator, 1 - denominator.bit_length()


def round_single(value: float) -> float:
    """The binary32 nearest to a double, as a double (inf, nan and zeros pass through)."""
    if value == 0.0 or math.isinf(value) or value != value:
        return value
    return round_dyadic(*to_dyadic(value), BINARY32)


def fma(a: float, b: float, c: float, fmt: Format = BINARY64) -> float:
    """a*b + c with one rounding to ``fmt`` (as C fma/fmaf on values already in ``fmt``)."""
    if a != a or b != b or c != c:
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0.0 or b == 0.0:
            return math.nan                      # inf × 0
        product_inf = math.copysign(math.inf, a) * math.copysign(1.0, b)
        if math.isinf(c) and c != product_inf:
            return math.nan                      # inf - inf
        return product_inf
    if math.isinf(c):
        return c
    product_negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
    (ma, ea), (mb, eb), (mc, ec) = to_dyadic(a), to_dyadic(b), to_dyadic(c)
    mp, ep = ma * mb, ea + eb
    low = min(ep, ec)
    total = (mp << (ep - low)) + (mc << (ec - low))
    if total == 0:
        # Exact zero: the sign of a sum of two zeros of equal sign, else +0 (round to nearest).
        c_negative = math.copysign(1.0, c) < 0
        return -0.0 if (mp == 0 and mc == 0 and product_negative and c_negative) else 0.0
    return round_dyadic(total, low, fmt)


def single(op, *operands: float) -> float:
    """A binary32 operation: operands rounded to binary32, ``op`` computed in double (exact
    enough for + - × / sqrt), result rounded to binary32."""
    return round_single(op(*(round_single(x) for x in operands)))


def fma_single(a: float, b: float, c: float) -> float:
    """Fused binary32 multiply-add on operands first rounded to binary32 (as C fmaf)."""
    return fma(round_single(a), round_single(b), round_single(c), BINARY32)


def divide(a: float, b: float) -> float:
    """IEEE division (Python raises on a zero divisor)."""
    if b == 0.0:
        if a != a or a == 0.0:
            return math.nan
        negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        return -math.inf if negative else math.inf
    return a / b


def sqrt(a: float) -> float:
    """IEEE square root: sqrt(-0) = -0, negative -> NaN."""
    if a != a or (a < 0.0):
        return math.nan
    if a == 0.0 or math.isinf(a):
        return a
    return math.sqrt(a)
