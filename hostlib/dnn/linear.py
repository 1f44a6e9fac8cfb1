"""FC / linear layers through swGEMM, as Caffe's InnerProductLayer does it (swCaffe keeps
Caffe's layer code and swaps in swGEMM): the bias is added by a rank-1 GEMM of a column of
ones and the bias row (Caffe's ``bias_multiplier_``), the bias gradient is the GEMM of a row
of ones and dy (the column sums). Every product and sum runs on the CPEs.

``cgs`` core groups split the work where no sum crosses them: y and dx by rows of the batch,
dw and db by outputs. swGEMM launches on one core group; the CGs' GEMMs are independent (each
CG has its own DMA engine, nothing is shared in the model), so each CG's share is simulated in
turn and the chip's cycles are the slowest CG's (``common.chip``).

Shapes as PyTorch: x (B, I), w (O, I), b (O,); y = x wᵀ + b."""
from __future__ import annotations

import numpy as np

from ..blas import gemm
from ..runtime import host_operator
from .common import DnnError, chip, combined, float_arrays, machine_and_cgs, split


def _matrices(x, w, **others):
    arrays = float_arrays(x=x, w=w, **{k: v for k, v in others.items() if v is not None})
    x, w = arrays[:2]
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise DnnError(f"x must be (B, I) and w (O, I), got x {x.shape} and w {w.shape}")
    return arrays


@host_operator
def linear_forward(x, w, bias=None, *, machine=None, cgs=1, engine="c"):
    """y = x wᵀ + bias on the VM, the batch's rows split over `cgs` core groups; returns
    (y (B, O), Stats with GFLOPS and efficiency against the CGs' peak)."""
    machine, cgs = machine_and_cgs(machine, cgs)
    x, w, *rest = _matrices(x, w, bias=bias)
    batch, outputs = x.shape[0], w.shape[0]
    if rest and rest[0].shape != (outputs,):
        raise DnnError(f"bias must be ({outputs},) for w {w.shape}, got {rest[0].shape}")
    y, per_cg = np.empty((batch, outputs), x.dtype), []
    for lo, hi in split(batch, cgs):
        parts, c = [], None
        if rest:
            c, bias_stats = gemm(np.ones((hi - lo, 1), x.dtype), rest[0].reshape(1, outputs),
                                 machine=machine, engine=engine)
            parts.append(bias_stats)
        y[lo:hi], stats = gemm(x[lo:hi], w, c, beta=1.0 if c is not None else 0.0,
                               trans_b=True, machine=machine, engine=engine)
        parts.append(stats)
        per_cg.append(combined(parts, rows=(lo, hi)))
    return y, chip(per_cg, op="linear_forward", shape=(batch, x.shape[1], outputs))


@host_operator
def linear_backward(dy, x, w, *, machine=None, cgs=1, engine="c"):
    """Gradients of y = x wᵀ + b: returns ((dx = dy w, dw = dyᵀ x, db = column sums of dy),
    Stats of the GEMMs); dx is split over `cgs` core groups by the batch's rows, dw and db by
    outputs."""
    machine, cgs = machine_and_cgs(machine, cgs)
    x, w, dy = _matrices(x, w, dy=dy)
    batch, outputs = x.shape[0], w.shape[0]
    if dy.shape != (batch, outputs):
        raise DnnError(f"dy must be (B, O) = {(batch, outputs)} for x {x.shape} and w "
                       f"{w.shape}, got {dy.shape}")
    dx = np.empty(x.shape, x.dtype)
    dw, db = np.empty(w.shape, x.dtype), np.empty(outputs, x.dtype)
    rows, outs = split(batch, cgs), split(outputs, cgs)
    per_cg = []
    for cg in range(max(len(rows), len(outs))):
        parts = []
        if cg < len(rows):
            lo, hi = rows[cg]
            dx[lo:hi], stats = gemm(dy[lo:hi], w, machine=machine, engine=engine)
            parts.append(stats)
        if cg < len(outs):
            lo, hi = outs[cg]
            dw[lo:hi], stats = gemm(dy[:, lo:hi], x, trans_a=True, machine=machine,
                                    engine=engine)
            parts.append(stats)
            sums, stats = gemm(np.ones((1, batch), dy.dtype), dy[:, lo:hi], machine=machine,
                               engine=engine)
            db[lo:hi] = sums.reshape(-1)
            parts.append(stats)
        per_cg.append(combined(parts))
    return (dx, dw, db), chip(per_cg, op="linear_backward",
                              shape=(batch, x.shape[1], outputs))
