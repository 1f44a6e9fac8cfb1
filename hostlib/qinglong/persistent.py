"""QingLong's persistent kernel (``kernels/qinglong/persistent_scale.s``): one launch serves a
stream of samples through a 3-slot DMA ring in every CPE's LDM (get k+1, compute k, put k-1),
so a sample costs max(T_in + T_out, T_c) once the ring is full instead of a launch each. The
first cut: y = alpha x in float64 or float32, every sample split evenly over the 64 CPEs."""
from __future__ import annotations

import functools
import numbers

import numpy as np

from ...errors import ArgumentTypeError
from ..dnn.common import machine_and_cgs
from ..runtime import Kernel
from .device import Block, Device, check_device, float64_array
from .net import QingLongError
from .package import PackageKernel, kernel_package

KERNEL = Kernel(("qinglong/persistent_scale.s",), "persistent_scale", "ring_ldm_end")
KERNELS = {np.dtype(np.float64): KERNEL,
           np.dtype(np.float32): Kernel(KERNEL.sources, "persistent_scale_s", KERNEL.ldm_end)}
FC_SOURCE = "qinglong/persistent_fc.s"
SLOTS = 3
VECTOR_ELEMENTS = 4


class PersistentScale:
    """y = alpha x for samples of `n` elements of `dtype` (float64 or float32; float32 computed
    as ``scale`` does: widened, multiplied by the double alpha, rounded once) on `device` (its
    machine's one core group)."""

    def __init__(self, alpha, n: int, device: Device, dtype=np.float64):
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise ArgumentTypeError(f"PersistentScale: alpha must be a real number, got {alpha!r}")
        check_device(device, "PersistentScale")
        machine_and_cgs(device.machine, 1)
        try:
            self.kernel = KERNELS[np.dtype(dtype)]
        except (TypeError, KeyError):
            raise QingLongError(f"PersistentScale: dtype must be float64 or float32, got "
                                f"{dtype!r}") from None
        config = device.machine.config
        quantum = config.num_cpes * VECTOR_ELEMENTS
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1 or n % quantum:
            raise QingLongError(f"PersistentScale: n must be a positive multiple of {quantum} "
                                f"(a vector of {VECTOR_ELEMENTS} elements per CPE), got {n!r}")
        self.alpha, self.n, self.device = float(alpha), int(n), device
        self.nbytes = self.n * np.dtype(dtype).itemsize
        self.share = self.nbytes // config.num_cpes
        arena = self.kernel.arena(config.ldm_bytes, nargs=1)
        ring = SLOTS * self.share
        if ring > arena.free:
            raise QingLongError(f"PersistentScale: the ring of {SLOTS} x {self.share} bytes "
                                f"per CPE ({ring} B; {ring * config.num_cpes} B over the "
                                f"{config.num_cpes} LDMs) does not fit the {arena.free} B free "
                                f"of each LDM")
        self.chunk = KERNEL.symbol("CHUNK")

    def compute(self, inputs, outputs, engine: str = "c"):
        """Run the stream (any length): sample k from block inputs[k] to block outputs[k];
        returns Stats of the one launch (details: samples, the descriptor table's copy
        cycles)."""
        if not isinstance(inputs, (list, tuple)) or not isinstance(outputs, (list, tuple)) \
                or len(inputs) != len(outputs) or not inputs:
            raise QingLongError("PersistentScale.compute: inputs and outputs must be non-empty "
                                "lists of Blocks, one each per sample")
        for name, blocks in (("inputs", inputs), ("outputs", outputs)):
            for index, block in enumerate(blocks):
                self.device.check(block, self.nbytes, f"compute: {name}[{index}]")
        count = len(inputs)
        table = address_pairs(inputs, outputs, self.chunk)
        table_block = self.device.malloc(table.nbytes)
        record = KERNEL.record("Q_", "JOB_BYTES")
        job_block = self.device.malloc(record.nbytes)
        try:
            copy = self.device.copy_in(table_block, table)
            copy += self.device.copy_in(job_block, record.new(
                count=count, share=self.share, alpha=self.alpha, table=table_block.address))
            stats = self.kernel.launch(self.device.machine, [job_block.address],
                                  flops=count * self.n, engine=engine,
                                  details=dict(samples=count, copy_cycles=copy))
        finally:
            self.device.free(table_block)
            self.device.free(job_block)
        return stats


def address_pairs(inputs, outputs, chunk: int):
    """The stream's (input, output) block address pairs, flat, zero-padded to whole chunks of
    `chunk` samples (the persistent kernels get their table a chunk at a time)."""
    pairs = np.zeros((-(-len(inputs) // chunk) * chunk, 2), np.int64)
    pairs[:len(inputs)] = [(i.address, o.address) for i, o in zip(inputs, outputs)]
    return pairs.ravel()


def transfer_cycles(config, nbytes: int, requests: int) -> float:
    """T_in + T_out of a sample of `nbytes` moved in and out in whole 128-byte lines by the
    CG's DMA engine as `requests` gets and as many puts (docs/timing.md "DMA": a line costs a
    get dma_transaction_cycles and a put dma_put_write_cycles of engine time, and each put waits
    dma_put_ack_cycles for its acknowledgement)."""
    lines = nbytes / config.dma_transaction_bytes
    return (lines * (config.dma_transaction_cycles + config.dma_put_write_cycles)
            + requests * config.dma_put_ack_cycles)


@functools.lru_cache(maxsize=None)
def fc_package(inputs: int, rows: int, stages: int = 3):
    """kernels/qinglong/persistent_fc.s for `inputs` columns and `rows` rows per CPE, assembled
    and linked once (`stages`: 3 the kernel, 1 its compute alone, 2 its transfers alone)."""
    return kernel_package(FC_SOURCE, FC_IN=inputs, FC_ROWS=rows, FC_STAGES=stages)


class PersistentFC:
    """y = w x for samples x of w.shape[1] float64 on `device` (its machine's one core group):
    w (O, I) float64 with O a multiple of the CPEs (64) and I of 16, resident in the LDMs (each
    CPE holds O / 64 rows, DMA'd once per launch from the package's constants). What does not
    fit is refused with the bytes: w over the aggregate LDM, or a CPE's rows with the x ring."""

    def __init__(self, w, device: Device, stages: int = 3):
        w = float64_array(w, 2, "PersistentFC: w")
        check_device(device, "PersistentFC")
        if stages not in (1, 2, 3) or isinstance(stages, bool):
            raise QingLongError(f"PersistentFC: stages must be 3 (the kernel), 1 (its compute "
                                f"alone) or 2 (its transfers alone), got {stages!r}")
        machine_and_cgs(device.machine, 1)
        config = device.machine.config
        outputs, inputs = w.shape
        cpes, ldm = config.num_cpes, config.ldm_bytes
        if not outputs or outputs % cpes or not inputs or inputs % 16:
            raise QingLongError(f"PersistentFC: w must be (O, I) with O a multiple of the "
                                f"{cpes} CPEs and I of 16, got {w.shape}")
        if w.nbytes > cpes * ldm:
            raise QingLongError(f"PersistentFC: w of {outputs} x {inputs} float64 is {w.nbytes} "
                                f"B, more than the aggregate LDM ({cpes} x {ldm} B = "
                                f"{cpes * ldm} B): it cannot stay resident")
        package = fc_package(inputs, outputs // cpes, stages)
        for parameter in ("mesh_rows", "mesh_cols"):
            needed = package.program.address_of(f"REQ_{parameter.upper()}")
            if getattr(config, parameter) != needed:
                raise QingLongError(f"PersistentFC: the kernel needs {parameter} = {needed}; "
                                    f"this machine has {getattr(config, parameter)}")
        used = package.program.address_of("fc_ldm_end")
        if used > ldm:
            rows = outputs // cpes
            raise QingLongError(
                f"PersistentFC: each CPE needs {used} B of LDM ({rows} rows of w: "
                f"{w.nbytes // cpes} B, the 3-slot x ring: {3 * inputs * 8} B, and the rest) but "
                f"has {ldm} B; w of {w.nbytes} B fits the aggregate {cpes * ldm} B only without "
                "its ring")
        self.w, self.device = w, device
        self.kernel = PackageKernel(package.with_constant("weights", w.tobytes()),
                                    "persistent_fc", device)
        self.chunk = package.program.address_of("CHUNK")

    def copy_constant(self) -> int:
        return self.kernel.copy_constant()

    def compute(self, inputs, outputs, engine: str = "c"):
        """One launch over the stream of any length: sample k from block inputs[k] to block
        outputs[k]; returns its Stats (details: samples, the table's and I/O table's copy
        cycles). The table: the count word, then (input, output) address pairs, zero-padded to
        whole chunks of the kernel's CHUNK samples (the kernel gets a chunk at a time)."""
        if not isinstance(inputs, (list, tuple)) or not isinstance(outputs, (list, tuple)) \
                or len(inputs) != len(outputs) or not inputs:
            raise QingLongError("PersistentFC.compute: inputs and outputs must be non-empty "
                                "lists of Blocks, one each per sample")
        outputs_n, inputs_n = self.w.shape
        for name, blocks, nbytes in (("inputs", inputs, inputs_n * 8),
                                     ("outputs", outputs, outputs_n * 8)):
            for index, block in enumerate(blocks):
                self.device.check(block, nbytes, f"compute: {name}[{index}]")
        table = np.concatenate(([len(inputs)], address_pairs(inputs, outputs, self.chunk)))
        block = self.device.malloc(table.nbytes)
        try:
            copy = self.device.copy_in(block, table)
            stats = self.kernel.compute({"samples": block}, engine=engine,
                                        flops=2 * self.w.size * len(inputs))
        finally:
            self.device.free(block)
        stats.details.update(samples=len(inputs), copy_cycles=copy + stats.details["copy_cycles"])
        return stats
