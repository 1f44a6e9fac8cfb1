"""The SW26010 CPE instruction subset, as data.

This module is the single source of truth for the instruction set (MACHINE.md §4 and its
appendix). The assembler, the disassembler, the Python reference VM and the C core's decoder
(generated at build time by ``vm/build_core.py``) all read it; nothing else may restate an
encoding, an operand order, a pipe or a latency class.

It deliberately imports nothing from the rest of swsim, so the C build can load it stand-alone.

Vocabulary
----------
FIELDS
    Named bit fields of a 32-bit instruction word: ``name -> (low bit, width, signed)``.
FORMATS
    Each format names the field that selects the function within a major opcode and the
    default operand syntax.
Operand syntax
    A comma-separated list of operand templates. ``ra``/``rb``/``rc``/``rd``... name register
    fields; ``reg|imm`` is a register or an immediate (choosing the register or the literal
    form of the instruction): ``rb|lit`` an 8-bit literal, ``rb|n`` / ``rb|mask`` a put target
    / barrier mask, ``r3|sel`` a shuffle selector; ``disp(rb)`` is a memory operand; ``label``
    a branch target; ``lane``, ``n``, ``mask``, ``csr``, ``truth``, ``hint`` immediates.
Latency classes
    Names only; their cycle counts are configuration (``swsim.vm.config``), so a preset such as
    SW26010pro changes timing without touching this table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# --------------------------------------------------------------------------------------------
# Bit fields: name -> (low bit, width, signed)
# --------------------------------------------------------------------------------------------
FIELDS: dict[str, tuple[int, int, bool]] = {
    "opcode": (26, 6, False),
    "ra": (21, 5, False),      # first register (source, or destination of loads/ldi/getr)
    "rb": (16, 5, False),      # second register / memory base
    "lit": (13, 8, False),     # 8-bit unsigned literal replacing rb in literal forms
    "rc": (0, 5, False),       # destination of operate formats
    "r3": (5, 5, False),       # third source of four-operand and select formats
    "lane": (5, 5, False),     # lane index of vinsw/vinsf/vextw/vextf
    "disp16": (0, 16, True),   # memory displacement (bytes)
    "disp21": (0, 21, True),   # branch displacement (instruction words, from pc + 4)
    "func8": (5, 8, False),    # operate / float / vector function
    "func6": (10, 6, False),   # four-operand function
    "func3": (10, 3, False),   # select function
    "func16": (0, 16, False),  # misc (opcode 0x06) function
    "cfunc": (0, 8, False),    # swsim CPE-communication group function (opcode 0x07)
    "imm8": (8, 8, False),     # swsim CPE-communication group immediate (n / mask / csr)
    "sel8": (5, 8, False),     # vshff immediate selector (its own opcode, no function field)
    "truth_lo": (10, 6, False),  # vlog truth table bits [5:0] ...
    "truth_hi": (26, 2, False),  # ... and [7:6], in the low opcode bits (vlog is 0x14-0x17)
}

# Per format: the field holding the function number (None: the opcode alone decides).
FORMATS: dict[str, Optional[str]] = {
    "mem": None,       # op ra, disp16(rb)
    "jump": None,      # op ra, (rb), hint      (hint in disp16)
    "branch": None,    # op ra, label           (disp21)
    "opr": "func8",    # op ra, rb|lit, rc
    "sel": "func3",    # op ra, rb|lit, r3, rc  (rc = ra <cond> ? rb : r3)
    "fp": "func8",     # op ra, rb, rc
    "fma": "func6",    # op ra, rb, r3, rc      (rc = ra * rb + r3)
    "vec": "func8",    # op ra, rb|lit, rc
    "misc": "func16",  # op ra
    "cpe": "cfunc",    # swsim CPE-only group: op ra, imm8 / op ra / op imm8
    "dma": "func8",    # dma ra, rb, rc         (descriptor, memory address, LDM address)
    "vlog": None,      # vlog ra, rb, r3, rc, truth (truth table in [27:26] and [15:10])
    "shfi": None,      # vshff ra, rb, sel, rc   (the immediate-selector form of vshff)
}

# Registers: 32 x 256 bits; $31 reads as zero. $fN is another name of $N.
NUM_REGS = 32
ZERO_REG = 31
REG_ALIASES: dict[str, int] = {
    "v0": 0,
    **{f"t{i}": 1 + i for i in range(8)},          # t0-t7 = $1-$8
    **{f"s{i}": 9 + i for i in range(6)},          # s0-s5 = $9-$14
    "fp": 15,
    **{f"a{i}": 16 + i for i in range(6)},         # a0-a5 = $16-$21
    **{f"t{8 + i}": 22 + i for i in range(4)},     # t8-t11 = $22-$25
    "ra": 26, "pv": 27, "t12": 27, "at": 28, "gp": 29, "sp": 30, "zero": 31,
}

# rcsr's modelled control/status registers: the core group's cycle counter (MACHINE.md
# appendix) and the CPE's count of floating-point operations (swsim's number [choice]: the
# public sources do not say which register penv_slave_float_ops_count reads).
CSR_CYCLE_COUNTER = 4
CSR_FLOAT_OPS = 8
# The host console service [choice: swsim's number]: the runtime's printf reads it once a record
# is written, and the read's result (0) is ready after the configuration's console_call_cycles,
# the time the hardware takes to serve a CPE's printf (issue 28).
CSR_CONSOLE = 12
CSRS = (CSR_CYCLE_COUNTER, CSR_FLOAT_OPS, CSR_CONSOLE)
# Lanes of a floating-point vector instruction (256 bits: 4 doubles, or 4 singles each held
# in a 64-bit lane).
FP_VECTOR_LANES = 4

# The CPE address map (MACHINE.md §3). The VM's configuration takes its defaults from here.
LDM_BASE = 0x0
CODE_BASE = 0x1000_0000   # [choice] first instruction
MEM_BASE = 0x4000_0000    # [choice] first main-memory address

PIPES = ("P0", "P1", "P01")  # P01: either pipe

# Latency class names (values live in swsim.vm.config.VMConfig as ``lat_<class>``).
LATENCY_CLASSES = (
    "int",        # integer add/sub/compare/logic/shift/ldi: 1
    "imul",       # integer multiply: 5
    "vint",       # vector integer: 1
    "fp",         # float add/sub/mul/FMA, scalar and vector: 7
    "fdivs",      # single divide/sqrt, not pipelined: 19
    "fdivd",      # double divide/sqrt, not pipelined: 34
    "fcvt",       # float compare/convert: 7
    "fmove",      # float moves/copy-sign, int<->float moves: 1
    "shuffle",    # vector insert/extract/shuffle/copy: 1
    "ldm_scalar", # scalar load from LDM: 3
    "ldm_vector", # vector load from LDM: 4
    "store",      # stores (no result): 1
    "get",        # getr/getc after data is present: 1
    "bcast_load", # vldr/vldc/ldder/lddec local result: 4
    "sync",       # synr/sync: result when the barrier completes
    "dma",        # dma issue: 1
    "branch",     # branches/jumps (link register result): 1
    "misc",       # rcid, rtc, rcsr, memb, halt: 1
)


@dataclass(frozen=True)
class Instr:
    """One instruction of the subset."""
    name: str
    fmt: str
    opcode: int                  # major opcode of the register (or only) form
    func: Optional[int]          # function number in FORMATS[fmt]'s field, None if none
    syntax: str                  # operand syntax, see module docstring
    pipe: str                    # "P0", "P1" or "P01"
    latency: str                 # latency class name
    cls: str                     # semantic class (what kind of work it is; see CLASSES)
    lit_opcode: Optional[int] = None   # literal form: major opcode (opr/sel formats)
    lit_func: Optional[int] = None     # literal form: function number (vec format)
    lit_fmt: Optional[str] = None      # literal form's format, if not fmt (vshff's selector)
    size: int = 0                # bytes accessed in memory (loads/stores), else 0
    accumulates: bool = False    # rc is also a source (umulqa, the *_take_carry family)
    flops: int = 0               # floating-point operations one issue performs (a fused
                                 # multiply-add is 2, a vector one 4 lanes of them)
    doc: str = ""                # one-line meaning
    operands: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        ops = tuple(o.strip() for o in self.syntax.split(",")) if self.syntax else ()
        object.__setattr__(self, "operands", ops)

    @property
    def has_literal_form(self) -> bool:
        return self.lit_opcode is not None or self.lit_func is not None

    def format(self, literal: bool = False) -> str:
        """The format of the register (or only) form, or of the literal form."""
        return self.lit_fmt if literal and self.lit_fmt else self.fmt

    @property
    def pipes(self) -> tuple[int, ...]:
        return {"P0": (0,), "P1": (1,), "P01": (0, 1)}[self.pipe]

    @property
    def ends_group(self) -> bool:
        """No follower issues beside it (docs/timing.md "Issue rules"): it changes the pc or
        waits for other CPEs."""
        return self.cls in ("branch", "jump", "sync") or self.name == "halt"


# Semantic classes and what the VM must know about them.
CLASSES = {
    "alu": "integer/logic/compare/shift/address arithmetic on lane 0",
    "imul": "integer multiply on lane 0",
    "valu": "vector integer, per lane",
    "fp": "floating point arithmetic (scalar: lane 0; vector: 4 lanes)",
    "fdiv": "floating point divide/sqrt, P0 not pipelined",
    "fmisc": "float compare/convert/move",
    "shuffle": "vector lane insert/extract/copy/shuffle",
    "load": "load from LDM or main memory",
    "store": "store to LDM or main memory",
    "put": "register communication send",
    "get": "register communication receive",
    "bcast_load": "LDM load + row/column broadcast",
    "sync": "row/column barrier",
    "dma": "DMA request",
    "branch": "conditional or unconditional PC-relative branch",
    "jump": "register-indirect jump",
    "misc": "CPE id, cycle counter, memory barrier, halt",
}

_I = Instr
_T: list[Instr] = []


def _add(*instrs: Instr) -> None:
    _T.extend(instrs)


# ---- integer operate: opcode 0x10 (register) / 0x12 (literal), function in [12:5] -----------
_OPR = "ra, rb|lit, rc"
for _name, _func, _doc in [
    ("addw", 0x00, "rc = sext32(ra + rb)"),
    ("subw", 0x01, "rc = sext32(ra - rb)"),
    ("s4addw", 0x02, "rc = sext32(ra*4 + rb)"),
    ("s4subw", 0x03, "rc = sext32(ra*4 - rb)"),
    ("s8addw", 0x04, "rc = sext32(ra*8 + rb)"),
    ("s8subw", 0x05, "rc = sext32(ra*8 - rb)"),
    ("addl", 0x08, "rc = ra + rb"),
    ("subl", 0x09, "rc = ra - rb"),
    ("s4addl", 0x0A, "rc = ra*4 + rb"),
    ("s4subl", 0x0B, "rc = ra*4 - rb"),
    ("s8addl", 0x0C, "rc = ra*8 + rb"),
    ("s8subl", 0x0D, "rc = ra*8 - rb"),
    ("cmpeq", 0x28, "rc = (ra == rb)"),
    ("cmplt", 0x29, "rc = (ra < rb) signed"),
    ("cmple", 0x2A, "rc = (ra <= rb) signed"),
    ("cmpult", 0x2B, "rc = (ra < rb) unsigned"),
    ("cmpule", 0x2C, "rc = (ra <= rb) unsigned"),
    ("and", 0x38, "rc = ra & rb"),
    ("bic", 0x39, "rc = ra & ~rb"),
    ("bis", 0x3A, "rc = ra | rb"),
    ("ornot", 0x3B, "rc = ra | ~rb"),
    ("xor", 0x3C, "rc = ra ^ rb"),
    ("eqv", 0x3D, "rc = ~(ra ^ rb)"),
    ("sll", 0x48, "rc = ra << (rb & 63)"),
    ("srl", 0x49, "rc = ra >> (rb & 63) logical"),
    ("sra", 0x4A, "rc = ra >> (rb & 63) arithmetic"),
]:
    _add(_I(_name, "opr", 0x10, _func, _OPR, "P01", "int", "alu", lit_opcode=0x12, doc=_doc))
_add(
    _I("mulw", "opr", 0x10, 0x10, _OPR, "P0", "imul", "imul", lit_opcode=0x12,
       doc="rc = sext32(ra * rb)"),
    _I("mull", "opr", 0x10, 0x18, _OPR, "P0", "imul", "imul", lit_opcode=0x12,
       doc="rc = ra * rb (low 64 bits)"),
    _I("umulh", "opr", 0x10, 0x19, _OPR, "P0", "imul", "imul", lit_opcode=0x12,
       doc="rc = high 64 bits of unsigned ra * rb"),
    _I("fimovs", "opr", 0x10, 0x70, "ra, rc", "P0", "fmove", "fmisc",
       doc="rc = sext32(bits of binary32(ra as double))"),
    _I("fimovd", "opr", 0x10, 0x78, "ra, rc", "P0", "fmove", "fmisc",
       doc="rc = bits of ra (float -> integer register move)"),
)
# Byte masks and sign extensions real compiled code uses (SW64 numbers; unary ones: ra = $31).
for _name, _func, _syntax, _doc in [
    ("zap", 0x68, _OPR, "rc = ra with byte i cleared where bit i of rb[7:0] is set"),
    ("zapnot", 0x69, _OPR, "rc = ra with byte i kept where bit i of rb[7:0] is set, else 0"),
    ("sextb", 0x6A, "rb|lit, rc", "rc = sext8(rb)"),
    ("sexth", 0x6B, "rb|lit, rc", "rc = sext16(rb)"),
    # not in the public table: swsim numbers in 0xE0-0xEF [choice]
    ("andnot", 0xE0, _OPR, "swsim-numbered. rc = ra & ~rb (as bic)"),
    ("sextw", 0xE1, "rb|lit, rc", "swsim-numbered. rc = sext32(rb)"),
    # The carry (borrow, overflow) is a 0/1 value in rc; the _take_carry forms also add
    # (subtract) the incoming carry rc[0] [choice].
    ("addo_carry", 0xE8, _OPR, "swsim-numbered. rc = 1 if signed ra + rb overflows, else 0"),
    ("uaddo_carry", 0xE9, _OPR, "swsim-numbered. rc = carry out of unsigned ra + rb"),
    ("subo_carry", 0xEA, _OPR, "swsim-numbered. rc = 1 if signed ra - rb overflows, else 0"),
    ("usubo_carry", 0xEB, _OPR, "swsim-numbered. rc = borrow of unsigned ra - rb"),
]:
    _add(_I(_name, "opr", 0x10, _func, _syntax, "P01", "int", "alu", lit_opcode=0x12,
            doc=_doc))
for _name, _func, _doc in [
    ("addo_take_carry", 0xEC, "rc = 1 if signed ra + rb + rc[0] overflows, else 0"),
    ("uaddo_take_carry", 0xED, "rc = carry out of unsigned ra + rb + rc[0]"),
    ("subo_take_carry", 0xEE, "rc = 1 if signed ra - rb - rc[0] overflows, else 0"),
    ("usubo_take_carry", 0xEF, "rc = borrow of unsigned ra - rb - rc[0]"),
]:
    _add(_I(_name, "opr", 0x10, _func, _OPR, "P01", "int", "alu", lit_opcode=0x12,
            accumulates=True, doc="swsim-numbered. " + _doc))
_add(_I("umulqa", "opr", 0x10, 0xE2, _OPR, "P0", "imul", "imul", lit_opcode=0x12,
        accumulates=True, doc="swsim-numbered. rc = rc + ra * rb (low 64 bits, unsigned)"))

# ---- select: opcode 0x11 (register) / 0x13 (literal), function in [12:10] ------------------
for _name, _func, _cond in [("seleq", 0, "== 0"), ("selge", 1, ">= 0"), ("selgt", 2, "> 0"),
                            ("selle", 3, "<= 0"), ("sellt", 4, "< 0"), ("selne", 5, "!= 0")]:
    _add(_I(_name, "sel", 0x11, _func, "ra, rb|lit, r3, rc", "P01", "int", "alu",
            lit_opcode=0x13, doc=f"rc = (ra {_cond}) ? rb : r3 (signed 64-bit test)"))

# ---- scalar float: opcode 0x18, function in [12:5] ----------------------------------------
_FP3 = "ra, rb, rc"
_FP1 = "rb, rc"   # unary: ra field is $31
for _name, _func, _syntax, _lat, _cls, _doc in [
    ("fadds", 0x00, _FP3, "fp", "fp", "rc = f32(ra + rb)"),
    ("faddd", 0x01, _FP3, "fp", "fp", "rc = ra + rb"),
    ("fsubs", 0x02, _FP3, "fp", "fp", "rc = f32(ra - rb)"),
    ("fsubd", 0x03, _FP3, "fp", "fp", "rc = ra - rb"),
    ("fmuls", 0x04, _FP3, "fp", "fp", "rc = f32(ra * rb)"),
    ("fmuld", 0x05, _FP3, "fp", "fp", "rc = ra * rb"),
    ("fdivs", 0x06, _FP3, "fdivs", "fdiv", "rc = f32(ra / rb)"),
    ("fdivd", 0x07, _FP3, "fdivd", "fdiv", "rc = ra / rb"),
    ("fsqrts", 0x08, _FP1, "fdivs", "fdiv", "rc = f32(sqrt(rb))"),
    ("fsqrtd", 0x09, _FP1, "fdivd", "fdiv", "rc = sqrt(rb)"),
    ("fcmpeq", 0x10, _FP3, "fcvt", "fmisc", "rc = 2.0 if ra == rb else 0.0"),
    ("fcmple", 0x11, _FP3, "fcvt", "fmisc", "rc = 2.0 if ra <= rb else 0.0"),
    ("fcmplt", 0x12, _FP3, "fcvt", "fmisc", "rc = 2.0 if ra < rb else 0.0"),
    ("fcmpun", 0x13, _FP3, "fcvt", "fmisc", "rc = 2.0 if ra or rb is NaN else 0.0"),
    ("fcvtsd", 0x20, _FP1, "fcvt", "fmisc", "rc = rb (single held as double, widened)"),
    ("fcvtds", 0x21, _FP1, "fcvt", "fmisc", "rc = f32(rb)"),
    ("fcvtdl", 0x27, _FP1, "fcvt", "fmisc", "rc = int64(trunc(rb)); NaN/overflow -> 2^63"),
    ("fcvtld", 0x2F, _FP1, "fcvt", "fmisc", "rc = double(int64 rb)"),
    ("fcpys", 0x30, _FP3, "fmove", "fmisc", "rc = sign(ra) | magnitude(rb)"),
    ("fcpyse", 0x31, _FP3, "fmove", "fmisc", "rc = sign+exponent(ra) | fraction(rb)"),
    ("fcpysn", 0x32, _FP3, "fmove", "fmisc", "rc = ~sign(ra) | magnitude(rb)"),
    ("ifmovs", 0x40, "ra, rc", "fmove", "fmisc", "rc = double(binary32 with bits ra[31:0])"),
    ("ifmovd", 0x41, "ra, rc", "fmove", "fmisc", "rc = bits of ra (integer -> float move)"),
]:
    _add(_I(_name, "fp", 0x18, _func, _syntax, "P0", _lat, _cls, doc=_doc,
            flops=int(_cls in ("fp", "fdiv"))))

# ---- scalar fused multiply-add: opcode 0x19, function in [15:10] ---------------------------
for _name, _func, _doc in [
    ("fmas", 0x00, "rc = f32(ra*rb + r3)"), ("fmad", 0x01, "rc = ra*rb + r3"),
    ("fmss", 0x02, "rc = f32(ra*rb - r3)"), ("fmsd", 0x03, "rc = ra*rb - r3"),
    ("fnmas", 0x04, "rc = f32(-ra*rb + r3)"), ("fnmad", 0x05, "rc = -ra*rb + r3"),
    ("fnmss", 0x06, "rc = f32(-ra*rb - r3)"), ("fnmsd", 0x07, "rc = -ra*rb - r3"),
]:
    _add(_I(_name, "fma", 0x19, _func, "ra, rb, r3, rc", "P0", "fp", "fp", doc=_doc + ", fused",
            flops=2))

# ---- vector arithmetic: opcode 0x1A, function in [12:5]; literal forms have own numbers ----
for _name, _func, _lfunc, _doc in [
    ("vaddw", 0x00, 0x20, "per word lane: rc = ra + rb (rb|lit: literal to every lane)"),
    ("vsubw", 0x01, 0x21, "per word lane: rc = ra - rb"),
    ("vsllw", 0x08, 0x28, "per word lane: rc = ra << (rb[4:0] of lane 0 / literal)"),
    ("vsrlw", 0x09, 0x29, "per word lane: rc = ra >> count, logical"),
    ("vsraw", 0x0A, 0x2A, "per word lane: rc = ra >> count, arithmetic"),
    ("vaddl", 0x0E, 0x2E, "per 64-bit lane: rc = ra + rb"),
    ("vsubl", 0x0F, 0x2F, "per 64-bit lane: rc = ra - rb"),
]:
    _add(_I(_name, "vec", 0x1A, _func, "ra, rb|lit, rc", "P0", "vint", "valu", lit_func=_lfunc,
            doc=_doc))
# Whole-register shifts (SW64 numbers) and copy (swsim number [choice]).
for _name, _func, _lfunc, _doc in [
    ("sllow", 0x0C, 0x2C, "rc = 256-bit ra << (rb[7:0] / literal)"),
    ("srlow", 0x0D, 0x2D, "rc = 256-bit ra >> (rb[7:0] / literal), logical"),
]:
    _add(_I(_name, "vec", 0x1A, _func, "ra, rb|lit, rc", "P0", "vint", "valu", lit_func=_lfunc,
            doc=_doc))
_add(_I("vfmov", "vec", 0x1A, 0xE0, "ra, rc", "P0", "shuffle", "shuffle",
        doc="swsim-numbered. rc = ra, all 256 bits"))
for _name, _func, _syntax, _lat, _cls, _doc in [
    ("vadds", 0x80, _FP3, "fp", "fp", "per lane: rc = f32(ra + rb)"),
    ("vaddd", 0x81, _FP3, "fp", "fp", "per lane: rc = ra + rb"),
    ("vsubs", 0x82, _FP3, "fp", "fp", "per lane: rc = f32(ra - rb)"),
    ("vsubd", 0x83, _FP3, "fp", "fp", "per lane: rc = ra - rb"),
    ("vmuls", 0x84, _FP3, "fp", "fp", "per lane: rc = f32(ra * rb)"),
    ("vmuld", 0x85, _FP3, "fp", "fp", "per lane: rc = ra * rb"),
    ("vdivs", 0x86, _FP3, "fdivs", "fdiv", "per lane: rc = f32(ra / rb)"),
    ("vdivd", 0x87, _FP3, "fdivd", "fdiv", "per lane: rc = ra / rb"),
    ("vsqrts", 0x88, _FP1, "fdivs", "fdiv", "per lane: rc = f32(sqrt(rb))"),
    ("vsqrtd", 0x89, _FP1, "fdivd", "fdiv", "per lane: rc = sqrt(rb)"),
]:
    _add(_I(_name, "vec", 0x1A, _func, _syntax, "P0", _lat, _cls, doc=_doc,
            flops=FP_VECTOR_LANES))

# ---- vector fused multiply-add and lane operations: opcode 0x1B, function in [15:10] -------
for _name, _func, _doc in [
    ("vmas", 0x00, "rc = f32(ra*rb + r3)"), ("vmad", 0x01, "rc = ra*rb + r3"),
    ("vmss", 0x02, "rc = f32(ra*rb - r3)"), ("vmsd", 0x03, "rc = ra*rb - r3"),
    ("vnmas", 0x04, "rc = f32(-ra*rb + r3)"), ("vnmad", 0x05, "rc = -ra*rb + r3"),
    ("vnmss", 0x06, "rc = f32(-ra*rb - r3)"), ("vnmsd", 0x07, "rc = -ra*rb - r3"),
]:
    _add(_I(_name, "fma", 0x1B, _func, "ra, rb, r3, rc", "P0", "fp", "fp",
            doc="per lane: " + _doc + ", fused", flops=2 * FP_VECTOR_LANES))
_add(
    _I("vinsw", "fma", 0x1B, 0x20, "ra, rb, lane, rc", "P0", "shuffle", "shuffle",
       doc="rc = rb with word lane `lane` (0-7) replaced by ra[31:0]"),
    _I("vinsf", "fma", 0x1B, 0x21, "ra, rb, lane, rc", "P0", "shuffle", "shuffle",
       doc="rc = rb with 64-bit lane `lane` (0-3) replaced by ra[63:0]"),
    _I("vextw", "fma", 0x1B, 0x22, "ra, lane, rc", "P0", "shuffle", "shuffle",
       doc="rc[63:0] = sext32(word lane `lane` of ra)"),
    _I("vextf", "fma", 0x1B, 0x23, "ra, lane, rc", "P0", "shuffle", "shuffle",
       doc="rc[63:0] = 64-bit lane `lane` of ra"),
    _I("vcpyw", "fma", 0x1B, 0x24, "ra, rc", "P0", "shuffle", "shuffle",
       doc="every word lane of rc = ra[31:0]"),
    _I("vcpyf", "fma", 0x1B, 0x25, "ra, rc", "P0", "shuffle", "shuffle",
       doc="every 64-bit lane of rc = ra[63:0]"),
    _I("vshff", "fma", 0x1B, 0x26, "ra, rb, r3|sel, rc", "P0", "shuffle", "shuffle",
       lit_opcode=0x25, lit_fmt="shfi",
       doc="swsim-numbered. 64-bit lane i of rc = lane s of (ra:rb) (0-3 ra, 4-7 rb), "
           "s = bits [4i+2:4i] of r3; selector sel: lanes 0-1 = ra lane sel[2i+1:2i], "
           "lanes 2-3 = rb lane sel[2i+1:2i]"),
    _I("vshfw", "fma", 0x1B, 0x27, "ra, rb, r3, rc", "P0", "shuffle", "shuffle",
       doc="word lane i of rc = word lane s of (ra:rb) (0-7 ra, 8-15 rb), "
           "s = bits [4i+3:4i] of r3"),
)

# ---- vector logic: opcode 0x14-0x17 (SW64), truth table in [27:26] and [15:10] ------------
_add(_I("vlog", "vlog", 0x14, None, "ra, rb, r3, rc, truth", "P0", "vint", "valu",
        doc="bit j of rc = bit (4 ra_j + 2 rb_j + r3_j) of truth, all 256 bits"))
# The compiler's bitwise 256-bit logic, as vlog with r3 = $31 (assembler pseudo-forms below):
# truth-table bit (4a + 2b + c) for every c.
VECTOR_LOGIC = {"vandw": 0xC0, "vbicw": 0x30, "vbisw": 0xFC, "vornotw": 0xF3, "vxorw": 0x3C,
                "veqvw": 0xC3}

# ---- misc: opcode 0x06, function in [15:0] ------------------------------------------------
_add(
    _I("memb", "misc", 0x06, 0x0000, "", "P1", "misc", "misc", doc="memory barrier (no-op here)"),
    _I("rtc", "misc", 0x06, 0x0020, "ra", "P1", "misc", "misc",
       doc="ra = the core group's cycle number at issue"),
    _I("rcid", "misc", 0x06, 0x0040, "ra", "P1", "misc", "misc", doc="ra = this CPE's id 0..63"),
    _I("halt", "misc", 0x06, 0x0080, "", "P1", "misc", "misc", doc="stop this CPE"),
)

# ---- jumps: memory format, op ra, (rb), hint ----------------------------------------------
_add(
    _I("call", "jump", 0x01, None, "ra, (rb), hint", "P1", "branch", "jump",
       doc="ra = pc + 4; pc = rb & ~3"),
    _I("ret", "jump", 0x02, None, "ra, (rb), hint", "P1", "branch", "jump",
       doc="ra = pc + 4; pc = rb & ~3"),
    _I("jmp", "jump", 0x03, None, "ra, (rb), hint", "P1", "branch", "jump",
       doc="ra = pc + 4; pc = rb & ~3"),
)

# ---- branches: op ra, label ---------------------------------------------------------------
_add(
    _I("br", "branch", 0x04, None, "ra, label", "P1", "branch", "branch",
       doc="ra = pc + 4; branch always"),
    _I("bsr", "branch", 0x05, None, "ra, label", "P1", "branch", "branch",
       doc="ra = pc + 4; branch always (subroutine call)"),
)
for _i, (_name, _cond) in enumerate([("beq", "ra == 0"), ("bne", "ra != 0"), ("blt", "ra < 0"),
                                      ("ble", "ra <= 0"), ("bgt", "ra > 0"), ("bge", "ra >= 0"),
                                      ("blbc", "ra bit 0 clear"), ("blbs", "ra bit 0 set")]):
    _add(_I(_name, "branch", 0x30 + _i, None, "ra, label", "P1", "branch", "branch",
            doc=f"branch if {_cond} (signed 64-bit)"))
for _i, (_name, _cond) in enumerate([("fbeq", "=="), ("fbne", "!="), ("fblt", "<"),
                                      ("fble", "<="), ("fbgt", ">"), ("fbge", ">=")]):
    _add(_I(_name, "branch", 0x38 + _i, None, "ra, label", "P1", "branch", "branch",
            doc=f"branch if ra (double) {_cond} 0.0"))

# ---- loads and stores: memory format op ra, disp(rb) --------------------------------------
_MEM = "ra, disp(rb)"
for _name, _op, _size, _lat, _cls, _doc in [
    ("ldse", 0x0A, 4, "ldm_vector", "load", "all 4 lanes of ra = f32 at address"),
    ("ldde", 0x0B, 8, "ldm_vector", "load", "all 4 lanes of ra = f64 at address"),
    ("vlds", 0x0C, 16, "ldm_vector", "load", "lane i of ra = f32 at address + 4i"),
    ("vldd", 0x0D, 32, "ldm_vector", "load", "ra = 32 bytes at address"),
    ("vsts", 0x0E, 16, "store", "store", "f32 of lane i of ra to address + 4i"),
    ("vstd", 0x0F, 32, "store", "store", "32 bytes of ra to address"),
    ("ldbu", 0x20, 1, "ldm_scalar", "load", "ra = zero-extended byte"),
    ("ldhu", 0x21, 2, "ldm_scalar", "load", "ra = zero-extended 16-bit"),
    ("ldw", 0x22, 4, "ldm_scalar", "load", "ra = sign-extended 32-bit"),
    ("ldl", 0x23, 8, "ldm_scalar", "load", "ra = 64-bit"),
    ("flds", 0x26, 4, "ldm_scalar", "load", "ra = f32 widened to double"),
    ("fldd", 0x27, 8, "ldm_scalar", "load", "ra = f64"),
    ("stb", 0x28, 1, "store", "store", "store ra[7:0]"),
    ("sth", 0x29, 2, "store", "store", "store ra[15:0]"),
    ("stw", 0x2A, 4, "store", "store", "store ra[31:0]"),
    ("stl", 0x2B, 8, "store", "store", "store ra[63:0]"),
    ("fsts", 0x2E, 4, "store", "store", "store ra (double) rounded to f32"),
    ("fstd", 0x2F, 8, "store", "store", "store ra (f64)"),
]:
    _add(_I(_name, "mem", _op, None, _MEM, "P1", _lat, _cls, size=_size, doc=_doc))
_add(
    _I("ldi", "mem", 0x3E, None, _MEM, "P01", "int", "alu", doc="ra = rb + sext(disp)"),
    _I("ldih", "mem", 0x3F, None, _MEM, "P01", "int", "alu", doc="ra = rb + sext(disp) << 16"),
)

# ---- CPE-only (swsim numbering, free SW64 opcode space) ------------------------------------
# Load-and-broadcast: memory format, opcodes 0x1C-0x1F.
for _name, _op, _size, _doc in [
    ("vldr", 0x1C, 32, "ra = 32 bytes at address; broadcast ra to the other CPEs of the row"),
    ("vldc", 0x1D, 32, "ra = 32 bytes at address; broadcast ra to the other CPEs of the column"),
    ("ldder", 0x1E, 8, "all lanes of ra = f64 at address; broadcast along the row"),
    ("lddec", 0x1F, 8, "all lanes of ra = f64 at address; broadcast along the column"),
]:
    _add(_I(_name, "mem", _op, None, _MEM, "P1", "bcast_load", "bcast_load", size=_size, doc=_doc))
# Register communication and barriers: opcode 0x07, ra [25:21], imm8 [15:8], cfunc [7:0].
# The target n / mask is an immediate (literal form) or rb's lane 0 (register form).
_add(
    _I("putr", "cpe", 0x07, 0x04, "ra, rb|n", "P1", "store", "put", lit_func=0x00,
       doc="send ra to CPE (row, n) of this row; n = 8: to the other 7 CPEs of the row"),
    _I("putc", "cpe", 0x07, 0x05, "ra, rb|n", "P1", "store", "put", lit_func=0x01,
       doc="send ra to CPE (n, column) of this column; n = 8: to the other 7 of the column"),
    _I("getr", "cpe", 0x07, 0x02, "ra", "P1", "get", "get",
       doc="ra = oldest entry of the row receive queue (stall while empty)"),
    _I("getc", "cpe", 0x07, 0x03, "ra", "P1", "get", "get",
       doc="ra = oldest entry of the column receive queue (stall while empty)"),
    _I("synr", "cpe", 0x07, 0x18, "rb|mask", "P01", "sync", "sync", lit_func=0x10,
       doc="barrier with the CPEs of this row whose column bit is set in mask"),
    _I("sync", "cpe", 0x07, 0x19, "rb|mask", "P01", "sync", "sync", lit_func=0x11,
       doc="barrier with the CPEs of this column whose row bit is set in mask"),
    _I("rcsr", "cpe", 0x07, 0x20, "ra, csr", "P1", "misc", "misc",
       doc=f"ra = control/status register csr; {CSR_CYCLE_COUNTER}: the cycle number at issue "
           f"(as rtc); {CSR_FLOAT_OPS}: the floating-point operations this CPE issued before "
           f"it; {CSR_CONSOLE}: 0, ready after console_call_cycles (the host serving a console "
           "call); any other csr faults"),
)
# DMA: opcode 0x24, register operate layout, function 0.
_add(_I("dma", "dma", 0x24, 0x00, "ra, rb, rc", "P1", "dma", "dma",
        doc="start the DMA described by ra (descriptor) between memory rb and LDM rc"))

INSTRUCTIONS: tuple[Instr, ...] = tuple(_T)
BY_NAME: dict[str, Instr] = {i.name: i for i in INSTRUCTIONS}

# Pseudo-instructions the assembler expands (MACHINE.md §4); their expansion lives in the
# assembler, their names here so every tool knows them.
PSEUDO_INSTRUCTIONS = {
    "mov": "mov ra, rc          -> bis $31, ra, rc  (or ldi rc, imm for an immediate)",
    "clr": "clr rc              -> bis $31, $31, rc",
    "negw": "negw ra, rc        -> subw $31, ra, rc",
    "negl": "negl ra, rc        -> subl $31, ra, rc",
    "not": "not ra, rc          -> ornot $31, ra, rc",
    "or": "or ra, rb, rc        -> bis ra, rb, rc  (the SW64 alias; rb may be a literal)",
    "nop": "nop                 -> bis $31, $31, $31",
    "unop": "unop               -> ldl $31, 0($31)",
    "fnop": "fnop               -> fcpys $31, $31, $31",
    "ldi": "ldi rc, value       -> ldih + ldi pair when value does not fit 16 bits signed",
    "br": "br label            -> br $31, label",
    "ret": "ret                 -> ret $31, ($26), 1",
    **{name: f"{name} ra, rb, rc  -> vlog ra, rb, $31, rc, {truth:#04x}"
       for name, truth in VECTOR_LOGIC.items()},
}


# --------------------------------------------------------------------------------------------
# Derived facts (computed from the rows above, never written twice)
# --------------------------------------------------------------------------------------------
_WRITES_RA = {"load", "bcast_load", "get"}  # classes whose destination is the ra field


def field_range(name: str) -> tuple[int, int]:
    """Inclusive range of values a field can hold."""
    _, width, signed = FIELDS[name]
    return (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)


# Immediate operand templates: the values the assembler accepts (MACHINE.md §4) and the
# disassembler prints.
IMMEDIATE_RANGES: dict[str, tuple[int, int]] = {
    "lit": field_range("lit"), "lane": (0, 7), "n": (0, 8), "mask": (0, 255),
    "csr": field_range("imm8"), "sel": field_range("sel8"), "truth": (0, 255),
    "hint": field_range("disp16")}

_IMMEDIATE_FIELDS = {  # low part first: a value split over fields is their concatenation
    "lit": ["lit"], "hint": ["disp16"], "label": ["disp21"], "lane": ["lane"], "n": ["imm8"],
    "mask": ["imm8"], "csr": ["imm8"], "sel": ["sel8"], "truth": ["truth_lo", "truth_hi"]}


def register_or_immediate(operand: str) -> Optional[tuple[str, str]]:
    """(register field, immediate template) of a ``reg|imm`` template, else None."""
    return tuple(operand.split("|")) if "|" in operand else None


def operand_fields(operand: str, literal: bool = False) -> list[str]:
    """Fields an operand template occupies in the word (in the literal form if ``literal``)."""
    choice = register_or_immediate(operand)
    if choice:
        return _IMMEDIATE_FIELDS[choice[1]] if literal else [choice[0]]
    if operand in ("ra", "rb", "rc", "r3"):
        return [operand]
    return {"disp(rb)": ["disp16", "rb"], "(rb)": ["rb"]}.get(operand) \
        or _IMMEDIATE_FIELDS[operand]


def immediate_fields(instr: Instr, literal: bool = False) -> list[str]:
    """The fields whose concatenation (low part first) the instruction uses as its immediate
    operand (the literal, the displacement, the branch offset, the lane, n, mask, csr, selector
    or truth table), or []. A jump's hint is not used."""
    for operand in instr.operands:
        fields = [f for f in operand_fields(operand, literal) if f not in ("ra", "rb", "rc", "r3")]
        if fields and operand != "hint":
            return fields
    return []


def immediate_value(fields: list[str], values: dict[str, int]) -> int:
    """The immediate held in ``fields`` (low part first) of decoded field ``values``."""
    value, shift = 0, 0
    for name in fields:
        value |= values[name] << shift
        shift += FIELDS[name][1]
    return value


def split_immediate(operand: str, value: int) -> dict[str, int]:
    """Field values of an immediate operand template (inverse of immediate_value)."""
    fields = _IMMEDIATE_FIELDS[operand]
    if len(fields) == 1:
        return {fields[0]: value}
    out = {}
    for name in fields:
        width = FIELDS[name][1]
        out[name], value = value & ((1 << width) - 1), value >> width
    return out


def register_fields(instr: Instr) -> list[str]:
    """The register fields named in the operand syntax, in operand order."""
    regs = []
    for op in instr.operands:
        choice = register_or_immediate(op)
        if op == "disp(rb)" or op == "(rb)":
            regs.append("rb")
        elif choice:
            regs.append(choice[0])
        elif op in ("ra", "rb", "rc", "r3"):
            regs.append(op)
    return regs


def literal_register(instr: Instr) -> Optional[str]:
    """The register field the literal form replaces by its immediate, or None."""
    for op in instr.operands:
        choice = register_or_immediate(op)
        if choice:
            return choice[0]
    return None


def dest_field(instr: Instr) -> Optional[str]:
    """The field of the register this instruction writes, or None."""
    if instr.cls in _WRITES_RA or instr.name in ("ldi", "ldih", "rtc", "rcid", "rcsr", "br",
                                                 "bsr") or instr.cls == "jump":
        return "ra"
    if instr.cls in ("store", "put", "sync", "dma", "branch", "misc"):
        return None
    return "rc"


def source_fields(instr: Instr, literal: bool = False) -> list[str]:
    """The fields of the registers this instruction reads (not the one its literal form
    replaces; the destination too if the instruction accumulates into it)."""
    dest = dest_field(instr)
    replaced = literal_register(instr) if literal else None
    return [f for f in register_fields(instr) if (f != dest or instr.accumulates)
            and f != replaced]


def encoding_forms(instr: Instr) -> list[tuple[int, Optional[int], bool]]:
    """Every (major opcode, function, is literal form) that encodes ``instr``. An operand
    field that overlaps the opcode field (vlog's truth table) makes one opcode per value of
    the overlapped bits."""
    forms = [(instr.opcode, instr.func, False)]
    if instr.lit_opcode is not None:
        forms.append((instr.lit_opcode, instr.func, True))
    if instr.lit_func is not None:
        forms.append((instr.opcode, instr.lit_func, True))
    op_low, op_width, _ = FIELDS["opcode"]
    op_mask = (1 << op_width) - 1
    out = []
    for opcode, func, literal in forms:
        overlap = 0
        for operand in instr.operands:
            for name in operand_fields(operand, literal):
                low, width, _ = FIELDS[name]
                overlap |= (((1 << width) - 1) << low >> op_low) & op_mask
        variants = [v for v in range(op_mask + 1) if v & ~overlap == 0]
        out += [(opcode | v, func, literal) for v in variants]
    return out


UNUSED_REGISTER = ZERO_REG  # canonical value of register fields an instruction does not use
