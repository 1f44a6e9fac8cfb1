"""FC / linear layers through swGEMM, as Caffe's InnerProductLayer does it (swCaffe keeps
Caffe's layer code and swaps in swGEMM): the bias is added by a rank-1 GEMM of a column of
ones and the bias row (Caffe's ``bias_multiplier_``), the bias gradient is the GEMM of a row
of ones and dy (the column sums). Every product and sum runs on the CPEs.

Shapes as PyTorch: x (B, I), w (O, I), b (O,); y = x wᵀ + b."""
from __future__ import annotations

import numpy as np

from ..blas import gemm
from .common import DnnError, combined, float_arrays, machine_and_cgs


def _single_cg(machine, cgs):
    machine, cgs = machine_and_cgs(machine, cgs)
    if cgs != 1:
        raise DnnError("linear layers run on one core group (swGEMM drives one CG); use cgs=1")
    return machine


def _matrices(x, w, **others):
    arrays = float_arrays(x=x, w=w, **{k: v for k, v in others.items() if v is not None})
    x, w = arrays[:2]
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise DnnError(f"x must be (B, I) and w (O, I), got x {x.shape} and w {w.shape}")
    return arrays


def linear_forward(x, w, b=None, *, machine=None, cgs=1, engine="c"):
    """y = x wᵀ + b on the VM; returns (y (B, O), Stats with GFLOPS and efficiency)."""
    machine = _single_cg(machine, cgs)
    x, w, *rest = _matrices(x, w, b=b)
    batch, outputs = x.shape[0], w.shape[0]
    parts, c = [], None
    if rest:
        (b,) = rest
        if b.shape != (outputs,):
            raise DnnError(f"b must be ({outputs},) for w {w.shape}, got {b.shape}")
        c, bias_stats = gemm(np.ones((batch, 1), x.dtype), b.reshape(1, outputs),
                             machine=machine, engine=engine)
        parts.append(bias_stats)
    y, stats = gemm(x, w, c, beta=1.0 if c is not None else 0.0, trans_b=True,
                    machine=machine, engine=engine)
    parts.append(stats)
    return y, combined(parts, op="linear_forward", shape=(batch, x.shape[1], outputs))


def linear_backward(dy, x, w, *, machine=None, cgs=1, engine="c"):
    """Gradients of y = x wᵀ + b: returns ((dx = dy w, dw = dyᵀ x, db = column sums of dy),
    Stats of the three GEMMs)."""
    machine = _single_cg(machine, cgs)
    x, w, dy = _matrices(x, w, dy=dy)
    if dy.shape != (x.shape[0], w.shape[0]):
        raise DnnError(f"dy must be (B, O) = {(x.shape[0], w.shape[0])}, got {dy.shape}")
    dx, s_dx = gemm(dy, w, machine=machine, engine=engine)
    dw, s_dw = gemm(dy, x, trans_a=True, machine=machine, engine=engine)
    db, s_db = gemm(np.ones((1, dy.shape[0]), dy.dtype), dy, machine=machine, engine=engine)
    return (dx, dw, db.reshape(-1)), combined([s_dx, s_dw, s_db], op="linear_backward",
                                              shape=(x.shape[0], x.shape[1], w.shape[0]))
