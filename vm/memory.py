"""Main memory as the host sees it: numpy arrays in, numpy arrays out.

Main memory starts at ``config.mem_base``. The first ``config.static_data_bytes`` are reserved
for programs' static data (.data/.rodata); host allocations (``put``, ``alloc``) follow, each
aligned to ``config.mem_align`` (128 bytes). Only what is used is backed by a numpy buffer that
grows on demand up to ``config.mem_limit``; engines see exactly the used range, so an access
past the last allocation faults. All core groups share this memory.

While kernels run (spawned and not yet joined) their engines work on the buffer in place, so
it must not move: allocations (and program data that would grow it) are refused until every
running core group is joined (docs/vm.md "Chip").
"""
from __future__ import annotations

import numbers
import weakref

import numpy as np

from .faults import HostError


class Memory:
    def __init__(self, config):
        self.base = config.mem_base
        self.align = config.mem_align
        self.limit = config.mem_limit
        self.static_bytes = config.static_data_bytes
        self._buffer = np.zeros(0, dtype=np.uint8)
        self._size = 0                   # bytes in use, from base
        self._next = self.static_bytes   # offset of the next allocation
        self._placed: dict[int, tuple[weakref.ref, int]] = {}  # id(array) -> (array, address)
        self._pinned: set[int] = set()   # core groups whose running engines use the buffer

    def pin(self, cg: int) -> None:
        """Core group ``cg`` runs on the buffer (called by ``Machine.spawn``): no growth."""
        self._pinned.add(cg)

    def unpin(self, cg: int) -> None:
        """Core group ``cg`` was joined (called by ``CgRun.join``)."""
        self._pinned.discard(cg)

    @property
    def end(self) -> int:
        """One past the last allocated address."""
        return self.base + self._size

    @property
    def available(self) -> int:
        """Bytes that allocations may still take before ``mem_limit``."""
        return self.limit - self._next

    def view(self) -> np.ndarray:
        """The used range as a uint8 array (what engines run on; writes go to memory)."""
        return self._buffer[:self._size]

    def _reserve(self, end_offset: int) -> None:
        if end_offset > self._size and self._pinned:
            running = ", ".join(str(cg) for cg in sorted(self._pinned))
            raise HostError(f"main memory cannot grow while kernels run (CG {running}): "
                            "allocate (mem.put, mem.alloc) before spawning, or join first")
        if end_offset > self.limit:
            raise HostError(f"main memory limit of {self.limit} bytes (config.mem_limit) "
                            f"exceeded: {end_offset} bytes needed")
        if end_offset > len(self._buffer):
            grown = np.zeros(max(end_offset, 2 * len(self._buffer)), dtype=np.uint8)
            grown[:self._size] = self._buffer[:self._size]
            self._buffer = grown
        self._size = max(self._size, end_offset)

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` of zeroed main memory; returns its (aligned) address. Zero bytes
        get ``empty_address``, where every access faults."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral) or nbytes < 0:
            raise HostError(f"alloc expects a number of bytes (an int >= 0), got {nbytes!r}")
        nbytes = int(nbytes)
        if nbytes == 0:
            return self.empty_address
        offset = self._next
        self._reserve(offset + nbytes)
        self._next = -(-(offset + nbytes) // self.align) * self.align
        return self.base + offset

    @property
    def empty_address(self) -> int:
        """The address of empty allocations: the end of what main memory may ever hold, so no
        allocation comes to lie there and a kernel reading "the empty array" faults."""
        return self.base + self.limit

    def put(self, array) -> int:
        """Copy an array into new main memory; returns its address. Passing the same array
        object to ``Machine.run`` later passes this address."""
        given = type(array).__name__
        array = np.asarray(array)
        _check_numeric(array.dtype, "put", given)
        address = self.alloc(array.nbytes)
        self.write(address, array)
        self._placed[id(array)] = (weakref.ref(array), address)
        return address

    def address_of(self, array) -> int:
        """The address an array was ``put`` at."""
        placed = self._placed.get(id(array))
        if placed is None or placed[0]() is not array:
            raise HostError("array not in memory; use m.mem.put(array) and pass the array or "
                            "the address it returns")
        return placed[1]

    def write(self, address: int, array) -> None:
        """Overwrite memory at ``address`` with the bytes of ``array``."""
        array = np.asarray(array)
        _check_numeric(array.dtype, "write")
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        offset = self._offset(address, len(data))
        self._buffer[offset:offset + len(data)] = data

    def get(self, address: int, shape, dtype) -> np.ndarray:
        """A copy of the array of ``shape`` and ``dtype`` stored at ``address``."""
        try:
            dtype = np.dtype(dtype)
            shape = tuple(int(d) for d in (shape if np.iterable(shape) else (shape,)))
        except (TypeError, ValueError) as exc:
            raise HostError(f"get expects a shape of ints and a numpy dtype: {exc}") from None
        _check_numeric(dtype, "get")
        if min(shape, default=0) < 0:
            raise HostError(f"get: shape {shape} has a negative size")
        count = int(np.prod(shape, dtype=np.int64))
        offset = self._offset(address, count * dtype.itemsize)
        data = self._buffer[offset:offset + count * dtype.itemsize]
        return data.view(dtype).reshape(shape).copy()

    def load_static(self, address: int, data: bytes) -> None:
        """Place a program's static data (must lie in the reserved region)."""
        offset = address - self.base
        if offset < 0 or offset + len(data) > self.static_bytes:
            raise HostError(f"program data ({len(data)} bytes at {address:#x}) does not fit the "
                            f"{self.static_bytes} bytes reserved at {self.base:#x} "
                            "(config.static_data_bytes)")
        self._reserve(offset + len(data))
        self._buffer[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def _offset(self, address: int, nbytes: int) -> int:
        if isinstance(address, bool) or not isinstance(address, numbers.Integral):
            raise HostError(f"expected a main-memory address (an int), got {address!r}")
        if nbytes == 0:   # nothing is read or written (an empty array anywhere)
            return 0
        offset = int(address) - self.base
        if offset < 0 or offset + nbytes > self._size:
            raise HostError(f"{nbytes} bytes at {address:#x} are outside allocated main memory "
                            f"({self.base:#x}..{self.end:#x})")
        return offset


# Array kinds main memory holds: bool, signed/unsigned integers, floats, complex.
NUMERIC_KINDS = "biufc"


def _check_numeric(dtype: np.dtype, what: str, given: str = "array") -> None:
    if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None:
        raise HostError(f"{what} expects a numeric array (bool, int, float or complex), "
                        f"got a {given} of dtype {dtype}")
