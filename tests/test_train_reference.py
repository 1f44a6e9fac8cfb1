"""The float64 numpy reference (hostlib/train/reference.py): its gradients against finite
differences, and the VM's float32 losses against it over a few steps on one and two core
groups, for a net with padded and strided convolution and pooling, three activations, an
Eltwise with coefficients and a softmax loss."""
import numpy as np
import pytest

from swsim.cli import main
from swsim.hostlib import train
from swsim.hostlib.train.reference import Reference

NET = """
name: "padded"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "%s" batch_size: 4 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "uniform" min: -0.1 max: 0.1 } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
        convolution_param { num_output: 4 kernel_size: 2 stride: 2 weight_filler { type: "xavier" }
                            bias_filler { type: "uniform" min: -0.1 max: 0.1 } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
        pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "ipa" type: "InnerProduct" bottom: "pool2" top: "ipa"
        inner_product_param { num_output: 6 weight_filler { type: "xavier" } } }
layer { name: "tanh" type: "TanH" bottom: "ipa" top: "ipa" }
layer { name: "ipb" type: "InnerProduct" bottom: "pool2" top: "ipb"
        inner_product_param { num_output: 6 weight_filler { type: "xavier" } } }
layer { name: "sig" type: "Sigmoid" bottom: "ipb" top: "ipb" }
layer { name: "sum" type: "Eltwise" bottom: "ipa" bottom: "ipb" top: "sum"
        eltwise_param { operation: SUM coeff: 1 coeff: -0.5 } }
layer { name: "relu" type: "ReLU" bottom: "sum" top: "sum" }
layer { name: "out" type: "InnerProduct" bottom: "sum" top: "out"
        inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "out" bottom: "label" top: "loss" }
"""
SOLVER = train.SolverSpec(base_lr=0.2, momentum=0.9, weight_decay=0.01, random_seed=2)


def _with_random_set(factory, text, seed, side):
    """The net `text` reading 16 random 2-channel side x side images with labels 0..3."""
    rng = np.random.default_rng(seed)
    source = factory.mktemp("set") / "set.npz"
    np.savez(source, data=rng.normal(size=(16, 2, side, side)), label=rng.integers(0, 4, 16))
    return text % source


def _matches_reference(solver, steps):
    """The VM's losses over `steps` steps within 1e-3 of the float64 reference's; returns the
    reference (its parameters are the updated ones)."""
    reference = Reference(solver)
    vm = [solver.step().loss for _ in range(steps)]
    np.testing.assert_allclose(vm, [reference.step() for _ in range(steps)], rtol=1e-3, atol=0)
    return reference


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return _with_random_set(tmp_path_factory, NET, 11, 6)


def _check_gradient(reference, batch, grads, name, index, step=1e-6):
    """The analytic gradient of one parameter entry against a central difference on
    ``batch`` (the Data layer's tops)."""
    value = reference.params[name]
    saved = value[index]
    value[index] = saved + step
    above, _ = reference.gradients(*batch)
    value[index] = saved - step
    below, _ = reference.gradients(*batch)
    value[index] = saved
    assert grads[name][index] == pytest.approx((above - below) / (2 * step), rel=1e-4,
                                               abs=1e-7), (name, index)


def test_the_reference_gradients_match_finite_differences(spec):
    reference = Reference(train.Solver(spec, SOLVER))
    assert reference.net.shapes["pool1"] == (4, 3, 6, 6)
    assert reference.net.shapes["pool2"] == (4, 4, 3, 3)
    data, label = reference.order.batch(0)
    _, grads = reference.gradients(data, label)
    rng = np.random.default_rng(0)
    for name, value in reference.params.items():
        for _ in range(3):
            index = tuple(rng.integers(0, n) for n in value.shape)
            _check_gradient(reference, (data, label), grads, name, index)


@pytest.mark.parametrize("cgs", [1, 2])
def test_the_vm_losses_match_the_float64_reference(spec, cgs):
    solver = train.Solver(spec, SOLVER, cgs=cgs)
    reference = Reference(solver)
    vm = [solver.step().loss for _ in range(2)]
    expected = [reference.step() for _ in range(2)]
    np.testing.assert_allclose(vm, expected, rtol=1e-3, atol=0)


def test_the_reference_resumes_from_a_checkpoint(spec, tmp_path):
    straight = train.Solver(spec, SOLVER)
    expected = Reference(straight)
    losses = [expected.step() for _ in range(2)]
    solver = train.Solver(spec, SOLVER)
    solver.step()                           # the momentum history is no longer zero
    solver.save(tmp_path)
    resumed = train.Solver(spec, SOLVER)
    resumed.restore(tmp_path)
    assert Reference(resumed).step() == pytest.approx(losses[1], rel=1e-5)


def test_the_cli_compares_with_the_reference(spec, tmp_path, capsys):
    net = tmp_path / "net.prototxt"
    net.write_text(spec)
    assert main(["train", str(net), "--steps", "2", "--reference"]) == 0
    assert "largest relative loss difference" in capsys.readouterr().out


RESIDUAL = """
name: "residual"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "%s" batch_size: 8 } }
layer { name: "stem" type: "Convolution" bottom: "data" top: "stem"
        convolution_param { num_output: 3 kernel_size: 3 pad: 1 bias_term: false
                            weight_filler { type: "msra" } } }
layer { name: "bn" type: "BatchNorm" bottom: "stem" top: "stem" }
layer { name: "scale" type: "Scale" bottom: "stem" top: "stem"
        scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 }
                      bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
layer { name: "relu" type: "ReLU" bottom: "stem" top: "stem" }
layer { name: "branch" type: "Convolution" bottom: "stem" top: "branch"
        convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "branch_bn" type: "BatchNorm" bottom: "branch" top: "branch" }
layer { name: "sum" type: "Eltwise" bottom: "stem" bottom: "branch" top: "sum" }
layer { name: "pool" type: "Pooling" bottom: "sum" top: "pool"
        pooling_param { pool: AVE global_pooling: true } }
layer { name: "out" type: "InnerProduct" bottom: "pool" top: "out"
        inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "out" bottom: "label" top: "loss" }
"""


@pytest.fixture(scope="module")
def residual(tmp_path_factory):
    return _with_random_set(tmp_path_factory, RESIDUAL, 12, 4)


def test_batchnorm_and_scale_gradients_match_finite_differences(residual):
    reference = Reference(train.Solver(residual, SOLVER))
    data, label = reference.order.batch(0)
    _, grads = reference.gradients(data, label)
    for name in ("stem/0", "scale/0", "scale/1", "branch/0"):
        _check_gradient(reference, (data, label), grads, name, (0,) * reference.params[name].ndim)


@pytest.mark.parametrize("cgs", [1, 2])
def test_a_residual_net_with_batchnorm_and_scale_matches_the_reference(residual, cgs):
    solver = train.Solver(residual, SOLVER, cgs=cgs)
    _matches_reference(solver, 2)
    mean, var = solver.net.state["bn/state0"], solver.net.state["bn/state1"]
    assert np.abs(mean).max() > 0 and not np.allclose(var, 1)   # running statistics moved
