"""The "generated" convolution algorithm (docs/autodnn.md): the forward, backward-data and
backward-filter passes as kernels that swAutoDNN generates from the convolution's schedule variants
(``autodnn.conv.programs``), chosen by the model-based tuner. Activations in RCNB like the hand-written implicit
convolution: x (R_i, C_i, N_i, B), y (R_o, C_o, N_o, B); the weights rearranged on the VM into
(K_r, K_c, N_i, N_o) (phase "weights"). float64 (the double primitive) or float32 (its
strategy-2 entries), any stride (backward-data: on dy dilated); with a bias the kernel is generated in
its accumulating form and y starts as the bias. Backward-data is the forward convolution of dy padded by K - 1 - p
with the weights read as (K_r, K_c, N_o, N_i) and their taps rotated by 180 degrees (the
schedule indexes them backwards). Backward-filter runs ``autodnn.conv.filter_programs`` on x
and dy rearranged on the VM with the batch before the channels (phase "operands") and
rearranges dW back (phase "weights"); its programs are SEED_FILTER's and the swapped
convolution's (``autodnn.conv.swapped_filter``: dW written as (K_r, K_c, N_o, N_i)). At B = 1 the forward programs may be NCHW ones
(``autodnn.conv.layout``): the host places x and y in that layout.

Padding and boundaries are zero padding (thesis section 4.2.4): the kernel runs on x placed in
a zeroed array grown by the convolution's padding and by whatever the chosen schedule pads
(``autodnn.conv.padded_shapes``: batch, output columns, channels); the pad's outputs are
dropped. The host does that placement as it places every operand; ``predict`` charges it as
two copying passes (x in, y out), the measured cycles (and ``estimate``) do not include it.
"""
from __future__ import annotations

import functools

import numpy as np

from ....vm import HostError
from ... import autodnn
from ...autodnn import conv as autodnn_conv, tuner
from . import model as conv_model
from .common import ConvGeometry
from .implicit import batch_inside
from ..layout_transform import transform

NAME = "generated"
PHASES = ("weights", "operands", "conv")
LAYOUT = "RCNB"
# an RCNB array's axes as a program's layout reads them (autodnn.conv.layout; B = 1's NCHW
# programs read channels, rows, columns)
TO_KERNEL = {"RCNB": (0, 1, 2, 3), "NCHW": (2, 0, 1, 3)}
# How each pass reads w (N_o, N_i, K_r, K_c) so that its RCNB is (K_r, K_c, in, out).
WEIGHTS_LAYOUT = {"forward": "NCHW", "backward_data": "CNHW"}


def pass_geometry(geo: ConvGeometry, direction) -> ConvGeometry:
    """The forward convolution the kernel runs: backward-data convolves dy (N_o channels),
    dilated by the stride (s - 1 zeros between its pixels, and the rows and columns of x no
    window reached as zeros at the end) and padded by K - 1 - p, into dx (N_i channels)."""
    if direction == "backward_data":
        dilated = [(o - 1) * s + 1 + (i + 2 * p - k) % s for o, s, i, p, k in zip(
            (geo.r_o, geo.c_o), geo.stride, (geo.r_i, geo.c_i), geo.padding, (geo.k_r, geo.k_c))]
        return ConvGeometry(geo.batch, geo.n_o, geo.n_i, *dilated, geo.k_r, geo.k_c,
                            (1, 1), (geo.k_r - 1 - geo.padding[0], geo.k_c - 1 - geo.padding[1]))
    return geo


def _dilated(dy, geo: ConvGeometry, pass_geo: ConvGeometry) -> np.ndarray:
    """dy (RCNB) with the stride's zeros between its pixels: backward-data's pass input."""
    if geo.stride == (1, 1):
        return dy
    out = np.zeros((pass_geo.r_i, pass_geo.c_i, *dy.shape[2:]), dy.dtype)
    out[::geo.stride[0], ::geo.stride[1]][:geo.r_o, :geo.c_o] = dy
    return out


def _padded(geo: ConvGeometry, program) -> dict | None:
    """The padded sizes {"B", "Ni", "No", "Co"} the program runs on, or None when it runs on
    the caller's arrays as they are."""
    sizes = autodnn_conv.padded_shape(program)
    exact = sizes == {"B": geo.batch, "Ni": geo.n_i, "No": geo.n_o, "Co": geo.c_o} and \
        (geo.r_i, geo.c_i) == tuple(s * (o - 1) + k for s, o, k in zip(
            geo.stride, (geo.r_o, geo.c_o), (geo.k_r, geo.k_c)))   # no unread tail
    return None if exact and geo.padding == (0, 0) else sizes


@functools.lru_cache(maxsize=256)
def tuned(geo: ConvGeometry, config, dtype: str = "float64", flip: bool = False,
          direction: str = "forward"):
    """The model tuner's pick for the forward convolution `geo` (taps rotated if `flip`), or
    for its backward-filter pass: a tuner.Tuning, or the refusal text."""
    shape = (geo.batch, geo.n_i, geo.n_o, geo.r_o, geo.c_o, geo.k_r, geo.k_c)
    programs = autodnn_conv.filter_programs(*shape, geo.stride) \
        if direction == "backward_filter" else autodnn_conv.programs(*shape, flip, geo.stride)
    try:
        return tuner.tune(programs, "model", config=config, dtype=dtype)
    except autodnn.ScheduleError as exc:
        return f"generated convolution: no feasible schedule ({exc})"


def _tuned_pass(geo: ConvGeometry, direction, dtype, config):
    return tuned(pass_geometry(geo, direction), config, np.dtype(dtype).name,
                 direction == "backward_data", "backward_filter" if direction ==
                 "backward_filter" else "forward")


def supports(geo: ConvGeometry, direction, dtype, config) -> str | None:
    if direction not in (*WEIGHTS_LAYOUT, "backward_filter"):
        return f"generated convolution: unknown direction {direction!r}"
    if np.dtype(dtype) not in (np.float32, np.float64):
        return "generated convolution: float32 or float64 only"
    if direction == "backward_data" and (geo.padding[0] >= geo.k_r
                                         or geo.padding[1] >= geo.k_c):
        return "generated convolution: backward-data needs padding < kernel size"
    result = _tuned_pass(geo, direction, dtype, config)
    return result if isinstance(result, str) else None


def _weights_cycles(geo: ConvGeometry, direction, es: int, config) -> float:
    return conv_model.transform_cycles(geo.w_shape, WEIGHTS_LAYOUT[direction], "RCNB", es,
                                       config)


def _padding_cycles(geo: ConvGeometry, program, es: int, config) -> float:
    """The zero padding's data movement (`geo` the pass's convolution) as two copying passes:
    x into the padded array, the padded y out."""
    sizes = _padded(geo, program)
    kernel_layout = autodnn_conv.layout(program)
    if sizes is None and kernel_layout == LAYOUT:
        return 0.0
    sizes = sizes or autodnn_conv.padded_shape(program)
    (sr, sc) = geo.stride
    x = (sr * (geo.r_o - 1) + geo.k_r, sc * (sizes["Co"] - 1) + geo.k_c, sizes["Ni"], sizes["B"])
    y = (geo.r_o, sizes["Co"], sizes["No"], sizes["B"])
    return conv_model.transform_cycles(x, LAYOUT, kernel_layout, es, config) + \
        conv_model.transform_cycles(tuple(y[axis] for axis in TO_KERNEL[kernel_layout]),
                                    kernel_layout, LAYOUT, es, config)


def _to_kernel(a, kernel_layout):
    return a.transpose(TO_KERNEL[kernel_layout])


def _filter_rearrangements(geo: ConvGeometry, program) -> list:
    """Backward-filter's dnn.transform launches as (shape, source, target): x and dy (placed,
    padded) with the batch before the channels, the kernel's dW back to (N_o, N_i, K_r, K_c)
    (from (K_r, K_c, N_i, N_o), or the swapped convolution's (K_r, K_c, N_o, N_i))."""
    sizes = autodnn_conv.filter_shape(program)
    (sr, sc), (ni, no, b) = geo.stride, (sizes["Ni"], sizes["No"], sizes["B"])
    r_i, c_i = sr * (geo.r_o - 1) + geo.k_r, sc * (geo.c_o - 1) + sizes["Kc"]
    dw = ((geo.k_r, geo.k_c, geo.n_o, geo.n_i), "RCNB", "CNHW") \
        if autodnn_conv.swapped_filter(program) else \
        ((geo.k_r, geo.k_c, geo.n_i, geo.n_o), "RCNB", "NCHW")
    return [((r_i * c_i, ni, b, 1), "NCHW", "NHWC"), ((geo.r_o * geo.c_o, no, b, 1), "NCHW",
                                                      "NHWC"), dw]


def predict(geo: ConvGeometry, direction, dtype, config) -> float:
    es = np.dtype(dtype).itemsize
    best = _tuned_pass(geo, direction, dtype, config).best
    if direction == "backward_filter":
        return best.predicted + sum(
            conv_model.transform_cycles(*t, es, config)
            for t in _filter_rearrangements(geo, best.program))
    return best.predicted + _weights_cycles(geo, direction, es, config) + \
        _padding_cycles(pass_geometry(geo, direction), best.program, es, config)


def _unsupported(geo, direction, dtype, config):
    reason = supports(geo, direction, dtype, config)
    if reason:
        raise HostError(reason)


def _run(geo: ConvGeometry, direction, x, w, bias, machine, stats, engine) -> np.ndarray:
    """The pass's output (RCNB) of its input x (RCNB) and w (N_o, N_i, K_r, K_c)."""
    _unsupported(geo, direction, x.dtype, machine.config)
    best = _tuned_pass(geo, direction, x.dtype, machine.config).best
    wt, run = transform(w, WEIGHTS_LAYOUT[direction], "RCNB", machine=machine, engine=engine)
    stats.phases["weights"].append(run)
    gen = best.generated if bias is None else \
        autodnn.build(best.program, best.binding, accumulate=True, dtype=x.dtype)
    dims = gen.plan.seed.registry.tensors
    consts = gen.plan.seed.registry.const_values()
    shape = {t: tuple(consts[d] for d in dims[t].dims) for t in ("X", "W", "Y")}
    if direction == "backward_data":
        x = _dilated(x, geo, pass_geometry(geo, direction))
    geo = pass_geometry(geo, direction)
    sizes = _padded(geo, best.program) or {"B": geo.batch, "Ni": geo.n_i, "No": geo.n_o,
                                           "Co": geo.c_o}
    ni, no, b = sizes["Ni"], sizes["No"], sizes["B"]
    xp = _placed(geo, x, consts, sizes)
    wp = np.zeros((geo.k_r, geo.k_c, ni, no), x.dtype)
    wp[:, :, :geo.n_i, :geo.n_o] = wt
    y = np.zeros((geo.r_o, sizes["Co"], no, b), x.dtype)
    if bias is not None:      # the accumulating kernel adds the products to y = bias
        y[:, :, :geo.n_o] = bias[:, None]
    kernel_layout = autodnn_conv.layout(best.program)
    xk, yk = (_to_kernel(a, kernel_layout) for a in (xp, y))
    out, run = autodnn.run(gen, {"X": xk.reshape(shape["X"]), "W": wp.reshape(shape["W"]),
                                 "Y": yk.reshape(shape["Y"])}, machine=machine, engine=engine)
    stats.phases["conv"].append(run)
    y = out["Y"].reshape(yk.shape).transpose(np.argsort(TO_KERNEL[kernel_layout]))
    return y[:, :geo.c_o, :geo.n_o, :geo.batch]


def _placed(geo: ConvGeometry, x, consts, sizes) -> np.ndarray:
    """x (RCNB) placed in the zeroed (R_i, C_i, N_i, B) array the program reads, grown by the
    padding and the schedule's sizes; x rows or columns a stride never reads left out."""
    (pr, pc) = geo.padding
    xp = np.zeros((consts["Ri"], consts["Ci"], sizes["Ni"], sizes["B"]), x.dtype)
    rows, cols = min(geo.r_i, consts["Ri"] - pr), min(geo.c_i, consts["Ci"] - pc)
    xp[pr:pr + rows, pc:pc + cols, :geo.n_i, :geo.batch] = x[:rows, :cols]
    return xp


def forward(geo: ConvGeometry, x, w, bias, machine, stats, engine) -> np.ndarray:
    return _run(geo, "forward", x, w, bias, machine, stats, engine)


def backward_data(geo: ConvGeometry, dy, w, machine, stats, engine) -> np.ndarray:
    return _run(geo, "backward_data", dy, w, None, machine, stats, engine)


def backward_filter(geo: ConvGeometry, x, dy, machine, stats, engine) -> np.ndarray:
    """dW (N_o, N_i, K_r, K_c) of x and dy (RCNB): both placed (padding, the schedule's zero
    padding) and rearranged on the VM with the batch before the channels (phase operands), the
    kernel writes dW as (K_r, K_c, N_i, N_o) or, the swapped convolution, (K_r, K_c, N_o,
    N_i), rearranged back on the VM (phase weights)."""
    _unsupported(geo, "backward_filter", x.dtype, machine.config)
    best = _tuned_pass(geo, "backward_filter", x.dtype, machine.config).best
    registry = best.program.seed.registry
    consts = registry.const_values()
    sizes = autodnn_conv.filter_shape(best.program)
    dyp = np.zeros((geo.r_o, geo.c_o, sizes["No"], sizes["B"]), x.dtype)
    dyp[:, :, :geo.n_o, :geo.batch] = dy
    swapped = autodnn_conv.swapped_filter(best.program)
    names = ("X", "W", "Y") if swapped else ("X", "D", "W")
    inputs = {}
    for name, array in zip(names, (_placed(geo, x, consts, sizes), dyp)):
        inputs[name] = batch_inside(array, machine, stats, engine)
    dw_dims = (sizes["No"], sizes["Ni"]) if swapped else (sizes["Ni"], sizes["No"])
    inputs[names[2]] = np.zeros((geo.k_r, sizes["Kc"], *dw_dims), x.dtype)
    for name, array in inputs.items():
        inputs[name] = array.reshape([consts[d] for d in registry.tensors[name].dims])
    out, run = autodnn.run(best.generated, inputs, machine=machine, engine=engine)
    stats.phases["conv"].append(run)
    dw = out[names[2]].reshape(geo.k_r, sizes["Kc"], *dw_dims)[:, :geo.k_c]
    dw, source = (dw[:, :, :geo.n_o, :geo.n_i], "CNHW") if swapped else \
        (dw[:, :, :geo.n_i, :geo.n_o], "NCHW")
    dw, run = transform(np.ascontiguousarray(dw), "RCNB", source, machine=machine,
                        engine=engine)
    stats.phases["weights"].append(run)
    return dw


def estimate(geo: ConvGeometry, direction, dtype, machine, engine="c"):
    """(cycles, details) of the pass as a run measures it: the tuned kernel sampled
    (``autodnn.conv.estimate``) and the weight rearrangement run whole; the zero padding's
    copies, which a run does not simulate, as modelled in details["padding_modelled"]."""
    _unsupported(geo, direction, dtype, machine.config)
    best = _tuned_pass(geo, direction, dtype, machine.config).best
    kernel, details = autodnn_conv.estimate(best, machine, engine)
    rng = np.random.default_rng(0)
    if direction == "backward_filter":       # the rearrangements, run whole
        runs = [transform(rng.standard_normal(shape).astype(dtype), src, dst, machine=machine,
                          engine=engine)[1].cycles for shape, src, dst in
                _filter_rearrangements(geo, best.program)]
        return kernel + sum(runs), dict(details, conv=kernel, operands=sum(runs[:2]),
                                        weights=runs[2], schedule=best.label)
    w = rng.standard_normal(geo.w_shape).astype(dtype)
    weights = transform(w, WEIGHTS_LAYOUT[direction], "RCNB", machine=machine,
                        engine=engine)[1].cycles
    padding = _padding_cycles(pass_geometry(geo, direction), best.program,
                              np.dtype(dtype).itemsize, machine.config)
    return kernel + weights, dict(details, conv=kernel, weights=weights,
                                  padding_modelled=padding, schedule=best.label)
