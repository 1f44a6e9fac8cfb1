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


def example(name, batch):
    spec = train.parse_net(train.example(name))
    for layer in spec.layer:
        if layer.type == "Data":
            layer.data_param.batch_size = batch
    return spec


def lenet(batch=16):
    return example("lenet", batch)


def test_lowered_lenet_gives_the_nets_forward_bits():
    net = Net(lenet(), "TRAIN", seed=1)
    graph, parameters = lower_net(net)
    assert parameters == ["conv1/weights", "conv1/bias", "conv2/weights", "conv2/bias",
                          "ip1/weights", "ip1/bias", "ip2/weights", "ip2/bias"]
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


def test_batchnorm_and_its_scale_become_one_batchnormalization():
    graph, parameters = lower_net(Net(example("resnet", 8), "TRAIN"))
    bn = next(n for n in graph.nodes if n.name == "res1a_bn")
    assert bn.op_type == "BatchNormalization" and bn.inputs == [
        "res1a", "res1a_scale/weights", "res1a_scale/bias", "res1a_bn/mean", "res1a_bn/var"]
    assert bn.attrs == pytest.approx(dict(epsilon=1e-5, momentum=0.999))
    assert [n.op_type for n in graph.nodes].count("Sum") == 2
    assert "res1a_bn/mean" not in parameters and "res1a_scale/bias" in parameters


@pytest.mark.slow
def test_the_lowered_residual_net_trains_with_the_nets_losses():
    spec = train.SolverSpec(base_lr=0.05, momentum=0.9, random_seed=1)
    caffe = train.Solver(example("resnet", 8), spec)
    graph = train.Solver(graph_model(example("resnet", 8), seed=1), spec)
    for _ in range(2):
        assert caffe.step().loss == graph.step().loss
    np.testing.assert_allclose(graph.net.params.buffer, caffe.net.params.buffer, atol=1e-6)
    for layer in ("stem_bn", "res2b_bn"):
        for k, statistic in enumerate(("mean", "var")):
            np.testing.assert_allclose(graph.net.state[f"{layer}/{statistic}"],
                                       caffe.net.state[f"{layer}/state{k}"], rtol=1e-6)


def test_a_layer_without_a_lowering_is_named():
    net = Net(example("lstm", 8), "TRAIN")
    with pytest.raises(train.TrainError, match="layer 'rows' .SequenceTranspose., type: "
                                               "SequenceTranspose has no lowering"):
        lower_net(net)
