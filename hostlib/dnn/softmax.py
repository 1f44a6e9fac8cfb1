"""Softmax with cross-entropy loss on the streaming driver (``kernels/dnn/softmax.s``): a row
of the logits per unit over the 64 CPEs (the row's max, exp by vmath.inc, the row sum, its log,
the row's loss and its gradient), then the row losses summed to the mean by reduction passes
on the CPEs. docs/dnn.md "Softmax with cross-entropy loss"."""
from __future__ import annotations

import numpy as np

from ..runtime import Kernel
from . import stream
from .common import DnnError, combined, float_arrays, machine_and_cgs

KERNEL = Kernel(("dnn/softmax.s", "dnn/stream.s"), "stream_run", "stream_ldm_end", stack="stream_stack")
REDUCE_VALUES = 1024          # row losses one reduction unit sums


def _row_bytes(classes: int, es: int) -> list:
    """The LDM buffers of a row unit: x, label, scratch (doubles), dlogits, loss; whole
    vectors of 4 elements."""
    vectors = -(-classes // 4)
    return [vectors * 4 * es, 4, vectors * 32, vectors * 4 * es, 8]


def max_classes(config, es: int) -> int:
    """The most classes whose row buffers (two parities, each buffer taken from the arena in
    32-byte pieces) fit the driver's LDM arena."""
    per_parity = stream.arena(config, KERNEL).free // 2
    vectors = per_parity // (2 * 4 * es + 32)
    while sum(-(-size // 32) * 32 for size in _row_bytes(4 * vectors, es)) > per_parity:
        vectors -= 1
    return 4 * vectors


def _labels(labels, batch: int, classes: int) -> np.ndarray:
    """The labels as int32: integers, or floats holding integers (Caffe's label blobs)."""
    array = np.asarray(labels)
    if array.shape != (batch,):
        raise DnnError(f"labels must have shape ({batch},) (one per row of logits), got "
                       f"{array.shape}")
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise DnnError("labels must be integers (or floats holding integers)")
    elif array.dtype.kind not in "iu":
        raise DnnError(f"labels must be integers, got {array.dtype}")
    if np.any(array < 0) or np.any(array >= classes):
        raise DnnError(f"labels must be class indices in 0..{classes - 1}, got values in "
                       f"{array.min()}..{array.max()}")
    return array.astype(np.int32)


def softmax_cross_entropy(logits, labels, *, machine=None, cgs=1, engine="c"):
    """Mean cross-entropy of softmax(logits) against integer labels, and its gradient:
    logits (B, C) float32/float64, labels (B,) in 0..C-1. Returns ((loss, dlogits), Stats):
    loss = mean over rows of log(sum_j exp(x_j - max)) - (x_label - max) (a 0-d array of the
    logits' dtype), dlogits = (softmax(logits) - onehot(labels)) / B. The rows are shared by
    `cgs` core groups; the row losses of all of them are then summed in order by reduction
    passes on one CG's CPEs (so the result does not depend on `cgs`)."""
    (logits,) = float_arrays(logits=logits)
    if logits.ndim != 2:
        raise DnnError(f"logits must be (batch, classes), got shape {logits.shape}")
    batch, classes = logits.shape
    labels = _labels(labels, batch, classes)
    machine, cgs = machine_and_cgs(machine, cgs)
    dtype, es = logits.dtype, logits.dtype.itemsize
    limit = max_classes(machine.config, es)
    if classes > limit:
        raise DnnError(f"softmax_cross_entropy: a row of {classes} classes does not fit in "
                       f"LDM (at most {limit} for {dtype.name})")
    mem = machine.mem
    x_addr = mem.put(np.ascontiguousarray(logits).reshape(-1))
    label_addr = mem.put(labels)
    dlogits_addr = mem.alloc(logits.nbytes)
    losses_addr = mem.alloc(batch * 8)
    parts = [stream.launch(
        machine, cgs, name="softmax_cross_entropy", body=f"softmax_xent_{stream.SUFFIX[es]}",
        plan="softmax_plan", inputs=[x_addr, label_addr, 0], outputs=[dlogits_addr, losses_addr],
        buffer_bytes=_row_bytes(classes, es), units=batch, es=es, params=[1.0 / batch],
        ints=[classes], moved=(logits.nbytes + 4 * batch, logits.nbytes + 8 * batch),
        engine=engine, kernel=KERNEL, details=dict(op="softmax_cross_entropy"))]
    values, addr = batch, losses_addr
    while True:                         # sums of REDUCE_VALUES row losses until one is left
        units = -(-values // REDUCE_VALUES)
        last = units == 1
        out_es = es if last else 8
        out_addr = mem.alloc(units * out_es)
        parts.append(stream.launch(
            machine, 1, name="softmax_cross_entropy (mean)",
            body=f"reduce_{stream.SUFFIX[out_es]}", plan="reduce_plan", inputs=[addr],
            outputs=[out_addr], buffer_bytes=[8 * min(values, REDUCE_VALUES), out_es],
            units=units, es=out_es, params=[float(batch) if last else 1.0],
            ints=[values, REDUCE_VALUES], moved=(8 * values, units * out_es), engine=engine,
            kernel=KERNEL, details=dict(op="reduce")))
        values, addr = units, out_addr
        if last:
            break
    loss = mem.get(addr, (), dtype)
    dlogits = mem.get(dlogits_addr, logits.shape, dtype)
    stats = combined(parts, op="softmax_cross_entropy", batch=batch, classes=classes)
    # what it must move: the logits and labels in, dlogits and the loss out
    return (loss, dlogits), stream.with_bandwidth(
        stats, machine.config, (logits.nbytes + 4 * batch, logits.nbytes + es), cgs)
