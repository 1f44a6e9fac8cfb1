"""Run by tests/test_train_redsync.py under `mpiexec -n 2`: the MLP trained with RedSync
(momentum correction, every blob sparse, one warm-up step) for 4 steps, twice, and once as 2
steps + checkpoint + a new Solver resumed for 2 more; then 4 steps re-planning every step, as
the solver prototxt asks; rank 0 prints one JSON line."""
import json
import sys
import tempfile

import numpy as np
from mpi4py import MPI

from swsim.hostlib.train import Solver, example, parse_net, parse_solver
from swsim.hostlib.train.allreduce import GradientAllreduce
from swsim.hostlib.train.prototxt import SolverParameter
from swsim.hostlib.train.redsync import Compression

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
directory = comm.bcast(tempfile.mkdtemp() if rank == 0 else None)
compression = Compression("RGC", 0.05, "BINARY", warmup_iter=1, layers="sparse")


def solver():
    return Solver(parse_net(example("mlp")),
                  SolverParameter(base_lr=0.1, momentum=0.9, weight_decay=1e-4, random_seed=3),
                  shard=(rank, size), gradient_reducer=GradientAllreduce(comm),
                  compression=compression)


def train(trainer, steps):
    sent = [trainer.step() and trainer.gradient_reducer.step_bytes for _ in range(steps)]
    return trainer.net.params.buffer.copy(), sent


overlapped = solver()
straight, sent = train(overlapped, 4)
again, _ = train(solver(), 4)
first = solver()
train(first, 2)
first.save(directory)                    # collective: rank 0 writes every rank's residuals
residual = np.concatenate([r.residual for r in first.gradient_reducer.residuals])
resumed = solver()
resumed.restore(directory)
resumed_params, _ = train(resumed, 2)
replanning = Solver(parse_net(example("mlp")), parse_solver(
    "base_lr: 0.1 momentum: 0.9 random_seed: 3 "
    "compression { method: RGC density: 0.05 warmup_iter: 1 replan_every: 1 }"),
    shard=(rank, size), gradient_reducer=GradientAllreduce(comm))
# a replan every step from the warm-up's end + 1 (steps 3, 4): each probes the dense blobs
probed = ["(redsync probe)" in replanning.step().layer_seconds for _ in range(4)]
replanned = comm.allgather((replanning.net.params.buffer.tobytes(),
                            replanning.gradient_reducer.switches))
params = comm.allgather(straight.tobytes())
if rank == 0:
    print(json.dumps({
        "ranks": size, "same_on_every_rank": len(set(params)) == 1,
        "deterministic": bool(np.array_equal(straight, again)),
        "resumed_bit_exact": bool(np.array_equal(straight, resumed_params)),
        "residual_kept": bool(np.count_nonzero(residual) > 0),
        "sparse_bytes_below_dense": sent[1] < sent[0] / 4,
        # ip2's allgather hidden behind ip1's backward (the last sparse step)
        "overlap_saves_time": overlapped.overlap_saved > 0,
        "replanned_after_the_warm_up": probed == [False, False, True, True],
        "replanned_alike_on_every_rank": replanned[0] == replanned[1]}))
    sys.stdout.flush()
