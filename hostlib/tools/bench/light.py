"""``swsim bench light``: onnx's nine ``backend/test/data/light`` models (ImageNet size, batch
1) on the VM against onnxruntime. Their weights are ConstantOfShape fills (every logit equal),
so ``seeded`` replaces every fill and float initializer by seeded random weights (He-scaled
for weights, BatchNormalization's scales and variances in [0.5, 1.5]) first. Per model: the largest relative error
against onnxruntime, host seconds, simulated time, the CPE share of it, and the dataflow
estimate's speed-up of 4 core groups over 1 (graph parallelism only, no split)."""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import numpy as np

MODELS = ("squeezenet", "bvlc_alexnet", "resnet50", "inception_v1", "inception_v2",
          "shufflenet", "densenet121", "vgg19", "zfnet512")
QUICK_MODELS = ("squeezenet",)
RTOL = 1e-3


@dataclass
class Result:
    model: str
    nodes: int
    max_relative_error: float     # |swsim - onnxruntime| / (|onnxruntime| + 1e-3 max|ort|)
    matches: bool                 # allclose at rtol 1e-3, atol 1e-3 of the largest logit
    host_seconds: float
    simulated_ms: float
    cpe_share: float              # of the simulated time
    speedup_4cgs: float           # dataflow estimate, no split


def path(name: str) -> str:
    import onnx.backend.test
    return os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "light",
                        f"light_{name}.onnx")


def seeded(model, seed: int = 0):
    """A copy of `model` whose ConstantOfShape fills (of constant shapes) and float
    initializers are seeded random values."""
    from onnx import ModelProto, numpy_helper
    rng = np.random.default_rng(seed)
    copy = ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    # BatchNormalization's scale and variance: positive, around 1
    positive = {node.input[i] for node in graph.node if node.op_type == "BatchNormalization"
                for i in (1, 4)}

    def weights(name, shape):
        if len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        if name in positive:
            return rng.uniform(0.5, 1.5, shape).astype(np.float32)
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)
    values, kept = {}, []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in constants:
            values[node.output[0]] = weights(node.output[0],
                                             tuple(int(d) for d in constants[node.input[0]]))
        else:
            kept.append(node)
    for name, value in constants.items():
        if value.dtype == np.float32:
            values[name] = weights(name, value.shape)
    del graph.node[:]
    graph.node.extend(kept)
    others = [t for t in graph.initializer if t.name not in values]
    del graph.initializer[:]
    graph.initializer.extend(others + [numpy_helper.from_array(v, k) for k, v in values.items()])
    return copy


def run_model(name: str, progress=None) -> Result:
    import onnx
    import onnxruntime

    from ...graph import Session, import_onnx
    from ...graph.dataflow import schedule
    model = seeded(onnx.load(path(name)))
    graph = import_onnx(model)
    (feed, info), = graph.inputs.items()
    x = np.random.default_rng(1).standard_normal(info.shape).astype(info.dtype)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    want = onnxruntime.InferenceSession(model.SerializeToString(), options).run(
        None, {feed: x})[0]
    start = time.perf_counter()
    session = Session(graph, progress=progress)
    got = session.run({feed: x})[graph.outputs[0]]
    host = time.perf_counter() - start
    scale = 1e-3 * float(np.abs(want).max())
    error = float(np.max(np.abs(got - want) / (np.abs(want) + scale)))
    cycles = {r.node: r.cycles for r in session.records}
    total = session.cycles
    cpe = sum(r.cycles for r in session.records if r.device == "CPE")
    return Result(name, len(graph.nodes), error,
                  bool(np.allclose(got, want, rtol=RTOL, atol=scale)), host,
                  total / session.machine.config.clock_hz * 1e3, cpe / total,
                  total / schedule(graph, cycles, 4).makespan)


def run(quick=False, models=None, progress=None) -> list:
    names = models or (QUICK_MODELS if quick else MODELS)
    results = []
    for name in names:
        if progress:
            progress(name)
        results.append(run_model(name))
    return results


def format_report(results) -> str:
    header = ("model", "nodes", "max rel err", "rtol 1e-3", "host s", "simulated ms",
              "CPE share", "4 CGs (estimate)")
    rows = [header] + [(r.model, str(r.nodes), f"{r.max_relative_error:.1e}",
                        "yes" if r.matches else "NO", f"{r.host_seconds:.0f}",
                        f"{r.simulated_ms:.1f}", f"{100 * r.cpe_share:.1f}%",
                        f"{r.speedup_4cgs:.2f}x") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)


def as_json(results) -> list:
    return [asdict(r) for r in results]
