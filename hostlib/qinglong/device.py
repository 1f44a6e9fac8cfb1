"""QingLong's memory controller: device memory on a Machine's simulated main memory, with
host <-> device copies charged to the copy model of the configuration
(``host_copy_latency_cycles`` + bytes / ``host_copy_bytes_per_cycle``, docs/qinglong.md)."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError


class DeviceError(ArgumentError):
    """A device-memory call with a block or size it does not accept."""


@dataclass(frozen=True)
class Block:
    """`nbytes` of device memory at `address`."""
    address: int
    nbytes: int


def float64_array(value, ndim: int, what: str) -> np.ndarray:
    """`value` as an `ndim`-D float64 array; ArgumentTypeError naming `what` otherwise."""
    array = np.asarray(value)
    if array.ndim != ndim or array.dtype != np.float64:
        raise ArgumentTypeError(f"{what} must be a {ndim}-D float64 array, got {array.dtype} "
                                f"of shape {array.shape}")
    return array


def check_device(device, who: str) -> None:
    if not isinstance(device, Device):
        raise ArgumentTypeError(f"{who}: device must be a Device, got {type(device).__name__}")


def copy_cycles(config, nbytes: int) -> int:
    """Simulated cycles of one host <-> device copy of `nbytes`."""
    return config.host_copy_latency_cycles + math.ceil(nbytes / config.host_copy_bytes_per_cycle)


class Device:
    """Allocate, free and copy device memory of `machine`; ``copy_cycles`` and ``copies`` add
    up what the copies cost. Freed blocks are reused first fit (the machine's memory only
    grows)."""

    def __init__(self, *, machine):
        self.machine = machine
        self.copy_cycles = 0
        self.copies = 0
        self._live: dict[int, Block] = {}
        self._freed: list[Block] = []

    def malloc(self, nbytes) -> Block:
        if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral) or nbytes < 1:
            raise DeviceError(f"malloc: nbytes must be an int >= 1, got {nbytes!r}")
        for index, block in enumerate(self._freed):
            if block.nbytes >= nbytes:
                del self._freed[index]
                break
        else:
            block = Block(self.machine.mem.alloc(int(nbytes)), int(nbytes))
        self._live[block.address] = block
        return block

    def free(self, block) -> None:
        if not isinstance(block, Block) or self._live.get(block.address) != block:
            raise DeviceError(f"free: {block!r} is not a live block of this device")
        del self._live[block.address]
        self._freed.append(block)

    def check(self, block, nbytes: int, what: str) -> None:
        """Refuse (naming `what`) anything but a live block of this device of `nbytes` or more."""
        if not isinstance(block, Block):
            raise ArgumentTypeError(f"{what}: block must be a Block, got {type(block).__name__}")
        if self._live.get(block.address) != block:
            raise DeviceError(f"{what}: {block!r} is not a live block of this device")
        if nbytes > block.nbytes:
            raise DeviceError(f"{what}: {nbytes} bytes do not fit the block's {block.nbytes}")

    def _charge(self, nbytes: int) -> int:
        cycles = copy_cycles(self.machine.config, nbytes)
        self.copy_cycles += cycles
        self.copies += 1
        return cycles

    def copy_in(self, block, array) -> int:
        """Copy `array` (its bytes, C order) to the start of `block`; returns its cycles."""
        array = np.ascontiguousarray(array)
        self.check(block, array.nbytes, "copy_in")
        self.machine.mem.write(block.address, array)
        return self._charge(array.nbytes)

    def copy_out(self, block, shape, dtype) -> np.ndarray:
        """The array of `shape` and `dtype` at the start of `block` (charged as a copy)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        self.check(block, nbytes, "copy_out")
        self._charge(nbytes)
        return self.machine.mem.get(block.address, shape, dtype)
