"""`swsim bench graph`'s sampled-simulation table (docs/graph.md "Sampled simulation"):
ResNet-50 at batch 1, inference, from node times estimated by sampled simulation (a sample of
each distinct node's work run on the emulator and extrapolated, memoised by operator and
shape: ``graph.NodeCosts(sampled=True)``), with the graph as the runtime runs it -- after the
layout pass, swHMAE's minimum-work rule applied. The extrapolation is checked against a full
run (``Session``) of a smaller ResNet (two stages of basic blocks, a projection shortcut) at
the same batch, whose every node is simulated whole."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ....vm import Machine
from ...graph import Graph, Session, import_onnx

SMALL = dict(size=32, width=16)         # the checked ResNet: 32x32 images, 16 then 32 channels
QUICK_SMALL = dict(size=16, width=8)


def small_resnet(size=32, width=16, blocks=2, seed=7):
    """A ResNet of basic blocks at batch 1 (onnx.helper, seeded He-scaled weights): a 3x3
    stem, two stages of ``blocks`` blocks (the second at stride 2 and twice the channels, a
    1x1 projection shortcut), global average pooling, a Gemm to 10 classes."""
    rng = np.random.default_rng(seed)
    nodes, weights = [], []

    def array(name, value):
        weights.append(numpy_helper.from_array(value.astype(np.float32), name))

    def conv_bn(x, cin, cout, k, stride, name, relu=True):
        array(f"{name}.w", rng.standard_normal((cout, cin, k, k)) * (2 / (cin * k * k)) ** 0.5)
        for part, value in (("g", rng.uniform(0.5, 1.5, cout)), ("b", rng.normal(0, 0.1, cout)),
                            ("m", rng.normal(0, 0.1, cout)), ("v", rng.uniform(0.5, 1.5, cout))):
            array(f"{name}.{part}", value)
        nodes.extend([
            helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.c"], pads=[k // 2] * 4,
                             strides=[stride] * 2, name=name),
            helper.make_node("BatchNormalization", [f"{name}.c"] + [f"{name}.{p}" for p in
                                                                    "gbmv"],
                             [f"{name}.n"], name=f"{name}.bn")])
        if relu:
            nodes.append(helper.make_node("Relu", [f"{name}.n"], [f"{name}.r"],
                                          name=f"{name}.relu"))
        return f"{name}.r" if relu else f"{name}.n"

    x, channels = conv_bn("x", 3, width, 3, 1, "stem"), width
    for stage in range(2):
        for block in range(blocks):
            name, stride, out = f"s{stage}b{block}", 2 if stage and not block else 1, \
                width << stage
            y = conv_bn(conv_bn(x, channels, out, 3, stride, f"{name}a"), out, out, 3, 1,
                        f"{name}b", relu=False)
            if stride != 1 or channels != out:
                x = conv_bn(x, channels, out, 1, stride, f"{name}p", relu=False)
            nodes += [helper.make_node("Add", [y, x], [f"{name}.s"], name=f"{name}.add"),
                      helper.make_node("Relu", [f"{name}.s"], [f"{name}.o"], name=f"{name}.out")]
            x, channels = f"{name}.o", out
    array("fc.w", rng.standard_normal((10, channels)) * channels ** -0.5)
    array("fc.b", np.zeros(10))
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="flat"),
              helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "small_resnet", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, size, size])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 10])], weights)
    return import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


@dataclass
class Estimate:
    model: str
    nodes: int
    cycles: int                  # one CG, the nodes one after another
    host_seconds: float
    sources: dict = field(default_factory=dict)     # "sampled" / "model" / "MPE model" -> nodes


def estimate(graph: Graph, costs, machine) -> Estimate:
    """The graph's cycles on one CG from ``costs`` (a NodeCosts), as a Session runs it: after
    the layout pass, whose transforms run on the CPEs whatever the minimum-work rule says."""
    start = time.perf_counter()
    session = Session(graph, machine=machine)          # plans the layouts, runs nothing
    total, sources = 0, {}
    for node in session.nodes:
        cycles, _, source = costs.cpe(session.graph, node, minimum_work=False if
                                      node.name in session.on_cpes else None)
        total += cycles
        sources[source] = sources.get(source, 0) + 1
    return Estimate(graph.name, len(session.nodes), total, time.perf_counter() - start,
                    sources)


@dataclass
class Check:
    """The smaller ResNet simulated whole against its sampled estimate."""
    size: int
    width: int
    full_cycles: int
    full_host_seconds: float
    estimate: Estimate

    @property
    def error(self) -> float:
        return self.estimate.cycles / self.full_cycles - 1


@dataclass
class SampledTable:
    check: Check
    resnet50: Estimate = None           # None in --quick


def run(quick=False, progress=None) -> SampledTable:
    from .graph import NodeCosts, rebatched
    machine = Machine()
    costs = NodeCosts(machine, sampled=True, progress=progress, minimum_work=True)
    shape = QUICK_SMALL if quick else SMALL
    small = small_resnet(**shape)
    start = time.perf_counter()
    session = Session(small, machine=machine)
    session.run({"x": np.random.default_rng(0).standard_normal(
        (1, 3, shape["size"], shape["size"])).astype(np.float32)})
    check = Check(shape["size"], shape["width"], session.cycles,
                  time.perf_counter() - start, estimate(small, costs, machine))
    return SampledTable(check, None if quick else estimate(rebatched("resnet50", 1), costs,
                                                           machine))


def format_table(table: SampledTable, clock_hz: float) -> list:
    c = table.check
    ms = 1e3 / clock_hz
    lines = ["Sampled simulation, batch 1, inference, 1 CG",
             f"  check: ResNet ({c.size}x{c.size}, {c.width}/{2 * c.width} channels, "
             f"{c.estimate.nodes} nodes) simulated whole {c.full_cycles:,} cycles "
             f"({c.full_host_seconds:.1f} s host), sampled estimate {c.estimate.cycles:,} "
             f"({c.estimate.host_seconds:.1f} s host): {100 * c.error:+.1f} %"]
    if table.resnet50:
        r = table.resnet50
        lines.append(f"  ResNet-50 ({r.nodes} nodes): {r.cycles * ms:,.2f} ms simulated "
                     f"(estimate: {', '.join(f'{k} {v}' for k, v in sorted(r.sources.items()))}"
                     f" nodes), {r.host_seconds:.1f} s host")
    return lines
