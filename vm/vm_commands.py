"""``swsim run`` (run a kernel on one core group), ``swsim fuzz`` (the engines' differential
campaign) and ``swsim config`` (the parameter table)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ..asm.files import regular_file_size
from ..errors import SwsimError
from .config import PARAMETERS, PRESETS, VMConfig, markdown_table
from .engine_defs import MAX_CPES, MAX_CYCLES
from .faults import HostError, RunStopped
from .machine import ENGINES
from .memory import NUMERIC_KINDS

PROGRESS_AFTER_SECONDS = 2.0


def register(subparsers) -> None:
    run = subparsers.add_parser("run", help="assemble (or load) a kernel and run it on a CG")
    add_run_arguments(run)
    run.add_argument("--stats", action="store_true", help="per-CG summary and EE mesh")
    run.add_argument("--json", action="store_true", help="the statistics as JSON")
    run.set_defaults(func=run_command)

    fuzz = subparsers.add_parser("fuzz", help="differential campaign: random programs on the "
                                 "C and Python engines (docs/testing.md)")
    fuzz.add_argument("--programs", type=count_argument(1), default=1000, metavar="N")
    fuzz.add_argument("--seed", type=count_argument(0), default=0, metavar="S")
    fuzz.add_argument("--out", default=".", metavar="DIR", help="where reproducers go")
    fuzz.add_argument("--replay", metavar="FILE", help="run a reproducer file again")
    fuzz.set_defaults(func=_fuzz)

    config = subparsers.add_parser("config", help="print the machine parameters")
    config.add_argument("--preset", choices=sorted(PRESETS), default=None)
    config.add_argument("--markdown", action="store_true", help="the table of docs/config.md")
    config.set_defaults(func=_config)


# ---- swsim run ------------------------------------------------------------------------------
def add_run_arguments(parser) -> None:
    """The arguments that say what to run: `swsim run`'s, also used by higher layers'
    commands that run a kernel (`swsim report`)."""
    parser.add_argument("program", metavar="KERNEL",
                        help="assembly source (.s) or program (.swo)")
    parser.add_argument("--entry", default="kernel", help="entry label (default: kernel)")
    parser.add_argument("--cpes", type=count_argument(1, MAX_CPES), default=64, metavar="N",
                        help="spawn CPEs 0..N-1")
    parser.add_argument("--cg", type=count_argument(0), default=0, help="core group (default 0)")
    parser.add_argument("--arg", action="append", default=[], metavar="VALUE",
                        help="argument: an int, a float, or @file.npy (copied to main memory, "
                             "its address passed); repeat for each argument")
    parser.add_argument("--symbol", action="append", default=[], metavar="NAME=VALUE",
                        help="define a symbol the program uses and the host defines (C's "
                             "extern double A[]): VALUE an address or @file.npy (copied to "
                             "main memory, as for --arg)")
    parser.add_argument("--dump", action="append", default=[], metavar="ADDR:SHAPE:DTYPE:FILE",
                        help="after the run save memory to FILE.npy; ADDR a number, argN or "
                             "a data symbol of the program, SHAPE like 64x64")
    parser.add_argument("--max-cycles", type=count_argument(0, MAX_CYCLES), default=None,
                        metavar="N", help="stop the kernel after N cycles (0 <= N <= 2**62)")
    parser.add_argument("--trace", metavar="FILE.json", help="write a Perfetto/Chrome trace")
    engine_argument(parser)
    parser.add_argument("--config", default="sw26010", choices=sorted(PRESETS), metavar="PRESET")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a configuration parameter")
    parser.add_argument("--progress", action="store_true",
                        help="show a progress bar even when stderr is not a terminal")
    parser.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")


def engine_argument(parser) -> None:
    """--engine: which of the VM's engines runs every launch (the C core by default)."""
    parser.add_argument("--engine", choices=tuple(ENGINES), default="c")


def count_argument(minimum: int, maximum: int | None = None):
    """An argparse type: an integer of at least ``minimum`` and, given, at most ``maximum``
    (argparse names the option)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"expected an integer <= {maximum}, got "
                                             f"{str(value)[:40]}")
        return value
    return parse


def run_command(args, on_exit=None) -> int:
    """`swsim run`: run, then print (``on_exit`` as for ``run_from_args``)."""
    try:
        machine, _, result = run_from_args(args, on_exit)
    except RunStopped as stopped:   # the partial result still goes out, marked by its "stop"
        if args.json and stopped.result is not None:
            print(json.dumps(stopped.result.to_dict(), indent=2))
        raise
    return print_run(args, machine, result)


def print_run(args, machine, result) -> int:
    """What `swsim run` prints after a run: the time, or the statistics (--stats, --json)."""
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif args.stats:
        print(result.summary())
    else:
        print(f"{result.cycles} cycles ({result.kernel_cycles} kernel + "
              f"{machine.config.spawn_cycles} spawn), {result.seconds * 1e6:.3f} us, "
              f"mean EE {result.ee:.1%}")
    return 0


def run_from_args(args, on_exit=None):
    """Run what the arguments of ``add_run_arguments`` say: (Machine, Program, RunResult),
    after the dumps and the trace are written. ``on_exit(machine, program)`` is called when
    the run ends, also when it stops with a fault (before the error propagates)."""
    from .machine import Machine
    from .trace import write_trace

    machine = Machine(args.config, **dict(_override(s, args.config) for s in args.set))
    program = Machine.program(Path(args.program), tuple(args.include_dirs),
                              dict(_symbol(text, machine) for text in args.symbol))
    values = [_argument(text, machine) for text in args.arg]
    progress = _ProgressBar(args.max_cycles, args.progress or sys.stderr.isatty())
    stopped = None
    try:
        result = machine.run(program, entry=args.entry, args=values, cg=args.cg,
                             cpes=range(args.cpes), max_cycles=args.max_cycles,
                             engine=args.engine, trace=bool(args.trace), progress=progress)
    except RunStopped as stop:
        if stop.result is None:
            raise
        stopped, result = stop, stop.result
    finally:
        progress.close()
        if on_exit is not None:
            on_exit(machine, program)
    for spec in args.dump:
        _dump(spec, machine, values, program)
    if args.trace:
        write_trace(result, args.trace)
    if stopped is not None:
        if args.dump or args.trace:
            print("swsim: the run stopped early; --dump/--trace hold the state at the stop",
                  file=sys.stderr)
        raise stopped
    return machine, program, result


def _override(text: str, preset: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    defaults = VMConfig.preset(preset).as_dict()
    if not sep or name not in defaults:
        raise HostError(f"--set expects NAME=VALUE with a parameter of `swsim config`, "
                        f"got {text!r}")
    try:
        return name, float(value) if isinstance(defaults[name], float) else int(value, 0)
    except ValueError:
        raise HostError(f"--set {name}: {value!r} is not a number") from None


def _argument(text: str, machine):
    if text.startswith("@"):
        try:   # a device is refused, and a header claiming more than the file holds: mapped,
            regular_file_size(text[1:], "a .npy array", machine.config.mem_limit)
            array = np.load(text[1:], mmap_mode="r")   # not read, the size is checked first
        except SwsimError as exc:
            raise HostError(f"--arg {text!r}: {exc}") from None
        except (OSError, ValueError, EOFError) as exc:   # EOFError: an empty file
            raise HostError(f"--arg {text!r}: not a .npy file ({exc})") from None
        if array.dtype.kind in NUMERIC_KINDS and not array.dtype.isnative:
            native = array.dtype.newbyteorder("=")
            print(f"swsim: --arg {text!r}: converted from {array.dtype.str} (non-native byte "
                  f"order) to {native.str}", file=sys.stderr)
            array = array.astype(native)
        try:
            return machine.mem.put(array)
        except HostError as exc:
            raise HostError(f"--arg {text!r}: {exc}") from None
    for parse in (lambda t: int(t, 0), float):
        try:
            return parse(text)
        except ValueError:
            pass
    raise HostError(f"--arg {text!r}: expected an int, a float or @file.npy")


def _symbol(text: str, machine) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise HostError(f"--symbol expects NAME=VALUE, got {text!r}")
    address = _argument(value, machine)
    if not isinstance(address, int):
        raise HostError(f"--symbol {text!r}: the value must be an address or @file.npy")
    return name, address


def _dump(spec: str, machine, values, program) -> None:
    try:
        address, shape, dtype, path = spec.split(":")
        if address in program.symbols:
            address = program.address_of(address)
        elif address.startswith("arg"):
            index = int(address[3:])
            if not 0 <= index < len(values):      # arg-1 is no argument (not the last one)
                raise ValueError(f"{address}: the arguments are arg0..arg{len(values) - 1}")
            address = values[index]
        else:
            address = int(address, 0)
        dims = tuple(int(d) for d in shape.replace(",", "x").split("x") if d)
        if not dims or min(dims) < 1:
            raise ValueError(f"SHAPE {shape!r} must be positive sizes like 64x64")
        data = machine.mem.get(address, dims, np.dtype(dtype))
    except (ValueError, IndexError, TypeError, HostError) as exc:
        raise HostError(f"--dump {spec!r}: expected ADDR:SHAPE:DTYPE:FILE ({exc})") from None
    np.save(path, data)


class _ProgressBar:
    """A tqdm bar on stderr that appears only once a run has taken a few seconds."""

    def __init__(self, total, enabled: bool, unit: str = "cycle", desc: str = "simulating",
                 after_seconds: float = PROGRESS_AFTER_SECONDS):
        self.total, self.enabled = total, enabled
        self.unit, self.desc, self.after_seconds = unit, desc, after_seconds
        self.started = time.monotonic()
        self.bar = None

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        if self.bar is None and time.monotonic() - self.started >= self.after_seconds:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, unit=self.unit, unit_scale=True, file=sys.stderr,
                            desc=self.desc)
        if self.bar is not None:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---- swsim fuzz -----------------------------------------------------------------------------
def _fuzz(args) -> int:
    from . import fuzz
    if args.replay:
        problem = fuzz.replay(args.replay)
        print(f"{args.replay}: " + (f"engines differ: {problem}" if problem else
                                    "the engines agree"))
        return 1 if problem else 0
    progress = _ProgressBar(args.programs, sys.stderr.isatty(), unit="program",
                            desc="fuzzing", after_seconds=0)
    try:
        report = fuzz.campaign(args.programs, args.seed, args.out, progress=progress)
    finally:
        progress.close()
    print(report.summary())
    return 1 if report.mismatches or report.crashes else 0


# ---- swsim config ---------------------------------------------------------------------------
CONFIG_DOC_HEADER = """# Configuration parameters

Every size and timing constant of the emulated core group (`swsim.vm.config`), generated by
`swsim config --markdown` — do not edit by hand. Defaults are the `sw26010` preset, its DMA and
launch fitted to hardware recordings (issue 28); `(pro: …)` shows the `sw26010pro` value where
it differs (it inherits the DMA request, block, put, broadcast and launch terms in cycles: there
are no such recordings of the pro), `(stream: …)` the `sw26010-stream` value, the pre-issue-28
calibration on the contiguous STREAM table alone (`sw26010-hw` names the default). Sources:
**pub** published measurement, **spec** fixed by MACHINE.md, **choice** swsim's choice. Override any of them with
`Machine(name=value)` or `swsim run --set name=value`; a value outside the parameter's
**values** is refused with a `ConfigError` naming it.

"""


def config_doc() -> str:
    """The text of docs/config.md."""
    return CONFIG_DOC_HEADER + markdown_table() + "\n"


def _config(args) -> int:
    if args.markdown:
        print(config_doc(), end="")
        return 0
    values = VMConfig.preset(args.preset or "sw26010").as_dict()
    for p in PARAMETERS:
        value = hex(values[p.name]) if p.unit == "addr" else values[p.name]
        print(f"{p.name:<24} {value!s:>14} {p.unit:<6} {p.meaning}")
    return 0
