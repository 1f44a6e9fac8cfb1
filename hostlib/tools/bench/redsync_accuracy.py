"""RedSync's accuracy on the digits (thesis Table 8.1's shape), run under MPI:

    mpiexec -n 4 python -m swsim.hostlib.tools.bench.redsync_accuracy [--quick] [--json FILE]

LeNet (examples/lenet.prototxt with lenet_solver.prototxt: momentum 0.9, weight decay, the inv
policy) trained from the same seed by dense allreduce (SGD), RGC and RGC+ASQ at densities 1 %
and 0.1 % (BINARY search, 10 dense warm-up steps, every blob sent sparse: on this small net the
eq. 8-1/8-2 model would send every blob dense, which would make RGC the dense run), then tested
on the 360 held-out images; with the bytes each rank sent in all. Rank 0 prints the table.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ...train import Solver, example, parse_net, parse_solver
from ...train.allreduce import GradientAllreduce, world
from ...train.redsync import Compression

STEPS, QUICK_STEPS = 150, 30
WARMUP = 10
RUNS = (("SGD (dense)", None),
        ("RGC 1%", Compression("RGC", 0.01, warmup_iter=WARMUP, layers="sparse")),
        ("RGC+ASQ 1%", Compression("RGC", 0.01, quantize="ASQ", warmup_iter=WARMUP,
                                   layers="sparse")),
        ("RGC 0.1%", Compression("RGC", 0.001, warmup_iter=WARMUP, layers="sparse")),
        ("RGC+ASQ 0.1%", Compression("RGC", 0.001, quantize="ASQ", warmup_iter=WARMUP,
                                     layers="sparse")))


def train(comm, name: str, compression, steps: int) -> dict:
    trainer = Solver(parse_net(example("lenet")), parse_solver(example("lenet_solver")),
                     shard=(comm.Get_rank(), comm.Get_size()),
                     gradient_reducer=GradientAllreduce(comm), compression=compression)
    sent = 0
    for _ in range(steps):
        result = trainer.step()
        sent += trainer.gradient_reducer.step_bytes
    return {"run": name, "steps": steps, "ranks": comm.Get_size(),
            "final_loss": result.loss, "test_accuracy": trainer.test(),
            "bytes_sent": comm.allgather(sent)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps, not "
                        f"{STEPS}")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    comm = world()
    steps = QUICK_STEPS if args.quick else STEPS
    rows = []
    for name, compression in RUNS:          # each row printed when done: the runs are long
        rows.append(train(comm, name, compression, steps))
        if comm.Get_rank() == 0:
            row, dense = rows[-1], np.mean(rows[0]["bytes_sent"])
            print(f"{row['run']:14} test accuracy {100 * row['test_accuracy']:6.2f} %  "
                  f"loss {row['final_loss']:.4f}  bytes per rank {row['bytes_sent']} "
                  f"({100 * np.mean(row['bytes_sent']) / dense:.2f} % of dense)", flush=True)
    if comm.Get_rank() == 0:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
