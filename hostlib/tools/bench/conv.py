"""`swsim bench conv`: the convolution generality test of thesis §5.4 (Listing 5.1, Figs.
5.12 and 5.13) on the VM.

Cases: B in {1, 32, 128}, N_i >= N_o from {64, 128, 256, 384, 512}, R_o = C_o in {16, 32, 64,
128, 256}, K = 3, stride 1, no padding (R_i = R_o + 2): 225 forward passes, float32 (the
thesis' precision), on the whole chip as the thesis ran them (4 CGs, R_o split: every CG's
slice is the same convolution, so the chip's time is one slice's).

For each registered algorithm (``conv.ALGORITHMS``) whose ``supports`` accepts the case, its
``estimate`` gives the cycles (sampled on the VM and extrapolated; layers this size cannot be
simulated whole) and its ``predict`` the model's cycles. Efficiency = flops / time against
the peak of the 4 CGs. The report has, per algorithm and B, the efficiency's box statistics
beside the thesis' figures, the best of the algorithms per case, how often ``algo="auto"``'s
pick (by the models' ``predict``) is the estimated best, and a validation: every case small
enough (the algorithm's ``predict`` for the slice at most VALIDATE_MAX_CYCLES) has its slice
also run whole through ``dnn.conv2d_forward`` (one CG, the algorithm's layout) and the
cycles compared with the estimate (the worst error must be <= 3 %). Cases run in ``jobs``
processes, grouped by (N_i, N_o) so that a process meets the samples it has already
simulated (the modules remember their samples: cases with the same sampled work share them).
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import time
from dataclasses import dataclass, field

import numpy as np

from ....vm import Machine
from ....vm.config import PUBLISHED, VMConfig
from ...dnn import conv
from ...dnn.conv.common import ConvGeometry

BATCHES = (1, 32, 128)
CHANNELS = (64, 128, 256, 384, 512)
SIZES = (16, 32, 64, 128, 256)
QUICK = dict(batches=(1, 32), channels=(64, 256), sizes=(16, 64))
KERNEL = 3
CGS = 4                       # the thesis' whole chip
DTYPE = np.float32
DIRECTION = "forward"
VALIDATE_MAX_CYCLES = 4e6     # slices run whole for the validation: predict at most this
MAX_ERROR = 0.03
CONFIG = VMConfig.preset()
THESIS = {key: published.value for key, published in PUBLISHED.items()}
# The thesis' figure for each algorithm's mean efficiency (%), and how it is stated.
THESIS_MEANS = {"implicit": ("~", THESIS["conv_implicit_mean"]),
                "winograd": (">", THESIS["conv_winograd_mean"]),
                "explicit": ("<", THESIS["conv_explicit_mean"])}


def cases(quick: bool = False) -> list:
    """(B, N_i, N_o, R_o) of Listing 5.1 (the 16 x 16 images included: see the thesis
    digest §D), or the ``QUICK`` subset."""
    sets = QUICK if quick else dict(batches=BATCHES, channels=CHANNELS, sizes=SIZES)
    return [(b, n_i, n_o, r) for b in sets["batches"] for n_i in sets["channels"]
            for n_o in sets["channels"] if n_i >= n_o for r in sets["sizes"]]


def geometry(case) -> ConvGeometry:
    b, n_i, n_o, r_o = case
    size = r_o + KERNEL - 1
    return ConvGeometry(b, n_i, n_o, size, size, KERNEL, KERNEL, (1, 1), (0, 0))


@dataclass
class Result:
    case: tuple
    flops: int
    cycles: dict = field(default_factory=dict)      # algorithm: estimated chip cycles
    predicted: dict = field(default_factory=dict)   # algorithm: the model's chip cycles
    refused: dict = field(default_factory=dict)     # algorithm: supports' reason
    auto: str = ""                                  # algo="auto"'s pick
    # algorithm: (estimate, simulated cycles, whether the estimate sampled) of a whole slice
    validated: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)     # algorithm: host seconds (estimate, run)
    host_seconds: float = 0.0

    def efficiency(self, algo) -> float:
        peak = CONFIG.peak_gflops_cg * CGS * 1e9 / CONFIG.clock_hz      # flops per cycle
        return self.flops / self.cycles[algo] / peak

    @property
    def best(self) -> str:
        return min(self.cycles, key=self.cycles.get)


def sampled(details) -> bool:
    """Whether an estimate's details say it extrapolated from a sample (rather than running
    every part whole): a part not "whole", sampled GEMM axes, or fewer units simulated than
    the part has."""
    if isinstance(details, dict):
        if details.get("whole") is False or details.get("sampled_axes"):
            return True
        if "simulated" in details and details["simulated"] not in (
                details.get("of"), [details.get("units")]):
            return True
        return any(sampled(value) for value in details.values())
    return False


def measure(case, engine: str = "c", validate: bool = True) -> Result:
    """One case: every registered algorithm's estimate and prediction, auto's pick and, when
    the slice is small enough, the slice run whole against the estimate."""
    start = time.perf_counter()
    geo = geometry(case)
    slices = sorted({piece.geo for piece in conv._slices(geo, DIRECTION, CGS)},
                    key=lambda g: g.r_i)
    result = Result(case, geo.flops)
    rng = np.random.default_rng(0)
    for name, module in conv.ALGORITHMS.items():
        began = time.perf_counter()
        refusal = next(filter(None, (module.supports(s, DIRECTION, DTYPE, CONFIG)
                                     for s in slices)), None)
        if refusal is not None:
            result.refused[name] = refusal
            continue
        estimates = [module.estimate(s, DIRECTION, DTYPE, Machine(CONFIG), engine)
                     for s in slices]
        result.cycles[name] = max(cycles for cycles, _ in estimates)
        predictions = [module.predict(s, DIRECTION, DTYPE, CONFIG) for s in slices]
        result.predicted[name] = max(predictions)
        estimated = time.perf_counter()
        if validate:
            for piece, (cycles, details), predicted in zip(slices, estimates, predictions):
                if predicted > VALIDATE_MAX_CYCLES:
                    continue
                shape = dict(zip("NCHW", piece.x_shape))
                x = rng.standard_normal([shape[a] for a in conv.LAYOUTS[module.LAYOUT]],
                                        dtype=DTYPE)
                w = rng.standard_normal(piece.w_shape, dtype=DTYPE)
                _, stats = conv.conv2d_forward(
                    x, w, stride=piece.stride, padding=piece.padding, algo=name,
                    layout=module.LAYOUT, machine=Machine(CONFIG), engine=engine)
                previous = result.validated.get(name)
                error = cycles / stats.cycles - 1
                if previous is None or abs(error) > abs(previous[0] / previous[1] - 1):
                    result.validated[name] = (cycles, stats.cycles, sampled(details))
        result.seconds[name] = (estimated - began, time.perf_counter() - estimated)
    if result.cycles:
        result.auto = conv.choose(geo, DIRECTION, DTYPE, CONFIG, CGS).NAME
    result.host_seconds = time.perf_counter() - start
    return result


_DONE = None          # the pool's queue of finished cases (inherited by the forked workers)


def _measure_group(args):
    group, engine, validate = args
    results = []
    for case in group:
        results.append(measure(case, engine, validate))
        _DONE.put(case)
    return results


def run(quick: bool = False, engine: str = "c", jobs: int = 2, validate: bool = True,
        progress=None) -> list:
    """Every case, in `jobs` processes; ``progress(done, total)`` after each case. The
    first case runs here first: the processes inherit its assembled kernels."""
    global _DONE
    todo = cases(quick)
    results = [measure(todo[0], engine, validate)]
    if progress:
        progress(1, len(todo))
    groups = {}
    for case in todo[1:]:
        groups.setdefault(case[1:3], []).append(case)
    # the costliest groups (most channels) first, so the processes finish together
    work = [(group, engine, validate) for _, group in
            sorted(groups.items(), key=lambda item: -item[0][0] * item[0][1])]
    context = multiprocessing.get_context("fork")
    _DONE = context.Queue()
    done = 1
    if jobs > 1:
        with context.Pool(jobs) as pool:
            parts = pool.map_async(_measure_group, work, chunksize=1)
            while not parts.ready() or not _DONE.empty():
                try:
                    _DONE.get(timeout=1)
                except queue.Empty:
                    continue
                done += 1
                if progress:
                    progress(done, len(todo))
            for part in parts.get():
                results += part
    else:
        for item in work:
            for result in _measure_group(item):
                results.append(result)
                _DONE.get()
                if progress:
                    progress(len(results), len(todo))
    return sorted(results, key=lambda r: todo.index(r.case))


# ---- the report ----------------------------------------------------------------------------

STATS = ("min", "q1", "median", "mean", "q3", "max")


def box(values) -> dict:
    values = np.asarray(values, float)
    q1, median, q3 = np.percentile(values, (25, 50, 75))
    return dict(min=values.min(), q1=q1, median=median, mean=values.mean(), q3=q3,
                max=values.max())


def _thesis_figure(name, batch) -> str:
    if name == "best":
        key = "conv_best_mean_inference" if batch == 1 else "conv_best_mean_training"
        return f"~{THESIS[key]:.0f} %"
    if name in THESIS_MEANS:
        sign, value = THESIS_MEANS[name]
        if name == "winograd" and batch == 1:
            return "-"
        return f"{sign}{value:.0f} %"
    return "-"


def summary(results) -> list:
    """Rows (algorithm, B, cases run, box statistics in %, thesis' mean) for every
    algorithm and for the best per case."""
    rows = []
    names = [name for name in conv.ALGORITHMS if any(name in r.cycles for r in results)]
    for name in names + ["best"]:
        for batch in sorted({r.case[0] for r in results}):
            chosen = [r for r in results if r.case[0] == batch and r.cycles]
            values = [100 * r.efficiency(r.best if name == "best" else name)
                      for r in chosen if name == "best" or name in r.cycles]
            if values:
                rows.append((name, batch, len(values), box(values),
                             _thesis_figure(name, batch)))
    return rows


def format_report(results, host_seconds: float, cpu_seconds: float | None = None) -> str:
    lines = [f"swsim bench conv: {len(results)} forward cases of Listing 5.1 (K = 3, float32), "
             f"chip of {CGS} CGs (R_o split), peak {CGS * CONFIG.peak_gflops_cg:.1f} GFLOPS; "
             f"cycles by each algorithm's estimate (sampled, extrapolated); wall time "
             f"{host_seconds:.0f} s"
             + ("" if cpu_seconds is None else f", CPU time {cpu_seconds:.0f} s (all processes)")
             + f", host load average {os.getloadavg()[0]:.1f}", ""]
    header = ("algorithm", "B", "cases", *STATS, "thesis mean")
    body = [(name, str(batch), str(count), *(f"{stats[s]:.1f}" for s in STATS), thesis)
            for name, batch, count, stats, thesis in summary(results)]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                        enumerate(zip(row, widths))) for row in [header, *body]]
    lines.append(f"(efficiency in % of peak; swAutoDNN later reached "
                 f"{THESIS['conv_swautodnn_mean']:.0f} % on this set, thesis §6.3)")
    refused = {}
    for r in results:
        for name, reason in r.refused.items():
            refused.setdefault(name, []).append(reason)
    for name, reasons in refused.items():
        lines.append(f"{name}: refused {len(reasons)} cases, e.g. {reasons[0]}")
    ran = [r for r in results if r.cycles]
    lines.append("")
    for batch in [None] + sorted({r.case[0] for r in ran}):
        chosen = [r for r in ran if batch is None or r.case[0] == batch]
        agree = sum(r.auto == r.best for r in chosen)
        losses = [r.cycles[r.auto] / r.cycles[r.best] - 1 for r in chosen]
        lines.append(f"algo=\"auto\" (smallest predict) picks the estimated best in {agree} of "
                     f"{len(chosen)} cases{'' if batch is None else f' at B = {batch}'}; mean "
                     f"loss {100 * np.mean(losses):.2f} %, worst {100 * max(losses):.2f} %")
    if not ran:
        lines.append("no case ran")
    for name in conv.ALGORITHMS:
        errors = [r.predicted[name] / r.cycles[name] - 1 for r in ran if name in r.cycles]
        if errors:
            lines.append(f"predict vs estimate, {name}: mean |error| "
                         f"{100 * np.mean(np.abs(errors)):.1f} %, range "
                         f"{100 * min(errors):+.1f} % .. {100 * max(errors):+.1f} %")
    checks = [(r.case, name, est / sim - 1, was_sampled) for r in results
              for name, (est, sim, was_sampled) in r.validated.items()]
    if checks:
        lines.append(f"validation: {len(checks)} slices simulated whole (predict <= "
                     f"{VALIDATE_MAX_CYCLES:.3g} cycles), the estimate's error:")
    for name in conv.ALGORITHMS:
        mine = [c for c in checks if c[1] == name]
        if mine:
            case, _, error, _ = max(mine, key=lambda c: abs(c[2]))
            verdict = "within" if abs(error) <= MAX_ERROR else "ABOVE"
            lines.append(f"  {name}: {len(mine)} runs ({sum(c[3] for c in mine)} of them "
                         f"sampled by the estimate), worst {100 * error:+.2f} % at (B, N_i, "
                         f"N_o, R_o) = {case}, {verdict} the {100 * MAX_ERROR:.0f} % bound")
    seconds = {}
    for r in results:
        for name, (estimate, run_) in r.seconds.items():
            total = seconds.setdefault(name, [0.0, 0.0])
            total[0] += estimate
            total[1] += run_
    if seconds:
        lines.append("host seconds (all processes): " + ", ".join(
            f"{name} {estimate:.0f} estimating + {run_:.0f} validating"
            for name, (estimate, run_) in seconds.items())
            + f"; in all {sum(r.host_seconds for r in results):.0f}")
    return "\n".join(lines)


def box_plot(results, path: str) -> None:
    """Efficiency box plots per algorithm and B (like Figs. 5.12 / 5.13), with the best."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = summary(results)
    data, labels = [], []
    for name, batch, _, _, _ in rows:
        chosen = [r for r in results if r.case[0] == batch and r.cycles]
        data.append([100 * r.efficiency(r.best if name == "best" else name)
                     for r in chosen if name == "best" or name in r.cycles])
        labels.append(f"{name}\nB={batch}")
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(data)), 4.5))
    ax.boxplot(data, showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
    ax.set_ylabel("efficiency (% of the 4-CG peak)")
    ax.set_title(f"swsim bench conv: Listing 5.1, {len(results)} cases (estimated)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
