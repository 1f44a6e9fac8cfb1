"""The layout pass (thesis §7.1): each layer runs in its operator's layout, transforms only
where the two ends of an edge (or of a gradient's way back) differ, each accounted as its own
row, and the losses still those of the float64 reference."""
import numpy as np
import pytest

from swsim import Machine
from swsim.vm.config import VMConfig
from swsim.cli import main
from swsim.hostlib import dnn, train
from swsim.hostlib.train import layers
from swsim.hostlib.train.layout_plan import physical
from swsim.hostlib.train.net import Run
from swsim.hostlib.train.reference import Reference
from test_train_reference import RESIDUAL, _matches_reference, _with_random_set

# conv1 -> relu1 -> conv2, and relu1's blob also added to conv2's (a shortcut): ReLU and
# Eltwise are layout-free, pooling takes NCHW or CNHW (planes innermost), InnerProduct NCHW,
# so the shortcut's gradient meets conv2's.
NET = """
name: "layouts"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "%s" batch_size: 4 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "uniform" min: -0.1 max: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "uniform" min: -0.1 max: 0.1 } } }
layer { name: "sum" type: "Eltwise" bottom: "conv1" bottom: "conv2" top: "sum" }
layer { name: "pool" type: "Pooling" bottom: "sum" top: "pool"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "out" type: "InnerProduct" bottom: "pool" top: "out"
        inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "out" bottom: "label" top: "loss" }
"""
SOLVER = train.SolverSpec(base_lr=0.1, momentum=0.9, random_seed=3)


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return _with_random_set(tmp_path_factory, NET, 5, 6)


def _node(net, name):
    return next(n for n in net.nodes if n.layer.name == name)


def test_every_layer_reads_its_bottoms_in_its_own_layout(spec):
    net = train.Net(spec, config=Machine().config)
    conv1, relu1, conv2 = (_node(net, name).layer for name in ("conv1", "relu1", "conv2"))
    assert conv1.layout == conv1.algos["forward"].LAYOUT != "NCHW"
    assert relu1.layout == conv1.layout                    # layout-free: its bottom's
    pool, summed = _node(net, "pool").layer, net.layouts[_node(net, "sum").tops[0]]
    assert pool.layout == (summed if summed in ("NCHW", "CNHW") else "NCHW")
    for node in net.nodes:
        for name in node.inputs:
            if len(net.shapes[name]) == 4:
                assert net.layouts[name] == node.layer.layout
        for _, target, transform in node.transforms:
            assert transform.src != transform.dst
            assert net.blobs[target].shape == physical(transform.shape, transform.dst)
    # a transform between relu1 and conv2 exactly when their layouts differ
    between = [t for _, _, t in _node(net, "conv2").transforms]
    assert bool(between) == (conv2.layout != relu1.layout)
    # the data's gradient is nobody's: no backward-data for conv1, none planned for it
    assert conv1.propagate == [False] and "backward_data" not in conv1.algos
    assert not any(t.what == "d(data)" for t in net.transforms())


def test_the_backward_takes_gradients_as_they_come_or_in_the_costlier_pass_layout(spec):
    config = Machine().config
    net = train.Net(spec, config=config)
    node = _node(net, "conv2")
    conv2 = node.layer
    passes = {d: conv2.algos[d].LAYOUT for d in ("backward_data", "backward_filter")}
    costly = max(passes, key=conv2.predicted.get)
    arrived = node.diff_transforms[0].src if node.diff_transforms[0] else conv2.diff_layout
    assert conv2.diff_layout == (arrived if arrived in passes.values() else passes[costly])
    assert conv2.grad_layout == passes["backward_data"]
    for direction, transform in conv2.to_pass.items():
        assert (transform is None) == (passes[direction] == conv2.diff_layout)
    for direction, layout in passes.items():      # arriving in a pass's layout: kept as it is
        conv2.plan_backward(layout, config)
        assert conv2.diff_layout == layout and conv2.to_pass[direction] is None
    conv2.plan_backward("NCHW", config)
    assert conv2.diff_layout == passes[costly]
    # relu1's blob gets gradients from conv2 and from the Eltwise: added in one layout
    merges = [m for node in net.backward_nodes for b, m in zip(node.bottoms, node.merges)
              if b == "conv1@relu1" and m]
    assert [accumulate for _, accumulate in merges] == [False, True]


@pytest.mark.parametrize("cgs", [1, 2])
def test_the_losses_match_the_reference_and_transforms_have_rows(spec, cgs):
    solver = train.Solver(spec, SOLVER, cgs=cgs)
    _matches_reference(solver, 2)
    result = solver.step()
    rows = {t.row for t in solver.net.transforms()}
    assert rows and rows <= set(result.layer_seconds)
    assert all(result.layer_seconds[row] > 0 for row in rows)


def test_explain_lists_the_inserted_transforms_with_a_predicted_time(spec):
    net = train.Net(spec, config=Machine().config)
    rows = net.explain()
    transforms = [r for r in rows if r["type"] == "Transform"]
    assert [r["layer"] for r in transforms] == [t.row for t in net.transforms()]
    assert all(r["predicted_seconds"] > 0 for r in transforms)
    conv = next(r for r in rows if r["layer"] == "conv2")
    assert conv["predicted_seconds"] > 0 and "forward" in conv["operator"]


def test_a_forward_pass_stores_blobs_in_their_layouts(spec):
    net = train.Net(spec, config=Machine().config)
    batch = train.Solver(spec, SOLVER).order.batch(0)
    blobs = net.forward(Run(Machine()), batch)
    layout = net.layouts["conv1"]
    assert blobs["conv1"].shape == physical(net.shapes["conv1"], layout)


def test_every_gradient_matches_the_reference_whatever_the_layouts(spec):
    """Weights and biases (the bias sums run in the gradient's layout, chunked by swGEMM's
    model) after the transforms of the forward and of the backward."""
    solver = train.Solver(spec, SOLVER)
    data, label = solver.order.batch(0)
    solver.net.backward(Run(Machine()), solver.net.forward(Run(Machine()), (data, label)))
    _, expected = Reference(solver).gradients(data, label)
    for name in solver.net.grads.layout:
        np.testing.assert_allclose(solver.net.grads[name], expected[name], rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_the_cli_explains_layouts_and_transforms_per_core_group(spec, tmp_path, capsys):
    net = tmp_path / "net.prototxt"
    net.write_text(spec)
    assert main(["train", str(net), "--explain", "--cgs", "2"]) == 0
    table = capsys.readouterr().out
    planned = train.Net(spec, slices=2, config=Machine().config)
    for transform in planned.transforms():
        assert transform.row in table
    assert "2x8x6x6" in table and "Transform" in table and "backward_filter" in table


def test_a_small_transform_is_predicted_by_simulating_it_a_large_one_by_the_stream():
    from swsim.hostlib.train.common import stream_seconds
    from swsim.hostlib.train.layout_plan import SIMULATED_BYTES, Transform
    config = Machine().config
    small = Transform("x", "NCHW", "RCNB", (16, 16, 4, 4), "forward")
    ran = dnn.transform(np.zeros((16, 16, 4, 4), np.float32), "NCHW", "RCNB")[1]
    assert small.predicted_seconds(config) == ran.seconds
    large = Transform("x", "NCHW", "RCNB", (32, 64, 32, 32), "forward")
    nbytes = 32 * 64 * 32 * 32 * 4
    assert nbytes > SIMULATED_BYTES
    assert large.predicted_seconds(config) == 2 * stream_seconds(2 * nbytes, config)


@pytest.fixture(scope="module")
def residual(tmp_path_factory):
    return _with_random_set(tmp_path_factory, RESIDUAL, 12, 4)


def test_batchnorm_scale_and_pooling_run_in_the_convolutions_layout(residual, monkeypatch):
    """BatchNorm and Scale take their bottom in any of dnn.batchnorm.NATIVE_LAYOUTS, pooling
    in NCHW or CNHW: between convolutions no transform is left but the data's (and pooling's
    output to InnerProduct, when the convs' layout is not NCHW). The losses equal those of the
    plan with those layers in NCHW within float reassociation (the batchnorm sums run in
    another order), and the reference's. On the pre-issue-28 DMA calibration both convolutions
    choose one layout (on the default they choose CNHW and RCNB: a transform between them
    either way), which isolates the BN/Scale/pooling rule under test."""
    config = VMConfig.preset("sw26010-stream")
    net = train.Net(residual, config=config)
    stem = _node(net, "stem").layer.layout
    for name in ("bn", "scale", "relu", "branch_bn", "sum"):
        assert _node(net, name).layer.layout == stem
    if stem in ("NCHW", "CNHW"):
        assert _node(net, "pool").layer.layout == stem
        assert {t.what for t in net.transforms()} <= {"data", "pool", "d(pool)"}
    _matches_reference(train.Solver(residual, SOLVER, cgs=2, config=config), 2)
    native = train.Solver(residual, SOLVER, cgs=2, config=config)
    for kind in (layers.BatchNorm, layers.Scale, layers.Pooling):
        monkeypatch.setattr(kind, "layouts", ("NCHW",))
    canonical = train.Solver(residual, SOLVER, cgs=2, config=config)
    assert _node(canonical.net, "bn").layer.layout == "NCHW"
    assert len(canonical.net.transforms()) > len(native.net.transforms())
    losses = [[solver.step().loss for _ in range(2)] for solver in (native, canonical)]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
