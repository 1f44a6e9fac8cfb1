"""The statement stream: files and includes split into statements, with conditionals, macros
and repetitions expanded (GNU as semantics, see docs/asm.md).

It runs lazily, interleaved with the assembler's first pass, so ``.if`` sees the ``.equ``
values and labels defined before it (the assembler passes ``evaluate``/``is_defined``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Optional

from ..errors import SwsimError
from .diagnostics import DiagnosticLog, Origin, StatementError
from .files import MAX_SOURCE_BYTES, read_bounded
from .syntax import split_statements

MAX_EXPANSION_DEPTH = 100   # nested macro calls / includes before we call it runaway recursion
# [choice] Statements that macros, .rept and .irp may produce in one file: 20x the largest
# kernel (kernels/swgemm.s, 3178 words), about two seconds of assembly at the 34,000-40,000
# statements/s measured (docs/asm.md); `.rept 100000000` is refused at once, not run for hours.
MAX_EXPANDED_STATEMENTS = 1 << 16
# [choice] Open .if blocks (each statement tests them all) and the characters of one macro
# argument (an argument doubled at every level of a recursive macro grows without bound).
MAX_CONDITIONAL_DEPTH = 1000
MAX_ARGUMENT_CHARS = 1 << 16

LEADING_LABELS = re.compile(r"\s*(?:(?:[A-Za-z_.$][\w.$]*|\d+)\s*:\s*)*")
_WORD = re.compile(r"[A-Za-z_.][\w.$]*")
_ESCAPE = re.compile(r"\\(@|\(\)|[A-Za-z_]\w*)")
_CONDITIONALS = {".if", ".ifdef", ".ifndef", ".elseif", ".else", ".endif"}
_REPEATS = {".rept", ".irp"}


@dataclass
class Macro:
    name: str
    params: list[tuple[str, Optional[str]]]  # (name, default)
    body: list[Origin]
    origin: Origin


@dataclass
class _Conditional:
    origin: Origin
    active: bool            # the enclosing region is assembled
    taken: bool = False     # a branch of this .if was already chosen
    on: bool = False        # the current branch is assembled
    seen_else: bool = False


@dataclass
class _Frame:
    statements: Iterator[Origin]
    depth: int
    file: Optional[str] = None  # set for file frames (include resolution)


@dataclass
class Preprocessor:
    log: DiagnosticLog
    evaluate: Callable[[str], int]          # absolute value of an expression, StatementError
    is_defined: Callable[[str], bool]
    include_dirs: tuple[str, ...] = ()
    macros: dict[str, Macro] = field(default_factory=dict)
    _conditions: list[_Conditional] = field(default_factory=list)
    _frames: list[_Frame] = field(default_factory=list)
    _expansions: int = 0
    _expanded: int = 0      # statements produced by expansions so far

    def statements(self, text: str, filename: str) -> Iterator[Origin]:
        """Every statement to assemble, in order."""
        self._frames = [_Frame(file_statements(text, filename), 0, filename)]
        position = 0
        while self._frames and not self.log.full:
            origin = next(self._frames[-1].statements, None)
            if origin is None:
                self._frames.pop()
                continue
            position += 1
            yield from self._statement(Origin(origin.file, origin.line, origin.text,
                                              origin.source, origin.start, origin.note, position))
        for cond in self._conditions:
            self.log.error(cond.origin, "unterminated conditional (missing .endif)")
        self._conditions.clear()

    @property
    def _assembling(self) -> bool:
        return all(c.on for c in self._conditions)

    def _statement(self, origin: Origin) -> Iterator[Origin]:
        labels = LEADING_LABELS.match(origin.text)
        word_match = _WORD.match(origin.text, labels.end())
        word = word_match.group().lower() if word_match else ""
        if word in _CONDITIONALS:
            self._conditional(origin, word, word_match.end())
            return
        if not self._assembling:
            return
        if labels.end() and (word in self.macros or word in _REPEATS or word == ".macro"):
            yield _slice(origin, 0, labels.end())  # the labels, before the expansion
        args_at = word_match.end() if word_match else 0
        try:
            if word == ".macro":
                self._define_macro(origin, args_at)
            elif word in (".endm", ".endr"):
                raise StatementError(f"{word} without a matching "
                                     f"{'.macro' if word == '.endm' else '.rept/.irp'}")
            elif word == ".exitm":
                raise StatementError(".exitm is not supported (use .if inside the macro)")
            elif word in _REPEATS:
                self._repeat(origin, word, args_at)
            elif word == ".include":
                self._include(origin, args_at)
            elif word in (".err", ".error"):
                message = origin.text[args_at:].strip().strip('"')
                raise StatementError(f"{word}: {message}" if message else f"{word} encountered",
                                     word_match.start() + 1)
            elif word in self.macros:
                self._expand(self.macros[word], origin, args_at)
            else:
                yield origin
        except StatementError as exc:
            self.log.error(origin, exc.message, exc.col)

    # ---- conditionals ---------------------------------------------------------------------
    def _conditional(self, origin: Origin, word: str, args_at: int) -> None:
        if word in (".if", ".ifdef", ".ifndef"):
            if len(self._conditions) >= MAX_CONDITIONAL_DEPTH:
                self.log.error(origin, f"{word} nested deeper than {MAX_CONDITIONAL_DEPTH} "
                                       "open conditionals")   # each deeper one too: the log
                return                                         # fills and assembly stops
            cond = _Conditional(origin, self._assembling)
            self._conditions.append(cond)
            if cond.active:
                cond.on = cond.taken = self._test(origin, word, args_at)
            return
        if not self._conditions:
            self.log.error(origin, f"{word} without a matching .if")
            return
        cond = self._conditions[-1]
        if word == ".endif":
            self._conditions.pop()
            return
        if cond.seen_else:
            self.log.error(origin, f"{word} after .else")
            return
        cond.seen_else = word == ".else"
        cond.on = cond.active and not cond.taken and (
            word == ".else" or self._test(origin, ".if", args_at))
        cond.taken = cond.taken or cond.on

    def _test(self, origin: Origin, word: str, args_at: int) -> bool:
        arg = origin.text[args_at:]
        try:
            if word == ".if":
                return self._evaluate(origin, args_at) != 0
            name = arg.strip()
            if not _WORD.fullmatch(name):
                raise StatementError(f"{word} expects a symbol name", args_at + 1)
            return self.is_defined(name) == (word == ".ifdef")
        except StatementError as exc:
            self.log.error(origin, exc.message, exc.col)
            return False

    def _evaluate(self, origin: Origin, args_at: int) -> int:
        """The expression after ``args_at``; errors get columns of the whole statement."""
        try:
            return self.evaluate(origin.text[args_at:])
        except StatementError as exc:
            raise StatementError(exc.message, args_at + (exc.col or 1)) from None

    # ---- blocks: .macro, .rept, .irp --------------------------------------------------------
    def _block(self, opening: Origin, starts: set[str], end: str) -> list[Origin]:
        """The statements up to the matching ``end`` (nested blocks of ``starts`` counted)."""
        body: list[Origin] = []
        depth = 1
        for origin in self._frames[-1].statements:
            labels = LEADING_LABELS.match(origin.text)
            word_match = _WORD.match(origin.text, labels.end())
            word = word_match.group().lower() if word_match else ""
            depth += (word in starts) - (word == end)
            if depth == 0:
                return body
            body.append(origin)
        opening_word = _WORD.match(opening.text, LEADING_LABELS.match(opening.text).end())
        raise StatementError(f"unterminated {opening_word.group()} (missing {end})")

    def _define_macro(self, origin: Origin, args_at: int) -> None:
        spec = origin.text[args_at:].replace(",", " ").split()
        if not spec or not _WORD.fullmatch(spec[0]):
            raise StatementError(".macro expects a name and parameters: .macro name a, b=1")
        params = []
        for param in spec[1:]:
            name, _, default = param.partition("=")
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise StatementError(f"bad macro parameter {param!r}")
            params.append((name, default if "=" in param else None))
        body = self._block(origin, {".macro"}, ".endm")
        self.macros[spec[0].lower()] = Macro(spec[0], params, body, origin)

    def _repeat(self, origin: Origin, word: str, args_at: int) -> None:
        body = self._block(origin, _REPEATS, ".endr")
        args = origin.text[args_at:]
        note = f"in {word} at {origin.file}:{origin.line}"
        if word == ".rept":
            count = self._evaluate(origin, args_at)
            if count < 0:
                raise StatementError(f".rept count must be >= 0, got {count}")
            self._charge(count * len(body), f".rept {count}")
            expansion = (o for _ in range(count) for o in body)
        else:
            items = split_arguments(args)
            if not items or not re.fullmatch(r"[A-Za-z_]\w*", items[0]):
                raise StatementError(".irp expects a parameter name and values: "
                                     ".irp r, 1, 2, 3")
            self._charge((len(items) - 1) * len(body), ".irp")
            expansion = (_substitute(o, {items[0]: value}, note)
                         for value in items[1:] for o in body)
        self._push(expansion, origin)

    def _expand(self, macro: Macro, origin: Origin, args_at: int) -> None:
        values = {name: default or "" for name, default in macro.params}
        names = [name for name, _ in macro.params]
        for position, arg in enumerate(split_arguments(origin.text[args_at:])):
            keyword = re.fullmatch(r"([A-Za-z_]\w*)\s*=(.*)", arg, re.S)
            if keyword and keyword.group(1) in values:
                values[keyword.group(1)] = keyword.group(2).strip()
            elif position < len(names):
                values[names[position]] = arg
            else:
                raise StatementError(f"too many arguments for macro {macro.name} "
                                     f"(it takes {len(names)}: {', '.join(names) or 'none'})")
        for name, value in values.items():
            if len(value) > MAX_ARGUMENT_CHARS:
                raise StatementError(f"macro {macro.name}: argument {name} is {len(value)} "
                                     f"characters long (the limit is {MAX_ARGUMENT_CHARS})")
        self._charge(len(macro.body), f"macro {macro.name}")
        self._expansions += 1
        values["@"] = str(self._expansions)
        note = f"in expansion of macro '{macro.name}' at {origin.file}:{origin.line}"
        self._push(iter([_substitute(o, values, note) for o in macro.body]), origin)

    def _charge(self, statements: int, what: str) -> None:
        self._expanded += statements
        if self._expanded > MAX_EXPANDED_STATEMENTS:
            raise StatementError(f"{what} would expand this file to more than "
                                 f"{MAX_EXPANDED_STATEMENTS} statements (the limit of macro, "
                                 ".rept and .irp expansions)")

    def _include(self, origin: Origin, args_at: int) -> None:
        name = origin.text[args_at:].strip()
        if len(name) >= 2 and name[0] == name[-1] == '"':
            name = name[1:-1]
        if not name:
            raise StatementError('.include expects a file name: .include "file.inc"')
        here = next(f.file for f in reversed(self._frames) if f.file is not None)
        candidates = [os.path.join(os.path.dirname(here), name),
                      *(os.path.join(d, name) for d in self.include_dirs)]
        for path in candidates:
            if os.path.exists(path):
                self._check_recursion(path)
                try:
                    text = read_bounded(path, "an include file", MAX_SOURCE_BYTES).decode(
                        "utf-8", "replace")
                except SwsimError as exc:
                    raise StatementError(f"cannot include {name!r}: {exc}") from None
                self._push(file_statements(text, path), origin, path)
                return
        raise StatementError(f"cannot find include file {name!r} (searched: "
                             f"{', '.join(os.path.dirname(p) or '.' for p in candidates)})")

    def _check_recursion(self, path: str) -> None:
        chain = [f.file for f in self._frames if f.file is not None]
        if any(os.path.realpath(path) == os.path.realpath(f) for f in chain):
            raise StatementError("recursive .include: " + " -> ".join(
                os.path.basename(f) for f in chain + [path]))

    def _push(self, statements: Iterator[Origin], origin: Origin,
              file: Optional[str] = None) -> None:
        depth = self._frames[-1].depth + 1
        if depth > MAX_EXPANSION_DEPTH:
            raise StatementError(f"macro/include nesting deeper than {MAX_EXPANSION_DEPTH} "
                                 "(runaway recursion?)")
        self._frames.append(_Frame(statements, depth, file))


def file_statements(text: str, filename: str) -> Iterator[Origin]:
    for number, line in enumerate(text.splitlines(), 1):
        for start, statement in split_statements(line):
            yield Origin(filename, number, statement, line, start)


def split_arguments(text: str) -> list[str]:
    """Split at top-level commas (not inside parentheses or quotes); strip each part."""
    parts, depth, quote, current = [], 0, None, ""
    for c in text:
        if quote:
            quote = None if c == quote and not current.endswith("\\") else quote
        elif c in "\"'":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += c
    if current.strip() or parts:
        parts.append(current.strip())
    return parts


def _substitute(origin: Origin, values: dict[str, str], note: str) -> Origin:
    def replace(match: re.Match) -> str:
        key = match.group(1)
        return "" if key == "()" else values.get(key, match.group(0))

    text = _ESCAPE.sub(replace, origin.text)
    return Origin(origin.file, origin.line, text, text, 0, note)


def _slice(origin: Origin, start: int, end: int) -> Origin:
    return replace(origin, text=origin.text[start:end], start=origin.start + start)
