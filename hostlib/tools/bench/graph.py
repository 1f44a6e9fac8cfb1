"""`swsim bench graph`: swFLOWpro's Tables 3-5 and its two-level parallelism on our chip
(docs/graph.md "Benchmark: bench graph"), for onnx's light AlexNet, VGG-19 (the light set has
no VGG-16), ResNet-50 and Inception v1 at batch 32, forward only, from node times estimated
without running the whole graphs (the training-step table, simulated whole on a small net, is
``graph_train``'s):

- a node with a CPE operator: convolutions the ``estimate()`` (a simulated sample,
  extrapolated) of the algorithm dispatch's ``algo="auto"`` runs (``conv.choose``; the node
  on the MPE when no algorithm takes it, as dispatch runs it), Gemm/MatMul the swGEMM model, memory-bound operators (activations,
  pooling, batch normalisation, Add/Sum, scaling, Concat's copy passes) ``bench ops``' cases at
  the node's shape, sampled and extrapolated -- memoised by operator and shape (``bench
  train``'s ``Estimator``). ``--quick`` simulates nothing: convolutions are the swGEMM model of
  explicit convolution's GEMM (im2col not counted), memory-bound operators their bytes at the
  DMA stream figure (``stream.stream_bound_gbps``, gets = puts) -- both lower bounds. Whether dispatch's suitability checks would send the node to the MPE is not
  re-checked; the node is costed on the CPEs.
- every node's MPE time, and the whole node for operators without a CPE operator (LRN,
  Softmax, ...): the MPE cost model (``dispatch.mpe_cycles``, calibrated to swFLOWpro's Table 3).

The speed-ups are ``dataflow.schedule`` (the runtime's placement rules) over 4 core groups
(6 on the sw26010pro preset, 256-bit code) against 1, without and with the split pass."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ....errors import ArgumentError
from ....vm import Machine
from ...dnn.conv.common import ConvGeometry
from ...dnn.stream import stream_bound_gbps
from ...graph import import_onnx
from ...graph.cpe import CPE
from ...graph.dataflow import schedule, split
from ...graph.dispatch import mpe_cycles
from ...dnn.layout_transform import LAYOUTS
from ...graph.ops import conv_layout, moves_no_data, permute, window_geometry
from . import graph_sampled, graph_train, ops
from .light import path
from .train_nets import Estimator

MODELS = {"AlexNet": "bvlc_alexnet", "VGG-19": "vgg19", "ResNet-50": "resnet50",
          "Inception v1": "inception_v1"}
QUICK_MODELS = ("ResNet-50",)
BATCH = 32
CGS, PRO_CGS = 4, 6
# swFLOWpro (digest §2.7): 4 CGs over 1 without split, and with split (6 CGs on SW26010pro)
PAPER_NO_SPLIT, PAPER_SPLIT = (1.19, 1.49), (1.78, 4.96)
PRO = dict(vector_bytes=32, flops_per_cycle=8)     # sw26010pro with 256-bit code (docs/vm.md)


def rebatched(name: str, batch: int):
    """onnx's light model `name` at `batch`: its data input's first dimension and the
    Reshape targets written for batch 1 set to `batch`, imported."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path(name))
    weights = {t.name for t in model.graph.initializer}
    data = next(v for v in model.graph.input if v.name not in weights)
    targets = {node.input[1] for node in model.graph.node if node.op_type == "Reshape"}
    for tensor in model.graph.initializer:
        value = numpy_helper.to_array(tensor)
        if tensor.name in targets and value.ndim == 1 and value.size and value[0] == 1:
            value = value.copy()
            value[0] = batch
            tensor.CopyFrom(numpy_helper.from_array(value, tensor.name))
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    return import_onnx(model, shapes={data.name: [batch] + shape[1:]})


class NodeCosts:
    """Cycles of a graph's nodes on one CG, memoised by operator, attributes and shapes:
    ``cpe(graph, node)`` -> (cycles, device, source), ``mpe(graph, node)`` -> cycles.
    ``minimum_work``: swHMAE's rule -- a node whose MPE time is below a CPE launch's is costed
    on the MPE, as dispatch runs it."""

    def __init__(self, machine, sampled: bool, progress=None, minimum_work=False):
        # quick: a convolution's estimate is conv.choose's pick, the algorithm the run runs
        self.est = Estimator(machine=machine, quick=True)
        self.config = machine.config
        self.sampled = sampled
        self.minimum_work = minimum_work
        self.progress = progress
        self.memo = {}

    def _key(self, graph, node):
        return (node.op_type, repr(sorted(node.attrs.items())),
                tuple(graph.info[n].shape if n else None for n in node.inputs))

    def _cycles(self, seconds):
        return int(round(seconds * self.config.clock_hz))

    def mpe(self, graph, node) -> int:
        key = ("MPE",) + self._key(graph, node)
        if key not in self.memo:
            arrays = [None if not n else np.broadcast_to(
                np.zeros((), graph.info[n].dtype), graph.info[n].shape) for n in node.inputs]
            outputs = [np.broadcast_to(np.zeros((), graph.info[n].dtype), graph.info[n].shape)
                       for n in node.outputs if n]
            self.memo[key] = mpe_cycles(node, [a for a in arrays if a is not None], outputs,
                                        self.config)
        return self.memo[key]

    def cpe(self, graph, node, minimum_work=None):
        """``minimum_work``: this node's rule (None: the costs' own)."""
        key = self._key(graph, node)
        if key not in self.memo:
            if self.progress:
                self.progress(f"{node.op_type} {graph.info[node.inputs[0]].shape}")
            self.memo[key] = self._cpe(graph, node)
        found = self.memo[key]
        rule = self.minimum_work if minimum_work is None else minimum_work
        if rule and found[1] == "CPE" and self.mpe(graph, node) < self.config.spawn_cycles:
            return self.mpe(graph, node), "MPE", "MPE model (minimum work)"
        return found

    def _cpe(self, graph, node):
        if moves_no_data(node, [graph.info[n].shape for n in node.inputs if n]):
            return 0, "view", "none"
        try:
            found = self._on_cpes(graph, node)
        except ArgumentError:     # the CPE operator refuses the shape: dispatch falls back too
            if node.op_type == "Conv":     # conv.choose decided it runs: its estimate must too
                raise
            found = None
        return found or (self.mpe(graph, node), "MPE", "MPE model")

    def _on_cpes(self, graph, node):
        """(cycles, "CPE", source) of the node's CPE operator, None if it has none."""
        op = node.op_type
        shapes = [graph.info[n].shape for n in node.inputs if n]
        out = graph.info[node.outputs[0]].shape
        stream = self._stream_case(node, shapes, out) if op in CPE else None
        if op == "Conv":
            found = self._conv(node, shapes)
            if found:
                return found
        elif op in ("Gemm", "MatMul") and len(shapes[0]) == 2:
            trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
            m, k = shapes[0][::-1] if trans_a else shapes[0]
            n = shapes[1][0] if trans_b else shapes[1][1]
            return (self._cycles(self.est.gemm(m, n, k, a_transposed=trans_a,
                                               b_transposed=trans_b)), "CPE", "model")
        elif stream is not None:
            cases = stream if isinstance(stream, list) else [stream]
            if self.sampled:
                return sum(self._cycles(self.est.stream(c)) for c in cases), "CPE", "sampled"
            moved = sum(c.bytes_moved(c.full) for c in cases)
            return (self._cycles(moved / (stream_bound_gbps(self.config, 1, 1) * 1e9)), "CPE",
                    "model")
        return None

    def _conv(self, node, shapes):
        # x as the layout pass stores it (its ``layout`` attribute), read in NCHW
        (b, c, h, w), (o, _, kh, kw) = permute(shapes[0], conv_layout(node), "NCHW"), shapes[1]
        begin, end, strides, dilations, _ = window_geometry(node, (h, w), [kh, kw])
        if dilations != [1, 1]:
            return None
        low = [min(x, y) for x, y in zip(begin, end)]
        size = [s + x + y - 2 * m for s, x, y, m in zip((h, w), begin, end, low)]
        group = int(node.attr("group", 1))
        geo = ConvGeometry(b, c // group, o // group, size[0], size[1], kh, kw,
                           tuple(strides), tuple(low))
        if self.sampled:
            seconds, algorithm, _, source = self.est.conv(geo, "forward")
            if source == "model":          # no algorithm takes it: dispatch runs it on the MPE
                return None
        else:
            seconds, source = self.est.explicit_gemm(geo, "forward"), "model"
        return self._cycles(group * seconds), "CPE", source

    @staticmethod
    def _stream_case(node, shapes, out):
        """The ``bench ops`` case(s) of a memory-bound node, or None."""
        op, elements = node.op_type, int(np.prod(out))
        name = node.name
        if op in ("Relu", "Sigmoid", "Tanh"):
            return ops.Case(name, op.lower(), elements)
        if op == "Transpose" and len(shapes[0]) == 4:
            return _transform_case(node, shapes[0])
        if op == "LeakyRelu":          # cpe.leakyrelu: ReLU, then an axpby
            return [ops.Case(name, "relu", elements), ops.Case(name, "axpby", elements)]
        if op in ("Add", "Sub", "Sum"):
            return [ops.Case(name, "axpby", elements)] * max(1, len(shapes) - 1)
        if op in ("Mul", "Div") and min(int(np.prod(s)) for s in shapes) == 1:
            return ops.Case(name, "scale", elements)
        if op == "Concat" and all(len(s) == 4 for s in shapes):
            return [ops.TransformCase(name, "NCHW", tuple(s)) for s in shapes]
        if op == "BatchNormalization" and len(shapes[0]) == 4:
            return ops.BatchNormCase(name, tuple(shapes[0]), "infer")
        if len(shapes[0]) != 4:
            return None
        b, c, h, w = shapes[0]
        if op in ("GlobalAveragePool", "GlobalMaxPool") and h == w:
            return ops.PoolCase(name, b * c, h, w, h, h, 0,
                                "max" if op == "GlobalMaxPool" else "avg")
        if op in ("MaxPool", "AveragePool"):
            kernel = [int(k) for k in node.attr("kernel_shape")]
            begin, end, strides, _, size = window_geometry(node, (h, w), kernel)
            if len(set(kernel)) != 1 or len(set(strides)) != 1:
                return None
            k, stride = kernel[0], strides[0]
            if op == "MaxPool":       # any padding: -inf rows and columns of the operand (cpe.pool)
                return ops.PoolCase(name, b * c, (size[0] - 1) * stride + k,
                                    (size[1] - 1) * stride + k, k, stride, 0, "max")
            if len(set(begin + end)) == 1:
                return ops.PoolCase(name, b * c, h, w, k, stride, begin[0], "avg")
        return None


def _transform_case(node, shape):
    """A 4-D Transpose between two of the CPE transform's layouts as ``bench ops``' case:
    NCHW to the other layout (a transform into NCHW costed as the one out of it), None for
    other permutations."""
    perm = [int(p) for p in node.attr("perm", [3, 2, 1, 0])]
    for source, order in LAYOUTS.items():
        target = next((name for name, o in LAYOUTS.items()
                       if o == "".join(order[p] for p in perm)), None)
        if target is not None and "NCHW" in (source, target) and source != target:
            other = target if source == "NCHW" else source
            return ops.TransformCase(node.name, other, permute(shape, order, "NCHW"))
    return None


@dataclass
class OpRow:
    """Table 3: one operator type over the graph."""
    op: str
    nodes: int
    mpe_ms: float
    cpe_ms: float           # on the CPEs where the op has an operator, else its MPE time
    sources: str

    @property
    def many_acc_ratio(self) -> float:
        return self.mpe_ms / self.cpe_ms if self.cpe_ms else float("nan")


@dataclass
class Result:
    model: str
    batch: int
    nodes: int
    ops: list               # OpRow, by CPE time
    mpe_ms: float           # Table 4: the forward pass on the MPE
    cpe_ms: float           # ... with swHMAE (1 CG)
    conv_share: float       # Table 5: convolutions' share of the CPE forward time
    speedup: dict = field(default_factory=dict)    # "4 CGs", "4 CGs split 4", "pro ..."

    @property
    def step_ratio(self) -> float:
        return self.mpe_ms / self.cpe_ms


def _tables(name, graph, costs: NodeCosts, clock_hz) -> Result:
    rows = {}
    for node in graph.order():
        cycles, device, source = costs.cpe(graph, node)
        row = rows.setdefault(node.op_type, [0, 0, 0, set()])
        row[0] += 1
        row[1] += costs.mpe(graph, node)
        row[2] += cycles
        row[3].add(source)
    ms = 1e3 / clock_hz
    table = sorted((OpRow(op, n, mpe * ms, cpe * ms, ", ".join(sorted(src)))
                    for op, (n, mpe, cpe, src) in rows.items()), key=lambda r: -r.cpe_ms)
    cpe = sum(r.cpe_ms for r in table)
    conv = sum(r.cpe_ms for r in table if r.op == "Conv")
    return Result(name, graph.inputs and next(iter(graph.inputs.values())).shape[0],
                  len(graph.nodes), table, sum(r.mpe_ms for r in table), cpe, conv / cpe)


def _makespan(graph, costs, cgs) -> int:
    return schedule(graph, lambda node: costs.cpe(graph, node)[0], cgs).makespan


def _speedups(graph, costs, cgs, label) -> dict:
    one = _makespan(graph, costs, 1)
    parted = split(graph, cgs).graph
    return {f"{label}{cgs} CGs": one / _makespan(graph, costs, cgs),
            f"{label}{cgs} CGs, split {cgs}": one / _makespan(parted, costs, cgs)}


@dataclass
class Report:
    forward: list                   # Result per model
    training: graph_train.TrainTable = None
    sampled: graph_sampled.SampledTable = None


def run(quick=False, models=None, batch=BATCH, pro=True, progress=None,
        training=True, sampled=True) -> Report:
    """Per model a Result; ``pro``: also 6 CGs of the sw26010pro preset; ``training``: the
    training-step table too; ``sampled``: the batch-1 sampled-simulation table too."""
    names = models or (QUICK_MODELS if quick else tuple(MODELS))
    chip = Machine()
    costs = NodeCosts(chip, sampled=not quick, progress=progress)
    pro_costs = NodeCosts(Machine("sw26010pro", **PRO), sampled=not quick, progress=progress)
    results = []
    for name in names:
        graph = rebatched(MODELS[name], batch)
        result = _tables(name, graph, costs, chip.config.clock_hz)
        result.speedup.update(_speedups(graph, costs, CGS, ""))
        if pro:
            result.speedup.update(_speedups(graph, pro_costs, PRO_CGS, "pro "))
        results.append(result)
    return Report(results, graph_train.run(quick, progress) if training else None,
                  graph_sampled.run(quick, progress) if sampled else None)


def format_report(report: Report) -> str:
    lines = []
    for r in report.forward:
        lines.append(f"{r.model}, batch {r.batch}, forward ({r.nodes} nodes)")
        header = ("op", "nodes", "MPE ms", "CPE ms", "ManyAccRatio", "CPE time from")
        rows = [header] + [(o.op, str(o.nodes), f"{o.mpe_ms:,.1f}", f"{o.cpe_ms:,.2f}",
                            f"{o.many_acc_ratio:,.1f}x", o.sources) for o in r.ops]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                  for row in rows]
        lines.append(f"  whole forward: MPE {r.mpe_ms:,.1f} ms, CPE {r.cpe_ms:,.2f} ms, "
                     f"ratio {r.step_ratio:,.1f}x; conv share {100 * r.conv_share:.1f}%")
        lines.append("  speed-up over 1 CG: " + ", ".join(
            f"{k} {v:.2f}x" for k, v in r.speedup.items()))
    lines.append(f"swFLOWpro: {PAPER_NO_SPLIT[0]}-{PAPER_NO_SPLIT[1]}x on 4 CGs without "
                 f"split, {PAPER_SPLIT[0]}-{PAPER_SPLIT[1]}x with split (4.96x: ResNet-50 on "
                 "6 CGs of SW26010pro)")
    if report.training:
        lines += graph_train.format_table(report.training)
    if report.sampled:
        lines += graph_sampled.format_table(report.sampled, Machine().config.clock_hz)
    return "\n".join(lines)
