"""Activation operators (ReLU, sigmoid, tanh; forward and backward) and exp on the VM: the
bodies of ``kernels/dnn/activation.s`` run by the streaming driver's element-wise plan
(``stream.run``) over the CPEs of `cgs` core groups; every element is computed by CPE
instructions.
"""
from __future__ import annotations

import numpy as np

from ...vm import HostError
from ..runtime import Kernel, host_operator, numeric_array
from . import stream

KERNEL = Kernel(("dnn/activation.s", "dnn/stream.s"), "stream_run", "stream_ldm_end",
                stack="stream_stack")
MODES = ("relu", "sigmoid", "tanh")
# Backward needs x for ReLU and y for sigmoid and tanh (as cuDNN computes them).
_BACKWARD_INPUT = {"relu": "x", "sigmoid": "y", "tanh": "y"}


@host_operator
def activation_forward(x, mode: str = "relu", *, machine=None, cgs=1, engine: str = "c"):
    """y = f(x) element-wise for f = relu, sigmoid or tanh; returns (y, Stats).

    ``x``: a float32 or float64 array of any shape with at least one element. ``machine``:
    the VM to run on (a new default Machine if None); ``cgs``: the core groups sharing the
    chunks; ``engine``: "c" or "python". The stats
    carry the kernel's cycles and, as every memory-bound operator's, ``bytes_moved``,
    ``bandwidth_gbps``, the DMA ceiling ``stream_gbps`` for its reads and writes and
    ``bandwidth_ratio``.
    """
    _check_mode(mode)
    return _run(mode, _array("x", x), None, machine, cgs, engine)


@host_operator
def activation_backward(dy, *, x=None, y=None, mode: str = "relu", machine=None, cgs=1,
                        engine: str = "c"):
    """dx = dy * f'(.) element-wise; returns (dx, Stats).

    ReLU needs ``x`` (dx = dy where x > 0, else 0); sigmoid and tanh need the forward output
    ``y`` (dx = dy y (1 - y), dx = dy (1 - y^2)).
    """
    _check_mode(mode)
    needed = _BACKWARD_INPUT[mode]
    given = {"x": x, "y": y}[needed]
    if given is None:
        raise HostError(f"activation_backward(mode={mode!r}) needs {needed}=, the forward "
                        f"{'input' if needed == 'x' else 'output'}")
    dy = _array("dy", dy)
    given = _array(needed, given)
    if given.shape != dy.shape or given.dtype != dy.dtype:
        raise HostError(f"{needed} and dy must have the same shape and dtype, got "
                        f"{given.shape} {given.dtype} and {dy.shape} {dy.dtype}")
    return _run(f"{mode}_backward", given, dy, machine, cgs, engine)


@host_operator
def exp(x, *, machine=None, cgs=1, engine: str = "c"):
    """exp(x) element-wise; returns (result, Stats)."""
    return _run("exp", _array("x", x), None, machine, cgs, engine)


def _check_mode(mode) -> None:
    if mode not in MODES:
        raise HostError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")


def _array(name: str, value) -> np.ndarray:
    array = numeric_array(name, value)
    if array.dtype not in (np.float32, np.float64):
        raise HostError(f"{name} must be a float32 or float64 array, got {array.dtype}")
    if array.size < 1:
        raise HostError(f"{name} must have at least one element, got shape {array.shape}")
    return np.ascontiguousarray(array)


def _run(op: str, inp: np.ndarray, dy, machine, cgs, engine):
    inputs = [inp] + ([dy] if dy is not None else [])
    (out,), stats = stream.run(f"act_{op}", inputs, outputs=1, kernel=KERNEL, machine=machine,
                               cgs=cgs, engine=engine, details=dict(op=op))
    return out.reshape(inp.shape), stats
