"""The ParaX block on the CPE array: single-CPE f32 operators (``kernels/parax/block.s``) run
per sample, in the execution modes ``per_cg`` (the 64 CPEs take each operator together, one
sample each, and meet at a barrier after it) and ``per_cpe`` (each CPE, an *instance*, runs
the whole operator list on its own samples with no barrier), with delayed start and seeded
jitter. docs/parax.md.

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
MODES = ("per_cg", "per_cpe")
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
    over the instances; ``begin``/``end`` each instance's first and last cycle of its samples."""
    y: np.ndarray
    mode: str
    instances: int
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
        return self.p0_valid / (self.instances * self.cycles)

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


def _spawn(instances, config):
    """The CPEs to spawn for `instances` and the masks of their meeting (synr, sync): a part of
    mesh row 0, or whole rows; any other count spawns the whole array (idle CPEs just meet)."""
    cols, rows = config.mesh_cols, config.mesh_rows
    if instances <= cols:
        return instances, (1 << instances) - 1, 1
    if instances % cols == 0:
        return instances, (1 << cols) - 1, (1 << instances // cols) - 1
    return config.num_cpes, (1 << cols) - 1, (1 << rows) - 1


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
              instances: int = 64, launch_groups: int = 1, interval: int = 0, jitter: int = 0,
              jitter_seed: int = 0, machine=None, engine: str = "c") -> BlockRun:
    """Run `ops` (default: the block of as many layers as `weights`) on the samples `x`
    ((N, H, 8, 16) float32, HWC, H = 8 for the §1.8 block, fewer rows for quick tests) with conv `weights` ((L, 3, 3, 16, 16): kh, kw, ci, co) and BN
    `bn_scale`/`bn_shift` ((L, 16): y = x scale + shift, the inference form).

    ``per_cg``: all 64 CPEs, N/64 samples each, a barrier after every operator.
    ``per_cpe``: `instances` CPEs (1..64), N/instances samples each, no barrier; instance k starts
    ``start_delays(instances, launch_groups, interval, jitter, jitter_seed)[k]`` cycles late.
    With 64 CPEs, CPE 0 broadcasts the parameters to all (one read of them); with fewer, only
    the instances are spawned and each reads its own copy.
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
    _check_ldm_fit(nconv, nbn, machine.config.ldm_bytes)
    _check_ops(ops, nconv, nbn)
    cpes = machine.config.num_cpes
    if mode == "per_cg":
        instances = cpes
    if not isinstance(instances, (int, np.integer)) or not 1 <= instances <= cpes:
        raise ArgumentError(f"instances must be 1..{cpes}, got {instances!r}")
    samples = x.shape[0]
    if samples == 0 or samples % instances:
        raise ArgumentError(f"{samples} samples do not split evenly over {instances} instances"
                            f"{' (per_cg uses all 64 CPEs)' if mode == 'per_cg' else ''}")
    if mode == "per_cg" and (launch_groups != 1 or interval or jitter):
        raise ArgumentError("per_cg has no delayed start: its CPEs meet after every operator")
    delays = start_delays(instances, launch_groups, interval, jitter, jitter_seed)
    per = samples // instances

    mem = machine.mem
    mark = mem.mark()
    try:
        sample_bytes = x[0].nbytes
        xin = mem.put(x)
        yout = mem.alloc(x.nbytes)
        tmp = mem.alloc(2 * sample_bytes * instances)
        wmem = mem.put(weights)
        bnmem = mem.put(np.concatenate([bn_scale, bn_shift], axis=1))
        stats_bytes = _symbol("STATS_BYTES")
        stats = mem.alloc(stats_bytes * cpes)
        job = KERNEL.record("J_", "JOB_BYTES")
        spawned, rmask, cmask = _spawn(instances, machine.config)
        words = np.zeros(spawned * job.nbytes // 8, np.int64)
        codes = [OP_KINDS.index(kind) + 1 | layer << 8 for kind, layer in ops]
        for k in range(spawned):
            at = k * job.nbytes
            job.write(words, at, w=wmem, nconv=nconv, bn=bnmem, nbn=nbn, nops=len(ops),
                      stats=stats + k * stats_bytes, rmask=rmask, cmask=cmask,
                      barrier=int(mode == "per_cg"), rows=x.shape[1],
                      bcast=int(spawned == cpes))
            for i, code in enumerate(codes):
                words[(at + job.offset("ops")) // 8 + i] = code
            if k < instances:
                job.write(words, at, nsamp=per, **{"in": xin + k * per * sample_bytes},
                          out=yout + k * per * sample_bytes, tmp=tmp + 2 * k * sample_bytes,
                          delay=int(delays[k]))
                words[(at + job.offset("tmp")) // 8 + 1] = tmp + (2 * k + 1) * sample_bytes
        jobs = mem.put(words)
        res = machine.run(KERNEL.program, entry=KERNEL.entry, args=[jobs], engine=engine,
                          cpes=range(spawned))
        y = mem.get(yout, x.shape, np.float32)
        st = mem.get(stats, (cpes, stats_bytes // 8), np.int64)[:instances]
    finally:
        mem.release(mark)
    config = machine.config
    per_op = {kind: (int(st[:, i + 1].sum()), int(st[:, 4 + i + 1].sum()))
              for i, kind in enumerate(OP_KINDS)}
    return BlockRun(y=y, mode=mode, instances=instances, cycles=res.kernel_cycles,
                    per_op=per_op, begin=st[:, _symbol("S_BEGIN") // 8],
                    end=st[:, _symbol("S_END") // 8],
                    dma_bytes=int(res.counters["dma_bytes_moved"]),
                    p0_valid=sum(res.cpe[k].p0_valid for k in range(instances)),
                    flops=sum(res.cpe[k].float_ops for k in range(instances)),
                    bytes_per_cycle=config.dma_transaction_bytes / config.dma_transaction_cycles,
                    run=res)
