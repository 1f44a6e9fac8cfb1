"""Static memory planning (thesis §7.1): every blob of a kind lives in ONE host buffer whose
start and every member's offset are 128-byte aligned; members are numpy views into it. The
packed gradient buffer is one such arena, so an update (or an allreduce) is one call over it."""
from __future__ import annotations

import numpy as np

from .common import ALIGN, DTYPE


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


class Arena:
    """Named arrays packed into one aligned buffer: ``add`` them all, then ``build`` once."""

    def __init__(self, dtype=DTYPE):
        self.dtype = np.dtype(dtype)
        self.layout = {}            # name -> (byte offset, shape)
        self.nbytes = 0
        self.buffer = None          # the flat array of all members (padding included)
        self.views = {}

    def add(self, name: str, shape) -> None:
        shape = tuple(int(d) for d in shape)
        self.layout[name] = (self.nbytes, shape)
        self.nbytes += _aligned(int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize)

    def build(self) -> "Arena":
        raw = np.zeros(self.nbytes + ALIGN, np.uint8)
        start = (-raw.ctypes.data) % ALIGN
        self.buffer = raw[start:start + self.nbytes].view(self.dtype)
        self.views = {name: self.member(self.buffer, name) for name in self.layout}
        return self

    def member(self, buffer: np.ndarray, name: str) -> np.ndarray:
        """Member ``name`` of ``buffer``, a flat array laid out as this arena (e.g. the
        solver's history, which shares the parameters' layout)."""
        offset, shape = self.layout[name]
        first = offset // self.dtype.itemsize
        return buffer[first:first + int(np.prod(shape, dtype=np.int64))].reshape(shape)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.views[name]
