"""The statement grammar (lark, LALR) and the syntax tree the assembler works on.

One statement is ``label: ... name operand, operand, ... !annotation!N``; comments and ``;``
separators are removed before parsing (``split_statements``). Expressions use C operator
precedence. A name in operand position stays a ``Sym`` here; whether it is a register alias
(``sp``, ``a0``) or a symbol is decided later from the operand template. A ``$`` name is a
register if it names one (``$5``, ``$f5``, ``$sp``) and a symbol otherwise (the compiler's
``$ng..f`` labels).
"""
from __future__ import annotations

import ast
import functools
import re
import warnings
from dataclasses import dataclass
from typing import Optional, Union

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

from ..isa import NUM_REGS, REG_ALIASES
from .diagnostics import StatementError

GRAMMAR = r"""
start: label* (statement | assignment)?
label: (NAME | INT | DOLLAR_NAME) ":"
assignment: NAME "=" expr
statement: NAME operands? ANNOTATION*
operands: operand (COMMA operand?)*
operand: expr                   -> op_expr
       | expr "(" expr ")"      -> op_mem
       | STRING                 -> op_str
       | "@" NAME               -> op_type

?expr: bor
?bor: bxor | bor "|" bxor       -> or_
?bxor: band | bxor "^" band     -> xor
?band: shift | band "&" shift   -> and_
?shift: sum | shift "<<" sum    -> shl
      | shift ">>" sum          -> shr
?sum: product | sum "+" product -> add
    | sum "-" product           -> sub
?product: unary | product "*" unary -> mul
        | product "/" unary     -> div
        | product "%" unary     -> mod
?unary: atom | "-" unary        -> neg
      | "+" unary               -> pos
      | "~" unary               -> inv
?atom: INT                      -> int_
     | FLOAT                    -> float_
     | CHAR                     -> char
     | NAME                     -> sym
     | DOLLAR_NAME              -> dollar
     | "(" expr ")"             -> paren

NAME: /[A-Za-z_.][A-Za-z0-9_.$]*/
INT: /0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+[bf]?/
FLOAT.2: /[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
CHAR: /'(\\.|[^\\'])'/
DOLLAR_NAME: /\$[A-Za-z0-9_.$]+/
COMMA: ","
STRING: /"(\\.|[^\\"])*"/
ANNOTATION: /![A-Za-z_]+(![0-9]+)?/
%ignore /[ \t\f\r]+/
"""

_PARSER = Lark(GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=False)
# Deeper syntax trees are refused: the tree is transformed and evaluated recursively (about two
# Python frames per level), and no real expression comes near this.
MAX_TREE_DEPTH = 200
REGISTER_HELP = "registers are $0..$31, $f0..$f31 and software names like $sp, $a0"
_NUMBERED_REGISTER = re.compile(r"\$f?[0-9]+", re.IGNORECASE)


# ---- syntax tree ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Float:
    value: float


@dataclass(frozen=True)
class Sym:
    name: str


@dataclass(frozen=True)
class LocalRef:
    """``1b`` / ``1f``: the nearest numeric label ``1:`` backward / forward."""
    number: int
    forward: bool


@dataclass(frozen=True)
class Reg:
    number: int


@dataclass(frozen=True)
class Unary:
    op: str
    arg: "Expr"


@dataclass(frozen=True)
class Binary:
    op: str
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class Paren:
    """A parenthesised expression; kept so ``(rb)`` can be told from ``rb``."""
    inner: "Expr"


Expr = Union[Num, Float, Sym, LocalRef, Reg, Unary, Binary, Paren]


@dataclass(frozen=True)
class Operand:
    kind: str                  # "expr", "mem" (disp(base)), "str", "type" (@name)
    value: object              # Expr, str (for "str"/"type")
    col: int                   # 1-based column in the statement text
    text: str                  # the operand as written
    base: Optional[Expr] = None  # "mem": the base register expression


@dataclass(frozen=True)
class Label:
    name: str                  # symbol name, or the digits of a numeric label
    numeric: bool
    col: int


@dataclass(frozen=True)
class Statement:
    labels: tuple[Label, ...]
    name: Optional[str]        # mnemonic or directive (lower case), None for a label-only line
    name_col: int
    operands: tuple[Operand, ...]
    annotations: tuple[tuple[str, int], ...]  # (text, col)
    names: bool = False        # an operand mentions a symbol or numeric label (``1b``)


def parse_register(text: str) -> Optional[int]:
    """``$5``, ``$f5``, ``$sp``, ``sp`` -> register number; None if not a register name."""
    name = text[1:] if text.startswith("$") else text
    name = name.lower()
    if text.startswith("$"):
        digits = name[1:] if name.startswith("f") and name[1:].isdigit() else name
        if digits.isdigit():
            number = int(digits)
            return number if number < NUM_REGS else None
    return REG_ALIASES.get(name)


def parse_int(text: str) -> Union[int, LocalRef]:
    lower = text.lower()
    if lower.startswith("0x"):
        return int(lower, 16)
    if lower.startswith("0b") and len(lower) > 2:
        return int(lower[2:], 2)
    if lower[-1] in "bf":
        return LocalRef(int(lower[:-1]), lower[-1] == "f")
    return int(lower, 10)


def unquote(token: str, col: Optional[int] = None) -> bytes:
    """A string or character literal (C escapes) as bytes; non-ASCII characters as UTF-8
    (GNU as copies the source bytes, which are UTF-8 here)."""
    escaped = "".join(c if c.isascii() else "".join(f"\\x{b:02x}" for b in c.encode())
                      for c in token)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # Python only warns about an unknown escape (\q)
            return ast.literal_eval("b" + escaped)
    except (SyntaxError, ValueError, Warning):
        raise StatementError(f"bad escape sequence in {token} (C escapes: \\n \\t \\\\ "
                             "\\\" \\xHH \\NNN ...)", col) from None


class _Build(Transformer):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def _operand(self, meta, kind, value, base=None):
        return Operand(kind, value, meta.column, self.text[meta.start_pos:meta.end_pos], base)

    @v_args(meta=True)
    def op_expr(self, meta, children):
        return self._operand(meta, "expr", children[0])

    @v_args(meta=True)
    def op_mem(self, meta, children):
        return self._operand(meta, "mem", children[0], children[1])

    @v_args(meta=True)
    def op_str(self, meta, children):
        return self._operand(meta, "str", unquote(children[0], meta.column))

    @v_args(meta=True)
    def op_type(self, meta, children):
        return self._operand(meta, "type", str(children[0]))

    def operands(self, children):
        """Operands and COMMA tokens; a comma not followed by an operand leaves an "empty"
        operand (``.p2align 4,,15``)."""
        out, empty_at = [], None
        for child in children:
            if isinstance(child, Token):
                if empty_at is not None:
                    out.append(Operand("empty", None, empty_at, ""))
                empty_at = child.column + 1
            else:
                out.append(child)
                empty_at = None
        if empty_at is not None:
            out.append(Operand("empty", None, empty_at, ""))
        return tuple(out)

    def label(self, children):
        tok = children[0]
        if tok.type == "DOLLAR_NAME" and parse_register(str(tok)) is not None:
            raise StatementError(f"register name {tok} cannot be a label", tok.column)
        return Label(str(tok), tok.type == "INT", tok.column)

    def statement(self, children):
        name = children[0]
        operands = next((c for c in children[1:] if isinstance(c, tuple)), ())
        notes = tuple((str(t), t.column) for t in children[1:] if isinstance(t, Token))
        return Statement((), str(name).lower(), name.column, operands, notes)

    @v_args(meta=True)
    def assignment(self, meta, children):
        """``name = expr`` is ``.set name, expr``."""
        name, value = children
        text = self.text[meta.start_pos:meta.end_pos]
        value_at = text.index("=") + 1
        value_at += len(text[value_at:]) - len(text[value_at:].lstrip())
        operand = Operand("expr", value, meta.column + value_at, text[value_at:])
        return Statement((), ".set", name.column,
                         (Operand("expr", Sym(str(name)), name.column, str(name)), operand), ())

    def start(self, children):
        labels = tuple(c for c in children if isinstance(c, Label))
        stmt = next((c for c in children if isinstance(c, Statement)), None)
        if stmt is None:
            return Statement(labels, None, 0, (), ())
        return Statement(labels, stmt.name, stmt.name_col, stmt.operands, stmt.annotations,
                         _mentions_names(stmt.operands))

    # expressions
    def int_(self, children):
        value = parse_int(str(children[0]))
        return value if isinstance(value, LocalRef) else Num(value)

    def float_(self, children):
        return Float(float(children[0]))

    def char(self, children):
        tok = children[0]
        value = unquote(str(tok), tok.column)
        if len(value) != 1:
            raise StatementError(f"character literal {tok} is not one byte", tok.column)
        return Num(value[0])

    def sym(self, children):
        return Sym(str(children[0]))

    def dollar(self, children):
        """``$N``/``$fN``/``$sp`` is a register; any other ``$name`` a symbol."""
        tok = children[0]
        number = parse_register(str(tok))
        if number is not None:
            return Reg(number)
        if _NUMBERED_REGISTER.fullmatch(str(tok)):
            raise StatementError(f"unknown register {tok} ({REGISTER_HELP})", tok.column)
        return Sym(str(tok))

    def paren(self, children):
        return Paren(children[0])

    def neg(self, c): return Unary("-", c[0])
    def pos(self, c): return c[0]
    def inv(self, c): return Unary("~", c[0])
    def or_(self, c): return Binary("|", *c)
    def xor(self, c): return Binary("^", *c)
    def and_(self, c): return Binary("&", *c)
    def shl(self, c): return Binary("<<", *c)
    def shr(self, c): return Binary(">>", *c)
    def add(self, c): return Binary("+", *c)
    def sub(self, c): return Binary("-", *c)
    def mul(self, c): return Binary("*", *c)
    def div(self, c): return Binary("/", *c)
    def mod(self, c): return Binary("%", *c)


@functools.lru_cache(maxsize=1 << 16)  # unrolled code repeats statements; results are immutable
def parse_statement(text: str) -> Statement:
    """Parse one statement (no comments, no ``;``). Raises StatementError with a column."""
    try:
        tree = _PARSER.parse(text)
        _check_depth(tree)
        return _Build(text).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, StatementError):
            raise exc.orig_exc from None
        raise
    except UnexpectedEOF:
        raise StatementError("unexpected end of statement", len(text) + 1) from None
    except UnexpectedCharacters as exc:
        raise StatementError(_unexpected(text, exc.pos_in_stream), exc.column) from None
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        if token is None or token.type == "$END":
            raise StatementError("unexpected end of statement", len(text.rstrip()) + 1) from None
        raise StatementError(f"unexpected {str(token)!r}", token.column) from None


def _unexpected(text: str, at: int) -> str:
    """What is wrong at ``text[at]``, a character the grammar cannot take there: a quote that
    opens no string or character literal it can finish is named as such."""
    char = text[at]
    if char == '"':
        return 'unterminated string: no closing " on this line'
    if char == "'":
        literal = re.match(r"'((?:\\.|[^\\'])*)'", text[at:])
        if literal is None:
            return "unterminated character literal: no closing ' on this line"
        return (f"a character literal holds one character, got '{literal.group(1)}' (a "
                f'string is written "...")')
    return f"unexpected character {char!r}"


def _mentions_names(operands: tuple[Operand, ...]) -> bool:
    stack = [e for op in operands if op.kind in ("expr", "mem") for e in (op.value, op.base)]
    while stack:
        expr = stack.pop()
        if isinstance(expr, (Sym, LocalRef)):
            return True
        if isinstance(expr, Unary):
            stack.append(expr.arg)
        elif isinstance(expr, Binary):
            stack += (expr.left, expr.right)
        elif isinstance(expr, Paren):
            stack.append(expr.inner)
    return False


def _check_depth(tree: Tree) -> None:
    """Refuse trees deeper than MAX_TREE_DEPTH (iteratively), at the operand's column."""
    stack = [(tree, 1, None)]
    while stack:
        node, depth, col = stack.pop()
        if node.data.startswith("op_"):
            col = node.meta.column
        if depth > MAX_TREE_DEPTH:
            raise StatementError(f"expression nested too deeply (more than {MAX_TREE_DEPTH} "
                                 "levels of operators and parentheses)", col)
        stack.extend((child, depth + 1, col) for child in node.children
                     if isinstance(child, Tree))


_SPECIAL = re.compile(r"[\"';#/\\]")  # the characters split_statements must look at


def split_statements(line: str) -> list[tuple[int, str]]:
    """Remove ``#`` and ``//`` comments and split at ``;``, respecting string and character
    literals. Returns (0-based start offset, text) of each non-empty statement."""
    out: list[tuple[int, str]] = []
    start = 0
    end = len(line)
    quote = None
    escaped_until = -1  # the character after a backslash in a literal is taken as it is
    for match in _SPECIAL.finditer(line):
        i = match.start()
        if i < escaped_until:
            continue
        c = line[i]
        if quote:
            if c == "\\":
                escaped_until = i + 2
            elif c == quote:
                quote = None
        elif c == '"' or (c == "'" and _starts_char_literal(line, i)):
            quote = c
        elif c == "#" or line.startswith("//", i):
            end = i
            break
        elif c == ";":
            out.append((start, line[start:i]))
            start = i + 1
    out.append((start, line[start:end]))
    return [(s, t) for s, t in out if t.strip()]


def _starts_char_literal(line: str, i: int) -> bool:
    return len(line) > i + 2 and (line[i + 2] == "'" or (line[i + 1] == "\\" and
                                                         len(line) > i + 3))
