"""The "generated" convolution algorithm (docs/autodnn.md): the forward pass as a kernel that
swAutoDNN generates from the convolution's schedule variants (``autodnn.conv.programs``),
chosen by the model-based tuner. Activations in RCNB like the hand-written implicit
convolution: x (R_i, C_i, N_i, B), y (R_o, C_o, N_o, B); the weights rearranged on the VM into
(K_r, K_c, N_i, N_o) (phase "weights"). float64 (the double primitive) or float32 (its
strategy-2 entries), stride 1, no padding, forward only; with a bias the kernel is generated in
its accumulating form and y starts as the bias.
"""
from __future__ import annotations

import functools

import numpy as np

from ...vm import HostError
from .. import autodnn
from ..autodnn import conv as autodnn_conv, tuner
from . import conv_model
from .conv_common import ConvGeometry
from .layout import transform

NAME = "generated"
PHASES = ("weights", "conv")
LAYOUT = "RCNB"


def _programs(geo: ConvGeometry) -> list:
    return autodnn_conv.programs(geo.batch, geo.n_i, geo.n_o, geo.r_o, geo.c_o, geo.k_r,
                                 geo.k_c)


@functools.lru_cache(maxsize=256)
def tuned(geo: ConvGeometry, config, dtype: str = "float64"):
    """The model tuner's pick for the forward pass (a tuner.Tuning), or the refusal text."""
    try:
        return tuner.tune(_programs(geo), "model", config=config, dtype=dtype)
    except autodnn.ScheduleError as exc:
        return f"generated convolution: no feasible schedule ({exc})"


def supports(geo: ConvGeometry, direction, dtype, config) -> str | None:
    if direction != "forward":
        return "generated convolution: forward only"
    if np.dtype(dtype) not in (np.float32, np.float64):
        return "generated convolution: float32 or float64 only"
    if geo.stride != (1, 1) or geo.padding != (0, 0):
        return "generated convolution: stride 1 and no padding only"
    result = tuned(geo, config, np.dtype(dtype).name)
    return result if isinstance(result, str) else None


def _weights_cycles(geo: ConvGeometry, es: int, config) -> float:
    return conv_model.transform_cycles(geo.w_shape, "NCHW", "RCNB", es, config)


def predict(geo: ConvGeometry, direction, dtype, config) -> float:
    dtype = np.dtype(dtype)
    return tuned(geo, config, dtype.name).best.predicted + _weights_cycles(geo, dtype.itemsize,
                                                                           config)


def _unsupported(geo, direction, dtype, config):
    reason = supports(geo, direction, dtype, config)
    if reason:
        raise HostError(reason)


def forward(geo: ConvGeometry, x, w, bias, machine, stats, engine) -> np.ndarray:
    _unsupported(geo, "forward", x.dtype, machine.config)
    best = tuned(geo, machine.config, x.dtype.name).best
    wt, run = transform(w, "NCHW", "RCNB", machine=machine, engine=engine)
    stats.phases["weights"].append(run)
    gen = best.generated if bias is None else \
        autodnn.build(best.program, best.binding, accumulate=True, dtype=x.dtype)
    dims = gen.plan.seed.registry.tensors
    consts = gen.plan.seed.registry.const_values()
    shape = {t: tuple(consts[d] for d in dims[t].dims) for t in ("X", "W", "Y")}
    y = np.zeros((geo.r_o, geo.c_o, geo.n_o, geo.batch), x.dtype)
    if bias is not None:      # the accumulating kernel adds the products to y = bias
        y[...] = bias[:, None]
    out, run = autodnn.run(gen, {"X": x.reshape(shape["X"]), "W": wt.reshape(shape["W"]),
                                 "Y": y.reshape(shape["Y"])}, machine=machine, engine=engine)
    stats.phases["conv"].append(run)
    return out["Y"].reshape(y.shape)


def backward_data(geo, dy, w, machine, stats, engine):
    _unsupported(geo, "backward_data", dy.dtype, machine.config)


def backward_filter(geo, x, dy, machine, stats, engine):
    _unsupported(geo, "backward_filter", x.dtype, machine.config)


def estimate(geo: ConvGeometry, direction, dtype, machine, engine="c"):
    """(cycles, details) of the pass: the tuned kernel sampled (``autodnn.conv.estimate``)
    and the weight rearrangement run whole."""
    _unsupported(geo, direction, dtype, machine.config)
    best = tuned(geo, machine.config, np.dtype(dtype).name).best
    kernel, details = autodnn_conv.estimate(best, machine, engine)
    w = np.random.default_rng(0).standard_normal(geo.w_shape).astype(dtype)
    weights = transform(w, "NCHW", "RCNB", machine=machine, engine=engine)[1].cycles
    return kernel + weights, dict(details, conv=kernel, weights=weights, schedule=best.label)
