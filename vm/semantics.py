"""What every instruction computes (docs/semantics.md), one small function per mnemonic.

``SEMANTICS[name](cpu, op)`` executes instruction ``name`` with decoded operands ``op`` on a
CPE ``cpu`` (the reference engine's ``Cpe``): it reads registers, computes, and asks the CPE for
everything that touches timing or other CPEs (memory, branches, communication, barriers, DMA).
Registers are read as unsigned 64-bit lanes; ``cpu.set_scalar`` writes lane 0 and keeps lanes
1-3, ``cpu.set_vector`` writes all four. Faults are raised by the CPE before any effect.
"""
from __future__ import annotations

import math
import operator
from typing import Callable

from . import floats
from .floats import bits_to_double, double_to_bits

MASK64 = (1 << 64) - 1
MASK32 = 0xFFFFFFFF
SIGN64 = 1 << 63
TWO = double_to_bits(2.0)
BROADCAST = 8            # put target n that means "the other CPEs of the row / column"

SEMANTICS: dict[str, Callable] = {}


def semantics(*names: str):
    def register(function):
        for name in names:
            SEMANTICS[name] = function
        return function
    return register


# ---- value helpers --------------------------------------------------------------------------
def signed64(x: int) -> int:
    return x - (1 << 64) if x & SIGN64 else x


def sext32(x: int) -> int:
    x &= MASK32
    return (x - (1 << 32) if x & 0x80000000 else x) & MASK64


def sext16(x: int) -> int:
    return x - (1 << 16) if x & 0x8000 else x


def sext8(x: int) -> int:
    x &= 0xFF
    return x - (1 << 8) if x & 0x80 else x


def byte_mask(mask: int) -> int:
    """The 64-bit mask of the bytes selected by bits 0-7 of ``mask`` (zap / zapnot)."""
    return sum(0xFF << 8 * i for i in range(8) if mask >> i & 1)


def signed_overflow(x: int) -> int:
    """1 if the exact signed result x is outside int64, else 0."""
    return int(not -(1 << 63) <= x < 1 << 63)


def words(lanes) -> list[int]:
    """Eight 32-bit word lanes of a register."""
    return [(lane >> shift) & MASK32 for lane in lanes for shift in (0, 32)]


def from_words(ws) -> list[int]:
    return [(ws[2 * i] & MASK32) | (ws[2 * i + 1] & MASK32) << 32 for i in range(4)]


def lanes_from_bytes(data: bytes) -> list[int]:
    return [int.from_bytes(data[8 * i:8 * i + 8], "little") for i in range(4)]


def lanes_to_bytes(lanes) -> bytes:
    return b"".join(lane.to_bytes(8, "little") for lane in lanes)


def canonical(bits: int) -> int:
    """A double passed through a float load/conversion (NaN becomes canonical)."""
    return double_to_bits(bits_to_double(bits))


def single_to_lane(data: bytes) -> int:
    return double_to_bits(floats.single_bits_to_double(int.from_bytes(data, "little")))


def lane_to_single(lane: int) -> bytes:
    return floats.double_to_single_bits(bits_to_double(lane)).to_bytes(4, "little")


def operand_b(cpu, op) -> int:
    """The ``rb|lit`` operand: the literal in literal forms, else lane 0 of rb."""
    return op.lit if op.literal else cpu.scalar(op.rb)


def effective_address(cpu, op) -> int:
    return (cpu.scalar(op.rb) + op.disp) & MASK64


# ---- integer operate and select ------------------------------------------------------------
_ALU = {
    "addw": lambda a, b: sext32(a + b), "subw": lambda a, b: sext32(a - b),
    "s4addw": lambda a, b: sext32(4 * a + b), "s4subw": lambda a, b: sext32(4 * a - b),
    "s8addw": lambda a, b: sext32(8 * a + b), "s8subw": lambda a, b: sext32(8 * a - b),
    "addl": lambda a, b: a + b, "subl": lambda a, b: a - b,
    "s4addl": lambda a, b: 4 * a + b, "s4subl": lambda a, b: 4 * a - b,
    "s8addl": lambda a, b: 8 * a + b, "s8subl": lambda a, b: 8 * a - b,
    "cmpeq": lambda a, b: int(a == b), "cmplt": lambda a, b: int(signed64(a) < signed64(b)),
    "cmple": lambda a, b: int(signed64(a) <= signed64(b)),
    "cmpult": lambda a, b: int(a < b), "cmpule": lambda a, b: int(a <= b),
    "and": operator.and_, "bic": lambda a, b: a & ~b, "bis": operator.or_,
    "ornot": lambda a, b: a | ~b, "xor": operator.xor, "eqv": lambda a, b: ~(a ^ b),
    "sll": lambda a, b: a << (b & 63), "srl": lambda a, b: a >> (b & 63),
    "sra": lambda a, b: signed64(a) >> (b & 63),
    "mulw": lambda a, b: sext32(a * b), "mull": operator.mul,
    "umulh": lambda a, b: (a * b) >> 64,
    "zap": lambda a, b: a & ~byte_mask(b), "zapnot": lambda a, b: a & byte_mask(b),
    "sextb": lambda a, b: sext8(b), "sexth": lambda a, b: sext16(b & 0xFFFF),
    "sextw": lambda a, b: sext32(b), "andnot": lambda a, b: a & ~b,
    "addo_carry": lambda a, b: signed_overflow(signed64(a) + signed64(b)),
    "uaddo_carry": lambda a, b: (a + b) >> 64,
    "subo_carry": lambda a, b: signed_overflow(signed64(a) - signed64(b)),
    "usubo_carry": lambda a, b: int(a < b),
}
# rc is a source too: the incoming carry rc[0], or umulqa's addend.
_ACCUMULATE = {
    "addo_take_carry": lambda a, b, c: signed_overflow(signed64(a) + signed64(b) + (c & 1)),
    "uaddo_take_carry": lambda a, b, c: (a + b + (c & 1)) >> 64,
    "subo_take_carry": lambda a, b, c: signed_overflow(signed64(a) - signed64(b) - (c & 1)),
    "usubo_take_carry": lambda a, b, c: int(a < b + (c & 1)),
    "umulqa": lambda a, b, c: c + a * b,
}


@semantics(*_ALU)
def integer_operate(cpu, op):
    cpu.set_scalar(op.rc, _ALU[op.name](cpu.scalar(op.ra), operand_b(cpu, op)) & MASK64)


@semantics(*_ACCUMULATE)
def accumulate(cpu, op):
    result = _ACCUMULATE[op.name](cpu.scalar(op.ra), operand_b(cpu, op), cpu.scalar(op.rc))
    cpu.set_scalar(op.rc, result & MASK64)


_SELECT = {"seleq": lambda x: x == 0, "selne": lambda x: x != 0, "sellt": lambda x: x < 0,
           "selle": lambda x: x <= 0, "selgt": lambda x: x > 0, "selge": lambda x: x >= 0}


@semantics(*_SELECT)
def select(cpu, op):
    taken = _SELECT[op.name](signed64(cpu.scalar(op.ra)))
    cpu.set_scalar(op.rc, operand_b(cpu, op) if taken else cpu.scalar(op.r3))


@semantics("ldi")
def ldi(cpu, op):
    cpu.set_scalar(op.ra, effective_address(cpu, op))


@semantics("ldih")
def ldih(cpu, op):
    cpu.set_scalar(op.ra, (cpu.scalar(op.rb) + (op.disp << 16)) & MASK64)


# ---- vector integer -------------------------------------------------------------------------
_WORD_OPS = {
    "vaddw": lambda x, n: x + n, "vsubw": lambda x, n: x - n,
    "vsllw": lambda x, n: x << (n & 31), "vsrlw": lambda x, n: x >> (n & 31),
    "vsraw": lambda x, n: (x - (1 << 32) if x & 0x80000000 else x) >> (n & 31),
}
_SHIFTS = ("vsllw", "vsrlw", "vsraw")


@semantics(*_WORD_OPS)
def vector_word_operate(cpu, op):
    fn = _WORD_OPS[op.name]
    if op.name in _SHIFTS:   # one count for every lane: the literal or word 0 of rb
        counts = [op.lit if op.literal else cpu.scalar(op.rb) & MASK32] * 8
    else:
        counts = [op.lit] * 8 if op.literal else words(cpu.vector(op.rb))
    result = [fn(x, n) for x, n in zip(words(cpu.vector(op.ra)), counts)]
    cpu.set_vector(op.rc, from_words(result))


_LONG_OPS = {"vaddl": operator.add, "vsubl": operator.sub}


@semantics(*_LONG_OPS)
def vector_long_operate(cpu, op):
    rb = [op.lit] * 4 if op.literal else cpu.vector(op.rb)
    fn = _LONG_OPS[op.name]
    cpu.set_vector(op.rc, [fn(a, b) & MASK64 for a, b in zip(cpu.vector(op.ra), rb)])


def _whole(lanes) -> int:
    return sum(lane << 64 * i for i, lane in enumerate(lanes))


def _lanes(value: int) -> list[int]:
    return [(value >> 64 * i) & MASK64 for i in range(4)]


_WHOLE_SHIFTS = {"sllow": operator.lshift, "srlow": operator.rshift}


@semantics(*_WHOLE_SHIFTS)
def whole_register_shift(cpu, op):
    count = operand_b(cpu, op) & 255
    value = _WHOLE_SHIFTS[op.name](_whole(cpu.vector(op.ra)), count)
    cpu.set_vector(op.rc, _lanes(value & ((1 << 256) - 1)))


@semantics("vlog")
def vlog(cpu, op):
    a, b, c = (_whole(cpu.vector(r)) for r in (op.ra, op.rb, op.r3))
    ones = (1 << 256) - 1
    result = 0
    for index in range(8):   # the bits whose (a, b, c) is 4a + 2b + c, if truth bit index is 1
        if op.imm >> index & 1:
            result |= ((a if index & 4 else ~a) & (b if index & 2 else ~b)
                       & (c if index & 1 else ~c)) & ones
    cpu.set_vector(op.rc, _lanes(result))


# ---- floating point -------------------------------------------------------------------------
def _single(fn):
    return lambda *xs: floats.single(fn, *xs)


_FLOAT_BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
                 "div": floats.divide}
FLOAT_OPS: dict[str, Callable] = {}
for _op, _fn in _FLOAT_BINARY.items():
    FLOAT_OPS[f"f{_op}d"] = FLOAT_OPS[f"v{_op}d"] = _fn
    FLOAT_OPS[f"f{_op}s"] = FLOAT_OPS[f"v{_op}s"] = _single(_fn)
FLOAT_OPS["fsqrtd"] = FLOAT_OPS["vsqrtd"] = floats.sqrt
FLOAT_OPS["fsqrts"] = FLOAT_OPS["vsqrts"] = _single(floats.sqrt)
_UNARY = {"fsqrtd", "vsqrtd", "fsqrts", "vsqrts"}

# Fused multiply-add: (sign of the product, sign of the addend), one rounding.
_FMA_SIGNS = {"ma": (1.0, 1.0), "ms": (1.0, -1.0), "nma": (-1.0, 1.0), "nms": (-1.0, -1.0)}
for _prefix, (_sp, _sc) in _FMA_SIGNS.items():
    FLOAT_OPS[f"f{_prefix}d"] = FLOAT_OPS[f"v{_prefix}d"] = \
        (lambda sp, sc: lambda a, b, c: floats.fma(sp * a, b, sc * c))(_sp, _sc)
    FLOAT_OPS[f"f{_prefix}s"] = FLOAT_OPS[f"v{_prefix}s"] = \
        (lambda sp, sc: lambda a, b, c: floats.fma_single(sp * a, b, sc * c))(_sp, _sc)


def _float_sources(cpu, op, lane: int) -> list[float]:
    regs = [op.rb] if op.name in _UNARY else [op.ra, op.rb] + ([op.r3] if op.fmt == "fma" else [])
    return [bits_to_double(cpu.vector(r)[lane]) for r in regs]


@semantics(*(n for n in FLOAT_OPS if n.startswith("f")))
def scalar_float(cpu, op):
    cpu.set_scalar(op.rc, double_to_bits(FLOAT_OPS[op.name](*_float_sources(cpu, op, 0))))


@semantics(*(n for n in FLOAT_OPS if n.startswith("v")))
def vector_float(cpu, op):
    fn = FLOAT_OPS[op.name]
    cpu.set_vector(op.rc, [double_to_bits(fn(*_float_sources(cpu, op, lane)))
                           for lane in range(4)])


_COMPARE = {"fcmpeq": operator.eq, "fcmple": operator.le, "fcmplt": operator.lt,
            "fcmpun": lambda a, b: a != a or b != b}


@semantics(*_COMPARE)
def float_compare(cpu, op):
    a, b = bits_to_double(cpu.scalar(op.ra)), bits_to_double(cpu.scalar(op.rb))
    cpu.set_scalar(op.rc, TWO if _COMPARE[op.name](a, b) else 0)


def _double_to_long(bits: int) -> int:
    x = bits_to_double(bits)
    if x != x or math.isinf(x) or not -2.0 ** 63 <= math.trunc(x) < 2.0 ** 63:
        return SIGN64
    return math.trunc(x) & MASK64


_CONVERT = {
    "fcvtsd": canonical,
    "fcvtds": lambda bits: double_to_bits(floats.round_single(bits_to_double(bits))),
    "fcvtdl": _double_to_long,
    "fcvtld": lambda bits: double_to_bits(float(signed64(bits))),
}


@semantics(*_CONVERT)
def float_convert(cpu, op):
    cpu.set_scalar(op.rc, _CONVERT[op.name](cpu.scalar(op.rb)))


_EXPONENT_AND_SIGN = 0xFFF0000000000000
_COPY_SIGN = {
    "fcpys": lambda a, b: (a & SIGN64) | (b & ~SIGN64),
    "fcpysn": lambda a, b: (~a & SIGN64) | (b & ~SIGN64),
    "fcpyse": lambda a, b: (a & _EXPONENT_AND_SIGN) | (b & ~_EXPONENT_AND_SIGN),
}


@semantics(*_COPY_SIGN)
def copy_sign(cpu, op):
    cpu.set_scalar(op.rc, _COPY_SIGN[op.name](cpu.scalar(op.ra), cpu.scalar(op.rb)) & MASK64)


_MOVES = {
    "fimovd": lambda bits: bits, "ifmovd": lambda bits: bits,
    "fimovs": lambda bits: sext32(floats.double_to_single_bits(bits_to_double(bits))),
    "ifmovs": lambda bits: double_to_bits(floats.single_bits_to_double(bits)),
}


@semantics(*_MOVES)
def register_move(cpu, op):
    cpu.set_scalar(op.rc, _MOVES[op.name](cpu.scalar(op.ra)))


# ---- lanes and shuffles ---------------------------------------------------------------------
@semantics("vinsw")
def vinsw(cpu, op):
    ws = words(cpu.vector(op.rb))
    ws[op.lane & 7] = cpu.scalar(op.ra) & MASK32
    cpu.set_vector(op.rc, from_words(ws))


@semantics("vinsf")
def vinsf(cpu, op):
    lanes = list(cpu.vector(op.rb))
    lanes[op.lane & 3] = cpu.scalar(op.ra)
    cpu.set_vector(op.rc, lanes)


@semantics("vextw")
def vextw(cpu, op):
    cpu.set_scalar(op.rc, sext32(words(cpu.vector(op.ra))[op.lane & 7]))


@semantics("vextf")
def vextf(cpu, op):
    cpu.set_scalar(op.rc, cpu.vector(op.ra)[op.lane & 3])


@semantics("vcpyw")
def vcpyw(cpu, op):
    cpu.set_vector(op.rc, from_words([cpu.scalar(op.ra)] * 8))


@semantics("vcpyf")
def vcpyf(cpu, op):
    cpu.set_vector(op.rc, [cpu.scalar(op.ra)] * 4)


@semantics("vshfw")
def vshfw(cpu, op):
    pool = words(cpu.vector(op.ra)) + words(cpu.vector(op.rb))
    selector = cpu.scalar(op.r3)
    cpu.set_vector(op.rc, from_words([pool[(selector >> 4 * i) & 15] for i in range(8)]))


@semantics("vshff")
def vshff(cpu, op):
    a, b = cpu.vector(op.ra), cpu.vector(op.rb)
    if op.literal:   # lanes 0-1 from ra, 2-3 from rb, 2 selector bits each
        cpu.set_vector(op.rc, [(a if i < 2 else b)[(op.lit >> 2 * i) & 3] for i in range(4)])
        return
    pool = list(a) + list(b)
    selector = cpu.scalar(op.r3)
    cpu.set_vector(op.rc, [pool[(selector >> 4 * i) & 7] for i in range(4)])


@semantics("vfmov")
def vfmov(cpu, op):
    cpu.set_vector(op.rc, list(cpu.vector(op.ra)))


# ---- loads and stores -----------------------------------------------------------------------
_SCALAR_LOADS = {
    "ldbu": lambda data: data[0], "ldhu": lambda data: int.from_bytes(data, "little"),
    "ldw": lambda data: sext32(int.from_bytes(data, "little")),
    "ldl": lambda data: int.from_bytes(data, "little"),
    "flds": single_to_lane, "fldd": lambda data: canonical(int.from_bytes(data, "little")),
}
_VECTOR_LOADS = {
    "vlds": lambda data: [single_to_lane(data[4 * i:4 * i + 4]) for i in range(4)],
    "ldse": lambda data: [single_to_lane(data)] * 4,
    "ldde": lambda data: [canonical(int.from_bytes(data, "little"))] * 4,
    "vldd": lanes_from_bytes,
}


@semantics(*_SCALAR_LOADS)
def scalar_load(cpu, op):
    data = cpu.load(effective_address(cpu, op), op.size)
    cpu.set_scalar(op.ra, _SCALAR_LOADS[op.name](data))


@semantics(*_VECTOR_LOADS)
def vector_load(cpu, op):
    data = cpu.load(effective_address(cpu, op), op.size)
    cpu.set_vector(op.ra, _VECTOR_LOADS[op.name](data))


_STORES = {
    "stb": lambda lanes: lanes[0].to_bytes(8, "little")[:1],
    "sth": lambda lanes: lanes[0].to_bytes(8, "little")[:2],
    "stw": lambda lanes: lanes[0].to_bytes(8, "little")[:4],
    "stl": lambda lanes: lanes[0].to_bytes(8, "little"),
    "fstd": lambda lanes: lanes[0].to_bytes(8, "little"),
    "fsts": lambda lanes: lane_to_single(lanes[0]),
    "vsts": lambda lanes: b"".join(lane_to_single(lane) for lane in lanes),
    "vstd": lanes_to_bytes,
}


@semantics(*_STORES)
def store(cpu, op):
    cpu.store(effective_address(cpu, op), _STORES[op.name](cpu.vector(op.ra)))


# Load-and-broadcast: the loaded value goes to ra and to the other CPEs of the row / column.
_BROADCAST_LOADS = {
    "vldr": ("row", lanes_from_bytes), "vldc": ("col", lanes_from_bytes),
    "ldder": ("row", _VECTOR_LOADS["ldde"]), "lddec": ("col", _VECTOR_LOADS["ldde"]),
}


@semantics(*_BROADCAST_LOADS)
def broadcast_load(cpu, op):
    direction, convert = _BROADCAST_LOADS[op.name]
    lanes = convert(cpu.load_local(effective_address(cpu, op), op.size))
    cpu.send(direction, BROADCAST, lanes)
    cpu.set_vector(op.ra, lanes)


# ---- control --------------------------------------------------------------------------------
def branch_target(op) -> int:
    return (op.pc + 4 + 4 * op.disp) & MASK64


@semantics("br", "bsr")
def branch_always(cpu, op):
    cpu.set_scalar(op.ra, op.pc + 4)
    cpu.jump(branch_target(op))


_INT_CONDITIONS = {
    "beq": lambda x: x == 0, "bne": lambda x: x != 0, "blt": lambda x: x < 0,
    "ble": lambda x: x <= 0, "bgt": lambda x: x > 0, "bge": lambda x: x >= 0,
    "blbc": lambda x: not x & 1, "blbs": lambda x: x & 1,
}
# Float branches compare lane 0 as a double with 0.0; with a NaN only fbne is taken.
_FLOAT_CONDITIONS = {
    "fbeq": lambda x: x == 0.0, "fbne": lambda x: not x == 0.0, "fblt": lambda x: x < 0.0,
    "fble": lambda x: x <= 0.0, "fbgt": lambda x: x > 0.0, "fbge": lambda x: x >= 0.0,
}


@semantics(*_INT_CONDITIONS)
def integer_branch(cpu, op):
    if _INT_CONDITIONS[op.name](signed64(cpu.scalar(op.ra))):
        cpu.jump(branch_target(op))


@semantics(*_FLOAT_CONDITIONS)
def float_branch(cpu, op):
    if _FLOAT_CONDITIONS[op.name](bits_to_double(cpu.scalar(op.ra))):
        cpu.jump(branch_target(op))


@semantics("call", "ret", "jmp")
def jump(cpu, op):
    target = cpu.scalar(op.rb) & ~3 & MASK64     # read before the link write (ra may be rb)
    cpu.set_scalar(op.ra, op.pc + 4)
    cpu.jump(target)


# ---- misc, communication, barriers, DMA -----------------------------------------------------
@semantics("rcid")
def rcid(cpu, op):
    cpu.set_scalar(op.ra, cpu.id)


@semantics("rtc")
def rtc(cpu, op):
    cpu.set_scalar(op.ra, cpu.cycle)


@semantics("rcsr")
def rcsr(cpu, op):
    cpu.set_scalar(op.ra, cpu.control_register(op.imm))


@semantics("memb")
def memb(cpu, op):
    """Memory is sequentially consistent here: nothing to order."""


@semantics("halt")
def halt(cpu, op):
    cpu.halt()


_DIRECTION = {"putr": "row", "putc": "col", "getr": "row", "getc": "col",
              "synr": "row", "sync": "col"}


@semantics("putr", "putc")
def put(cpu, op):
    cpu.send(_DIRECTION[op.name], operand_b(cpu, op), list(cpu.vector(op.ra)))


@semantics("getr", "getc")
def get(cpu, op):
    cpu.set_vector(op.ra, cpu.receive(_DIRECTION[op.name]))


@semantics("synr", "sync")
def barrier(cpu, op):
    cpu.barrier(_DIRECTION[op.name], operand_b(cpu, op))


@semantics("dma")
def dma(cpu, op):
    cpu.dma(cpu.vector(op.ra), cpu.scalar(op.rb), cpu.scalar(op.rc))
