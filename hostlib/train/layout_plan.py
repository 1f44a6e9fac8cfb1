"""Layouts in the static graph (thesis §7.1): each layer's operator runs in a layout (its conv
algorithm's, NCHW for the others, its bottom's for layout-free layers), and a ``Transform`` is
inserted wherever a blob (or a gradient) reaches a layer in another layout. A blob in layout L
is stored with its axes in L's order (``physical``); the Net keeps the logical NCHW shape."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...vm import Machine
from .. import dnn
from ..dnn.layout_transform import LAYOUTS, swap_passes
from .common import DTYPE, stream_seconds

CANONICAL = "NCHW"          # Caffe's: data, pooling, BatchNorm, Scale, InnerProduct's input
# Transforms of at most this many bytes are predicted by simulating them once: there the
# launch and the first and last units, not the stream, decide (C engine, float32, one CG:
# 16x8x8x8 NCHW>CNHW 16 591 cycles against a stream bound of 3 272; 64x64x56x56 at 97.9 %
# of its stream rate).
SIMULATED_BYTES = 1 << 20


def physical(shape, layout: str) -> tuple:
    """The stored shape of a blob of logical (NCHW) ``shape`` in ``layout`` (only 4-D blobs
    have one; others are stored as they are)."""
    shape = tuple(shape)
    if len(shape) != 4:
        return shape
    sizes = dict(zip("NCHW", shape))
    return tuple(sizes[axis] for axis in LAYOUTS[layout])


def transform_row(what: str, src: str, dst: str) -> str:
    """The name under which a transform's simulated seconds are accounted and explained."""
    return f"transform {what} {src}>{dst}"


@dataclass(frozen=True)
class Transform:
    """A layout-transform operator inserted by the pass: ``what`` (a blob, or ``d(blob)`` for
    its gradient) of logical ``shape`` from ``src`` to ``dst``, one ``dnn.transform`` on the
    VM whose seconds go to its own row."""
    what: str
    src: str
    dst: str
    shape: tuple
    direction: str          # "forward" or "backward"

    @property
    def row(self) -> str:
        return transform_row(self.what, self.src, self.dst)

    def __call__(self, run, layer, array):
        return run.transform(layer, self.row, array, self.src, self.dst)

    def predicted_seconds(self, config) -> float:
        """Small tensors: one simulated run (cached per shape); larger ones: each pass of
        dnn.transform streams the tensor in and out once (the DMA bound)."""
        nbytes = int(np.prod(self.shape)) * np.dtype(DTYPE).itemsize
        if nbytes <= SIMULATED_BYTES:
            return _simulated_seconds(physical(self.shape, self.src), self.src, self.dst, config)
        passes = len(swap_passes(physical(self.shape, self.src), self.src, self.dst))
        return passes * stream_seconds(2 * nbytes, config)


@functools.lru_cache(maxsize=None)
def _simulated_seconds(shape, src, dst, config) -> float:
    zeros = np.zeros(shape, DTYPE)          # the cycles do not depend on the values
    return dnn.transform(zeros, src, dst, machine=Machine(config))[1].seconds


def transform_if_needed(what, shape, src, dst, direction):
    """A Transform from ``src`` to ``dst``, or None where nothing needs one (equal layouts,
    or a blob that is not 4-D and so has no layout)."""
    if src == dst or len(shape) != 4:
        return None
    return Transform(what, src, dst, tuple(shape), direction)
