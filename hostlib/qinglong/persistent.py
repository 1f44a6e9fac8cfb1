"""QingLong's persistent kernel (``kernels/qinglong/persistent_scale.s``): one launch serves a
stream of samples through a 3-slot DMA ring in every CPE's LDM (get k+1, compute k, put k-1),
so a sample costs max(T_in + T_out, T_c) once the ring is full instead of a launch each. The
first cut: y = alpha x in float64, every sample split evenly over the 64 CPEs."""
from __future__ import annotations

import numbers

import numpy as np

from ...errors import ArgumentTypeError
from ..dnn.common import machine_and_cgs
from ..runtime import Kernel
from .device import Block, Device
from .net import QingLongError

KERNEL = Kernel(("qinglong/persistent_scale.s",), "persistent_scale", "ring_ldm_end")
SLOTS = 3
VECTOR_BYTES = 32


class PersistentScale:
    """y = alpha x for samples of `n` float64 on `device` (its machine's one core group)."""

    def __init__(self, alpha, n: int, device: Device):
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise ArgumentTypeError(f"PersistentScale: alpha must be a real number, got {alpha!r}")
        if not isinstance(device, Device):
            raise ArgumentTypeError(f"PersistentScale: device must be a Device, got "
                                    f"{type(device).__name__}")
        machine_and_cgs(device.machine, 1)
        config = device.machine.config
        quantum = config.num_cpes * VECTOR_BYTES // 8
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1 or n % quantum:
            raise QingLongError(f"PersistentScale: n must be a positive multiple of {quantum} "
                                f"(a 32-byte vector per CPE), got {n!r}")
        self.alpha, self.n, self.device = float(alpha), int(n), device
        self.share = self.n * 8 // config.num_cpes
        arena = KERNEL.arena(config.ldm_bytes, nargs=1)
        ring = SLOTS * self.share
        if ring > arena.free:
            raise QingLongError(f"PersistentScale: the ring of {SLOTS} x {self.share} bytes "
                                f"per CPE ({ring} B; {ring * config.num_cpes} B over the "
                                f"{config.num_cpes} LDMs) does not fit the {arena.free} B free "
                                f"of each LDM")
        self.max_samples = KERNEL.symbol("MAX_SAMPLES")

    def compute(self, inputs, outputs, engine: str = "c"):
        """Run the stream: sample k from block inputs[k] to block outputs[k]; returns Stats of
        the one launch (details: samples, the descriptor table's copy cycles)."""
        if not isinstance(inputs, (list, tuple)) or not isinstance(outputs, (list, tuple)) \
                or len(inputs) != len(outputs) or not 1 <= len(inputs) <= self.max_samples:
            raise QingLongError(f"PersistentScale.compute: inputs and outputs must be lists of "
                                f"1..{self.max_samples} Blocks, one each per sample")
        for name, blocks in (("inputs", inputs), ("outputs", outputs)):
            for index, block in enumerate(blocks):
                self.device.check(block, self.n * 8, f"compute: {name}[{index}]")
        count = len(inputs)
        table = np.array([b.address for b in list(inputs) + list(outputs)], np.int64)
        table_block = self.device.malloc(table.nbytes)
        record = KERNEL.record("Q_", "JOB_BYTES")
        job_block = self.device.malloc(record.nbytes)
        try:
            copy = self.device.copy_in(table_block, table)
            copy += self.device.copy_in(job_block, record.new(
                count=count, share=self.share, alpha=self.alpha, table=table_block.address))
            stats = KERNEL.launch(self.device.machine, [job_block.address],
                                  flops=count * self.n, engine=engine,
                                  details=dict(samples=count, copy_cycles=copy))
        finally:
            self.device.free(table_block)
            self.device.free(job_block)
        return stats


def transfer_cycles(config, nbytes: int, requests: int) -> float:
    """T_in + T_out of a sample of `nbytes` moved in and out in whole 128-byte lines by the
    CG's DMA engine as `requests` gets and as many puts (docs/timing.md "DMA": a line costs a
    get dma_transaction_cycles and a put dma_put_write_cycles of engine time, and each put waits
    dma_put_ack_cycles for its acknowledgement)."""
    lines = nbytes / config.dma_transaction_bytes
    return (lines * (config.dma_transaction_cycles + config.dma_put_write_cycles)
            + requests * config.dma_put_ack_cycles)
