"""`swsim bench parax`: ParaX's miniature (digest §1.8) on one core group. The block
4 x [conv 3x3 (16 -> 16, 8x8) -> BN -> ReLU], f32, every operator reading and writing main
memory, on 64 samples in mode A per_cg (a barrier after every operator), B per_cpe, C per_cpe
with delayed start (n launch groups, interval t: one BN + ReLU, and k/2n of a layer's
period for k = 1..4, n in {2, 4, 8, 64}; --quick: n = 4, k = 2, 3) and with seeded jitter,
D per_group(8); makespan, samples per megacycle, DMA utilisation, P0 busy fraction;
per-operator cycles per call at 1/4/16/64 instances on the whole array (per_cg,
per_group(16), per_group(4), per_cpe), in lock-step and delayed, on the default DMA model
and on one costing bytes only (the signature); the overlap bound and the makespan floor;
formulas 1-3 beside the measured intensity; the gradient synchronisation of the MLP 256 -> 64 -> 10
(17098 f32) by PS, RAR and GS at 1/4/16/64 instances; and the MLP's training step on
single-CPE instances (kernels/parax/mlp.s) followed by each synchronisation, and the same for
a small CNN (kernels/parax/cnn.s: conv, BN on the batch statistics, ReLU, quadrant pool, FC,
softmax; BN's running statistics synchronised too), at 1/4/16/64 instances (the full run adds
2, 8 and 32: where RAR overtakes PS, where each peaks); the conv's and [BN, ReLU]'s backward on single-CPE instances. Every block run's output is checked bit for
bit against mode A's, and A's against numpy (float64, 1e-5).
"""
from __future__ import annotations

import numpy as np

from ....vm import Machine
from ...parax import block_ops, bn_relu_backward, cnn, conv_backward, mlp, run_block
from ...parax.block import OP_KINDS
from ...parax.sync import synchronise
from ...parax.model import (bandwidth_only, conv_intensity, conv_terms, dma_engine_cycles,
                            elementwise_intensity, machine_balance, makespan_floor,
                            measured_intensity, overlap_bound)

LAYERS = 4
SAMPLES = 64
ROWS = 8
GROUPS = (2, 4, 8, 64)
INSTANCES = {1: dict(mode="per_cg"), 4: dict(mode="per_group", group=16),
             16: dict(mode="per_group", group=4), 64: dict(mode="per_cpe")}
TOLERANCE = 1e-5
MLP_PARAMETERS = 256 * 64 + 64 + 64 * 10 + 10
SYNC_INSTANCES = (1, 4, 16, 64)
KNEE_INSTANCES = (1, 2, 4, 8, 16, 32, 64)     # the full run's training grid
MLP_BATCH = 8                  # samples per instance in the training step
CNN_BATCH = 4                  # the CNN's (kernels/parax/cnn.s)
SIGNATURE_GROUPS = 4           # the signature's delayed start: 4 launch groups, 3/8 of a
SIGNATURE_INTERVAL = 3 / 8     # layer's uncontended period apart (the best quick schedule)


def workload(samples=SAMPLES, rows=ROWS, layers=LAYERS, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, rows, 8, 16)).astype(np.float32)
    w = (rng.standard_normal((layers, 3, 3, 16, 16)) / 12).astype(np.float32)
    scale = (1 + rng.standard_normal((layers, 16)) / 4).astype(np.float32)
    shift = (rng.standard_normal((layers, 16)) / 4).astype(np.float32)
    return x, w, scale, shift


def reference(x, w, scale, shift, ops):
    """numpy float64, rounded to float32 after every operator."""
    a = x.astype(np.float64)
    rows = a.shape[1]
    for kind, layer in ops:
        if kind == "conv":
            padded = np.zeros((a.shape[0], rows + 2, 10, 16))
            padded[:, 1:rows + 1, 1:9] = a
            out = np.zeros_like(a)
            for kh in range(3):
                for kw in range(3):
                    out += padded[:, kh:kh + rows, kw:kw + 8] @ w[layer, kh, kw].astype(np.float64)
            a = out
        elif kind == "bn":
            a = a * scale[layer] + shift[layer]
        else:
            a = np.where(a > 0, a, 0.0)
        a = a.astype(np.float32).astype(np.float64)
    return a.astype(np.float32)


def _row(name, run, **extra):
    return dict(name=name, mode=run.mode, instances=run.instances, cycles=run.cycles,
                samples_per_megacycle=run.samples_per_megacycle,
                dma_utilisation=run.dma_utilisation, p0_busy=run.p0_busy,
                per_call={k: run.cycles_per_call(k) for k in OP_KINDS}, **extra)


def run(quick: bool = False, engine: str = "c", progress=None) -> dict:
    """Every figure of the benchmark as a JSON-able dict."""
    x, w, scale, shift = workload()
    ops = block_ops(LAYERS)
    step = progress or (lambda name: None)

    def block(name, **kwargs):
        step(name)
        return run_block(x, w, scale, shift, engine=engine, machine=Machine(), **kwargs)

    mode_a = block("A per_cg", mode="per_cg")
    err = float(np.max(np.abs(mode_a.y - reference(x, w, scale, shift, ops))))
    if not err <= TOLERANCE:
        raise RuntimeError(f"mode A: wrong values on the VM (error {err:.3g})")
    step("1 instance")
    single = run_block(x[:1], w, scale, shift, instances=1, engine=engine)
    per_call = {k: single.cycles_per_call(k) for k in OP_KINDS}
    period = sum(per_call.values())               # one layer of one instance, uncontended
    runs = [_row("A per_cg", mode_a), _row("B per_cpe", block("B per_cpe"))]
    outputs = []
    for n in (4,) if quick else GROUPS:
        # one BN + ReLU (§1.8's suggestion) and a grid over a layer's period
        grid = (2, 3) if quick else (1, 2, 3, 4)
        for t in sorted({int(per_call["bn"] + per_call["relu"])}
                        | {int(k * period // (2 * n)) for k in grid}):
            r = block(f"C n={n} t={t}", launch_groups=n, interval=t)
            runs.append(_row(f"C n={n} t={t}", r, launch_groups=n, interval=t))
            outputs.append(r.y)
    r = block("C jitter", jitter=int(period), jitter_seed=0)
    runs.append(_row(f"C jitter [0,{int(period)}] seed 0", r, jitter=int(period)))
    outputs.append(r.y)
    mode_d = block("D per_group(8)", mode="per_group", group=8)
    runs.append(_row("D per_group(8)", mode_d))
    outputs.append(mode_d.y)
    if not quick:
        r = block("D delayed", mode="per_group", group=8, launch_groups=8,
                  interval=int(period // 8))
        runs.append(_row(f"D per_group(8) n=8 t={int(period // 8)}", r))
        outputs.append(r.y)

    by_name = {"per_cg": runs[0], "per_cpe": runs[1]}
    table = {}
    for n, kwargs in INSTANCES.items():
        row = by_name.get(kwargs["mode"])
        if row is None:
            r = block(f"{n} instances", **kwargs)
            outputs.append(r.y)
            row = _row(f"{n} instances", r)
        table[n] = dict(row["per_call"], cycles=row["cycles"])
    signature = {name: _signature(x, w, scale, shift, config, engine, step, outputs,
                                  lockstep=table if name == "sw26010" else None, quick=quick)
                 for name, config in (("sw26010", Machine().config),
                                      ("bandwidth-only", bandwidth_only(Machine().config)))}
    same = all(np.array_equal(y.view(np.int32), mode_a.y.view(np.int32)) for y in outputs)
    if not same:
        raise RuntimeError("a mode's output differs from mode A's")

    config = Machine().config
    beta = config.dma_transaction_bytes / config.dma_transaction_cycles
    sample_bytes = x[0].nbytes
    compute = [per_call[kind] for kind, _ in ops]
    # one call gets and puts a sample (the conv's get: a request per row): at the get peak
    # (the digest's beta), and in engine time
    conv_get = dma_engine_cycles(sample_bytes, 0, 0, config, gets=ROWS)
    engine_call = {kind: dma_engine_cycles(sample_bytes, sample_bytes, 1, config, gets=1)
                   for kind in OP_KINDS}
    engine_call["conv"] += conv_get - dma_engine_cycles(sample_bytes, 0, 0, config, gets=1)
    bound = overlap_bound(compute, [2 * sample_bytes / beta] * len(ops), SAMPLES)
    engine_bound = overlap_bound(compute, [engine_call[kind] for kind, _ in ops], SAMPLES)
    # The makespan no schedule can beat (model.makespan_floor): the first conv's vmas (one
    # per cycle) before any engine work but the first gets, then the rest of the engine's work
    first_compute = 2 * conv_intensity(1, 16, 16, 3, ROWS).macs / config.flops_per_cycle
    floor = makespan_floor(SAMPLES * sum(engine_call[kind] for kind, _ in ops),
                           SAMPLES * conv_get, first_compute, sum(compute))
    best = min(runs[1:], key=lambda r: r["cycles"])
    speedup = mode_a.cycles / best["cycles"]
    return dict(quick=quick, engine=engine, runs=runs, per_call_by_instances=table,
                single_instance_per_call=per_call, bound=bound, engine_bound=engine_bound,
                signature=signature, floor_cycles=floor, floor_bound=mode_a.cycles / floor,
                best=best["name"],
                speedup=speedup,
                bit_identical=same, reference_error=err,
                intensity=_intensity(w, scale, shift, engine, config),
                backward=_backward_ops(x, w, scale, shift, engine, step),
                sync=_sync(engine, step), training=_training(engine, step, "mlp", quick),
                cnn_training=_training(engine, step, "cnn", quick))


def _signature(x, w, scale, shift, config, engine, step, outputs, lockstep=None,
               quick=False):
    """ParaX's per-operator signature on the DMA model `config`: the aggregate cycles per
    call (a CPE's cycles in a call / 64) of conv, BN and ReLU at 1/4/16/64 instances of the
    whole array (INSTANCES), in lock-step and with delayed start (SIGNATURE_GROUPS launch
    groups SIGNATURE_INTERVAL of a layer's uncontended period apart); beside them one call
    alone and the DMA engine's time per call. `lockstep`: the lock-step rows already measured
    on this model (--quick measures only 1 and 64 instances in lock-step otherwise). Every
    run's output goes to `outputs` (checked against mode A's)."""
    def block(name, **kwargs):
        step(f"signature {name}")
        r = run_block(x, w, scale, shift, engine=engine, machine=Machine(config), **kwargs)
        outputs.append(r.y)
        return dict({k: r.cycles_per_call(k) for k in OP_KINDS}, cycles=r.cycles)

    single = run_block(x[:1], w, scale, shift, instances=1, engine=engine,
                       machine=Machine(config))
    alone = {k: single.cycles_per_call(k) for k in OP_KINDS}
    interval = int(SIGNATURE_INTERVAL * sum(alone.values()))
    sample_bytes = x[0].nbytes
    engine_call = {k: dma_engine_cycles(sample_bytes, sample_bytes, 1, config,
                                        gets=x.shape[1] if k == "conv" else 1) for k in OP_KINDS}
    rows = {}
    for n, kwargs in INSTANCES.items():
        if lockstep is not None:
            locked = lockstep[n]
        elif quick and n not in (1, 64):
            locked = None
        else:
            locked = block(f"{n} lock-step", **kwargs)
        delayed = locked if n == 1 else block(f"{n} delayed", launch_groups=SIGNATURE_GROUPS,
                                              interval=interval, **kwargs)
        rows[n] = dict(lockstep=locked, delayed=delayed)
    return dict(alone=alone, engine_call=engine_call, interval=interval, rows=rows)


def _signature_lines(name, sig) -> list:
    cpes = 64
    lines = [f"{name} DMA model: one call alone: "
             + ", ".join(f"{k} {sig['alone'][k]:.0f}" for k in OP_KINDS)
             + " cycles; DMA engine time per call: "
             + ", ".join(f"{k} {sig['engine_call'][k]:.0f}" for k in OP_KINDS),
             f"{'instances':>10}{'lock-step conv':>16}{'bn':>7}{'relu':>7}{'cycles':>9}"
             f"{'delayed conv':>15}{'bn':>7}{'relu':>7}{'cycles':>9}"]
    for n, row in sig["rows"].items():
        cells = []
        for key in ("lockstep", "delayed"):
            pc = row[key]
            cells.append(" " * 39 if pc is None else
                         f"{pc['conv'] / cpes:>{16 if key == 'lockstep' else 15}.0f}"
                         f"{pc['bn'] / cpes:>7.0f}{pc['relu'] / cpes:>7.0f}{pc['cycles']:>9}")
        lines.append(f"{n:>10}" + "".join(cells))
    first = sig["rows"][1]["delayed"]
    for key, label in (("lockstep", "lock-step"),
                       ("delayed", f"delayed (n={SIGNATURE_GROUPS}, t={sig['interval']})")):
        last = sig["rows"][64][key]
        lines.append(f"  64 {label} vs 1: "
                     + ", ".join(f"{k} x{last[k] / first[k]:.2f}" for k in OP_KINDS)
                     + "   (paper, ResNet50 1->56: conv x0.95, BN x0.27, act x0.26)")
    return lines


def _backward_ops(x, w, scale, shift, engine, step):
    """The single-CPE backward operators (conv, [BN, ReLU]) at 1 and 64 instances of one
    sample each: cycles, P0 busy, DMA bytes."""
    dy = np.random.default_rng(3).standard_normal(x.shape).astype(np.float32)
    rows = []
    for n in (1, 64):
        step(f"backward {n}")
        for name, run in (("conv", conv_backward(dy[:n], x[:n], w[0], instances=n,
                                                 engine=engine)),
                          ("bn+relu", bn_relu_backward(dy[:n], x[:n], scale[0], shift[0],
                                                       instances=n, engine=engine))):
            res = run.run
            rows.append(dict(op=name, instances=n, cycles=run.cycles,
                             p0_busy=sum(res.cpe[k].p0_valid for k in range(n)) / (n * run.cycles),
                             dma_bytes=int(res.counters["dma_bytes_moved"])))
    return rows


def _sync(engine, step):
    """PS, RAR and GS on the MLP's gradient at each instance count (PS at 64: 63 workers, the
    server takes the 64th CPE). PS and GS must agree bit for bit, RAR within 1e-6."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal(MLP_PARAMETERS).astype(np.float32)
    rows = []
    for n in SYNC_INSTANCES:
        step(f"sync {n}")
        g = rng.standard_normal((n, MLP_PARAMETERS)).astype(np.float32)
        runs = {"PS": synchronise(g[:min(n, 63)], w, 0.1, strategy="PS", engine=engine),
                "RAR": synchronise(g, w, 0.1, strategy="RAR", engine=engine),
                "GS": synchronise(g, w, 0.1, strategy="GS", engine=engine)}
        if n < 64 and not np.array_equal(runs["PS"].w, runs["GS"].w):
            raise RuntimeError(f"PS and GS differ at {n} instances")
        if not np.allclose(runs["RAR"].w, runs["GS"].w, rtol=1e-6, atol=1e-6):
            raise RuntimeError(f"RAR and GS differ at {n} instances")
        for name, r in runs.items():
            rows.append(dict(strategy=name, instances=r.instances, cycles=r.cycles,
                             dma_bytes=r.dma_bytes, idle_cpes=r.idle_cpes,
                             instances_per_megacycle=r.instances / r.cycles * 1e6))
    return rows


def _mlp_batch(rng, n):
    return (rng.random((n, MLP_BATCH, mlp.IN)).astype(np.float32),
            rng.integers(0, mlp.OUT, (n, MLP_BATCH)))


def _cnn_batch(rng, n):
    return (rng.standard_normal((n, CNN_BATCH, ROWS, 8, 16)).astype(np.float32),
            rng.integers(0, cnn.OUT, (n, CNN_BATCH)))


def _no_state(run, strategy, engine):
    return None


def _cnn_running(run, strategy, engine):
    return cnn.update_running(cnn.initial_moments(), run, strategy=strategy, engine=engine)


# the networks trained one instance per CPE: (its step, its parameters, a batch per instance,
# the synchronisation of its other state after the step's: a SyncRun or None)
TRAINED = {"mlp": (mlp.instance_step, mlp.init_params, _mlp_batch, _no_state),
           "cnn": (cnn.cnn_step, cnn.init_params, _cnn_batch, _cnn_running)}


def _training(engine, step, net="mlp", quick=True):
    """One training step of `net` (TRAINED: the MLP 256 -> 64 -> 10 of kernels/parax/mlp.s,
    the CNN of kernels/parax/cnn.s) at 1/4/16/64 instances (the full run: KNEE_INSTANCES),
    each on its own batch, then PS, RAR and GS synchronising their gradients (and the CNN's
    BN running statistics, `state_cycles`): compute and synchronisation cycles, the samples
    per megacycle of all together (the step's cycles do not depend on the data)."""
    instance_step, init_params, batch, state_sync = TRAINED[net]
    rng = np.random.default_rng(2)
    params = init_params(1)
    rows = []
    for n in SYNC_INSTANCES if quick else KNEE_INSTANCES:
        step(f"training {net} {n}")
        x, labels = batch(rng, n)
        computed = {n: instance_step(params, x, labels, machine=Machine(), engine=engine)}
        if n == 64:                # PS: the server takes a CPE, 63 instances compute
            computed[63] = instance_step(params, x[:63], labels[:63], machine=Machine(),
                                         engine=engine)
        for strategy in ("PS", "RAR", "GS"):
            run = computed[min(n, 63) if strategy == "PS" else n]
            sync = synchronise(run.gradients, params, 0.1, strategy=strategy, engine=engine)
            state = state_sync(run, strategy, engine)
            state_cycles = state.cycles if state else 0
            p = len(run.gradients)
            rows.append(dict(strategy=strategy, instances=p, compute_cycles=run.cycles,
                             compute_p0_busy=sum(run.run.cpe[k].p0_valid for k in range(p))
                             / (p * run.cycles),
                             sync_cycles=sync.cycles, sync_bytes=sync.dma_bytes,
                             state_cycles=state_cycles,
                             samples_per_megacycle=p * x.shape[1]
                             / (run.cycles + sync.cycles + state_cycles) * 1e6))
    return rows


def _intensity(w, scale, shift, engine, config):
    """Formulas 1-3 for one instance's batch (B = its samples sharing one weight read) beside
    flops / DMA bytes measured on a run of the operator alone over 64 samples."""
    x = workload()[0]
    balance = machine_balance(config)
    rows = []
    model = {"conv": conv_intensity(SAMPLES, 16, 16, 3, 8),
             "bn": elementwise_intensity("bn", SAMPLES * 1024),
             "relu": elementwise_intensity("relu", SAMPLES * 1024)}
    for kind in OP_KINDS:
        r = run_block(x, w[:1], scale[:1], shift[:1], ops=[(kind, 0)], engine=engine)
        measured = measured_intensity(r.flops, r.dma_bytes)
        m = model[kind]
        rows.append(dict(layer=kind, density=m.density, model_flops_per_byte=m.flops_per_byte,
                         model_tag=m.tag(balance), flops=r.flops, dma_bytes=r.dma_bytes,
                         measured_flops_per_byte=measured,
                         measured_tag="COMPUTE" if measured >= balance else "ACCESS"))
    return dict(balance=balance, layers=rows, conv_terms=conv_terms(SAMPLES, 16, 16, 3, 8))


def _table(rows, columns) -> list:
    """Lines of a table of strategy, instances and `columns` (header, key, format) per row."""
    width = [max(len(header) + 1, 10) for header, _, _ in columns]
    lines = [f"{'strategy':<9}{'instances':>10}"
             + "".join(f"{header:>{w}}" for (header, _, _), w in zip(columns, width))]
    for r in rows:
        lines.append(f"{r['strategy']:<9}{r['instances']:>10}" + "".join(
            f"{r[key]:>{w}{fmt}}" for (_, key, fmt), w in zip(columns, width)))
    return lines


def format_report(result: dict, explain: bool = False) -> str:
    lines = [f"ParaX §1.8 block: {LAYERS} x [conv3x3 16->16 8x8, BN, ReLU], f32, {SAMPLES} "
             f"samples, one core group ({'quick' if result['quick'] else 'full'})", "",
             f"{'run':<28}{'cycles':>10}{'samples/Mc':>12}{'DMA util':>10}{'P0 busy':>9}"
             f"{'conv/call':>11}{'bn/call':>9}{'relu/call':>10}"]
    for r in result["runs"]:
        pc = r["per_call"]
        lines.append(f"{r['name']:<28}{r['cycles']:>10}{r['samples_per_megacycle']:>12.1f}"
                     f"{r['dma_utilisation']:>10.1%}{r['p0_busy']:>9.1%}{pc['conv']:>11.0f}"
                     f"{pc['bn']:>9.0f}{pc['relu']:>10.0f}")
    lines += ["", "per-operator signature: aggregate cycles per call (a CPE's cycles in a call "
              "/ 64, all 64 CPEs busy) and the makespan; 1/4/16/64 instances = "
              + ", ".join(" ".join(f"{v}" for v in kw.values()) for kw in INSTANCES.values())]
    for name, sig in result["signature"].items():
        lines += _signature_lines(name, sig)
    b, e = result["bound"], result["engine_bound"]
    lines += ["", f"best: {result['best']}: {result['speedup']:.3f}x per_cg",
              f"§1.8 formula, c_l = uncontended cycles per call: with b_l / 21.3 B/cycle: "
              f"{b['barrier']:.0f} / {b['ideal']:.0f} = {b['bound']:.3f}x; with DMA-engine "
              f"time (puts cost more): {e['barrier']:.0f} / {e['ideal']:.0f} = "
              f"{e['bound']:.3f}x",
              f"floor: the first conv's vmas, then the DMA engine's remaining work (one "
              f"instance's chain if longer) = {result['floor_cycles']:.0f} cycles: per_cg / "
              f"floor = {result['floor_bound']:.3f}x (no schedule beats it; the formula "
              f"assumes per_cg overlaps a layer's compute with its own DMA, which it cannot)",
              f"targets: per_cpe >= 1.3x per_cg: {'met' if result['speedup'] >= 1.3 else 'NOT met'}"
              f"; within 10% of the bound: "
              f"{'met' if result['speedup'] >= 0.9 * result['floor_bound'] else 'NOT met'}",
              f"outputs bit-identical across modes: {result['bit_identical']}; "
              f"mode A vs numpy: {result['reference_error']:.2g}", "",
              f"arithmetic intensity (machine balance {result['intensity']['balance']:.1f} "
              f"flop/B):",
              f"{'layer':<6}{'I=psi/xi':>10}{'model flop/B':>14}{'tag':>9}"
              f"{'measured flop/B':>17}{'tag':>9}"]
    for r in result["intensity"]["layers"]:
        lines.append(f"{r['layer']:<6}{r['density']:>10.4f}{r['model_flops_per_byte']:>14.2f}"
                     f"{r['model_tag']:>9}{r['measured_flops_per_byte']:>17.2f}"
                     f"{r['measured_tag']:>9}")
    if explain:
        terms = result["intensity"]["conv_terms"]
        lines += [f"  conv I = {' + '.join(f'{v:.4f} ({k})' for k, v in terms.items())}, "
                  f"B = {SAMPLES} samples sharing one read of the weights;",
                  "  flop/B = 2 xi / (4 psi) = 1 / (2 I); a layer is COMPUTE when it reaches "
                  "the balance = 64 CPEs x 8 flop/cycle / 21.3 B/cycle, else ACCESS;",
                  "  BN, ReLU: psi = 2 n elements for n operations, I = 2; measured = the CPEs' "
                  "float_ops / dma_bytes_moved of the operator run alone (ReLU's bit "
                  "operations are not flops)"]
    lines += ["", "backward on single-CPE instances, one sample each:",
              f"{'op':<9}{'instances':>10}{'cycles':>10}{'P0 busy':>9}{'DMA bytes':>11}"]
    lines += [f"{r['op']:<9}{r['instances']:>10}{r['cycles']:>10}{r['p0_busy']:>9.1%}"
              f"{r['dma_bytes']:>11}" for r in result["backward"]]
    lines += ["", f"gradient synchronisation, MLP 256-64-10 ({MLP_PARAMETERS} f32), "
              f"W -= lr mean(G):",
              *_table(result["sync"], (("cycles", "cycles", "d"), ("DMA bytes", "dma_bytes", "d"),
                                       ("idle CPEs", "idle_cpes", "d"),
                                       ("inst/Mc", "instances_per_megacycle", ".1f")))]
    at = {(r["strategy"], r["instances"]): r for r in result["sync"]}
    ps, gs = at[("PS", 63)], at[("GS", 64)]
    lines.append(f"at 64 instances: PS/GS bytes {ps['dma_bytes'] / gs['dma_bytes']:.2f} "
                 f"(paper ~2), GS sync-only throughput "
                 f"{gs['instances_per_megacycle'] / ps['instances_per_megacycle']:.1f}x PS "
                 f"(target >= 2x; inst/Mc = instances per megacycle of synchronisation alone)")
    lines += _training_lines(result["training"], f"the MLP 256-64-10 (kernels/parax/mlp.s), "
                             f"{MLP_BATCH} samples")
    lines += _training_lines(result["cnn_training"], f"the CNN conv3x3-BN(batch)-ReLU-pool-FC "
                             f"(kernels/parax/cnn.s), {CNN_BATCH} samples of {ROWS}x8x16")
    return "\n".join(lines)


def overtakes(rows, key, leader="RAR", other="PS"):
    """The fewest instances from which on `leader`'s `key` stays below `other`'s (the rows'
    instance counts paired in order: PS's 63 beside the others' 64), or None."""
    def series(strategy):
        return [r for r in rows if r["strategy"] == strategy]
    pairs = list(zip(series(leader), series(other)))
    since = None
    for a, b in pairs:
        since = (since or a["instances"]) if key(a) < key(b) else None
    return since


def _training_lines(rows, net) -> list:
    """A training table: compute and synchronisation per strategy and instances, the peaks,
    where RAR overtakes PS."""
    lines = ["", f"training step of {net} per instance, then the synchronisation "
                 f"(state: BN's running statistics):",
             *_table(rows, (("compute", "compute_cycles", "d"),
                            ("P0 busy", "compute_p0_busy", ".1%"), ("sync", "sync_cycles", "d"),
                            ("sync bytes", "sync_bytes", "d"), ("state", "state_cycles", "d"),
                            ("samples/Mc", "samples_per_megacycle", ".1f")))]
    sync = overtakes(rows, lambda r: r["sync_cycles"] + r["state_cycles"])
    faster = overtakes(rows, lambda r: -r["samples_per_megacycle"])
    lines.append(f"RAR's synchronisation shorter than PS's from {sync} instances on, its "
                 f"throughput higher from {faster} on")
    best = {s: max((r for r in rows if r["strategy"] == s),
                   key=lambda r: r["samples_per_megacycle"]) for s in ("PS", "RAR", "GS")}
    throughput = {(r["strategy"], r["instances"]): r["samples_per_megacycle"] for r in rows}
    lines.append("peak throughput at " + ", ".join(f"{s} {r['instances']} instances"
                                                   for s, r in best.items())
                 + f" (paper: PS and RAR near 4, GS rising); GS / PS at 64: "
                 f"{throughput[('GS', 64)] / throughput[('PS', 63)]:.1f}x (target >= 2x)")
    return lines
