"""RedSync's per-layer residual compression (thesis Algorithm 10, ch. 8; docs/redsync.md), the
building blocks the Solver is to call: the residual V += G, the communication set chosen on the
CPEs (hostlib/dnn/select.py), the packed message (length, indices, values — or one mean with
ASQ), V kept where not sent, and the received sets added into the dense update on the CPEs
(``decompress``). Exchanging the messages (one Allgather(v)) is the caller's.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ...vm import Machine
from .. import dnn
from ..dnn.select import scatter_add, select
from .common import TrainError

METHODS = ("NONE", "RGC")
SELECTS = {"TRIMMED": "trimmed", "BINARY": "binary", "SAMPLED": "sampled", "RADIX": "radix"}
QUANTIZE = ("NONE", "ASQ")
SEARCH_EVERY = 5              # the sampled search reruns every 5 iterations (thesis §8.2.1)
ASQ_FLAG = 1 << 31            # in the message's length word: one mean follows the indices


@dataclass(frozen=True)
class Compression:
    """The solver's ``compression { method density select quantize warmup_iter }``."""
    method: str = "NONE"
    density: float = 0.001
    select: str = "BINARY"
    quantize: str = "NONE"
    warmup_iter: int = 0

    def check(self, ranks: int) -> "Compression":
        """The configuration if it can run on `ranks` ranks; else a TrainError saying why."""
        for name, value, allowed in (("method", self.method, METHODS),
                                     ("select", self.select, tuple(SELECTS)),
                                     ("quantize", self.quantize, QUANTIZE)):
            if value not in allowed:
                raise TrainError(f"compression {name} must be one of {', '.join(allowed)}, "
                                 f"got {value!r}")
        if isinstance(self.density, bool) or not isinstance(self.density, numbers.Real) or \
                not 0 < self.density <= 1:
            raise TrainError(f"compression density must be in (0, 1], got {self.density!r}")
        if isinstance(self.warmup_iter, bool) or not isinstance(self.warmup_iter,
                                                                 numbers.Integral) \
                or self.warmup_iter < 0:
            raise TrainError(f"compression warmup_iter must be an integer >= 0, got "
                             f"{self.warmup_iter!r}")
        if self.quantize == "ASQ" and self.select == "SAMPLED":
            raise TrainError("compression: ASQ cannot be combined with the sampled search "
                             "(the reused threshold is for |x|, ASQ alternates the sign)")
        if self.quantize == "ASQ" and self.method == "NONE":
            raise TrainError("compression: quantize ASQ needs method RGC")
        if self.method == "RGC" and ranks < 2:
            raise TrainError(f"compression RGC needs at least 2 ranks (there is nothing to "
                             f"synchronise), got {ranks}")
        return self


def pack(indices, values, mean=None) -> np.ndarray:
    """One message as int32 words: the length (| ASQ_FLAG with a mean), the indices, then the
    values' bits or the mean's."""
    indices = np.asarray(indices, np.int32)
    head = np.array([len(indices) | (ASQ_FLAG if mean is not None else 0)], np.uint32)
    tail = np.float32([mean]) if mean is not None else np.asarray(values, np.float32)
    return np.concatenate([head.view(np.int32), indices, tail.view(np.int32)])


def unpack(message) -> tuple:
    """(indices int32, values float32) of a message made by `pack` (ASQ: the mean repeated)."""
    message = np.asarray(message, np.int32)
    head = int(message[0].view(np.uint32))
    count, asq = head & (ASQ_FLAG - 1), bool(head & ASQ_FLAG)
    expected = 1 + count + (1 if asq else count)
    if len(message) != expected:
        raise TrainError(f"a compressed message of {count} elements must have {expected} "
                         f"words, got {len(message)}")
    indices = message[1:1 + count]
    tail = message[1 + count:].view(np.float32)
    return indices, (np.full(count, tail[0], np.float32) if asq else tail.copy())


class LayerResidual:
    """One layer's residual V and its compression (Algorithm 10's inner loop body)."""

    def __init__(self, size: int, config: Compression, *, output_layer: bool = False,
                 machine=None, engine: str = "c"):
        self.config = config
        self.residual = np.zeros(int(size), np.float32)
        self.k = max(1, round(config.density * self.residual.size))
        self.quantize = config.quantize == "ASQ" and not output_layer   # never the output
        self.threshold = None                   # the sampled search's, between searches
        self.machine = machine or Machine()
        self.engine = engine

    def compress(self, grad, iteration: int) -> np.ndarray:
        """V += grad; the communication set of V packed; V zeroed where sent."""
        grad = np.asarray(grad, np.float32).reshape(-1)
        if grad.size != self.residual.size:
            raise TrainError(f"gradient of {grad.size} elements for a residual of "
                             f"{self.residual.size}")
        run = dict(machine=self.machine, engine=self.engine)
        self.residual = dnn.add(self.residual, grad, **run)[0]
        method, threshold = SELECTS[self.config.select], None
        if method == "sampled":
            if iteration % SEARCH_EVERY == 0 or self.threshold is None:
                method = "binary"
            else:
                threshold = float(self.threshold)
        sign = ("positive" if iteration % 2 == 0 else "negative") if self.quantize else "abs"
        sel = select(self.residual, self.k, method=method, sign=sign, threshold=threshold,
                     **run)
        if method == "binary":
            self.threshold = sel.threshold
        if sel.nnz:                              # v + (-1) v = 0 exactly: sent, so cleared
            self.residual = scatter_add(self.residual, [(sel.indices, sel.values)], -1.0,
                                        **run)[0]
        return pack(sel.indices, sel.values, np.float32(sel.mean) if self.quantize else None)


def decompress(dense, messages, alpha: float, *, machine=None, engine: str = "c"):
    """dense + alpha · (every message's set), added in message order on the CPEs."""
    sets = [unpack(message) for message in messages]
    sets = [s for s in sets if len(s[0])]
    if not sets:
        return np.asarray(dense, np.float32).copy()
    return scatter_add(dense, sets, alpha, machine=machine, engine=engine)[0]


def sparse_allgather(message, comm) -> list:
    """Every rank's packed message, in rank order, over the mpi4py communicator `comm`: the
    message lengths by one allgather, the messages by one Allgatherv (they differ in length
    with the binary search)."""
    from mpi4py import MPI
    message = np.ascontiguousarray(message, np.int32)
    counts = np.array(comm.allgather(len(message)), np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    gathered = np.empty(int(counts.sum()), np.int32)
    comm.Allgatherv(message, [gathered, counts, offsets, MPI.INT])
    return np.split(gathered, np.cumsum(counts)[:-1])
