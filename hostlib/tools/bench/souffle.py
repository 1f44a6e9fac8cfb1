"""``swsim bench souffle``: Souffle's passes (hostlib/graph/souffle.py, docs/souffle.md) on a
tiny BERT block — the unfused graph engine against the generated kernels after each pass."""
from __future__ import annotations

import numpy as np

from ...graph import import_onnx


def bert_block(seq=32, hidden=64, heads=2, seed=0):
    """x -> Q/K/V projections, heads (Reshape, Transpose), softmax(Q K^T / sqrt(d)) V, the
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
    return import_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 20)]))
