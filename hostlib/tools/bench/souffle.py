"""``swsim bench souffle``: Souffle's passes (hostlib/graph/souffle.py, docs/souffle.md) on a
tiny BERT block — the unfused graph engine against the generated kernels after each pass
(the ablation), per fused launch its cycles, DMA bytes and LDM peak; every stage is checked
against an independent numpy implementation of the block; a 2-layer LSTM, one launch per
TE against one fused launch (the weights fetched once and kept in LDM); and the convolution
blocks, an Inception-like 4-branch block and a MobileNet-like depthwise block, each stage
checked against the graph engine's numpy operators in float64."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...graph import Session, import_onnx, souffle
from ...graph import souffle_codegen as codegen
from ...graph.ops import operator
from ....vm.machine import Machine
from .hope import _model, inception


def bert_block(seq=32, hidden=64, heads=2, seed=0):
    """The block as a graph of the graph engine (``bert_model`` imported)."""
    return import_onnx(bert_model(seq, hidden, heads, seed))


def bert_model(seq=32, hidden=64, heads=2, seed=0):
    """An ONNX model: x -> Q/K/V projections, heads (Reshape, Transpose), softmax(Q K^T / sqrt(d)) V, the
    heads merged (Transpose, Reshape), the output projection, residual, LayerNorm, the
    feed-forward network (MatMul, Gelu tanh, MatMul), residual, LayerNorm."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    d, ffn = hidden // heads, 4 * hidden
    w = {}

    def weight(name, *shape, scale=None):
        w[name] = (rng.standard_normal(shape) * (scale or 1 / np.sqrt(shape[0]))).astype(
            np.float32)
        return name
    h, nodes = helper, []

    def node(op, inputs, output, **attrs):
        nodes.append(h.make_node(op, inputs, [output], name=output, **attrs))
        return output
    w["heads_shape"] = np.array([seq, heads, d], np.int64)
    w["merged_shape"] = np.array([seq, hidden], np.int64)
    w["scale"] = np.array(1 / np.sqrt(d), np.float32)
    heads_of = {}
    for p in "qkv":
        proj = node("MatMul", ["x", weight(f"w{p}", hidden, hidden)], p)
        split = node("Reshape", [proj, "heads_shape"], f"{p}_split")
        heads_of[p] = node("Transpose", [split], f"{p}_heads",
                           perm=[1, 2, 0] if p == "k" else [1, 0, 2])
    scores = node("MatMul", [heads_of["q"], heads_of["k"]], "scores")
    scaled = node("Mul", [scores, "scale"], "scaled")
    probs = node("Softmax", [scaled], "probs", axis=-1)
    context = node("MatMul", [probs, heads_of["v"]], "context")
    back = node("Transpose", [context], "context_t", perm=[1, 0, 2])
    merged = node("Reshape", [back, "merged_shape"], "merged")
    attn = node("MatMul", [merged, weight("wo", hidden, hidden)], "attn")
    res1 = node("Add", [attn, "x"], "res1")
    ln1 = node("LayerNormalization", [res1, weight("g1", hidden, scale=1.0),
                                      weight("b1", hidden, scale=0.1)], "ln1", axis=-1)
    up = node("MatMul", [ln1, weight("w1", hidden, ffn)], "up")
    act = node("Gelu", [up], "gelu", approximate="tanh")
    down = node("MatMul", [act, weight("w2", ffn, hidden)], "down")
    res2 = node("Add", [down, ln1], "res2")
    node("LayerNormalization", [res2, weight("g2", hidden, scale=1.0),
                                weight("b2", hidden, scale=0.1)], "y", axis=-1)
    graph = h.make_graph(nodes, "bert_block",
                         [h.make_tensor_value_info("x", TensorProto.FLOAT, [seq, hidden])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [seq, hidden])],
                         [numpy_helper.from_array(v, n) for n, v in w.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])


def bert_numpy(graph, x):
    """The block in float64 numpy, written independently of the TE lowering (the oracle)."""
    w = {k: np.asarray(v, np.float64) for k, v in graph.initializers.items()}
    seq, heads, d = (int(n) for n in w["heads_shape"])

    def layernorm(a, g, b):
        centred = a - a.mean(-1, keepdims=True)
        return centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    q, k, v = ((x @ w[f"w{p}"]).reshape(seq, heads, d).transpose(1, 0, 2) for p in "qkv")
    s = q @ k.transpose(0, 2, 1) * w["scale"]
    e = np.exp(s - s.max(-1, keepdims=True))
    context = (e / e.sum(-1, keepdims=True)) @ v
    ln1 = layernorm(context.transpose(1, 0, 2).reshape(seq, heads * d) @ w["wo"] + x,
                    w["g1"], w["b1"])
    up = ln1 @ w["w1"]
    gelu = 0.5 * up * (1 + np.tanh(np.sqrt(2 / np.pi) * (up + 0.044715 * up ** 3)))
    return layernorm(gelu @ w["w2"] + ln1, w["g2"], w["b2"])


@dataclass
class Row:
    stage: str
    launches: int
    dma_bytes: int
    cycles: int
    ldm_peak: Optional[int]       # bytes per CPE (None: not known for the graph engine)
    max_error: float              # max |out - numpy| / max |numpy|
    spawn_cycles: int             # a launch's spawn + join (config.spawn_cycles)
    baseline: int = 0             # the graph engine's cycles with launches

    @property
    def with_launches(self) -> int:
        """Kernel cycles plus spawn_cycles per launch (the graph engine: per CPE node)."""
        return self.cycles + self.launches * self.spawn_cycles

    @property
    def speedup(self) -> float:
        return self.baseline / self.with_launches if self.cycles else 0.0


@dataclass
class Result:
    size: tuple                   # (seq, hidden, heads)
    rows: list
    subgraphs: list               # the fused stage's launches (souffle_codegen.LaunchStats)
    explain: str
    lstm: list = None             # rows of the LSTM: graph engine, one launch per TE, fused
    lstm_size: tuple = ()         # (hidden, steps, batch, layers)
    lstm_weight_bytes: dict = None   # stage -> bytes of W and U the DMA moved
    blocks: dict = None           # convolution block name -> its rows (as the BERT block's)
    blocks_size: tuple = ()       # (channels, image size)


# the ablation: (stage, passes applied, fused into launches under the LDM budget)
STAGES = (("TEs, one launch each", (), False),
          ("+ vertical", ("vertical",), False),
          ("+ horizontal", ("vertical", "horizontal"), False),
          ("+ barrier/reduction fusion", ("vertical", "horizontal"), True))
# the Conv blocks also: independent TEs at once on parts of the mesh (codegen.plan submeshes)
SUBMESH_STAGES = (("even", "+ sub-meshes, equal parts"), ("work", "+ sub-meshes, by work"))
OVERLAP_STAGE = "+ load/compute overlap"   # the fused plan with plan(overlap=True)
FULL, QUICK = (32, 64, 2), (16, 32, 2)
LSTM_FULL, LSTM_QUICK = (64, 8, 4, 2), (32, 4, 4, 2)      # hidden, steps, batch, layers
BLOCKS_FULL, BLOCKS_QUICK = (16, 8), (8, 8)                 # channels, image size
RTOL = 1e-4                   # relative error allowed (the graph engine runs float32)


def _error(out, ref) -> float:
    return float(np.abs(out - ref).max() / np.abs(ref).max())


def _graph_engine(graph, feeds, ref):
    """The unfused graph engine's row (float32 feeds) and its cycles with launches."""
    session = Session(graph, machine=Machine(), check=False)
    out = session.run({k: v.astype(np.float32) for k, v in feeds.items()})[graph.outputs[0]]
    cpe = [r for r in session.records if r.device == "CPE"]
    spawn = session.machine.config.spawn_cycles
    base = sum(r.cycles for r in session.records) + len(cpe) * spawn
    return Row("graph engine (unfused)", len(cpe), sum(r.dma_bytes for r in cpe),
               base - len(cpe) * spawn, None, _error(out, ref), spawn, base)


def _stage(program, stage, passes, fused, feeds, ref, base, engine, submeshes=None,
           overlap=False):
    """(Row, per-launch stats, the transformed program, weight bytes) of one ablation stage."""
    for name in passes:
        program = souffle.PASSES[name](program)
    machine = Machine()
    launches = codegen.plan(program, machine.config, fused=fused, submeshes=submeshes,
                            overlap=overlap)
    outputs, stats = codegen.run(program, launches, machine, feeds, engine=engine)
    row = Row(stage, len(stats), sum(s.dma_bytes for s in stats), sum(s.cycles for s in stats),
              max(s.ldm_peak for s in stats), _error(outputs[program.outputs[0]], ref),
              base.spawn_cycles, base.baseline)
    return row, stats, program, weight_bytes(program, launches)


def weight_bytes(program, launches) -> int:
    """Bytes of the program's constants (weights) the launches' DMA moves, all CPEs."""
    total = 0
    for launch in launches:
        for step in launch.steps:
            cpes = int(np.prod(step.grid))
            total += cpes * sum(codegen.ES * p.box_elements for p in step.reads
                                if not p.local and p.read.tensor.name in program.constants)
    return total


def mobilenet_block(channels=8, size=8, expand=2, seed=0):
    """x -> 1x1 Conv to expand·channels + Relu -> 3x3 depthwise Conv (pad 1) + Relu -> 1x1
    Conv back to channels -> + x (MobileNet v2's inverted residual); every Conv with a bias."""
    from onnx import helper
    rng = np.random.default_rng(seed)
    wide, weights, nodes = channels * expand, {}, []

    def conv(name, source, shape, **attrs):
        weights[name + "_w"] = (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))
                                ).astype(np.float32)
        weights[name + "_b"] = (rng.standard_normal(shape[0]) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [source, name + "_w", name + "_b"], [name],
                                      name=name, **attrs))
        return name
    expanded = conv("expand", "x", (wide, channels, 1, 1))
    nodes.append(helper.make_node("Relu", [expanded], ["expand_r"], name="expand_relu"))
    depthwise = conv("depthwise", "expand_r", (wide, 1, 3, 3), group=wide, pads=[1] * 4)
    nodes.append(helper.make_node("Relu", [depthwise], ["depthwise_r"], name="depthwise_relu"))
    project = conv("project", "depthwise_r", (channels, wide, 1, 1))
    nodes.append(helper.make_node("Add", [project, "x"], ["y"], name="residual"))
    return _model(nodes, [("x", [1, channels, size, size])], [("y", [1, channels, size, size])],
                  weights)


BLOCKS = {"inception": inception, "mobilenet": mobilenet_block}


def graph_numpy(graph, feeds) -> dict:
    """The graph evaluated by the graph engine's numpy operators in float64 (the oracle of the
    convolution blocks: written independently of the TE lowering)."""
    values = {k: np.asarray(v, np.float64) for k, v in {**graph.initializers, **feeds}.items()}
    for node in graph.order():
        outs = operator(node.op_type).mpe(node, *[values[n] for n in node.inputs if n])
        values.update(zip(node.outputs, outs))
    return {name: values[name] for name in graph.outputs}


def run_block(name, channels, size, seed=1, engine="c") -> list:
    """The graph engine's row and the ablation's rows of a convolution block."""
    graph = BLOCKS[name](channels, size)
    rng = np.random.default_rng(seed)
    feeds = {n: rng.standard_normal(info.shape) for n, info in graph.inputs.items()}
    ref = graph_numpy(graph, feeds)[graph.outputs[0]]
    rows, program = [_graph_engine(graph, feeds, ref)], souffle.lower(graph)
    for stage, passes, fused in STAGES:
        rows.append(_stage(program, stage, passes, fused, feeds, ref, rows[0], engine)[0])
    for how, stage in SUBMESH_STAGES:
        rows.append(_stage(program, stage, STAGES[-1][1], True, feeds, ref, rows[0], engine,
                           submeshes=how)[0])
    rows.append(_stage(program, OVERLAP_STAGE, STAGES[-1][1], True, feeds, ref, rows[0], engine,
                       overlap=True)[0])
    return rows


def run(quick=False, seed=1, engine="c", lstm=True, blocks=True) -> Result:
    seq, hidden, heads = QUICK if quick else FULL
    graph = bert_block(seq, hidden, heads)
    x = np.random.default_rng(seed).standard_normal((seq, hidden))
    ref = bert_numpy(graph, x)
    base = _graph_engine(graph, {"x": x}, ref)
    rows, program = [base], souffle.lower(graph)
    for stage, passes, fused in STAGES:
        row, subgraphs, explained, _ = _stage(program, stage, passes, fused, {"x": x}, ref,
                                              base, engine)
        rows.append(row)
    rows.append(_stage(program, OVERLAP_STAGE, STAGES[-1][1], True, {"x": x}, ref, base, engine,
                       overlap=True)[0])
    result = Result((seq, hidden, heads), rows, subgraphs, souffle.explain(explained))
    if lstm:
        size = LSTM_QUICK if quick else LSTM_FULL
        graph = import_onnx(lstm_model(*size))
        rng = np.random.default_rng(seed)
        feeds = {name: rng.standard_normal(info.shape) for name, info in graph.inputs.items()}
        program = souffle.lower(graph)
        ref = program.evaluate(feeds)[graph.outputs[0]]
        result.lstm, result.lstm_size, result.lstm_weight_bytes = [
            _graph_engine(graph, feeds, ref)], size, {}
        for stage, passes, fused in (STAGES[2], STAGES[3]):
            row, _, _, weights = _stage(program, stage, passes, fused, feeds, ref,
                                        result.lstm[0], engine)
            result.lstm.append(row)
            result.lstm_weight_bytes[stage] = weights
    if blocks:
        result.blocks_size = BLOCKS_QUICK if quick else BLOCKS_FULL
        result.blocks = {name: run_block(name, *result.blocks_size, seed=seed, engine=engine)
                         for name in BLOCKS}
    return result


def all_rows(result: Result) -> list:
    """Every row of the result (the command's exit status checks their errors)."""
    return result.rows + (result.lstm or []) + [
        r for rows in (result.blocks or {}).values() for r in rows]


def _table(rows) -> list:
    lines = [f"{'stage':<28} {'launches':>8} {'DMA bytes':>10} {'cycles':>10} "
             f"{'+ launches':>10} {'LDM peak':>9} {'speed-up':>8} {'error':>8}"]
    for r in rows:
        ldm = "-" if r.ldm_peak is None else f"{r.ldm_peak:,}"
        lines.append(f"{r.stage:<28} {r.launches:>8} {r.dma_bytes:>10,} {r.cycles:>10,} "
                     f"{r.with_launches:>10,} {ldm:>9} {r.speedup:>7.2f}x {r.max_error:>8.1e}")
    return lines


def format_report(result: Result, explain: bool = False) -> str:
    seq, hidden, heads = result.size
    lines = [f"tiny BERT block: sequence {seq}, hidden {hidden}, {heads} heads (float64 TEs; "
             "the graph engine in float32)"] + _table(result.rows)
    lines.append(f"cycles: the kernels'; + launches: with spawn_cycles ({result.rows[0].spawn_cycles})"
                 " per launch (the graph engine's CPE nodes); speed-up: over the graph engine's")
    lines += ["the fused subgraphs:", codegen.report(result.subgraphs)]
    if result.lstm:
        hidden, steps, batch, layers = result.lstm_size
        lines += ["", f"LSTM: {layers} layers, hidden {hidden}, {steps} steps, batch {batch} "
                  "(error against the unfused TE program)"] + _table(result.lstm)
        lines += [f"W and U moved by DMA, {stage}: {nbytes:,} B"
                  for stage, nbytes in result.lstm_weight_bytes.items()]
    for name, rows in (result.blocks or {}).items():
        channels, size = result.blocks_size
        lines += ["", f"{name} block: {channels} channels, {size}x{size}, batch 1 (error "
                  "against the graph engine's numpy operators in float64)"] + _table(rows)
    if explain:
        lines += ["passes:", result.explain]
    return "\n".join(lines)


def lstm_model(hidden=32, steps=4, batch=4, layers=2, seed=0):
    """An ONNX model of a ``layers``-layer LSTM unrolled over ``steps``: per layer, step and
    gate k, z_k = x W_k + h U_k + b_k (MatMul, MatMul, Add, Add), i, f, o = Sigmoid and
    g = Tanh, c = f c + i g, h = o tanh(c); inputs x0.. (batch, hidden), h and c start at 0.
    Per gate weights, so the horizontal transformation has the four gates to merge."""
    from onnx import TensorProto, helper as h, numpy_helper
    rng = np.random.default_rng(seed)
    w, nodes = {"zero": np.zeros((batch, hidden), np.float32)}, []

    def node(op, inputs, output):
        nodes.append(h.make_node(op, inputs, [output], name=output))
        return output
    activations = ("Sigmoid", "Sigmoid", "Sigmoid", "Tanh")       # i, f, o, g
    for layer in range(layers):
        for k in range(4):
            for name in ("W", "U"):
                w[f"{name}{layer}{k}"] = (rng.standard_normal((hidden, hidden)) /
                                          np.sqrt(hidden)).astype(np.float32)
            w[f"b{layer}{k}"] = (rng.standard_normal(hidden) * 0.1).astype(np.float32)
    inputs = [f"x{t}" for t in range(steps)]
    for layer in range(layers):
        outputs, state, cell = [], "zero", "zero"
        for t, x in enumerate(inputs):
            p = f"l{layer}t{t}"
            i, f, o, g = (node(op, [node("Add", [node("Add", [
                node("MatMul", [x, f"W{layer}{k}"], f"{p}xw{k}"),
                node("MatMul", [state, f"U{layer}{k}"], f"{p}hu{k}")], f"{p}s{k}"),
                f"b{layer}{k}"], f"{p}z{k}")], f"{p}a{k}") for k, op in enumerate(activations))
            cell = node("Add", [node("Mul", [f, cell], f"{p}fc"),
                                node("Mul", [i, g], f"{p}ig")], f"{p}c")
            state = node("Mul", [o, node("Tanh", [cell], f"{p}tc")], f"{p}h")
            outputs.append(state)
        inputs = outputs
    graph = h.make_graph(
        nodes, "lstm", [h.make_tensor_value_info(f"x{t}", TensorProto.FLOAT, [batch, hidden])
                        for t in range(steps)],
        [h.make_tensor_value_info(inputs[-1], TensorProto.FLOAT, [batch, hidden])],
        [numpy_helper.from_array(v, n) for n, v in w.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
