"""The ParaX block on the CPE array: single-CPE f32 operators (``kernels/parax/block.s``) run
per sample, in the execution modes ``per_cg`` (the 64 CPEs take each operator together, one
sample each, and meet at a barrier after it), ``per_group(x)`` (instances of x CPEs doing the
same within themselves) and ``per_cpe`` (each CPE an instance running the whole operator list
on its own samples with no barrier), with delayed start and seeded jitter. docs/parax.md.

Every instance computes a sample with the same instructions in the same order in every mode,
so the outputs of all modes are bit-identical; only the timing differs.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...vm import Machine
from ..runtime import Kernel

KERNEL = Kernel(("parax/block.s",), "parax_run", "parax_ldm_end")
MODES = ("per_cg", "per_group", "per_cpe")
OP_KINDS = ("conv", "bn", "relu")        # kind codes 1, 2, 3 in the kernel
SAMPLE_SHAPE = (8, 16)                   # W, C of a sample (H, W, C; channels innermost)
WEIGHT_SHAPE = (3, 3, 16, 16)            # kh, kw, ci, co


def _symbol(name: str) -> int:
    return KERNEL.symbol(name)


def block_ops(layers: int = 4) -> list:
    """The §1.8 block: `layers` x [conv 3x3 -> BN -> ReLU], as (kind, layer) pairs."""
    return [op for k in range(layers) for op in (("conv", k), ("bn", k), ("relu", k))]


@dataclass
class BlockRun:
    """A run's output and timing. ``per_op[kind]`` = (cycles inside the calls, calls) summed
    over the CPEs; ``begin``/``end`` each CPE's first and last cycle of its samples."""
    y: np.ndarray
    mode: str
    instances: int
    cpes: int                        # the CPEs the instances use
    cycles: int                      # the kernel's makespan (spawn excluded)
    per_op: dict
    begin: np.ndarray
    end: np.ndarray
    dma_bytes: int                   # bytes the DMA engine moved (whole 128-byte transactions)
    p0_valid: int                    # P0 issue cycles of the instances' CPEs
    flops: int
    bytes_per_cycle: float           # the CG's DMA peak
    run: object

    @property
    def samples_per_megacycle(self) -> float:
        return self.y.shape[0] / self.cycles * 1e6

    @property
    def dma_utilisation(self) -> float:
        return self.dma_bytes / (self.cycles * self.bytes_per_cycle)

    @property
    def p0_busy(self) -> float:
        return self.p0_valid / (self.cpes * self.cycles)

    def cycles_per_call(self, kind: str) -> float:
        cycles, calls = self.per_op[kind]
        return cycles / calls if calls else float("nan")


def _float32(name, value, shape):
    if not isinstance(value, np.ndarray):
        raise ArgumentTypeError(f"{name} must be a numpy array, got {type(value).__name__}")
    if value.dtype != np.float32 or value.shape[-len(shape):] != shape:
        raise ArgumentError(f"{name} must be float32 of shape (..., {', '.join(map(str, shape))})"
                            f", got {value.dtype} {value.shape}")
    return np.ascontiguousarray(value)


def _check_ops(ops, nconv, nbn):
    if not ops or len(ops) > _symbol("MAX_OPS"):
        raise ArgumentError(f"ops must list 1..{_symbol('MAX_OPS')} operators, got {len(ops)}")
    for kind, layer in ops:
        if kind not in OP_KINDS:
            raise ArgumentError(f"ops: unknown operator {kind!r} (known: {', '.join(OP_KINDS)})")
        limit = {"conv": nconv, "bn": nbn, "relu": 1 << 24}[kind]
        if not 0 <= layer < limit:
            raise ArgumentError(f"ops: {kind} layer {layer} has no parameters ({limit} given)")


def _check_ldm_fit(nconv, nbn, ldm_bytes):
    """The kernel holds every layer's parameters in each LDM: say so with numbers if not."""
    for what, count, limit, nbytes in (("conv", nconv, "MAX_CONV", "CONV_W_BYTES"),
                                       ("bn", nbn, "MAX_BN", "BN_P_BYTES")):
        if count > _symbol(limit):
            raise ArgumentError(
                f"an instance does not fit its LDM: {count} {what} layers need "
                f"{count * _symbol(nbytes)} bytes of parameters, the kernel holds "
                f"{_symbol(limit)} ({_symbol(limit) * _symbol(nbytes)} bytes; "
                f"{_symbol('parax_ldm_end')} of {ldm_bytes} LDM bytes used)")


def _line_masks(first: int, count: int, config):
    """(synr mask, sync mask) of a barrier of the `count` CPEs from `first`: a part of one mesh
    row, or whole consecutive rows."""
    cols = config.mesh_cols
    if count <= cols:
        return ((1 << count) - 1) << first % cols, 1 << first // cols
    return (1 << cols) - 1, ((1 << count // cols) - 1) << first // cols


def _check_group(group, config) -> int:
    cpes, cols = config.num_cpes, config.mesh_cols
    if not isinstance(group, (int, np.integer)) or isinstance(group, bool):
        raise ArgumentTypeError(f"group must be an int, got {type(group).__name__}")
    fits = group <= cols and cols % group == 0 or group % cols == 0 and cpes % group == 0
    if not 2 <= group < cpes or not fits or cpes % group:
        raise ArgumentError(f"group (CPEs per instance) must divide {cpes} and a mesh row of "
                            f"{cols} or be whole rows, 2..{cpes // 2}; got {group}")
    return int(group)


def start_delays(instances: int, launch_groups: int = 1, interval: int = 0,
                 jitter: int = 0, jitter_seed: int = 0) -> np.ndarray:
    """Each instance's start delay in cycles: instance k is in launch group k mod n and starts
    (k mod n) * interval cycles late, plus a seeded uniform jitter in [0, jitter]."""
    for name, value in (("launch_groups", launch_groups), ("interval", interval),
                        ("jitter", jitter)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 1 <= launch_groups <= instances:
        raise ArgumentError(f"launch_groups must be 1..{instances} (the instances), got "
                            f"{launch_groups}")
    if interval < 0 or jitter < 0:
        raise ArgumentError(f"interval and jitter must be >= 0, got {interval} and {jitter}")
    delays = (np.arange(instances) % launch_groups) * interval
    if jitter:
        delays = delays + np.random.default_rng(jitter_seed).integers(0, jitter + 1, instances)
    return delays.astype(np.int64)


def run_block(x, weights, bn_scale, bn_shift, *, ops=None, mode: str = "per_cpe",
              instances: int = 64, group: int = 8, launch_groups: int = 1, interval: int = 0,
              jitter: int = 0, jitter_seed: int = 0, machine=None,
              engine: str = "c") -> BlockRun:
    """Run `ops` (default: the block of as many layers as `weights`) on the samples `x`
    ((N, H, 8, 16) float32, HWC; H = 8 for the §1.8 block, fewer rows for quick tests) with
    conv `weights` ((L, 3, 3, 16, 16): kh, kw, ci, co) and BN `bn_scale`/`bn_shift` ((L, 16):
    y = x scale + shift, the inference form).

    An instance is the CPEs that run the operators on its share of the samples, split over
    them by samples, one CPE per sample at a time:
    ``per_cg``: one instance of all 64 CPEs, which meet at a barrier after every operator;
    ``per_group``: 64/`group` instances of `group` CPEs (a part of a mesh row or whole rows),
    each meeting on its own after every operator (synr within the row, sync across rows);
    ``per_cpe``: `instances` instances of one CPE (1..64), no barrier.
    Instance k starts ``start_delays(instances, launch_groups, interval, jitter,
    jitter_seed)[k]`` cycles late. With the whole array spawned, CPE 0 broadcasts the
    parameters to all (one read of them); else each spawned CPE reads its own copy.
    """
    if mode not in MODES:
        raise ArgumentError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    x = _float32("x", x, SAMPLE_SHAPE)
    if x.ndim != 4 or not 1 <= x.shape[1] <= _symbol("MAX_ROWS"):
        raise ArgumentError(f"x must be (N, H, 8, 16) with H 1..{_symbol('MAX_ROWS')}, got "
                            f"{x.shape}")
    weights = _float32("weights", weights, WEIGHT_SHAPE)
    bn_scale = _float32("bn_scale", bn_scale, (16,))
    bn_shift = _float32("bn_shift", bn_shift, (16,))
    if weights.ndim != 5 or bn_scale.ndim != 2 or bn_scale.shape != bn_shift.shape:
        raise ArgumentError(f"x (N, H, 8, 16), weights (L, 3, 3, 16, 16), bn_scale and "
                            f"bn_shift (L, 16) expected, got {x.shape}, {weights.shape}, "
                            f"{bn_scale.shape}, {bn_shift.shape}")
    nconv, nbn = weights.shape[0], bn_scale.shape[0]
    ops = block_ops(nconv) if ops is None else list(ops)
    machine = machine or Machine()
    config = machine.config
    _check_ldm_fit(nconv, nbn, config.ldm_bytes)
    _check_ops(ops, nconv, nbn)
    cpes = config.num_cpes
    width = {"per_cg": cpes, "per_cpe": 1}.get(mode) or _check_group(group, config)
    if mode != "per_cpe":
        instances = cpes // width
    elif not isinstance(instances, (int, np.integer)) or isinstance(instances, bool):
        raise ArgumentTypeError(f"instances must be an int, got {type(instances).__name__}")
    elif not 1 <= instances <= cpes:
        raise ArgumentError(f"instances must be 1..{cpes}, got {instances}")
    used = instances * width
    samples = x.shape[0]
    if samples == 0 or samples % used:
        raise ArgumentError(f"{samples} samples do not split evenly over the {used} CPEs of "
                            f"{instances} instance(s)")
    delays = start_delays(instances, launch_groups, interval, jitter, jitter_seed)
    per = samples // used
    spawned = used if used <= config.mesh_cols or used % config.mesh_cols == 0 else cpes
    meet = _line_masks(0, spawned, config)

    mem = machine.mem
    mark = mem.mark()
    try:
        sample_bytes = x[0].nbytes
        xin = mem.put(x)
        yout = mem.alloc(x.nbytes)
        tmp = mem.alloc(2 * sample_bytes * used)
        wmem = mem.put(weights)
        bnmem = mem.put(np.concatenate([bn_scale, bn_shift], axis=1))
        stats_bytes = _symbol("STATS_BYTES")
        stats = mem.alloc(stats_bytes * spawned)
        job = KERNEL.record("J_", "JOB_BYTES")
        words = np.zeros(spawned * job.nbytes // 8, np.int64)
        codes = [OP_KINDS.index(kind) + 1 | layer << 8 for kind, layer in ops]
        ops_word = job.offset("ops") // 8
        for k in range(spawned):
            at = k * job.nbytes
            job.write(words, at, w=wmem, nconv=nconv, bn=bnmem, nbn=nbn, nops=len(ops),
                      stats=stats + k * stats_bytes, rmask=meet[0], cmask=meet[1],
                      rows=x.shape[1], bcast=int(spawned == cpes))
            words[at // 8 + ops_word:at // 8 + ops_word + len(codes)] = codes
            if k >= used:
                continue
            grmask, gcmask = _line_masks(k - k % width, width, config)
            job.write(words, at, nsamp=per, **{"in": xin + k * per * sample_bytes},
                      out=yout + k * per * sample_bytes, tmp=tmp + 2 * k * sample_bytes,
                      delay=int(delays[k // width]), barrier=int(width > 1),
                      grmask=grmask, gcmask=gcmask)
            words[(at + job.offset("tmp")) // 8 + 1] = tmp + (2 * k + 1) * sample_bytes
        jobs = mem.put(words)
        res = machine.run(KERNEL.program, entry=KERNEL.entry, args=[jobs], engine=engine,
                          cpes=range(spawned))
        y = mem.get(yout, x.shape, np.float32)
        st = mem.get(stats, (spawned, stats_bytes // 8), np.int64)[:used]
    finally:
        mem.release(mark)
    cycles_at, calls_at = _symbol("S_CYCLES") // 8, _symbol("S_CALLS") // 8
    per_op = {kind: (int(st[:, cycles_at + i + 1].sum()), int(st[:, calls_at + i + 1].sum()))
              for i, kind in enumerate(OP_KINDS)}
    return BlockRun(y=y, mode=mode, instances=instances, cpes=used, cycles=res.kernel_cycles,
                    per_op=per_op, begin=st[:, _symbol("S_BEGIN") // 8],
                    end=st[:, _symbol("S_END") // 8],
                    dma_bytes=int(res.counters["dma_bytes_moved"]),
                    p0_valid=sum(res.cpe[k].p0_valid for k in range(used)),
                    flops=sum(res.cpe[k].float_ops for k in range(used)),
                    bytes_per_cycle=config.dma_transaction_bytes / config.dma_transaction_cycles,
                    run=res)


GRAD_KERNEL = Kernel(("parax/block.s",), "parax_conv_grad", "parax_ldm_end")
BN_RELU_GRAD_KERNEL = Kernel(("parax/block.s",), "parax_bn_relu_grad", "parax_ldm_end")


@dataclass
class Backward:
    """A backward on single-CPE instances: dx per sample; ``grads[k]`` instance k's parameter
    gradient (the sum over its samples, in order); the kernel's cycles."""
    dx: np.ndarray
    grads: np.ndarray
    cycles: int
    run: object


def _backward(kernel, dy, x, params, field, grad_shape, instances, machine, engine) -> Backward:
    """Run a backward entry of block.s: instance k (CPE k) takes samples k N/instances ..
    of `dy` and `x`, the parameters `params` at job field `field`."""
    x = _float32("x", x, SAMPLE_SHAPE)
    dy = _float32("dy", dy, SAMPLE_SHAPE)
    rows_max = kernel.symbol("MAX_ROWS")
    if x.ndim != 4 or dy.shape != x.shape or not 1 <= x.shape[1] <= rows_max:
        raise ArgumentError(f"x and dy must be (N, H, 8, 16) with H 1..{rows_max}, got "
                            f"{x.shape} and {dy.shape}")
    machine = machine or Machine()
    cpes = machine.config.num_cpes
    if not isinstance(instances, (int, np.integer)) or isinstance(instances, bool):
        raise ArgumentTypeError(f"instances must be an int, got {type(instances).__name__}")
    if not 1 <= instances <= cpes or x.shape[0] == 0 or x.shape[0] % instances:
        raise ArgumentError(f"instances must be 1..{cpes} and divide the {x.shape[0]} samples, "
                            f"got {instances}")
    per = x.shape[0] // instances
    sample_bytes = x[0].nbytes
    grad_bytes = int(np.prod(grad_shape)) * 4
    mem = machine.mem
    mark = mem.mark()
    try:
        xin, dyin, pmem = mem.put(x), mem.put(dy), mem.put(params)
        dxout = mem.alloc(x.nbytes)
        gout = mem.alloc(instances * grad_bytes)
        stats_bytes = kernel.symbol("STATS_BYTES")
        stats = mem.alloc(stats_bytes * instances)
        job = kernel.record("J_", "JOB_BYTES")
        words = np.zeros(instances * job.nbytes // 8, np.int64)
        for k in range(instances):
            first = k * per * sample_bytes
            job.write(words, k * job.nbytes, nsamp=per, **{"in": xin + first, field: pmem},
                      out=dxout + first, dy=dyin + first, dw=gout + k * grad_bytes,
                      rows=x.shape[1], stats=stats + k * stats_bytes)
        res = machine.run(kernel.program, entry=kernel.entry, args=[mem.put(words)],
                          engine=engine, cpes=range(instances))
        dx = mem.get(dxout, x.shape, np.float32)
        grads = mem.get(gout, (instances,) + tuple(grad_shape), np.float32)
    finally:
        mem.release(mark)
    return Backward(dx=dx, grads=grads, cycles=res.kernel_cycles, run=res)


def conv_backward(dy, x, weight, *, instances: int = 1, machine=None,
                  engine: str = "c") -> Backward:
    """The backward of the 3x3 conv (16 -> 16, pad 1) of ``run_block``: `dy` and `x` (N, H, 8,
    16) float32, `weight` (3, 3, 16, 16). Instance k (CPE k) takes samples k N/instances ..
    and gives dx = dy convolved with the flipped, transposed weight, and grads[k] = dW, the
    sum over its samples of the correlation of x and dy (block.s parax_conv_grad)."""
    weight = _float32("weight", weight, WEIGHT_SHAPE)
    if weight.ndim != 4:
        raise ArgumentError(f"weight must be (3, 3, 16, 16), got {weight.shape}")
    return _backward(GRAD_KERNEL, dy, x, weight, "w", WEIGHT_SHAPE, instances, machine,
                     engine)


def bn_relu_backward(dy, x, scale, shift, *, instances: int = 1, machine=None,
                     engine: str = "c") -> Backward:
    """The backward of ``run_block``'s [BN, ReLU] pair (y = relu(x scale + shift) per channel):
    `dy` the gradient at ReLU's output and `x` BN's input, (N, H, 8, 16) float32; `scale`,
    `shift` (16,). g = dy where x scale + shift (rounded as the forward) has its sign bit
    clear; dx = g scale; grads[k] = (dscale, dshift) = the sums of g x and g over instance k's
    samples (block.s parax_bn_relu_grad)."""
    scale = _float32("scale", scale, (16,))
    shift = _float32("shift", shift, (16,))
    if scale.ndim != 1 or shift.ndim != 1:
        raise ArgumentError(f"scale and shift must be (16,), got {scale.shape} and "
                            f"{shift.shape}")
    return _backward(BN_RELU_GRAD_KERNEL, dy, x, np.concatenate([scale, shift]), "bn", (2, 16),
                     instances, machine, engine)
