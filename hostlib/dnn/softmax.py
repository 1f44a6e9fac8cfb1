"""Softmax with cross-entropy loss (``kernels/dnn/softmax.s``): a row of the logits is worked
on by a group of CPEs, the 8 of a mesh row (the row cut over them, its max and sum of exp
combined by register communication, whole-line ROW-mode DMA) or one CPE (whole rows), as
`split_width` estimates faster; the groups take contiguous ranges of rows. The mean of the row
losses is CPE 0's at the end, or the reduction passes' on the streaming driver when the batch
takes several launches or core groups. docs/dnn.md "Softmax with cross-entropy loss"."""
from __future__ import annotations

import math

import numpy as np

from ..runtime import Kernel, host_operator
from . import stream
from .common import DnnError, combined, float_arrays, machine_and_cgs

SOURCES = ("dnn/softmax.s", "dnn/stream.s")
KERNEL = Kernel(SOURCES, "stream_run", "stream_ldm_end", stack="stream_stack")   # the reductions
SPLIT = Kernel(SOURCES, "softmax_split_run", "stream_ldm_end")
REDUCE_VALUES = 1024          # row losses one reduction unit (or the split kernel's CPE 0) sums
RANGE_ROWS = 256              # rows a mesh row takes in one launch (its labels and losses in LDM)
LINE = 128                    # the DMA's transaction: rows are cut and moved in whole lines
# split_width's estimate, from C-engine runs of the kernel (docs/dnn.md): cycles per element
# of a CPE's part of a row by element size (exp is 21 of them for float64 rows, vexp_d, and
# 13 for float32 rows, vexp_ds), and per row when a mesh row shares it or a CPE has it whole
ROW_CYCLES_PER_ELEMENT = {8: 33, 4: 25}
ROW_OVERHEAD_SHARED = 700
ROW_OVERHEAD_WHOLE = 400


def _line_period(classes: int, es: int) -> int:
    """Rows after which a row starts on a line again (ranges of rows start there)."""
    return LINE // math.gcd(classes * es, LINE)


def _block_bytes(batch: int, classes: int, es: int, group: int) -> int:
    """PB: the whole lines of a row's block per CPE of a group, so the lines any row touches
    fit in `group` blocks (rows start at the multiples of `classes * es` past a line)."""
    starts = range(min(batch, _line_period(classes, es)))
    lines = max(-(-((r * classes * es) % LINE + classes * es) // LINE) for r in starts)
    return -(-lines // group) * LINE


def _estimate(config, batch: int, classes: int, es: int, group: int) -> float:
    """Cycles of the row pass when `group` CPEs share a row, roughly: the rows a group takes
    one after the other, each costing its part's arithmetic and the per-row overhead, plus
    the first round of gets (fill) and the last round of puts (drain) on the DMA engine."""
    period = _line_period(classes, es) if group > 1 else 1
    units = -(-batch // period)                     # ranges start every `period` rows
    groups = min(config.num_cpes // group, units)   # the groups that get rows
    rows = -(-units // groups) * period
    block = _block_bytes(batch, classes, es, group)
    lines = block * group // LINE
    fill = groups * lines * config.dma_transaction_cycles
    drain = groups * (lines * config.dma_put_write_cycles + config.dma_put_ack_cycles)
    part = block // es if group > 1 else classes
    overhead = ROW_OVERHEAD_SHARED if group > 1 else ROW_OVERHEAD_WHOLE
    return rows * (part * ROW_CYCLES_PER_ELEMENT[es] + overhead) + fill + drain


def split_width(config, batch: int, classes: int, es: int) -> int:
    """CPEs sharing a row: the columns of a mesh row or 1 (whole rows per CPE), whichever
    `_estimate` finds faster among those whose buffers fit: sharing pays when there are few
    rows per CPE or they are long, whole rows when there are many short ones."""
    widths = [g for g in (config.mesh_cols, 1)
              if _fits(config, _block_bytes(batch, classes, es, g), es)]
    return min(widths, key=lambda g: _estimate(config, batch, classes, es, g))


def _buffers(block: int, es: int) -> list:
    """Per CPE: SX_NBUF input and SX_NBUF output blocks (rows in flight), the block's
    doubles, the labels of a range (at most RANGE_ROWS), the row losses of a mesh row (or
    the B of the mean) and the (sum, z_label) vectors of the rows whose losses the CPE
    computes (a group's rows / its CPEs: at most RANGE_ROWS / SX_COLS either way)."""
    cols = SPLIT.symbol("SX_COLS")
    return [block] * (2 * SPLIT.symbol("SX_NBUF")) + [
        block // es * 8, 4 * RANGE_ROWS, 8 * max(RANGE_ROWS, REDUCE_VALUES),
        32 * (RANGE_ROWS // cols)]


def _place(config, block: int, es: int):
    """The LDM addresses of `_buffers`, or None when they do not fit."""
    space = SPLIT.arena(config.ldm_bytes, nargs=1)
    addresses = [space.take(size) for size in _buffers(block, es)]
    return addresses if space.fits else None


def _fits(config, block: int, es: int) -> bool:
    return _place(config, block, es) is not None


def max_classes(config, es: int) -> int:
    """The most classes whose buffers fit in LDM for any batch (a row starting anywhere in a
    line; a range's labels and losses and the mean's B losses)."""
    lo, hi = 1, config.ldm_bytes       # fits(lo), not fits(hi)
    cols = config.mesh_cols

    def fits(classes):
        lines = -(-(LINE - es + classes * es) // LINE)
        return _fits(config, -(-lines // cols) * LINE, es)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


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


def _ranges(first: int, last: int, parts: int, period: int) -> list:
    """[first, last) cut into `parts` contiguous ranges starting at multiples of `period` rows
    past `first` (on a line), as even as that allows (some may be empty)."""
    groups = -(-(last - first) // period)
    bounds = [min(last, first + groups * i // parts * period) for i in range(parts + 1)]
    return list(zip(bounds, bounds[1:]))


@host_operator
def softmax_cross_entropy(logits, labels, *, machine=None, cgs=1, engine="c"):
    """Mean cross-entropy of softmax(logits) against integer labels, and its gradient:
    logits (B, C) float32/float64, labels (B,) in 0..C-1. Returns ((loss, dlogits), Stats):
    loss = mean over rows of log(sum_j exp(x_j - max)) - (x_label - max) (a 0-d array of the
    logits' dtype), dlogits = (softmax(logits) - onehot(labels)) / B. The rows are shared by
    `cgs` core groups; the mean sums the row losses in row order either way (so the result
    does not depend on `cgs`)."""
    (logits,) = float_arrays(logits=logits)
    if logits.ndim != 2:
        raise DnnError(f"logits must be (batch, classes), got shape {logits.shape}")
    batch, classes = logits.shape
    labels = _labels(labels, batch, classes)
    machine, cgs = machine_and_cgs(machine, cgs)
    config = machine.config
    SPLIT.check(config)               # before planning for a mesh the kernel is not written for
    dtype, es = logits.dtype, logits.dtype.itemsize
    limit = max_classes(config, es)
    if classes > limit:
        raise DnnError(f"softmax_cross_entropy: a row of {classes} classes does not fit in "
                       f"LDM (at most {limit} for {dtype.name})")
    cols = config.mesh_cols
    group = split_width(config, batch, classes, es)
    groups = config.num_cpes // group
    # a group's rows start on a line when it shares them (ROW-mode DMA); whole rows per CPE
    # move in PE mode from any byte
    period = _line_period(classes, es) if group > 1 else 1
    block = _block_bytes(batch, classes, es, group)
    group_rows = RANGE_ROWS * group // cols
    launch_rows = group_rows * groups * cgs
    one_launch = batch <= launch_rows
    mean_here = one_launch and cgs == 1 and batch <= REDUCE_VALUES
    buffers = _place(config, block, es)
    if buffers is None:
        raise DnnError(f"softmax_cross_entropy: rows of {classes} classes, {group} CPE(s) "
                       f"sharing a row, do not fit in LDM")
    mem = machine.mem
    padded = -(-logits.nbytes // LINE) * LINE        # the last row's last line, whole
    x_addr = mem.alloc(padded)
    mem.write(x_addr, np.ascontiguousarray(logits).reshape(-1))
    label_addr = mem.put(labels)
    dlogits_addr = mem.alloc(padded)
    losses_addr = mem.alloc(batch * 8)
    mean_addr = mem.alloc(es) if mean_here else 0
    record = SPLIT.record("SX_", "SX_JOB_BYTES")
    parts = []
    for start in range(0, batch, launch_rows):        # launches of whole ranges
        stop = min(batch, start + launch_rows)
        jobs = []
        for first, last in _ranges(start, stop, cgs, period):
            if first == last:
                continue
            words = record.new(x=x_addr, labels=label_addr, dlogits=dlogits_addr,
                               losses=losses_addr, mean=mean_addr, batch=batch, c=classes,
                               es=es, pb=block, inv_b=1.0 / batch, b=float(batch), g=group)
            base = record.offset("in") // 8
            words[base:base + len(buffers)] = buffers
            ranges = np.array(_ranges(first, last, groups, period)).reshape(-1)
            base = record.offset("ranges") // 8
            words[base:base + len(ranges)] = ranges
            jobs.append([mem.put(words)])
        stats = SPLIT.launch_cgs(machine, jobs, flops=0, engine=engine,
                                 details=dict(op="softmax_cross_entropy", cgs=len(jobs),
                                              block_bytes=block))
        parts.append(stats)
    values, addr = batch, losses_addr
    while not mean_here:                # sums of REDUCE_VALUES row losses until one is left
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
            mean_addr = addr
            break
    loss = mem.get(mean_addr, (), dtype)
    dlogits = mem.get(dlogits_addr, logits.shape, dtype)
    stats = combined(parts, op="softmax_cross_entropy", batch=batch, classes=classes,
                     block_bytes=block)
    # what it must move: the logits and labels in, dlogits and the loss out
    return (loss, dlogits), stream.with_bandwidth(
        stats, config, (logits.nbytes + 4 * batch, logits.nbytes + es), cgs)
