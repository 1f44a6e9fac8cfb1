"""The layout pass (docs/graph.md "Layouts"; thesis §7.1, the Caffe Net's ``_plan_forward_layouts``
on the graph IR). Each operator states the layouts it takes its 4-D activations in
(``accepted``): a Conv the layout of the algorithm the conv models choose for it (when it will
run on the CPEs), the poolings NCHW or CNHW (their planes are the innermost two axes), the
element-wise operators any layout (their inputs' shapes equal), every other operator NCHW. The
pass keeps each tensor in the layout its producer wrote it in and inserts a Transform (a
Transpose the CPEs run as ``dnn.transform``) only where a consumer -- or a graph output, which
is NCHW -- takes another, once per (tensor, layout). Without it, each Conv transforms its input
into its algorithm's layout and its output back (``dnn.conv2d_forward`` with NCHW operands)."""
from __future__ import annotations

import numpy as np

from ..dnn import conv as conv_ops
from ..dnn.conv.common import make_geometry
from ...errors import SwsimError
from .dispatch import mpe_cycles
from .ir import Graph, Node
from .ops import FLOATS, LAYOUTS, perm, window_geometry

CANONICAL = "NCHW"
# plane-wise operators (their planes the innermost two axes), forward and backward
POOLS = ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "MaxPoolTraining",
         "MaxPoolGrad", "AveragePoolGrad", "GlobalAveragePoolGrad")
POOL_LAYOUTS = (CANONICAL, "CNHW")
ELEMENTWISE = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Identity", "Add", "Sub", "Mul", "Div",
               "Sum", "ReluGrad", "LeakyReluGrad", "SigmoidGrad", "TanhGrad")
ACTIVATIONS_OUT = {"ConvGrad": 1}     # outputs in the node's layout (dx; not dw)


def plan_layouts(graph: Graph, config, cgs: int = 1, minimum_work: bool = True) -> int:
    """Rewrite ``graph`` (inferred) in place: Conv nodes get the ``layout`` attribute of their
    algorithm, tensors are stored in their producer's layout, Transform nodes are inserted
    where a consumer takes another. ``cgs``/``minimum_work``: as the Session runs the nodes
    (the conv models' choice and swHMAE's minimum-work rule). Returns the Transforms inserted.
    In a training graph a ConvGrad takes its forward's layout, the gradients of the pools and
    activations any their forward takes, other operators NCHW. Where a node takes several
    layouts, the one its 4-D operands already have the most bytes in is kept (ties: its
    first operand's)."""
    info = graph.info or graph.infer()
    current = {}                   # tensor -> (the name its producer wrote, that layout)
    stored = {}                    # (tensor, layout) -> the name of its copy in that layout
    outputs = set(graph.outputs)
    nodes, transforms = [], []

    def version(name, layout):
        """The name of tensor ``name`` in ``layout``, inserting the Transform on first use."""
        source, src = current.get(name, (name, CANONICAL))
        if src == layout:
            return source
        if (name, layout) not in stored:
            target = name if layout == CANONICAL and name in outputs else f"{name}:{layout}"
            transforms.append(Node(f"layout {name} {src}>{layout}", "Transpose", [source],
                                   [target], {"perm": perm(LAYOUTS[src], LAYOUTS[layout]),
                                              "layout_pass": 1},
                                   opset=13))
            nodes.append(transforms[-1])
            stored[(name, layout)] = target
        return stored[(name, layout)]

    for node in graph.order():
        operands = [i for i, name in enumerate(node.inputs)
                    if name and name not in graph.initializers and len(info[name].shape) == 4]
        accepted = _accepted(node, info, operands, config, cgs, minimum_work)
        names = [node.inputs[i] for i in operands]
        held = [current.get(name, (name, CANONICAL))[1] for name in names]
        candidates = list(dict.fromkeys(held + [CANONICAL] if accepted is None else accepted))

        def to_move(layout):
            return sum(info[name].size for name, now in zip(names, held)
                       if now != layout and (name, layout) not in stored)
        layout = min(candidates, key=lambda c: (to_move(c), c not in held[:1],
                                                candidates.index(c)))
        node.inputs = [version(name, layout) if i in operands else name
                       for i, name in enumerate(node.inputs)]
        if node.op_type in ("Conv", "ConvGrad") and layout != CANONICAL:
            node.attrs = dict(node.attrs, layout=layout)
        produced = [name for name in node.outputs[:ACTIVATIONS_OUT.get(node.op_type)]
                    if name and len(info[name].shape) == 4]
        if layout == CANONICAL or not operands or not produced:
            nodes.append(node)
            continue
        physical = {name: f"{name}:{layout}" if name in outputs else name for name in produced}
        node.outputs = [physical.get(name, name) for name in node.outputs]
        nodes.append(node)
        for name in produced:
            current[name] = (physical[name], layout)
            stored[(name, layout)] = physical[name]
            if name in outputs:
                version(name, CANONICAL)
    graph.nodes = nodes
    graph.info = {}
    graph.infer()
    return len(transforms)


def _accepted(node, info, operands, config, cgs, minimum_work):
    """The layouts ``node`` takes its 4-D activations in, best first (None: any, all alike)."""
    if node.op_type == "Conv" and operands == [0]:
        return (_conv_layout(node, info, config, cgs, minimum_work),)
    if node.op_type == "ConvGrad" and operands == [0, 1]:       # its forward's layout
        forward = Node(node.name, "Conv", node.inputs[1:3], node.inputs[:1], node.attrs,
                       node.opset)
        return (_conv_layout(forward, info, config, cgs, minimum_work),)
    if node.op_type in POOLS and operands:
        return POOL_LAYOUTS
    shapes = {info[name].shape for name in node.inputs if name}
    if node.op_type in ELEMENTWISE and operands and len(shapes) == 1 and \
            len(operands) == len([name for name in node.inputs if name]):
        return None
    return (CANONICAL,)


def _conv_layout(node, info, config, cgs, minimum_work) -> str:
    """The forward algorithm's layout of a Conv the CPEs will run as one convolution (no
    groups, dilation or asymmetric padding; enough work), else NCHW."""
    x, w = (info[name] for name in node.inputs[:2])
    begin, end, strides, dilations, _ = window_geometry(node, x.shape[2:], list(w.shape[2:]))
    if int(node.attr("group", 1)) != 1 or dilations != [1, 1] or begin != end or \
            x.dtype not in FLOATS:
        return CANONICAL
    if minimum_work:
        stand_ins = [np.broadcast_to(np.zeros((), t.dtype), t.shape)
                     for t in (info[name] for name in node.inputs if name)]
        y = np.broadcast_to(np.zeros((), x.dtype), info[node.outputs[0]].shape)
        if mpe_cycles(node, stand_ins, [y], config) < config.spawn_cycles:
            return CANONICAL
    try:
        geo = make_geometry(x.shape, w.shape, tuple(strides), tuple(begin), "w")
        return conv_ops.choose(geo, "forward", x.dtype, config, cgs).LAYOUT
    except SwsimError:
        return CANONICAL        # no CPE algorithm: the MPE runs it, in NCHW

