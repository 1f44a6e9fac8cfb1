"""Run by tests/test_train_redsync.py under `mpiexec -n 2`: each rank compresses its own
gradients of one layer for 3 iterations, the messages are exchanged by sparse_allgather and
added into the weights; rank 0 prints one JSON line: whether every rank holds the same weights,
and whether they equal a float32 replay of every rank's messages."""
import json

import numpy as np
from mpi4py import MPI

from swsim.hostlib.train.redsync import (Compression, LayerResidual, decompress,
                                         sparse_allgather, unpack)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
config = Compression("RGC", 0.01, "BINARY").check(size)
layer = LayerResidual(800, config)
weights = np.random.default_rng(7).standard_normal(800).astype(np.float32)
replay = weights.copy()
rng = np.random.default_rng(rank)
for iteration in range(3):
    messages = sparse_allgather(layer.compress(rng.standard_normal(800).astype(np.float32),
                                               iteration), comm)
    weights, _ = decompress(weights, messages, -0.1)
    for message in messages:
        indices, values = unpack(message)
        replay[indices] = replay[indices] + np.float32(-0.1) * values
same = len(set(comm.allgather(weights.tobytes()))) == 1
if rank == 0:
    print(json.dumps({"ranks": size, "identical": same,
                      "replayed": bool(np.array_equal(weights, replay))}))
