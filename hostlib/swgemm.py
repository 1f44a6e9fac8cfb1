"""swGEMM: ``gemm(A, B, C, alpha, beta, trans_a, trans_b)`` on the VM (thesis §4.2).

The host only prepares memory: it copies the operands into simulated main memory as they are
(row- or column-major, no padding, no transposed copy), chooses the blocking with the
performance model (``gemm_model``), writes a job record and spawns ``kernels/swgemm.s`` once.
Every flop, the alpha/beta scaling, transpositions, f32<->f64 conversion and zero padding run
on the CPEs. docs/gemm.md ("swGEMM") describes the kernel.

The kernel computes C' (M' x N', row-major in memory) = alpha A' B' + beta C' with the
primitive's k-major operand layouts. A column-major C is handled as the row-major C^T =
op(B)^T op(A)^T; without C the orientation with the smaller predicted time is used.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..kernels import program
from ..vm import Machine
from . import gemm_model
from .gemm_model import Blocking, Problem

KERNEL = "swgemm.s"
ENTRY = "swgemm"
# Job record offsets (kernels/swgemm.s J_* / O_* / SL_*), in bytes.
JOB_BYTES = 992
JOB = {"es": 0, "mb": 8, "nb": 16, "kb": 24, "nm": 32, "nn": 40, "nk": 48, "alpha": 56,
       "beta": 64, "has_beta": 72, "c_ldm": 80}
OPERAND_OFFSETS = {"A": 128, "B": 416, "C": 704}
OPERAND = {"base": 0, "ldb": 8, "trans": 16, "rows": 24, "cols": 32, "r": 40, "l": 48,
           "swap": 56, "pack": 64, "cur": 88}
SLOT_OFFSET, SLOT_BYTES, SLOT_RAW = 120, 80, 56


@dataclass
class GemmStats:
    """What one gemm() call did on the VM."""
    m: int
    n: int
    k: int
    dtype: str
    blocking: Blocking
    swapped: bool             # computed as C^T = op(B)^T op(A)^T
    kernel_cycles: int        # spawn excluded
    clock_hz: float
    peak_gflops: float
    predicted_cycles: float   # the model's estimate for this blocking
    host_seconds: float
    run: object               # the VM's RunResult (counters, per-CPE statistics)

    @property
    def seconds(self) -> float:
        return self.kernel_cycles / self.clock_hz

    @property
    def gflops(self) -> float:
        return 2 * self.m * self.n * self.k / self.seconds / 1e9

    @property
    def efficiency(self) -> float:
        return self.gflops / self.peak_gflops


@dataclass
class _Stored:
    """A logical matrix (rows x cols) as it lies in memory: `array` is C-contiguous and is
    either the matrix (natural) or its transpose."""
    array: np.ndarray
    transposed: bool

    @property
    def shape(self):
        return self.array.shape[::-1] if self.transposed else self.array.shape

    @property
    def T(self) -> "_Stored":
        return _Stored(self.array, not self.transposed)


def _stored(view: np.ndarray) -> _Stored:
    """How `view` can be placed in memory without reordering it: as it is when C-contiguous,
    as its transpose when F-contiguous; anything else is made contiguous first."""
    if view.flags.c_contiguous:
        return _Stored(view, False)
    if view.flags.f_contiguous:
        return _Stored(view.T, True)
    return _Stored(np.ascontiguousarray(view), False)


def _operands(A, B, C, trans_a, trans_b):
    A, B = np.asarray(A), np.asarray(B)
    dtype = A.dtype
    if dtype not in (np.float32, np.float64) or B.dtype != dtype:
        raise ValueError(f"A and B must both be float32 or both float64, got {A.dtype} and "
                         f"{B.dtype}")
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError("A and B must be 2-D")
    op_a = A.T if trans_a else A
    op_b = B.T if trans_b else B
    (m, k), (k2, n) = op_a.shape, op_b.shape
    if k != k2:
        raise ValueError(f"op(A) is {m} x {k} but op(B) is {k2} x {n}")
    if C is not None:
        C = np.asarray(C)
        if C.dtype != dtype or C.shape != (m, n):
            raise ValueError(f"C must be {m} x {n} {dtype}, got {C.shape} {C.dtype}")
    if min(m, n, k) < 1:
        raise ValueError(f"M, N, K must be >= 1, got {m}, {n}, {k}")
    return dtype, _stored(op_a), _stored(op_b), None if C is None else _stored(C)


def _problem(a_km: _Stored, b_kn: _Stored, m, n, k, dtype, has_beta) -> Problem:
    return Problem(m=m, n=n, k=k, itemsize=np.dtype(dtype).itemsize,
                   a_transposed=a_km.transposed, b_transposed=b_kn.transposed,
                   has_beta=has_beta, lda=a_km.array.shape[1], ldb=b_kn.array.shape[1])


def gemm(A, B, C=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, *, engine="c",
         blocking=None, machine=None):
    """alpha op(A) op(B) + beta C on the VM; returns (result, GemmStats).

    A, B (and C) are 2-D float32 or float64 numpy arrays, row- or column-major; op(X) is X.T
    when trans_x. Without C the result is alpha op(A) op(B). The result has C's layout (or the
    one the model found faster when C is None). `blocking` = (Mb, Nb, Kb) per CPE overrides the
    model's choice (Mb a multiple of 4, Nb of 16).
    """
    dtype, op_a, op_b, c_mem = _operands(A, B, C, trans_a, trans_b)
    m, k = op_a.shape
    n = op_b.shape[1]
    has_beta = C is not None and beta != 0
    # alpha = 0: the product is not computed (A and B are not read, as in BLAS): K = 0 makes
    # every A and B block empty (zero-filled in LDM).
    k_product = k if alpha != 0 else 0
    # The kernel's A is K x M: op(A)^T.
    plans = [(False, op_a.T, op_b, c_mem), (True, op_b, op_a.T, None if c_mem is None
                                                               else c_mem.T)]
    if c_mem is not None:
        plans = [plans[1] if c_mem.transposed else plans[0]]
    machine = machine or Machine()
    choices = []
    for swapped, a_km, b_kn, c in plans:
        mm, nn = (n, m) if swapped else (m, n)
        problem = _problem(a_km, b_kn, mm, nn, k_product, dtype, has_beta)
        chosen = Blocking(*blocking) if blocking is not None else gemm_model.choose(
            problem, machine.config)
        choices.append((gemm_model.predict(problem, chosen, machine.config), swapped, a_km,
                        b_kn, c, problem, chosen))
    predicted, swapped, a_km, b_kn, c, problem, chosen = min(choices, key=lambda c: c[0])
    return _run(problem, chosen, a_km, b_kn, c, alpha, beta, dtype, engine, machine, swapped,
                predicted, k)


def _run(problem, blocking, a_km, b_kn, c, alpha, beta, dtype, engine, machine, swapped,
         predicted, k):
    layout = gemm_model.ldm_layout(problem, blocking, machine.config.ldm_bytes)
    if layout is None:
        raise ValueError(f"blocking {blocking} does not fit in LDM for {problem}")
    mem = machine.mem
    a_addr, b_addr = mem.put(a_km.array), mem.put(b_kn.array)
    out_shape = (problem.m, problem.n)
    c_addr = mem.put(c.array) if c is not None else mem.alloc(
        problem.m * problem.n * problem.itemsize)
    job = _job(problem, blocking, layout, (a_addr, b_addr, c_addr), alpha, beta)
    job_addr = mem.put(job)

    start = time.perf_counter()
    res = machine.run(program(KERNEL), entry=ENTRY, args=[job_addr], engine=engine)
    host_seconds = time.perf_counter() - start

    result = mem.get(c_addr, out_shape, dtype)
    if swapped:
        result = result.T
    config = machine.config
    stats = GemmStats(problem.n if swapped else problem.m, problem.m if swapped else problem.n,
                      k, np.dtype(dtype).name, blocking, swapped, res.kernel_cycles,
                      config.clock_hz, config.peak_gflops_cg, predicted, host_seconds, res)
    return result, stats


def _job(problem: Problem, blocking: Blocking, layout: dict, addresses, alpha, beta):
    """The int64 job record kernels/swgemm.s reads."""
    words = np.zeros(JOB_BYTES // 8, np.int64)

    def put(offset, value):
        words[offset // 8] = value

    es = problem.itemsize
    counts = gemm_model.block_counts(problem, blocking)
    for name, value in [("es", es), ("mb", blocking.mb), ("nb", blocking.nb),
                        ("kb", blocking.kb), ("nm", counts[0]), ("nn", counts[1]),
                        ("nk", counts[2]), ("has_beta", int(problem.has_beta)),
                        ("c_ldm", layout["c_ldm"])]:
        put(JOB[name], value)
    put(JOB["alpha"], np.float64(alpha).view(np.int64))
    put(JOB["beta"], np.float64(beta).view(np.int64))
    k = problem.k
    a_addr, b_addr, c_addr = addresses
    records = {
        # name: base, ld (elements), transposed, rows, cols, R, L, swap, raw slots, pack
        "A": (a_addr, problem.lda, problem.a_transposed, k, problem.m, blocking.kb,
              blocking.mb, 1, layout["a_raw"], layout["a_pack"]),
        "B": (b_addr, problem.ldb, problem.b_transposed, k, problem.n, blocking.kb,
              blocking.nb, 0, layout["b_raw"], layout["b_pack"]),
        "C": (c_addr, problem.n, False, problem.m, problem.n, blocking.mb, blocking.nb, 0,
              (layout["c_in"], layout["c_out"]), 0),
    }
    for name, (base, ld, trans, rows, cols, r, l, swap, raws, pack) in records.items():
        op = OPERAND_OFFSETS[name]
        for field, value in [("base", base), ("ldb", ld * es), ("trans", int(trans)),
                             ("rows", rows), ("cols", cols), ("r", r), ("l", l),
                             ("swap", swap), ("pack", pack), ("cur", 1)]:
            put(op + OPERAND[field], value)
        for slot, raw in enumerate(raws):
            put(op + SLOT_OFFSET + slot * SLOT_BYTES + SLOT_RAW, raw)
    return words
