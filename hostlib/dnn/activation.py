"""Activation operators (ReLU, sigmoid, tanh; forward and backward) and exp on the VM.

The host copies the arrays into simulated main memory, writes the job record of
``kernels/dnn/activation.s`` (field offsets and op codes read from the kernel's symbols) and
spawns it on the 64 CPEs of a core group; every element is computed by CPE instructions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...vm import HostError
from ...kernels import program
from ...vm import Machine

KERNEL = "dnn/activation.s"
ENTRY = "activation"
KINDS = ("relu", "sigmoid", "tanh")
# Backward needs x for ReLU and y for sigmoid and tanh (as cuDNN computes them).
_BACKWARD_INPUT = {"relu": "x", "sigmoid": "y", "tanh": "y"}


@dataclass
class ActivationStats:
    """What one call did on the VM."""
    op: str                   # kernel op name, e.g. "SIGMOID_BACKWARD"
    dtype: str
    n: int                    # elements
    bytes: int                # bytes read and written in main memory
    kernel_cycles: int        # spawn excluded
    clock_hz: float
    peak_bytes_per_second: float   # the CG's DMA peak (machine.config)
    run: object               # the VM's RunResult

    @property
    def cycles(self) -> int:
        return self.kernel_cycles

    @property
    def seconds(self) -> float:
        return self.kernel_cycles / self.clock_hz

    @property
    def gbytes_per_second(self) -> float:
        return self.bytes / self.seconds / 1e9

    @property
    def peak_gbytes_per_second(self) -> float:
        return self.peak_bytes_per_second / 1e9

    @property
    def bandwidth_ratio(self) -> float:
        """Achieved bandwidth / DMA peak."""
        return self.gbytes_per_second / self.peak_gbytes_per_second


def activation_forward(x, kind: str = "relu", *, machine=None, engine: str = "c"):
    """y = f(x) element-wise for f = relu, sigmoid or tanh; returns (y, ActivationStats).

    ``x``: a float32 or float64 array of any shape with at least one element. ``machine``:
    the VM to run on (a new default Machine if None); ``engine``: "c" or "python".
    """
    _check_kind(kind)
    return _run(kind.upper(), _array("x", x), None, machine, engine)


def activation_backward(dy, *, x=None, y=None, kind: str = "relu", machine=None,
                        engine: str = "c"):
    """dx = dy * f'(.) element-wise; returns (dx, ActivationStats).

    ReLU needs ``x`` (dx = dy where x > 0, else 0); sigmoid and tanh need the forward output
    ``y`` (dx = dy y (1 - y), dx = dy (1 - y^2)).
    """
    _check_kind(kind)
    needed = _BACKWARD_INPUT[kind]
    given = {"x": x, "y": y}[needed]
    if given is None:
        raise HostError(f"activation_backward(kind={kind!r}) needs {needed}=, the forward "
                        f"{'input' if needed == 'x' else 'output'}")
    dy = _array("dy", dy)
    given = _array(needed, given)
    if given.shape != dy.shape or given.dtype != dy.dtype:
        raise HostError(f"{needed} and dy must have the same shape and dtype, got "
                        f"{given.shape} {given.dtype} and {dy.shape} {dy.dtype}")
    return _run(f"{kind.upper()}_BACKWARD", given, dy, machine, engine)


def exp(x, *, machine=None, engine: str = "c"):
    """exp(x) element-wise; returns (result, ActivationStats)."""
    return _run("EXP", _array("x", x), None, machine, engine)


def _check_kind(kind) -> None:
    if kind not in KINDS:
        raise HostError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")


def _array(name: str, value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype not in (np.float32, np.float64):
        raise HostError(f"{name} must be a float32 or float64 array, got {array.dtype}")
    if array.size < 1:
        raise HostError(f"{name} must have at least one element, got shape {array.shape}")
    return np.ascontiguousarray(array)


def _run(op: str, inp: np.ndarray, dy, machine, engine):
    machine = machine or Machine()
    prog = program(KERNEL)
    symbol = {name: s.value for name, s in prog.symbols.items()}
    mem = machine.mem
    in_addr = mem.put(inp)
    dy_addr = mem.put(dy) if dy is not None else 0
    out_addr = mem.alloc(inp.nbytes)
    job = np.zeros(symbol["JOB_BYTES"] // 8, np.int64)
    for field, value in [("J_N", inp.size), ("J_ES", inp.itemsize), ("J_OP", symbol[f"OP_{op}"]),
                         ("J_IN", in_addr), ("J_DY", dy_addr), ("J_OUT", out_addr)]:
        job[symbol[field] // 8] = value
    res = machine.run(prog, entry=ENTRY, args=[mem.put(job)], engine=engine)
    out = mem.get(out_addr, inp.shape, inp.dtype)
    config = machine.config
    peak = config.dma_transaction_bytes / config.dma_transaction_cycles * config.clock_hz
    moved = inp.nbytes * (3 if dy is not None else 2)
    return out, ActivationStats(op, inp.dtype.name, inp.size, moved, res.kernel_cycles,
                                config.clock_hz, peak, res)
