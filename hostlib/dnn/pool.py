"""2-D max and average pooling on the streaming driver (``kernels/dnn/pool.inc``), NCHW.

``pool2d_forward(x, kernel, stride, padding, mode)``: x (N, C, H, W) (or (C, H, W) / (H, W)
planes), square window `kernel`, `stride` (default `kernel`), `padding`; output size
(H + 2 padding - kernel) // stride + 1 as PyTorch (ceil_mode=False). Max pooling returns
((y, argmax), stats) with argmax int64 indices h * W + w into each input plane (PyTorch's
``return_indices``); average pooling returns (y, stats), dividing by kernel² (PyTorch's
count_include_pad=True).

A unit is a block of output rows of one plane whose input rows fit the LDM buffers; each CPE
gets the rows its windows touch with one DMA and puts its output rows with one DMA per output.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import stream
from .common import DnnError, float_arrays, machine_and_cgs

MODES = ("max", "avg")


def _int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise DnnError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def geometry(shape, kernel, stride, padding):
    """(planes, H, W, OH, OW) of pooling an array of `shape`; checks the arguments."""
    if len(shape) < 2:
        raise DnnError(f"x must have at least 2 dimensions (..., H, W), got shape {shape}")
    kernel = _int("kernel", kernel, 1)
    stride = _int("stride", kernel if stride is None else stride, 1)
    padding = _int("padding", padding, 0)
    if 2 * padding > kernel:
        raise DnnError(f"padding must be at most kernel / 2 (PyTorch's rule), got padding "
                       f"{padding} for kernel {kernel}")
    h, w = shape[-2:]
    oh, ow = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
    if oh < 1 or ow < 1:
        raise DnnError(f"kernel {kernel} with padding {padding} is larger than the {h} x {w} "
                       "input")
    return int(np.prod(shape[:-2], dtype=np.int64)), h, w, oh, ow, kernel, stride, padding


def pool2d_forward(x, kernel, stride=None, padding=0, mode="max", *, machine=None, cgs=1,
                   engine="c"):
    if mode not in MODES:
        raise DnnError(f"mode must be one of {MODES}, got {mode!r}")
    (x,) = float_arrays(x=x)
    planes, h, w, oh, ow, kernel, stride, padding = geometry(x.shape, kernel, stride, padding)
    machine, cgs = machine_and_cgs(machine, cgs)
    config = machine.config
    es = x.dtype.itemsize
    is_max = mode == "max"
    # output rows per unit: as many as fit the buffers (double-buffered), at most the plane
    free = stream.arena(config).free // 2
    rows = oh
    while rows > 1 and _unit_bytes(rows, w, ow, kernel, stride, es, is_max) > free:
        rows = max(1, rows // 2)
    if _unit_bytes(rows, w, ow, kernel, stride, es, is_max) > free:
        raise DnnError(f"pool2d: a row of {w} elements with kernel {kernel} does not fit in LDM")
    blocks = -(-oh // rows)
    mem = machine.mem
    x_addr = mem.put(np.ascontiguousarray(x).reshape(-1))
    outputs = [mem.alloc(planes * oh * ow * es)] + ([mem.alloc(planes * oh * ow * 4)]
                                                     if is_max else [])
    in_rows = min(h, (rows - 1) * stride + kernel)
    buffers = [in_rows * w * es, rows * ow * es] + ([rows * ow * 4] if is_max else [])
    moved = planes * (h * w * es + oh * ow * (es + (4 if is_max else 0)))
    stats = stream.launch(machine, cgs, name="pool2d", body=f"pool_forward_{stream.SUFFIX[es]}",
                          plan="pool_plan", inputs=[x_addr], outputs=outputs,
                          buffer_bytes=buffers, units=planes * blocks, es=es,
                          params=[float(kernel * kernel)],
                          ints=[h, w, oh, ow, kernel, stride, padding, blocks, rows, int(is_max)],
                          moved=moved, engine=engine,
                          details=dict(op="pool2d_forward", mode=mode, rows_per_unit=rows))
    shape = x.shape[:-2] + (oh, ow)
    y = mem.get(outputs[0], shape, x.dtype)
    if not is_max:
        return y, stats
    return (y, mem.get(outputs[1], shape, np.int32).astype(np.int64)), stats


def _unit_bytes(rows, w, ow, kernel, stride, es, is_max):
    return ((rows - 1) * stride + kernel) * w * es + rows * ow * (es + (4 if is_max else 0)) + 96
