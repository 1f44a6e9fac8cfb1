"""2-D convolution on the VM (thesis chapter 5; docs/dnn.md "Convolution"): the public API.

``conv2d_forward``, ``conv2d_backward_data`` and ``conv2d_backward_filter`` take and return
PyTorch's layouts: x (B, N_i, R_i, C_i), w (N_o, N_i, K_r, K_c), y (B, N_o, R_o, C_o),
cross-correlation. They check the arguments, pick an algorithm and run one of its passes.
Each algorithm is a module with ``PHASES`` (the names of its launches' groups) and
``forward(geo, x, w, bias, machine, stats, engine)``, ``backward_data(geo, dy, w, machine,
stats, engine)`` and ``backward_filter(geo, x, dy, machine, stats, engine)``, which return the
result array and append each launch's runtime ``Stats`` to ``stats.phases``.
"""
from __future__ import annotations

from ...vm import HostError, Machine
from . import conv_explicit
from .conv_common import (ConvGeometry, ConvStats, as_array, as_shape, check_dy, make_geometry,
                          same_dtype)

ALGORITHMS = {"explicit": conv_explicit}


def conv2d_forward(x, w, bias=None, stride=1, padding=0, algo="auto", machine=None,
                   *, engine="c"):
    """y = conv(x, w) + bias on the VM; returns (y, ConvStats).

    x (B, N_i, R_i, C_i) and w (N_o, N_i, K_r, K_c) float32 or float64 (the same), bias (N_o,)
    or None; stride (>= 1) and padding (>= 0) an int or a (rows, columns) pair. ``algo``: one of
    ``ALGORITHMS`` ("explicit": im2col + swGEMM) or "auto". ``machine``: the VM (a new default
    Machine if None); ``engine``: "c" or "python", for every launch.
    """
    x, w = as_array("x", x, 4), as_array("w", w, 4)
    same_dtype(("x", x), ("w", w))
    geo = make_geometry(x.shape, w.shape, stride, padding, "w")
    if bias is not None:
        bias = as_array("bias", bias, 1)
        same_dtype(("x", x), ("bias", bias))
        if bias.shape != (geo.n_o,):
            raise HostError(f"bias must have shape ({geo.n_o},) (N_o), got {bias.shape}")
    module, machine, stats = _start(algo, "forward", geo, machine)
    return module.forward(geo, x, w, bias, machine, stats, engine), stats


def conv2d_backward_data(dy, w, x_shape, stride=1, padding=0, algo="auto", machine=None,
                         *, engine="c"):
    """dx = d(loss)/dx from dy = d(loss)/dy and w on the VM; returns (dx, ConvStats).

    dy (B, N_o, R_o, C_o), w (N_o, N_i, K_r, K_c), x_shape (B, N_i, R_i, C_i) of the forward
    input; the rest as ``conv2d_forward``.
    """
    dy, w = as_array("dy", dy, 4), as_array("w", w, 4)
    same_dtype(("dy", dy), ("w", w))
    geo = make_geometry(as_shape("x_shape", x_shape), w.shape, stride, padding, "w")
    check_dy(dy, geo)
    module, machine, stats = _start(algo, "backward_data", geo, machine)
    return module.backward_data(geo, dy, w, machine, stats, engine), stats


def conv2d_backward_filter(x, dy, w_shape, stride=1, padding=0, algo="auto", machine=None,
                           *, engine="c"):
    """dw = d(loss)/dw from x and dy = d(loss)/dy on the VM; returns (dw, ConvStats).

    x (B, N_i, R_i, C_i), dy (B, N_o, R_o, C_o), w_shape (N_o, N_i, K_r, K_c); the rest as
    ``conv2d_forward``.
    """
    x, dy = as_array("x", x, 4), as_array("dy", dy, 4)
    same_dtype(("x", x), ("dy", dy))
    geo = make_geometry(x.shape, as_shape("w_shape", w_shape), stride, padding, "w_shape")
    check_dy(dy, geo)
    module, machine, stats = _start(algo, "backward_filter", geo, machine)
    return module.backward_filter(geo, x, dy, machine, stats, engine), stats


def _start(algo, direction, geo: ConvGeometry, machine):
    """The algorithm's module, the machine and the pass's empty stats."""
    choices = ("auto", *ALGORITHMS)
    if algo not in choices:
        raise HostError(f"algo must be one of {', '.join(map(repr, choices))}, got {algo!r}")
    name = "explicit" if algo == "auto" else algo
    module = ALGORITHMS[name]
    machine = machine or Machine()
    config = machine.config
    stats = ConvStats(name, direction, geo.flops, config.clock_hz, config.peak_gflops_cg,
                      {phase: [] for phase in module.PHASES})
    return module, machine, stats
