"""The kernels layer's part of the command line: ``swsim run`` links the athread runtime
(``runtime/``, docs/runtime.md) to a program that calls it and prints what its CPEs printed."""
from __future__ import annotations

import sys

from ..vm.cli import run_command
from .runtime import build_with_runtime, console_text


def register(subparsers) -> None:
    subparsers.choices["run"].set_defaults(func=_run, build=build_source_with_runtime)


def build_source_with_runtime(path: str, include_dirs: tuple[str, ...]):
    return build_with_runtime([path], include_dirs)


def _run(args) -> int:
    def print_console(machine, program):     # also what was printed before a fault
        if "_slave_stdout" in program.symbols:
            # --json keeps stdout for the statistics
            (sys.stderr if args.json else sys.stdout).write(
                console_text(machine, program, [args.cg]))

    return run_command(args, on_exit=print_console)
