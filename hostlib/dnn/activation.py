"""Activation operators (ReLU, sigmoid, tanh; forward and backward) and exp on the VM.

The host copies the arrays into simulated main memory, writes the job record of
``kernels/dnn/activation.s`` (field offsets and op codes read from the kernel's symbols) and
spawns it on the 64 CPEs of a core group; every element is computed by CPE instructions.
"""
from __future__ import annotations

import numpy as np

from ...vm import HostError, Machine
from ..runtime import Kernel
from .stream import with_bandwidth

KERNEL = Kernel(("dnn/activation.s",), entry="activation", ldm_end="activation_ldm_end")
KINDS = ("relu", "sigmoid", "tanh")
# Backward needs x for ReLU and y for sigmoid and tanh (as cuDNN computes them).
_BACKWARD_INPUT = {"relu": "x", "sigmoid": "y", "tanh": "y"}


def activation_forward(x, kind: str = "relu", *, machine=None, engine: str = "c"):
    """y = f(x) element-wise for f = relu, sigmoid or tanh; returns (y, Stats).

    ``x``: a float32 or float64 array of any shape with at least one element. ``machine``:
    the VM to run on (a new default Machine if None); ``engine``: "c" or "python". The stats
    carry the kernel's cycles and, as every memory-bound operator's, ``bytes_moved``,
    ``bandwidth_gbps``, the DMA ceiling ``stream_gbps`` for its reads and writes and
    ``bandwidth_ratio``.
    """
    _check_kind(kind)
    return _run(kind.upper(), _array("x", x), None, machine, engine)


def activation_backward(dy, *, x=None, y=None, kind: str = "relu", machine=None,
                        engine: str = "c"):
    """dx = dy * f'(.) element-wise; returns (dx, Stats).

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
    """exp(x) element-wise; returns (result, Stats)."""
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
    mem = machine.mem
    out = mem.alloc(inp.nbytes)
    job = KERNEL.record("J_", "JOB_BYTES").new(
        n=inp.size, es=inp.itemsize, op=KERNEL.symbol(f"OP_{op}"), out=out,
        dy=mem.put(dy) if dy is not None else 0, **{"in": mem.put(inp)})
    stats = KERNEL.launch(machine, [mem.put(job)], flops=0, engine=engine,
                          details=dict(op=op, dtype=inp.dtype.name, n=inp.size))
    reads = inp.nbytes * (2 if dy is not None else 1)
    return (mem.get(out, inp.shape, inp.dtype),
            with_bandwidth(stats, machine.config, (reads, inp.nbytes)))
