"""`swsim bench lstm`: the tensorized LSTM forward (thesis Algorithm 6) against the
cuDNN/Appleyard-style baseline over the 72 cases of Listing 5.2 (T x B x H, input size = H),
float32, one core group: the speed-up per case, its mean and maximum, and the split of each
algorithm's time between GEMM and element-wise work (Figs. 5.15/5.16).

Time of a run = the sum over its launches of kernel cycles + the spawn; the time steps are
identical work, so neither algorithm is simulated for all T: ``hostlib.dnn.lstm_model`` (the
estimates the training stack's operator selection uses too) samples and extrapolates them,
and every sampled run's values are checked here against a numpy reference. The
extrapolation is checked against full runs of both algorithms on VALIDATION cases and the
worst error printed. ``reserve=True``: the tensorized forward writes the reserve (the
gates and cells the backward pass needs), as the baseline always does.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...dnn import lstm, lstm_model
from ...dnn.lstm_model import Estimate, launch_cycles

STEPS = (64, 128, 256, 512, 1024, 2048)
BATCHES = (64, 96, 128)
HIDDEN = (64, 128, 256, 384)
CASES = [(t, b, h) for t in STEPS for b in BATCHES for h in HIDDEN]    # Listing 5.2
QUICK_CASES = [(64, 64, 64), (256, 96, 128), (1024, 64, 256), (2048, 128, 384)]
VALIDATION = [(64, 64, 64), (64, 96, 128), (128, 64, 64)]
QUICK_VALIDATION = [(64, 64, 64)]
DTYPE = np.float32
TOLERANCE = 2e-5


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


def _check_sample(what, inputs, outputs):
    """lstm_model's check of a sampled run: its values against numpy float64."""
    if what == "hoisted GEMM":
        x, w = inputs
        _check(what, outputs, x.astype(np.float64) @ w.T.astype(np.float64))
        return
    y, c_n = outputs
    ry, rc = _reference(*inputs)
    _check(f"{what} y", y, ry)
    _check(f"{what} c_T", c_n, rc)


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


def tensorized(steps, batch, hidden, engine, reserve=False):
    """Estimate of the tensorized forward (input size = H), None without a plan."""
    return lstm_model.tensorized(steps, batch, hidden, hidden, DTYPE, reserve=reserve,
                                 engine=engine, check=_check_sample)


def baseline(steps, batch, hidden, engine) -> Estimate:
    return lstm_model.baseline(steps, batch, hidden, hidden, DTYPE, engine=engine,
                               check=_check_sample)


def measure(case, engine="c", reserve=False) -> Row:
    """The estimates of both algorithms on (T, B, H); the samples of the time loop and of the
    baseline do not depend on T and are simulated once per (B, H)."""
    steps, batch, hidden = case
    start = time.perf_counter()
    tens = tensorized(steps, batch, hidden, engine, reserve)
    base = baseline(steps, batch, hidden, engine)
    return Row(steps, batch, hidden, tens if tens is not None else base, base,
               tens.plan if tens is not None else None, time.perf_counter() - start)


def validate(case, engine="c", seed=0, reserve=False) -> tuple:
    """Full runs of both algorithms on `case` against their estimates: (tensorized error,
    baseline error), relative."""
    steps, batch, hidden = case
    row = measure(case, engine, reserve)
    x, h0, c0, W, R, b = lstm_model.sample_arrays(np.random.default_rng(seed + 1), steps,
                                                  batch, hidden, hidden, DTYPE)
    errors = []
    for algo, estimate in (("tensorized", row.tensorized), ("baseline", row.baseline)):
        (y, _, _), stats = lstm.lstm_forward(x, h0, c0, W, R, b, algo=algo, engine=engine,
                                             reserve=reserve)
        _check(f"{algo} full run", y, _reference(x, h0, c0, W, R, b)[0])
        errors.append(estimate.cycles / launch_cycles(stats) - 1)
    return tuple(errors)


def run(quick=False, engine="c", progress=None, reserve=False):
    """Every case, then the validation runs; returns (rows, [(case, errors)])."""
    cases = QUICK_CASES if quick else CASES
    checks = QUICK_VALIDATION if quick else VALIDATION
    rows, validation = [], []
    for case in cases:
        if progress:
            progress("T=%d B=%d H=%d" % case)
        rows.append(measure(case, engine, reserve))
    for case in checks:
        if progress:
            progress("validate T=%d B=%d H=%d" % case)
        validation.append((case, validate(case, engine, reserve=reserve)))
    return rows, validation


def _share(e: Estimate):
    return f"{100 * e.gemm / e.cycles:5.1f}% {100 * e.elementwise / e.cycles:5.1f}%"


def format_report(rows, validation) -> str:
    lines = ["T     B    H    | tensorized cycles  GEMM  elem  | baseline cycles   GEMM  "
             "elem  | speed-up | R^T      I" + (" reserve" if any(
                 r.plan is not None and r.plan.reserve for r in rows) else "")]
    for r in rows:
        p = r.plan
        plan = ("-" if p is None else
                f"{'resident' if p.resident else f'kc={p.kc}':8s} {'pre' if p.prefetch else 'in C'}"
                + ("" if not p.reserve else " staged" if p.reserve_staged else " in C"))
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
