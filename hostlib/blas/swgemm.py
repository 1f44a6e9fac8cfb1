"""swGEMM: ``gemm(A, B, C, alpha, beta, trans_a, trans_b)`` on the VM (thesis §4.2).

The host only prepares memory: it copies the operands into simulated main memory as they are
(row- or column-major, no padding, no transposed copy), chooses the blocking with the
performance model (``gemm_model``), writes a job record and spawns ``kernels/gemm/swgemm.s`` once.
Every flop, the alpha/beta scaling, transpositions, f32<->f64 conversion and zero padding run
on the CPEs. docs/gemm.md ("swGEMM") describes the kernel.

The kernel computes C' (M' x N', row-major in memory) = alpha A' B' + beta C' with the
primitive's k-major operand layouts. A column-major C is handled as the row-major C^T =
op(B)^T op(A)^T; without C the orientation with the smaller predicted time is used.

``gemm_in_memory`` is the same on operands already in simulated memory (``InMemory``: an
address, a shape and a leading dimension), for a caller whose previous launch left them
there (the convolution's col): nothing is copied, the result stays in memory.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...vm import HostError, Machine
from ..runtime import host_operator, numeric_array
from . import gemm_model
from .gemm_model import KERNEL, Blocking, Problem


# The longest run gemm() starts unless told otherwise (max_cycles=): the model's predicted
# kernel cycles. swGEMM simulates 0.5-2.5 x 10^5 cycles per host second on this project's
# shared 2-core host, loaded to quiet (HOST_CYCLES_PER_SECOND, docs/gemm.md "Limits"), so
# 2.5 x 10^8 cycles (0.17 s of simulated time) are about 17 min to 1.4 h of host time.
MAX_CYCLES = 250_000_000
HOST_CYCLES_PER_SECOND = (0.5e5, 2.5e5)


@dataclass(frozen=True)
class InMemory:
    """A row-major matrix in simulated main memory: `shape` = (rows, cols) at `address`,
    `ld` (>= cols) elements from one row to the next (default: cols)."""
    address: int
    shape: tuple
    dtype: np.dtype
    ld: Optional[int] = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def lead(self) -> int:
        return self.shape[1] if self.ld is None else self.ld


@dataclass
class _Stored:
    """A logical matrix (rows x cols) as it lies in memory: `array` (a C-contiguous numpy
    array to be copied in, or an ``InMemory``) is either the matrix (natural) or its
    transpose."""
    array: object
    transposed: bool

    @property
    def shape(self):
        return self.array.shape[::-1] if self.transposed else self.array.shape

    @property
    def T(self) -> "_Stored":
        return _Stored(self.array, not self.transposed)

    @property
    def in_memory(self) -> bool:
        return isinstance(self.array, InMemory)

    @property
    def lead(self) -> Optional[int]:
        """Elements from one memory row to the next: an ``InMemory`` matrix's own; None for
        a numpy array, which swGEMM places (``gemm_model.leading_dims``)."""
        return self.array.lead if self.in_memory else None

    def address(self, mem, ld: int, panels: Optional[gemm_model.Panels] = None) -> int:
        """Where the matrix lies, placing a numpy array first with `ld` elements per row (its
        row padding zero), or in `panels` of `ld` columns (``gemm_model.panels``)."""
        if self.in_memory:
            return self.array.address
        array = self.array
        if panels is None and ld == array.shape[1]:
            return mem.put(array)
        rows, cols = array.shape
        count, stride = panels or (1, rows * ld)
        padded = np.zeros((rows, count * ld), array.dtype)
        padded[:, :cols] = array
        placed = np.zeros((count, stride), array.dtype)
        placed[:, :rows * ld] = padded.reshape(rows, count, ld).transpose(1, 0, 2).reshape(
            count, rows * ld)
        return mem.put(placed)


def _stored(view) -> _Stored:
    """How `view` can be placed in memory without reordering it: as it is when C-contiguous,
    as its transpose when F-contiguous; anything else is made contiguous first. An
    ``InMemory`` matrix is where it is."""
    if isinstance(view, InMemory):
        return _Stored(view, False)
    if view.flags.c_contiguous:
        return _Stored(view, False)
    if view.flags.f_contiguous:
        return _Stored(view.T, True)
    return _Stored(np.ascontiguousarray(view), False)


class GemmError(ArgumentError):
    """A gemm() call with operands or options it cannot compute with."""


def _op(X, trans) -> _Stored:
    """op(X) as stored: a numpy view is transposed before placing (see ``_stored``)."""
    if isinstance(X, InMemory):
        return _stored(X).T if trans else _stored(X)
    return _stored(X.T if trans else X)


def _check_scalars(alpha, beta, trans_a, trans_b) -> None:
    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value):
            raise GemmError(f"{name} must be a finite real number, got {value!r}")
    for name, value in (("trans_a", trans_a), ("trans_b", trans_b)):
        if not isinstance(value, (bool, np.bool_)):
            raise GemmError(f"{name} must be True or False, got {value!r}")


def _operands(A, B, C, trans_a, trans_b):
    dtype = A.dtype
    if dtype not in (np.float32, np.float64) or B.dtype != dtype:
        raise GemmError(f"A and B must both be float32 or both float64, got {A.dtype} and "
                         f"{B.dtype}")
    if A.ndim != 2 or B.ndim != 2:
        raise GemmError("A and B must be 2-D")
    op_a, op_b = _op(A, trans_a), _op(B, trans_b)
    (m, k), (k2, n) = op_a.shape, op_b.shape
    if k != k2:
        raise GemmError(f"op(A) is {m} x {k} but op(B) is {k2} x {n}")
    if C is not None:
        if C.dtype != dtype or C.shape != (m, n):
            raise GemmError(f"C must be {m} x {n} {dtype}, got {C.shape} {C.dtype}")
    for name, array in (("A", A), ("B", B), ("C", C)):
        if array is not None and 0 in array.shape:
            raise GemmError(f"{name} has a zero-size dimension: shape {array.shape}")
    return dtype, op_a, op_b, None if C is None else _stored(C)


def _problem(a_km: _Stored, b_kn: _Stored, c: Optional[_Stored], m, n, k, dtype, has_beta,
             config) -> Problem:
    """The kernel's problem. A and B keep the rows of the arrays given (their K columns even
    when alpha = 0 makes the product's K 0); C's leading dimension is left to
    ``gemm_model.leading_dims`` unless it is an ``InMemory`` matrix (or, for an empty
    product, the arrays' own rows line-padded). Operands in memory (``gemm_in_memory``) keep
    the result row-major in memory."""
    def lead(stored):
        if stored.lead is not None or k > 0:
            return stored.lead
        return gemm_model.line_padded(stored.array.shape[1], np.dtype(dtype).itemsize, config)

    return Problem(m=m, n=n, k=k, itemsize=np.dtype(dtype).itemsize,
                   a_transposed=a_km.transposed, b_transposed=b_kn.transposed,
                   has_beta=has_beta, lda=lead(a_km), ldb=lead(b_kn),
                   ldc=c.lead if c is not None else None, row_major_result=a_km.in_memory)


@host_operator
def gemm(A, B, C=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, *, engine="c",
         blocking=None, machine=None, progress=None, max_cycles=MAX_CYCLES):
    """alpha op(A) op(B) + beta C on the VM; returns (result, Stats).

    A, B (and C) are 2-D float32 or float64 numpy arrays, row- or column-major; op(X) is X.T
    when trans_x. Without C the result is alpha op(A) op(B). The result has C's layout (or the
    one the model found faster when C is None). `blocking` = (Mb, Nb, Kb) per CPE overrides the
    model's choice (Mb a multiple of 4, Nb of 16). The blocking is chosen for `machine`'s
    configuration (default: a new ``Machine()``). The Stats' details: m, n, k, dtype,
    blocking, swapped (computed as C^T = op(B)^T op(A)^T), predicted_cycles. ``progress(cycle)``
    is called now and then during the simulation (``Machine.run``'s), a sign of life for
    large problems. A call whose predicted cycles exceed ``max_cycles`` (None: no limit), or
    whose operands do not fit in the simulated memory left, is refused with a HostError before
    anything is allocated.
    """
    A, B = numeric_array("A", A), numeric_array("B", B)
    C = None if C is None else numeric_array("C", C)
    machine = machine or Machine()
    result, stats, panels = _gemm(A, B, C, alpha, beta, trans_a, trans_b, engine, blocking,
                                  machine, progress, max_cycles)
    rows, cols = result.shape
    count, stride = panels or (1, rows * result.lead)
    placed = machine.mem.get(result.address, (count, stride), result.dtype)
    array = np.ascontiguousarray(placed[:, :rows * result.lead].reshape(
        count, rows, result.lead).transpose(1, 0, 2).reshape(rows, -1)[:, :cols])
    return (array.T if stats.swapped else array), stats


def gemm_in_memory(A: InMemory, B: InMemory, C: Optional[InMemory] = None, alpha=1.0,
                   beta=0.0, trans_a=False, trans_b=False, *, engine="c", blocking=None,
                   machine=None, progress=None, max_cycles=MAX_CYCLES):
    """``gemm`` on matrices already in `machine`'s memory (``InMemory``, each with its
    leading dimension): the same kernel run, with nothing copied in or out. With C the
    result overwrites it; without, it goes to new memory. Returns (the result as an
    ``InMemory`` -- its transpose, row-major, when ``stats.swapped`` --, Stats). ``max_cycles``
    as ``gemm``'s."""
    for name, operand in (("A", A), ("B", B), ("C", C)):
        if operand is not None and not isinstance(operand, InMemory):
            raise GemmError(f"{name} must be an InMemory matrix, got {type(operand).__name__}")
        if operand is not None and operand.lead < operand.shape[1]:
            raise GemmError(f"{name}'s ld must be at least its {operand.shape[1]} columns, "
                            f"got {operand.ld}")
    if machine is None:
        raise GemmError("gemm_in_memory needs the machine whose memory holds the operands")
    result, stats, _ = _gemm(A, B, C, alpha, beta, trans_a, trans_b, engine, blocking,
                             machine, progress, max_cycles)
    return result, stats


def _gemm(A, B, C, alpha, beta, trans_a, trans_b, engine, blocking, machine, progress,
          max_cycles):
    """Plan, check and run one swgemm launch; returns (C' as an ``InMemory`` of its panels'
    width, Stats, C's ``gemm_model.Panels`` or None)."""
    if max_cycles is not None and (isinstance(max_cycles, bool)
                                   or not isinstance(max_cycles, numbers.Integral)
                                   or max_cycles < 1):
        raise GemmError(f"max_cycles must be None or an int >= 1, got {max_cycles!r}")
    predicted, swapped, a_km, b_kn, c, problem, chosen, k = _plan(
        A, B, C, alpha, beta, trans_a, trans_b, blocking, machine.config)
    m, n = (problem.n, problem.m) if swapped else (problem.m, problem.n)
    _check_limits(problem, chosen, predicted, (a_km, b_kn, c), machine, max_cycles,
                  f"gemm of {m} x {n} x {k} {np.dtype(A.dtype).name}")
    return _run(problem, chosen, a_km, b_kn, c, alpha, beta, np.dtype(A.dtype), engine,
                machine, swapped, predicted, k, progress)


def gemm_plan(A, B, C=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, *,
              config, blocking=None):
    """What ``gemm`` / ``gemm_in_memory`` would run for these operands (numpy arrays or
    ``InMemory``, only their shapes and layouts matter): (the model's predicted cycles, the
    kernel's Problem, the Blocking, swapped)."""
    predicted, swapped, _, _, _, problem, chosen, _ = _plan(A, B, C, alpha, beta, trans_a,
                                                            trans_b, blocking, config)
    return predicted, problem, chosen, swapped


def _plan(A, B, C, alpha, beta, trans_a, trans_b, blocking, config):
    _check_scalars(alpha, beta, trans_a, trans_b)
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
    choices = []
    for swapped, a_km, b_kn, c in plans:
        mm, nn = (n, m) if swapped else (m, n)
        problem = _problem(a_km, b_kn, c, mm, nn, k_product, dtype, has_beta, config)
        chosen = (_blocking(blocking) if blocking is not None
                  else gemm_model.choose(problem, config))
        choices.append((gemm_model.predict(problem, chosen, config), swapped, a_km, b_kn, c,
                        problem, chosen))
    return (*min(choices, key=lambda c: c[0]), k)


def _blocking(blocking) -> Blocking:
    """`blocking` as given to gemm: (Mb, Nb, Kb), three ints (their values are checked with
    the problem's)."""
    values = () if isinstance(blocking, str) else blocking
    try:
        values = tuple(values)
    except TypeError:
        values = ()
    if len(values) != 3 or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                   for v in values):
        raise ArgumentTypeError(f"blocking must be (Mb, Nb, Kb), three ints, got {blocking!r}")
    return Blocking(*map(int, values))


def gemm_job(A: InMemory, B: InMemory, C: InMemory, alpha=1.0, beta=0.0, trans_a=False,
             trans_b=False, *, config, blocking=None):
    """The job record ``gemm_in_memory`` would place for C = alpha op(A) op(B) + beta C on
    row-major operands, for a caller that keeps it and moves operands by patching it:
    (int64 words, {"A", "B", "C": index of the word holding that operand's address}, flops).
    C is given so that the result is C itself, never its transpose."""
    for name, operand in (("A", A), ("B", B), ("C", C)):
        if not isinstance(operand, InMemory):
            raise GemmError(f"{name} must be an InMemory matrix, got {type(operand).__name__}")
    _, _, a_km, b_kn, c, problem, chosen, k = _plan(A, B, C, alpha, beta, trans_a, trans_b,
                                                    blocking, config)
    layout = gemm_model.ldm_layout(problem, chosen, config)
    if layout is None:
        raise GemmError(f"blocking {chosen} does not fit in LDM for {problem}")
    addresses = (a_km.array.address, b_kn.array.address, c.array.address)
    words = _job(problem, chosen, layout, addresses, alpha, beta, config)
    job, operand = KERNEL.record("J_", "JOB_BYTES"), KERNEL.record("O_", "OP_BYTES")
    given = {id(A): "A", id(B): "B", id(C): "C"}
    fields = {given[id(stored.array)]: (job.offset(f"op_{op}") + operand.offset("base")) // 8
              for op, stored in (("a", a_km), ("b", b_kn), ("c", c))}
    return words, fields, 2 * problem.m * problem.n * k


def _placed_bytes(problem: Problem, blocking: Blocking, operands, config) -> int:
    """New simulated main memory that ``_run`` takes: the numpy operands it places (an
    ``InMemory`` one is there already), C unless it is in memory, and the job."""
    a_km, b_kn, c = operands
    rows = (a_km.array.shape[0], b_kn.array.shape[0], problem.m)
    placed = (not a_km.in_memory, not b_kn.in_memory, c is None or not c.in_memory)
    align = config.mem_align
    elements = (r * ld if panels is None else panels.count * panels.stride
                for r, ld, panels in zip(rows, gemm_model.leading_dims(problem, config, blocking),
                                         gemm_model.panels(problem, config, blocking)))
    return sum(-(-count * problem.itemsize // align) * align
               for count, new in zip(elements, placed)
               if new) + KERNEL.record("J_", "JOB_BYTES").nbytes


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _check_limits(problem, blocking, predicted, operands, machine, max_cycles,
                  asked: str) -> None:
    """Refuse a run longer than `max_cycles` predicted cycles, or one whose operands do not fit
    in the simulated memory left (config.mem_limit), before anything is allocated."""
    mem, config = machine.mem, machine.config
    needed = _placed_bytes(problem, blocking, operands, config)
    left = mem.available
    if needed > left:
        raise HostError(f"{asked}: the operands need {needed} bytes of simulated main memory, "
                        f"{left} are left of config.mem_limit={mem.limit}")
    if max_cycles is not None and predicted > max_cycles:
        slow, fast = (predicted / rate for rate in HOST_CYCLES_PER_SECOND)
        raise HostError(
            f"{asked}: the model predicts {predicted:.3g} simulated cycles "
            f"({predicted / config.clock_hz:.3g} s simulated; about {_hours(fast)} to "
            f"{_hours(slow)} of host time at {HOST_CYCLES_PER_SECOND[0]:.1e}-"
            f"{HOST_CYCLES_PER_SECOND[1]:.1e} cycles per host second) and {needed} bytes of "
            f"simulated memory: more than max_cycles={max_cycles} (default "
            "swsim.hostlib.blas.swgemm.MAX_CYCLES); pass max_cycles=None or a larger limit "
            "to run it")


def _run(problem, blocking, a_km, b_kn, c, alpha, beta, dtype, engine, machine, swapped,
         predicted, k, progress):
    layout = gemm_model.ldm_layout(problem, blocking, machine.config)
    if layout is None:
        raise GemmError(f"blocking {blocking} does not fit in LDM for {problem}")
    mem, config = machine.mem, machine.config
    lda, ldb, ldc = gemm_model.leading_dims(problem, config, blocking)
    a_panels, b_panels, c_panels = gemm_model.panels(problem, config, blocking)
    a_addr, b_addr = a_km.address(mem, lda, a_panels), b_kn.address(mem, ldb, b_panels)
    c_elements = (problem.m * ldc if c_panels is None else c_panels.count * c_panels.stride)
    c_addr = c.address(mem, ldc, c_panels) if c is not None else mem.alloc(
        c_elements * problem.itemsize)
    job = _job(problem, blocking, layout, (a_addr, b_addr, c_addr), alpha, beta, config)
    (m, n) = (problem.n, problem.m) if swapped else (problem.m, problem.n)
    stats = KERNEL.launch(machine, [mem.put(job)], flops=2 * m * n * k,
                          engine=engine,
                          details=dict(m=m, n=n, k=k, dtype=np.dtype(dtype).name,
                                       blocking=blocking, swapped=swapped,
                                       predicted_cycles=predicted),
                          progress=progress)
    return InMemory(c_addr, (problem.m, problem.n), dtype, ldc), stats, c_panels


def _job(problem: Problem, blocking: Blocking, layout: dict, addresses, alpha, beta, config):
    """The int64 job record kernels/gemm/swgemm.s reads: its J_* fields, the operand
    records (O_*) and their slots (SL_*)."""
    job = KERNEL.record("J_", "JOB_BYTES")
    operand, slot = KERNEL.record("O_", "OP_BYTES"), KERNEL.record("SL_", "SLOT_BYTES")
    es = problem.itemsize
    n_m, n_n, n_k = gemm_model.block_counts(problem, blocking, config)
    words = job.new(es=es, mb=blocking.mb, nb=blocking.nb, kb=blocking.kb, nm=n_m, nn=n_n,
                    nk=n_k, alpha=float(alpha), beta=float(beta),
                    has_beta=int(problem.has_beta), cldm=layout["c_ldm"])
    k = problem.k
    a_addr, b_addr, c_addr = addresses
    lda, ldb, ldc = gemm_model.leading_dims(problem, config, blocking)
    a_mode, b_mode, c_mode = gemm_model.sharing(problem, blocking, config)
    panel_strides = [0 if panels is None else panels.stride * es
                     for panels in gemm_model.panels(problem, config, blocking)]
    operands = {
        # name: base, ld (elements), transposed, rows, cols, R, L, swap, raw slots, pack,
        # grain, DMA mode
        "a": (a_addr, lda, problem.a_transposed, k, problem.m, blocking.kb,
              blocking.mb, 1, layout["a_raw"], layout["a_pack"], 1, a_mode),
        "b": (b_addr, ldb, problem.b_transposed, k, problem.n, blocking.kb,
              blocking.nb, 0, layout["b_raw"], layout["b_pack"], 1, b_mode),
        "c": (c_addr, ldc, False, problem.m, problem.n,
              blocking.mb, blocking.nb, 0, (layout["c_in"], layout["c_out"]), 0,
              gemm_model.c_grain(problem, blocking, config), c_mode),
    }
    for (name, (base, ld, trans, rows, cols, r, l, swap, raws, pack, grain,
                mode)), panel in zip(operands.items(), panel_strides):
        if mode != gemm_model.DMA_PE:   # a shared row is whole: its zero padding is data
            width = ld * max(1, -(-(rows if trans else cols) // ld))
            rows, cols = (width, cols) if trans else (rows, width)
        op = job.offset(f"op_{name}")
        operand.write(words, op, base=base, ldb=ld * es, trans=int(trans), rows=rows,
                      cols=cols, r=r, l=l, swap=swap, pack=pack, grain=grain, cur=1,
                      shared=mode, panel=panel)
        for index, raw in enumerate(raws):
            slot.write(words, op + operand.offset("slot") + index * slot.nbytes, raw=raw)
    return words
