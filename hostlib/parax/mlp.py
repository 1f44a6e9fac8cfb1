"""The MLP 256 -> 64 -> 10 trained by ParaX instances, one per CPE (``kernels/parax/mlp.s``):
each instance runs a whole training step (forward, softmax cross-entropy, backward) on its
own batch in its LDM and writes its gradient; ``synchronise`` (PS, RAR or GS) then applies
W -= lr mean_k G_k. docs/parax.md "Training".

The parameters are one f32 vector: W1 (256, 64) | b1 (64) | W2 (64, 12) | b2 (12), W2 and b2
padded from 10 to 12 outputs with zeros (their gradient there is 0, so they stay 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...vm import Machine
from ..runtime import Kernel

KERNEL = Kernel(("parax/mlp.s",), "parax_mlp", "mlp_ldm_end")
IN, HIDDEN, OUT, OUT_PAD = 256, 64, 10, 12
B_MAX = 8                                # an instance's samples at most (the kernel's B_MAX)
PARAMETERS = IN * HIDDEN + HIDDEN + HIDDEN * OUT_PAD + OUT_PAD


def _symbol(name: str) -> int:
    return KERNEL.symbol(name)


def init_params(seed: int = 1) -> np.ndarray:
    """Uniform Xavier-like weights (scale sqrt(3 / fan_in)), zero biases and padding."""
    rng = np.random.default_rng(seed)
    w1 = rng.uniform(-1, 1, (IN, HIDDEN)) * np.sqrt(3 / IN)
    w2 = np.zeros((HIDDEN, OUT_PAD))
    w2[:, :OUT] = rng.uniform(-1, 1, (HIDDEN, OUT)) * np.sqrt(3 / HIDDEN)
    return np.concatenate([w1.ravel(), np.zeros(HIDDEN), w2.ravel(),
                           np.zeros(OUT_PAD)]).astype(np.float32)


def unpack_shapes(params: np.ndarray, shapes) -> tuple:
    """Views of consecutive pieces of `params` with the given shapes."""
    at = np.cumsum([0] + [int(np.prod(s)) for s in shapes])
    return tuple(params[a:b].reshape(s) for a, b, s in zip(at, at[1:], shapes))


def unpack(params: np.ndarray) -> tuple:
    """(W1, b1, W2, b2) views of a parameter (or gradient) vector, W2 and b2 padded to 12."""
    return unpack_shapes(params, ((IN, HIDDEN), (HIDDEN,), (HIDDEN, OUT_PAD), (OUT_PAD,)))


def one_hot(labels, instances: int, batch: int, classes: int, padded: int) -> np.ndarray:
    """The (instances, batch, padded) float32 one-hot targets of `labels`, which must be
    (instances, batch) ints 0..classes-1 (shared with parax.cnn)."""
    if labels.shape != (instances, batch) or not np.issubdtype(labels.dtype, np.integer) \
            or labels.min() < 0 or labels.max() >= classes:
        raise ArgumentError(f"labels must be ints 0..{classes - 1} of shape "
                            f"{(instances, batch)}")
    onehot = np.zeros((instances, batch, padded), np.float32)
    np.put_along_axis(onehot, labels[..., None], 1.0, axis=2)
    return onehot


@dataclass
class StepRun:
    """One step of P instances (this MLP's or parax.cnn's): their gradients and probabilities,
    and the step's cycles."""
    gradients: np.ndarray        # (P, PARAMETERS)
    probabilities: np.ndarray    # (P, b, 10)
    cycles: int                  # the instances' makespan (spawn excluded)
    dma_bytes: int
    run: object


def instance_step(params, x, labels, *, machine=None, engine: str = "c") -> StepRun:
    """Every instance k (one CPE) computes the gradient of the mean softmax cross-entropy over
    its batch x[k] ((P, b, 256) f32, b even, 2..8) with labels[k] ((P, b) ints 0..9)."""
    if not all(isinstance(a, np.ndarray) for a in (params, x, labels)):
        raise ArgumentTypeError("params, x and labels must be numpy arrays")
    if params.dtype != np.float32 or params.shape != (PARAMETERS,):
        raise ArgumentError(f"params must be float32 of shape ({PARAMETERS},), got "
                            f"{params.dtype} {params.shape}")
    machine = machine or Machine()
    cpes = machine.config.num_cpes
    if x.dtype != np.float32 or x.ndim != 3 or x.shape[2] != IN:
        raise ArgumentError(f"x must be float32 (instances, batch, {IN}), got {x.dtype} "
                            f"{x.shape}")
    instances, batch = x.shape[:2]
    if not 1 <= instances <= cpes:
        raise ArgumentError(f"{instances} instances need as many CPEs, the core group has "
                            f"{cpes}")
    if batch % 2 or not 2 <= batch <= B_MAX:
        raise ArgumentError(f"an instance's batch must be even, 2..{B_MAX}: its LDM holds "
                            f"{B_MAX} samples of {IN * 4} bytes ({_symbol('mlp_ldm_end')} of "
                            f"{machine.config.ldm_bytes} LDM bytes used); got {batch}")
    onehot = one_hot(labels, instances, batch, OUT, OUT_PAD)
    mem = machine.mem
    mark = mem.mark()
    try:
        xmem, ymem, wmem = mem.put(np.ascontiguousarray(x)), mem.put(onehot), mem.put(params)
        gmem = mem.alloc(instances * PARAMETERS * 4)
        pmem = mem.alloc(onehot.nbytes)
        job = KERNEL.record("M_", "MJOB_BYTES")
        words = np.zeros(instances * job.nbytes // 8, np.int64)
        for k in range(instances):
            job.write(words, k * job.nbytes, nsamp=batch, x=xmem + k * x[0].nbytes,
                      y=ymem + k * onehot[0].nbytes, w=wmem, g=gmem + k * PARAMETERS * 4,
                      p=pmem + k * onehot[0].nbytes, invb=1.0 / batch)
        jobs = mem.put(words)
        res = machine.run(KERNEL.program, entry=KERNEL.entry, args=[jobs], engine=engine,
                          cpes=range(instances))
        grads = mem.get(gmem, (instances, PARAMETERS), np.float32)
        probs = mem.get(pmem, onehot.shape, np.float32)[..., :OUT]
    finally:
        mem.release(mark)
    return StepRun(grads, probs, res.kernel_cycles, int(res.counters["dma_bytes_moved"]), res)
