"""``Kernel``: one assembly kernel as the host sees it, everything read from the kernel itself.

A kernel is the objects it links (``kernels.program``), an entry, the LDM symbol from which the
host may place buffers, the global symbol giving the stack of its call chain, and the job
records it reads, whose field offsets and sizes are the absolute symbols of its source
(e.g. ``J_MB = 8`` and ``JOB_BYTES = 992`` in ``kernels/gemm/swgemm.s``): nothing of the
kernel's layout is restated in Python.

What a kernel assumes of the machine is declared the same way, as absolute symbols
``REQ_<PARAMETER> = value`` (``REQ_MESH_ROWS = 8`` in ``kernels/gemm/gemm_prim.inc``: the
primitive's 8 broadcast steps); every launch checks them against the machine's configuration
and refuses, naming the kernel, the requirement and the configuration, what it cannot run.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import ArgumentError, SwsimError
from ...kernels import KERNEL_DIR, object_file, program
from ...vm.machine import ARGUMENT_REGISTERS, ARGUMENT_SLOT_BYTES, STACK_ALIGN
from .stats import LaunchStats

LDM_ALIGN = 32                # buffers start at 32-byte (vector) boundaries
REQUIREMENT_PREFIX = "REQ_"   # REQ_MESH_ROWS = 8: the configuration's mesh_rows must be 8
CHECKED_PARAMETERS = ("mesh_rows", "mesh_cols")   # what a kernel may declare it requires


class RequirementError(ArgumentError):
    """A kernel launched on a machine whose configuration it does not support."""


@dataclass(frozen=True)
class Requirement:
    """A configuration parameter a kernel source needs to have `value`, declared at `where`."""
    parameter: str
    value: int
    where: str


def align(nbytes: int, to: int = LDM_ALIGN) -> int:
    return -(-nbytes // to) * to


class Record:
    """A job-record layout: the absolute symbols ``PREFIX<FIELD>`` of a program (field name in
    lower case -> byte offset) and the record size ``size_symbol``."""

    def __init__(self, prog, prefix: str, size_symbol: str):
        self.prefix = prefix
        self.offsets = {name[len(prefix):].lower(): sym.value
                        for name, sym in prog.symbols.items()
                        if name.startswith(prefix) and sym.section is None}
        if not self.offsets:
            raise SwsimError(f"the kernel defines no record fields {prefix}*")
        self.nbytes = prog.address_of(size_symbol)

    def offset(self, field: str) -> int:
        try:
            return self.offsets[field]
        except KeyError:
            raise SwsimError(f"record {self.prefix}* has no field {field!r} (fields: "
                             f"{', '.join(sorted(self.offsets))})") from None

    def write(self, words: np.ndarray, at: int = 0, /, **values) -> None:
        """Store int64 fields into `words` (int64 words) for the record starting at byte `at`;
        a float value is stored as its IEEE double bits."""
        for field, value in values.items():
            if isinstance(value, (float, np.floating)):
                value = np.float64(value).view(np.int64)
            words[(at + self.offset(field)) // 8] = value

    def new(self, **values) -> np.ndarray:
        """A zeroed record (int64 words) with `values` written."""
        words = np.zeros(self.nbytes // 8, np.int64)
        self.write(words, **values)
        return words


class LdmArena:
    """LDM planning: buffers taken upward from `start`, 32-byte aligned, below `limit`."""

    def __init__(self, start: int, limit: int):
        self.address = align(start)
        self.limit = limit

    def take(self, nbytes: int) -> int:
        start = self.address
        self.address += align(nbytes)
        return start

    @property
    def free(self) -> int:
        return self.limit - self.address

    @property
    def fits(self) -> bool:
        return self.address <= self.limit


@dataclass(frozen=True)
class Kernel:
    """`sources` (kernel files, linked in this order), `entry`, the LDM symbol `ldm_end` from
    which the host places buffers and the global absolute symbol `stack` holding the bytes of
    stack the deepest call chain takes (none: the kernel keeps no frames)."""
    sources: tuple
    entry: str
    ldm_end: str
    stack: Optional[str] = None

    @property
    def program(self):
        return program(*self.sources)

    def symbol(self, name: str) -> int:
        return self.program.address_of(name)

    @property
    def requirements(self) -> tuple:
        """The ``REQ_*`` symbols of every source (each source's own: a linked program keeps
        only the first of equal local names)."""
        return _requirements(self.sources)

    def required(self, parameter: str) -> int:
        """The value the kernel requires of a configuration `parameter` (e.g. the mesh side
        its data layout is built for), so that hosts do not restate it."""
        values = {r.value for r in self.requirements if r.parameter == parameter}
        if len(values) != 1:
            raise SwsimError(f"kernel {self.entry} declares {len(values)} values of "
                             f"{REQUIREMENT_PREFIX}{parameter.upper()}, not one")
        return values.pop()

    @property
    def mesh_side(self) -> int:
        """The side of the square mesh the kernel requires (its blocks laid out 8 x 8...)."""
        rows, cols = self.required("mesh_rows"), self.required("mesh_cols")
        if rows != cols:
            raise SwsimError(f"kernel {self.entry} requires a {rows} x {cols} mesh, not a "
                             "square one")
        return rows

    def check(self, config, nargs: Optional[int] = None) -> None:
        """Refuse a configuration the kernel does not declare it runs on; with `nargs`, also
        one whose LDM cannot hold the kernel's data and stack."""
        for req in self.requirements:
            have = getattr(config, req.parameter)
            if have != req.value:
                raise RequirementError(
                    f"machine: kernel {self.entry} ({' + '.join(self.sources)}) needs "
                    f"{req.parameter} = {req.value} ({REQUIREMENT_PREFIX}"
                    f"{req.parameter.upper()}, {req.where}); this machine has {req.parameter} "
                    f"= {have} (a {config.mesh_rows} x {config.mesh_cols} mesh, "
                    f"{config.ldm_bytes} B of LDM)")
        if nargs is not None:
            used = self.symbol(self.ldm_end) + self.stack_bytes(nargs)
            if used > config.ldm_bytes:
                raise RequirementError(
                    f"machine: kernel {self.entry} ({' + '.join(self.sources)}) takes {used} B "
                    f"of LDM (data and stack); this machine has ldm_bytes = {config.ldm_bytes}")

    def record(self, prefix: str, size_symbol: str) -> Record:
        return _record(self.sources, prefix, size_symbol)

    def stack_bytes(self, nargs: int) -> int:
        """LDM the run takes at the top: the declared stack and the spawn's argument area
        (the VM's ABI: arguments past the registers, 8 bytes each, 32-byte aligned)."""
        stack_args = max(0, nargs - len(ARGUMENT_REGISTERS))
        area = align(stack_args * ARGUMENT_SLOT_BYTES, STACK_ALIGN)
        return area + (self.symbol(self.stack) if self.stack else 0)

    def arena(self, ldm_bytes: int, nargs: int) -> LdmArena:
        """The LDM free for the host's buffers, between the kernel's data and its stack."""
        return LdmArena(self.symbol(self.ldm_end), ldm_bytes - self.stack_bytes(nargs))

    def launch(self, machine, args, *, flops: int, engine: str = "c", details=None,
               cycles=None, progress=None) -> LaunchStats:
        """Run the entry on every CPE of `machine` and time it. `cycles(result)` gives the
        timed region when the kernel times itself (default: the whole kernel);
        `progress(cycle)` is Machine.run's."""
        self.check(machine.config, len(args))
        return timed_run(self.program, self.entry, args, machine=machine, flops=flops,
                         engine=engine, details=details, cycles=cycles, progress=progress)


    def launch_cgs(self, machine, args_per_cg, *, flops: int, engine: str = "c",
                   details=None) -> LaunchStats:
        """Run the entry on every CPE of core groups 0, 1, ... at once, CG g with
        `args_per_cg[g]` (``Machine.spawn`` / ``join_all`` of those runs; `machine` may be a
        ``Machine.core_group`` view, of one CG). The Stats' cycles are the slowest
        CG's; ``run`` is CG 0's RunResult and the detail ``runs`` has every CG's."""
        if not args_per_cg:
            raise SwsimError("launch_cgs needs the arguments of at least one core group")
        for args in args_per_cg:
            self.check(machine.config, len(args))
        start = time.perf_counter()
        handles = []
        try:
            last = len(args_per_cg) - 1     # simulated on this thread: no thread to start
            for cg, args in enumerate(args_per_cg):
                handles.append(machine.spawn(self.program, entry=self.entry, args=list(args),
                                             cg=cg, engine=engine, here=cg == last))
        except SwsimError:        # e.g. a CG busy: the CGs already spawned are not left running
            for handle in handles:
                try:
                    handle.join()
                except SwsimError:
                    pass          # the spawn's error is the one raised
            raise
        runs = machine.join_all(handles)   # these runs only: other threads may use other CGs
        host_seconds = time.perf_counter() - start
        results = [runs[cg] for cg in range(len(args_per_cg))]
        config = machine.config
        cycles = max(r.kernel_cycles for r in results)
        return LaunchStats(flops=flops, cycles=cycles, kernel_cycles=cycles,
                           clock_hz=config.clock_hz,
                           peak_gflops=config.peak_gflops_cg * len(results),
                           host_seconds=host_seconds, run=results[0],
                           details=dict(details or {}, runs=results))


def timed_run(program, entry: str, args, *, machine, flops: int, engine: str = "c",
              details=None, cycles=None, progress=None) -> LaunchStats:
    """Run `entry` of `program` on every CPE of `machine` and time it (``Kernel.launch``
    without the kernel's checks: also for programs not among the kernel sources)."""
    start = time.perf_counter()
    res = machine.run(program, entry=entry, args=list(args), engine=engine, progress=progress)
    host_seconds = time.perf_counter() - start
    config = machine.config
    return LaunchStats(flops=flops,
                       cycles=res.kernel_cycles if cycles is None else int(cycles(res)),
                       kernel_cycles=res.kernel_cycles, clock_hz=config.clock_hz,
                       peak_gflops=config.peak_gflops_cg, host_seconds=host_seconds, run=res,
                       details=dict(details or {}))


@functools.lru_cache(maxsize=None)
def _record(sources: tuple, prefix: str, size_symbol: str) -> Record:
    return Record(program(*sources), prefix, size_symbol)


@functools.lru_cache(maxsize=None)
def _requirements(sources: tuple) -> tuple:
    found = []
    for source in sources:
        for sym in object_file(source).symbols.values():
            if sym.section is not None or not sym.name.startswith(REQUIREMENT_PREFIX):
                continue
            parameter = sym.name[len(REQUIREMENT_PREFIX):].lower()
            if parameter not in CHECKED_PARAMETERS:
                raise SwsimError(f"kernel source {source} declares {sym.name}, but the launch "
                                 f"checks only {', '.join(sorted(CHECKED_PARAMETERS))}")
            found.append(Requirement(parameter, sym.value, _where(sym, source)))
    return tuple(found)


def _where(sym, source: str) -> str:
    if sym.source is None:
        return source
    path = Path(sym.source.file)
    if path.is_relative_to(KERNEL_DIR):
        path = path.relative_to(KERNEL_DIR)
    return f"{path}:{sym.source.line}"
