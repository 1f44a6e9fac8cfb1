"""QingLong's assembled data package on a device (issue 25 item 1, asm/package.py): the
constants segment copied once, the scratch segment allocated once, and every compute only
writing the I/O table (one slot per input or output) and launching with the three segments'
bases in $16, $17 and $18. Nothing is re-assembled or re-linked when the inputs move.
``BiasAdd`` is the example kernel (kernels/qinglong/bias_add.s)."""
from __future__ import annotations

import functools

import numpy as np

from ...asm import LinkedPackage, build, build_package
from ...asm.program import IO_SLOT_BYTES
from ...errors import ArgumentTypeError
from ...kernels import source_path
from ..runtime import timed_run
from .device import Block, Device, check_device, float64_array
from .net import QingLongError

SEGMENT_ORDER = ("constants", "scratch", "io")    # the launch's $16, $17, $18


class PackageKernel:
    """`entry` of a linked `package` on `device`: ``copy_constant()`` once, then
    ``compute({slot name: Block})`` per input set."""

    def __init__(self, package: LinkedPackage, entry: str, device: Device):
        if not isinstance(package, LinkedPackage):
            raise ArgumentTypeError(f"PackageKernel: package must be a LinkedPackage "
                                    f"(asm.build_package), got {type(package).__name__}")
        check_device(device, "PackageKernel")
        if entry not in package.program.symbols:
            raise QingLongError(f"PackageKernel: the package has no entry {entry!r}")
        self.package, self.entry, self.device = package, entry, device
        self.segments = None     # segment -> Block, once copy_constant ran

    def copy_constant(self) -> int:
        """Allocate the three segments and copy the constants in one transfer; returns the
        copy's cycles."""
        if self.segments is not None:
            raise QingLongError("copy_constant: the constants are on the device already")
        sizes, alignment = self.package.sizes, self.package.alignment
        segments = {name: self.device.malloc(max(1, sizes[name])) for name in SEGMENT_ORDER}
        for name, block in segments.items():
            if block.address % alignment[name]:
                raise QingLongError(f"copy_constant: the {name} segment needs {alignment[name]}"
                                    f"-byte alignment; the device gave {block.address:#x}")
        cycles = 0
        if self.package.constants:
            cycles = self.device.copy_in(segments["constants"],
                                         np.frombuffer(self.package.constants, np.uint8))
        self.segments = segments
        return cycles

    def compute(self, io, *, flops: int = 0, engine: str = "c"):
        """Write the I/O table (`io`: slot name -> Block, every slot bound) and launch; the
        Stats' details have the table's copy cycles."""
        if self.segments is None:
            raise QingLongError("compute: copy_constant first")
        if not isinstance(io, dict):
            raise ArgumentTypeError(f"compute: io must be a dict of slot name -> Block, got "
                                    f"{type(io).__name__}")
        slots = self.package.slots
        unknown = sorted(set(io) - set(slots))
        if unknown:
            raise QingLongError(f"compute: the package has no I/O slot(s) {unknown} (slots: "
                                f"{sorted(slots)})")
        table = np.zeros(self.package.sizes["io"] // IO_SLOT_BYTES, np.int64)
        bound = set()
        for name, block in io.items():
            self.device.check(block, 1, f"compute: io[{name!r}]")
            table[slots[name]] = block.address
            bound.add(slots[name])
        unbound = sorted(set(range(len(table))) - bound)
        if unbound:
            names = {index: name for name, index in slots.items()}
            raise QingLongError(f"compute: I/O slot(s) {[names.get(i, i) for i in unbound]} of "
                                "the package are unbound")
        copy = self.device.copy_in(self.segments["io"], table) if len(table) else 0
        return timed_run(self.package.program, self.entry,
                         [self.segments[name].address for name in SEGMENT_ORDER],
                         machine=self.device.machine, flops=flops, engine=engine,
                         details=dict(copy_cycles=copy))


def _source_with(name: str, symbols: dict) -> tuple:
    """(text, filename) of kernel source `name` (under kernels/) with the absolute `symbols`
    the host defines before it (its sizes)."""
    path = source_path(name)
    header = "".join(f"\t{symbol} = {value}\n" for symbol, value in symbols.items())
    return header + path.read_text(encoding="utf-8"), str(path)


def kernel_package(name: str, **symbols) -> LinkedPackage:
    """The package of kernel source `name` with the host's `symbols` (``_source_with``)."""
    return build_package([_source_with(name, symbols)])


def kernel_program(name: str, **symbols):
    """The program (an ordinary link) of kernel source `name` with the host's `symbols`."""
    return build([_source_with(name, symbols)])


@functools.lru_cache(maxsize=None)
def bias_add_package(n: int) -> LinkedPackage:
    """kernels/qinglong/bias_add.s for vectors of `n` float64, assembled and linked once."""
    return kernel_package("qinglong/bias_add.s", BIAS_BYTES=n * 8)


class BiasAdd:
    """y = x + bias for float64 vectors of n = len(bias) (a multiple of 256: a 32-byte vector
    per CPE) on `device`, as a package: the bias a constant, x and y I/O slots."""

    def __init__(self, bias, device: Device):
        bias = float64_array(bias, 1, "BiasAdd: bias")
        check_device(device, "BiasAdd")
        config = device.machine.config
        quantum = config.num_cpes * config.vector_bytes // 8
        share = bias.nbytes // config.num_cpes
        if bias.size == 0 or bias.size % quantum or 2 * share > config.ldm_bytes // 2:
            raise QingLongError(f"BiasAdd: n must be a positive multiple of {quantum} whose two "
                                f"buffers per CPE (2 x n x 8 / {config.num_cpes} B) take at most "
                                f"half of the {config.ldm_bytes}-B LDM, got n = {bias.size}")
        self.n = bias.size
        self.kernel = PackageKernel(bias_add_package(self.n).with_constant("bias",
                                                                           bias.tobytes()),
                                    "bias_add", device)

    def copy_constant(self) -> int:
        return self.kernel.copy_constant()

    def compute(self, x: Block, y: Block, engine: str = "c"):
        for name, block in (("x", x), ("y", y)):
            self.kernel.device.check(block, self.n * 8, f"BiasAdd.compute: {name}")
        return self.kernel.compute({"x_in": x, "y_out": y}, flops=self.n, engine=engine)
