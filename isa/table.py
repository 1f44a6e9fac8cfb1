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
    fields; ``rb|lit`` is a register or an 8-bit literal (choosing the register or literal
    form of the instruction); ``disp(rb)`` is a memory operand; ``label`` a branch target;
    ``lane``, ``n``, ``mask``, ``hint`` small immediates.
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
    "imm8": (8, 8, False),     # swsim CPE-communication group immediate (n / mask)
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
    "misc",       # rcid, rtc, memb, halt: 1
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
    size: int = 0                # bytes accessed in memory (loads/stores), else 0
    doc: str = ""                # one-line meaning
    operands: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        ops = tuple(o.strip() for o in self.syntax.split(",")) if self.syntax else ()
        object.__setattr__(self, "operands", ops)

    @property
    def has_literal_form(self) -> bool:
        return self.lit_opcode is not None or self.lit_func is not None

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
    _add(_I(_name, "fp", 0x18, _func, _syntax, "P0", _lat, _cls, doc=_doc))

# ---- scalar fused multiply-add: opcode 0x19, function in [15:10] ---------------------------
for _name, _func, _doc in [
    ("fmas", 0x00, "rc = f32(ra*rb + r3)"), ("fmad", 0x01, "rc = ra*rb + r3"),
    ("fmss", 0x02, "rc = f32(ra*rb - r3)"), ("fmsd", 0x03, "rc = ra*rb - r3"),
    ("fnmas", 0x04, "rc = f32(-ra*rb + r3)"), ("fnmad", 0x05, "rc = -ra*rb + r3"),
    ("fnmss", 0x06, "rc = f32(-ra*rb - r3)"), ("fnmsd", 0x07, "rc = -ra*rb - r3"),
]:
    _add(_I(_name, "fma", 0x19, _func, "ra, rb, r3, rc", "P0", "fp", "fp", doc=_doc + ", fused"))

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
    _add(_I(_name, "vec", 0x1A, _func, _syntax, "P0", _lat, _cls, doc=_doc))

# ---- vector fused multiply-add and lane operations: opcode 0x1B, function in [15:10] -------
for _name, _func, _doc in [
    ("vmas", 0x00, "rc = f32(ra*rb + r3)"), ("vmad", 0x01, "rc = ra*rb + r3"),
    ("vmss", 0x02, "rc = f32(ra*rb - r3)"), ("vmsd", 0x03, "rc = ra*rb - r3"),
    ("vnmas", 0x04, "rc = f32(-ra*rb + r3)"), ("vnmad", 0x05, "rc = -ra*rb + r3"),
    ("vnmss", 0x06, "rc = f32(-ra*rb - r3)"), ("vnmsd", 0x07, "rc = -ra*rb - r3"),
]:
    _add(_I(_name, "fma", 0x1B, _func, "ra, rb, r3, rc", "P0", "fp", "fp",
            doc="per lane: " + _doc + ", fused"))
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
    _I("vshff", "fma", 0x1B, 0x26, "ra, rb, r3, rc", "P0", "shuffle", "shuffle",
       doc="swsim-numbered. 64-bit lane i of rc = lane s of (ra:rb) (0-3 ra, 4-7 rb), "
           "s = bits [4i+2:4i] of r3"),
    _I("vshfw", "fma", 0x1B, 0x27, "ra, rb, r3, rc", "P0", "shuffle", "shuffle",
       doc="word lane i of rc = word lane s of (ra:rb) (0-7 ra, 8-15 rb), "
           "s = bits [4i+3:4i] of r3"),
)

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
_add(
    _I("putr", "cpe", 0x07, 0x00, "ra, n", "P1", "store", "put",
       doc="send ra to CPE (row, n) of this row; n = 8: to the other 7 CPEs of the row"),
    _I("putc", "cpe", 0x07, 0x01, "ra, n", "P1", "store", "put",
       doc="send ra to CPE (n, column) of this column; n = 8: to the other 7 of the column"),
    _I("getr", "cpe", 0x07, 0x02, "ra", "P1", "get", "get",
       doc="ra = oldest entry of the row receive queue (stall while empty)"),
    _I("getc", "cpe", 0x07, 0x03, "ra", "P1", "get", "get",
       doc="ra = oldest entry of the column receive queue (stall while empty)"),
    _I("synr", "cpe", 0x07, 0x10, "mask", "P01", "sync", "sync",
       doc="barrier with the CPEs of this row whose column bit is set in mask"),
    _I("sync", "cpe", 0x07, 0x11, "mask", "P01", "sync", "sync",
       doc="barrier with the CPEs of this column whose row bit is set in mask"),
)
# DMA: opcode 0x14, register operate layout, function 0.
_add(_I("dma", "dma", 0x14, 0x00, "ra, rb, rc", "P1", "dma", "dma",
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
    "lane": (0, 7), "n": (0, 8), "mask": (0, 255), "hint": field_range("disp16")}


def operand_fields(operand: str, literal: bool = False) -> list[str]:
    """Fields an operand template occupies in the word."""
    return {
        "ra": ["ra"], "rb": ["rb"], "rc": ["rc"], "r3": ["r3"],
        "rb|lit": ["lit"] if literal else ["rb"],
        "disp(rb)": ["disp16", "rb"], "(rb)": ["rb"], "hint": ["disp16"],
        "label": ["disp21"], "lane": ["lane"], "n": ["imm8"], "mask": ["imm8"],
    }[operand]


def immediate_field(instr: Instr, literal: bool = False) -> Optional[str]:
    """The field whose value the instruction uses as its immediate operand (the literal, the
    displacement, the branch offset, the lane, n or mask), or None. A jump's hint is not used."""
    for operand in instr.operands:
        if operand == "rb|lit" and not literal:
            continue
        fields = [f for f in operand_fields(operand, literal) if f not in ("ra", "rb", "rc", "r3")]
        if fields and operand != "hint":
            return fields[0]
    return None


def register_fields(instr: Instr) -> list[str]:
    """The register fields named in the operand syntax, in operand order."""
    regs = []
    for op in instr.operands:
        if op == "disp(rb)" or op == "(rb)":
            regs.append("rb")
        elif op == "rb|lit":
            regs.append("rb")
        elif op in ("ra", "rb", "rc", "r3"):
            regs.append(op)
    return regs


def dest_field(instr: Instr) -> Optional[str]:
    """The field of the register this instruction writes, or None."""
    if instr.cls in _WRITES_RA or instr.name in ("ldi", "ldih", "rtc", "rcid", "br", "bsr") \
            or instr.cls == "jump":
        return "ra"
    if instr.cls in ("store", "put", "sync", "dma", "branch", "misc"):
        return None
    return "rc"


def source_fields(instr: Instr, literal: bool = False) -> list[str]:
    """The fields of the registers this instruction reads (rb only in its register form)."""
    dest = dest_field(instr)
    return [f for f in register_fields(instr) if f != dest and not (literal and f == "rb")]


UNUSED_REGISTER = ZERO_REG  # canonical value of register fields an instruction does not use
