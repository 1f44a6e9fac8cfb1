"""Run by tests/test_allreduce_mpi.py under `mpiexec -n 5`: the world is split into groups of
5, then 4 + 1, then 3 + 2 ranks, so one launch allreduces over p = 1..5. Each group checks, for
every algorithm and a few sizes, that all its ranks hold the same bits and that they equal the
float64 sum within float32 reassociation. World rank 0 prints one line per checked case: the
groups' lines are gathered to it, since lines printed by several ranks at once can interleave."""
import sys

import numpy as np
from mpi4py import MPI

from swsim.hostlib.train import allreduce as ar

SIZES = (1, 4, 1003)          # fewer elements than ranks, and a ragged split
SUPERNODE = 2                 # virtual supernodes of 2 ranks: Topawa's mapping is not identity


def check(comm) -> list:
    """The group's result lines (on its rank 0; empty elsewhere)."""
    p = comm.Get_size()
    lines = []
    for algorithm in ar.ALGORITHMS:
        for n in SIZES:
            rng = np.random.default_rng(1000 * comm.Get_rank() + n)
            mine = rng.standard_normal(n).astype(np.float32)
            total, _ = ar.allreduce(mine, comm, algorithm, supernode_size=SUPERNODE)
            everyone = np.array(comm.allgather(mine), np.float64)
            exact = everyone.sum(axis=0)
            bound = p * np.finfo(np.float32).eps * np.abs(everyone).sum(axis=0)
            identical = len(set(comm.allgather(total.tobytes()))) == 1
            close = bool((np.abs(total - exact) <= bound + 1e-30).all())
            if comm.Get_rank() == 0:
                lines.append(f"p={p} {algorithm} n={n} identical={identical} close={close}")
    return lines


def main():
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    if world.Get_size() != 5:
        sys.exit("run with mpiexec -n 5")
    for groups in ((0, 0, 0, 0, 0), (0, 0, 0, 0, 1), (0, 0, 0, 1, 1)):
        comm = world.Split(groups[rank], rank)
        gathered = world.gather(check(comm), root=0)
        comm.Free()
        if rank == 0:
            print("\n".join(line for lines in gathered for line in lines), flush=True)


if __name__ == "__main__":
    main()
