"""Errors of the VM: wrong host calls (``HostError``) and runs that stopped early
(``VMFault``, ``Deadlock``, ``CycleLimit``), each a ``SwsimError`` with a readable report."""
from __future__ import annotations

from typing import Optional

from ..isa.disasm import format_instruction
from ..errors import ArgumentError, SwsimError


class HostError(ArgumentError):
    """A wrong call of the host API (bad entry, arguments, CPE set, engine, image too big)."""


class RunStopped(SwsimError):
    """A run stopped before every CPE halted. ``result`` holds the partial ``RunResult``."""

    def __init__(self, report: str, cg: int, stop, result=None, cpe: Optional[int] = None,
                 pc: Optional[int] = None, instruction: str = "", reason: str = "",
                 blocked: tuple = ()):
        super().__init__(report)
        self.cg, self.stop, self.result = cg, stop, result
        self.cpe, self.pc, self.cycle = cpe, pc, stop.cycle
        self.instruction, self.reason = instruction, reason
        self.blocked = blocked   # [(cpe, pc, wait reason, instruction text)]


class VMFault(RunStopped):
    """An instruction faulted (bad access, bad pc, bad DMA, bad communication or barrier)."""


class Deadlock(RunStopped):
    """Every running CPE waits for something no pending event can bring."""


class CycleLimit(RunStopped):
    """The run reached its ``max_cycles``."""


def instruction_at(program, pc: int) -> str:
    """Text of the program's instruction at ``pc``, with its source line when known."""
    index = (pc - program.code_base) // 4
    if not 0 <= index < len(program.code) or pc % 4:
        return "(outside the code image)"
    word = int(program.code[index])
    text = format_instruction(word, pc, program.symbol_at) or f".word {word:#010x}"
    text = text.replace("\t", " ")
    source = program.lines.get(pc) if program.lines else None
    if source is not None:
        text += f"    [{source.file}:{source.line}]"
    return text
