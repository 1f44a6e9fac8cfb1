"""What every convolution algorithm shares (docs/dnn.md "Convolution"): the problem's geometry,
the stats a pass returns and the checks of the public arguments. The algorithms
(``explicit``, ...) and the public API (the package ``conv``) build on it."""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from ....errors import ArgumentTypeError
from ....vm import HostError
from ...runtime import Stats, numeric_array


@dataclass
class ConvStats(Stats):
    """One convolution pass on the VM: its phases' launches (``phases[name]``: the runtime
    ``Stats`` of each launch, in order) and the totals over them (seconds, gflops and
    efficiency of the cycles). On several core groups, ``per_cg`` holds each CG's ConvStats
    (its slice of the pass); the pass takes the slowest CG's cycles plus those of its own
    phases (the reduction across CGs)."""
    algo: str
    direction: str            # "forward", "backward_data" or "backward_filter"
    flops: int                # 2 B N_o R_o C_o N_i K_r K_c
    clock_hz: float
    peak_gflops: float        # of the core groups used
    phases: dict = field(default_factory=dict)
    per_cg: list = field(default_factory=list)

    @property
    def cgs(self) -> int:
        return max(1, len(self.per_cg))

    @property
    def runs(self) -> list:
        own = [stats for launches in self.phases.values() for stats in launches]
        return own + [stats for part in self.per_cg for stats in part.runs]

    @property
    def phase_cycles(self) -> dict:
        """Cycles of each phase (its launches run one after the other; on several CGs the
        slowest CG's)."""
        slowest = max(self.per_cg, key=lambda part: part.cycles).phase_cycles if \
            self.per_cg else {}
        own = {name: sum(s.cycles for s in launches) for name, launches in self.phases.items()}
        return {**slowest, **own}

    @property
    def cycles(self) -> int:
        return sum(self.phase_cycles.values())

    @property
    def dma_bytes(self) -> int:
        """Bytes the CPEs asked the DMA engine to move, over all launches."""
        return sum(s.run.counters["dma_bytes_requested"] for s in self.runs)


@dataclass(frozen=True)
class ConvGeometry:
    """The shape of one convolution: x (B, N_i, R_i, C_i), w (N_o, N_i, K_r, K_c), stride and
    padding as (rows, columns) pairs; the output size and flop count follow."""
    batch: int
    n_i: int
    n_o: int
    r_i: int
    c_i: int
    k_r: int
    k_c: int
    stride: tuple
    padding: tuple

    @property
    def r_o(self) -> int:
        return (self.r_i + 2 * self.padding[0] - self.k_r) // self.stride[0] + 1

    @property
    def c_o(self) -> int:
        return (self.c_i + 2 * self.padding[1] - self.k_c) // self.stride[1] + 1

    @property
    def x_shape(self):
        return (self.batch, self.n_i, self.r_i, self.c_i)

    @property
    def w_shape(self):
        return (self.n_o, self.n_i, self.k_r, self.k_c)

    @property
    def y_shape(self):
        return (self.batch, self.n_o, self.r_o, self.c_o)

    @property
    def col_shape(self):
        """Per image: (N_i K_r K_c) x (R_o C_o)."""
        return (self.batch, self.n_i * self.k_r * self.k_c, self.r_o * self.c_o)

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.n_o * self.r_o * self.c_o * self.n_i * self.k_r * self.k_c



MAX_DIM = 1 << 15             # keeps the kernels' reciprocal divisions exact


def as_array(name, value, ndim) -> np.ndarray:
    array = numeric_array(name, value)
    if array.dtype not in (np.float32, np.float64):
        raise HostError(f"{name} must be a float32 or float64 array, got {array.dtype}")
    if array.ndim != ndim:
        raise HostError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    if array.size < 1:
        raise HostError(f"{name} must not be empty, got shape {array.shape}")
    return np.ascontiguousarray(array)


def same_dtype(*named):
    (first, a), *rest = named
    for name, array in rest:
        if array.dtype != a.dtype:
            raise HostError(f"{name} must have the dtype of {first} ({a.dtype}), got "
                            f"{array.dtype}")
    return a.dtype


def as_shape(name, value) -> tuple:
    try:
        shape = tuple(value)
    except TypeError:
        shape = None
    if shape is None or isinstance(value, str) or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in shape):
        raise ArgumentTypeError(f"{name} must be a shape (4 ints), got {value!r}")
    shape = tuple(int(v) for v in shape)
    if len(shape) != 4 or min(shape) < 1 or max(shape) > MAX_DIM:
        raise HostError(f"{name} must be 4 integers in 1..{MAX_DIM}, got {value!r}")
    return shape


def as_pair(name, value, least) -> tuple:
    pair = (value, value) if isinstance(value, (int, np.integer)) else value
    try:
        pair = tuple(pair)
    except TypeError:
        pair = ()
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in pair):
        raise ArgumentTypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    if len(pair) != 2 or min(pair) < least or max(pair) > MAX_DIM:
        raise HostError(f"{name} must be an integer >= {least} or a pair of them, got "
                        f"{value!r}")
    return tuple(int(v) for v in pair)


def make_geometry(x_shape, w_shape, stride, padding, w_name) -> ConvGeometry:
    x_shape, w_shape = as_shape("x", x_shape), as_shape(w_name, w_shape)
    if w_shape[1] != x_shape[1]:
        raise HostError(f"{w_name} has {w_shape[1]} input channels but x has {x_shape[1]}")
    geo = ConvGeometry(x_shape[0], x_shape[1], w_shape[0], x_shape[2], x_shape[3], w_shape[2],
                       w_shape[3], as_pair("stride", stride, 1), as_pair("padding", padding, 0))
    if geo.r_o < 1 or geo.c_o < 1:
        raise HostError(f"kernel {geo.k_r}x{geo.k_c} is larger than the padded image "
                        f"{geo.r_i}x{geo.c_i} + 2 x {geo.padding} ({w_name}, padding)")
    return geo
