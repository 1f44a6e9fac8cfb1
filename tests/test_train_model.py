"""The model definition: prototxt parsing against caffe.proto, the Python API, and the errors
that name the layer and the field."""
import numpy as np
import pytest

from swsim.cli import main
from swsim.hostlib import train
from swsim.hostlib.train import layers

GOOD = """
name: "tiny"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "sklearn:digits" batch_size: 8 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 4 } }
layer { name: "relu" type: "ReLU" bottom: "ip" top: "ip" }
layer { name: "out" type: "InnerProduct" bottom: "ip" top: "out"
        inner_product_param { num_output: 1 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "out" bottom: "label" top: "loss" }
"""


def test_every_shipped_example_parses():
    for name in ("lenet", "resnet", "mlp", "regression", "lstm"):
        spec = train.parse_net(train.example(name))
        assert spec.layer and all(layer.name and layer.type for layer in spec.layer)
    lenet = train.parse_net(train.example("lenet"))
    assert [layer.type for layer in lenet.layer][2:] == [
        "Convolution", "Pooling", "Convolution", "Pooling", "InnerProduct", "ReLU",
        "InnerProduct", "Accuracy", "SoftmaxWithLoss"]
    solver = train.parse_solver(train.example("lenet_solver"))
    assert (solver.lr_policy, solver.test_iter[0], solver.type) == ("inv", 6, "SGD")


def test_an_unknown_example_lists_the_shipped_ones():
    with pytest.raises(train.TrainError, match="shipped: .*lenet"):
        train.example("alexnet")


def test_bad_prototxt_names_the_field():
    with pytest.raises(train.TrainError, match="num_outputs"):
        train.parse_net('layer { name: "a" inner_product_param { num_outputs: 3 } }')
    with pytest.raises(train.TrainError, match="not a valid solver"):
        train.parse_solver("base_lr: fast")


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(train.TrainError, match="cannot read"):
        train.parse_net(tmp_path / "none.prototxt")


def test_the_python_api_builds_the_same_messages_as_the_prototxt():
    built = train.NetSpec("tiny", [
        train.Data("d", "sklearn:digits", 8),
        train.InnerProduct("ip", "data", 4, weight_filler="constant"),
        train.ReLU("relu", "ip"),
        train.InnerProduct("out", "ip", 1, weight_filler="constant"),
        train.EuclideanLoss("loss", ["out", "label"])])
    parsed = train.parse_net(GOOD)
    for mine, theirs in zip(built.layer, parsed.layer):
        assert (mine.name, mine.type, list(mine.bottom), list(mine.top)) == \
               (theirs.name, theirs.type, list(theirs.bottom), list(theirs.top))
    assert built.layer[1].inner_product_param.num_output == 4


@pytest.mark.parametrize("text, pattern", [
    ('layer { name: "x" type: "Magic" }', r"layer 'x', type: unknown layer type 'Magic'"),
    ('layer { type: "ReLU" }', r"layer #0 \(ReLU\), name: must be given"),
    ('layer { name: "r" type: "ReLU" bottom: "nowhere" top: "r" }',
     r"layer 'r' \(ReLU\), bottom: blob 'nowhere' is no earlier layer's top"),
    ('layer { name: "d" type: "Data" top: "data" top: "label" }',
     r"layer 'd' \(Data\), data_param.source: must be given"),
    ('layer { name: "d" type: "Data" top: "data" top: "label" '
     'data_param { source: "x.csv" batch_size: 4 } }', r"neither 'sklearn:digits' nor"),
])
def test_graph_errors_name_the_layer_and_the_field(text, pattern):
    with pytest.raises(train.TrainError, match=pattern):
        train.Net(text)


def test_a_batch_that_does_not_divide_among_core_groups_is_refused():
    with pytest.raises(train.TrainError, match=r"layer 'd' \(Data\), data_param.batch_size: 8 "
                                               r"does not divide among 3 core groups"):
        train.Net(GOOD, slices=3)


def test_a_layer_whose_operator_is_missing_is_refused_at_construction(monkeypatch):
    # no numpy fallback: without its operator on the VM a layer cannot be built
    from swsim.hostlib import dnn
    monkeypatch.delattr(dnn, "linear_forward")
    with pytest.raises(train.TrainError, match=r"layer 'ip' \(InnerProduct\), type: needs "
                                               r"hostlib.dnn.linear_forward, not available yet"):
        train.Net(GOOD)


def test_batchnorm_and_scale_need_image_blobs_and_train_on_batch_statistics():
    for kind in ("BatchNorm", "Scale"):
        with pytest.raises(train.TrainError, match=rf"layer 'relu' \({kind}\), bottom: needs "
                                                   r"an \(N, C, H, W\) blob, got \(8, 4\)"):
            train.Net(GOOD.replace('type: "ReLU"', f'type: "{kind}"'))
    net = train.parse_net(train.example("resnet"))
    net.layer[2].batch_norm_param.use_global_stats = True
    with pytest.raises(train.TrainError, match=r"layer 'stem_bn' \(BatchNorm\), batch_norm_param."
                                               r"use_global_stats: training with the running"):
        train.Net(net)
    state = train.Net(train.example("resnet")).state     # mean and variance of 5 BatchNorms
    assert len(state.layout) == 10
    assert (state["res2b_bn/state0"] == 0).all() and (state["res2b_bn/state1"] == 1).all()


def _setup(kind, shapes, **fields):
    param = train.NetSpec("n", [getattr(train, kind)("l", "b", **fields)]).layer[0]
    return layers.KINDS[kind](param).setup(shapes)


def test_shape_inference_of_each_kind():
    assert _setup("Convolution", [(4, 1, 8, 8)], num_output=6, kernel_size=3, padding=1) == \
        [(4, 6, 8, 8)]
    assert _setup("Convolution", [(4, 3, 9, 9)], num_output=2, kernel_size=3, stride=2) == \
        [(4, 2, 4, 4)]
    assert _setup("Pooling", [(4, 6, 8, 8)], kernel_size=2) == [(4, 6, 4, 4)]
    assert _setup("InnerProduct", [(4, 6, 4, 4)], num_output=10) == [(4, 10)]
    assert _setup("ReLU", [(4, 10)]) == [(4, 10)]


def test_shape_errors_name_the_layer_and_the_field():
    with pytest.raises(train.TrainError, match=r"'l' \(Pooling\), pooling_param: .* not a "
                                               r"multiple of stride 2"):
        _setup("Pooling", [(4, 6, 7, 7)], kernel_size=2)
    with pytest.raises(train.TrainError, match=r"'l' \(Convolution\), bottom: needs an "
                                               r"\(N, C, H, W\) blob"):
        _setup("Convolution", [(4, 64)], num_output=2, kernel_size=3)
    with pytest.raises(train.TrainError, match=r"convolution_param: kernel 5 larger"):
        _setup("Convolution", [(1, 1, 2, 2)], num_output=2, kernel_size=5)
    param = train.NetSpec("n", [train.EuclideanLoss("l", ["a", "b"])]).layer[0]
    with pytest.raises(train.TrainError, match=r"'l' \(EuclideanLoss\), bottom"):
        layers.EuclideanLoss(param).setup([(4, 2), (4, 3)])


def test_the_committed_caffe_pb2_is_generated_from_caffe_proto(tmp_path):
    from grpc_tools import protoc
    from pathlib import Path
    package = Path(train.__file__).parent
    assert protoc.main(["protoc", f"-I{package}", f"--python_out={tmp_path}",
                        str(package / "caffe.proto")]) == 0
    assert (tmp_path / "caffe_pb2.py").read_text() == (package / "caffe_pb2.py").read_text()


def test_what_an_operator_refuses_is_an_error_naming_the_layer(tmp_path, monkeypatch):
    """The operators' own refusals are tested with them; here one stands in for any."""
    from swsim.hostlib import dnn

    def refuse(*args, **kwargs):
        raise dnn.DnnError("the channel's buffers do not fit in LDM")

    monkeypatch.setattr(dnn, "batchnorm_forward", refuse)
    source = tmp_path / "small.npz"
    np.savez(source, data=np.ones((2, 1, 4, 4)), label=np.zeros(2))
    net = train.NetSpec("small", [
        train.Data("d", str(source), batch_size=2), train.BatchNorm("bn", "data"),
        train.InnerProduct("ip", "bn", 2), train.SoftmaxWithLoss("loss", ["ip", "label"])])
    with pytest.raises(train.TrainError, match=r"layer 'bn' \(BatchNorm\), operator: "
                                               r"batchnorm_forward: .* do not fit in LDM"):
        train.Solver(net, train.SolverSpec(base_lr=0.1)).step()


@pytest.mark.parametrize("old, new, pattern", [
    ("kernel_size: 3 pad: 1", "kernel_size: 3 pad: 1 stride: 0",
     r"convolution_param: kernel_size and stride must be >= 1, got kernel 3 and stride 0"),
    ("kernel_size: 3 pad: 1", "kernel_size: 0 pad: 1",
     r"convolution_param: kernel_size and stride must be >= 1, got kernel 0"),
    ("kernel_size: 3 pad: 1", "kernel_size: 3 pad: 100",
     r"convolution_param: pad 100 must be smaller than the kernel 3"),
    ("pool: MAX kernel_size: 2 stride: 2", "pool: MAX kernel_size: 2 stride: 0",
     r"pooling_param: kernel_size and stride must be >= 1"),
    ('top: "accuracy"', 'top: "accuracy" accuracy_param { top_k: 11 }',
     r"layer 'accuracy' \(Accuracy\), accuracy_param.top_k: must be 1..10 \(the classes\), "
     r"got 11"),
])
def test_window_and_top_k_fields_are_bounded(old, new, pattern):
    text = train.example("lenet").read_text()
    assert old in text
    with pytest.raises(train.TrainError, match=pattern):
        train.Net(text.replace(old, new, 1), "TEST")


def test_swsim_train_takes_a_shipped_examples_name(capsys):
    assert main(["train", "mlp", "--explain"]) == 0
    assert "linear_forward+linear_backward" in capsys.readouterr().out
    assert main(["train", "nosuch", "--explain"]) == 1
    assert "no example net 'nosuch'; shipped: lenet, lenet_solver" in capsys.readouterr().err


def test_a_net_file_without_the_prototxt_suffix_is_read_as_a_file(tmp_path):
    path = tmp_path / "net.txt"
    path.write_text('name: "n" layer { name: "r" type: "ReLU" bottom: "x" top: "x" }')
    assert train.parse_net(str(path)).name == "n"
