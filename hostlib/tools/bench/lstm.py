"""`swsim bench lstm`: the tensorized LSTM forward (thesis Algorithm 6) against the
cuDNN/Appleyard-style baseline over the 72 cases of Listing 5.2 (T x B x H, input size = H),
float32, one core group: the speed-up per case, its mean and maximum, and the split of each
algorithm's time between GEMM and element-wise work (Figs. 5.15/5.16).

Time of a run = the sum over its launches of kernel cycles + the spawn (``spawn_cycles``): the
launches run one after another, and launching is part of what fusion saves (§5.2 (a)).

Sampling: the time steps are identical work, so neither algorithm is simulated for all T.
- tensorized: the time-loop kernel runs for 2 and for 3 steps (the first two are the warm-up:
  h0/c0/R in, the first prefetch overlapping a step); loop(T) = loop(2) + (T - 2) (loop(3) -
  loop(2)). The
  hoisted swGEMM (T Bp x 4Hp x H) runs with the blocking and orientation swGEMM chooses for
  the full size, on 2 and 3 of its blocks of rows (the first fills the double buffer);
  gemm(T) = g(2) + (blocks - 2) (g(3) - g(2)).
- baseline: two steps (8 swGEMMs + 1 cell launch each); total = step 0 + (T - 1) step 1.
The extrapolation is checked against full runs of both algorithms on VALIDATION cases and the
worst error printed. Every sampled run's values are checked against a numpy reference.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from ....vm import Machine
from ...blas import gemm, gemm_model
from ...dnn import lstm

STEPS = (64, 128, 256, 512, 1024, 2048)
BATCHES = (64, 96, 128)
HIDDEN = (64, 128, 256, 384)
CASES = [(t, b, h) for t in STEPS for b in BATCHES for h in HIDDEN]    # Listing 5.2
QUICK_CASES = [(64, 64, 64), (256, 96, 128), (1024, 64, 256), (2048, 128, 384)]
VALIDATION = [(64, 64, 64), (64, 96, 128), (128, 64, 64)]
QUICK_VALIDATION = [(64, 64, 64)]
DTYPE = np.float32
TOLERANCE = 2e-5
# Steps the time-loop kernel is simulated for: two of warm-up (the first step has no prefetch
# in flight, the second is the first to overlap one), then one sampled step.
LOOP_SAMPLES = (2, 3)
# Row blocks the hoisted swGEMM is simulated for: its first block fills the double buffer.
GEMM_SAMPLES = (2, 3)


def _launch(stats) -> int:
    return sum(p.kernel_cycles + p.run.config.spawn_cycles
               for p in stats.details.get("parts", [stats]))


def _arrays(rng, steps, batch, hidden):
    inputs = hidden
    shapes = [(steps, batch, inputs), (batch, hidden), (batch, hidden), (4 * hidden, inputs),
              (4 * hidden, hidden), (4 * hidden,)]
    scale = 1 / math.sqrt(hidden)      # PyTorch's initialisation range: gates stay moderate
    return [(rng.uniform(-1, 1, s) * (scale if k >= 3 else 1)).astype(DTYPE)
            for k, s in enumerate(shapes)]


def _reference(x, h0, c0, W, R, b):
    hidden = R.shape[1]
    h, c, ys = h0.astype(np.float64), c0.astype(np.float64), []
    for x_t in x.astype(np.float64):
        z = x_t @ W.T.astype(np.float64) + h @ R.T.astype(np.float64) + b
        i, f, o = (1 / (1 + np.exp(-z[:, k * hidden:(k + 1) * hidden])) for k in (0, 1, 3))
        c = f * c + i * np.tanh(z[:, 2 * hidden:3 * hidden])
        h = o * np.tanh(c)
        ys.append(h)
    return np.stack(ys), c


def _check(name, got, want):
    err = float(np.max(np.abs(got - want)))
    if not err <= TOLERANCE:
        raise RuntimeError(f"{name}: wrong values on the VM (error {err:.3g})")


@dataclass
class Estimate:
    """Cycles of one algorithm on one case (spawns included) and its GEMM / element-wise parts."""
    cycles: float
    gemm: float
    elementwise: float


@dataclass
class Row:
    steps: int
    batch: int
    hidden: int
    tensorized: Estimate
    baseline: Estimate
    plan: object
    host_seconds: float

    @property
    def speedup(self) -> float:
        return self.baseline.cycles / self.tensorized.cycles


def _linear(first, second, n, at=1):
    """first + (n - at) (second - first): `first` measured after `at` units, `second` after
    one more, extended to n units."""
    return first + (n - at) * (second - first)


def hoisted_gemm(rows: int, n: int, k: int, engine) -> float:
    """Cycles (spawn included) of the hoisted GEMM x (rows x k) W_fused^T (W_fused n x k) at
    `rows` rows, sampled on GEMM_SAMPLES blocks of rows with the full size's blocking and
    orientation."""
    config = Machine().config
    itemsize = np.dtype(DTYPE).itemsize
    choices = []
    for swapped in (False, True):   # as swGEMM chooses for gemm(x, w, trans_b=True)
        m_kernel, n_kernel = (n, rows) if swapped else (rows, n)
        problem = gemm_model.Problem(m=m_kernel, n=n_kernel, k=k, itemsize=itemsize,
                                     a_transposed=True, b_transposed=True, has_beta=False,
                                     lda=k, ldb=k)
        blocking = gemm_model.choose(problem, config)
        choices.append((gemm_model.predict(problem, blocking, config), swapped, blocking))
    _, swapped, blocking = min(choices, key=lambda c: c[0])
    block_rows = 8 * (blocking.nb if swapped else blocking.mb)
    blocks = -(-rows // block_rows)
    if blocks <= GEMM_SAMPLES[-1]:
        return _gemm_samples((rows,), n, k, tuple(blocking), swapped, engine)[0]
    cycles = _gemm_samples(tuple(s * block_rows for s in GEMM_SAMPLES), n, k,
                           tuple(blocking), swapped, engine)
    return _linear(cycles[0], cycles[1], blocks, GEMM_SAMPLES[0])


@functools.lru_cache(maxsize=None)
def _gemm_samples(samples, n, k, blocking, swapped, engine):
    rng = np.random.default_rng(n * k)
    w_fused = rng.uniform(-1, 1, (n, k)).astype(DTYPE)
    cycles = []
    for m in samples:
        x = rng.uniform(-1, 1, (m, k)).astype(DTYPE)
        c = np.zeros((m, n), DTYPE, order="F" if swapped else "C")
        out, stats = gemm(x, w_fused, c, beta=0.0, trans_b=True, blocking=blocking,
                          engine=engine)
        _check("hoisted GEMM", out, x.astype(np.float64) @ w_fused.T.astype(np.float64))
        cycles.append(_launch(stats))
    return tuple(cycles)


@functools.lru_cache(maxsize=None)
def _loop_samples(batch, hidden, engine):
    """The time-loop kernel after LOOP_SAMPLES steps: (plan, [(cycles, gemm, element-wise)]);
    the same for every T."""
    rng = np.random.default_rng(batch * hidden)
    x, h0, c0, W, R, b = _arrays(rng, LOOP_SAMPLES[-1], batch, hidden)
    p = lstm.plan(batch, hidden, np.dtype(DTYPE).itemsize, Machine().config)
    if p is None:
        return None, None
    projection, _ = lstm.hoist(x, W, hidden, p, Machine(), engine)
    loops = []
    for n in LOOP_SAMPLES:
        (y, c_n), stats = lstm.time_loop(projection[:n * p.bp], h0, c0, R, b, p, Machine(),
                                         engine)
        ry, rc = _reference(x[:n], h0, c0, W, R, b)
        _check("tensorized y", y, ry)
        _check("tensorized c_T", c_n, rc)
        loops.append((_launch(stats), stats.times["gemm"][0], stats.times["elem"][0]))
    return p, loops


def tensorized(steps, batch, hidden, engine) -> tuple:
    """Estimate of the tensorized forward: (Estimate, plan), (None, None) without a plan."""
    p, loops = _loop_samples(batch, hidden, engine)
    if p is None:
        return None, None
    gemm_in = hoisted_gemm(steps * p.bp, 4 * p.hp, hidden, engine)
    cycles, loop_gemm, elem = (_linear(a, b_, steps, LOOP_SAMPLES[0])
                               for a, b_ in zip(*loops))
    return Estimate(gemm_in + cycles, gemm_in + loop_gemm, elem), p


@functools.lru_cache(maxsize=None)
def _baseline_samples(batch, hidden, engine):
    """(cycles, GEMM, element-wise) of the baseline after 1 and 2 steps."""
    rng = np.random.default_rng(batch * hidden)
    x, h0, c0, W, R, b = _arrays(rng, 2, batch, hidden)
    (y, _, c_n), stats = lstm.lstm_forward(x, h0, c0, W, R, b, algo="baseline", engine=engine)
    ry, rc = _reference(x, h0, c0, W, R, b)
    _check("baseline y", y, ry)
    per_step = len(stats.parts) // 2
    totals = []
    for launches in (stats.parts[:per_step], stats.parts):       # after 1 and 2 steps
        gemm_part = sum(_launch(p) for p in launches if "blocking" in p.details)
        total = sum(_launch(p) for p in launches)
        totals.append((total, gemm_part, total - gemm_part))
    return totals


def baseline(steps, batch, hidden, engine) -> Estimate:
    totals = _baseline_samples(batch, hidden, engine)
    return Estimate(*(_linear(a, b_, steps) for a, b_ in zip(*totals)))


def measure(case, engine="c") -> Row:
    """The estimates of both algorithms on (T, B, H); the samples of the time loop and of the
    baseline do not depend on T and are simulated once per (B, H)."""
    steps, batch, hidden = case
    start = time.perf_counter()
    tens, p = tensorized(steps, batch, hidden, engine)
    base = baseline(steps, batch, hidden, engine)
    return Row(steps, batch, hidden, tens if tens is not None else base, base, p,
               time.perf_counter() - start)


def validate(case, engine="c", seed=0) -> tuple:
    """Full runs of both algorithms on `case` against their estimates: (tensorized error,
    baseline error), relative."""
    steps, batch, hidden = case
    row = measure(case, engine)
    x, h0, c0, W, R, b = _arrays(np.random.default_rng(seed + 1), steps, batch, hidden)
    errors = []
    for algo, estimate in (("tensorized", row.tensorized), ("baseline", row.baseline)):
        (y, _, _), stats = lstm.lstm_forward(x, h0, c0, W, R, b, algo=algo, engine=engine)
        _check(f"{algo} full run", y, _reference(x, h0, c0, W, R, b)[0])
        errors.append(estimate.cycles / _launch(stats) - 1)
    return tuple(errors)


def run(quick=False, engine="c", progress=None):
    """Every case, then the validation runs; returns (rows, [(case, errors)])."""
    cases = QUICK_CASES if quick else CASES
    checks = QUICK_VALIDATION if quick else VALIDATION
    rows, validation = [], []
    for case in cases:
        if progress:
            progress("T=%d B=%d H=%d" % case)
        rows.append(measure(case, engine))
    for case in checks:
        if progress:
            progress("validate T=%d B=%d H=%d" % case)
        validation.append((case, validate(case, engine)))
    return rows, validation


def _share(e: Estimate):
    return f"{100 * e.gemm / e.cycles:5.1f}% {100 * e.elementwise / e.cycles:5.1f}%"


def format_report(rows, validation) -> str:
    lines = ["T     B    H    | tensorized cycles  GEMM  elem  | baseline cycles   GEMM  "
             "elem  | speed-up | R^T      I"]
    for r in rows:
        p = r.plan
        plan = ("-" if p is None else
                f"{'resident' if p.resident else f'kc={p.kc}':8s} {'pre' if p.prefetch else 'in C'}")
        lines.append(f"{r.steps:<5d} {r.batch:<4d} {r.hidden:<4d} | {r.tensorized.cycles:15,.0f} "
                     f"{_share(r.tensorized)} | {r.baseline.cycles:15,.0f} {_share(r.baseline)}"
                     f" | {r.speedup:7.2f}x | {plan}")
    speedups = np.array([r.speedup for r in rows])
    best = rows[int(np.argmax(speedups))]
    lines.append(f"{len(rows)} cases: speed-up mean {speedups.mean():.2f}x, min "
                 f"{speedups.min():.2f}x, max {speedups.max():.2f}x (T={best.steps} "
                 f"B={best.batch} H={best.hidden}); faster in {int((speedups > 1).sum())} of "
                 f"{len(rows)} (thesis: all 72, mean ~2.6x, max 6.2x at small H)")
    for hidden in sorted({r.hidden for r in rows}):
        sel = [r for r in rows if r.hidden == hidden]
        lines.append(
            f"H={hidden:<4d}: speed-up mean {np.mean([r.speedup for r in sel]):.2f}x; "
            f"element-wise share tensorized "
            f"{100 * np.mean([r.tensorized.elementwise / r.tensorized.cycles for r in sel]):.1f}%"
            f", baseline "
            f"{100 * np.mean([r.baseline.elementwise / r.baseline.cycles for r in sel]):.1f}%; "
            f"GEMM cycles baseline / tensorized "
            f"{np.mean([r.baseline.gemm / r.tensorized.gemm for r in sel]):.2f}x")
    worst = max((abs(e) for _, errors in validation for e in errors), default=0.0)
    for case, (t_err, b_err) in validation:
        lines.append("validation T=%d B=%d H=%d (full runs): " % case +
                     f"tensorized {100 * t_err:+.2f}%, baseline {100 * b_err:+.2f}%")
    lines.append(f"worst extrapolation error {100 * worst:.2f}%; host time "
                 f"{sum(r.host_seconds for r in rows):.0f} s for the cases")
    return "\n".join(lines)
