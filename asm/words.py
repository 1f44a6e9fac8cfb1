"""What the assembler and the linker share, without the assembler's parser (the linker, and
so loading an object ``.swo``, does not import lark)."""
from __future__ import annotations

from typing import Optional

from ..isa import BY_NAME, ZERO_REG, encode, field_range
from .diagnostics import StatementError

DISP16 = field_range("disp16")
GP_OFFSET = 0x8000          # the linker defines _gp = data base + GP_OFFSET
GP_SYMBOL = "_gp"
NOP_WORD = encode(BY_NAME["bis"], {"ra": ZERO_REG, "rb": ZERO_REG, "rc": ZERO_REG})


def split_hi_lo(value: int, col: Optional[int] = None) -> tuple[int, int]:
    """(hi, lo) with (hi << 16) + sext16(lo) == value: the carry-correct ldih/ldi split."""
    lo = ((value & 0xFFFF) ^ 0x8000) - 0x8000
    hi = (value - lo) >> 16
    if not DISP16[0] <= hi <= DISP16[1]:
        raise StatementError(f"value {value:#x} does not fit 32 bits signed "
                             f"(an ldih+ldi pair reaches -0x80008000..0x7fff7fff)", col)
    return hi, lo
