"""The layout pass (hostlib/graph/layout_selection.py, docs/graph.md "Layouts"): tensors stay
in their producer's layout, a Transform only where a consumer takes another; against a
Conv that transforms at every node, fewer transforms and fewer simulated cycles, the same bits."""
import numpy as np
import pytest

from graph_models import convnet, convstack, resblock
from swsim.hostlib.graph import GraphError, Session, import_onnx
from swsim.hostlib.graph.layout_selection import plan_layouts
from swsim.hostlib.train.data import Order
from swsim.hostlib.train.lower import lower_net
from swsim.hostlib.train.net import Net
from swsim.vm import VMConfig
from test_train_lower import lenet


def both(graph_of, feeds):
    """(per-node session, planned session, their outputs), each on a fresh graph."""
    sessions = [Session(graph_of(), layouts=planned) for planned in (False, True)]
    outputs = [session.run(feeds) for session in sessions]
    return sessions, outputs


def assert_fewer_transforms_same_bits(sessions, outputs):
    per_node, planned = sessions
    for name, value in outputs[0].items():
        assert np.array_equal(outputs[1][name], value), name
    views = [r for r in planned.records if r.op_type == "Transpose" and r.device == "view"]
    assert planned.layout_transforms + len(views) == planned.transforms_planned
    assert planned.layout_transforms < per_node.layout_transforms
    assert planned.cycles < per_node.cycles


def test_consecutive_convolutions_share_their_layout():
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32)}
    sessions, outputs = both(lambda: import_onnx(convstack()), feeds)
    assert_fewer_transforms_same_bits(sessions, outputs)
    per_node, planned = sessions
    # each conv's algorithm is explicit (CNHW): 2 transforms per conv, against one into CNHW
    # and one back before Flatten (MaxPool pools CNHW as it comes)
    assert per_node.layout_transforms == 6 and planned.layout_transforms == 2
    layouts = {n.name: n.attr("layout") for n in planned.graph.nodes if n.op_type == "Conv"}
    assert set(layouts.values()) == {"CNHW"}


def test_lenet_lowered_from_caffe_runs_fewer_transforms():
    net = Net(lenet(8), "TRAIN", seed=1)
    batch = Order(*net.data_source(), 1).batch(0)
    feeds = {"data": batch[0], "label": batch[1].astype(np.int64)}
    sessions, outputs = both(lambda: lower_net(net)[0], feeds)
    assert_fewer_transforms_same_bits(sessions, outputs)


def test_a_tensor_is_transformed_once_per_layout_and_outputs_stay_nchw():
    graph = import_onnx(resblock())
    shapes = {name: graph.infer()[name].shape for name in graph.outputs}
    inserted = plan_layouts(graph, VMConfig.preset("sw26010"), minimum_work=False)
    transforms = [(n.inputs[0], tuple(n.attr("perm"))) for n in graph.nodes
                  if n.attr("layout_pass")]
    assert inserted == len(transforms) > 0 and len(set(transforms)) == len(transforms)
    assert {name: graph.info[name].shape for name in graph.outputs} == shapes


def test_the_callers_graph_is_left_as_it_was():
    graph = import_onnx(convnet())
    before = [(n.op_type, list(n.inputs), list(n.outputs), dict(n.attrs)) for n in graph.nodes]
    Session(graph)
    assert [(n.op_type, n.inputs, n.outputs, n.attrs) for n in graph.nodes] == before


def test_an_unknown_conv_layout_is_refused_naming_the_node():
    graph = import_onnx(convnet())
    next(n for n in graph.nodes if n.op_type == "Conv").attrs["layout"] = "HWNC"
    graph.info = {}
    with pytest.raises(GraphError, match="node 'conv'.*layout 'HWNC'"):
        graph.infer()


def test_at_batch_1_a_transform_between_nchw_and_cnhw_is_a_view():
    """NCHW and CNHW hold the same bytes when N = 1: the planned Transposes run as views (no
    launch, 0 cycles), a conv's own transforms are skipped too; at batch 2 they launch."""
    launched = {}
    for batch in (1, 2):
        feeds = {"x": np.random.default_rng(0).standard_normal((batch, 3, 16, 16))
                 .astype(np.float32)}
        sessions, outputs = both(lambda: import_onnx(convstack(batch=batch)), feeds)
        per_node, planned = sessions
        for name, value in outputs[0].items():
            assert np.array_equal(outputs[1][name], value), name
        transposes = [r for r in planned.records if r.op_type == "Transpose"]
        assert planned.transforms_planned == len(transposes) == 2
        launched[batch] = (per_node.layout_transforms, planned.layout_transforms,
                           [(r.device, r.cycles) for r in transposes])
    assert launched[1] == (0, 0, [("view", 0)] * 2)
    assert launched[2][:2] == (6, 2) and all(device == "CPE" and cycles > 0
                                             for device, cycles in launched[2][2])


def test_a_training_graph_keeps_its_gradients_in_their_convolutions_layouts():
    """The backward nodes are planned too: each ConvGrad in its forward's layout, the pools'
    and activations' gradients in their operands'; against every Conv and ConvGrad
    transforming its operands, 16 transforms become 3 (x into CNHW, the pooled map out of it
    for Flatten and its gradient back), with the same loss and gradients."""
    from swsim.hostlib.graph.autodiff import derive_training, with_loss
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32),
             "labels": np.array([1, 2])}
    training = [derive_training(with_loss(import_onnx(convstack(2, 8, 4)), "y"), "loss")
                for _ in range(2)]
    sessions, outputs = both(lambda: training.pop().graph, feeds)
    per_node, planned = sessions
    assert (per_node.layout_transforms, planned.layout_transforms) == (16, 3)
    assert planned.transforms_planned == 3 and planned.cycles < per_node.cycles
    for name, value in outputs[0].items():      # the loss and every parameter's gradient
        assert np.array_equal(outputs[1][name], value), name
    layouts = {n.attr("layout") for n in planned.graph.nodes if n.op_type in ("Conv",
                                                                               "ConvGrad")}
    assert layouts == {"CNHW"}
