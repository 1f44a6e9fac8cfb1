"""Graph passes (docs/graph.md "Passes"): functions Graph -> Graph that ``PassManager`` runs in
order. ``DEFAULT`` (what the importer runs): ``fold_constants`` (nodes whose inputs are all
known at import -- shape arithmetic, Constant, ConstantOfShape fills, Shape of a tensor whose
shape is known -- become initializers), ``inference_mode`` (Dropout is the identity at
inference; its mask, when used, is all ones) and ``remove_identities``."""
from __future__ import annotations

import numpy as np

from .ir import Graph, GraphError, Node, TensorInfo
from .ops import OPS, infer_node


class PassManager:
    """Runs passes in order; ``log`` records (pass name, nodes before, nodes after)."""

    def __init__(self, passes):
        self.passes = list(passes)
        self.log = []

    def __call__(self, graph: Graph) -> Graph:
        for run in self.passes:
            before = len(graph.nodes)
            graph = run(graph)
            self.log.append((run.__name__, before, len(graph.nodes)))
        return graph


def fold_constants(graph: Graph) -> Graph:
    """Evaluate at import (on the host, once) every node whose inputs are constants, and
    every Shape whose input's shape is known; their outputs become initializers."""
    constants = dict(graph.initializers)
    info = dict(graph.inputs)
    info.update({k: _info(v) for k, v in constants.items()})
    kept = []
    for node in graph.order():
        inputs = [name for name in node.inputs if name]
        foldable = all(name in constants for name in inputs) and node.op_type in OPS
        if node.op_type == "Shape" and inputs and inputs[0] in info:
            foldable = True
        if foldable:
            args = [None if not name else constants.get(name, _shaped(info.get(name)))
                    for name in node.inputs]
            infer_node(node, info, constants)           # the node's own checks and errors
            with np.errstate(all="ignore"):
                values = OPS[node.op_type].mpe(node, *args)
            for name, value in zip(node.outputs, values):
                if name:
                    constants[name] = np.asarray(value)
                    info[name] = _info(constants[name])
            continue
        for name, tensor in zip(node.outputs, infer_node(node, info, constants)):
            if name:
                info[name] = tensor
        kept.append(node)
    used = {name for node in kept for name in node.inputs} | set(graph.outputs)
    graph.nodes = kept
    graph.initializers = {k: v for k, v in constants.items() if k in used}
    return graph


def _info(value):
    return TensorInfo(value.dtype, value.shape)


def _shaped(tensor):
    """A stand-in for Shape's input: only its shape is read."""
    return np.broadcast_to(np.zeros((), tensor.dtype), tensor.shape)


def inference_mode(graph: Graph) -> Graph:
    """Dropout at inference: its output is its input (an Identity); a used mask output is a
    constant of ones."""
    info = graph.infer()
    nodes = []
    for node in graph.nodes:
        if node.op_type != "Dropout":
            nodes.append(node)
            continue
        reason = OPS["Dropout"].check(node, [])
        if reason:
            raise GraphError(f"{node}: {reason}")
        nodes.append(Node(node.name, "Identity", node.inputs[:1], node.outputs[:1],
                          opset=node.opset))
        if len(node.outputs) > 1 and node.outputs[1]:
            graph.initializers[node.outputs[1]] = np.ones(info[node.inputs[0]].shape, bool)
    graph.nodes = nodes
    return graph


def remove_identities(graph: Graph) -> Graph:
    """Drop Identity nodes, their readers reading the source; one that writes a graph output
    from a graph input or constant (or another output) stays."""
    rename = {}
    kept = []
    outputs = set(graph.outputs)
    for node in graph.order():
        node.inputs = [rename.get(name, name) for name in node.inputs]
        if node.op_type == "Identity" and node.outputs[0] not in outputs:
            rename[node.outputs[0]] = node.inputs[0]
            continue
        kept.append(node)
    graph.nodes = kept
    return graph


DEFAULT = (fold_constants, inference_mode, remove_identities)
