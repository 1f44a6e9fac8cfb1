"""Source text -> ObjectFile, in two passes.

Pass 1 walks the preprocessed statements once: it defines labels, lays out every section
(sizes only, so every label gets its offset) and queues one *emitter* per statement that
produces bytes. Pass 2 runs the emitters, which evaluate expressions with every label known,
encode instructions through the ISA table and record relocations for addresses the linker
fixes. Everything about instructions (names, operand order, fields, ranges) comes from
``swsim.isa``; only pseudo-instruction planning (``ldi`` pairs, relocation annotations) is
assembler knowledge.
"""
from __future__ import annotations

import difflib
import re
import struct
from dataclasses import dataclass, replace
from typing import Callable, Optional, Union

from ..isa import (BY_NAME, FIELDS, IMMEDIATE_RANGES, PSEUDO_INSTRUCTIONS, ZERO_REG, Instr,
                   encode, register_or_immediate, split_immediate)
from .diagnostics import DiagnosticLog, Origin, StatementError
from .preprocess import LEADING_LABELS, Preprocessor, split_arguments
from .program import (BSS, DATA, LDM, NOLOAD, SEGMENT_SECTIONS, TEXT, ObjectFile, Relocation,
                      Section, SegmentLayout, SourceLine, Symbol)
from .syntax import (REGISTER_HELP, Binary, Float, LocalRef, Num, Operand, Paren, Reg, Statement,
                     Sym, Unary, parse_register, parse_statement)
from .words import DISP16, GP_SYMBOL, NOP_WORD, split_hi_lo



def _span(low_high) -> str:
    return f"{low_high[0]}..{low_high[1]}"


EXPECTED = {  # what an operand template wants, for "expected ..." messages
    "ra": "a register", "rb": "a register", "rc": "a register", "r3": "a register",
    "rb|lit": f"a register or an 8-bit literal ({_span(IMMEDIATE_RANGES['lit'])})",
    "disp(rb)": "a memory operand disp(rb)", "(rb)": "a register in parentheses, e.g. ($26)",
    "label": "a branch target (label or address)", "hint": "a jump hint number",
    "lane": f"a lane number {_span(IMMEDIATE_RANGES['lane'])}",
    "n": f"a target number {_span(IMMEDIATE_RANGES['n'])} (8: broadcast)",
    "mask": f"an 8-bit CPE mask {_span(IMMEDIATE_RANGES['mask'])}",
    "csr": f"a control/status register number {_span(IMMEDIATE_RANGES['csr'])}",
    "sel": f"an 8-bit lane selector {_span(IMMEDIATE_RANGES['sel'])}",
    "truth": f"an 8-bit truth table {_span(IMMEDIATE_RANGES['truth'])}",
}
EXPECTED.update({f"{reg}|{imm}": f"a register or {EXPECTED[imm]}"
                 for reg, imm in (("rb", "n"), ("rb", "mask"), ("r3", "sel"))})

# Relocation annotations (docs/asm.md "Relocation annotations").
_ANNOTATION = re.compile(r"!([a-z_]+)(?:!(\d+))?$")
# Annotations that make a displacement relative to _gp or to the thread pointer (TLS):
# annotation -> relocation kind.
_RELATIVE_KINDS = {"gprelhigh": "gprel_hi16", "gprellow": "gprel_lo16", "gprel": "gprel16",
                   "tprelhi": "tprel_hi16", "tprello": "tprel_lo16", "tprel": "tprel16",
                   # QingLong's package (linker.SEGMENT_SECTIONS): from a segment's base
                   "seg": "seg16", "io": "io16"}

# Statements whose arguments are informational and not in the expression syntax.
RAW_DIRECTIVES = {".file", ".loc", ".ident"}
DATA_SIZES = {".byte": 1, ".short": 2, ".half": 2, ".hword": 2, ".word": 4, ".long": 4,
              ".int": 4, ".quad": 8}
FLOAT_FORMATS = {".float": "<f", ".single": "<f", ".double": "<d"}
FLOAT32_MAX = 3.4028234663852886e38
MAX_VALUE_BITS = 128          # an expression's integer values (64-bit words, room to compute)
STRING_DIRECTIVES = {".ascii": False, ".asciz": True, ".string": True}
SECTION_DIRECTIVES = {".text": TEXT, ".data": DATA, ".rodata": DATA, ".bss": BSS, ".ldm": LDM,
                      ".tdata": LDM, ".tbss": BSS, **dict.fromkeys(SEGMENT_SECTIONS, DATA)}
IGNORED_DIRECTIVES = {".mask", ".fmask", ".prologue", ".arch", ".eflag", ".end"}
ALIGN_DIRECTIVES = {".align", ".p2align", ".balign"}   # may leave operands empty: .p2align 4,,15
# Directives that put bytes into a section (skipped, with instructions and directives swsim
# does not know, in the non-loaded sections NOLOAD_PREFIXES name).
EMITTING_DIRECTIVES = {*DATA_SIZES, *FLOAT_FORMATS, *STRING_DIRECTIVES, *ALIGN_DIRECTIVES,
                       ".skip", ".space", ".zero", ".org"}
NOLOAD_PREFIXES = (".debug", ".note", ".comment")
# [choice] .comm/.lcomm variables: in main memory, as a CPE's global that is not
# __thread_local is (shared by the CPEs), aligned to 8 bytes unless the directive says
COMMON_SECTION, COMMON_ALIGN = "COMMON", 8
_SECTION_NAME = re.compile(r"[A-Za-z_.$][\w.$-]*")

# The most bytes one section of each kind may hold (and why): what fits the machine, checked
# before any memory is spent on it (so `.skip 0x7fffffff` fails at once).
_LDM_LIMIT = (1 << 20, "the largest LDM has")  # the C core's limit for any configuration
MAX_SECTION_BYTES = {
    # [choice] 2^20 words: what a branch's 21-bit signed word displacement reaches
    TEXT: (4 << (FIELDS["disp21"][1] - 1), "a branch reaches"),
    LDM: _LDM_LIMIT, BSS: _LDM_LIMIT,
    # [choice] more is a typo; the VM's static-data region is 16 MiB by default
    DATA: (256 << 20, "swsim allows for static data"),
}


def section_kind(name: str, flags: str = "", type_: str = "") -> str:
    """Where a section's bytes live: code, zeroed LDM, initialised LDM, main memory, or
    nowhere (debug information and notes)."""
    if name.startswith(NOLOAD_PREFIXES):
        return NOLOAD
    if name.startswith(".text") or "x" in flags:
        return TEXT
    if type_ == "nobits" or name.startswith((".bss", ".tbss", ".sbss")):
        return BSS
    if name.startswith((".ldm", ".tdata")) or "T" in flags:  # T: thread-local
        return LDM
    return DATA


@dataclass(frozen=True)
class Value:
    """An expression's value: a number, an offset in one of this object's sections, or an
    offset from a symbol this object does not define (left to the linker)."""
    offset: Union[int, float]
    section: Optional[str] = None
    symbol: Optional[str] = None

    @property
    def absolute(self) -> bool:
        return self.section is None and self.symbol is None


def _symbol_names(expr):
    """The names of the symbols an expression refers to."""
    if isinstance(expr, Sym):
        yield expr.name
    elif isinstance(expr, (Unary, Paren)):
        yield from _symbol_names(expr.arg if isinstance(expr, Unary) else expr.inner)
    elif isinstance(expr, Binary):
        yield from _symbol_names(expr.left)
        yield from _symbol_names(expr.right)


@dataclass
class _Emitter:
    section: Section
    offset: int
    origin: Origin
    emit: Callable[[], None]


# Pseudo-instructions whose table entry is a template ("mov ra, rc -> bis $31, ra, rc").
def _pseudo_templates() -> dict[str, tuple[list[str], Statement]]:
    templates = {}
    for name, text in PSEUDO_INSTRUCTIONS.items():
        left, _, right = text.partition("->")
        params = [p.strip() for p in left.strip()[len(name):].split(",") if p.strip()]
        expansion = re.split(r"\s{2,}", right.strip())[0]  # drop trailing remarks
        try:
            stmt = parse_statement(expansion)
        except StatementError:
            continue  # prose, e.g. the ldi pair: planned in code below
        target = BY_NAME.get(stmt.name or "")
        if target is not None and len(stmt.operands) == len(target.operands):
            templates[name] = (params, stmt)
    return templates


PSEUDO_TEMPLATES = _pseudo_templates()
MNEMONICS = sorted(set(BY_NAME) | set(PSEUDO_INSTRUCTIONS))


class Assembler:
    def __init__(self, filename: str = "<input>", include_dirs: tuple[str, ...] = (),
                 segment_layout: Optional[SegmentLayout] = None):
        self.filename = filename
        self.segment_layout = segment_layout
        self.log = DiagnosticLog()
        self.preprocessor = Preprocessor(self.log, self._evaluate_text, self._is_defined,
                                         tuple(include_dirs))
        self.sections: dict[str, Section] = {}
        self.section = self._switch_section(".text", TEXT)
        self.symbols: dict[str, Symbol] = {}
        self.globals: set[str] = set()
        self.weak: set[str] = set()
        self.declared_local: set[str] = set()               # .local names (for .comm)
        self.emitters: list[_Emitter] = []
        self.relocations: list[Relocation] = []
        self.lines: dict[tuple[str, int], SourceLine] = {}
        self.stack_bytes = 0
        self.numeric_defs: dict[int, int] = {}            # numeric label -> definitions so far
        self.forward_refs: list[tuple[str, Origin, int]] = []
        self.open_gpdisp: dict[str, Origin] = {}           # "!gpdisp!N" whose ldi is pending
        self.literal_numbers: set[str] = set()
        self.positions: dict[tuple[str, int], int] = {}    # (file, line) -> first statement
        self.origin: Optional[Origin] = None               # statement being assembled
        self.here = (self.section, 0)                      # its location: the value of "."
        self.directives = self._directive_table()

    # ---- driver ---------------------------------------------------------------------------
    def assemble(self, text: str) -> ObjectFile:
        """The object file; AsmError with every error of ``text``."""
        obj = self.run(text)
        self.log.raise_if_errors()
        return obj

    def run(self, text: str) -> ObjectFile:
        """Both passes; errors are left in ``self.log`` and the object is what assembled."""
        for origin in self.preprocessor.statements(text, self.filename):
            self.positions.setdefault((origin.file, origin.line), origin.position)
            self._run(origin, self._pass1)
        for name, origin, col in self.forward_refs:
            if name not in self.symbols:
                self.log.error(origin, f"no numeric label {name.split(':')[0]}: after this "
                                       "reference", col)
        for annotation, origin in self.open_gpdisp.items():
            self.log.error(origin, f"{annotation} has no matching ldi (a !gpdisp pair is "
                                   "ldih then ldi with the same number)")
        for emitter in self.emitters:
            self.here = (emitter.section, emitter.offset)
            self._run(emitter.origin, lambda _origin, e=emitter: e.emit())
        return self._object_file()

    def _run(self, origin: Origin, step: Callable[[Origin], None]) -> None:
        self.origin = origin
        try:
            step(origin)
        except StatementError as exc:
            self.log.error(origin, exc.message, exc.col)

    def _pass1(self, origin: Origin) -> None:
        labels_end = LEADING_LABELS.match(origin.text).end()
        word = origin.text[labels_end:].split(None, 1)[0].lower() \
            if origin.text[labels_end:].strip() else ""
        if word in RAW_DIRECTIVES:
            return
        if word == ".section":  # section names are not expressions: .note.GNU-stack
            self._pass1_labels(parse_statement(origin.text[:labels_end]))
            self._d_section(origin.text, labels_end + origin.text[labels_end:].index(word))
            return
        try:
            stmt = parse_statement(origin.text)
        except StatementError:  # still define the labels: no "undefined" errors follow
            self._pass1_labels(parse_statement(origin.text[:labels_end]))
            raise
        self._pass1_labels(stmt)
        if self.section.kind == NOLOAD and (stmt.name in EMITTING_DIRECTIVES or
                                            stmt.name not in self.directives):
            return  # the contents of debug information and notes are not needed
        for op in stmt.operands:
            if op.kind == "empty" and stmt.name not in ALIGN_DIRECTIVES:
                raise StatementError("missing operand", op.col)
        stmt = self._bind_references(stmt)
        self.here = (self.section, self._size(self.section))
        if stmt.name is None:
            return
        if stmt.name.startswith("."):
            handler = self.directives.get(stmt.name)
            if handler is None:
                raise StatementError(f"unknown directive {stmt.name}"
                                     f"{_did_you_mean(stmt.name, self.directives)}",
                                     stmt.name_col)
            handler(stmt)
        else:
            self._instruction(stmt)

    def _pass1_labels(self, stmt: Statement) -> None:
        for label in stmt.labels:
            self._define_label(label, self.origin)

    def _later(self, emit: Callable[[], None], offset: Optional[int] = None) -> None:
        """Queue ``emit`` for pass 2, at ``offset`` (default: the statement's location)."""
        at = self.here[1] if offset is None else offset
        self.emitters.append(_Emitter(self.section, at, self.origin, emit))

    # ---- symbols --------------------------------------------------------------------------
    def _define_label(self, label, origin: Origin) -> None:
        if label.numeric:
            number = int(label.name)
            count = self.numeric_defs.get(number, 0)
            self.numeric_defs[number] = count + 1
            name = f"{number}:{count}"
        else:
            name = label.name
            self._check_redefinition(name, label.col)
        self.symbols[name] = Symbol(name, self.section.name, self._size(self.section),
                                    source=self._source_line(label.col))

    def _check_redefinition(self, name: str, col: int) -> None:
        old = self.symbols.get(name)
        if old is not None and old.type != "equ":
            where = f" (first defined at {old.source.file}:{old.source.line})" \
                if old.source else ""
            raise StatementError(f"symbol {name} is already defined{where}", col)

    def _bind_references(self, stmt: Statement) -> Statement:
        """Resolve what depends on the statement's position: numeric label references, and
        (in instructions and data) ``.set`` symbols, which take their value at this point."""
        if not stmt.names:
            return stmt
        freeze = stmt.name is not None and (not stmt.name.startswith(".") or
                                            stmt.name in DATA_SIZES or stmt.name in FLOAT_FORMATS)

        def resolve(expr, op):
            if isinstance(expr, Sym) and freeze:
                sym = self.symbols.get(expr.name)
                return Num(sym.value) if sym and sym.type == "equ" and not sym.section else expr
            if isinstance(expr, LocalRef):
                count = self.numeric_defs.get(expr.number, 0)
                if expr.forward:
                    name = f"{expr.number}:{count}"
                    self.forward_refs.append((name, self.origin, op.col))
                    return Sym(name)
                if count == 0:
                    raise StatementError(f"no numeric label {expr.number}: before this "
                                         "reference", op.col)
                return Sym(f"{expr.number}:{count - 1}")
            if isinstance(expr, Unary):
                return Unary(expr.op, resolve(expr.arg, op))
            if isinstance(expr, Binary):
                return Binary(expr.op, resolve(expr.left, op), resolve(expr.right, op))
            if isinstance(expr, Paren):
                return Paren(resolve(expr.inner, op))
            return expr

        operands = tuple(
            replace(op, value=resolve(op.value, op),
                    base=resolve(op.base, op) if op.base is not None else None)
            if op.kind in ("expr", "mem") else op for op in stmt.operands)
        return replace(stmt, operands=operands)

    def _is_defined(self, name: str) -> bool:
        return name in self.symbols

    # ---- expressions ----------------------------------------------------------------------
    def _evaluate_text(self, text: str) -> int:
        """For the preprocessor (.if, .rept): an absolute expression known now."""
        stmt = parse_statement(".x " + text)
        if len(stmt.operands) != 1:
            raise StatementError("expected one expression")
        op = replace(stmt.operands[0], col=stmt.operands[0].col - 3)
        return self._absolute(op, strict=True)

    def _value(self, expr, col: int, strict: bool) -> Value:
        """Evaluate; ``strict``: every symbol must be defined already (pass 1)."""
        if isinstance(expr, Num):
            return Value(expr.value)
        if isinstance(expr, Float):
            return Value(expr.value)
        if isinstance(expr, Paren):
            return self._value(expr.inner, col, strict)
        if isinstance(expr, Reg):
            raise StatementError("a register is not allowed here", col)
        if isinstance(expr, Sym):
            return self._symbol_value(expr.name, col, strict)
        if isinstance(expr, Unary):
            arg = self._value(expr.arg, col, strict)
            if not arg.absolute:
                raise StatementError(f"cannot apply unary {expr.op} to an address", col)
            if expr.op == "~":
                return Value(~self._integer(arg.offset, col))
            return Value(-arg.offset)
        left = self._value(expr.left, col, strict)
        right = self._value(expr.right, col, strict)
        return self._binary(expr.op, left, right, col)

    def _symbol_value(self, name: str, col: int, strict: bool) -> Value:
        if name == ".":
            section, offset = self.here
            return Value(offset, section.name)
        sym = self.symbols.get(name)
        if sym is None and name in self.sections:  # a section's name: its start
            return Value(0, name)
        if name in self.weak and not strict:  # another object's definition may win
            return Value(0, symbol=name)
        if sym is None:
            if strict:
                raise StatementError(f"symbol {name} is not defined (here it must be defined "
                                     "before use)", col)
            return Value(0, symbol=name)
        return Value(sym.value, sym.section)

    def _binary(self, op: str, left: Value, right: Value, col: int) -> Value:
        if op == "+" and left.absolute != right.absolute:
            address, number = (right, left) if left.absolute else (left, right)
            return replace(address, offset=address.offset + self._integer(number.offset, col))
        if op == "-" and not left.absolute:
            if right.absolute:
                return replace(left, offset=left.offset - self._integer(right.offset, col))
            if left.section is not None and left.section == right.section:
                return Value(left.offset - right.offset)
            raise StatementError("cannot subtract addresses of different sections or of "
                                 "undefined symbols", col)
        if not (left.absolute and right.absolute):
            raise StatementError(f"operator {op} needs numbers, not addresses", col)
        a, b = left.offset, right.offset
        if op in "+-*/" and (isinstance(a, float) or isinstance(b, float)):
            if op == "/" and b == 0:
                raise StatementError("division by zero", col)
            return Value({"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0}[op])
        a, b = self._integer(a, col), self._integer(b, col)
        if op in "/%" and b == 0:
            raise StatementError("division by zero", col)
        if op in ("<<", ">>") and b < 0:
            raise StatementError("negative shift count", col)
        if op == "<<" and b > MAX_VALUE_BITS:     # before Python builds the number
            raise StatementError(f"shift count {b} is beyond {MAX_VALUE_BITS} bits", col)
        value = {
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: int(a / b), "%": lambda: a - b * int(a / b),  # C: truncate to 0
            "<<": lambda: a << b, ">>": lambda: a >> b,
            "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
        }[op]()
        if value.bit_length() > MAX_VALUE_BITS:   # e.g. squaring a value again and again
            raise StatementError(f"the value of this expression needs {value.bit_length()} "
                                 f"bits; expressions are limited to {MAX_VALUE_BITS}", col)
        return Value(value)

    @staticmethod
    def _integer(value, col: int) -> int:
        if isinstance(value, float):
            raise StatementError("a floating-point number is not allowed here", col)
        return value

    def _absolute(self, op: Operand, strict: bool = False, what: str = "a number") -> int:
        """An operand that must be an absolute integer."""
        if op.kind != "expr":
            raise StatementError(f"expected {what}, got {op.text!r}", op.col)
        value = self._value(op.value, op.col, strict)
        if not value.absolute:
            raise StatementError(f"expected {what}, got the address {op.text!r}", op.col)
        return self._integer(value.offset, op.col)

    @staticmethod
    def _check_range(value: int, low: int, high: int, what: str, col: int) -> int:
        if not low <= value <= high:
            raise StatementError(f"{what} {value} is out of range {low}..{high}", col)
        return value

    # ---- sections and bytes ---------------------------------------------------------------
    def _switch_section(self, name: str, kind: str) -> Section:
        section = self.sections.get(name)
        if section is None:
            section = self.sections[name] = Section(name, kind)
        elif section.kind != kind:
            raise StatementError(f"section {name} was declared with another kind "
                                 f"({section.kind})")
        self.section = section
        return section

    @staticmethod
    def _size(section: Section) -> int:
        return section.size if section.kind == BSS else len(section.data)

    def _reserve(self, count: int, fill: int = 0, col: Optional[int] = None) -> int:
        """Append ``count`` bytes of ``fill`` (nop words in code); returns their offset.
        ``col``: the operand that asked for the bytes (for errors)."""
        section = self.section
        offset = self._size(section)
        limit, why = MAX_SECTION_BYTES[section.kind]
        if offset + count > limit:
            raise StatementError(f"section {section.name} would grow to {offset + count} bytes, "
                                 f"more than the {limit} {why}", col)
        if fill and section.kind == TEXT:
            raise StatementError("code is padded with nop: no fill value in a code section",
                                 col)
        if section.kind == BSS:
            if fill:
                raise _nobits_error(section)
            section.size += count
        elif section.kind == TEXT and fill == 0 and count % 4 == 0 and offset % 4 == 0:
            section.data += NOP_WORD.to_bytes(4, "little") * (count // 4)
        else:
            section.data += bytes([fill & 0xFF]) * count
        return offset

    def _write(self, offset: int, data: bytes) -> None:
        section = self.here[0]
        if section.kind != BSS:
            section.data[offset:offset + len(data)] = data
        elif any(data):
            raise _nobits_error(section)

    def _relocate(self, offset: int, kind: str, value: Value, col: int,
                  annotation: str = "") -> None:
        self.relocations.append(Relocation(
            self.here[0].name, offset, kind, value.symbol or value.section or "",
            int(value.offset), annotation, target_section=value.section,
            source=self._source_line(col)))

    def _source_line(self, col: Optional[int] = None) -> SourceLine:
        origin = self.origin
        return SourceLine(origin.file, origin.line, origin.source,
                          origin.start + (col or 1))

    # ---- directives -----------------------------------------------------------------------
    def _directive_table(self) -> dict[str, Callable[[Statement], None]]:
        table: dict[str, Callable[[Statement], None]] = {
            ".align": self._d_align, ".p2align": self._d_align, ".balign": self._d_balign,
            ".skip": self._d_skip, ".space": self._d_skip, ".zero": self._d_skip,
            ".org": self._d_org, ".globl": self._d_globl, ".global": self._d_globl,
            ".weak": self._d_weak, ".type": self._d_type, ".size": self._d_size,
            ".ent": self._d_ent, ".frame": self._d_frame, ".set": self._d_set,
            ".equ": self._d_equ, ".local": self._d_local,
            ".comm": lambda stmt: self._d_comm(stmt, local=False),
            ".lcomm": lambda stmt: self._d_comm(stmt, local=True),
        }
        for name, kind in SECTION_DIRECTIVES.items():
            table[name] = lambda stmt, n=name, k=kind: self._d_simple_section(stmt, n, k)
        for name, size in DATA_SIZES.items():
            table[name] = lambda stmt, s=size: self._d_data(stmt, s)
        for name, fmt in FLOAT_FORMATS.items():
            table[name] = lambda stmt, f=fmt: self._d_float(stmt, f)
        for name, terminate in STRING_DIRECTIVES.items():
            table[name] = lambda stmt, z=terminate: self._d_string(stmt, z)
        for name in IGNORED_DIRECTIVES:
            table[name] = lambda stmt: None
        return table

    @staticmethod
    def _operands(stmt: Statement, low: int, high: int, usage: str) -> tuple[Operand, ...]:
        if not low <= len(stmt.operands) <= high:
            col = stmt.operands[high].col if len(stmt.operands) > high else stmt.name_col
            raise StatementError(f"{stmt.name} expects {usage}", col)
        return stmt.operands

    @staticmethod
    def _name(op: Operand) -> str:
        if op.kind == "expr" and isinstance(op.value, Sym):
            return op.value.name
        if op.kind == "str":
            return op.value.decode()
        raise StatementError(f"expected a name, got {op.text!r}", op.col)

    def _d_simple_section(self, stmt: Statement, name: str, kind: str) -> None:
        self._operands(stmt, 0, 1, "at most a subsection number")
        self._switch_section(name, kind)

    def _d_section(self, text: str, at: int) -> None:
        """``.section name[, "flags"[, @type[, ...]]]`` from the text after ``at`` (0-based
        offset of ``.section``); further arguments (entity size, group) are ignored."""
        args = text[at + len(".section"):]
        parts = split_arguments(args)
        name = parts[0].strip('"') if parts else ""
        if not _SECTION_NAME.fullmatch(name):
            name_col = len(text) - len(args.lstrip()) + 1
            raise StatementError('.section expects a section name, flags and type: '
                                 '.section .ldm, "aw", @progbits', name_col)
        flags = parts[1].strip('"') if len(parts) > 1 else ""
        type_ = parts[2].lstrip("@%").strip('"') if len(parts) > 2 else ""
        self._switch_section(name, section_kind(name, flags, type_))

    def _d_align(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 1, 3, "a power of two exponent: .align 3 (= 8 bytes)")
        exponent = self._check_range(self._absolute(ops[0], True), 0, 16, "alignment exponent",
                                     ops[0].col)
        self._align(1 << exponent, ops[1:])

    def _d_balign(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 1, 3, "a byte alignment: .balign 8")
        boundary = self._absolute(ops[0], True)
        if boundary <= 0 or boundary & (boundary - 1):
            raise StatementError(f"alignment {boundary} is not a power of two", ops[0].col)
        self._align(boundary, ops[1:])

    def _align(self, boundary: int, rest: tuple[Operand, ...]) -> None:
        """Pad with ``fill`` (nop in code) unless that takes more than ``max`` bytes (GNU
        ``.p2align n, fill, max``; either may be empty)."""
        fill_op, max_op = ([None if op.kind == "empty" else op for op in rest] + [None] * 2)[:2]
        if fill_op is not None and self.section.kind == TEXT:
            raise StatementError("code is padded with nop: no fill value in a code section",
                                 fill_op.col)
        padding = -self._size(self.section) % boundary
        if max_op is not None and padding > self._absolute(max_op, True):
            return
        self.section.align = max(self.section.align, boundary)
        self._reserve(padding, self._absolute(fill_op, True) if fill_op else 0)

    def _d_skip(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 1, 2, "a byte count and an optional fill byte")
        count = self._absolute(ops[0], True)
        if count < 0:
            raise StatementError(f"{stmt.name} count must be >= 0, got {count}", ops[0].col)
        self._reserve(count, self._absolute(ops[1], True) if len(ops) > 1 else 0, ops[0].col)

    def _d_org(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 1, 2, "an offset in the current section")
        value = self._value(ops[0].value, ops[0].col, True) if ops[0].kind == "expr" else None
        if value is None or not (value.absolute or value.section == self.section.name):
            raise StatementError(".org needs a number or an address in this section",
                                 ops[0].col)
        gap = self._integer(value.offset, ops[0].col) - self._size(self.section)
        if gap < 0:
            raise StatementError(f".org cannot move backwards (to {value.offset:#x}, already "
                                 f"at {self._size(self.section):#x})", ops[0].col)
        self._reserve(gap, self._absolute(ops[1], True) if len(ops) > 1 else 0, ops[0].col)

    def _d_globl(self, stmt: Statement) -> None:
        for op in self._operands(stmt, 1, 1 << 16, "one or more symbol names"):
            self.globals.add(self._name(op))

    def _d_local(self, stmt: Statement) -> None:
        for op in self._operands(stmt, 1, 1 << 16, "one or more symbol names"):
            self.declared_local.add(self._name(op))

    def _d_comm(self, stmt: Statement, local: bool) -> None:
        """``.comm name, size[, align]`` (``.lcomm``, or after ``.local name``: a local one):
        ``size`` zero bytes at ``align`` (bytes, default COMMON_ALIGN) in main memory's
        COMMON_SECTION. A common symbol is weak [choice]: several objects may declare it, the
        first declaration (or a strong definition) counts."""
        ops = self._operands(stmt, 2, 3, "a name, a size and an optional byte alignment: "
                                         ".comm x, 64, 8")
        name = self._name(ops[0])
        size = self._absolute(ops[1], True)
        align = self._absolute(ops[2], True) if len(ops) > 2 else COMMON_ALIGN
        if size < 0:
            raise StatementError(f"{stmt.name} size must be >= 0, got {size}", ops[1].col)
        if align <= 0 or align & (align - 1):
            raise StatementError(f"alignment {align} is not a power of two", ops[2].col)
        self._check_redefinition(name, ops[0].col)
        outer = self.section
        self._switch_section(COMMON_SECTION, DATA)
        try:
            self._align(align, ())
            self.symbols[name] = Symbol(name, COMMON_SECTION, self._size(self.section),
                                        type="object", size=size,
                                        source=self._source_line(ops[0].col))
            self._reserve(size, col=ops[1].col)
        finally:
            self.section = outer
        if not local and name not in self.declared_local:
            self.weak.add(name)

    def _d_weak(self, stmt: Statement) -> None:
        for op in self._operands(stmt, 1, 1 << 16, "one or more symbol names"):
            self.weak.add(self._name(op))

    def _symbol_attribute(self, op: Operand, **changes) -> None:
        """Set attributes of a symbol when pass 2 knows every label."""
        name = self._name(op)

        def apply():
            if name not in self.symbols:
                return  # an external symbol: its defining object says what it is
            self.symbols[name] = replace(self.symbols[name], **{
                key: value() if callable(value) else value for key, value in changes.items()})
        self._later(apply)

    def _d_type(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 2, 2, "a symbol and a type: .type f, @function")
        kind = ops[1].value if ops[1].kind == "type" else self._name(ops[1])
        types = {"function": "func", "object": "object", "tls_object": "object",
                 "notype": "notype"}
        if kind.lstrip("%@") not in types:
            raise StatementError(f"unknown symbol type {kind} ({', '.join(types)})",
                                 ops[1].col)
        self._symbol_attribute(ops[0], type=types[kind.lstrip("%@")])

    def _d_size(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 2, 2, "a symbol and a size: .size f, .-f")
        self._symbol_attribute(ops[0], size=lambda: self._absolute(ops[1]))

    def _d_ent(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 1, 2, "a function name")
        self._symbol_attribute(ops[0], type="func")

    def _d_frame(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 3, 4, "frame register, size, return register: "
                                         ".frame $30, 64, $26, 0")
        size = self._absolute(ops[1], True, "a frame size")
        if size < 0:
            raise StatementError(f"a frame size is a number of bytes (>= 0), got {size}",
                                 ops[1].col)
        self.stack_bytes = max(self.stack_bytes, size)

    def _d_set(self, stmt: Statement) -> None:
        if len(stmt.operands) == 1:  # assembler options: noreorder, noat, volatile, ...
            self._name(stmt.operands[0])
            return
        self._d_equ(stmt)

    def _d_equ(self, stmt: Statement) -> None:
        ops = self._operands(stmt, 2, 2, "a name and a value: .equ N, 64")
        name = self._name(ops[0])
        self._check_redefinition(name, ops[0].col)
        if ops[1].kind != "expr":
            raise StatementError(f"expected a value, got {ops[1].text!r}", ops[1].col)
        value = self._value(ops[1].value, ops[1].col, True)
        self.symbols[name] = Symbol(name, value.section, self._integer(value.offset, ops[1].col),
                                    type="equ", source=self._source_line(ops[0].col))

    def _d_data(self, stmt: Statement, size: int) -> None:
        for op in stmt.operands:
            offset = self._reserve(size)
            self._later(lambda op=op, offset=offset: self._emit_datum(op, offset, size), offset)

    def _emit_datum(self, op: Operand, offset: int, size: int) -> None:
        if op.kind != "expr":
            raise StatementError(f"expected a number or an address, got {op.text!r}", op.col)
        value = self._value(op.value, op.col, False)
        number = self._integer(value.offset, op.col)
        if not value.absolute:
            if size not in (4, 8):
                raise StatementError(f"an address needs 4 or 8 bytes (.word/.quad), not {size}",
                                     op.col)
            self._relocate(offset, f"abs{size * 8}", value, op.col)
            number = 0
        low, high = -(1 << (8 * size - 1)), (1 << (8 * size)) - 1
        self._check_range(number, low, high, f"{size}-byte value", op.col)
        self._write(offset, (number & ((1 << 8 * size) - 1)).to_bytes(size, "little"))

    def _d_float(self, stmt: Statement, fmt: str) -> None:
        for op in stmt.operands:
            offset = self._reserve(struct.calcsize(fmt))
            self._later(lambda op=op, offset=offset: self._write(
                offset, self._pack_float(fmt, self._float(op), op.col)), offset)

    def _float(self, op: Operand) -> float:
        value = self._value(op.value, op.col, False) if op.kind == "expr" else None
        if value is None or not value.absolute:
            raise StatementError(f"expected a floating-point number, got {op.text!r}", op.col)
        return float(value.offset)

    @staticmethod
    def _pack_float(fmt: str, value: float, col: int) -> bytes:
        try:
            return struct.pack(fmt, value)
        except OverflowError:
            raise StatementError(f"{value!r} is beyond the range of binary32 (at most "
                                 f"{FLOAT32_MAX!r} in magnitude)", col) from None

    def _d_string(self, stmt: Statement, terminate: bool) -> None:
        for op in stmt.operands:
            if op.kind != "str":
                raise StatementError(f"expected a string, got {op.text!r}", op.col)
            data = op.value + (b"\0" if terminate else b"")
            offset = self._reserve(len(data))
            self._later(lambda data=data, offset=offset: self._write(offset, data), offset)

    # ---- instructions ---------------------------------------------------------------------
    def _instruction(self, stmt: Statement) -> None:
        if self.section.kind != TEXT:
            raise StatementError(f"instruction {stmt.name} outside a code section (in "
                                 f"{self.section.name}; use .text)", stmt.name_col)
        instr, operands = self._expand_pseudo(stmt)
        if len(operands) != len(instr.operands):
            raise StatementError(self._usage(instr, len(operands)),
                                 operands[len(instr.operands)].col
                                 if len(operands) > len(instr.operands) else stmt.name_col)
        annotation = self._annotation(stmt, instr)
        offset = self._reserve(4)
        self.lines[(self.section.name, offset)] = self._source_line(stmt.name_col)
        if self._needs_pair(instr, operands, annotation):
            self._reserve(4)
            self.lines[(self.section.name, offset + 4)] = self._source_line(stmt.name_col)
            self._later(lambda: self._emit_pair(operands, offset, annotation))
        else:
            self._later(lambda: self._emit(instr, operands, offset, annotation))

    def _expand_pseudo(self, stmt: Statement) -> tuple[Instr, tuple[Operand, ...]]:
        name, operands = stmt.name, stmt.operands
        real = BY_NAME.get(name)
        if real is not None and len(operands) == len(real.operands):
            return real, operands
        if real is not None and real.operands[-1:] == ("hint",) and \
                len(operands) == len(real.operands) - 1:  # the jump hint is optional: 0
            return real, operands + (Operand("expr", Num(0), stmt.name_col, "0"),)
        if name == "mov" and operands and not self._is_register(operands[0]):
            # mov imm, rc -> ldi rc, imm
            return BY_NAME["ldi"], tuple(reversed(operands))
        template = PSEUDO_TEMPLATES.get(name)
        if template is not None:
            params, expansion = template
            if len(operands) != len(params):
                raise StatementError(f"{name} expects {_count(len(params), 'operand')}: "
                                     f"{PSEUDO_INSTRUCTIONS[name].split('->')[0].strip()}",
                                     stmt.name_col)
            actual = dict(zip(params, operands))
            return BY_NAME[expansion.name], tuple(
                actual[op.value.name] if op.kind == "expr" and isinstance(op.value, Sym)
                and op.value.name in actual else replace(op, col=stmt.name_col)
                for op in expansion.operands)
        if real is None:
            known = MNEMONICS + sorted(self.preprocessor.macros)
            raise StatementError(f"unknown instruction {name}{_did_you_mean(name, known)}",
                                 stmt.name_col)
        return real, operands

    @staticmethod
    def _usage(instr: Instr, got: int) -> str:
        return (f"{instr.name} takes {_count(len(instr.operands), 'operand')}, got {got}; "
                f"expected: {instr.name} {instr.syntax}".rstrip())

    def _annotation(self, stmt: Statement, instr: Instr) -> str:
        """Check the relocation annotation (at most one) against the instruction."""
        if not stmt.annotations:
            return ""
        if len(stmt.annotations) > 1:
            raise StatementError("at most one relocation annotation per instruction",
                                 stmt.annotations[1][1])
        text, col = stmt.annotations[0]
        match = _ANNOTATION.match(text)
        kind, number = match.group(1), match.group(2) or ""
        if kind == "gpdisp":
            if instr.name == "ldih" and text not in self.open_gpdisp:
                self.open_gpdisp[text] = self.origin
            elif instr.name == "ldi" and self.open_gpdisp.pop(text, None):
                pass
            else:
                raise StatementError(f"{text} must be on an ldih followed by an ldi with the "
                                     "same number", col)
        elif kind == "literal":
            if instr.cls != "load" and instr.name != "ldi":
                raise StatementError(f"{text} must be on a load (ldl ra, sym($gp))", col)
            self.literal_numbers.add(number)
        elif kind == "samegp":   # a direct call of a function of this gp: nothing to do
            if instr.name != "bsr":
                raise StatementError(f"{text} must be on a bsr (a direct call)", col)
        elif kind.startswith("lituse_"):
            if number not in self.literal_numbers:
                raise StatementError(f"{text} has no earlier !literal!{number}", col)
        elif kind == "io":
            if instr.name != "ldl":
                raise StatementError(f"{text} must be on an ldl (it loads the address an I/O "
                                     "slot holds: ldl $r, slot($io_base) !io)", col)
        elif kind in _RELATIVE_KINDS:
            if instr.fmt != "mem":
                raise StatementError(f"{text} must be on a memory-format instruction", col)
        else:
            raise StatementError(f"unsupported relocation annotation {text} (supported: "
                                 "!gpdisp, !literal, !lituse_*, !samegp, !gprel, "
                                 "!gprelhigh, !gprellow, !tprel, !tprelhi, !tprello, !seg, "
                                 "!io)", col)
        return text

    def _needs_pair(self, instr: Instr, operands, annotation: str) -> bool:
        """``ldi`` of a value beyond 16 bits or of an address, and ``!literal`` loads,
        become an ldih+ldi pair (decided now: sizes are fixed in pass 1)."""
        if annotation.startswith("!literal"):
            return True
        if instr.name == "ldi" and annotation == "!seg":    # any 32-bit offset, unless a first
            return not self._seg_offset_fits(operands[1])  # link showed 16 bits are enough
        if instr.name != "ldi" or annotation:
            return False
        disp, _ = self._memory(operands[1])
        try:
            value = self._value(disp, operands[1].col, True)
        except StatementError:
            return True  # defined later: an address
        return not (value.absolute and DISP16[0] <= value.offset <= DISP16[1])

    def _seg_offset_fits(self, operand: Operand) -> bool:
        """Whether the layout of a first link (build_package) bounds the final segment offset
        of ``operand``'s displacement within 16 bits: a global symbol's offset plus the addend;
        for a local target of this object, the whole segment's size plus its offset in this
        object's piece bound it."""
        if self.segment_layout is None:
            return False
        disp = self._memory(operand)[0]
        try:    # a symbol not defined yet is another object's (or a later one of this)
            value = self._value(disp, operand.col, False)
        except StatementError:
            return False
        names = set(_symbol_names(disp))
        name = names.pop() if len(names) == 1 else None
        offsets = self.segment_layout.offsets
        if value.symbol is not None:
            final = offsets[value.symbol] + value.offset if value.symbol in offsets else None
        elif name in self.globals and name in offsets \
                and self.symbols[name].section == value.section:
            final = offsets[name] + value.offset - self.symbols[name].value
        else:
            size = self.segment_layout.sizes.get(value.section)
            final = None if size is None or value.offset < 0 else size + value.offset
        return final is not None and DISP16[0] <= final <= DISP16[1]

    def _is_register(self, op: Operand) -> bool:
        return self._register_number(op) is not None

    @staticmethod
    def _register_number(op: Operand) -> Optional[int]:
        if op.kind != "expr":
            return None
        if isinstance(op.value, Reg):
            return op.value.number
        if isinstance(op.value, Sym):
            return parse_register(op.value.name)
        return None

    def _register(self, op: Operand, template: str, instr: Instr) -> int:
        number = self._register_number(op)
        if number is None:
            self._check_not_a_misspelt_register(op)
            raise StatementError(self._expected(op, template, instr), op.col)
        return number

    def _check_not_a_misspelt_register(self, op: Operand) -> None:
        """``$sq`` where a register may go: a register name gone wrong, unless it is a
        defined ``$`` symbol."""
        if op.kind == "expr" and isinstance(op.value, Sym) and op.value.name.startswith("$") \
                and op.value.name not in self.symbols:
            raise StatementError(f"unknown register {op.value.name} ({REGISTER_HELP})", op.col)

    @staticmethod
    def _expected(op: Operand, template: str, instr: Instr) -> str:
        return (f"expected {EXPECTED[template]} for operand '{template}', got {op.text!r} "
                f"(syntax: {instr.name} {instr.syntax})")

    def _memory(self, op: Operand):
        """(displacement expression, base operand or None) of a disp(rb) operand."""
        if op.kind == "mem":
            return op.value, Operand("expr", op.base, op.col, op.text)
        if op.kind == "expr" and isinstance(op.value, Paren) and \
                self._register_number(Operand("expr", op.value.inner, 0, "")) is not None:
            return Num(0), Operand("expr", op.value.inner, op.col, op.text)
        if op.kind == "expr" and not self._is_register(op):
            return op.value, None
        raise StatementError(f"expected a memory operand disp(rb), got {op.text!r}", op.col)

    def _fields(self, instr: Instr, operands, offset: int, annotation: str):
        """Field values and literal flag for ``instr``; queues relocations at ``offset``."""
        values: dict[str, int] = {}
        literal = False
        for template, op in zip(instr.operands, operands):
            if template in ("ra", "rb", "rc", "r3"):
                values[template] = self._register(op, template, instr)
            elif register_or_immediate(template):
                register, immediate = register_or_immediate(template)
                if self._is_register(op):
                    values[register] = self._register_number(op)
                else:
                    self._check_not_a_misspelt_register(op)
                    literal = True
                    what = "literal operand" if immediate == "lit" else f"operand '{immediate}'"
                    values.update(split_immediate(immediate, self._check_range(self._absolute(
                        op, what=EXPECTED[template]), *IMMEDIATE_RANGES[immediate], what,
                        op.col)))
            elif template == "disp(rb)":
                disp, base = self._memory(op)
                values["rb"] = ZERO_REG if base is None else self._register(base, "rb", instr)
                values["disp16"] = self._displacement(instr, disp, op, offset, annotation)
            elif template == "(rb)":
                is_paren = op.kind == "expr" and isinstance(op.value, Paren)
                base = self._memory(op)[1] if is_paren else None
                if base is None:
                    raise StatementError(self._expected(op, template, instr), op.col)
                values["rb"] = self._register(base, "rb", instr)
            elif template == "label":
                target = self._value(op.value, op.col, False) if op.kind == "expr" else None
                if target is None:
                    raise StatementError(self._expected(op, template, instr), op.col)
                self._relocate(offset, "branch21", target, op.col)
                values["disp21"] = 0
            elif template == "hint" and op.kind == "expr" and \
                    not (hint := self._value(op.value, op.col, False)).absolute:
                # a jump's hint naming its target (the compiler's `call $26,($27),printf`):
                # the linker fills in the target's word displacement (docs/asm.md)
                self._relocate(offset, "hint16", hint, op.col)
                values["disp16"] = 0
            else:  # lane, n, mask, csr, truth, hint
                values.update(split_immediate(template, self._check_range(
                    self._absolute(op, what=EXPECTED[template]), *IMMEDIATE_RANGES[template],
                    f"operand '{template}'", op.col)))
        return values, literal

    def _displacement(self, instr: Instr, disp, op: Operand, offset: int,
                      annotation: str) -> int:
        value = self._value(disp, op.col, False)
        kind = _ANNOTATION.match(annotation).group(1) if annotation else ""
        if kind == "gpdisp":
            # The written displacement (0, or the compiler's 0+4) is an addend of the
            # hardware's pc-relative gp computation; the pair loads the absolute _gp.
            if not value.absolute:
                raise StatementError("the displacement of a !gpdisp instruction must be a "
                                     "number", op.col)
            part = "hi16" if instr.name == "ldih" else "lo16"
            self._relocate(offset, part, Value(0, symbol=GP_SYMBOL), op.col, annotation)
            return 0
        if kind in ("seg", "io") and value.absolute:
            raise StatementError(f"{annotation} needs a symbol of a segment, got the number "
                                 f"{value.offset}", op.col)
        if kind in _RELATIVE_KINDS or not value.absolute:
            self._relocate(offset, _RELATIVE_KINDS.get(kind, "disp16"), value, op.col,
                           annotation)
            return 0
        return self._check_range(self._integer(value.offset, op.col), *DISP16,
                                 "displacement", op.col)

    def _emit(self, instr: Instr, operands, offset: int, annotation: str) -> None:
        if annotation.startswith("!gpdisp") and instr.name == "ldih":
            # the pair loads the absolute _gp, whatever the written base (docs/asm.md)
            disp, _ = self._memory(operands[1])
            operands = (operands[0], replace(operands[1], kind="mem", value=disp,
                                             base=Reg(ZERO_REG)))
        values, literal = self._fields(instr, operands, offset, annotation)
        self._write(offset, encode(instr, values, literal).to_bytes(4, "little"))

    def _emit_pair(self, operands, offset: int, annotation: str) -> None:
        """ldih rc, hi(value)(rb); ldi rc, lo(value)(rc) (!seg: value is the offset from the
        segment's base rb)."""
        ldi, ldih = BY_NAME["ldi"], BY_NAME["ldih"]
        rc = self._register(operands[0], "ra", ldi)
        disp, base = self._memory(operands[1])
        segment = annotation == "!seg"
        rb = self._register(base, "rb", ldi) if base is not None and (segment or not annotation) \
            else ZERO_REG
        value = self._value(disp, operands[1].col, False)
        if segment and value.absolute:
            raise StatementError(f"{annotation} needs a symbol of a segment, got the number "
                                 f"{value.offset}", operands[1].col)
        if value.absolute:
            hi, lo = split_hi_lo(self._integer(value.offset, operands[1].col), operands[1].col)
        else:
            hi = lo = 0
            prefix = "seg_" if segment else ""
            self._relocate(offset, prefix + "hi16", value, operands[1].col, annotation)
            self._relocate(offset + 4, prefix + "lo16", value, operands[1].col, annotation)
        self._write(offset, encode(ldih, {"ra": rc, "rb": rb, "disp16": hi}).to_bytes(4, "little"))
        self._write(offset + 4, encode(ldi, {"ra": rc, "rb": rc, "disp16": lo})
                    .to_bytes(4, "little"))

    # ---- result ---------------------------------------------------------------------------
    def _object_file(self) -> ObjectFile:
        for section in self.sections.values():
            section.size = self._size(section)
        symbols = {}
        for name, sym in self.symbols.items():
            if ":" in name:
                continue  # numeric local labels are relocated by section, never exported
            binding = "weak" if name in self.weak else \
                "global" if name in self.globals else "local"
            symbols[name] = replace(sym, binding=binding,
                                    type="notype" if sym.type == "equ" else sym.type)
        return ObjectFile(self.filename, self.sections, symbols, self.relocations, self.lines,
                          self.stack_bytes, self.weak)



def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' if number != 1 else ''}"


def _nobits_error(section: Section) -> StatementError:
    return StatementError(f"{section.name} holds no data (nobits); only zeros can go there")


def _did_you_mean(name: str, candidates) -> str:
    """The candidates fewest edits away (a transposition is one edit: vmda -> vmad), the most
    similar spelling first, equally good ones all named (ldd -> fldd, ldde or vldd); nothing if
    it takes more edits than a third of the letters."""
    limit = max(1, len(name) // 3)
    scored = sorted((edit_distance(name, c), -difflib.SequenceMatcher(None, name, c).ratio(), c)
                    for c in candidates if abs(len(c) - len(name)) <= limit)
    if not scored or scored[0][0] > limit:
        return ""
    best = [c for distance, ratio, c in scored if (distance, ratio) == scored[0][:2]][:3]
    names = best[0] if len(best) == 1 else f"{', '.join(best[:-1])} or {best[-1]}"
    return f" (did you mean {names}?)"


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and swaps of
    adjacent letters, each one edit (Damerau-Levenshtein without re-editing a swapped pair)."""
    previous, row = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before, previous, row = previous, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
    return row[len(b)]
