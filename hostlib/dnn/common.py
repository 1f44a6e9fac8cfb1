"""What every DNN operator's host side shares: its error class and the checks of its
arguments (dtype, shape, the machine and the core groups it may use)."""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...vm import Machine
from ..runtime import LaunchStats, numeric_array

DTYPES = (np.float32, np.float64)


class DnnError(ArgumentError):
    """A DNN operator was called with arguments it does not accept."""


def float_arrays(dtype=None, **arrays):
    """The arrays as numpy, all float32 or all float64 (of `dtype` when given), each with at
    least one element; returns them in the order given."""
    out = []
    for name, value in arrays.items():
        array = numeric_array(name, value)
        if array.dtype not in DTYPES:
            raise DnnError(f"{name} must be float32 or float64, got {array.dtype}")
        if array.size < 1:
            raise DnnError(f"{name} must have at least one element, got shape {array.shape}")
        dtype = dtype or array.dtype
        if array.dtype != dtype:
            raise DnnError(f"{name} must be {np.dtype(dtype).name} like the other operands, "
                           f"got {array.dtype}")
        out.append(array)
    return out


def same_shape(**arrays):
    shapes = {name: np.shape(a) for name, a in arrays.items()}
    if len(set(shapes.values())) > 1:
        raise DnnError("operands must have one shape, got " +
                       ", ".join(f"{name} {shape}" for name, shape in shapes.items()))


def scalar(name, value) -> float:
    """`value` as a float: a real number (else an ArgumentTypeError), finite."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a real number, got {value!r}")
    if not math.isfinite(value):
        raise DnnError(f"{name} must be finite, got {value!r}")
    return float(value)


def machine_and_cgs(machine, cgs):
    """The machine (a new one by default) and the number of core groups to use, checked
    against the machine's configuration."""
    machine = machine or Machine()
    available = machine.num_cgs   # 1 on a Machine.core_group view
    if isinstance(cgs, bool) or not isinstance(cgs, numbers.Integral) or not 1 <= cgs <= available:
        raise DnnError(f"cgs must be an integer in 1..{available} (the machine's core groups), "
                       f"got {cgs!r}")
    return machine, int(cgs)


def combined(parts, **details):
    """One LaunchStats for launches run one after another: cycles, flops and host time add up;
    ``run`` is the last launch's, the detail ``parts`` has every launch's Stats."""
    last = parts[-1]
    return LaunchStats(flops=sum(p.flops for p in parts), cycles=sum(p.cycles for p in parts),
                       kernel_cycles=sum(p.kernel_cycles for p in parts), clock_hz=last.clock_hz,
                       peak_gflops=last.peak_gflops,
                       host_seconds=sum(p.host_seconds for p in parts), run=last.run,
                       details=dict(details, parts=list(parts)))


def chip(per_cg, **details):
    """One LaunchStats for work split over core groups that run side by side: the cycles are the
    slowest CG's, flops and host time add up, the peak is the CGs'; ``per_cg`` has each CG's
    Stats."""
    slowest = max(per_cg, key=lambda p: p.cycles)
    return LaunchStats(flops=sum(p.flops for p in per_cg), cycles=slowest.cycles,
                       kernel_cycles=slowest.kernel_cycles, clock_hz=slowest.clock_hz,
                       peak_gflops=sum(p.peak_gflops for p in per_cg),
                       host_seconds=sum(p.host_seconds for p in per_cg), run=per_cg[0].run,
                       details=dict(details, per_cg=list(per_cg), cgs=len(per_cg)))


def split(n: int, parts: int):
    """[lo, hi) ranges cutting range(n) into at most `parts` non-empty contiguous pieces."""
    bounds = [n * i // parts for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]
