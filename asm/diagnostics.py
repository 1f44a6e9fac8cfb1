"""Assembler diagnostics: positioned messages, collected so that one run reports every error."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from ..errors import SwsimError

MAX_ERRORS = 50  # stop collecting after this many errors in one run
SHOWN_SOURCE = 160  # a longer source line is shown as this much around the caret
SHOWN_WORD = 80  # a longer word of a message (a 2 MB unknown name) is shown as its start


@dataclass(frozen=True)
class Origin:
    """Where a statement comes from: ``text`` is the statement as assembled (comments removed,
    macro arguments substituted); it starts at 0-based offset ``start`` of ``source``, the line
    shown under a diagnostic (the physical line, or the expanded text inside a macro)."""
    file: str
    line: int
    text: str
    source: str
    start: int = 0
    note: str = ""  # e.g. "in expansion of macro 'm' at a.s:12"
    position: int = 0  # 1, 2, ...: the order the assembler reads statements in (0: unknown)


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    col: int
    message: str
    source: str = ""      # the source line shown under the message
    note: str = ""
    severity: str = "error"
    position: tuple = field(default=(), compare=False, repr=False)  # sort key: stream order

    def __str__(self) -> str:
        out = f"{self.file}:{self.line}:{self.col}: {self.severity}: {_shortened(self.message)}"
        if self.source:
            shown, col = _window(self.source, self.col)
            out += f"\n{shown}\n{_caret_line(shown, col)}"
        if self.note:
            out += f"\n{self.file}:{self.line}: note: {self.note}"
        return out


def _window(source: str, col: int) -> tuple[str, int]:
    """At most SHOWN_SOURCE characters of ``source`` around ``col`` and the column in them
    (8,000 statements on one line must not print the line 50 times)."""
    if len(source) <= SHOWN_SOURCE:
        return source, col
    start = max(0, min(col - 1 - SHOWN_SOURCE // 2, len(source) - SHOWN_SOURCE))
    prefix = "..." if start else ""
    suffix = "..." if start + SHOWN_SOURCE < len(source) else ""
    return prefix + source[start:start + SHOWN_SOURCE] + suffix, col - start + len(prefix)


def _shortened(message: str) -> str:
    """``message`` with each word longer than SHOWN_WORD cut to its start and its length."""
    return re.sub(rf"\S{{{SHOWN_WORD + 1},}}",
                  lambda m: f"{m.group()[:SHOWN_WORD // 2]}... ({len(m.group())} characters)",
                  message)


def _caret_line(source: str, col: int) -> str:
    # Keep tabs so the caret lines up under tab-indented source.
    prefix = "".join(c if c == "\t" else " " for c in source[:max(col - 1, 0)])
    return prefix + "^"


class AsmError(SwsimError):
    """Bad assembler input; ``diagnostics`` lists every error found (up to MAX_ERRORS) in the
    order of the statements they are about."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = in_order(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


def in_order(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Sorted by statement (stably; diagnostics without a position last), at most MAX_ERRORS
    and then a note saying so."""
    errors = [d for d in diagnostics if d.message != _too_many()]
    errors.sort(key=lambda d: (not d.position, d.position))
    if len(errors) < len(diagnostics) or len(errors) > MAX_ERRORS:
        errors = errors[:MAX_ERRORS] + [Diagnostic(errors[0].file, 0, 0, _too_many())]
    return errors


def _too_many() -> str:
    return f"too many errors (limit {MAX_ERRORS}), stopping"


class StatementError(Exception):
    """Raised inside the assembler for one bad statement; ``col`` is relative to the
    statement text (1-based), or None for the start of the statement."""

    def __init__(self, message: str, col: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.col = col


class DiagnosticLog:
    """Collects diagnostics; ``raise_if_errors`` turns them into one AsmError."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    @property
    def full(self) -> bool:
        return len(self.diagnostics) >= MAX_ERRORS

    def error(self, origin: Optional[Origin], message: str, col: Optional[int] = None) -> None:
        """Record an error at ``col`` (1-based, relative to ``origin.text``)."""
        if self.full:
            return
        if origin is None:
            diagnostic = Diagnostic("<link>", 0, 0, message)
        else:
            column = origin.start + (col if col else _first_non_blank(origin.text) + 1)
            diagnostic = Diagnostic(origin.file, origin.line, column, message, origin.source,
                                    origin.note,
                                    position=(origin.position, column) if origin.position else ())
        if diagnostic in self.diagnostics[-2:]:
            return  # e.g. both halves of an ldih+ldi pair
        self.diagnostics.append(diagnostic)
        if self.full:
            self.diagnostics.append(Diagnostic(self.diagnostics[-1].file, 0, 0, _too_many()))

    def raise_if_errors(self) -> None:
        if self.diagnostics:
            raise AsmError(self.diagnostics)


def _first_non_blank(text: str) -> int:
    return len(text) - len(text.lstrip())
