"""Estimates of ``lstm_forward``'s cycles by sampled simulation: what `swsim bench lstm`
reports and what the training stack's operator selection compares (docs/dnn.md "LSTM").

Time of a run = the sum over its launches of kernel cycles + the spawn (``spawn_cycles``): the
launches run one after another, and launching is part of what fusion saves (§5.2 (a)).

The time steps are identical work, so neither algorithm is simulated for all T:
- tensorized: the time-loop kernel runs for 2 and for 3 steps (the first two are the warm-up:
  h0/c0/R in, the first prefetch overlapping a step; with the reserve, the first put of a
  record overlapping a step); loop(T) = loop(2) + (T - 2) (loop(3) - loop(2)). The hoisted
  swGEMM (T Bp x 4Hp x I) runs with the blocking and orientation swGEMM chooses for the full
  size, on 2 and 3 of its blocks of rows (the first fills the double buffer);
  gemm(T) = g(2) + (blocks - 2) (g(3) - g(2)).
- baseline: two steps (8 swGEMMs + 1 cell launch each); total = step 0 + (T - 1) step 1.
``lstm_backward`` (given the forward's reserve) is estimated the same way: its recurrence (per
step a cell-backward launch and the swGEMM dh = dG R) runs for LOOP_SAMPLES steps on a
synthetic reserve, loop(T) = loop(2) + (T - 2) (loop(3) - loop(2)); the four products over
all steps (dW, dR, db, dx) are swGEMM's model's predictions for them (``gemm_plan``), since
their size grows with T.
The samples depend on (B, I, H), the precision and the configuration, not on T, and are
simulated once per process (cached). Inputs are random in PyTorch's initialisation range
(the cycles do not depend on the values). ``check``, when given, is called on every sampled
run's inputs and outputs (the bench compares them with numpy).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ...vm import Machine
from ..blas import gemm
from ..blas.swgemm import gemm_plan
from . import lstm

# Steps the time-loop kernel is simulated for: two of warm-up, then one sampled step.
LOOP_SAMPLES = (2, 3)
# Row blocks the hoisted swGEMM is simulated for: its first block fills the double buffer.
GEMM_SAMPLES = (2, 3)


@dataclass
class Estimate:
    """Cycles of one forward (spawns included), its GEMM / element-wise parts (Figs.
    5.15/5.16) and the algorithm that runs (``plan``: the tensorized one's, None for the
    baseline)."""
    cycles: float
    gemm: float
    elementwise: float
    algo: str
    plan: Optional[lstm.Plan] = None


def launch_cycles(stats) -> int:
    """Kernel cycles + one spawn per launch of a (combined) Stats."""
    return sum(p.kernel_cycles + p.run.config.spawn_cycles
               for p in stats.details.get("parts", [stats]))


def sample_arrays(rng, steps, batch, inputs, hidden, dtype):
    """x, h0, c0 uniform in (-1, 1); W, R, b scaled by 1/sqrt(H) (PyTorch's initialisation
    range: the gates stay moderate)."""
    shapes = [(steps, batch, inputs), (batch, hidden), (batch, hidden), (4 * hidden, inputs),
              (4 * hidden, hidden), (4 * hidden,)]
    scale = 1 / math.sqrt(hidden)
    return [(rng.uniform(-1, 1, s) * (scale if k >= 3 else 1)).astype(dtype)
            for k, s in enumerate(shapes)]


def _linear(first, second, n, at=1):
    """first + (n - at) (second - first): `first` measured after `at` units, `second` after
    one more, extended to n units."""
    return first + (n - at) * (second - first)


def hoisted_gemm(rows: int, n: int, k: int, dtype, config, engine="c", check=None) -> float:
    """Cycles (spawn included) of the hoisted GEMM x (rows x k) W_fused^T (W_fused n x k) at
    `rows` rows, sampled on GEMM_SAMPLES blocks of rows with the full size's blocking and
    orientation."""
    # what swGEMM runs for gemm(x, w, trans_b=True) (only the operands' shapes matter)
    _, _, blocking, swapped = gemm_plan(np.empty((rows, k), dtype), np.empty((n, k), dtype),
                                        trans_b=True, config=config)
    block_rows = 8 * (blocking.nb if swapped else blocking.mb)
    blocks = -(-rows // block_rows)
    key = (n, k, np.dtype(dtype).str, tuple(blocking), swapped, config, engine, check)
    if blocks <= GEMM_SAMPLES[-1]:
        return _gemm_samples((rows,), *key)[0]
    cycles = _gemm_samples(tuple(s * block_rows for s in GEMM_SAMPLES), *key)
    return _linear(cycles[0], cycles[1], blocks, GEMM_SAMPLES[0])


@functools.lru_cache(maxsize=None)
def _gemm_samples(samples, n, k, dtype, blocking, swapped, config, engine, check):
    rng = np.random.default_rng(n * k)
    w_fused = rng.uniform(-1, 1, (n, k)).astype(dtype)
    cycles = []
    for m in samples:
        x = rng.uniform(-1, 1, (m, k)).astype(dtype)
        c = np.zeros((m, n), dtype, order="F" if swapped else "C")
        out, stats = gemm(x, w_fused, c, beta=0.0, trans_b=True, blocking=blocking,
                          machine=Machine(config), engine=engine)
        if check:
            check("hoisted GEMM", (x, w_fused), out)
        cycles.append(launch_cycles(stats))
    return tuple(cycles)


@functools.lru_cache(maxsize=None)
def _loop_samples(batch, inputs, hidden, dtype, reserve, config, engine, check):
    """The time-loop kernel after LOOP_SAMPLES steps: (plan, [(cycles, gemm, element-wise)]),
    (None, None) without a plan."""
    rng = np.random.default_rng(batch * hidden)
    x, h0, c0, W, R, b = sample_arrays(rng, LOOP_SAMPLES[-1], batch, inputs, hidden, dtype)
    p = lstm.plan(batch, hidden, np.dtype(dtype).itemsize, config, reserve=reserve)
    if p is None:
        return None, None
    projection, _ = lstm.hoist(x, W, hidden, p, Machine(config), engine)
    loops = []
    for n in LOOP_SAMPLES:
        (y, c_n, _, _), stats = lstm.time_loop(projection[:n * p.bp], h0, c0, R, b, p,
                                               Machine(config), engine)
        if check:
            check("tensorized", (x[:n], h0, c0, W, R, b), (y, c_n))
        loops.append((launch_cycles(stats), stats.times["gemm"][0], stats.times["elem"][0]))
    return p, loops


@functools.lru_cache(maxsize=None)
def _baseline_samples(batch, inputs, hidden, dtype, config, engine, check):
    """(cycles, GEMM, element-wise) of the baseline after 1 and 2 steps."""
    rng = np.random.default_rng(batch * hidden)
    x, h0, c0, W, R, b = sample_arrays(rng, 2, batch, inputs, hidden, dtype)
    (y, _, c_n), stats = lstm.lstm_forward(x, h0, c0, W, R, b, algo="baseline",
                                           machine=Machine(config), engine=engine)
    if check:
        check("baseline", (x, h0, c0, W, R, b), (y, c_n))
    per_step = len(stats.parts) // 2
    totals = []
    for launches in (stats.parts[:per_step], stats.parts):       # after 1 and 2 steps
        gemm_part = sum(launch_cycles(p) for p in launches if "blocking" in p.details)
        total = sum(launch_cycles(p) for p in launches)
        totals.append((total, gemm_part, total - gemm_part))
    return totals


def baseline(steps, batch, inputs, hidden, dtype, *, config=None, engine="c",
             check: Optional[Callable] = None) -> Estimate:
    """Estimate of the baseline forward (its reserve always written)."""
    config = config or Machine().config
    totals = _baseline_samples(batch, inputs, hidden, np.dtype(dtype).str, config, engine,
                               check)
    return Estimate(*(_linear(a, b_, steps) for a, b_ in zip(*totals)), algo="baseline")


def tensorized(steps, batch, inputs, hidden, dtype, *, reserve=False, config=None,
               engine="c", check: Optional[Callable] = None) -> Optional[Estimate]:
    """Estimate of the tensorized forward (with the reserve when asked), None when it has no
    LDM plan (``lstm_forward`` then runs the baseline)."""
    config = config or Machine().config
    dtype = np.dtype(dtype).str
    p, loops = _loop_samples(batch, inputs, hidden, dtype, reserve, config, engine, check)
    if p is None:
        return None
    gemm_in = hoisted_gemm(steps * p.bp, 4 * p.hp, inputs, dtype, config, engine, check)
    cycles, loop_gemm, elem = (_linear(a, b_, steps, LOOP_SAMPLES[0])
                               for a, b_ in zip(*loops))
    return Estimate(gemm_in + cycles, gemm_in + loop_gemm, elem, "tensorized", p)


def estimate_forward(steps, batch, inputs, hidden, dtype, *, algo, reserve=False,
                     config=None, engine="c") -> Estimate:
    """What ``lstm_forward(algo=algo, reserve=reserve)`` on these sizes costs on one CG
    (the tensorized algorithm's baseline fallback included: ``Estimate.algo`` says which
    runs)."""
    if algo not in lstm.ALGOS:
        raise lstm.DnnError(f"algo must be one of {', '.join(map(repr, lstm.ALGOS))}, "
                            f"got {algo!r}")
    if algo == "tensorized":
        found = tensorized(steps, batch, inputs, hidden, dtype, reserve=reserve,
                           config=config, engine=engine)
        if found is not None:
            return found
    return baseline(steps, batch, inputs, hidden, dtype, config=config, engine=engine)


def backward(steps, batch, inputs, hidden, dtype, *, config=None, engine="c") -> float:
    """Cycles (spawns included) of ``lstm_backward`` on one CG given the forward's reserve:
    the recurrence sampled, the products predicted (module docstring)."""
    config = config or Machine().config
    dtype = np.dtype(dtype)
    first, second = _backward_loop_samples(batch, inputs, hidden, dtype.str, config, engine)
    rows = steps * batch

    def product(a, b, trans_a=False):
        predicted, _, _, _ = gemm_plan(np.empty(a, dtype), np.empty(b, dtype),
                                       trans_a=trans_a, config=config)
        return predicted + config.spawn_cycles

    products = (product((rows, 4 * hidden), (rows, inputs), trans_a=True)       # dW
                + product((rows, 4 * hidden), (rows, hidden), trans_a=True)     # dR
                + product((1, rows), (rows, 4 * hidden))                        # db
                + product((rows, 4 * hidden), (4 * hidden, inputs)))            # dx
    return _linear(first, second, steps, LOOP_SAMPLES[0]) + products


@functools.lru_cache(maxsize=None)
def _backward_loop_samples(batch, inputs, hidden, dtype, config, engine):
    """The backward recurrence's cycles after LOOP_SAMPLES steps, on a reserve of activated
    gates in (0, 1) and cells in (-1, 1) (the cycles do not depend on the values)."""
    rng = np.random.default_rng(batch * hidden + 1)
    steps = LOOP_SAMPLES[-1]
    x, h0, c0, W, R, b = sample_arrays(rng, steps, batch, inputs, hidden, dtype)
    reserve = lstm.Reserve(rng.uniform(-1, 1, (steps, batch, hidden)).astype(dtype),
                           rng.uniform(0, 1, (steps, batch, 4 * hidden)).astype(dtype),
                           rng.uniform(-1, 1, (steps, batch, hidden)).astype(dtype))
    dy = rng.uniform(-1, 1, (steps, batch, hidden)).astype(dtype)
    zeros = np.zeros((batch, hidden), dtype)
    cycles = []
    for n in LOOP_SAMPLES:
        part = lstm.Reserve(*(a[:n] for a in (reserve.y, reserve.gates, reserve.c)))
        *_, launches = lstm.backward_steps(dy[:n], x[:n], h0, c0, W, R, b, zeros, zeros,
                                            part, Machine(config), engine)
        cycles.append(sum(launch_cycles(stats) for stats in launches))
    return tuple(cycles)
