"""The kernels layer's part of the command line: ``swsim run`` prints what the CPEs of a
program linked with the athread runtime (``runtime/``, docs/runtime.md; importing it registers
it with ``Machine.program``, which links it to programs that use it) printed."""
from __future__ import annotations

import sys

from ..vm.vm_commands import run_command
from .athread import console_text
from .athread.console import CONSOLE_SYMBOL


def register(subparsers) -> None:
    subparsers.choices["run"].set_defaults(func=_run)


def _run(args) -> int:
    def print_console(machine, program):     # also what was printed before a fault
        if CONSOLE_SYMBOL in program.symbols:
            # --json keeps stdout for the statistics
            (sys.stderr if args.json else sys.stdout).write(
                console_text(machine, program, [args.cg], ("stdout",)))
            sys.stderr.write(console_text(machine, program, [args.cg], ("stderr",)))

    return run_command(args, on_exit=print_console)
