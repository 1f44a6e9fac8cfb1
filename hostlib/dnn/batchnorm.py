"""Batch normalisation (NCHW, per-channel statistics over B, H, W; PyTorch's semantics) on the
streaming driver (``kernels/dnn/batchnorm.s``): a channel per unit, its B planes in LDM whole
(one strided DMA), the statistics, the running averages and the normalisation computed there
in double. docs/dnn.md "Batch normalisation"."""
from __future__ import annotations

import numpy as np

from ..runtime import Kernel
from . import stream
from .common import DnnError, float_arrays, machine_and_cgs, scalar

KERNEL = Kernel(("dnn/batchnorm.s", "dnn/stream.s"), "stream_run", "stream_ldm_end", stack="stream_stack")
PLANES, NONE = 1, 0           # stream kinds of bn_plan (k > 1: k elements per channel)


def _shape(x):
    if x.ndim != 4:
        raise DnnError(f"x must be (B, C, H, W), got shape {x.shape}")
    return x.shape


def _per_channel(channels, dtype, **arrays):
    out = float_arrays(dtype, **arrays)
    for name, array in zip(arrays, out):
        if array.shape != (channels,):
            raise DnnError(f"{name} must have shape ({channels},) (one per channel), got "
                           f"{array.shape}")
    return out


def _launch(machine, name, body, planes, records, outputs, x_shape, es, params, engine):
    """Run `body` over the channels: `planes` (arrays read as the channel's planes),
    `records` ((C, k) arrays read k elements per channel), `outputs` ((planes?, k) per
    output: k = 0 for an output of x's shape); returns the outputs and Stats."""
    batch, channels, h, w = x_shape
    n = batch * h * w
    mem = machine.mem
    inputs = [mem.put(np.ascontiguousarray(a).reshape(-1)) for a in planes + records]
    kinds = [PLANES] * len(planes) + [r.shape[1] for r in records]
    out_addr = [mem.alloc((k or n) * channels * es) for k in outputs]
    kinds_out = [k or PLANES for k in outputs]
    buffers = [n * es if k == PLANES else k * es for k in kinds + kinds_out]
    needed = 2 * sum(-(-b // 32) * 32 for b in buffers)
    free = stream.arena(machine.config, KERNEL).free
    if needed > free:
        raise DnnError(f"{name}: a channel's {n} elements (B H W) do not fit in LDM "
                       f"({needed} bytes of buffers, {free} free)")
    kind_words = kinds + [NONE] * (stream.MAX_IN - len(kinds)) + kinds_out + \
        [NONE] * (stream.MAX_OUT - len(kinds_out))
    moved = (sum(a.nbytes for a in planes + records),
             sum((k or n) * channels * es for k in outputs))
    stats = stream.launch(machine, 1, name=name, body=f"{body}_{stream.SUFFIX[es]}",
                          plan="bn_plan", inputs=inputs, outputs=out_addr,
                          buffer_bytes=buffers, units=channels, es=es, params=params,
                          ints=[batch, h * w, channels] + kind_words, moved=moved,
                          engine=engine, kernel=KERNEL, details=dict(op=name))
    dtype = planes[0].dtype
    return [mem.get(addr, x_shape if k == 0 else (channels, k), dtype)
            for addr, k in zip(out_addr, outputs)], stats


def batchnorm_forward(x, gamma, beta, running_mean, running_var, *, training=True,
                      momentum=0.1, eps=1e-5, machine=None, engine="c"):
    """y = (x - mean) / sqrt(var + eps) gamma + beta per channel of x (B, C, H, W). Training:
    the batch's mean and biased variance, running stats updated as (1 - momentum) r +
    momentum s with the unbiased variance; inference: the running stats (returned unchanged).
    Returns ((y, new_running_mean, new_running_var, saved_mean, saved_invstd), Stats): saved_*
    are the mean and 1/sqrt(var + eps) used, for batchnorm_backward."""
    (x,) = float_arrays(x=x)
    batch, channels, h, w = _shape(x)
    params = _per_channel(channels, x.dtype, gamma=gamma, beta=beta,
                          running_mean=running_mean, running_var=running_var)
    if not isinstance(training, bool):
        raise DnnError(f"training must be True or False, got {training!r}")
    if training and batch * h * w < 2:
        raise DnnError("batchnorm_forward(training=True) needs more than one value per "
                       f"channel, got x of shape {x.shape}")
    machine, _ = machine_and_cgs(machine, 1)
    record = np.stack(params, axis=1)            # (C, 4): gamma, beta, mean, var
    (y, out), stats = _launch(
        machine, "batchnorm_forward", "bn_forward", [x], [record], [0, 4], x.shape,
        x.itemsize, [scalar("momentum", momentum), scalar("eps", eps), float(training)],
        engine)
    return (y, *(out[:, i].copy() for i in range(4))), stats


def batchnorm_backward(dy, x, gamma, saved_mean, saved_invstd, *, machine=None, engine="c"):
    """The gradients of batchnorm_forward(training=True) from dy and its saved mean and
    invstd: returns ((dx, dgamma, dbeta), Stats)."""
    dy, x = float_arrays(dy=dy, x=x)
    if dy.shape != x.shape:
        raise DnnError(f"dy must have x's shape {x.shape}, got {dy.shape}")
    batch, channels, h, w = _shape(x)
    params = _per_channel(channels, x.dtype, gamma=gamma, saved_mean=saved_mean,
                          saved_invstd=saved_invstd)
    machine, _ = machine_and_cgs(machine, 1)
    record = np.stack(params + [np.zeros_like(params[0])], axis=1)
    (dx, out), stats = _launch(machine, "batchnorm_backward", "bn_backward", [dy, x],
                               [record], [0, 2], x.shape, x.itemsize, [], engine)
    return (dx, out[:, 0].copy(), out[:, 1].copy()), stats
