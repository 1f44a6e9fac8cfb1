"""`swsim bench redsync --accuracy`: RedSync's accuracy on the digits (thesis Table 8.1's
shape). The command launches `mpiexec -n RANKS` on this module itself (``run``); under MPI
(``main``) every rank trains the same net from the same seed once per run — dense allreduce
(SGD), RGC and RGC+ASQ at densities 1 % and 0.1 % (BINARY search, the net's dense warm-up,
every blob sent sparse: on these small nets the eq. 8-1/8-2 model would send every blob dense,
which would make RGC the dense run) and the diagnosis runs of docs/redsync.md (DGC's momentum
masking or correction off) — testing on the held-out images every `test_every` steps, with
the bytes each rank sent. Rank 0 prints one JSON line per run.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

# net: its solver (examples/): the LSTM example reads each digit as 8 steps of one row
NETS = {"lenet": "lenet_solver", "mlp": "lenet_solver", "lstm": "lstm_solver"}
STEPS, QUICK_STEPS = 150, 30
RANKS = 4                     # as Table 8.1's Cifar10 and LSTM runs
WARMUP = 10                   # dense warm-up steps of the MLP and the LSTM: enough at 0.1 %
# the thesis' remedy for RGC that would not converge (§8.2.5): dense SGD first, 5 epochs for its
# ResNet-50 and VGG-16; LeNet needs it (at 10 steps it diverges at 0.1 %, docs/redsync.md)
WARMUP_EPOCHS = {"lenet": 5}
# run id: (its name in the table, Compression's arguments after "RGC" or None for dense SGD);
# every RGC run: BINARY search, the net's dense warm-up (default_warmup), every blob sparse
RUNS = {"sgd": ("SGD (dense)", None),
        "rgc-1": ("RGC 1%", dict(density=0.01)),
        "asq-1": ("RGC+ASQ 1%", dict(density=0.01, quantize="ASQ")),
        "rgc-0.1": ("RGC 0.1%", dict(density=0.001)),
        "asq-0.1": ("RGC+ASQ 0.1%", dict(density=0.001, quantize="ASQ")),
        # the diagnosis of docs/redsync.md: DGC's momentum tricks off
        "rgc-1-nomask": ("RGC 1% no masking", dict(density=0.01, momentum_masking=False)),
        "rgc-1-nocorr": ("RGC 1% no correction", dict(density=0.01, momentum_masking=False,
                                                      momentum_correction=False))}
TABLE_RUNS = ("sgd", "rgc-1", "asq-1", "rgc-0.1", "asq-0.1")
QUICK_RUNS = ("sgd", "rgc-1")


def warmup_steps(net: str, epochs: float) -> int:
    """The steps of `epochs` passes over the net's training images (its TRAIN Data layer's
    source and batch size), rounded up."""
    from ...train import example, parse_net
    from ...train.caffe_pb2 import TRAIN
    from ...train.data import Dataset
    layer = next(layer for layer in parse_net(example(net)).layer if layer.type == "Data"
                 and any(rule.phase == TRAIN for rule in layer.include))
    images = len(Dataset(layer.data_param.source, "TRAIN"))
    return math.ceil(epochs * images / layer.data_param.batch_size)


def default_warmup(net: str) -> int:
    """The RGC runs' dense warm-up steps for `net`: WARMUP_EPOCHS, else WARMUP steps."""
    return warmup_steps(net, WARMUP_EPOCHS[net]) if net in WARMUP_EPOCHS else WARMUP


def compression(run: str, warmup: int = WARMUP):
    """The run's ``redsync.Compression`` (None: dense SGD) with `warmup` dense steps."""
    from ...train.redsync import Compression
    options = RUNS[run][1]
    return None if options is None else Compression("RGC", warmup_iter=warmup, layers="sparse",
                                                    **options)


def train(comm, net: str, compression, steps: int, test_every: int, seed=None) -> dict:
    """One run on every rank: {"accuracy": {step: test accuracy}, ...} (the same on every
    rank: the weights are)."""
    from ...train import Solver, example, parse_net, parse_solver
    from ...train.allreduce import GradientAllreduce
    solver = parse_solver(example(NETS[net]))
    if seed is not None:
        solver.random_seed = seed
    trainer = Solver(parse_net(example(net)), solver,
                     shard=(comm.Get_rank(), comm.Get_size()),
                     gradient_reducer=GradientAllreduce(comm), compression=compression)
    sent, accuracy = 0, {}
    for step in range(1, steps + 1):
        result = trainer.step()
        sent += trainer.gradient_reducer.step_bytes
        if step % test_every == 0 or step == steps:
            accuracy[step] = trainer.test()
    row = {"steps": steps, "ranks": comm.Get_size(), "final_loss": result.loss,
           "accuracy": accuracy, "bytes_sent": comm.allgather(sent)}
    if compression is not None:      # this rank's plan re-predicted from its selections
        row["replan"] = trainer.gradient_reducer.format_replan()
    return row


def main(argv=None) -> int:
    """Under mpiexec: every run of `--runs` in turn; rank 0 prints a JSON line per run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", choices=list(NETS), default="lenet")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--test-every", type=int, default=STEPS)
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(TABLE_RUNS))
    parser.add_argument("--seed", type=int, help="the solver's random_seed instead")
    parser.add_argument("--warmup", type=int, help="dense warm-up steps (default_warmup)")
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = default_warmup(args.net)
    from ...train.allreduce import world
    comm = world()
    for run_id in args.runs:
        row = train(comm, args.net, compression(run_id, args.warmup), args.steps,
                    args.test_every, args.seed)
        if comm.Get_rank() == 0:
            print(json.dumps(dict(run=run_id, name=RUNS[run_id][0], net=args.net,
                                  seed=args.seed, warmup=args.warmup, **row)), flush=True)
    return 0


def run(net: str = "lenet", steps: int = STEPS, runs=TABLE_RUNS, ranks: int = RANKS,
        test_every: int = None, seed: int = None, warmup: int = None, progress=None) -> list:
    """Rows of ``main``'s runs, launched as `mpiexec -n ranks` on this module; `progress(row)`
    as each run ends (the runs are long: minutes each)."""
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        raise RuntimeError("no mpiexec beside this python: pip install -e '.[mpi]'")
    command = [str(mpiexec), "-n", str(ranks), sys.executable, "-m", __name__, "--net", net,
               "--steps", str(steps), "--test-every", str(test_every or steps),
               *(["--warmup", str(warmup)] if warmup is not None else []),
               *(["--seed", str(seed)] if seed is not None else []), "--runs", *runs]
    rows = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as ranks_process:
        for line in ranks_process.stdout:
            rows.append(json.loads(line))
            if progress:
                progress(rows[-1])
        error = ranks_process.stderr.read()
    if ranks_process.returncode:
        raise RuntimeError(f"mpiexec -n {ranks} failed: {error[-1000:]}")
    return rows


def mean_bytes(row: dict) -> float:
    """The bytes a rank sent in the run, averaged over the ranks."""
    return sum(row["bytes_sent"]) / len(row["bytes_sent"])


def format_row(row: dict, dense_bytes=None) -> str:
    """One run: its accuracy at every test, loss, bytes per rank and (given the dense run's
    bytes per rank) their share of dense; rank 0's plan re-predicted for the RGC runs."""
    accuracy = "  ".join(f"{100 * a:6.2f} % @{step}" for step, a in row["accuracy"].items())
    share = (f" ({100 * mean_bytes(row) / dense_bytes:.2f} % of dense)" if dense_bytes else "")
    return (f"{row['name']:22} {accuracy}  loss {row['final_loss']:.4f}  bytes per rank "
            f"{min(row['bytes_sent'])}..{max(row['bytes_sent'])}{share}"
            + (f"\n  rank 0's plan re-predicted from its measured selections:\n  "
               + row["replan"].replace("\n", "\n  ") if "replan" in row else ""))


if __name__ == "__main__":
    raise SystemExit(main())
