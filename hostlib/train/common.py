"""What every module of the training stack shares: its error class and the blob dtype."""
from __future__ import annotations

import hashlib

import numpy as np

from ...errors import ArgumentError

DTYPE = np.float32          # blobs, parameters and gradients (the VM runs float32 operators)
ALIGN = 128                 # bytes: DMA transaction size, thesis §7.1 aligned_malloc


class TrainError(ArgumentError):
    """A bad net, solver, data set or checkpoint: the message names the layer and the field."""


def stream_seconds(nbytes: int, config) -> float:
    """A memory-bound operator's time at the CG's DMA rate (one 128-B transaction per
    ``dma_transaction_cycles``), the bound of thesis §5.3."""
    return (config.dma_latency + nbytes / 128 * config.dma_transaction_cycles) / config.clock_hz


def digest(message) -> str:
    """SHA-256 of a protobuf message's deterministic serialisation (checkpoint identities)."""
    return hashlib.sha256(message.SerializeToString(deterministic=True)).hexdigest()
