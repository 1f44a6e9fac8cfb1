"""2-D convolution on the VM (thesis chapter 5; docs/dnn.md "Convolution"): the public API.

``conv2d_forward``, ``conv2d_backward_data`` and ``conv2d_backward_filter`` take activations in
the caller's ``layout`` (a ``dnn.LAYOUTS`` key, default NCHW: x (B, N_i, R_i, C_i)), w as
(N_o, N_i, K_r, K_c), cross-correlation. They check the arguments, pick an algorithm (a
module of ``ALGORITHMS``; "auto": the smallest ``predict`` among those whose ``supports``
accepts the pass), transform the activations on the VM (dnn.transform, phase "layout") when
the algorithm's ``LAYOUT`` differs from the caller's, and run the pass on ``cgs`` core groups.

Algorithm modules (docs/dnn.md "The algorithm interface") provide NAME, PHASES, LAYOUT,
``supports``, ``predict``, ``estimate``, ``forward``, ``backward_data`` and
``backward_filter``; registering one in ``ALGORITHMS`` is all it takes.

Core groups (thesis §5.4: R_o split over the 4 CGs): each CG runs the same algorithm on its
slice -- forward and backward-filter a range of output rows with the input rows its windows
read (the halo), backward-data a range of input rows with the output gradient rows that reach
them -- as a convolution of its own whose row padding puts the slice's first output row where
the whole problem has it (rows the slice computes beyond its range are dropped; the gradient
rows it reads beyond its range are zero). The slices run one after another on the VM (CGs
share nothing the VM times); the chip's cycles are the slowest CG's, plus the reduction of the
CGs' partial filter gradients (dnn.add on the VM, phase "reduce").
"""
from __future__ import annotations

import numbers

import numpy as np

from ....vm import HostError, Machine
from ...runtime import host_operator
from . import explicit, generated, implicit, winograd
from .common import ConvGeometry, ConvStats, as_array, as_shape, make_geometry, same_dtype
from ..elementwise import add
from ..layout_transform import LAYOUTS, moves_nothing, permute, transform

ALGORITHMS = {module.NAME: module for module in (explicit, implicit, winograd, generated)}
DIRECTIONS = ("forward", "backward_data", "backward_filter")


@host_operator
def conv2d_forward(x, w, bias=None, stride=1, padding=0, algo="auto", *, machine=None,
                   engine="c", cgs=1, layout="NCHW"):
    """y = conv(x, w) + bias on the VM; returns (y, ConvStats).

    x (in ``layout``: NCHW (B, N_i, R_i, C_i) by default) and w (N_o, N_i, K_r, K_c) float32
    or float64 (the same), bias (N_o,) or None; stride (>= 1) and padding (>= 0) an int or a
    (rows, columns) pair. ``algo``: a key of ``ALGORITHMS`` or "auto". ``machine``: the VM
    (a new default Machine if None); ``engine``: "c" or "python", for every launch; ``cgs``:
    core groups (1..the machine's); y comes back in ``layout``.
    """
    order = _layout(layout)
    x, w = as_array("x", x, 4), as_array("w", w, 4)
    same_dtype(("x", x), ("w", w))
    geo = make_geometry(permute(x.shape, order, "NCHW"), w.shape, stride, padding, "w")
    if bias is not None:
        bias = as_array("bias", bias, 1)
        same_dtype(("x", x), ("bias", bias))
        if bias.shape != (geo.n_o,):
            raise HostError(f"bias must have shape ({geo.n_o},) (N_o), got {bias.shape}")
    return _pass("forward", geo, x.dtype, algo, machine, cgs, engine, order,
                 activations=dict(x=x), w=w, bias=bias)


@host_operator
def conv2d_backward_data(dy, w, x_shape, stride=1, padding=0, algo="auto", *, machine=None,
                         engine="c", cgs=1, layout="NCHW"):
    """dx = d(loss)/dx from dy = d(loss)/dy and w on the VM; returns (dx, ConvStats).

    dy (B, N_o, R_o, C_o) and x_shape (B, N_i, R_i, C_i) of the forward input, both in
    ``layout``'s order; w (N_o, N_i, K_r, K_c); the rest as ``conv2d_forward``.
    """
    order = _layout(layout)
    dy, w = as_array("dy", dy, 4), as_array("w", w, 4)
    same_dtype(("dy", dy), ("w", w))
    geo = make_geometry(permute(as_shape("x_shape", x_shape), order, "NCHW"), w.shape, stride,
                        padding, "w")
    _check_dy(dy, geo, order)
    return _pass("backward_data", geo, dy.dtype, algo, machine, cgs, engine, order,
                 activations=dict(dy=dy), w=w)


@host_operator
def conv2d_backward_filter(dy, x, w_shape, stride=1, padding=0, algo="auto", *, machine=None,
                           engine="c", cgs=1, layout="NCHW"):
    """dw = d(loss)/dw from dy = d(loss)/dy and x on the VM; returns (dw, ConvStats).

    dy (B, N_o, R_o, C_o) and x (B, N_i, R_i, C_i) in ``layout``'s order, w_shape (N_o, N_i,
    K_r, K_c); the rest as ``conv2d_forward``.
    """
    order = _layout(layout)
    x, dy = as_array("x", x, 4), as_array("dy", dy, 4)
    same_dtype(("x", x), ("dy", dy))
    geo = make_geometry(permute(x.shape, order, "NCHW"), as_shape("w_shape", w_shape), stride,
                        padding, "w_shape")
    _check_dy(dy, geo, order)
    return _pass("backward_filter", geo, x.dtype, algo, machine, cgs, engine, order,
                 activations=dict(x=x, dy=dy))


def choose(geo: ConvGeometry, direction: str, dtype, config, cgs: int = 1):
    """The module ``algo="auto"`` runs: among ``ALGORITHMS`` whose ``supports`` accepts every
    CG's slice, the smallest predicted chip time (the slowest slice's ``predict``). Raises
    HostError when none does."""
    best, reasons = None, []
    for name, module in ALGORITHMS.items():
        slices = [s.geo for s in _slices(geo, direction, cgs)]
        refusal = next(filter(None, (module.supports(s, direction, dtype, config)
                                     for s in slices)), None)
        if refusal is not None:
            reasons.append(f"{name}: {refusal}")
            continue
        cycles = max(module.predict(s, direction, dtype, config) for s in slices)
        if best is None or cycles < best[0]:
            best = (cycles, module)
    if best is None:
        raise HostError(f"no convolution algorithm runs this {direction} pass: "
                        + "; ".join(reasons))
    return best[1]


# ---- one pass ------------------------------------------------------------------------------

def _layout(layout) -> str:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise HostError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}, got "
                        f"{layout!r}")
    return LAYOUTS[layout]


def _check_dy(dy, geo, order):
    expected = permute(geo.y_shape, "NCHW", order)
    if dy.shape != expected:
        raise HostError(f"dy must have shape {expected} (B, N_o, R_o, C_o in the layout's "
                        f"order {order}), got {dy.shape}")


def _module(algo, direction, geo, dtype, config, cgs):
    choices = ("auto", *ALGORITHMS)
    if not isinstance(algo, str) or algo not in choices:
        raise HostError(f"algo must be one of {', '.join(map(repr, choices))}, got {algo!r}")
    if algo == "auto":
        return choose(geo, direction, dtype, config, cgs)
    module = ALGORITHMS[algo]
    for piece in _slices(geo, direction, cgs):
        refusal = module.supports(piece.geo, direction, dtype, config)
        if refusal is not None:
            raise HostError(refusal)
    return module


def _machine_and_cgs(machine, cgs):
    machine = machine or Machine()
    available = machine.num_cgs   # 1 on a Machine.core_group view
    if isinstance(cgs, bool) or not isinstance(cgs, numbers.Integral) or \
            not 1 <= cgs <= available:
        raise HostError(f"cgs must be an integer in 1..{available} (the machine's core "
                        f"groups), got {cgs!r}")
    return machine, int(cgs)


def _pass(direction, geo, dtype, algo, machine, cgs, engine, order, activations, w=None,
          bias=None):
    machine, cgs = _machine_and_cgs(machine, cgs)
    config = machine.config
    module = _module(algo, direction, geo, dtype, config, cgs)
    slices = _slices(geo, direction, cgs)
    stats = ConvStats(module.NAME, direction, geo.flops, config.clock_hz,
                      config.peak_gflops_cg * len(slices), {"reduce": []} if len(slices) > 1
                      and direction == "backward_filter" else {})
    results = []
    for piece in slices:
        part = ConvStats(module.NAME, direction, piece.geo.flops, config.clock_hz,
                         config.peak_gflops_cg, {p: [] for p in ("layout", *module.PHASES)})
        inputs = {name: _to(module, piece.cut(name, array, order), order, machine, part,
                            engine) for name, array in activations.items()}
        if direction == "forward":
            out = module.forward(piece.geo, inputs["x"], w, bias, machine, part, engine)
        elif direction == "backward_data":
            out = module.backward_data(piece.geo, inputs["dy"], w, machine, part, engine)
        else:
            out = module.backward_filter(piece.geo, inputs["x"], inputs["dy"], machine, part,
                                         engine)
        if direction != "backward_filter":
            out = piece.keep(_from(module, out, order, machine, part, engine), order,
                             direction)
        results.append(out)
        stats.per_cg.append(part)
    if len(slices) == 1:
        stats.phases, stats.per_cg = stats.per_cg[0].phases, []
    if direction == "backward_filter":
        total = results[0]
        for partial in results[1:]:
            total, run = add(total, partial, machine=machine, cgs=cgs, engine=engine)
            stats.phases["reduce"].append(run)
        return total, stats
    axis = order.index("H")
    return np.concatenate(results, axis=axis) if len(results) > 1 else results[0], stats


def _to(module, array, order, machine, stats, engine):
    """`array` (in `order`) in the module's layout, transformed on the VM if it differs."""
    return _convert(array, order, LAYOUTS[module.LAYOUT], machine, stats, engine)


def _from(module, array, order, machine, stats, engine):
    """The module's result back in `order`."""
    return _convert(array, LAYOUTS[module.LAYOUT], order, machine, stats, engine)


def _convert(array, src, dst, machine, stats, engine):
    """`array` from axis order `src` to `dst` by dnn.transform (phase "layout"); a view of it
    when the two orders hold the same bytes (only axes of length 1 move: batch 1)."""
    name = {order: key for key, order in LAYOUTS.items()}
    if src == dst or moves_nothing(array.shape, name[src], name[dst]):
        return array.reshape(permute(array.shape, src, dst))
    out, run = transform(array, name[src], name[dst], machine=machine, engine=engine)
    stats.phases["layout"].append(run)
    return out


# ---- core-group slices ---------------------------------------------------------------------

class _Slice:
    """One CG's part of a pass: input rows [a, b) and output rows [o0, o1) of the whole
    problem as a convolution `geo` of its own, whose output row `first` is row o0."""

    def __init__(self, whole: ConvGeometry, a, b, o0, o1):
        s, p, k = whole.stride[0], whole.padding[0], whole.k_r
        low, high = o0 * s - p, (o1 - 1) * s - p + k      # rows the windows read
        top, bottom = a - low, max(0, high - b)
        pad = top + s * -(-max(0, bottom - top) // s)     # symmetric, aligned with row o0
        self.geo = ConvGeometry(whole.batch, whole.n_i, whole.n_o, b - a, whole.c_i, k,
                                whole.k_c, whole.stride, (pad, whole.padding[1]))
        self.whole, self.rows, self.outputs = whole, (a, b), (o0, o1)
        self.first = (pad - top) // s

    def cut(self, name, array, order):
        """This slice's part of activation `name` (x: its rows; dy: its output rows at
        their place, zero elsewhere)."""
        axis = order.index("H")
        if self.geo == self.whole:
            return array
        if name == "x":
            return np.take(array, range(*self.rows), axis=axis)
        shape = list(array.shape)
        shape[axis] = self.geo.r_o
        out = np.zeros(shape, array.dtype)
        index = [slice(None)] * 4
        index[axis] = slice(self.first, self.first + self.outputs[1] - self.outputs[0])
        out[tuple(index)] = np.take(array, range(*self.outputs), axis=axis)
        return out

    def keep(self, result, order, direction):
        """The rows of a forward (y) or backward-data (dx: all of them) result this slice
        owns."""
        if self.geo == self.whole or direction == "backward_data":
            return result
        rows = range(self.first, self.first + self.outputs[1] - self.outputs[0])
        return np.take(result, rows, axis=order.index("H"))


def _split(n: int, parts: int):
    bounds = [n * i // parts for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _slices(geo: ConvGeometry, direction: str, cgs: int) -> list:
    """The CGs' slices: output rows split evenly (forward, backward-filter), or input rows
    (backward-data, so that no two CGs write the same dx row; one slice when the stride
    exceeds the kernel)."""
    s, p, k = geo.stride[0], geo.padding[0], geo.k_r
    if cgs == 1:
        return [_Slice(geo, 0, geo.r_i, 0, geo.r_o)]
    pieces = []
    if direction == "backward_data":
        if s > k:              # input rows no window reads: slices could hold no dy row
            return [_Slice(geo, 0, geo.r_i, 0, geo.r_o)]
        for a, b in _split(geo.r_i, cgs):
            o0 = max(0, -(-(a + p - k + 1) // s))
            o1 = min(geo.r_o, (b - 1 + p) // s + 1)
            pieces.append(_Slice(geo, a, b, o0, o1))
    else:
        for o0, o1 in _split(geo.r_o, cgs):
            a, b = max(0, o0 * s - p), min(geo.r_i, (o1 - 1) * s - p + k)
            pieces.append(_Slice(geo, a, b, o0, o1))
    return pieces
