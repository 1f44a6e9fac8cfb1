"""A small CNN trained by ParaX instances, one per CPE (``kernels/parax/cnn.s``): conv 3x3
(16 -> 16, pad 1) -> BN (training form: the instance's batch statistics) -> ReLU -> average
pool over the 4 quadrants (64 features: where the strokes are survives) -> FC 64 -> 10 ->
softmax cross-entropy. Each instance runs a whole SGD step (forward and backward over its
samples) in one kernel call, from its own LDM, with no barrier between operators, and writes
its gradient, its batch's mean and variance, and its term of BN's running-statistics update;
``synchronise`` (PS, RAR or GS) then applies the gradient and ``update_running`` the running
statistics, both on the CPE array. ``cnn_predict`` runs the forward with given (running)
statistics. docs/parax.md "The CNN's step".

The parameters are one f32 vector: W (3, 3, 16, 16) | scale (16) | shift (16) | Wfc (64, 12)
| bfc (12), Wfc and bfc padded from 10 to 12 outputs with zeros (their gradient there is 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...vm import Machine
from ..runtime import Kernel
from .block import SAMPLE_SHAPE, _float32
from .mlp import StepRun, one_hot, unpack_shapes
from .sync import SyncRun, synchronise

KERNEL = Kernel(("parax/cnn.s",), "parax_cnn_step", "cnn_ldm_end")
CHANNELS, QUADRANTS, OUT, OUT_PAD = 16, 4, 10, 12
FEATURES = QUADRANTS * CHANNELS
SHAPES = ((3, 3, CHANNELS, CHANNELS), (CHANNELS,), (CHANNELS,), (FEATURES, OUT_PAD),
          (OUT_PAD,))
PARAMETERS = sum(int(np.prod(s)) for s in SHAPES)
BN_EPS = 1e-5                    # var + eps under BN's square root (as Caffe's default)
BN_MOMENTUM = 0.1                # running = (1 - m) running + m (the instances' mean batch stats)


@dataclass
class CnnStep(StepRun):
    """A CNN step: StepRun's fields, each instance's batch mean and (biased) variance of
    the conv's output per channel, (P, 2, 16) float32, and its running statistics minus
    them, the kernel's term of the running update (``update_running``)."""
    moments: np.ndarray = None
    running_deltas: np.ndarray = None


def init_params(seed: int = 1) -> np.ndarray:
    """Uniform weights of scale sqrt(3 / fan_in), BN scale 1 and shift 0, zero FC bias."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, SHAPES[0]) * np.sqrt(3 / (9 * CHANNELS))
    wfc = np.zeros(SHAPES[3])
    wfc[:, :OUT] = rng.uniform(-1, 1, (FEATURES, OUT)) * np.sqrt(3 / FEATURES)
    return np.concatenate([w.ravel(), np.ones(CHANNELS), np.zeros(CHANNELS), wfc.ravel(),
                           np.zeros(OUT_PAD)]).astype(np.float32)


def initial_moments() -> np.ndarray:
    """Running statistics before any step: mean 0, variance 1 ((2, 16) float32)."""
    return np.stack([np.zeros(CHANNELS), np.ones(CHANNELS)]).astype(np.float32)


def unpack(params: np.ndarray) -> tuple:
    """(W, scale, shift, Wfc, bfc) views of a parameter (or gradient) vector."""
    return unpack_shapes(params, SHAPES)


def _check(params, x, machine):
    if not all(isinstance(a, np.ndarray) for a in (params, x)):
        raise ArgumentTypeError("params, x and labels must be numpy arrays")
    if params.dtype != np.float32 or params.shape != (PARAMETERS,):
        raise ArgumentError(f"params must be float32 of shape ({PARAMETERS},), got "
                            f"{params.dtype} {params.shape}")
    x = _float32("x", x, SAMPLE_SHAPE)
    rows_max, batch_max = KERNEL.symbol("MAX_ROWS"), KERNEL.symbol("MAX_BATCH")
    if x.ndim != 5 or x.shape[2] % 2 or not 2 <= x.shape[2] <= rows_max or 0 in x.shape[:2]:
        raise ArgumentError(f"x must be (instances, batch, H, 8, 16) with H even, "
                            f"2..{rows_max}, got {x.shape}")
    if x.shape[1] > batch_max:
        raise ArgumentError(f"an instance's batch is at most {batch_max} samples (their "
                            f"quadrant gradients stay in its LDM: {KERNEL.symbol('cnn_ldm_end')}"
                            f" of {machine.config.ldm_bytes} bytes used), got {x.shape[1]}")
    if x.shape[0] > machine.config.num_cpes:
        raise ArgumentError(f"{x.shape[0]} instances need as many CPEs, the core group has "
                            f"{machine.config.num_cpes}")
    return x


def _checked_moments(name, moments):
    if not isinstance(moments, np.ndarray) or moments.dtype != np.float32 \
            or moments.shape != (2, CHANNELS):
        raise ArgumentError(f"{name} must be float32 of shape (2, {CHANNELS}) (mean, var)")
    return moments


def _launch(params, x, onehot, running, *, train: bool, machine, engine):
    """Run parax_cnn_step with BN's running statistics `running`: (gradients or None,
    probabilities, the batch's moments, running - moments, run result)."""
    instances, batch, rows = x.shape[:3]
    sample_bytes, label_bytes = x[0, 0].nbytes, onehot[0, 0].nbytes
    mem = machine.mem
    mark = mem.mark()
    try:
        xmem, ymem, wmem = mem.put(x), mem.put(onehot), mem.put(params)
        gmem = mem.alloc(instances * PARAMETERS * 4)
        pmem = mem.alloc(onehot.nbytes)
        acts = mem.alloc(x.nbytes)
        moments = np.zeros((instances, 2, 2, CHANNELS), np.float32)   # batch | running
        moments[:, 1] = running
        mmem = mem.put(moments)
        stats_bytes = KERNEL.symbol("STATS_BYTES")
        stats = mem.alloc(stats_bytes * instances)
        job = KERNEL.record("J_", "JOB_BYTES")
        words = np.zeros(instances * job.nbytes // 8, np.int64)
        pixels = rows * SAMPLE_SHAPE[0]
        for k in range(instances):
            job.write(words, k * job.nbytes, nsamp=batch, rows=rows, w=wmem,
                      **{"in": xmem + k * batch * sample_bytes},
                      out=pmem + k * batch * label_bytes, y=ymem + k * batch * label_bytes,
                      g=gmem + k * PARAMETERS * 4, stats=stats + k * stats_bytes,
                      acts=acts + k * batch * sample_bytes, mom=mmem + k * moments[0].nbytes,
                      train=int(train), invb=1.0 / batch, invpix=QUADRANTS / pixels,
                      invn=1.0 / (batch * pixels), eps=BN_EPS)
        res = machine.run(KERNEL.program, entry=KERNEL.entry, args=[mem.put(words)],
                          engine=engine, cpes=range(instances))
        grads = mem.get(gmem, (instances, PARAMETERS), np.float32) if train else None
        probs = mem.get(pmem, onehot.shape, np.float32)[..., :OUT]
        moments = mem.get(mmem, moments.shape, np.float32)
    finally:
        mem.release(mark)
    return grads, probs, moments[:, 0], moments[:, 1], res


def cnn_step(params, x, labels, running=None, *, machine=None, engine: str = "c") -> CnnStep:
    """Every instance k (CPE k) computes the gradient of the mean softmax cross-entropy over
    its batch x[k] ((P, b, H, 8, 16) float32, b 1..8, H even 2..8) with labels[k] ((P, b) ints
    0..9), BN normalising with the batch's statistics (returned as ``moments``), and `running`
    ((2, 16) float32, default ``initial_moments()``) minus them."""
    machine = machine or Machine()
    if not isinstance(labels, np.ndarray):
        raise ArgumentTypeError("params, x and labels must be numpy arrays")
    x = _check(params, x, machine)
    running = initial_moments() if running is None else _checked_moments("running", running)
    onehot = one_hot(labels, x.shape[0], x.shape[1], OUT, OUT_PAD)
    grads, probs, moments, deltas, res = _launch(params, x, onehot, running, train=True,
                                                 machine=machine, engine=engine)
    return CnnStep(grads, probs, res.kernel_cycles, int(res.counters["dma_bytes_moved"]), res,
                   moments, deltas)


def update_running(running, run: CnnStep, *, strategy: str = "GS", machine=None,
                   engine: str = "c") -> SyncRun:
    """BN's running statistics after the step `run` (taken with these `running`): running -
    (BN_MOMENTUM / P) sum_k (running - batch_k) = (1 - m) running + m mean_k batch_k, summed
    across the instances on the CPE array by `strategy`, as the gradient (``SyncRun.w``: the
    new (2, 16) statistics)."""
    running = _checked_moments("running", running)
    deltas = getattr(run, "running_deltas", None)
    if deltas is None:
        raise ArgumentTypeError(f"run must be a training step's CnnStep (cnn_step), got "
                                f"{type(run).__name__}")
    sync = synchronise(deltas.reshape(len(deltas), -1), running.ravel(), BN_MOMENTUM,
                       strategy=strategy, machine=machine, engine=engine)
    sync.w = sync.w.reshape(running.shape)
    return sync


def cnn_predict(params, moments, x, *, machine=None, engine: str = "c") -> StepRun:
    """The forward alone (inference): BN normalises with `moments` ((2, 16) float32: running
    mean and variance); ``probabilities`` (P, b, 10), ``gradients`` None."""
    machine = machine or Machine()
    x = _check(params, x, machine)
    moments = _checked_moments("moments", moments)
    onehot = np.zeros((*x.shape[:2], OUT_PAD), np.float32)
    _, probs, _, _, res = _launch(params, x, onehot, moments, train=False, machine=machine,
                                  engine=engine)
    return StepRun(None, probs, res.kernel_cycles, int(res.counters["dma_bytes_moved"]), res)
