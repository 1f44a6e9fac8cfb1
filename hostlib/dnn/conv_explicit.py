"""Explicit GEMM convolution (thesis §5.1.1; docs/dnn.md "Convolution"): im2col / col2im by
``kernels/dnn/im2col.s`` on the 64 CPEs, the products by swGEMM (``hostlib.blas.gemm``). With
col[b] the (N_i K_r K_c) x (R_o C_o) matrix of image b:
    forward          y[b]  = W col[b] (+ bias, as swGEMM's beta = 1 with a bias-broadcast C)
    backward-data    dcol[b] = W^T dy[b], then dx = col2im(dcol)
    backward-filter  dW = sum_b dy[b] col[b]^T (swGEMM's beta = 1 accumulates over b)
W is w viewed as N_o x (N_i K_r K_c) and dy[b] as N_o x (R_o C_o): no host reordering. The host
copies arrays in and out of simulated memory; every flop and element move runs on the CPEs.

Like every algorithm module it provides ``PHASES`` and ``forward`` / ``backward_data`` /
``backward_filter(geo, ..., machine, stats, engine)`` (see ``conv``).
"""
from __future__ import annotations

import numpy as np

from ...vm import HostError
from ..blas import gemm
from ..runtime.kernel import Kernel
from .conv_common import ConvGeometry

KERNEL = Kernel(("dnn/im2col.s",), entry="im2col", ldm_end="im2col_ldm_end")
PHASES = ("im2col", "gemm", "col2im")


def forward(geo: ConvGeometry, x, w, bias, machine, stats, engine) -> np.ndarray:
    col = _im2col(x, geo, machine, stats, engine)
    weights = w.reshape(geo.n_o, -1)
    y = np.empty(geo.y_shape, x.dtype)
    # the bias as swGEMM's C with beta = 1: a broadcast view, copied (not computed) into memory
    c = None if bias is None else np.broadcast_to(bias[:, None], (geo.n_o, col.shape[2]))
    for b in range(geo.batch):
        y[b].reshape(geo.n_o, -1)[...], run = gemm(weights, col[b], C=c, beta=1.0,
                                                   machine=machine, engine=engine)
        stats.phases["gemm"].append(run)
    return y


def backward_data(geo: ConvGeometry, dy, w, machine, stats, engine) -> np.ndarray:
    weights = w.reshape(geo.n_o, -1)
    dcol = np.empty(geo.col_shape, dy.dtype)
    for b in range(geo.batch):
        dcol[b], run = gemm(weights, dy[b].reshape(geo.n_o, -1), trans_a=True, machine=machine,
                            engine=engine)
        stats.phases["gemm"].append(run)
    return _col2im(dcol, geo, machine, stats, engine)


def backward_filter(geo: ConvGeometry, x, dy, machine, stats, engine) -> np.ndarray:
    col = _im2col(x, geo, machine, stats, engine)
    dw = None
    for b in range(geo.batch):
        dw, run = gemm(dy[b].reshape(geo.n_o, -1), col[b], C=dw, beta=1.0, trans_b=True,
                       machine=machine, engine=engine)
        stats.phases["gemm"].append(run)
    return np.ascontiguousarray(dw, x.dtype).reshape(geo.w_shape)


# ---- im2col / col2im on the CPEs ----------------------------------------------------------

def _im2col(x, geo: ConvGeometry, machine, stats, engine) -> np.ndarray:
    mem = machine.mem
    x_addr = mem.put(x)
    col_addr = mem.alloc(int(np.prod(geo.col_shape)) * x.itemsize)   # zeroed: the pad rows
    stats.phases["im2col"].append(_launch("IM2COL", x.itemsize, x_addr, col_addr, geo, machine,
                                          engine))
    return mem.get(col_addr, geo.col_shape, x.dtype)


def _col2im(dcol, geo: ConvGeometry, machine, stats, engine) -> np.ndarray:
    mem = machine.mem
    col_addr = mem.put(dcol)
    x_addr = mem.alloc(int(np.prod(geo.x_shape)) * dcol.itemsize)
    stats.phases["col2im"].append(_launch("COL2IM", dcol.itemsize, x_addr, col_addr, geo,
                                          machine, engine))
    return mem.get(x_addr, geo.x_shape, dcol.dtype)


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


def _row_group(geo: ConvGeometry, es: int, op: str, config) -> int:
    """Input rows per task: as many as LDM holds (long runs of whole lines in col), but no more
    than spreads the B N_i R_i rows over the 64 CPEs, and at most a plane."""
    spread = max(1, geo.batch * geo.n_i * geo.r_i // config.num_cpes)
    group = 1
    for candidate in range(2, min(geo.r_i, spread) + 1):
        arena = KERNEL.arena(config.ldm_bytes, nargs=1)
        _buffers(geo, es, candidate, op, arena)
        if not arena.fits:
            break
        group = candidate
    return group


def _launch(op: str, es: int, x_addr: int, col_addr: int, geo: ConvGeometry, machine, engine):
    config = machine.config
    group = _row_group(geo, es, op, config)
    arena = KERNEL.arena(config.ldm_bytes, nargs=1)
    buffers = _buffers(geo, es, group, op, arena)
    if not arena.fits:
        raise HostError(f"explicit convolution: a padded input row ({_row_len(geo, es)} "
                        f"elements) and K_c x C_o = {geo.k_c} x {geo.c_o} elements of col do "
                        f"not fit in LDM ({config.ldm_bytes} bytes) for {es}-byte elements")
    groups = -(-geo.r_i // group)
    job = KERNEL.record("J_", "JOB_BYTES").new(
        op=KERNEL.symbol(f"OP_{op}"), es=es, x=x_addr, col=col_addr,
        tasks=geo.batch * geo.n_i * groups, group=group, groups=groups,
        groups_inv=_reciprocal(groups), ri=geo.r_i, ci=geo.c_i, ro=geo.r_o, co=geo.c_o,
        kr=geo.k_r, kc=geo.k_c, sr=geo.stride[0], sc=geo.stride[1],
        sr_inv=_reciprocal(geo.stride[0]), pr=geo.padding[0], pc=geo.padding[1],
        row_len=_row_len(geo, es), **buffers)
    return KERNEL.launch(machine, [machine.mem.put(job)], flops=0, engine=engine,
                         details=dict(op=op.lower(), rows_per_task=group))
