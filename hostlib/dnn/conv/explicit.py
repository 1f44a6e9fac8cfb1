"""Explicit GEMM convolution (thesis §5.1.1; docs/dnn.md "Convolution"): im2col / col2im by
``kernels/dnn/im2col.s`` on the 64 CPEs, the products by swGEMM on the operands where they lie
in simulated memory (``hostlib.blas.gemm_in_memory``).

Activations are CNHW (``LAYOUT``): x (N_i, B, R_i, C_i), y (N_o, B, R_o, C_o). col is one
K x (B P) matrix for the whole batch, K = N_i K_r K_c rows (c, kr, kc), B P = B R_o C_o
columns (b, r_o, c_o) -- the thesis' batch layout trick, so every pass is one GEMM:
    forward          y    = W col            (+ bias: swGEMM's beta = 1 on a bias-broadcast C)
    backward-data    dcol = W^T dy, then dx = col2im(dcol)
    backward-filter  dW   = dy col^T
with W = w viewed as N_o x K and y, dy viewed as N_o x (B P): no reordering. col is allocated
zeroed at its final size (the padding rows are never written, so padding costs no DMA), im2col
writes it, swGEMM reads it in place; the host copies only the operands in and the result out.
"""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ....vm import HostError, Machine
from ...blas.swgemm import InMemory, gemm_in_memory
from ...runtime.kernel import Kernel
from . import model as conv_model
from .common import ConvGeometry

NAME = "explicit"
LAYOUT = "CNHW"
KERNEL = Kernel(("dnn/im2col.s",), entry="im2col", ldm_end="im2col_ldm_end")
PHASES = ("im2col", "gemm", "col2im")
_COL_OPS = {"forward": ("IM2COL", "gemm"), "backward_data": ("gemm", "COL2IM"),
            "backward_filter": ("IM2COL", "gemm")}


COL_BYTES = 1 << 30           # col's size at most: larger batches run in equal chunks


def supports(geo: ConvGeometry, direction, dtype, config) -> str | None:
    """Every shape whose padded row fits in LDM (the general fallback)."""
    es = np.dtype(dtype).itemsize
    for op in _COL_OPS[direction]:
        if op != "gemm" and not _fits(geo, es, 1, op, config):
            return (f"explicit: a padded input row ({_row_len(geo, es)} elements) and "
                    f"K_c x C_o = {geo.k_c} x {geo.c_o} elements of col do not fit in LDM "
                    f"({config.ldm_bytes} bytes) for {es}-byte elements")
    if not _exact(geo, 1, 1):
        return (f"explicit: {geo.n_i} x {geo.r_i} input rows per image are too many for the "
                "im2col kernel's divisions")
    return None


class _Pass:
    """The memory of one pass: the batch in chunks of `images` (one chunk unless col would
    exceed COL_BYTES), W, and col (or dcol) for one chunk, reused by every chunk."""

    def __init__(self, geo: ConvGeometry, dtype, machine, w=None):
        self.geo, self.dtype, self.machine = geo, np.dtype(dtype), machine
        self.images = _chunk(geo, self.dtype.itemsize)
        self.chunk = ConvGeometry(self.images, geo.n_i, geo.n_o, geo.r_i, geo.c_i, geo.k_r,
                                  geo.k_c, geo.stride, geo.padding)
        self.rows = geo.n_i * geo.k_r * geo.k_c
        self.pixels = geo.r_o * geo.c_o               # a column block of col per image
        self.columns = self.images * self.pixels
        mem = machine.mem
        self.col = InMemory(mem.alloc(self.rows * self.columns * self.dtype.itemsize),
                            (self.rows, self.columns), self.dtype)   # zeroed: the pad rows
        if w is not None:
            self.weights = InMemory(mem.put(w), (geo.n_o, self.rows), self.dtype)

    def starts(self):
        return range(0, self.geo.batch, self.images)

    def activations(self, address, start, channels, pixels):
        """The chunk from image `start` of CNHW activations at `address`, as a channels x
        (images pixels) matrix with the whole batch's leading dimension."""
        return InMemory(address + start * pixels * self.dtype.itemsize,
                        (channels, self.images * pixels), self.dtype,
                        self.geo.batch * pixels)

    def launch(self, op, x_addr, start, stats, engine):
        """im2col (or col2im) of the chunk from image `start` of x (CNHW) at `x_addr`."""
        plane = self.geo.r_i * self.geo.c_i * self.dtype.itemsize
        stats.phases[op.lower()].append(_launch(
            op, self.dtype.itemsize, x_addr + start * plane, self.col.address, self.chunk,
            self.machine, engine, x_outer=self.geo.batch * plane))


def forward(geo: ConvGeometry, x, w, bias, machine, stats, engine) -> np.ndarray:
    mem = machine.mem
    work = _Pass(geo, x.dtype, machine, w)
    x_addr = mem.put(x)
    shape = (geo.n_o, geo.batch * work.pixels)
    # the bias as swGEMM's C with beta = 1: a broadcast copied (not computed) in
    y = mem.alloc(shape[0] * shape[1] * x.itemsize) if bias is None else \
        mem.put(np.broadcast_to(bias[:, None], shape))
    for start in work.starts():
        work.launch("IM2COL", x_addr, start, stats, engine)
        _, run = gemm_in_memory(work.weights, work.col,
                                work.activations(y, start, geo.n_o, work.pixels),
                                beta=0.0 if bias is None else 1.0, machine=machine,
                                engine=engine)
        stats.phases["gemm"].append(run)
    return mem.get(y, _cnhw(geo.n_o, geo, "y"), x.dtype)


def backward_data(geo: ConvGeometry, dy, w, machine, stats, engine) -> np.ndarray:
    mem = machine.mem
    work = _Pass(geo, dy.dtype, machine, w)
    dy_addr = mem.put(dy)
    dx = mem.alloc(int(np.prod(geo.x_shape)) * dy.itemsize)
    for start in work.starts():
        _, run = gemm_in_memory(work.weights,
                                work.activations(dy_addr, start, geo.n_o, work.pixels),
                                work.col, trans_a=True, machine=machine, engine=engine)
        stats.phases["gemm"].append(run)
        work.launch("COL2IM", dx, start, stats, engine)
    return mem.get(dx, _cnhw(geo.n_i, geo, "x"), dy.dtype)


def backward_filter(geo: ConvGeometry, x, dy, machine, stats, engine) -> np.ndarray:
    mem = machine.mem
    work = _Pass(geo, x.dtype, machine)
    x_addr, dy_addr = mem.put(x), mem.put(dy)
    dw = InMemory(mem.alloc(geo.n_o * work.rows * x.itemsize), (geo.n_o, work.rows), x.dtype)
    for start in work.starts():
        work.launch("IM2COL", x_addr, start, stats, engine)
        _, run = gemm_in_memory(work.activations(dy_addr, start, geo.n_o, work.pixels),
                                work.col, dw, beta=0.0 if start == 0 else 1.0, trans_b=True,
                                machine=machine, engine=engine)
        stats.phases["gemm"].append(run)
    return mem.get(dw.address, geo.w_shape, x.dtype)


def predict(geo: ConvGeometry, direction, dtype, config) -> float:
    """Model cycles of the pass on one CG: per chunk of the batch, the im2col / col2im model
    of ``conv_model`` for the kernel's tasks plus swGEMM's model for the GEMM."""
    es = np.dtype(dtype).itemsize
    chunk = _chunk_geometry(geo, es)
    total = 0.0
    for op in _COL_OPS[direction]:
        if op == "gemm":
            total += conv_model.gemm_cycles(_gemm_shape(chunk, direction, geo.batch), es,
                                            config)
        else:
            group = _row_group(chunk, es, op, config)
            total += conv_model.im2col_cycles(chunk, es, group, op == "COL2IM", config)
    return total * geo.batch // chunk.batch


def estimate(geo: ConvGeometry, direction, dtype, machine, engine="c"):
    """Cycles of the pass on one CG from simulating samples of each phase of one chunk of
    the batch (``conv_model.sampled_launches``, ``conv_model.sampled_gemm``), times the
    chunks: im2col / col2im on a few rounds of planes, the GEMM on a few blocks along its
    longest dimensions."""
    es = np.dtype(dtype).itemsize
    config = machine.config
    chunk = _chunk_geometry(geo, es)
    total, details = 0.0, dict(chunks=geo.batch // chunk.batch)
    for op in _COL_OPS[direction]:
        if op == "gemm":
            cycles, details["gemm"] = conv_model.sampled_gemm(
                _gemm_shape(chunk, direction, geo.batch), dtype, machine, engine)
        else:
            group = _row_group(chunk, es, op, config)
            tasks = chunk.batch * chunk.n_i * -(-chunk.r_i // group)
            cycles, details[op.lower()] = conv_model.sampled_launches(
                tasks, config.num_cpes,
                lambda n: _task_sample(replace(chunk, n_o=1), n, es, group, op, config,
                                       engine))
        total += cycles
    return total * details["chunks"], details


# ---- the GEMM of each pass ----------------------------------------------------------------

def _gemm_shape(chunk: ConvGeometry, direction, batch):
    """(M, N, K, trans_a, trans_b, leading dimension of the activations' matrix) of a chunk's
    GEMM as gemm_in_memory runs it."""
    rows, columns = chunk.n_i * chunk.k_r * chunk.k_c, chunk.batch * chunk.r_o * chunk.c_o
    ld = batch * chunk.r_o * chunk.c_o
    return {"forward": (chunk.n_o, columns, rows, False, False, dict(ldc=ld)),
            "backward_data": (rows, columns, chunk.n_o, True, False, dict(ldb=ld)),
            "backward_filter": (chunk.n_o, rows, columns, False, True, dict(lda=ld))
            }[direction]


def _cnhw(channels, geo: ConvGeometry, which):
    rows, cols = (geo.r_o, geo.c_o) if which == "y" else (geo.r_i, geo.c_i)
    return (channels, geo.batch, rows, cols)


def _exact(geo: ConvGeometry, images: int, group: int) -> bool:
    """Whether the kernel's divisions by reciprocals are exact for launches on `images`
    images: task t < 2^32 / GROUPS, plane q < 2^32 / INNER."""
    groups = -(-geo.r_i // group)
    return (images * geo.n_i * groups * groups < 1 << 32
            and images * images * geo.n_i < 1 << 32)


def _chunk(geo: ConvGeometry, es: int) -> int:
    """Images per launch: the largest divisor of B whose col fits in COL_BYTES and keeps
    the kernel's divisions exact (at least 1), so every chunk has col's layout."""
    per_image = geo.n_i * geo.k_r * geo.k_c * geo.r_o * geo.c_o * es
    return max(d for d in range(1, geo.batch + 1) if geo.batch % d == 0 and
               (d == 1 or (d * per_image <= COL_BYTES and _exact(geo, d, 1))))


def _chunk_geometry(geo: ConvGeometry, es: int) -> ConvGeometry:
    return ConvGeometry(_chunk(geo, es), geo.n_i, geo.n_o, geo.r_i, geo.c_i, geo.k_r,
                        geo.k_c, geo.stride, geo.padding)


# ---- im2col / col2im on the CPEs ----------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _task_sample(geo: ConvGeometry, tasks, es, group, op, config, engine):
    """Cycles of the first `tasks` tasks of `op`'s launch on `geo` (the launch with its task
    count cut; N_o plays no part), on a new machine of `config` holding the planes they
    touch (random data). Remembered: a bench meets the same sample for every N_o."""
    machine = Machine(config)
    groups = -(-geo.r_i // group)
    outers = -(-tasks // groups) // geo.batch + 1        # channels touched
    plane = geo.r_i * geo.c_i * es
    col_outer = geo.k_r * geo.k_c * geo.batch * geo.r_o * geo.c_o * es
    dtype = np.float32 if es == 4 else np.float64
    data = np.random.default_rng(tasks).standard_normal(
        outers * (geo.batch * plane if op == "IM2COL" else col_outer) // es).astype(dtype)
    mem = machine.mem
    if op == "IM2COL":
        x, col = mem.put(data), mem.alloc(outers * col_outer)
    else:
        x, col = mem.alloc(outers * geo.batch * plane), mem.put(data)
    return _launch(op, es, x, col, geo, machine, engine, group, tasks=tasks).cycles


def _reciprocal(d: int) -> int:
    """ceil(2^32 / d): the kernel's n / d is (n ceil(2^32 / d)) >> 32, exact for n < 2^32 / d."""
    return -(-(1 << 32) // d)


def _row_len(geo: ConvGeometry, es: int) -> int:
    """Elements of a padded row in LDM: the pad columns, the row, and what the last output
    column's window reads; a multiple of 8 bytes (the kernel zeroes it in 8-byte steps)."""
    elements = max(geo.c_i + 2 * geo.padding[1], (geo.c_o - 1) * geo.stride[1] + geo.k_c)
    return -(-elements * es // 8) * 8 // es


def _buffers(geo: ConvGeometry, es: int, group: int, op: str, arena) -> dict:
    """Take the kernel's LDM buffers for `group` input rows per task from `arena`."""
    runs = -(-group // geo.stride[0])       # output rows a group feeds through one kernel row
    return dict(row_buf=arena.take(group * _row_len(geo, es) * es),
                col_buf=arena.take(geo.k_c * runs * geo.c_o * es),
                pack_buf=arena.take(group * geo.c_i * es) if op == "COL2IM" else 0)


def _fits(geo: ConvGeometry, es: int, group: int, op: str, config) -> bool:
    arena = KERNEL.arena(config.ldm_bytes, nargs=1)
    _buffers(geo, es, group, op, arena)
    return arena.fits


def _row_group(geo: ConvGeometry, es: int, op: str, config) -> int:
    """Input rows per task: as many as LDM holds (long runs of whole lines in col), but no more
    than spreads the B N_i R_i rows over the 64 CPEs, and at most a plane."""
    spread = max(1, geo.batch * geo.n_i * geo.r_i // config.num_cpes)
    group = 1
    for candidate in range(2, min(geo.r_i, spread) + 1):
        if not _fits(geo, es, candidate, op, config):
            break
        group = candidate
    return group


def _launch(op: str, es: int, x_addr: int, col_addr: int, geo: ConvGeometry, machine, engine,
            group=None, x_outer=None, tasks=None):
    """im2col or col2im of the B N_i planes of `geo` (CNHW at `x_addr`, channels
    `x_outer` bytes apart: default B planes) with col (K x B P) at `col_addr`; `tasks` cuts
    the launch to its first tasks (a sample)."""
    config = machine.config
    group = group or _row_group(geo, es, op, config)
    arena = KERNEL.arena(config.ldm_bytes, nargs=1)
    buffers = _buffers(geo, es, group, op, arena)
    if not arena.fits:
        raise HostError(supports(geo, "forward" if op == "IM2COL" else "backward_data",
                                 np.float32 if es == 4 else np.float64, config))
    groups = -(-geo.r_i // group)
    pitch = geo.batch * geo.r_o * geo.c_o * es
    job = KERNEL.record("J_", "JOB_BYTES").new(
        op=KERNEL.symbol(f"OP_{op}"), es=es, x=x_addr, col=col_addr,
        tasks=min(tasks or geo.batch * geo.n_i * groups, geo.batch * geo.n_i * groups),
        group=group, groups=groups,
        groups_inv=_reciprocal(groups), ri=geo.r_i, ci=geo.c_i, ro=geo.r_o, co=geo.c_o,
        kr=geo.k_r, kc=geo.k_c, sr=geo.stride[0], sc=geo.stride[1],
        sr_inv=_reciprocal(geo.stride[0]), pr=geo.padding[0], pc=geo.padding[1],
        row_len=_row_len(geo, es), inner=geo.batch, inner_inv=_reciprocal(geo.batch),
        col_outer=geo.k_r * geo.k_c * pitch, col_inner=geo.r_o * geo.c_o * es,
        col_pitch=pitch, x_inner=geo.r_i * geo.c_i * es,
        x_outer=x_outer or geo.batch * geo.r_i * geo.c_i * es, **buffers)
    return KERNEL.launch(machine, [machine.mem.put(job)], flops=0, engine=engine,
                         details=dict(op=op.lower(), rows_per_task=group))
