"""`swsim parax train`: the ParaX CNN (hostlib.parax.cnn, one instance per CPE, BN on each
instance's batch statistics) trained on digits with PS, RAR or GS synchronisation
(docs/parax.md "Training the CNN")."""
from __future__ import annotations

import json

from ...vm.vm_commands import count_argument, engine_argument
from ..parax.sync import STRATEGIES
from ..train.instances import train_cnn


def register(subparsers) -> None:
    parax = subparsers.add_parser("parax", help="ParaX instances on the CPE array "
                                  "(docs/parax.md)")
    which = parax.add_subparsers(dest="parax_command", required=True)
    train = which.add_parser("train", help="train the ParaX CNN on digits, one instance per "
                             "CPE, and print its test accuracy and samples per megacycle")
    train.add_argument("--instances", type=count_argument(1, 64), default=4, metavar="P",
                       help="instances, one CPE each (default 4; PS: at most 63)")
    train.add_argument("--batch", type=count_argument(1, 8), default=4, metavar="B",
                       help="samples per instance and step (default 4)")
    train.add_argument("--strategy", choices=STRATEGIES, default="GS")
    train.add_argument("--steps", type=count_argument(1), default=50, metavar="N")
    train.add_argument("--lr", type=float, default=0.5)
    train.add_argument("--seed", type=int, default=1)
    engine_argument(train)
    train.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    train.set_defaults(func=run)


def run(args) -> int:
    result = train_cnn(instances=args.instances, batch=args.batch, strategy=args.strategy,
                       steps=args.steps, lr=args.lr, seed=args.seed, engine=args.engine)
    steps = len(result.losses)
    window = max(1, min(10, steps // 2))
    report = {"instances": args.instances, "batch": args.batch, "strategy": args.strategy,
              "steps": steps, "lr": args.lr,
              "first_loss": sum(result.losses[:window]) / window,
              "last_loss": sum(result.losses[-window:]) / window,
              "test_accuracy": result.test_accuracy,
              "compute_cycles": sum(result.compute_cycles),
              "sync_cycles": sum(result.sync_cycles), "sync_bytes": sum(result.sync_bytes),
              "samples_per_megacycle": result.samples_per_megacycle}
    print(f"ParaX CNN on digits: {args.instances} instances x {args.batch} samples, "
          f"{args.strategy}, {steps} steps, lr {args.lr:g}")
    print(f"  mean loss of the first {window} steps {report['first_loss']:.4f}, of the last "
          f"{window} {report['last_loss']:.4f}")
    print(f"  test accuracy {100 * result.test_accuracy:.1f} % (BN's running statistics)")
    print(f"  cycles: compute {report['compute_cycles']:,}, synchronisation (gradient and "
          f"BN's running statistics) {report['sync_cycles']:,} ({report['sync_bytes']:,} DMA "
          f"bytes); "
          f"{report['samples_per_megacycle']:.1f} samples / Mcycle")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)
    return 0
