"""The ``swsim`` command. Each layer registers its own subcommands (``register(subparsers)`` in
``asm/asm_commands.py``, ``vm/vm_commands.py``, ``kernels/kernel_commands.py``,
``hostlib/tools/tool_commands.py``; a layer may extend a lower one's command); this module only
dispatches and turns swsim errors into messages with exit status 1, never a traceback."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from . import __version__
from .errors import SwsimError

LAYERS = ("swsim.asm.asm_commands", "swsim.vm.vm_commands", "swsim.kernels.kernel_commands",
          "swsim.hostlib.tools.tool_commands")
BROKEN_PIPE_STATUS = 128 + 13   # as a shell reports a process ended by SIGPIPE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swsim", description="SW26010 core-group emulator, "
                                     "assembler and DNN library")
    parser.add_argument("--version", action="version", version=f"swsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in LAYERS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # layer without commands yet
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()   # a closed pipe shows here, not at exit
        return status
    except SwsimError as exc:
        print(f"swsim: {exc}" if not str(exc).startswith(args.command) else str(exc),
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("swsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # the reader of stdout went away (`swsim ... | head`): stop quietly
        _silence_stdout()
        return BROKEN_PIPE_STATUS
    except (OSError, ValueError) as exc:
        print(f"swsim {args.command}: error: {exc}", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that flushing it at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
