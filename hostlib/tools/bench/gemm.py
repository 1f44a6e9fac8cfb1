"""`swsim bench gemm`: thesis §4.3 in miniature. Each experiment prints its simulated sizes and
the host time it took, then rows of (quantity, thesis value, swsim value, note).

1. the LDM primitive's GFLOPS over a sweep of block sizes (hostlib/blas/primitive.py);
2. every feasible blocking of one mid-size GEMM, worst to best;
3. the model's blocking against the brute-force best over several shapes;
4. the skinny GEMP/GEPB shapes of listing 4.4, scaled down;
5. the cost of the lightweight padding on sizes that are not block multiples.

Sizes are scaled down from the thesis' (1024^3, M up to 32768) so that the whole run takes a
few minutes on the C engine; ``quick`` shrinks them further. All GEMMs are single precision
(as the thesis' swGEMM) with A stored K x M (the primitive's layout, thesis listing 4.1: "A
transposed, B not transposed"), B stored K x N and C row-major.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ....vm import Machine
from ....vm.config import PUBLISHED, VMConfig
from ...blas import gemm_model, primitive
from ...blas.baseline import baseline_gemm
from ...blas.gemm_model import Blocking, Problem
from ...blas.swgemm import gemm

# Blocking grid searched by experiments 2 and 3 (the model chooses within the same grid).
BENCH_GRIDS = ((4, 8, 16, 32, 64), (16, 32, 64), (8, 16, 32, 64))
DTYPE = np.float32
CONFIG = VMConfig.preset()    # the machine every run uses and the model plans for
THESIS = {key: published.value for key, published in PUBLISHED.items()}


@dataclass
class Row:
    quantity: str
    thesis: str
    swsim: str
    note: str = ""


@dataclass
class Experiment:
    title: str
    sizes: str
    rows: list = field(default_factory=list)
    host_seconds: float = 0.0
    details: list = field(default_factory=list)   # extra lines (per-case tables)


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a_km = rng.standard_normal((k, m)).astype(DTYPE)
    b = rng.standard_normal((k, n)).astype(DTYPE)
    return a_km, b


def _run(m, n, k, blocking: Optional[Blocking] = None, engine="c", fixed_c=True,
         progress=None):
    """One gemm in the bench layout (C row-major, not read; without `fixed_c` the model also
    picks the orientation, C or C^T); returns its Stats."""
    a_km, b = _operands(m, n, k)
    c = np.zeros((m, n), DTYPE) if fixed_c else None
    result, stats = gemm(a_km, b, c, trans_a=True, blocking=blocking, engine=engine,
                         machine=Machine(CONFIG), progress=progress)
    expected = a_km.T.astype(np.float64) @ b
    assert np.allclose(result, expected, rtol=0, atol=1e-4 * k), "gemm disagrees with numpy"
    return stats


def _problem(m, n, k) -> Problem:
    return Problem(m=m, n=n, k=k, itemsize=np.dtype(DTYPE).itemsize, a_transposed=False)


def primitive_sweep(quick: bool, engine="c", progress=None) -> Experiment:
    kbs = (8, 32, 128) if quick else primitive.SWEEP_KB
    shapes = primitive.sweep_shapes(kbs=kbs)
    exp = Experiment("1. LDM GEMM primitive (double), sweep of block sizes",
                     f"{len(shapes)} shapes: Mb, Nb in {primitive.SWEEP_MB}, Kb in {kbs}")
    result = primitive.sweep(shapes=shapes, engine=engine, check=False)
    best = result.best
    exp.rows = [
        Row(f"best primitive GFLOPS (% of {CONFIG.peak_gflops_cg:.1f})",
            f"{THESIS['gemm_primitive_best']} ({THESIS['gemm_primitive_best_share']}%)",
            f"{best.gflops:.2f} ({100 * best.efficiency:.1f}%)",
            f"at Mb={best.mb} Nb={best.nb} Kb={best.kb}"),
        Row("share of shapes above 500 GFLOPS",
            f"{THESIS['gemm_primitive_above_500']}% of {THESIS['gemm_primitive_sets']}",
            f"{100 * result.share_above_threshold:.1f}% of {len(shapes)}",
            "small Kb dominates the slow cases, as in the thesis"),
    ]
    return exp


def blockings(quick: bool, engine="c", progress=None) -> Experiment:
    size = 256 if quick else 384
    problem = _problem(size, size, size)
    options = gemm_model.candidates(problem, CONFIG, grids=BENCH_GRIDS)
    exp = Experiment("2. every feasible blocking of one GEMM, worst to best",
                     f"M = N = K = {size} (thesis: 1024), {len(options)} blockings of "
                     f"Mb {BENCH_GRIDS[0]} x Nb {BENCH_GRIDS[1]} x Kb {BENCH_GRIDS[2]}")
    runs = sorted(((_run(size, size, size, b, engine, progress=progress), b)
                   for b in options),
                  key=lambda r: r[0].gflops)
    worst, best = runs[0], runs[-1]
    exp.rows = [
        Row("feasible blockings", f"{THESIS['gemm_blockings_feasible']}", str(len(runs))),
        Row("worst GFLOPS", f"{THESIS['gemm_blockings_worst']}", f"{worst[0].gflops:.2f}",
            f"Mb, Nb, Kb = {tuple(worst[1])}"),
        Row("best GFLOPS", f"{THESIS['gemm_blockings_best']}", f"{best[0].gflops:.2f}",
            f"Mb, Nb, Kb = {tuple(best[1])}"),
        Row("best / worst",
            f"{THESIS['gemm_blockings_best'] / THESIS['gemm_blockings_worst']:.2f}x",
            f"{best[0].gflops / worst[0].gflops:.2f}x"),
    ]
    exp.details = [" ".join(f"{s.gflops:.0f}" for s, _ in runs)]
    return exp


MODEL_SHAPES_QUICK = ((128, 128, 128), (256, 128, 256), (128, 256, 384), (200, 300, 100))
MODEL_SHAPES = MODEL_SHAPES_QUICK + ((256, 256, 256), (384, 128, 128), (128, 384, 256),
                                     (300, 100, 200), (384, 256, 128), (100, 200, 300))


def model_choice(quick: bool, engine="c", progress=None) -> Experiment:
    shapes = MODEL_SHAPES_QUICK if quick else MODEL_SHAPES
    exp = Experiment("3. model-chosen blocking against the brute-force best",
                     f"{len(shapes)} shapes (M, N, K) {shapes}; each run with every feasible "
                     "blocking of the bench grid")
    losses = []
    for m, n, k in shapes:
        problem = _problem(m, n, k)
        options = gemm_model.candidates(problem, CONFIG, grids=BENCH_GRIDS)
        cycles = {b: _run(m, n, k, b, engine, progress=progress).kernel_cycles
                  for b in options}
        best = min(cycles, key=cycles.get)
        chosen = gemm_model.choose(problem, CONFIG, options=options)
        losses.append(1 - cycles[best] / cycles[chosen])
        exp.details.append(f"({m}, {n}, {k}): {len(options)} blockings, best {tuple(best)}, "
                           f"model {tuple(chosen)}, loss {100 * losses[-1]:.1f}%")
    exp.rows = [
        Row("mean performance loss of the model's pick", f"< {THESIS['gemm_model_loss']}%",
            f"{100 * np.mean(losses):.2f}%", f"max {100 * max(losses):.1f}%"),
        Row("shapes where the model picks the best", "-",
            f"{sum(loss == 0 for loss in losses)} of {len(losses)}"),
    ]
    return exp


def skinny(quick: bool, engine="c", progress=None) -> Experiment:
    """swGEMM against the baseline GEMM (hostlib/blas/baseline.py), both in double precision on the
    same inputs: the baseline kernel is double only."""
    ms = (1024,) if quick else (1024, 2048)
    ns = (64, 256) if quick else (64, 128, 256, 512)
    ks = (64, 128) if quick else (64, 128, 256)
    shapes = [(m, n, k) for m in ms for n in ns for k in ks]
    exp = Experiment("4. GEMP / GEPB shapes of listing 4.4, scaled down (M / 4 .. / 16), "
                     "swGEMM against the baseline",
                     f"M in {ms}, N in {ns}, K in {ks} ({len(shapes)} shapes), double "
                     "precision; swGEMM without C, so the model also picks C or C^T")
    swgemm_gflops, speedups = [], []
    for m, n, k in shapes:
        a_km, b = (x.astype(np.float64) for x in _operands(m, n, k))
        expected = a_km.T @ b
        result, fast = gemm(a_km, b, trans_a=True, engine=engine, machine=Machine(CONFIG),
                            progress=progress)
        base_result, base = baseline_gemm(a_km.T, b, engine=engine, machine=Machine(CONFIG))
        for name, c in (("swGEMM", result), ("baseline", base_result)):
            assert np.allclose(c, expected, rtol=0, atol=1e-12 * k), f"{name} disagrees"
        swgemm_gflops.append(fast.gflops)
        speedups.append(fast.gflops / base.gflops)
        exp.details.append(f"({m}, {n}, {k}): swGEMM {fast.gflops:.1f} GFLOPS, baseline "
                           f"{base.gflops:.1f} (tile {base.tile}), {speedups[-1]:.2f}x")
    exp.rows = [
        Row("swGEMM GFLOPS (mean, range)", "-",
            f"{np.mean(swgemm_gflops):.1f} ({min(swgemm_gflops):.1f}-{max(swgemm_gflops):.1f})"),
        Row("speed-up over the baseline (mean, range)",
            f"{THESIS['swgemm_speedup_over_xmath']}x over xMath",
            f"{np.mean(speedups):.2f}x ({min(speedups):.2f}-{max(speedups):.2f}x)",
            "the thesis' baseline is the vendor BLAS; ours is the issue's straightforward "
            "one (whole C tiles per CPE, no register communication)"),
    ]
    return exp


PADDING_SIZES_QUICK = ((200, 200, 200), (300, 100, 500))
PADDING_SIZES = PADDING_SIZES_QUICK + ((500, 500, 200), (100, 300, 300), (250, 500, 100))


def padding(quick: bool, engine="c", progress=None) -> Experiment:
    sizes = PADDING_SIZES_QUICK if quick else PADDING_SIZES
    exp = Experiment("5. lightweight padding on sizes that are not block multiples",
                     f"(M, N, K) in {sizes} (thesis: multiples of 100 up to 8000), each "
                     "against the block-multiple size it pads to, same blocking")
    overheads = []
    for m, n, k in sizes:
        chosen = gemm_model.choose(_problem(m, n, k), CONFIG)
        padded = tuple(-(-x // (8 * b)) * 8 * b for x, b in zip((m, n, k), chosen))
        ragged, aligned = (_run(m, n, k, chosen, engine, progress=progress),
                           _run(*padded, chosen, engine, progress=progress))
        overheads.append(ragged.kernel_cycles / aligned.kernel_cycles - 1)
        exp.details.append(f"({m}, {n}, {k}) -> {padded} with {tuple(chosen)}: "
                           f"{ragged.kernel_cycles} vs {aligned.kernel_cycles} cycles, "
                           f"{100 * overheads[-1]:+.1f}%")
    exp.rows = [
        Row("padding time (share of the run)", f"< {THESIS['gemm_padding_time']}%",
            f"{100 * np.mean(overheads):+.1f}% mean, {100 * max(overheads):+.1f}% max",
            "run time of the ragged size over the padded multiple's: the zero-filled LDM "
            "blocks cost what their padded compute costs; in memory only rows are padded: to "
            "whole DMA lines, or to 8 blocks for shared DMA"),
    ]
    return exp


EXPERIMENTS = (primitive_sweep, blockings, model_choice, skinny, padding)


def run(quick: bool = False, engine: str = "c", only=None, progress=None) -> list:
    """The experiments (all, or the numbers in ``only``). ``progress`` is told each
    experiment's name as it starts and, now and then, the cycle its GEMM simulation reached."""
    experiments = []
    for number, experiment in enumerate(EXPERIMENTS, 1):
        if only and number not in only:
            continue
        start = time.perf_counter()
        if progress is not None:
            progress(f"{number}. {experiment.__name__}")
        exp = experiment(quick, engine, progress)
        exp.host_seconds = time.perf_counter() - start
        experiments.append(exp)
    return experiments


def format_report(experiments) -> str:
    lines = []
    for exp in experiments:
        lines += [exp.title, f"  simulated: {exp.sizes}; host time {exp.host_seconds:.1f} s"]
        header = ("quantity", "thesis", "swsim", "note")
        body = [(r.quantity, r.thesis, r.swsim, r.note) for r in exp.rows]
        widths = [max(len(x[i]) for x in [header, *body]) for i in range(3)]
        for row in [header, *body]:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths))
                         + "  " + row[3])
        lines += ["  " + d for d in exp.details] + [""]
    return "\n".join(lines)
