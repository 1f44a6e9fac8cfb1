"""Host-library commands: `swsim bench ...`."""
from __future__ import annotations

import json
from dataclasses import asdict


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="run a benchmark and print its table")
    which = bench.add_subparsers(dest="bench", metavar="BENCHMARK")
    which.required = True

    fidelity = which.add_parser("fidelity", help="measure MACHINE.md §11 quantities on the "
                                "emulator beside their published values")
    fidelity.add_argument("--engine", choices=("c", "python"), default="c")
    fidelity.add_argument("--json", action="store_true", help="print JSON instead of a table")
    fidelity.set_defaults(func=_fidelity)

    speed = which.add_parser("speed", help="simulated instructions per host second")
    speed.add_argument("--repeats", type=int, default=3, help="runs per case (median taken)")
    speed.add_argument("--scale", type=float, default=1.0, help="workload size factor")
    speed.add_argument("--json", action="store_true")
    speed.set_defaults(func=_speed)


def _fidelity(args) -> int:
    from .bench import fidelity
    rows = fidelity.run(args.engine)
    if args.json:
        print(json.dumps([{**asdict(r), "error_pct": r.error_pct} for r in rows], indent=2))
    else:
        print(fidelity.format_table(rows))
    return 0


def _speed(args) -> int:
    from .bench import speed
    rows = speed.run(repeats=args.repeats, scale=args.scale)
    if args.json:
        print(json.dumps([{**asdict(r), "mips": r.mips} for r in rows], indent=2))
    else:
        print(speed.format_table(rows))
    return 0
