"""A small CNN trained by ParaX instances, one per CPE (``kernels/parax/cnn.s``): conv 3x3
(16 -> 16, pad 1) -> [BN (inference form: y = x scale + shift, scale and shift trained), ReLU]
-> global average pool -> FC 16 -> 10 -> softmax cross-entropy. Each instance runs a whole
SGD step (forward and backward over its samples) in one kernel call, from its own LDM, with
no barrier between operators, and writes its gradient; ``synchronise`` (PS, RAR or GS) then
applies it. docs/parax.md "The CNN's step".

The parameters are one f32 vector: W (3, 3, 16, 16) | scale (16) | shift (16) | Wfc (16, 12)
| bfc (12), Wfc and bfc padded from 10 to 12 outputs with zeros (their gradient there is 0).
"""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...vm import Machine
from ..runtime import Kernel
from .block import SAMPLE_SHAPE, _float32
from .mlp import StepRun, one_hot, unpack_shapes

KERNEL = Kernel(("parax/cnn.s",), "parax_cnn_step", "cnn_ldm_end")
CHANNELS, OUT, OUT_PAD = 16, 10, 12
SHAPES = ((3, 3, CHANNELS, CHANNELS), (CHANNELS,), (CHANNELS,), (CHANNELS, OUT_PAD), (OUT_PAD,))
PARAMETERS = sum(int(np.prod(s)) for s in SHAPES)


def init_params(seed: int = 1) -> np.ndarray:
    """Uniform weights of scale sqrt(3 / fan_in), BN scale 1 and shift 0, zero FC bias."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, SHAPES[0]) * np.sqrt(3 / (9 * CHANNELS))
    wfc = np.zeros(SHAPES[3])
    wfc[:, :OUT] = rng.uniform(-1, 1, (CHANNELS, OUT)) * np.sqrt(3 / CHANNELS)
    return np.concatenate([w.ravel(), np.ones(CHANNELS), np.zeros(CHANNELS), wfc.ravel(),
                           np.zeros(OUT_PAD)]).astype(np.float32)


def unpack(params: np.ndarray) -> tuple:
    """(W, scale, shift, Wfc, bfc) views of a parameter (or gradient) vector."""
    return unpack_shapes(params, SHAPES)


def cnn_step(params, x, labels, *, machine=None, engine: str = "c") -> StepRun:
    """Every instance k (CPE k) computes the gradient of the mean softmax cross-entropy over
    its batch x[k] ((P, b, H, 8, 16) float32, H 1..8) with labels[k] ((P, b) ints 0..9)."""
    if not all(isinstance(a, np.ndarray) for a in (params, x, labels)):
        raise ArgumentTypeError("params, x and labels must be numpy arrays")
    if params.dtype != np.float32 or params.shape != (PARAMETERS,):
        raise ArgumentError(f"params must be float32 of shape ({PARAMETERS},), got "
                            f"{params.dtype} {params.shape}")
    x = _float32("x", x, SAMPLE_SHAPE)
    rows_max = KERNEL.symbol("MAX_ROWS")
    if x.ndim != 5 or not 1 <= x.shape[2] <= rows_max or 0 in x.shape[:2]:
        raise ArgumentError(f"x must be (instances, batch, H, 8, 16) with H 1..{rows_max}, "
                            f"got {x.shape}")
    machine = machine or Machine()
    cpes = machine.config.num_cpes
    instances, batch, rows = x.shape[:3]
    if instances > cpes:
        raise ArgumentError(f"{instances} instances need as many CPEs, the core group has "
                            f"{cpes}")
    onehot = one_hot(labels, instances, batch, OUT, OUT_PAD)
    sample_bytes, label_bytes = x[0, 0].nbytes, onehot[0, 0].nbytes
    mem = machine.mem
    mark = mem.mark()
    try:
        xmem, ymem, wmem = mem.put(x), mem.put(onehot), mem.put(params)
        gmem = mem.alloc(instances * PARAMETERS * 4)
        pmem = mem.alloc(onehot.nbytes)
        stats_bytes = KERNEL.symbol("STATS_BYTES")
        stats = mem.alloc(stats_bytes * instances)
        job = KERNEL.record("J_", "JOB_BYTES")
        words = np.zeros(instances * job.nbytes // 8, np.int64)
        for k in range(instances):
            job.write(words, k * job.nbytes, nsamp=batch, rows=rows, w=wmem,
                      **{"in": xmem + k * batch * sample_bytes},
                      out=pmem + k * batch * label_bytes, y=ymem + k * batch * label_bytes,
                      g=gmem + k * PARAMETERS * 4, stats=stats + k * stats_bytes,
                      invb=1.0 / batch, invpix=1.0 / (rows * SAMPLE_SHAPE[0]))
        res = machine.run(KERNEL.program, entry=KERNEL.entry, args=[mem.put(words)],
                          engine=engine, cpes=range(instances))
        grads = mem.get(gmem, (instances, PARAMETERS), np.float32)
        probs = mem.get(pmem, onehot.shape, np.float32)[..., :OUT]
    finally:
        mem.release(mark)
    return StepRun(grads, probs, res.kernel_cycles, int(res.counters["dma_bytes_moved"]), res)
