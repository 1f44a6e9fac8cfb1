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
from ..runtime import Kernel, timed_run
from ..runtime.kernel import Record
from .device import Block, Device, check_device, float64_array
from .net import QingLongError
from .package import PackageKernel, kernel_package, kernel_program

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

    def compute(self, inputs, outputs, engine: str = "c"):
        """Run the stream (any length): sample k from block inputs[k] to block outputs[k];
        returns Stats of the one launch (details: samples, the descriptor table's copy
        cycles)."""
        check_stream("PersistentScale", self.device, inputs, outputs, self.nbytes, self.nbytes)
        return launch_stream(self.device, self.kernel.program, self.kernel.entry, inputs,
                             outputs, dict(share=self.share, alpha=self.alpha),
                             flops=len(inputs) * self.n, engine=engine)


def check_stream(who: str, device: Device, inputs, outputs, in_bytes: int, out_bytes: int):
    """Refuse a stream that is not two equally long, non-empty lists of device blocks of at
    least `in_bytes` / `out_bytes`."""
    if not isinstance(inputs, (list, tuple)) or not isinstance(outputs, (list, tuple)) \
            or len(inputs) != len(outputs) or not inputs:
        raise QingLongError(f"{who}.compute: inputs and outputs must be non-empty lists of "
                            "Blocks, one each per sample")
    for name, blocks, nbytes in (("inputs", inputs, in_bytes), ("outputs", outputs, out_bytes)):
        for index, block in enumerate(blocks):
            device.check(block, nbytes, f"compute: {name}[{index}]")


def launch_stream(device: Device, program, entry: str, inputs, outputs, fields: dict, *,
                  flops: int, engine: str):
    """One launch of a kernel on ring.inc's stream: the descriptor table and the job record
    (count, table and the kernel's `fields`) copied to the device, then freed; Stats' details:
    samples and those copies' cycles."""
    count = len(inputs)
    table = address_pairs(inputs, outputs, program.address_of("CHUNK"))
    record = Record(program, "Q_", "JOB_BYTES")
    table_block = device.malloc(table.nbytes)
    job_block = device.malloc(record.nbytes)
    try:
        copy = device.copy_in(table_block, table)
        copy += device.copy_in(job_block, record.new(count=count, table=table_block.address,
                                                     **fields))
        return timed_run(program, entry, [job_block.address], machine=device.machine,
                         flops=flops, engine=engine,
                         details=dict(samples=count, copy_cycles=copy))
    finally:
        device.free(table_block)
        device.free(job_block)


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
def fc_package(inputs: int, rows: int, stages: int = 3, element: int = 8):
    """kernels/qinglong/persistent_fc.s for `inputs` columns and `rows` rows per CPE, x and y
    of `element`-byte floats, assembled and linked once (`stages`: 3 the kernel, 1 its compute
    alone, 2 its transfers alone)."""
    return kernel_package(FC_SOURCE, FC_IN=inputs, FC_ROWS=rows, FC_ELEM=element,
                          FC_STAGES=stages)


class PersistentFC:
    """y = w x for samples x of w.shape[1] elements of `dtype` (float64, or float32: widened,
    the sums rounded once) on `device` (its machine's one core group): w (O, I), held in
    float64, with O a multiple of the CPEs (64) and I of 16, resident in the LDMs (each CPE
    holds O / 64 rows, DMA'd once per launch from the package's constants). What does not fit
    is refused with the bytes: w over the aggregate LDM, or a CPE's rows with the x ring."""

    def __init__(self, w, device: Device, stages: int = 3, dtype=np.float64):
        w = float64_array(w, 2, "PersistentFC: w")
        if dtype not in (np.float64, np.float32):
            raise QingLongError(f"PersistentFC: dtype must be float64 or float32, got {dtype!r}")
        self.dtype = np.dtype(dtype)
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
        package = fc_package(inputs, outputs // cpes, stages, self.dtype.itemsize)
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
                f"{w.nbytes // cpes} B, the 3-slot x ring: {3 * inputs * self.dtype.itemsize} B, "
                f"and the rest) but "
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
        outputs_n, inputs_n = self.w.shape
        element = self.dtype.itemsize
        check_stream("PersistentFC", self.device, inputs, outputs, inputs_n * element,
                     outputs_n * element)
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


CONV_SOURCE = "qinglong/persistent_conv.s"
CONV_CHANNEL_BLOCK = 8        # output channels a CPE sums at once (two vectors)
DISPLACEMENT = 1 << 15        # the kernel's sizes are ldi displacements


@functools.lru_cache(maxsize=None)
def conv_program(symbols: tuple):
    """kernels/qinglong/persistent_conv.s with the host's `symbols` ((name, value) pairs),
    assembled and linked once."""
    return kernel_program(CONV_SOURCE, **dict(symbols))


def _aligned32(nbytes: int) -> int:
    return -(-nbytes // 32) * 32


class PersistentConv:
    """y = conv(x, w) (stride 1, zero `padding` < K) for float32 samples x of `input_shape`
    (C_i, H, W) on `device` (its machine's one core group): w (C_o, C_i, K, K) float32, held in
    the LDMs in float64 (each CPE the weights of its output channels), sums in float64 rounded
    once to float32. CPE c computes output row c // G of the channels of group c % G, so H_o
    (= H + 2 padding - K + 1) must divide the CPEs (G = 64 / H_o groups) and C_o / G be a
    multiple of 8. What does not fit is refused with the bytes."""

    def __init__(self, w, input_shape, device: Device, padding: int = 0, stages: int = 3):
        check_device(device, "PersistentConv")
        machine_and_cgs(device.machine, 1)
        if stages not in (1, 2, 3) or isinstance(stages, bool):
            raise QingLongError(f"PersistentConv: stages must be 3 (the kernel), 1 (its compute "
                                f"alone) or 2 (its transfers alone), got {stages!r}")
        w = np.asarray(w)
        if w.dtype != np.float32 or w.ndim != 4 or w.shape[2] != w.shape[3] or not w.size:
            raise QingLongError(f"PersistentConv: w must be a float32 (C_o, C_i, K, K) array, "
                                f"got {w.dtype} {w.shape}")
        c_o, c_i, k, _ = w.shape
        if not isinstance(input_shape, tuple) or len(input_shape) != 3 \
                or input_shape[0] != c_i or min(input_shape) < 1:
            raise QingLongError(f"PersistentConv: input_shape must be (C_i = {c_i}, H, W), got "
                                f"{input_shape!r}")
        if isinstance(padding, bool) or not isinstance(padding, numbers.Integral) \
                or not 0 <= padding < k:
            raise QingLongError(f"PersistentConv: padding must be an integer in [0, K = {k}), "
                                f"got {padding!r}")
        _, h, width = input_shape
        h_o, w_o = h + 2 * padding - k + 1, width + 2 * padding - k + 1
        cpes, ldm = device.machine.config.num_cpes, device.machine.config.ldm_bytes
        groups = cpes // h_o if 0 < h_o <= cpes and cpes % h_o == 0 else 0
        if not groups or w_o < 1 or c_o % groups or (c_o // groups) % CONV_CHANNEL_BLOCK:
            raise QingLongError(
                f"PersistentConv: the output's {h_o} rows must divide the {cpes} CPEs and its "
                f"{c_o} channels split into {groups or '?'} groups of a multiple of "
                f"{CONV_CHANNEL_BLOCK}; got output {c_o} x {h_o} x {w_o}")
        c_g = c_o // groups
        in_bytes = _aligned32(c_i * k * width * 4)
        out_bytes = c_g * w_o * 4
        symbols = dict(CPES=cpes, CI=c_i, CG=c_g, K=k, PAD=padding, W=width, WO=w_o,
                       XTAB_BYTES=w_o * 40, W_BYTES=c_g * c_i * k * k * 8, IN_BYTES=in_bytes,
                       SLOT_BYTES=in_bytes + _aligned32(out_bytes), PUT_SIZE=out_bytes,
                       PUT_BLOCK=w_o * 4, PUT_STRIDE=(h_o - 1) * w_o * 4, RING_STAGES=stages)
        too_wide = {name: value for name, value in symbols.items() if value >= DISPLACEMENT}
        if too_wide:
            raise QingLongError(f"PersistentConv: sizes of {DISPLACEMENT} B or more: {too_wide}")
        program = conv_program(tuple(symbols.items()))
        used = program.address_of("conv_ldm_end")
        if used > ldm:
            raise QingLongError(
                f"PersistentConv: each CPE needs {used} B of LDM (its {c_g} channels' weights: "
                f"{symbols['W_BYTES']} B, the 3-slot ring: 3 x {symbols['SLOT_BYTES']} B, and "
                f"the rest) but has {ldm} B")
        self.program, self.device, self.w = program, device, w
        self.input_shape, self.output_shape = input_shape, (c_o, h_o, w_o)
        self.constants = self._constants(program, w, input_shape, padding, groups)
        self.block = None

    @staticmethod
    def _constants(program, w, input_shape, padding, groups) -> np.ndarray:
        """The constants the kernel DMAs once (persistent_conv.s): every CPE's entry, the
        column table and each group's weights [channel][tap row][tap column][channel]."""
        c_o, c_i, k, _ = w.shape
        _, h, width = input_shape
        h_o, w_o = h + 2 * padding - k + 1, width + 2 * padding - k + 1
        c_g, cpes = c_o // groups, h_o * groups
        tap_bytes = c_g * 8
        entry = Record(program, "P_", "P_BYTES")
        column = Record(program, "X_", "X_BYTES")
        weights = w.reshape(groups, c_g, c_i, k, k).transpose(0, 2, 3, 4, 1).astype(np.float64)
        params = np.zeros(cpes * entry.nbytes // 8, np.int64)
        columns = np.zeros(w_o * column.nbytes // 8, np.int64)
        group_bytes = weights[0].nbytes
        for cpe in range(cpes):
            row, group = divmod(cpe, groups)
            first, last = max(0, row - padding), min(h, row - padding + k)
            rows = last - first
            block = rows * width * 4
            entry.write(params, cpe * entry.nbytes, rows=rows, get_size=c_i * block,
                        get_block=block, get_stride=(h - rows) * width * 4,
                        out=(group * c_g * h_o + row) * w_o * 4,
                        wstart=(first - row + padding) * k * tap_bytes,
                        wskip=(k - rows) * k * tap_bytes,
                        weights=params.nbytes + columns.nbytes + group * group_bytes,
                        **{"in": first * width * 4})
        for x in range(w_o):
            first, last = max(0, x - padding), min(width, x - padding + k)
            taps = last - first
            column.write(columns, x * column.nbytes, w=(first - x + padding) * tap_bytes,
                         taps=taps, in_skip=(width - taps) * 4, w_skip=(k - taps) * tap_bytes,
                         **{"in": first * 4})
        return np.concatenate([params.view(np.uint8), columns.view(np.uint8),
                               weights.reshape(-1).view(np.uint8)])

    def copy_constant(self) -> int:
        """Allocate the constants on the device and copy them there, once; returns the copy's
        cycles."""
        if self.block is not None:
            raise QingLongError("PersistentConv.copy_constant: the constants are on the device "
                                "already")
        self.block = self.device.malloc(self.constants.nbytes)
        return self.device.copy_in(self.block, self.constants)

    def compute(self, inputs, outputs, engine: str = "c"):
        """One launch over the stream of any length: sample k from block inputs[k] to block
        outputs[k]; returns its Stats (details: samples, the table's and record's copies)."""
        if self.block is None:
            raise QingLongError("PersistentConv.compute: copy_constant first")
        nbytes = [int(np.prod(shape)) * 4 for shape in (self.input_shape, self.output_shape)]
        check_stream("PersistentConv", self.device, inputs, outputs, *nbytes)
        return launch_stream(self.device, self.program, "persistent_conv", inputs, outputs,
                             dict(const=self.block.address), engine=engine,
                             flops=2 * self.w.size * int(np.prod(self.output_shape[1:]))
                             * len(inputs))
