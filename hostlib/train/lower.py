"""Caffe nets lowered to the graph IR (docs/train.md "Caffe nets as graphs"): ``lower_net``
turns a TRAIN-phase ``Net`` (its layers, blob shapes and current parameters) into a
``hostlib.graph.Graph`` of ONNX operators -- Convolution to Conv, Pooling to MaxPool /
AveragePool / GlobalAveragePool / GlobalMaxPool, InnerProduct to Flatten + Gemm (transB=1),
ReLU / Sigmoid / TanH, Eltwise SUM to Sum, BatchNorm (with the Scale after it, if any) to
BatchNormalization, SoftmaxWithLoss to SoftmaxCrossEntropyLoss -- whose
inputs are the Data layer's data (float32) and label (int64) and whose one output is the loss;
``graph_model`` wraps it as a ``GraphModel`` the Solver trains like the Net. Layers with no
lowering yet (a Scale not after a BatchNorm, LSTM, SequenceTranspose, EuclideanLoss, Accuracy
in TRAIN) are refused, naming the layer."""
from __future__ import annotations

import numpy as np

from ..graph import Graph, Node, TensorInfo
from .common import DTYPE, TrainError
from .graph_net import GraphModel
from .net import Net

OPSET = 13
ACTIVATIONS = {"ReLU": "Relu", "Sigmoid": "Sigmoid", "TanH": "Tanh"}


def lower_net(net: Net):
    """The graph of ``net`` (phase TRAIN, one loss), its parameters and BatchNorm's running
    statistics as initializers; returns (graph, the parameters' names in the net's order)."""
    if net.phase != "TRAIN" or len(net.losses) != 1:
        raise TrainError(f"net {net.spec.name!r}: lowering takes a TRAIN net with one loss "
                         f"layer, got phase {net.phase} with {len(net.losses)}")
    nodes, inputs, initializers, parameters, fused = [], {}, {}, [], set()
    for index, node in enumerate(net.nodes):
        layer, kind = node.layer, node.layer.param.type
        names = _parameter_names(node)
        initializers.update((name, net.params[p].copy()) for name, p in zip(names, node.params))
        parameters += names

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
        elif kind == "BatchNorm":
            scale = _scale_after(net, index)
            channels = (net.shapes[node.bottoms[0]][1],)
            affine = [f"{layer.name}/ones", f"{layer.name}/zeros"]
            if scale is not None:         # Caffe's BatchNorm + Scale: one BatchNormalization
                fused.add(scale.layer.name)
                affine = (_parameter_names(scale) + affine[1:])[:2]
            for name, fill in zip(affine, (1, 0)):
                if name.endswith(("/ones", "/zeros")):
                    initializers[name] = np.full(channels, fill, DTYPE)
            statistics = [f"{layer.name}/mean", f"{layer.name}/var"]
            initializers.update((name, net.state[s].copy())
                                for name, s in zip(statistics, node.state))
            p = layer.param.batch_norm_param
            add("BatchNormalization", node.bottoms + affine + statistics,
                (scale or node).tops, epsilon=p.eps, momentum=p.moving_average_fraction)
        elif kind == "Scale" and layer.name in fused:
            continue
        elif kind == "SoftmaxWithLoss":
            add("SoftmaxCrossEntropyLoss", node.bottoms, node.tops)
        else:
            raise layer.error("type", f"{kind} has no lowering to the graph IR yet")
    graph = Graph(net.spec.name, nodes, inputs, [net.losses[0].tops[0]], initializers)
    graph.infer()
    return graph, parameters


def _parameter_names(node) -> list:
    return [f"{node.layer.name}/{'weights' if i == 0 else 'bias'}"
            for i in range(len(node.params))]


def _scale_after(net, index):
    """The Scale layer right after BatchNorm ``net.nodes[index]`` that alone reads its top,
    or None."""
    top = net.nodes[index].tops[0]
    after = net.nodes[index + 1] if index + 1 < len(net.nodes) else None
    readers = [n for n in net.nodes if top in n.bottoms]
    if after is not None and after.layer.param.type == "Scale" and readers == [after]:
        return after
    return None


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
    graph, parameters = lower_net(net)
    label = net.data_layer.tops[1]
    p = net.data_layer.layer.param.data_param
    return GraphModel(graph, source=p.source, batch_size=p.batch_size, scale=p.scale,
                      loss=graph.outputs[0], labels=label, parameters=parameters,
                      name=net.spec.name, **options)
