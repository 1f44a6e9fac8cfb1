"""2-D max and average pooling on the streaming driver (``kernels/dnn/pool.inc``), NCHW.

``pool2d_forward(x, kernel_size, stride, padding, mode)``: x (N, C, H, W) (or (C, H, W) /
(H, W) planes), square window `kernel_size`, `stride` (default `kernel_size`), `padding`;
output size (H + 2 padding - kernel_size) // stride + 1 as PyTorch (ceil_mode=False). It
returns (y, stats); max pooling with ``return_indices=True`` ((y, indices), stats), indices
int64 h * W + w into each input plane (PyTorch's). Average pooling divides by kernel_size²
(PyTorch's count_include_pad=True; computed as the sum times 1 / kernel_size²).

A unit is a block of output rows of one plane whose input rows fit the LDM buffers; each CPE
gets the rows its windows touch with one DMA and puts its output rows with one DMA per output.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...errors import ArgumentTypeError
from ..runtime import host_operator
from . import stream
from .common import DnnError, float_arrays, machine_and_cgs

MODES = ("max", "avg")


def _int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be an int, got {value!r}")
    if value < low:
        raise DnnError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def geometry(shape, kernel, stride, padding):
    """(planes, H, W, OH, OW, kernel, stride, padding) of pooling an array of `shape` with a
    `kernel` x `kernel` window; checks the arguments."""
    if len(shape) < 2:
        raise DnnError(f"x must have at least 2 dimensions (..., H, W), got shape {shape}")
    kernel = _int("kernel_size", kernel, 1)
    stride = _int("stride", kernel if stride is None else stride, 1)
    padding = _int("padding", padding, 0)
    if 2 * padding > kernel:
        raise DnnError(f"padding must be at most kernel_size / 2 (PyTorch's rule), got "
                       f"padding {padding} for kernel_size {kernel}")
    h, w = shape[-2:]
    oh, ow = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
    if oh < 1 or ow < 1:
        raise DnnError(f"kernel_size {kernel} with padding {padding} is larger than the {h} x {w} "
                       "input")
    return int(np.prod(shape[:-2], dtype=np.int64)), h, w, oh, ow, kernel, stride, padding


@host_operator
def pool2d_forward(x, kernel_size, stride=None, padding=0, mode="max", return_indices=False,
                   *, machine=None, cgs=1, engine="c"):
    """Max or average pooling of the planes of x; returns (y, stats), or with
    ``return_indices=True`` (max pooling only) ((y, indices), stats) -- the indices
    ``pool2d_backward`` takes."""
    if mode not in MODES:
        raise DnnError(f"mode must be one of {MODES}, got {mode!r}")
    if not isinstance(return_indices, bool):
        raise ArgumentTypeError(f"return_indices must be a bool, got {return_indices!r}")
    if return_indices and mode != "max":
        raise DnnError(f"return_indices=True is for max pooling, got mode={mode!r}")
    (x,) = float_arrays(x=x)
    planes, h, w, oh, ow, kernel, stride, padding = geometry(x.shape, kernel_size, stride,
                                                             padding)
    machine, cgs = machine_and_cgs(machine, cgs)
    config = machine.config
    es = x.dtype.itemsize
    is_max = mode == "max"
    # output rows per unit: as many as fit the buffers (double-buffered), at most the plane
    free = stream.arena(config).free // 2
    rows = _rows_per_unit(oh, lambda r: _unit_bytes(r, w, ow, kernel, stride, es, is_max)
                          <= free)
    blocks = -(-oh // rows)
    mem = machine.mem
    x_addr = mem.put(np.ascontiguousarray(x).reshape(-1))
    outputs = [mem.alloc(planes * oh * ow * es)] + ([mem.alloc(planes * oh * ow * 4)]
                                                     if is_max else [])
    in_rows = min(h, (rows - 1) * stride + kernel)
    sums = [] if is_max else [ow * 8]          # average: a row of double sums, LDM only
    buffers = [in_rows * w * es] + sums + [rows * ow * es] + ([rows * ow * 4] if is_max else [])
    moved = (planes * h * w * es, planes * oh * ow * (es + (4 if is_max else 0)))
    stats = stream.launch(machine, cgs, name="pool2d", body=f"pool_forward_{mode}_{stream.SUFFIX[es]}",
                          plan="pool_plan", inputs=[x_addr] + [0] * len(sums),
                          outputs=outputs,
                          buffer_bytes=buffers, units=planes * blocks, es=es,
                          params=[1.0 / kernel ** 2],
                          ints=[h, w, oh, ow, kernel, stride, padding, blocks, rows, int(is_max)],
                          moved=moved, engine=engine,
                          details=dict(op="pool2d_forward", mode=mode, rows_per_unit=rows))
    shape = x.shape[:-2] + (oh, ow)
    y = mem.get(outputs[0], shape, x.dtype)
    if not return_indices:
        return y, stats
    return (y, mem.get(outputs[1], shape, np.int32).astype(np.int64)), stats


def _unit_bytes(rows, w, ow, kernel, stride, es, is_max):
    return ((rows - 1) * stride + kernel) * w * es + rows * ow * (es + (4 if is_max else 0)) + \
        (0 if is_max else ow * 8) + 128


def _backward_unit_bytes(rows, w, oh, ow, kernel, stride, es, is_max):
    out_rows = min(oh, (rows + kernel - 2) // stride + 1)
    return rows * w * es + out_rows * ow * (es + (4 if is_max else 0)) + 96


def _rows_per_unit(total, fits):
    """The most rows (at most `total`, halving) whose unit fits in LDM."""
    rows = total
    while rows > 1 and not fits(rows):
        rows = max(1, rows // 2)
    if not fits(rows):
        raise DnnError("pool2d: one row of the planes does not fit in LDM")
    return rows


@host_operator
def pool2d_backward(dy, x_shape, kernel_size, stride=None, padding=0, mode="max",
                    indices=None, *, machine=None, cgs=1, engine="c"):
    """The gradient dx (shape `x_shape`) of pool2d_forward from dy (its output's gradient) and,
    for max pooling, the indices it returned; returns (dx, stats). Max: each dy goes to its
    index; average: each dy / kernel_size² goes to every element of its window."""
    if mode not in MODES:
        raise DnnError(f"mode must be one of {MODES}, got {mode!r}")
    (dy,) = float_arrays(dy=dy)
    x_shape = tuple(int(d) for d in x_shape)
    planes, h, w, oh, ow, kernel, stride, padding = geometry(x_shape, kernel_size, stride,
                                                             padding)
    if dy.shape != x_shape[:-2] + (oh, ow):
        raise DnnError(f"dy must have the forward output's shape {x_shape[:-2] + (oh, ow)}, "
                       f"got {dy.shape}")
    is_max = mode == "max"
    if is_max:
        if indices is None or np.shape(indices) != dy.shape:
            raise DnnError(f"max pooling's backward needs the forward's indices of shape "
                           f"{dy.shape}")
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise DnnError(f"indices must be integers (the forward's), got {indices.dtype}")
        if indices.size and (indices.min() < 0 or indices.max() >= h * w):
            raise DnnError(f"indices must index the {h} x {w} input planes (0..{h * w - 1})")
    machine, cgs = machine_and_cgs(machine, cgs)
    config = machine.config
    es = dy.dtype.itemsize
    free = stream.arena(config).free // 2
    rows = _rows_per_unit(h, lambda r: _backward_unit_bytes(r, w, oh, ow, kernel, stride, es,
                                                            is_max) <= free)
    out_rows = min(oh, (rows + kernel - 2) // stride + 1)
    blocks = -(-h // rows)
    mem = machine.mem
    inputs = [mem.put(np.ascontiguousarray(dy).reshape(-1))]
    if is_max:
        inputs.append(mem.put(indices.astype(np.int32).reshape(-1)))
    dx_addr = mem.alloc(planes * h * w * es)
    buffers = [out_rows * ow * es] + ([out_rows * ow * 4] if is_max else []) + [rows * w * es]
    moved = (planes * oh * ow * (es + (4 if is_max else 0)), planes * h * w * es)
    stats = stream.launch(machine, cgs, name="pool2d_backward",
                          body=f"pool_backward_{stream.SUFFIX[es]}", plan="pool_backward_plan",
                          inputs=inputs, outputs=[dx_addr], buffer_bytes=buffers,
                          units=planes * blocks, es=es, params=[1.0 / kernel ** 2],
                          ints=[h, w, oh, ow, kernel, stride, padding, blocks, rows, int(is_max)],
                          moved=moved, engine=engine,
                          details=dict(op="pool2d_backward", mode=mode, rows_per_unit=rows))
    return mem.get(dx_addr, x_shape, dy.dtype), stats
