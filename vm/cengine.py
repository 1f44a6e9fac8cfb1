"""The C core engine: runs an ``EngineJob`` with the cycle loop of ``vm/core`` (docs/timing.md).

The job's numpy arrays are handed to C by pointer and modified in place; counters, the stop
and trace spans come back in an ``EngineResult`` identical to the Python reference engine's.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..isa.table import LATENCY_CLASSES
from ._core import ffi, lib
from .config import ENGINE_PARAMETERS, PARAMETERS
from .engine_api import (CG_COUNTERS, CPE_COUNTERS, SPAN_KINDS, STALL_REASONS, STOP_CYCLE_LIMIT,
                         STOP_DEADLOCK, EngineJob, EngineResult, Stop)

# A run without max_cycles still ends: skipping makes even this many cycles cheap to reach.
NO_LIMIT_CYCLES = 1 << 62

_ERRORS = {-1: "configuration outside the parameters' ranges (VMConfig checks them first: "
               "a job built around it?) or a negative max_cycles",
           -2: "out of host memory",
           -3: "internal bound violated in the C core",
           -4: "the C core's run was released before it ended"}


def _check_build() -> None:
    """The C core's enums and SwConfig are generated from engine_defs, the configuration and
    the ISA table at build time; refuse to run a build made from other definitions."""
    reasons = tuple(ffi.string(lib.swsim_reason_name(i)).decode()
                    for i in range(lib.SWSIM_NUM_REASONS))
    fields = tuple(name for name, _ in ffi.typeof("SwConfig").fields)
    parameters, run_fields = fields[:len(ENGINE_PARAMETERS)], fields[len(ENGINE_PARAMETERS):]
    if reasons != STALL_REASONS or len(CPE_COUNTERS) != lib.SWSIM_NUM_CPE_COUNTERS \
            or len(CG_COUNTERS) != lib.SWSIM_NUM_CG_COUNTERS \
            or lib.SWSIM_SPAN_DMA != SPAN_KINDS.index("dma") \
            or lib.swsim_num_latency_classes() != len(LATENCY_CLASSES) \
            or parameters != ENGINE_PARAMETERS \
            or any(p.name in run_fields for p in PARAMETERS):
        raise ImportError("swsim.vm._core is out of date with engine_defs / the configuration "
                          "/ the ISA table; rebuild it (pip install -e .)")


_check_build()


@functools.lru_cache(maxsize=16)
def _parameters_image(cfg) -> bytes:
    """The bytes of a SwConfig holding every parameter the engines read of `cfg`, by name
    (made once per configuration: filling it field by field was a tenth of a launch's host
    time)."""
    c = ffi.new("SwConfig *")
    for name in ENGINE_PARAMETERS:
        value = getattr(cfg, name)
        setattr(c, name, value if isinstance(value, float) else int(value))
    return bytes(ffi.buffer(c))


def _config_struct(job: EngineJob, skip: bool):
    """SwConfig: the job's configuration's parameters and the run's fields."""
    c = ffi.new("SwConfig *")
    image = _parameters_image(job.config)
    ffi.memmove(c, image, len(image))
    c.mem_bytes = int(job.mem.size)
    c.max_cycles = NO_LIMIT_CYCLES if job.max_cycles is None else int(job.max_cycles)
    c.trace = bool(job.trace)
    c.skip = bool(skip)
    return c


def _buffer(array: np.ndarray, dtype, shape, name: str, keep):
    if array.dtype != dtype or array.shape != shape or not array.flags.c_contiguous \
            or not array.flags.writeable:
        raise ValueError(f"job.{name} must be a writeable C-contiguous {np.dtype(dtype).name} "
                         f"array of shape {shape}, got {array.dtype} {array.shape}")
    if array.size == 0:   # cffi needs a non-empty buffer; the core never touches it
        array = np.zeros(1, dtype)
    keep.append(array)
    return ffi.from_buffer(array)


def _job_struct(job: EngineJob, keep):
    cfg = job.config
    n = cfg.num_cpes
    code = np.ascontiguousarray(job.code, dtype=np.uint32)
    spawned = np.ascontiguousarray(job.spawned, dtype=np.uint8)
    if spawned.shape != (n,):
        raise ValueError(f"job.spawned must have shape ({n},)")
    keep.extend([code, spawned])
    j = ffi.new("SwJob *")
    j.code = ffi.cast("uint32_t *", ffi.from_buffer(code if code.size else np.zeros(1, np.uint32)))
    j.code_words = int(code.size)
    j.spawned = ffi.cast("uint8_t *", ffi.from_buffer(spawned))
    j.entry_pc = int(job.entry_pc)
    j.regs = ffi.cast("uint64_t *", _buffer(job.regs, np.uint64, (n, 32, 4), "regs", keep))
    j.ldm = ffi.cast("uint8_t *", _buffer(job.ldm, np.uint8, (n, cfg.ldm_bytes), "ldm", keep))
    j.mem = ffi.cast("uint8_t *", _buffer(job.mem, np.uint8, (job.mem.size,), "mem", keep))
    return j


def _stop(result, job: EngineJob, n: int) -> Optional[Stop]:
    if result.stop_kind == 0:
        return None
    blocked = []
    if result.stop_kind in (STOP_DEADLOCK, STOP_CYCLE_LIMIT):
        for cpe in range(n):
            state = result.last_state[cpe]
            if job.spawned[cpe] and state != STALL_REASONS.index("finished"):
                reason = "running" if state == lib.SWSIM_STATE_RUNNING else STALL_REASONS[state]
                blocked.append((cpe, int(result.pcs[cpe]), reason))
    return Stop(kind=result.stop_kind, cpe=result.stop_cpe, pc=int(result.stop_pc),
                cycle=int(result.stop_cycle), a=int(result.stop_a), b=int(result.stop_b),
                blocked=blocked)


def _spans(result) -> list:
    raw = ffi.buffer(result.spans, result.num_spans * ffi.sizeof("SwSpan"))
    records = np.frombuffer(raw, dtype=np.dtype([("cpe", "<i4"), ("kind", "<i4"),
                                                 ("start", "<i8"), ("end", "<i8")]))
    spans = [(int(r["cpe"]), SPAN_KINDS[int(r["kind"])], int(r["start"]), int(r["end"]))
             for r in records]
    spans.sort(key=lambda s: (s[0], s[2], s[1]))
    return spans


# Cycles simulated between two progress callbacks (a few milliseconds of a 64-CPE run).
PROGRESS_CYCLES = 1 << 16


def run(job: EngineJob, skip: bool = True,
        progress: Optional[Callable[[int], None]] = None) -> EngineResult:
    """Run ``job`` to its end. ``skip=False`` steps every cycle of every CPE, without skipping,
    batches or CPEs in step (a debugging aid: none of them changes a result). ``progress``, if
    given, is called with the current cycle every ``PROGRESS_CYCLES`` simulated cycles or so (the run proceeds in steps that return to
    Python; the results are those of a single step)."""
    n = job.config.num_cpes
    keep: list = []   # arrays whose memory C uses must outlive the call
    config = _config_struct(job, skip)
    job_struct = _job_struct(job, keep)
    result = ffi.new("SwResult *")
    if progress is None:
        status = lib.swsim_run(config, job_struct, result)
    else:
        status = _run_in_steps(config, job_struct, result, progress)
    try:
        if status != 0:
            raise (MemoryError if status == -2 else ValueError)(_ERRORS.get(status, status))
        return EngineResult(
            kernel_cycles=int(result.kernel_cycles),
            cpe_counters=np.frombuffer(ffi.buffer(result.cpe_counters), dtype=np.uint64)
            [:n * len(CPE_COUNTERS)].reshape(n, len(CPE_COUNTERS)).copy(),
            cg_counters=np.array(list(result.cg_counters), dtype=np.uint64),
            pcs=np.array(list(result.pcs[0:n]), dtype=np.uint64),
            stop=_stop(result, job, n),
            spans=_spans(result) if job.trace else None,
        )
    finally:
        lib.swsim_free_result(result)


@dataclass(frozen=True)
class PathCycles:
    """How much of a run took the C core's fast paths (docs/vm.md "Engines"), for tests that a
    case takes them."""
    batch: int     # CPE cycles simulated in batches: several cycles of a CPE in one visit
    in_step: int   # cycles whose issue decision was made once for every running CPE
    group: int     # CPE cycles issued in step in a group (some running CPEs, not all)
    ahead: int     # CPE cycles spinning CPEs ran ahead (a loop at a fixed point, in one step)


def path_cycles(job: EngineJob) -> PathCycles:
    """Runs ``job`` (modifying its arrays as ``run`` does) and counts its fast paths."""
    keep: list = []
    result = ffi.new("SwResult *")
    status = lib.swsim_run(_config_struct(job, True), _job_struct(job, keep), result)
    try:
        if status != 0:
            raise (MemoryError if status == -2 else ValueError)(_ERRORS.get(status, status))
        return PathCycles(int(result.batch_cycles), int(result.step_cycles),
                          int(result.group_cycles), int(result.ahead_cycles))
    finally:
        lib.swsim_free_result(result)


def _run_in_steps(config, job_struct, result, progress) -> int:
    sim = lib.swsim_start(config, job_struct, result)
    if sim == ffi.NULL:
        return result.status
    try:
        while not lib.swsim_advance(sim, lib.swsim_cycle(sim) + PROGRESS_CYCLES):
            progress(int(lib.swsim_cycle(sim)))
    finally:
        status = lib.swsim_finish(sim)   # releases the run even if progress raised
    return status


def measure_speed(job: EngineJob, repeat: int = 3) -> dict:
    """Simulated instructions (valid pipe slots) and cycles per host second for ``job`` (best
    of ``repeat`` runs, each on a fresh copy of the job's arrays)."""
    best = None
    for _ in range(repeat):
        fresh = EngineJob(config=job.config, code=job.code, spawned=job.spawned,
                          entry_pc=job.entry_pc, regs=job.regs.copy(), ldm=job.ldm.copy(),
                          mem=job.mem.copy(), max_cycles=job.max_cycles, trace=False)
        start = time.perf_counter()
        result = run(fresh)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    valid = CPE_COUNTERS.index("p0_valid"), CPE_COUNTERS.index("p1_valid")
    instructions = int(result.cpe_counters[:, list(valid)].sum())
    return {"seconds": best, "instructions": instructions, "kernel_cycles": result.kernel_cycles,
            "instructions_per_second": instructions / best,
            "cycles_per_second": result.kernel_cycles / best}
