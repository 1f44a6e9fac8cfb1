"""LSTM forward (tensorized, thesis Algorithm 6, and the cuDNN/Appleyard-style baseline) and
backward through time on the VM. docs/dnn.md ("LSTM") describes both algorithms.

PyTorch's conventions: x (T, B, I), h0 and c0 (B, H), W (4H, I), R (4H, H), b (4H,), gate
order i, f, g, o; i = σ(·), f = σ(·), g = tanh(·), o = σ(·) of W x_t + R h_{t−1} + b,
c_t = f c_{t−1} + i g, h_t = o tanh(c_t); y (T, B, H) stacks h_1 .. h_T.

Every product and every element-wise operation runs on the CPEs: the GEMMs through swGEMM
(``hostlib.blas.gemm``) or the LDM primitive inside ``kernels/dnn/lstm.s``, the gates and the
cell in ``kernels/dnn/lstm.s`` (tensorized) or ``kernels/dnn/lstm_cell.s`` (baseline and
backward). The host pads, permutes and blocks arrays (copies, no arithmetic) and reads the
results back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..blas import gemm
from ..runtime import Kernel
from .common import DnnError, combined, float_arrays, machine_and_cgs

ALGOS = ("tensorized", "baseline")
MESH = 8                      # the core group's mesh side: CPE (i, j) = id 8 i + j
PAD = 4 * MESH                # B and H are padded to multiples of 32: Mb, Hb multiples of 4
WIDEN_GROUP = 16              # kernels widen float32 to double 16 elements at a time

KERNEL = Kernel(("dnn/lstm.s", "gemm/gemm_prim.s"), entry="lstm", ldm_end="lstm_ldm_end",
                stack="lstm_stack")
CELL_KERNEL = Kernel(("dnn/lstm_cell.s",), entry="lstm_cell", ldm_end="lstm_cell_ldm_end")


def _ceil(n: int, to: int) -> int:
    return -(-n // to) * to


# ---- arguments ----------------------------------------------------------------------------------

def _check_forward(x, h0, c0, W, R, b):
    x, h0, c0, W, R, b = float_arrays(x=x, h0=h0, c0=c0, W=W, R=R, b=b)
    if x.ndim != 3:
        raise DnnError(f"x must be (T, B, I), got shape {x.shape}")
    steps, batch, inputs = x.shape
    if R.ndim != 2 or R.shape[0] != 4 * R.shape[1]:
        raise DnnError(f"R must be (4H, H), got shape {R.shape}")
    hidden = R.shape[1]
    expected = {"h0": (h0, (batch, hidden)), "c0": (c0, (batch, hidden)),
                "W": (W, (4 * hidden, inputs)), "b": (b, (4 * hidden,))}
    for name, (array, shape) in expected.items():
        if array.shape != shape:
            raise DnnError(f"{name} must be {shape} for x {x.shape} and R {R.shape}, "
                           f"got {array.shape}")
    return [np.ascontiguousarray(a) for a in (x, h0, c0, W, R, b)]


# ---- tensorized ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """The tensorized kernel's LDM plan: padded sizes, R^T resident or streamed in chunks of
    `kc` rows per step, I_{t+1} prefetched or not, and the buffers' LDM addresses."""
    bp: int
    hp: int
    kc: int
    resident: bool
    prefetch: bool
    ldm: dict

    @property
    def mb(self):
        return self.bp // MESH

    @property
    def hb(self):
        return self.hp // MESH


def plan(batch: int, hidden: int, itemsize: int, config, *, kc=None,
         prefetch=None) -> Optional[Plan]:
    prefetch_choice = prefetch
    """The tensorized kernel's plan for (B, H) in this precision, or None when even one row of
    R^T per chunk does not fit in LDM (then the baseline runs). Largest chunk first (resident
    R^T when the whole block fits), with the prefetch of I when it still fits; `kc` and
    `prefetch` restrict the choice (tests use them to run every path)."""
    bp, hp = _ceil(batch, PAD), _ceil(hidden, PAD)
    mb, hb = bp // MESH, hp // MESH
    nb = 4 * hb
    chunks = [kc] if kc is not None else sorted(
        (d for d in range(1, hb + 1) if hb % d == 0), reverse=True)
    for kc in chunks:
        for prefetch in ((True, False) if prefetch_choice is None else (prefetch_choice,)):
            arena = KERNEL.arena(config.ldm_bytes, nargs=1)
            ldm = {"a": arena.take(hb * mb * 8), "c": arena.take(mb * nb * 8),
                   "cst": arena.take(mb * hb * 8), "g": arena.take(mb * hb * 8),
                   "stage": arena.take(mb * nb * itemsize) if prefetch else 0,
                   "ybuf": arena.take(mb * hb * itemsize), "bbuf": arena.take(nb * 8),
                   "rbuf": arena.take(kc * nb * 8)}
            if arena.fits:
                return Plan(bp, hp, kc, kc == hb, prefetch, ldm)
    return None


def _gate_columns(hidden: int, hp: int) -> np.ndarray:
    """For each of the 4 Hp fused columns (block j, gate g, unit u at j 4Hb + g Hb + u), the row
    of W / R / b it takes (g H + j Hb + u), or -1 for a padding unit."""
    hb = hp // MESH
    j, g, u = np.meshgrid(np.arange(MESH), np.arange(4), np.arange(hb), indexing="ij")
    unit = j * hb + u
    return np.where(unit < hidden, g * hidden + unit, -1).reshape(-1)


def _take_rows(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """matrix[rows] with zero rows where rows == -1 (a copy, no arithmetic)."""
    out = np.zeros((rows.size,) + matrix.shape[1:], matrix.dtype)
    out[rows >= 0] = matrix[rows[rows >= 0]]
    return out


def _pad(array: np.ndarray, shape) -> np.ndarray:
    out = np.zeros(shape, array.dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


def _blocks(matrix: np.ndarray, rows: int, cols: int, transpose: bool) -> np.ndarray:
    """The 64 (rows x cols) blocks of an (8 rows) x (8 cols) matrix, block (i, j) at 8 i + j,
    each transposed when asked."""
    grid = matrix.reshape(MESH, rows, MESH, cols).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(grid.transpose(0, 1, 3, 2) if transpose else grid)


def _unblock(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    return blocks.reshape(MESH, MESH, rows, cols).transpose(0, 2, 1, 3).reshape(
        MESH * rows, MESH * cols)


def _tensorized(x, h0, c0, W, R, b, p: Plan, machine, engine):
    steps, batch, inputs = x.shape
    hidden = R.shape[1]
    mb, hb, nb = p.mb, p.hb, 4 * p.hb
    es = x.itemsize
    columns = _gate_columns(hidden, p.hp)
    w_fused = _take_rows(W, columns)                              # (4Hp, I)
    r_fused_t = _pad(_take_rows(R, columns).T, (p.hp, 4 * p.hp))  # R^T: (Hp, 4Hp)
    b_fused = _take_rows(b.reshape(-1, 1), columns).reshape(-1)
    x_padded = _pad(x, (steps, p.bp, inputs)).reshape(steps * p.bp, inputs)
    # the hoisted input projection: one swGEMM for every step
    projection, gemm_stats = gemm(x_padded, w_fused, trans_b=True, machine=machine,
                                  engine=engine)
    mem = machine.mem
    record = KERNEL.record("J_", "JOB_BYTES")
    y_addr = mem.alloc(steps * p.bp * p.hp * es)
    ct_addr = mem.alloc(p.bp * p.hp * es)
    times_bytes = KERNEL.symbol("TIMES_BYTES")
    times_addr = mem.alloc(MESH * MESH * times_bytes)
    job = record.new(
        t=steps, es=es, mb=mb, hb=hb, kc=p.kc, res=int(p.resident), pre=int(p.prefetch),
        i=mem.put(np.ascontiguousarray(projection)), ipitch=4 * p.hp * es,
        r=mem.put(_blocks(r_fused_t, hb, nb, False)), bias=mem.put(b_fused),
        h0=mem.put(_blocks(_pad(h0, (p.bp, p.hp)), mb, hb, True)),
        c0=mem.put(_blocks(_pad(c0, (p.bp, p.hp)), mb, hb, False)),
        y=y_addr, ct=ct_addr, times=times_addr,
        **{name: address for name, address in p.ldm.items()})
    flops = 2 * steps * p.bp * p.hp * 4 * p.hp
    kernel_stats = KERNEL.launch(machine, [mem.put(job)], flops=flops, engine=engine,
                                 details=dict(plan=p))
    y_blocks = mem.get(y_addr, (steps, MESH * MESH, mb, hb), x.dtype)
    y = np.stack([_unblock(y_blocks[t], mb, hb)[:batch, :hidden] for t in range(steps)])
    c_t = _unblock(mem.get(ct_addr, (MESH * MESH, mb, hb), x.dtype), mb, hb)[:batch, :hidden]
    times = mem.get(times_addr, (MESH * MESH, times_bytes // 8), np.int64)
    split = {"gemm": gemm_stats.cycles + int(times[0, 1]), "elementwise": int(times[0, 2])}
    stats = combined([gemm_stats, kernel_stats], op="lstm_forward", algo="tensorized",
                     plan=p, split=split, launches=2, kernel_times=times)
    return (y, y[-1].copy(), c_t), stats
