"""The graph IR every front end lowers to (docs/graph.md): named tensors, nodes in ONNX's
operator vocabulary (op type, ordered inputs and outputs, attributes, the opset they were
written for), initializers (constant tensors) and the graph's inputs and outputs with their
dtype and shape. ``Graph.order()`` is a topological order; ``Graph.infer()`` fills every
tensor's ``TensorInfo`` from the operators' shape functions (``ops.OPS``)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import ArgumentError


class GraphError(ArgumentError):
    """A graph that cannot be imported or run; the message names the node or tensor."""


@dataclass(frozen=True)
class TensorInfo:
    """What shape inference knows of a tensor: its numpy dtype and its shape (ints)."""
    dtype: np.dtype
    shape: tuple

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Node:
    """One operator of a graph (ONNX's NodeProto)."""
    name: str
    op_type: str
    inputs: list              # tensor names; "" = an omitted optional input
    outputs: list
    attrs: dict = field(default_factory=dict)
    opset: int = 0            # the operator set version the node was written for

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    def __str__(self) -> str:
        return f"node {self.name!r} ({self.op_type})"


@dataclass
class Graph:
    """Nodes, the inputs the caller feeds, the outputs and the constant initializers."""
    name: str
    nodes: list
    inputs: dict              # name -> TensorInfo of the values the caller feeds
    outputs: list             # names of the results
    initializers: dict = field(default_factory=dict)   # name -> np.ndarray (constants)
    info: dict = field(default_factory=dict)           # name -> TensorInfo, by infer()

    def producers(self) -> dict:
        """tensor name -> the node that writes it."""
        return {out: node for node in self.nodes for out in node.outputs if out}

    def consumers(self) -> dict:
        """tensor name -> the nodes that read it."""
        found: dict = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    found.setdefault(name, []).append(node)
        return found

    def check(self) -> None:
        """Unique node outputs, every input defined (a graph input, an initializer or some
        node's output) and every graph output produced; raises GraphError naming the node."""
        written = set(self.inputs) | set(self.initializers)
        for node in self.nodes:
            for out in node.outputs:
                if out and out in written:
                    raise GraphError(f"{node}: output {out!r} is already defined (a graph "
                                     "input, an initializer or another node's output)")
                written.add(out)
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in written:
                    raise GraphError(f"{node}: input {name!r} is not defined (no graph input, "
                                     "initializer or node output of that name)")
        for name in self.outputs:
            if name not in written:
                raise GraphError(f"graph output {name!r} is not produced by any node")

    def order(self) -> list:
        """The nodes in a topological order (stable: ready nodes in their listed order);
        raises GraphError naming a node on a cycle."""
        self.check()
        producers = self.producers()
        waiting = {id(node): {producers[n].name for n in node.inputs if n in producers}
                   for node in self.nodes}
        done, ordered, pending = set(), [], list(self.nodes)
        while pending:
            ready = [node for node in pending if waiting[id(node)] <= done]
            if not ready:
                raise GraphError(f"the graph has a cycle through {pending[0]} (its inputs "
                                 "depend on its own outputs)")
            for node in ready:
                done.add(node.name)
                ordered.append(node)
            pending = [node for node in pending if node.name not in done]
        return ordered

    def infer(self) -> dict:
        """Fill ``info`` (name -> TensorInfo) for every tensor, in topological order, with the
        operators' shape functions; raises GraphError naming the node whose inputs it cannot
        take. Returns ``info``."""
        from .ops import infer_node     # ops reads the IR; the IR asks it only here
        info = dict(self.inputs)
        info.update({name: TensorInfo(value.dtype, value.shape)
                     for name, value in self.initializers.items()})
        for node in self.order():
            for name, tensor in zip(node.outputs, infer_node(node, info, self.initializers)):
                if name:
                    info[name] = tensor
        self.info = info
        return info
