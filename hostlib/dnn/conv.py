"""2-D convolution on the VM (thesis §5.1; docs/dnn.md "Convolution").

``conv2d_forward``, ``conv2d_backward_data`` and ``conv2d_backward_filter`` take and return
PyTorch's layouts: x (B, N_i, R_i, C_i), w (N_o, N_i, K_r, K_c), y (B, N_o, R_o, C_o),
cross-correlation. The one algorithm so far is explicit GEMM convolution (thesis §5.1.1):
im2col / col2im by ``kernels/dnn/im2col.s`` on the 64 CPEs, the products by swGEMM
(``swsim.hostlib.gemm``). With col[b] the (N_i K_r K_c) x (R_o C_o) matrix of image b:
    forward          y[b]  = W col[b] (+ bias, as swGEMM's beta = 1 with a bias-broadcast C)
    backward-data    dcol[b] = W^T dy[b], then dx = col2im(dcol)
    backward-filter  dW = sum_b dy[b] col[b]^T (swGEMM's beta = 1 accumulates over b)
W is w viewed as N_o x (N_i K_r K_c) and dy[b] as N_o x (R_o C_o): no host reordering. The host
copies arrays in and out of simulated memory; every flop and element move runs on the CPEs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...vm import HostError, Machine
from ..blas import gemm
from ..runtime.kernel import Kernel

KERNEL = Kernel(("dnn/im2col.s",), entry="im2col", ldm_end="im2col_ldm_end")
ALGORITHMS = ("auto", "explicit")
PHASES = ("im2col", "gemm", "col2im")


@dataclass
class ConvStats:
    """One convolution pass on the VM: its phases' launches (``phases[name]``: the runtime
    ``Stats`` of each launch, in order) and the totals over them."""
    algo: str
    direction: str            # "forward", "backward_data" or "backward_filter"
    flops: int                # 2 B N_o R_o C_o N_i K_r K_c
    clock_hz: float
    peak_gflops: float        # of the one core group used
    phases: dict = field(default_factory=dict)

    @property
    def runs(self) -> list:
        return [stats for launches in self.phases.values() for stats in launches]

    @property
    def phase_cycles(self) -> dict:
        """Cycles of each phase (its launches run one after the other)."""
        return {name: sum(s.cycles for s in launches) for name, launches in self.phases.items()}

    @property
    def cycles(self) -> int:
        return sum(self.phase_cycles.values())

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9

    @property
    def efficiency(self) -> float:
        return self.gflops / self.peak_gflops

    @property
    def dma_bytes(self) -> int:
        """Bytes the CPEs asked the DMA engine to move, over all launches."""
        return sum(s.run.counters["dma_bytes_requested"] for s in self.runs)


@dataclass(frozen=True)
class _Geometry:
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


def conv2d_forward(x, w, bias=None, stride=1, padding=0, algo="auto", machine=None):
    """y = conv(x, w) + bias on the VM; returns (y, ConvStats).

    x (B, N_i, R_i, C_i) and w (N_o, N_i, K_r, K_c) float32 or float64 (the same), bias (N_o,)
    or None; stride (>= 1) and padding (>= 0) an int or a (rows, columns) pair. ``algo``:
    "explicit" (im2col + swGEMM) or "auto", which is "explicit" until the implicit and Winograd
    algorithms exist. ``machine``: the VM (a new default Machine if None).
    """
    x, w = _array("x", x, 4), _array("w", w, 4)
    dtype = _same_dtype(("x", x), ("w", w))
    geo = _geometry(x.shape, w.shape, stride, padding, "w")
    if bias is not None:
        bias = _array("bias", bias, 1)
        _same_dtype(("x", x), ("bias", bias))
        if bias.shape != (geo.n_o,):
            raise HostError(f"bias must have shape ({geo.n_o},) (N_o), got {bias.shape}")
    algo = _algo(algo)
    machine = machine or Machine()
    stats = _new_stats(algo, "forward", geo, machine)
    col = _im2col(x, geo, machine, stats)
    weights = w.reshape(geo.n_o, -1)
    y = np.empty(geo.y_shape, dtype)
    # the bias as swGEMM's C with beta = 1: a broadcast view, copied (not computed) into memory
    c = None if bias is None else np.broadcast_to(bias[:, None], (geo.n_o, col.shape[2]))
    for b in range(geo.batch):
        y[b].reshape(geo.n_o, -1)[...], run = gemm(weights, col[b], C=c, beta=1.0,
                                                   machine=machine)
        stats.phases["gemm"].append(run)
    return y, stats


def conv2d_backward_data(dy, w, x_shape, stride=1, padding=0, algo="auto", machine=None):
    """dx = d(loss)/dx from dy = d(loss)/dy and w on the VM; returns (dx, ConvStats).

    dy (B, N_o, R_o, C_o), w (N_o, N_i, K_r, K_c), x_shape (B, N_i, R_i, C_i) of the forward
    input; the rest as ``conv2d_forward``.
    """
    dy, w = _array("dy", dy, 4), _array("w", w, 4)
    dtype = _same_dtype(("dy", dy), ("w", w))
    geo = _geometry(_shape("x_shape", x_shape), w.shape, stride, padding, "w")
    _check_dy(dy, geo)
    algo = _algo(algo)
    machine = machine or Machine()
    stats = _new_stats(algo, "backward_data", geo, machine)
    weights = w.reshape(geo.n_o, -1)
    dcol = np.empty(geo.col_shape, dtype)
    for b in range(geo.batch):
        dcol[b], run = gemm(weights, dy[b].reshape(geo.n_o, -1), trans_a=True, machine=machine)
        stats.phases["gemm"].append(run)
    return _col2im(dcol, geo, machine, stats), stats


def conv2d_backward_filter(x, dy, w_shape, stride=1, padding=0, algo="auto", machine=None):
    """dw = d(loss)/dw from x and dy = d(loss)/dy on the VM; returns (dw, ConvStats).

    x (B, N_i, R_i, C_i), dy (B, N_o, R_o, C_o), w_shape (N_o, N_i, K_r, K_c); the rest as
    ``conv2d_forward``.
    """
    x, dy = _array("x", x, 4), _array("dy", dy, 4)
    dtype = _same_dtype(("x", x), ("dy", dy))
    geo = _geometry(x.shape, _shape("w_shape", w_shape), stride, padding, "w_shape")
    _check_dy(dy, geo)
    algo = _algo(algo)
    machine = machine or Machine()
    stats = _new_stats(algo, "backward_filter", geo, machine)
    col = _im2col(x, geo, machine, stats)
    dw = None
    for b in range(geo.batch):
        dw, run = gemm(dy[b].reshape(geo.n_o, -1), col[b], C=dw, beta=1.0, trans_b=True,
                       machine=machine)
        stats.phases["gemm"].append(run)
    return np.ascontiguousarray(dw, dtype).reshape(geo.w_shape), stats


# ---- im2col / col2im on the CPEs ----------------------------------------------------------

def _im2col(x, geo: _Geometry, machine, stats) -> np.ndarray:
    mem = machine.mem
    x_addr = mem.put(x)
    col_addr = mem.alloc(int(np.prod(geo.col_shape)) * x.itemsize)   # zeroed: the pad rows
    stats.phases["im2col"].append(_launch("IM2COL", x.itemsize, x_addr, col_addr, geo, machine))
    return mem.get(col_addr, geo.col_shape, x.dtype)


def _col2im(dcol, geo: _Geometry, machine, stats) -> np.ndarray:
    mem = machine.mem
    col_addr = mem.put(dcol)
    x_addr = mem.alloc(int(np.prod(geo.x_shape)) * dcol.itemsize)
    stats.phases["col2im"].append(_launch("COL2IM", dcol.itemsize, x_addr, col_addr, geo,
                                          machine))
    return mem.get(x_addr, geo.x_shape, dcol.dtype)


def _reciprocal(d: int) -> int:
    """ceil(2^32 / d): the kernel's n / d is (n ceil(2^32 / d)) >> 32, exact for n < 2^32 / d."""
    return -(-(1 << 32) // d)


def _row_len(geo: _Geometry, es: int) -> int:
    """Elements of a padded row in LDM: the pad columns, the row, and what the last output
    column's window reads; a multiple of 8 bytes (the kernel zeroes it in 8-byte steps)."""
    elements = max(geo.c_i + 2 * geo.padding[1], (geo.c_o - 1) * geo.stride[1] + geo.k_c)
    return -(-elements * es // 8) * 8 // es


def _buffers(geo: _Geometry, es: int, group: int, op: str, arena) -> dict:
    """Take the kernel's LDM buffers for `group` input rows per task from `arena`."""
    runs = -(-group // geo.stride[0])       # output rows a group feeds through one kernel row
    return dict(row_buf=arena.take(group * _row_len(geo, es) * es),
                col_buf=arena.take(geo.k_c * runs * geo.c_o * es),
                pack_buf=arena.take(group * geo.c_i * es) if op == "COL2IM" else 0)


def _row_group(geo: _Geometry, es: int, op: str, config) -> int:
    """Input rows per task: as many as LDM holds (long runs of whole lines in col), but no more
    than spreads the B N_i R_i rows over the 64 CPEs, and at most a plane."""
    spread = max(1, geo.batch * geo.n_i * geo.r_i // config.num_cpes)
    group = 1
    for candidate in range(2, min(geo.r_i, spread) + 1):
        arena = KERNEL.arena(config.ldm_bytes, nargs=1)
        _buffers(geo, es, candidate, op, arena)
        if not arena.fits:
            break
        group = candidate
    return group


def _launch(op: str, es: int, x_addr: int, col_addr: int, geo: _Geometry, machine):
    config = machine.config
    group = _row_group(geo, es, op, config)
    arena = KERNEL.arena(config.ldm_bytes, nargs=1)
    buffers = _buffers(geo, es, group, op, arena)
    if not arena.fits:
        raise HostError(f"explicit convolution: a padded input row ({_row_len(geo, es)} "
                        f"elements) and K_c x C_o = {geo.k_c} x {geo.c_o} elements of col do "
                        f"not fit in LDM ({config.ldm_bytes} bytes) for {es}-byte elements")
    groups = -(-geo.r_i // group)
    job = KERNEL.record("J_", "JOB_BYTES").new(
        op=KERNEL.symbol(f"OP_{op}"), es=es, x=x_addr, col=col_addr,
        tasks=geo.batch * geo.n_i * groups, group=group, groups=groups,
        groups_inv=_reciprocal(groups), ri=geo.r_i, ci=geo.c_i, ro=geo.r_o, co=geo.c_o,
        kr=geo.k_r, kc=geo.k_c, sr=geo.stride[0], sc=geo.stride[1],
        sr_inv=_reciprocal(geo.stride[0]), pr=geo.padding[0], pc=geo.padding[1],
        row_len=_row_len(geo, es), **buffers)
    return KERNEL.launch(machine, [machine.mem.put(job)], flops=0,
                         details=dict(op=op.lower(), rows_per_task=group))


# ---- argument checks ----------------------------------------------------------------------

_MAX_DIM = 1 << 15            # keeps the kernel's reciprocal divisions exact


def _array(name, value, ndim) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype not in (np.float32, np.float64):
        raise HostError(f"{name} must be a float32 or float64 array, got {array.dtype}")
    if array.ndim != ndim:
        raise HostError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    if array.size < 1:
        raise HostError(f"{name} must not be empty, got shape {array.shape}")
    return np.ascontiguousarray(array)


def _same_dtype(*named):
    (first, a), *rest = named
    for name, array in rest:
        if array.dtype != a.dtype:
            raise HostError(f"{name} must have the dtype of {first} ({a.dtype}), got "
                            f"{array.dtype}")
    return a.dtype


def _shape(name, value) -> tuple:
    try:
        shape = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise HostError(f"{name} must be 4 positive integers, got {value!r}") from None
    if len(shape) != 4 or min(shape) < 1 or max(shape) > _MAX_DIM:
        raise HostError(f"{name} must be 4 integers in 1..{_MAX_DIM}, got {value!r}")
    return shape


def _pair(name, value, least) -> tuple:
    pair = (value, value) if isinstance(value, (int, np.integer)) else value
    try:
        pair = tuple(pair)
    except TypeError:
        pair = ()
    if (len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                  for v in pair) or min(pair) < least or max(pair) > _MAX_DIM):
        raise HostError(f"{name} must be an integer >= {least} or a pair of them, got "
                        f"{value!r}")
    return tuple(int(v) for v in pair)


def _geometry(x_shape, w_shape, stride, padding, w_name) -> _Geometry:
    x_shape, w_shape = _shape("x", x_shape), _shape(w_name, w_shape)
    if w_shape[1] != x_shape[1]:
        raise HostError(f"{w_name} has {w_shape[1]} input channels but x has {x_shape[1]}")
    geo = _Geometry(x_shape[0], x_shape[1], w_shape[0], x_shape[2], x_shape[3], w_shape[2],
                    w_shape[3], _pair("stride", stride, 1), _pair("padding", padding, 0))
    if geo.r_o < 1 or geo.c_o < 1:
        raise HostError(f"kernel {geo.k_r}x{geo.k_c} is larger than the padded image "
                        f"{geo.r_i}x{geo.c_i} + 2 x {geo.padding} ({w_name}, padding)")
    if geo.batch * geo.n_i * geo.r_i >= (1 << 32) // geo.r_i:
        raise HostError(f"x has too many rows ({geo.batch * geo.n_i * geo.r_i}) for the kernel")
    return geo


def _check_dy(dy, geo: _Geometry) -> None:
    if dy.shape != geo.y_shape:
        raise HostError(f"dy must have shape {geo.y_shape} (B, N_o, R_o, C_o), got {dy.shape}")


def _algo(algo) -> str:
    if algo not in ALGORITHMS:
        raise HostError(f"algo must be one of {', '.join(map(repr, ALGORITHMS))}, got {algo!r}")
    return "explicit"


def _new_stats(algo, direction, geo: _Geometry, machine) -> ConvStats:
    config = machine.config
    return ConvStats(algo, direction, geo.flops, config.clock_hz, config.peak_gflops_cg,
                     {name: [] for name in PHASES})
