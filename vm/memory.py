"""Main memory as the host sees it: numpy arrays in, numpy arrays out.

Main memory starts at ``config.mem_base``. The first ``config.static_data_bytes`` are reserved
for programs' static data (.data/.rodata); host allocations (``put``, ``alloc``) follow, each
aligned to ``config.mem_align`` (128 bytes). Only what is used is backed by a numpy buffer that
grows on demand up to ``config.mem_limit``; engines see exactly the used range, so an access
past the last allocation faults. All core groups share this memory.

While kernels run (spawned and not yet joined) their engines work on the buffer in place, so
it must not move. ``reserve(nbytes)`` makes room ahead (a zeroed numpy buffer is lazily
committed: capacity nobody touches costs address space, not RAM); allocations that fit the
capacity are allowed while core groups run, from any host thread (a lock serialises them),
and one that would have to move the buffer is refused until every running core group is
joined. ``mark()`` / ``release(mark)`` give back what was allocated since the mark (zeroed
again), e.g. a training step's scratch. See docs/vm.md "Chip".
"""
from __future__ import annotations

import math
import numbers
import threading
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
        # Guards the buffer, the sizes and _placed for host threads (one per core group); the
        # engines do not take it: they work on the buffer in place, which then cannot move.
        self._lock = threading.RLock()

    def pin(self, cg: int) -> None:
        """Core group ``cg`` runs on the buffer (called by ``Machine.spawn``): no moving."""
        with self._lock:
            self._pinned.add(cg)

    def unpin(self, cg: int) -> None:
        """Core group ``cg`` was joined (called by ``CgRun.join``)."""
        with self._lock:
            self._pinned.discard(cg)

    @property
    def end(self) -> int:
        """One past the last allocated address."""
        return self.base + self._size

    @property
    def available(self) -> int:
        """Bytes that allocations may still take before ``mem_limit``."""
        return self.limit - self._next

    @property
    def capacity(self) -> int:
        """Bytes from ``base`` the buffer holds without moving (allocated or reserved)."""
        return len(self._buffer)

    def view(self) -> np.ndarray:
        """The used range as a uint8 array (what engines run on; writes go to memory)."""
        with self._lock:
            return self._buffer[:self._size]

    def reserve(self, nbytes: int) -> None:
        """Make room for ``nbytes`` more of allocations (from the next one on) without moving
        the buffer, so that they are allowed while core groups run. Only the pages written
        take RAM. Moving the buffer now is refused while core groups run."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral) or nbytes < 0:
            raise HostError(f"reserve expects a number of bytes (an int >= 0), got {nbytes!r}")
        with self._lock:
            end = self._next + int(nbytes)
            self._check_limit(end)
            self._grow(end, exact=True)

    def mark(self) -> int:
        """The allocation point, for ``release``."""
        with self._lock:
            return self._next

    def release(self, mark: int) -> None:
        """Give back every allocation made since ``mark()`` returned ``mark``: their bytes are
        zeroed (allocations stay zeroed), arrays ``put`` there are forgotten, and the next
        allocations reuse the space. Refused while core groups run (their kernels may use it);
        the capacity stays reserved."""
        with self._lock:
            if self._pinned:
                raise HostError(f"cannot release main memory while kernels run "
                                f"(CG {self._running()}): join first")
            if isinstance(mark, bool) or not isinstance(mark, numbers.Integral) or \
                    not self.static_bytes <= mark <= self._next or mark % self.align:
                raise HostError(f"release expects a mark from mem.mark() at or before the "
                                f"allocation point {self._next}, got {mark!r}")
            self._buffer[mark:self._size] = 0
            self._size = min(self._size, int(mark))
            self._next = int(mark)
            address = self.base + mark
            self._placed = {key: placed for key, placed in self._placed.items()
                            if placed[1] < address}

    def _running(self) -> str:
        return ", ".join(str(cg) for cg in sorted(self._pinned))

    def _check_limit(self, end_offset: int) -> None:
        if end_offset > self.limit:
            raise HostError(f"main memory limit of {self.limit} bytes (config.mem_limit) "
                            f"exceeded: {end_offset} bytes needed")

    def _grow(self, end_offset: int, exact: bool = False) -> None:
        """Make the buffer hold ``end_offset`` bytes, moving it (doubling, unless ``exact``)
        if it must; refused while core groups run on it."""
        if end_offset <= len(self._buffer):
            return
        if self._pinned:
            raise HostError(
                f"main memory would have to move to hold {end_offset} bytes (capacity "
                f"{len(self._buffer)}) while kernels run on it (CG {self._running()}): reserve "
                f"room before spawning (mem.reserve(nbytes)), or join first")
        grown = np.zeros(end_offset if exact else min(self.limit, max(
            end_offset, 2 * len(self._buffer))), dtype=np.uint8)
        grown[:self._size] = self._buffer[:self._size]
        self._buffer = grown

    def _extend(self, end_offset: int) -> None:
        """Make the used range reach ``end_offset`` (growing the buffer if it may)."""
        self._check_limit(end_offset)
        self._grow(end_offset)
        self._size = max(self._size, end_offset)

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` of zeroed main memory; returns its (aligned) address. Zero bytes
        get ``empty_address``, where every access faults."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral) or nbytes < 0:
            raise HostError(f"alloc expects a number of bytes (an int >= 0), got {nbytes!r}")
        nbytes = int(nbytes)
        if nbytes == 0:
            return self.empty_address
        with self._lock:
            offset = self._next
            self._extend(offset + nbytes)
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
        with self._lock:
            address = self.alloc(array.nbytes)
            self.write(address, array)
            self._placed[id(array)] = (weakref.ref(array), address)
            return address

    def address_of(self, array) -> int:
        """The address an array was ``put`` at."""
        with self._lock:
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
        with self._lock:
            offset = self._offset(address, len(data))
            self._buffer[offset:offset + len(data)] = data

    def get(self, address: int, shape, dtype) -> np.ndarray:
        """A copy of the array of ``shape`` and ``dtype`` stored at ``address``."""
        sizes = tuple(shape) if np.iterable(shape) else (shape,)
        if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) for d in sizes):
            raise HostError(f"get: shape must be ints (a size or a tuple of sizes), got {shape!r}")
        shape = tuple(map(int, sizes))
        try:
            dtype = np.dtype(dtype)
        except (TypeError, ValueError) as exc:
            raise HostError(f"get expects a numpy dtype: {exc}") from None
        _check_numeric(dtype, "get")
        if min(shape, default=0) < 0:
            raise HostError(f"get: shape {shape} has a negative size")
        count = math.prod(shape)                 # exact: the bounds check sees a huge shape
        with self._lock:
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
        with self._lock:
            self._extend(offset + len(data))
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
