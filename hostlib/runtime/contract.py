"""What every public host operator does the same way (issue 30's one contract):
``host_operator`` wraps one (numpy arrays in and out, keyword-only ``machine=`` and ``cgs=``)
so that a machine or core-group count of the wrong type is refused by name, an array larger
than the simulated memory left is refused before anything is copied (a broadcast view of a
few bytes may stand for gigabytes), and the main memory it allocated is released when it
returns or raises; ``numeric_array`` is the array
argument check that tells a wrong type (a string, a Machine, None) from a wrong dtype."""
from __future__ import annotations

import contextlib
import functools
import inspect
import numbers

import numpy as np

from ...errors import ArgumentTypeError
from ...vm import HostError, Machine, VMConfig
from ...vm.machine import CoreGroup

NUMERIC_KINDS = "biufc"          # bool, ints, floats, complex: a dtype check's business


def numeric_array(name: str, value) -> np.ndarray:
    """`value` as a numpy array; anything that is not numbers is an ArgumentTypeError naming
    `name` (which dtypes an operator takes is its own check)."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        array = None
    if array is None or array.dtype.kind not in NUMERIC_KINDS:
        raise ArgumentTypeError(f"{name} must be an array of numbers, got "
                                f"{type(value).__name__}")
    return array


def check_machine(machine) -> None:
    if machine is not None and not isinstance(machine, (Machine, CoreGroup)):
        raise ArgumentTypeError(f"machine must be a swsim.Machine (or Machine.core_group's "
                                f"view) or None, got {type(machine).__name__}")


def check_sizes(bound: inspect.BoundArguments, machine) -> None:
    """Refuse an array argument whose bytes exceed what `machine`'s memory has left (the
    default preset's whole memory when there is no machine yet)."""
    left = machine.mem.available if machine is not None else DEFAULT_MEMORY
    arrays = {name: value for name, value in bound.arguments.items()
              if isinstance(value, np.ndarray)}
    for name, value in arrays.items():
        if value.nbytes > left:
            raise HostError(f"{name}: {value.nbytes} bytes (shape {value.shape}, "
                            f"{value.dtype}) is more than the {left} bytes of simulated main "
                            f"memory left (config.mem_limit)")
    if sum(value.nbytes for value in arrays.values()) > left:
        raise HostError(f"{', '.join(arrays)}: {sum(v.nbytes for v in arrays.values())} bytes "
                        f"together, more than the {left} bytes of simulated main memory left "
                        f"(config.mem_limit)")


DEFAULT_MEMORY = VMConfig.preset().mem_limit


@contextlib.contextmanager
def scratch(machine):
    """Main memory allocated inside is released at the end, on a ``Machine`` (the caller owns
    its memory). A core group's view (``Machine.core_group``) shares the chip's memory with
    other host threads, which may allocate meanwhile: whoever drives the chip scopes it (the
    Solver does). While kernels still run on other core groups, release is refused: the
    memory then stays allocated, as it did before operators released it."""
    if not isinstance(machine, Machine):
        yield
        return
    mark = machine.mem.mark()
    try:
        yield
    finally:
        with contextlib.suppress(HostError):
            machine.mem.release(mark)


def host_operator(operator):
    """`operator` with the contract's checks of ``machine=`` and ``cgs=`` (their ranges stay
    the operator's) and of its arrays' sizes, releasing what it allocates on ``machine``."""
    signature = inspect.signature(operator)

    @functools.wraps(operator)
    def checked(*args, **kwargs):
        machine = kwargs.get("machine")
        check_machine(machine)
        cgs = kwargs.get("cgs", 1)
        if isinstance(cgs, bool) or not isinstance(cgs, numbers.Integral):
            raise ArgumentTypeError(f"cgs must be an int (core groups), got {cgs!r}")
        check_sizes(signature.bind(*args, **kwargs), machine)
        with scratch(machine):
            return operator(*args, **kwargs)
    return checked
