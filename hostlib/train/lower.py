"""Caffe nets lowered to the graph IR (docs/train.md "Caffe nets as graphs"): ``lower_net``
turns a TRAIN-phase ``Net`` (its layers, blob shapes and current parameters) into a
``hostlib.graph.Graph`` of ONNX operators -- Convolution to Conv, Pooling to MaxPool /
AveragePool / GlobalAveragePool / GlobalMaxPool, InnerProduct to Flatten + Gemm (transB=1),
ReLU / Sigmoid / TanH, Eltwise SUM to Sum, SoftmaxWithLoss to SoftmaxCrossEntropyLoss -- whose
inputs are the Data layer's data (float32) and label (int64) and whose one output is the loss;
``graph_model`` wraps it as a ``GraphModel`` the Solver trains like the Net. Layers with no
lowering yet (BatchNorm, Scale, LSTM, SequenceTranspose, EuclideanLoss, Accuracy in TRAIN)
are refused, naming the layer."""
from __future__ import annotations

import numpy as np

from ..graph import Graph, Node, TensorInfo
from .common import DTYPE, TrainError
from .graph_net import GraphModel
from .net import Net

OPSET = 13
ACTIVATIONS = {"ReLU": "Relu", "Sigmoid": "Sigmoid", "TanH": "Tanh"}


def lower_net(net: Net) -> Graph:
    """The graph of ``net`` (phase TRAIN, one loss), its parameters as initializers."""
    if net.phase != "TRAIN" or len(net.losses) != 1:
        raise TrainError(f"net {net.spec.name!r}: lowering takes a TRAIN net with one loss "
                         f"layer, got phase {net.phase} with {len(net.losses)}")
    nodes, inputs, initializers = [], {}, {}
    for node in net.nodes:
        layer, kind = node.layer, node.layer.param.type
        params = [net.params[p].copy() for p in node.params]
        names = [f"{layer.name}/{'weights' if i == 0 else 'bias'}" for i in range(len(params))]
        initializers.update(zip(names, params))

        def add(op_type, inputs_, outputs, name=layer.name, **attrs):
            nodes.append(Node(name, op_type, list(inputs_), list(outputs), attrs, OPSET))
        if kind == "Data":
            if len(node.tops) != 2:
                raise layer.error("top", "lowering takes a Data layer of data and label")
            inputs[node.tops[0]] = TensorInfo(np.dtype(DTYPE), net.shapes[node.tops[0]])
            inputs[node.tops[1]] = TensorInfo(np.dtype(np.int64), net.shapes[node.tops[1]])
        elif kind == "Convolution":
            add("Conv", node.bottoms + names, node.tops, kernel_shape=[layer.kernel] * 2,
                strides=[layer.stride] * 2, pads=[layer.pad] * 4)
        elif kind == "Pooling":
            op_type, attrs = _pooling(layer)
            add(op_type, node.bottoms, node.tops, **attrs)
        elif kind == "InnerProduct":
            bottom = node.bottoms[0]
            if len(net.shapes[bottom]) != 2:
                flat = f"{bottom}/flat"
                add("Flatten", [bottom], [flat], name=f"{layer.name}/flatten", axis=1)
                bottom = flat
            add("Gemm", [bottom] + names, node.tops, transB=1)
        elif kind in ACTIVATIONS:
            add(ACTIVATIONS[kind], node.bottoms, node.tops)
        elif kind == "Eltwise" and layer.coeff == [1.0, 1.0]:
            add("Sum", node.bottoms, node.tops)
        elif kind == "SoftmaxWithLoss":
            add("SoftmaxCrossEntropyLoss", node.bottoms, node.tops)
        else:
            raise layer.error("type", f"{kind} has no lowering to the graph IR yet")
    graph = Graph(net.spec.name, nodes, inputs, [net.losses[0].tops[0]], initializers)
    graph.infer()
    return graph


def _pooling(layer):
    """(op type, attributes) of a Pooling layer."""
    mode = "Max" if layer.mode == "max" else "Average"
    if layer.param.pooling_param.global_pooling:
        return f"Global{mode}Pool", {}
    attrs = dict(kernel_shape=[layer.kernel] * 2, strides=[layer.stride] * 2,
                 pads=[layer.pad] * 4)
    if mode == "Average":
        attrs["count_include_pad"] = 1          # the operators divide by the whole window
    return f"{mode}Pool", attrs


def graph_model(spec, *, seed: int = 0, **options) -> GraphModel:
    """A Caffe net (NetParameter, prototxt text or path) as the GraphModel the Solver trains:
    the TRAIN net's parameters as initialised with ``seed``, its Data layer's source, batch
    and scale. ``options``: GraphModel's (check=, minimum_work=)."""
    net = Net(spec, "TRAIN", seed=seed)
    graph = lower_net(net)
    label = net.data_layer.tops[1]
    p = net.data_layer.layer.param.data_param
    return GraphModel(graph, source=p.source, batch_size=p.batch_size, scale=p.scale,
                      loss=graph.outputs[0], labels=label, name=net.spec.name, **options)
