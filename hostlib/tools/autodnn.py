"""`swsim autodnn FILE.sched`: tune a swAutoDNN schedule, print the chosen strategy with its
predicted and simulated cycles, and write the generated kernel (docs/autodnn.md)."""
from __future__ import annotations

import argparse
import os
import sys

from ...errors import ArgumentError
from ...vm import Machine
from ...vm.vm_commands import engine_argument
from .. import autodnn
from ..autodnn import ir, tuner


def shape_argument(text: str) -> tuple:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier() or not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with a positive integer value, "
                                         f"got {text!r}")
    return name, int(value)


def register(subparsers) -> None:
    cmd = subparsers.add_parser("autodnn", help="tune a swAutoDNN schedule (the DSL of thesis "
                                "Fig. 6.3) and write its generated CPE kernel")
    cmd.add_argument("file", metavar="FILE.sched")
    cmd.add_argument("--shape", type=shape_argument, action="append", default=[],
                     metavar="NAME=VALUE", help="set a ConstVar (repeatable)")
    cmd.add_argument("--tune", choices=("model", "measured"), default="model",
                     help="rank the candidates by the model (default) or by VM runs")
    cmd.add_argument("--sample", type=int, default=2, metavar="N",
                     help="simulate N iterations of the outermost loop and scale (0: whole)")
    cmd.add_argument("-o", "--output", metavar="kernel.s", help="write the kernel's assembly")
    cmd.add_argument("--explain", action="store_true",
                     help="print every candidate (refusals too) and the optimised IR")
    engine_argument(cmd)
    cmd.set_defaults(func=_autodnn)


def _autodnn(args) -> int:
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ArgumentError(f"FILE.sched: cannot read {args.file}: {exc.strerror}") from None
    if args.sample < 0:
        raise ArgumentError("--sample must be 0 or more")
    program = autodnn.load(text)
    program.name = os.path.basename(args.file)
    if args.shape:
        program = tuner.with_consts(program, **dict(args.shape))
    machine = Machine()
    tuning = tuner.tune([program], args.tune, machine=machine, sample=args.sample or None)
    best = tuning.best
    if args.explain:
        for cand in tuning.candidates:
            if cand.refused:
                print(f"  {cand.label}: refused: {cand.refused}")
            else:
                score = cand.predicted if args.tune == "model" else cand.measured
                print(f"  {cand.label}: {args.tune} {score:,.0f} cycles")
        print("optimised IR:")
        print("\n".join("  " + line for line in ir.format_nodes(best.generated.plan.body)))
    predicted = tuner.predict(best.generated, machine.config)
    simulated = best.measured if best.measured is not None else \
        tuner.measure(best, machine, args.sample or None, args.engine)
    plan = best.generated.plan
    peak = machine.config.peak_gflops_cg * 1e9 / machine.config.clock_hz
    print(f"chosen: {best.label} of {len(tuning.feasible)} feasible / {len(tuning.candidates)} "
          f"candidates ({args.tune} tuning, {tuning.seconds:.2f} s)")
    print("tensors: " + "; ".join(f"{t}({', '.join(plan.seed.registry.tensors[t].dims)})"
                                   for t in best.generated.tensors))
    print(f"predicted {predicted:,.0f} cycles, simulated {simulated:,.0f} cycles"
          f"{' (sampled)' if args.sample else ''}; {plan.flops / simulated / peak:.1%} of "
          f"the CG's peak; LDM {best.generated.ldm_bytes} bytes")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(best.generated.text)
        print(f"kernel: {args.output}", file=sys.stderr)
    return 0
