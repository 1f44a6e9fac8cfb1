"""`swsim bench qinglong`: simulated time of N inferences of one layer or net four ways
(digest parax-swflowpro-qinglong.md §3.8), from measured runs:

- **per-sample** (DLPlib-like): the DNN operators called per sample, which place the layer's
  constants, x and y each time: N (copy(constants) + copy(x) + T_op + copy(y));
- **compile once** (QingLong1): the compiled net, its constants still copied per sample:
  N (copy(constants) + copy(x) + copy(io) + T_c + copy(y));
- **constants once** (QingLong2): copy(constants) + N (copy(x) + copy(io) + T_c + copy(y));
- **pipelined** (QingLong3, the analytic model): copy-in T_in = copy(x) + copy(io), compute T_c
  and copy-out T_out = copy(y) overlapped across samples (the host's copies and the CPEs are
  separate engines here): copy(constants) + T_in + T_c + T_out + (N - 1) max(T_in, T_c, T_out).

copy() is the configuration's copy model (``hostlib.qinglong.copy_cycles``), T_op the
operators' measured cycles (a chain's added up) and T_c the compiled net's. The constants-once
total is checked against whole runs of 1, WHOLE samples (``--whole N``) and every N of COUNTS
below it (``Net.run`` each, cycles and copies added up), the per-sample total against WHOLE
operator calls (their cycles added up, the copies the model's); larger N are the formula. The pipelined total is a model only (``Net.run`` charges
the host's copies, it does not overlap them). Host seconds (median per sample, this machine)
show what compiling once saves the host: the operators plan and place everything per call,
``compute`` only binds I/O. ``run_persistent``: the persistent kernel (QingLong3, device side)
on Scale in float64; ``run_persistent_fc`` and ``run_persistent_conv`` with the weights
resident in the LDMs.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from ....vm import Machine
from ...dnn import (activation_forward, batchnorm_forward, conv2d_forward, linear_forward,
                    scale)
from ...qinglong import BN, FC, Conv, Device, Net, ReLU, Scale, copy_cycles
from ...qinglong.persistent import PersistentConv, PersistentFC, PersistentScale, \
    transfer_cycles

COUNTS = (1, 10, 100, 1000)
WHOLE, WHOLE_QUICK = 10, 2
PERSISTENT_WHOLE, PERSISTENT_WHOLE_QUICK = (100, 1000), (100,)   # one launch of the stream each
PER_SAMPLE = (4, 10)          # the persistent Conv's per sample: streams of these many samples


def _one(operator):
    """An operator returning (y, Stats) as one returning (y, its cycles)."""
    def run_one(x, machine):
        result, stats = operator(x, machine)
        return (result[0] if isinstance(result, tuple) else result), stats.cycles
    return run_one


def _alexnet_like(rng, side: int):
    """A small AlexNet-like net on (1, 16, side, side): Conv 3x3 (32, pad 1), ReLU, Conv 3x3
    stride 2 (32, pad 1), ReLU, FC to 256, ReLU, FC to 128; its nodes and its operators."""
    f32 = np.float32
    w1, w2 = (rng.standard_normal((32, c, 3, 3)).astype(f32) * 0.1 for c in (16, 32))
    b1, b2 = (rng.standard_normal(32).astype(f32) for _ in range(2))
    f1 = rng.standard_normal((256, 32 * (side // 2) ** 2)).astype(f32) * 0.05
    f2 = rng.standard_normal((128, 256)).astype(f32) * 0.05
    nodes = [Conv(w1, b1, padding=1), ReLU(), Conv(w2, b2, stride=2, padding=1), ReLU(),
             FC(f1), ReLU(), FC(f2)]

    def operators(x, machine):
        relu = _one(lambda y, m: activation_forward(y, "relu", machine=m))
        steps = [_one(lambda y, m: conv2d_forward(y, w1, b1, padding=1, algo="implicit",
                                                  machine=m)), relu,
                 _one(lambda y, m: conv2d_forward(y, w2, b2, stride=2, padding=1,
                                                  algo="implicit", machine=m)), relu,
                 _one(lambda y, m: linear_forward(y.reshape(1, -1), f1, machine=m)), relu,
                 _one(lambda y, m: linear_forward(y, f2, machine=m))]
        total = 0
        for step in steps:
            x, cycles = step(x, machine)
            total += cycles
        return x, total
    return nodes, operators


def _layers(quick: bool):
    """(name, nodes, x, operators) per case: operators(x, machine) -> (y, cycles)."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    fc_out = 256 if quick else 1024
    side = 16 if quick else 32
    w = rng.standard_normal((fc_out, 1024)).astype(f32)
    b = rng.standard_normal(fc_out).astype(f32)
    gamma, beta, mean = (rng.standard_normal(32).astype(f32) for _ in range(3))
    var = (rng.random(32) + 0.5).astype(f32)
    cube = rng.standard_normal((1, 32, 32, 32)).astype(f32)
    kernels = rng.standard_normal((32, 16, 3, 3)).astype(f32)
    alexnet, alexnet_operators = _alexnet_like(rng, side // 2)
    return [
        (f"FC 1024->{fc_out}", [FC(w, b)], rng.standard_normal((1, 1024)).astype(f32),
         _one(lambda x, m: linear_forward(x, w, b, machine=m))),
        ("Scale 32x32x32", [Scale(0.5)], cube, _one(lambda x, m: scale(x, 0.5, machine=m))),
        ("BN 32x32x32", [BN(gamma, beta, mean, var)], cube,
         _one(lambda x, m: batchnorm_forward(x, gamma, beta, mean, var, training=False,
                                             machine=m))),
        (f"Conv 16x{side}x{side} 32k3", [Conv(kernels, padding=1)],
         rng.standard_normal((1, 16, side, side)).astype(f32),
         _one(lambda x, m: conv2d_forward(x, kernels, padding=1, algo="implicit", machine=m))),
        (f"AlexNet-like 16x{side // 2}x{side // 2}", alexnet,
         rng.standard_normal((1, 16, side // 2, side // 2)).astype(f32), alexnet_operators),
    ]


def run(quick: bool = False, engine: str = "c", whole: int = 0) -> list:
    """One row per layer: the measured terms, the totals per N and the checks against whole
    runs of `whole` samples (0: WHOLE, or WHOLE_QUICK with `quick`)."""
    whole = whole or (WHOLE_QUICK if quick else WHOLE)
    rows = []
    for name, nodes, x, operator in _layers(quick):
        net = Net(nodes, x.shape, x.dtype, engine=engine)
        start = time.perf_counter()
        package = net.compile()
        compile_seconds = time.perf_counter() - start
        net.copy_constant()
        device = net.device
        config = net.machine.config
        compute_cycles, compute_seconds, whole_totals, y = [], [], {}, None
        for count in range(1, whole + 1):
            start = time.perf_counter()
            y, stats = net.run(x)
            compute_seconds.append(time.perf_counter() - start)
            compute_cycles.append(stats.cycles)
            whole_totals[count] = device.copy_cycles + sum(compute_cycles)
        machine, op_seconds, op_cycles = Machine(), [], []
        for _ in range(whole):
            start = time.perf_counter()
            expected, t_op = operator(x, machine)
            op_seconds.append(time.perf_counter() - start)
            op_cycles.append(t_op)
        if not np.array_equal(y, expected):
            raise RuntimeError(f"{name}: the compiled net and the operators differ")
        constants = copy_cycles(config, package.sizes["constants"])
        io = copy_cycles(config, package.sizes["io"])
        x_in, y_out = copy_cycles(config, x.nbytes), copy_cycles(config, y.nbytes)
        t_c = compute_cycles[-1]
        per_sample = constants + x_in + t_op + y_out
        compiled = constants + x_in + io + t_c + y_out
        sample = x_in + io + t_c + y_out
        stage = max(x_in + io, t_c, y_out)
        totals = {n: {"per_sample": n * per_sample, "compile_once": n * compiled,
                      "constants_once": constants + n * sample,
                      "pipelined": constants + sample + (n - 1) * stage} for n in COUNTS}
        whole_errors = {n: abs(total - constants - n * sample) / total
                        for n, total in whole_totals.items()
                        if n in (1, whole) or n in COUNTS}
        per_sample_whole = whole * (constants + x_in + y_out) + sum(op_cycles)
        rows.append(dict(
            layer=name, constants_bytes=package.sizes["constants"], code_bytes=package.code_bytes,
            copy_constants=constants, copy_io=io, copy_x=x_in, copy_y=y_out, t_op=t_op,
            t_c=t_c, pipeline_stage=stage, totals=totals, whole_samples=whole,
            whole_cycles=whole_totals[whole], whole_errors=whole_errors,
            whole_error=max(whole_errors.values()),
            per_sample_whole_error=abs(per_sample_whole - whole * per_sample) / per_sample_whole,
            compile_seconds=compile_seconds,
            op_seconds=statistics.median(op_seconds),
            compute_seconds=statistics.median(compute_seconds)))
    return rows


def run_persistent(quick: bool = False, engine: str = "c") -> dict:
    """Scale of 32x32x32 float64 per sample: a launch of the compiled net each (its cycles
    T_c) against one persistent launch streaming the samples (QingLong3, device side only:
    the host's copies are left out of both). Per-sample time from whole runs of PERSISTENT
    sample counts, the N totals as first + (N - 1) per sample, checked against the last run."""
    counts = (2, 4, 6) if quick else (2, 6, 10)
    n = 32 * 32 * 32
    x = np.random.default_rng(0).standard_normal(n)
    net = Net([Scale(0.5)], (n,), np.float64, engine=engine)
    net.compile()
    net.copy_constant()
    y, stats = net.run(x)
    device = net.device
    kernel = PersistentScale(0.5, n, device)
    cycles = {}
    for count in counts:
        ins = [device.malloc(x.nbytes) for _ in range(count)]
        outs = [device.malloc(x.nbytes) for _ in range(count)]
        for block in ins:
            device.copy_in(block, x)
        cycles[count] = kernel.compute(ins, outs, engine=engine).cycles
        if not all(np.array_equal(device.copy_out(b, (n,), np.float64), y) for b in outs):
            raise RuntimeError("the persistent kernel and the compiled net differ")
        for block in ins + outs:
            device.free(block)
    first, middle, last = counts
    per_sample = (cycles[middle] - cycles[first]) / (middle - first)
    predicted = cycles[first] + (last - first) * per_sample
    bound = transfer_cycles(net.machine.config, x.nbytes, net.machine.config.num_cpes)
    return dict(layer="Scale 32x32x32 f64", t_c=stats.cycles, per_sample=per_sample,
                transfer_bound=bound, bound_ratio=per_sample / bound,
                check_error=abs(predicted - cycles[last]) / cycles[last],
                totals={n_: {"launch_per_sample": n_ * stats.cycles,
                             "persistent": cycles[first] + (n_ - first) * per_sample}
                        for n_ in COUNTS})


def run_persistent_fc(quick: bool = False, engine: str = "c") -> dict:
    """FC 1024->256 (``--quick``: 256->128) float64 with its weights resident in the LDMs
    (QingLong3, device side only): the persistent kernel's per sample from whole runs of 2 and
    4 samples, its compute alone T_c and its transfers alone T_in + T_out (the same kernel,
    FC_STAGES 1 and 2), against a launch of the compiled net per sample (which reads the
    weights from memory each time). N totals: first run + (N - 1) per sample, checked against
    whole runs of the stream (one launch each) at N = 100 (and 1000 without ``--quick``)."""
    inputs, outputs = (256, 128) if quick else (1024, 256)
    whole = PERSISTENT_WHOLE_QUICK if quick else PERSISTENT_WHOLE
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((outputs, inputs)), rng.standard_normal((1, inputs))
    net = Net([FC(w)], x.shape, np.float64, engine=engine)
    net.compile()
    net.copy_constant()
    y, stats = net.run(x)
    runs = {}
    for stages in (3, 1, 2):
        device = Device(machine=Machine())
        kernel = PersistentFC(w, device, stages=stages)
        kernel.copy_constant()
        counts = (2, 4) + (whole if stages == 3 else ())
        ins, outs = [device.malloc(x.nbytes) for _ in range(counts[-1])], \
            [device.malloc(y.nbytes) for _ in range(counts[-1])]
        for block in ins:
            device.copy_in(block, x)
        runs[stages] = {count: kernel.compute(ins[:count], outs[:count], engine=engine).cycles
                        for count in counts}
        if stages == 3 and not all(np.allclose(device.copy_out(b, y.shape, np.float64), y,
                                               rtol=1e-12, atol=1e-12) for b in outs):
            raise RuntimeError("the persistent FC and the compiled net differ")
    per = {stages: (cycles[4] - cycles[2]) / 2 for stages, cycles in runs.items()}
    bound = max(per[1], per[2])
    first = runs[3][2] - per[3]
    errors = {n_: abs(first + (n_ - 1) * per[3] - runs[3][n_]) / runs[3][n_] for n_ in whole}
    return dict(layer=f"FC {inputs}->{outputs} f64", t_launch=stats.cycles,
                per_sample=per[3], t_c=per[1], t_transfer=per[2], bound_ratio=per[3] / bound,
                first=first, weight_bytes=w.nbytes,
                check_error=max(errors.values()), whole_errors=errors,
                totals={n_: {"launch_per_sample": n_ * stats.cycles,
                             "persistent": first + (n_ - 1) * per[3],
                             "persistent_whole": runs[3].get(n_)} for n_ in COUNTS})


def _stage_runs(make, x, y_nbytes: int, counts, engine: str) -> tuple:
    """Whole streams of `counts` samples of `x` through the kernel ``make(device, stages)``
    builds, for stages 3 (the kernel), 1 (its compute alone) and 2 (its transfers alone; those
    only at the counts up to PER_SAMPLE's last): {stages: {count: cycles}} and the outputs of
    the kernel's last stream (device, blocks)."""
    runs = {}
    for stages in (3, 1, 2):
        device = Device(machine=Machine())
        kernel = make(device, stages)
        kernel.copy_constant()
        mine = counts if stages == 3 else tuple(c for c in counts if c <= PER_SAMPLE[-1])
        ins = [device.malloc(x.nbytes) for _ in range(mine[-1])]
        outs = [device.malloc(y_nbytes) for _ in range(mine[-1])]
        for block in ins:
            device.copy_in(block, x)
        runs[stages] = {count: kernel.compute(ins[:count], outs[:count], engine=engine).cycles
                        for count in mine}
        if stages == 3:
            result = device, outs
    return runs, result


def run_persistent_conv(quick: bool = False, engine: str = "c") -> dict:
    """Conv C_i = 16, 32x32 (``--quick`` 16x16), 32 kernels 3x3, pad 1, float32, its weights
    resident in the LDMs (QingLong3, device side only): the persistent kernel's per sample
    from whole streams of PER_SAMPLE samples (the ring's first samples overlap the weights'
    load), its compute alone and its transfers alone (RING_STAGES 1 and 2), against a launch
    per sample of the compiled net (the library's implicit GEMM, T_c) and of this kernel (a
    stream of 1: its weights DMA'd each time). N totals: first + (N - 1) per sample, checked
    against whole streams at N = 30 (``--quick``) or 100."""
    side = 16 if quick else 32
    whole = (30,) if quick else (100,)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    x = rng.standard_normal((16, side, side)).astype(np.float32)
    net = Net([Conv(w, padding=1)], (1, *x.shape), np.float32, engine=engine)
    net.compile()
    net.copy_constant()
    y, stats = net.run(x[None])
    runs, (device, outs) = _stage_runs(
        lambda device, stages: PersistentConv(w, x.shape, device, padding=1, stages=stages),
        x, y.nbytes, (1, *PER_SAMPLE) + whole, engine)
    scale = np.abs(y).max()
    if not all(np.allclose(device.copy_out(b, y.shape[1:], np.float32), y[0], rtol=0,
                           atol=1e-5 * scale) for b in outs):
        raise RuntimeError("the persistent Conv and the compiled net differ")
    low, high = PER_SAMPLE
    per = {stages: (cycles[high] - cycles[low]) / (high - low) for stages, cycles in runs.items()}
    first = runs[3][low] - (low - 1) * per[3]
    errors = {n_: abs(first + (n_ - 1) * per[3] - runs[3][n_]) / runs[3][n_] for n_ in whole}
    return dict(layer=f"Conv 16x{side}x{side}, 32 k 3x3 f32", t_launch=stats.cycles,
                t_kernel_launch=runs[3][1], per_sample=per[3], t_c=per[1], t_transfer=per[2],
                bound_ratio=per[3] / max(per[1], per[2]), first=first,
                weight_bytes=w.size * 8, whole_errors=errors,
                totals={n_: {"launch_per_sample": n_ * stats.cycles,
                             "kernel_per_sample": n_ * runs[3][1],
                             "persistent": first + (n_ - 1) * per[3],
                             "persistent_whole": runs[3].get(n_)} for n_ in COUNTS})


def _persistent_totals(totals) -> list:
    return [f"  N = {n:>5}: {total['launch_per_sample']:>13,} vs {total['persistent']:>13,.0f} "
            f"cycles ({total['launch_per_sample'] / total['persistent']:.2f}x)"
            + (f"; a whole run {total['persistent_whole']:,}" if total.get("persistent_whole")
               else "")
            for n, total in totals.items()]


def _resident_row(row, launches: str) -> str:
    """The line of a kernel with its weights resident: `launches` (a launch per sample's
    cycles), the per sample against its bound, the whole runs' errors; then the N totals."""
    line = (f"{row['layer']} (w {row['weight_bytes']:,} B resident in the LDMs): a launch per "
            f"sample {launches}; persistent {row['per_sample']:,.1f} per sample = "
            f"{row['bound_ratio']:.3f} x max(T_c {row['t_c']:,.1f}, T_in + T_out "
            f"{row['t_transfer']:,.1f}); first sample {row['first']:,.0f} (the weights' DMA); "
            "N totals checked against whole runs: " + ", ".join(
                f"N = {n:,} {error:.2%}" for n, error in row["whole_errors"].items()))
    return "\n".join([line] + _persistent_totals(row["totals"]))


def format_persistent_fc(row) -> str:
    return _resident_row(row, f"{row['t_launch']:,} cycles")


def format_persistent_conv(row) -> str:
    return _resident_row(row, f"{row['t_launch']:,} cycles (the compiled net), "
                              f"{row['t_kernel_launch']:,} (this kernel, a stream of 1)")


def format_persistent(row) -> str:
    lines = [f"{row['layer']}: a launch per sample T_c = {row['t_c']:,} cycles; persistent "
             f"{row['per_sample']:,.0f} per sample = {row['bound_ratio']:.3f} x T_in + T_out "
             f"({row['transfer_bound']:,.0f}); N totals checked against a whole run: "
             f"{row['check_error']:.2%}"]
    return "\n".join(lines + _persistent_totals(row["totals"]))


def format_table(rows) -> str:
    lines = [f"{'layer':<24} {'N':>5} {'per-sample':>14} {'compile once':>14} "
             f"{'const. once':>14} {'pipelined':>14} {'gain':>6} {'pipe.':>6}"
             "   (simulated cycles; pipelined: the model)"]
    for row in rows:
        for n, total in row["totals"].items():
            lines.append(f"{row['layer']:<24} {n:>5} {total['per_sample']:>14,} "
                         f"{total['compile_once']:>14,} {total['constants_once']:>14,} "
                         f"{total['pipelined']:>14,} "
                         f"{total['per_sample'] / total['constants_once']:>5.2f}x "
                         f"{total['per_sample'] / total['pipelined']:>5.2f}x")
    lines.append("")
    lines.append(f"{'layer':<24} {'constants B':>11} {'copy(C)':>9} {'T_op':>9} {'T_c':>9} "
                 f"{'whole N':>7} {'err c.once':>10} {'per-sample':>10} {'host s/op':>9} "
                 f"{'s/compute':>9} {'compile s':>9}")
    for row in rows:
        lines.append(f"{row['layer']:<24} {row['constants_bytes']:>11,} "
                     f"{row['copy_constants']:>9,} {row['t_op']:>9,} {row['t_c']:>9,} "
                     f"{row['whole_samples']:>7,} {row['whole_error']:>10.2%} "
                     f"{row['per_sample_whole_error']:>10.2%} {row['op_seconds']:>9.3f} "
                     f"{row['compute_seconds']:>9.3f} {row['compile_seconds']:>9.3f}")
    return "\n".join(lines)
