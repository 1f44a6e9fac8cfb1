"""Communication-set selection on the CPEs (RedSync, thesis ch. 8.2.1; docs/redsync.md): the
elements of a float32 array whose key (|x|, x or -x) is above a threshold, for a threshold
found so that at least k and (binary search) at most `high` elements are above it.

Every step runs in ``kernels/dnn/select.s`` on the 64 CPEs of a core group, the data in
simulated main memory: the statistics (mean |x|, the largest key), the counts above a
threshold and the radix histograms are CPE reductions over register communication, the
(indices, values) a stream compaction. The host only chains the launches.

Selectors (``method``):

- ``"trimmed"``: Algorithm 11 as corrected: threshold mean + r (max - mean) with r = 0.8,
  0.6, ... until at least k are above, then radix select of the exact top k among those.
- ``"binary"``: Algorithm 12 as corrected: binary search of r in [0, 1] until
  k <= selected <= high (2k by default).
- ``"sampled"``: the binary search's threshold reused (``threshold=`` given): one count
  pass and the compaction; the caller reruns the search every few iterations.
- ``"radix"``: radix select of the exact k-th largest key, 8 bits per pass (the baseline).

Contract: the selected set is exactly the elements whose key is above ``Selection.threshold``
(an f32 threshold >= 0, so zeros are never selected); it has at least k elements unless
fewer than k keys are nonzero (then every nonzero key), and at most `high` for the binary
search when it converges (else the fewest above k it saw). Ties at the k-th key are all
taken by the radix selectors.

Core groups (``cgs=g``): the array is cut into g contiguous parts (32-byte aligned), and CG j
selects ceil(k n_j / n) of its n_j elements (high likewise) from its part alone, the g CGs
launched together; the contract then holds part by part (``Selection.cg_thresholds``), the
union of the parts' sets is the selection (at least k elements).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..runtime import Kernel, LaunchStats
from .common import DnnError, combined

KERNEL_FILES = ("dnn/select.s",)
METHODS = ("trimmed", "binary", "sampled", "radix")
SIGNS = {"abs": (0x7FFFFFFF, 0), "positive": (-1, 0), "negative": (-1, -0x80000000)}
CPES = 64
TRIM_START, TRIM_STEP = 0.8, 0.2      # Algorithm 11: r = 0.8, lowered by 0.2
BINARY_EPS = 2.0 ** -30               # the smallest interval of r the search splits
BINARY_MAX_ITER = 40                  # at most this many count passes


def _kernel(entry: str) -> Kernel:
    return Kernel(KERNEL_FILES, entry, "select_ldm_end")


@dataclass
class Selection:
    indices: np.ndarray       # int32, increasing
    values: np.ndarray        # float32, x[indices]
    threshold: np.float32     # selected: key > threshold (with cgs > 1: the smallest part's)
    nnz: int                  # len(indices)
    passes: int               # count / histogram passes over the data (statistics excluded)
    selected_sum: float       # the sum of the selected values (double, on the CPEs)
    stats: LaunchStats        # every launch's cycles (``stats.parts``)
    cg_starts: tuple = (0,)   # the first element of each core group's part
    cg_thresholds: tuple = () # each part's threshold (its selected: key > it)

    @property
    def mean(self) -> float:
        """The mean of the selected values: ASQ's one float."""
        return self.selected_sum / self.nnz if self.nnz else 0.0


def select(x, k: int, *, method: str = "binary", sign: str = "abs", high=None,
           threshold=None, machine=None, engine: str = "c", cgs: int = 1) -> Selection:
    """The communication set of `x` (float32, any shape, flattened): at least `k` elements
    by `method` (see the module), keys |x| (``sign="abs"``), x (``"positive"``: the largest)
    or -x (``"negative"``: the smallest, ASQ's alternate iterations), on `cgs` core groups."""
    from ...vm import Machine
    flat = _values(x)
    machine = machine or Machine()
    mark = machine.mem.mark()
    try:
        address = machine.mem.put(flat)
        return select_at(machine, address, flat.size, k, method=method, sign=sign, high=high,
                         threshold=threshold, engine=engine, cgs=cgs)
    finally:
        machine.mem.release(mark)


def select_at(machine, address: int, n: int, k: int, *, method: str = "binary",
              sign: str = "abs", high=None, threshold=None, engine: str = "c",
              cgs: int = 1) -> Selection:
    """`select` of the `n` float32 at `address` of `machine`'s main memory (finite values,
    the address 32-byte aligned)."""
    n = _count("n", n, 1)
    k = _count("k", k, 1)
    if k > n:
        raise DnnError(f"k must be at most the {n} elements, got {k}")
    if method not in METHODS:
        raise DnnError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    if sign not in SIGNS:
        raise DnnError(f"sign must be one of {', '.join(map(repr, SIGNS))}, got {sign!r}")
    high = 2 * k if high is None else _count("high", high, k)
    if (method == "sampled") != (threshold is not None):
        raise DnnError("threshold= is the sampled search's reused threshold: give it with "
                       f"method='sampled' and only then (method={method!r})")
    if address % 32:
        raise DnnError(f"address must be 32-byte aligned, got {address:#x}")
    cgs = _count("cgs", cgs, 1)
    if cgs > machine.config.num_cgs:
        raise DnnError(f"cgs must be at most the machine's {machine.config.num_cgs} core "
                       f"groups, got {cgs}")
    mark = machine.mem.mark()
    try:
        run = _Runner(machine, address, _parts(n, k, high, cgs), SIGNS[sign], engine)
        if method == "trimmed":
            return run.trimmed()
        if method == "radix":
            found = run.launch("sel_radix")
        elif method == "sampled":
            found = run.launch("sel_threshold", method=2, thr=_threshold_bits(threshold))
        else:
            found = run.launch("sel_threshold", method=1)
        return run.compact(found)
    finally:
        machine.mem.release(mark)


def _parts(n, k, high, cgs):
    """(first element, elements, k, high) of each core group's part: contiguous, 8 elements
    (32 bytes) aligned, k and high in proportion (rounded up)."""
    chunk = -(-n // cgs)
    chunk += -chunk % 8
    parts = []
    for start in range(0, n, chunk):
        size = min(n, start + chunk) - start
        share = min(size, -(-k * size // n))
        parts.append((start, size, share, max(share, -(-high * size // n))))
    return parts


class _Runner:
    """The launches of one selection, on buffers of one machine; each launch runs the same
    entry on every part's core group at once."""

    def __init__(self, machine, address, parts, masks, engine):
        self.machine, self.engine = machine, engine
        self.parts = parts
        self.masks = masks
        self.address = address
        self.launches = []
        self.passes = [0] * len(parts)
        result_bytes = _kernel("sel_threshold").symbol("RESULT_BYTES")
        self.buffers = [(machine.mem.alloc(8 * CPES), machine.mem.alloc(result_bytes))
                        for _ in parts]

    def launch(self, entry, per_part=None, **fields):
        """`entry` on every part (fields, and `per_part[j]`'s for part j); each part's result
        record."""
        kernel = _kernel(entry)
        record = kernel.record("J_", "JOB_BYTES")
        jobs = []
        for j, ((start, n, k, high), (counts, result)) in enumerate(zip(self.parts,
                                                                        self.buffers)):
            values = {"n": n, "x": self.address + 4 * start, "k": k, "high": high,
                      "and": self.masks[0], "xor": self.masks[1], "counts": counts,
                      "result": result, "start": TRIM_START, "step": TRIM_STEP,
                      "eps": BINARY_EPS, "max_iter": BINARY_MAX_ITER, **fields,
                      **(per_part[j] if per_part else {})}
            jobs.append([self.machine.mem.put(record.new(**values))])
        details = dict(entry=entry)
        if len(jobs) == 1:
            stats = kernel.launch(self.machine, jobs[0], flops=0, engine=self.engine,
                                  details=details)
        else:
            stats = kernel.launch_cgs(self.machine, jobs, flops=0, engine=self.engine,
                                      details=details)
        self.launches.append(stats)
        rec = kernel.record("R_", "RESULT_BYTES")
        results = []
        for j, (_, result) in enumerate(self.buffers):
            raw = self.machine.mem.get(result, (rec.nbytes // 8,), np.int64)
            results.append({name: raw[off // 8] for name, off in rec.offsets.items()})
            self.passes[j] += int(results[-1]["passes"])
        return results

    def compact(self, found):
        """The elements above each part's threshold in `found`, from the counts its launch
        left."""
        outputs = [self.outputs(int(result["nnz"])) for result in found]
        done = self.launch("sel_compact", [dict(thr=int(result["thr"]), out_idx=out_idx,
                                                out_val=out_val)
                                           for result, (out_idx, out_val) in zip(found, outputs)])
        return self.selection(done, outputs)

    def trimmed(self):
        """Trimmed top-k in one launch (``sel_trimmed``): Algorithm 11's threshold, then the
        exact top k among its survivors (at most all the part's elements: the scratch and
        outputs)."""
        outputs = [self.outputs(n) for _, n, _, _ in self.parts]
        scratch = [self.outputs(n) for _, n, _, _ in self.parts]
        done = self.launch("sel_trimmed", [
            dict(out_idx=out[0], out_val=out[1], scr_idx=scr[0], scr_val=scr[1])
            for out, scr in zip(outputs, scratch)], method=0)
        return self.selection(done, outputs)

    def outputs(self, elements):
        """Buffers for `elements` int32 indices and float32 values."""
        nbytes = 4 * max(elements, 1)
        return self.machine.mem.alloc(nbytes), self.machine.mem.alloc(nbytes)

    def selection(self, done, outputs):
        """The Selection the compacting launch's results `done` describe, the parts' sets
        joined in element order."""
        indices, values = [], []
        for (start, *_), result, (out_idx, out_val) in zip(self.parts, done, outputs):
            nnz = int(result["nnz"])
            indices.append(self.machine.mem.get(out_idx, (nnz,), np.int32) + np.int32(start))
            values.append(self.machine.mem.get(out_val, (nnz,), np.float32).copy())
        thresholds = tuple(np.int32(result["thr"]).view(np.float32) for result in done)
        selected_sum = sum(float(np.int64(result["selsum"]).view(np.float64))
                           for result in done)
        nnz = sum(len(part) for part in indices)
        return Selection(np.concatenate(indices), np.concatenate(values), min(thresholds), nnz,
                         max(self.passes), selected_sum,
                         combined(self.launches, launches=len(self.launches)),
                         tuple(start for start, *_ in self.parts), thresholds)


def sum_of_squares(x, *, machine=None, engine: str = "c"):
    """(the sum of the squares of `x`'s elements, Stats): each f32 squared in double (exact)
    and summed in double in a fixed order on the 64 CPEs (local gradient clipping's norm)."""
    from ...vm import Machine
    flat = _values(x)
    machine = machine or Machine()
    mark = machine.mem.mark()
    try:
        run = _Runner(machine, machine.mem.put(flat), _parts(flat.size, 1, 1, 1), SIGNS["abs"],
                      engine)
        (result,) = run.launch("sel_sumsq")
    finally:
        machine.mem.release(mark)
    return float(np.int64(result["sum"]).view(np.float64)), run.launches[0]


def _threshold_bits(threshold) -> int:
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or \
            not np.isfinite(threshold) or threshold < 0:
        raise DnnError(f"threshold must be a finite real >= 0, got {threshold!r}")
    return int(np.float32(threshold).view(np.int32))


def _count(name, value, low) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise DnnError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _values(x) -> np.ndarray:
    array = np.asarray(x)
    if array.dtype != np.float32:
        raise DnnError(f"x must be float32, got {array.dtype}")
    if array.size < 1:
        raise DnnError(f"x must have at least one element, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise DnnError("x must be finite (selection compares the bits of finite floats)")
    return np.ascontiguousarray(array).reshape(-1)


def scatter_add(dense, sets, alpha: float, *, machine=None, engine: str = "c"):
    """Decompression on the CPEs (the sparse-into-dense axpy, cuSPARSE axpyi): for each
    (indices, values) of `sets` in order, dense[indices] += alpha * values in binary32
    (rounded product, then rounded sum). `dense`: float32 array; each set's indices distinct
    and in range. Returns (the updated copy of dense, Stats of every launch)."""
    from ...vm import Machine
    dense = np.asarray(dense)
    if dense.dtype != np.float32 or dense.ndim != 1 or dense.size < 1:
        raise DnnError(f"dense must be a non-empty 1-D float32 array, got {dense.dtype} "
                       f"{dense.shape}")
    scale = float(np.float32(_real("alpha", alpha)))
    machine = machine or Machine()
    kernel = _kernel("sel_scatter_add")
    record = kernel.record("J_", "JOB_BYTES")
    mark = machine.mem.mark()
    parts = []
    try:
        dense_at = machine.mem.put(np.ascontiguousarray(dense))
        for number, (indices, values) in enumerate(sets):
            indices = np.asarray(indices)
            values = _values(values) if np.size(values) else np.zeros(0, np.float32)
            if indices.shape != values.shape or indices.ndim != 1 or \
                    not np.issubdtype(indices.dtype, np.integer):
                raise DnnError(f"sets[{number}]: indices must be integers of the values' 1-D "
                               f"shape, got {indices.dtype} {indices.shape} and {values.shape}")
            if not len(indices):
                continue
            if indices.min() < 0 or indices.max() >= dense.size or \
                    len(np.unique(indices)) != len(indices):
                raise DnnError(f"sets[{number}]: indices must be distinct and in "
                               f"0..{dense.size - 1}")
            job = record.new(n=len(indices), x=machine.mem.put(values),
                             idx=machine.mem.put(indices.astype(np.int32)), dense=dense_at,
                             alpha=scale)
            parts.append(kernel.launch(machine, [machine.mem.put(job)], flops=2 * len(indices),
                                       engine=engine))
        out = machine.mem.get(dense_at, dense.shape, np.float32).copy()
    finally:
        machine.mem.release(mark)
    if not parts:
        raise DnnError("sets must hold at least one element")
    return out, combined(parts, launches=len(parts))


def _real(name, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not np.isfinite(value):
        raise DnnError(f"{name} must be a finite real number, got {value!r}")
    return float(value)
