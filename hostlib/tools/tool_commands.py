"""Host-library commands: `swsim bench ...`, `swsim analyze` (steady-state loop analysis),
`swsim report` (run a kernel as `swsim run` does, then report on the run), `swsim train`,
`swsim parax train` and `swsim onnx`."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Optional

from ...errors import ArgumentError
from ...vm.vm_commands import add_run_arguments, count_argument, engine_argument, run_from_args
from ...vm.config import PRESETS, VMConfig
from ...vm.machine import Machine
from . import autodnn, graph, train
from . import parax as parax_cli
from .analyze import DEFAULT_ITERATIONS, MAX_ITERATIONS, analyze_loop
from .bench import as_json
from .bench import redsync_accuracy
from .bench import speed as speed_bench


def register(subparsers) -> None:
    train.register(subparsers)
    parax_cli.register(subparsers)
    autodnn.register(subparsers)
    graph.register(subparsers)
    bench = subparsers.add_parser("bench", help="run a benchmark and print its table")
    which = bench.add_subparsers(dest="bench", metavar="BENCHMARK")
    which.required = True

    fidelity = which.add_parser("fidelity", help="measure MACHINE.md §11 quantities on the "
                                "emulator beside their published values")
    engine_argument(fidelity)
    fidelity.add_argument("--quick", action="store_true",
                          help="skip the 4 slowest measurements (about half the time)")
    fidelity.add_argument("--json", nargs="?", const="-", metavar="FILE",
                          type=json_file_argument,
                          help="write the rows as JSON to FILE (no FILE: print them instead "
                          "of the table)")
    fidelity.set_defaults(func=_fidelity)

    speed = which.add_parser("speed", help="simulated instructions per host second")
    speed.add_argument("--repeats", type=count_argument(1), default=3,
                       help="runs per case (median taken), at least 1")
    speed.add_argument("--scale", type=scale_argument, default=1.0,
                       help=f"workload size factor, {speed_bench.MIN_SCALE} or more")
    speed.add_argument("--quick", action="store_true",
                       help=f"the loops at scale {speed_bench.QUICK_SCALE}, smaller kernels")
    speed.add_argument("--only", choices=speed_bench.TABLES, action="append",
                       help="run only this table (repeatable; default: all)")
    speed.add_argument("--json", nargs="?", const="-", metavar="FILE",
                       type=json_file_argument,
                       help="write the rows as JSON to FILE (no FILE: print them)")
    speed.set_defaults(func=_speed)

    gemm = which.add_parser("gemm", help="swGEMM: thesis §4.3 experiments in miniature")
    gemm.add_argument("--quick", action="store_true", help="smaller sizes (about a minute)")
    gemm.add_argument("--only", type=int, action="append", metavar="N", choices=range(1, 6),
                      help="run only experiment N (1-5; repeatable)")
    engine_argument(gemm)
    _json_argument(gemm)
    gemm.set_defaults(func=_gemm)

    qinglong = which.add_parser("qinglong", help="N inferences of a layer or net per sample, "
                                "compiled once, with constants copied once and pipelined "
                                "(QingLong)")
    qinglong.add_argument("--quick", action="store_true",
                          help="FC 1024->256, Conv on 16x16, the net on 8x8, fewer whole runs")
    _json_argument(qinglong)
    engine_argument(qinglong)
    qinglong.add_argument("--whole", type=count_argument(1), default=0, metavar="N",
                          help="check the totals against whole runs of N samples (default 10, "
                               "--quick 2)")
    qinglong.set_defaults(func=_qinglong)

    ops = which.add_parser("ops", help="memory bandwidth of the DNN memory-bound operators at "
                           "realistic sizes (sampled and extrapolated)")
    ops.add_argument("--quick", action="store_true", help="one case of each operator kind")
    engine_argument(ops)
    _json_argument(ops)
    ops.set_defaults(func=_ops)

    allreduce = which.add_parser("allreduce", help="ring / Rabenseifner / Topawa: Fig. 7.7 "
                                 "and 7.8 by the α-β model, checked against real MPI runs")
    allreduce.add_argument("--quick", action="store_true", help="real runs at p = 2, 4 only")
    allreduce.add_argument("--no-real", action="store_true",
                           help="the model only (no mpiexec runs)")
    allreduce.add_argument("--supernode-size", type=count_argument(1), default=256,
                           metavar="Q", help="nodes per supernode in the model (default 256)")
    allreduce.add_argument("--plot", metavar="FILE.png", help="Fig. 7.7 / 7.8 panels as a PNG")
    _json_argument(allreduce)
    allreduce.set_defaults(func=_allreduce)

    lstm = which.add_parser("lstm", help="tensorized LSTM vs the cuDNN-style baseline: the 72 "
                            "cases of thesis Listing 5.2 (sampled and extrapolated)")
    lstm.add_argument("--quick", action="store_true", help="4 cases and 1 validation run")
    engine_argument(lstm)
    lstm.add_argument("--reserve", action="store_true",
                      help="the tensorized forward writes the reserve for training (the "
                      "baseline always does)")
    _json_argument(lstm)
    lstm.set_defaults(func=_lstm)

    conv = which.add_parser("conv", help="convolution: thesis §5.4 generality test (Listing "
                            "5.1, 225 cases), every algorithm's efficiency, sampled and "
                            "validated")
    conv.add_argument("--quick", action="store_true", help="a subset of the cases")
    conv.add_argument("--out", default="conv_bench.png", metavar="FILE.png",
                      help="the box plot (default conv_bench.png)")
    conv.add_argument("--jobs", type=count_argument(1), default=2,
                      help="processes (default 2)")
    conv.add_argument("--no-validate", dest="validate", action="store_false",
                      help="skip the whole runs of the small cases")
    engine_argument(conv)
    _json_argument(conv)
    conv.set_defaults(func=_conv)

    generated = which.add_parser("autodnn", help="swAutoDNN: generated vs hand-written implicit "
                                 "convolution on VGG-16/ResNet-50/YOLO layers, Listing 5.1 and "
                                 "Listing 6.1's large kernels, model vs measured tuning "
                                 "(sampled)")
    generated.add_argument("--quick", action="store_true",
                           help="no network layers, 2 Listing 5.1 cases per B, 2 Listing 6.1 "
                           "cases")
    _json_argument(generated)
    engine_argument(generated)
    generated.set_defaults(func=_autodnn_bench)

    train_bench = which.add_parser("train", help="img/s of AlexNet, VGG-16 and ResNet-50 on "
                                   "the chip (Table 7.2, Fig. 7.6) from per-layer sampled "
                                   "simulation")
    train_bench.add_argument("--quick", action="store_true",
                             help="AlexNet unless --network; each conv pass samples only the "
                                  "algorithm algo=\"auto\" picks (not every supported one)")
    train_bench.add_argument("--network", action="append", choices=("alexnet", "vgg16",
                                                                     "resnet50"),
                             help="estimate only this network (repeatable)")
    train_bench.add_argument("--detail", action="store_true",
                             help="print every layer's passes (with --thesis-kernels: the "
                                  "dearest passes of the last step and Table 7.2 split by "
                                  "Fig. 7.6's conv share)")
    train_bench.add_argument("--thesis-kernels", action="store_true",
                             help="the gap to Table 7.2: re-estimate with the thesis' "
                                  "convolutions, then the hardware's launch cost and DMA model, "
                                  "and print each step's factor")
    train_bench.add_argument("--cache", metavar="FILE",
                             help="keep the estimates in FILE after each one, so an "
                                  "interrupted run resumes (a FILE of other sources or another "
                                  "default preset is not read)")
    engine_argument(train_bench)
    _json_argument(train_bench)
    train_bench.set_defaults(func=_train_bench)

    redsync = which.add_parser("redsync", help="RedSync: top-0.1 %% selection on the CPEs "
                               "against layer size (Fig. 8.3) and the sparse/dense scaling "
                               "model (Figs. 8.7-8.10)")
    redsync.add_argument("--quick", action="store_true",
                         help="sizes up to 1 MB simulated, AlexNet only; with --accuracy: "
                              f"{redsync_accuracy.QUICK_STEPS} steps, runs "
                              f"{', '.join(redsync_accuracy.QUICK_RUNS)}, "
                              f"{redsync_accuracy.WARMUP} warm-up steps")
    _json_argument(redsync)
    engine_argument(redsync)
    redsync.add_argument("--accuracy", action="store_true",
                         help="instead: train on the digits under mpiexec, dense against RGC "
                              "(Table 8.1's shape; minutes per run)")
    redsync.add_argument("--net", choices=list(redsync_accuracy.NETS), default="lenet",
                         help="--accuracy's net")
    redsync.add_argument("--steps", type=count_argument(1), help="--accuracy's steps "
                         f"(default {redsync_accuracy.STEPS})")
    redsync.add_argument("--test-every", type=count_argument(1),
                         help="--accuracy: test every N steps too (default: at the end)")
    redsync.add_argument("--ranks", type=count_argument(2), default=redsync_accuracy.RANKS,
                         help="--accuracy's MPI ranks")
    redsync.add_argument("--seed", type=count_argument(0),
                         help="--accuracy: the solver's random_seed instead of its prototxt's")
    redsync.add_argument("--warmup", type=count_argument(0),
                         help="--accuracy: the RGC runs' dense warm-up steps (default: "
                              f"{redsync_accuracy.WARMUP}, LeNet 5 epochs)")
    redsync.add_argument("--runs", nargs="+", choices=list(redsync_accuracy.RUNS),
                         metavar="RUN", help="--accuracy's runs, of: "
                         f"{', '.join(redsync_accuracy.RUNS)} (default: "
                         f"{', '.join(redsync_accuracy.TABLE_RUNS)})")
    redsync.set_defaults(func=_redsync)

    parax = which.add_parser("parax", help="ParaX's §1.8 block in modes per_cg / per_cpe / "
                             "delayed start, per-op cycles, the overlap bound, intensity, "
                             "PS / RAR / GS, the MLP's training step per CPE")
    parax.add_argument("--quick", action="store_true",
                       help="4 launch groups at 3 intervals only, no delayed per_group")
    _json_argument(parax)
    engine_argument(parax)
    parax.add_argument("--explain", action="store_true",
                       help="show the terms of the intensity formulas behind each tag")
    parax.set_defaults(func=_parax)
    light = which.add_parser("light", help="onnx's light models (seeded weights) on the VM "
                             "against onnxruntime: error, host and simulated time "
                             "(docs/graph.md)")
    light.add_argument("--quick", action="store_true", help="SqueezeNet only")
    light.add_argument("--model", action="append", choices=_light_models(),
                       help="run only this model (repeatable)")
    _json_argument(light)
    light.set_defaults(func=_light)
    graph_bench = which.add_parser("graph", help="swFLOWpro's Tables 3-5 (per-op MPE vs CPE time, "
                             "whole-pass ratio, conv share) and the speed-up of 4 (6) core "
                             "groups without and with split, estimated; a simulated "
                             "training-step table; ResNet-50 at batch 1 by sampled simulation, "
                             "checked against a smaller ResNet run whole (docs/graph.md)")
    graph_bench.add_argument("--quick", action="store_true",
                       help="ResNet-50 only, from the models (nothing simulated); the "
                            "training step at batch 16, one step per row; the sampled "
                            "check at 16x16, no ResNet-50 at batch 1")
    graph_bench.add_argument("--model", action="append", choices=_graph_models(),
                       help="this model only (repeatable)")
    graph_bench.add_argument("--batch", type=int, default=32, metavar="N",
                       help="the minibatch (default 32)")
    _json_argument(graph_bench)
    graph_bench.set_defaults(func=_graph)

    hope = which.add_parser("hope", help="HOPE's DAG schedulers on an Inception-style block "
                            "and a tiny LSTM: makespans planned and run on the VM "
                            "(docs/hope.md)")
    hope.add_argument("--quick", action="store_true", help="smaller graphs")
    hope.add_argument("--graph", action="append", choices=("inception", "lstm"),
                      help="run only this graph (repeatable)")
    hope.add_argument("--submeshes", action="store_true",
                      help="devices: row blocks of CG 0's mesh, the graphs as Souffle TEs, "
                      "each plan one generated launch")
    _json_argument(hope)
    hope.set_defaults(func=_hope)

    souffle = which.add_parser("souffle", help="Souffle's passes on a tiny BERT block, a 2-layer "
                               "LSTM and Inception/MobileNet-like Conv blocks: the graph "
                               "engine against generated fused kernels, the ablation "
                               "(docs/souffle.md)")
    souffle.add_argument("--quick", action="store_true",
                         help="BERT sequence 16, hidden 32; LSTM hidden 32, 4 steps; "
                         "Conv blocks 8 channels")
    souffle.add_argument("--explain", action="store_true",
                         help="also print why each pass applied or did not")
    _json_argument(souffle)
    souffle.set_defaults(func=_souffle)

    analyze = subparsers.add_parser("analyze", help="steady-state cycles per iteration of a "
                                    "loop under the issue rules (like llvm-mca)")
    analyze.add_argument("program", metavar="KERNEL", help="assembly source (.s) or program (.swo)")
    analyze.add_argument("--loop", required=True, metavar="LABEL|LINE",
                         help="the loop head: a label, or a source line (numeric labels), "
                              "optionally FILE:LINE")
    analyze.add_argument("--iterations", type=count_argument(1, MAX_ITERATIONS),
                         default=DEFAULT_ITERATIONS, metavar="N",
                         help=f"iterations to simulate (default {DEFAULT_ITERATIONS}, at most "
                              f"{MAX_ITERATIONS})")
    analyze.add_argument("--entry", metavar="NAME", help="look for the loop in this function")
    analyze.add_argument("--instance", type=count_argument(1), default=1, metavar="K",
                         help="the Kth loop when the line is expanded several times (macros)")
    analyze.add_argument("--config", default="sw26010", choices=sorted(PRESETS),
                         metavar="PRESET")
    analyze.add_argument("--json", action="store_true")
    analyze.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    analyze.set_defaults(func=_analyze)

    report = subparsers.add_parser("report", help="run a kernel (arguments of `swsim run`) "
                                   "and report EE, idle reasons, DMA, GFLOPS and a roofline")
    add_run_arguments(report)
    report.add_argument("--flops", type=flops_argument, metavar="N",
                        help="floating-point operations the run performs (default: those "
                             "the VM counted)")
    report.add_argument("--roofline", metavar="FILE.png", help="write the roofline plot")
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=_report)


class StepBar:
    """Progress of a benchmark on stderr (when it is a terminal): a tqdm bar over its steps,
    told each step's name as it starts, and the cycle a simulation within the step has reached
    (an int, from ``Machine.run``'s progress callback)."""

    def __init__(self, total: int, enabled: Optional[bool] = None):
        from tqdm import tqdm
        enabled = sys.stderr.isatty() if enabled is None else enabled
        self.bar = tqdm(total=total, unit="step", file=sys.stderr, disable=not enabled)
        self.started = 0

    def __call__(self, step) -> None:
        if isinstance(step, int):
            self.bar.set_postfix_str(f"simulating, cycle {step:,}")
            return
        self.bar.update(self.started - self.bar.n)
        self.started += 1
        self.bar.set_description(step)

    def close(self) -> None:
        self.bar.update(self.started - self.bar.n)
        self.bar.close()


def _fidelity(args) -> int:
    from .bench import fidelity
    bar = StepBar(len(fidelity.QUICK_MEASUREMENTS if args.quick else fidelity.MEASUREMENTS))
    try:
        rows = fidelity.run(args.engine, progress=bar, quick=args.quick)
    finally:
        bar.close()
    if args.json:
        as_json.dump(args.json, rows)
    if args.json != "-":
        print(fidelity.format_table(rows))
    return 0


def flops_argument(text: str) -> float:
    """--flops of `report`: a finite count >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text[:40]}")
    return value


def scale_argument(text: str) -> float:
    """--scale of `bench speed`: a finite factor large enough that every workload has work."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not speed_bench.MIN_SCALE <= value <= speed_bench.MAX_SCALE:
        raise argparse.ArgumentTypeError(f"expected a factor {speed_bench.MIN_SCALE}.."
                                         f"{speed_bench.MAX_SCALE}, got {text}")
    return value


def _with_bar(args, steps: int, run, format_report) -> int:
    """A bench's run(progress) under a StepBar of `steps`; its table printed, --json written."""
    bar = StepBar(steps)
    try:
        results = run(bar)
    finally:
        bar.close()
    print(format_report(results))
    if args.json:
        as_json.dump(args.json, results)
    return 0


def _gemm(args) -> int:
    from .bench import gemm
    return _with_bar(args, len(args.only) if args.only else len(gemm.EXPERIMENTS),
                     lambda bar: gemm.run(quick=args.quick, engine=args.engine,
                                          only=args.only, progress=bar),
                     gemm.format_report)


def _lstm(args) -> int:
    from .bench import lstm
    cases = lstm.QUICK_CASES if args.quick else lstm.CASES
    checks = lstm.QUICK_VALIDATION if args.quick else lstm.VALIDATION
    bar = StepBar(len(cases) + len(checks))
    try:
        rows, validation = lstm.run(quick=args.quick, engine=args.engine, progress=bar,
                                    reserve=args.reserve)
    finally:
        bar.close()
    print(lstm.format_report(rows, validation))
    if args.json:
        as_json.dump(args.json, dict(rows=rows, validation=[
            dict(case=case, tensorized_error=tensorized, baseline_error=baseline)
            for case, (tensorized, baseline) in validation]))
    return 0


def _ops(args) -> int:
    from .bench import ops
    results = ops.run(engine=args.engine, cases=ops.QUICK_CASES if args.quick else ops.CASES)
    print(ops.format_table(results))
    if args.json:
        as_json.dump(args.json, results)
    return 0


def _qinglong(args) -> int:
    from .bench import qinglong
    rows = qinglong.run(quick=args.quick, engine=args.engine, whole=args.whole)
    persistent = qinglong.run_persistent(quick=args.quick, engine=args.engine)
    persistent_fc = qinglong.run_persistent_fc(quick=args.quick, engine=args.engine)
    persistent_conv = qinglong.run_persistent_conv(quick=args.quick, engine=args.engine)
    print(qinglong.format_table(rows))
    print()
    print(qinglong.format_persistent(persistent))
    print(qinglong.format_persistent_fc(persistent_fc))
    print(qinglong.format_persistent_conv(persistent_conv))
    if args.json:
        as_json.dump(args.json, dict(layers=rows, persistent=persistent,
                                     persistent_fc=persistent_fc,
                                     persistent_conv=persistent_conv))
    return 0


def _train_bench(args) -> int:
    from .bench import train_nets
    names = args.network or (train_nets.QUICK_NETWORKS if args.quick else train_nets.NETWORKS)
    runs = train_nets.gap_runs() if args.thesis_kernels else 1
    bar = StepBar(runs * sum(len(train_nets.NETWORKS[name].layers) for name in names))
    cache = train_nets.EstimateCache(args.cache) if args.cache else None
    try:
        if args.thesis_kernels:
            results = train_nets.run_gap(tuple(names), args.engine, bar, args.quick, cache)
        else:
            results = train_nets.run(engine=args.engine, progress=bar, networks=tuple(names),
                                     quick=args.quick, cache=cache)
    finally:
        bar.close()
    print(train_nets.format_gap(results, detail=args.detail) if args.thesis_kernels
          else train_nets.format_report(results, detail=args.detail))
    if args.json:
        as_json.dump(args.json, results)
    return 0


def _parax(args) -> int:
    from .bench import parax
    bar = StepBar(12 if args.quick else 33)
    try:
        result = parax.run(quick=args.quick, engine=args.engine, progress=bar)
    finally:
        bar.close()
    print(parax.format_report(result, explain=args.explain))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2, default=str)
    return 0
def _light_models():
    from .bench.light import MODELS
    return MODELS


def _light(args) -> int:
    from .bench import light
    names = args.model or (light.QUICK_MODELS if args.quick else light.MODELS)
    bar = StepBar(len(names))
    try:
        results = light.run(models=names, progress=bar)
    finally:
        bar.close()
    print(light.format_report(results))
    if args.json:
        as_json.dump(args.json, light.as_json(results))
    return 0 if all(r.matches for r in results) else 1


def _graph_models():
    from .bench.graph import MODELS
    return tuple(MODELS)


def _graph(args) -> int:
    from ..graph import GraphError
    from .bench import graph as graph_bench
    if args.batch < 1:
        raise GraphError(f"--batch must be at least 1, got {args.batch}")
    return _with_bar(args, 0, lambda bar: graph_bench.run(
        quick=args.quick, models=args.model, batch=args.batch, progress=bar),
        graph_bench.format_report)


def _hope(args) -> int:
    from .bench import hope
    graphs = tuple(args.graph or hope.GRAPHS)
    run = hope.run_submeshes if args.submeshes else hope.run
    with contextlib.closing(StepBar(hope.steps(graphs, args.submeshes))) as bar:
        results = run(quick=args.quick, graphs=graphs, progress=bar)
    print(hope.format_report(results))
    if args.json:
        as_json.dump(args.json, hope.as_json(results))
    return 0 if all(r.max_relative_error <= hope.RTOL for r in results) else 1


def _souffle(args) -> int:
    from .bench import souffle
    result = souffle.run(quick=args.quick)
    print(souffle.format_report(result, explain=args.explain))
    if args.json:
        as_json.dump(args.json, result)
    return 0 if all(r.max_error <= souffle.RTOL for r in souffle.all_rows(result)) else 1


def _json_argument(parser) -> None:
    parser.add_argument("--json", metavar="FILE", type=json_file_argument,
                        help="also write the results as JSON to FILE")


def json_file_argument(text: str) -> str:
    """--json FILE of a bench: a file in an existing directory (checked before the run)."""
    directory = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text) or not os.path.isdir(directory):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: not a file in an existing "
                                         "directory")
    return text


def _allreduce(args) -> int:
    from .bench import allreduce
    real = not args.no_real
    bar = StepBar(2 if args.quick else 3) if real else None
    try:
        result = allreduce.run(real=real, quick=args.quick, supernode_size=args.supernode_size,
                               progress=bar)
    finally:
        if bar:
            bar.close()
    print(allreduce.format_report(result))
    if args.plot:
        allreduce.plot(result, args.plot)
    if args.json:
        as_json.dump(args.json, result)
    return 0


def _redsync(args) -> int:
    if args.accuracy:
        return _redsync_accuracy(args)
    from .bench import redsync
    result = redsync.run(quick=args.quick, engine=args.engine)
    print(redsync.format_report(result))
    if args.json:
        redsync.write_json(result, args.json)
    return 0


def _redsync_accuracy(args) -> int:
    from .bench import redsync_accuracy as accuracy
    quick = args.quick and not (args.steps or args.runs)
    steps = args.steps or (accuracy.QUICK_STEPS if args.quick else accuracy.STEPS)
    runs = args.runs or (accuracy.QUICK_RUNS if args.quick else accuracy.TABLE_RUNS)
    dense = []

    def report(row):
        if row["run"] == "sgd":
            dense.append(accuracy.mean_bytes(row))
        print(accuracy.format_row(row, dense[0] if dense else None), flush=True)
    # a quick run keeps a short warm-up, or LeNet's RGC would be dense throughout
    warmup = accuracy.WARMUP if args.warmup is None and args.quick else args.warmup
    rows = accuracy.run(args.net, steps, runs, args.ranks, args.test_every, args.seed,
                        warmup, progress=report)
    if args.json:
        as_json.dump(args.json, dict(quick=quick, rows=rows))
    return 0


def _conv(args) -> int:
    import resource
    import time

    from tqdm import tqdm

    from .bench import conv
    start = time.perf_counter()
    bar = tqdm(total=len(conv.cases(args.quick)), unit="case", file=sys.stderr,
               disable=not sys.stderr.isatty())
    try:
        results = conv.run(quick=args.quick, engine=args.engine, jobs=args.jobs,
                           validate=args.validate,
                           progress=lambda done, total: bar.update(done - bar.n))
    finally:
        bar.close()
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                 resource.RUSAGE_CHILDREN)]
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(conv.format_report(results, time.perf_counter() - start, cpu))
    conv.box_plot(results, args.out)
    print(f"box plot: {args.out}")
    if args.json:
        as_json.dump(args.json, results)
    return 0


def _autodnn_bench(args) -> int:
    import time

    from .bench import autodnn as bench
    start = time.perf_counter()
    bar = StepBar(len(bench.jobs(args.quick)))
    try:
        results = bench.run(quick=args.quick, engine=args.engine,
                            progress=lambda done, total: bar(f"case {done}/{total}"))
    finally:
        bar.close()
    print(bench.format_report(results, time.perf_counter() - start))
    if args.json:
        as_json.dump(args.json, bench.to_json(results))
    return 0


def _speed(args) -> int:
    rows = speed_bench.run(repeats=args.repeats, scale=args.scale, quick=args.quick,
                           tables=args.only or speed_bench.TABLES)
    if args.json:
        as_json.dump(args.json, rows)
    if args.json != "-":
        print(speed_bench.format_table(rows))
    return 0


def _analyze(args) -> int:
    program = Machine.program(Path(args.program), tuple(args.include_dirs))
    analysis = analyze_loop(program, args.loop, args.iterations, VMConfig.preset(args.config),
                            args.entry, args.instance, source_file=args.program)
    print(json.dumps(analysis.to_dict(), indent=2) if args.json else analysis)
    return 0


def _check_png_path(option: str, path: str) -> None:
    """Refused before the run: a directory, or a name the plotting library would write as
    another format or under another name (it appends .png to a name without a suffix)."""
    if os.path.isdir(path):
        raise ArgumentError(f"{option} {path}: is a directory; give the .png file to write")
    if not path.lower().endswith(".png"):
        raise ArgumentError(f"{option} {path}: the plot is a PNG; give a path ending in .png")


def _report(args) -> int:
    from .report import run_report
    if args.roofline:
        _check_png_path("--roofline", args.roofline)
    _, _, result = run_from_args(args)
    report = run_report(result, args.flops)
    if args.roofline:
        report.roofline_png(args.roofline)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report)
    return 0
