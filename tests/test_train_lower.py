"""Caffe nets lowered to the graph IR (hostlib/train/lower.py, docs/train.md): LeNet's graph
gives the Net's forward outputs bit for bit, and the Solver trains it with the Net's losses."""
import numpy as np
import pytest

from swsim.hostlib import train
from swsim.hostlib.graph import Session
from swsim.hostlib.train.data import Order
from swsim.hostlib.train.lower import graph_model, lower_net
from swsim.hostlib.train.net import Net, Run
from swsim.vm import Machine


def lenet(batch=16):
    spec = train.parse_net(train.example("lenet"))
    for layer in spec.layer:
        if layer.type == "Data":
            layer.data_param.batch_size = batch
    return spec


def test_lowered_lenet_gives_the_nets_forward_bits():
    net = Net(lenet(), "TRAIN", seed=1)
    graph = lower_net(net)
    assert [n.op_type for n in graph.nodes] == [
        "Conv", "MaxPool", "Conv", "MaxPool", "Flatten", "Gemm", "Relu", "Gemm",
        "SoftmaxCrossEntropyLoss"]
    assert graph.inputs["label"].dtype == np.int64 and graph.outputs == ["loss"]
    batch = Order(*net.data_source(), 1).batch(0)
    machine = Machine()
    blobs = net.forward(Run(machine), batch)
    graph.outputs = ["pool2", "ip2", "loss"]         # NCHW in both (conv1, conv2 are not)
    got = Session(graph, machine=machine, minimum_work=False).run(
        {"data": batch[0], "label": batch[1].astype(np.int64)})
    for name in graph.outputs:
        assert np.array_equal(got[name], blobs[name]), name


def test_the_solver_trains_the_lowered_net_with_the_nets_losses():
    spec = train.SolverSpec(base_lr=0.1, momentum=0.9, random_seed=1)
    caffe = train.Solver(lenet(), spec)
    graph = train.Solver(graph_model(lenet(), seed=1), spec)
    for _ in range(3):
        assert caffe.step().loss == graph.step().loss
    # the parameters: within rounding (the conv bias gradients sum in another order)
    np.testing.assert_allclose(graph.net.params.buffer, caffe.net.params.buffer, atol=1e-6)


def test_a_layer_without_a_lowering_is_named():
    net = Net(train.parse_net(train.example("resnet")), "TRAIN")
    with pytest.raises(train.TrainError, match="layer 'stem_bn' .BatchNorm., type: BatchNorm has no lowering"):
        lower_net(net)
