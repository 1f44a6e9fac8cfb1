"""Kernels declare what they need of the machine (``REQ_*`` symbols) and every launch checks it:
on a mesh a kernel is not written for, the operators refuse by name instead of deadlocking or
leaving tasks undone; the kernels that declare nothing run right on any mesh."""
import re

import numpy as np
import pytest

import swsim
from swsim.errors import ArgumentError
from swsim.hostlib import dnn
from swsim.hostlib.blas import baseline, gemm, primitive
from swsim.hostlib.dnn.conv import (explicit as conv_explicit, implicit as conv_implicit,
                                    winograd as conv_winograd)
from swsim.hostlib.dnn import lstm, softmax, stream
from swsim.hostlib.runtime import Kernel, RequirementError

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 8, 8))
W = rng.standard_normal((4, 3, 3, 3))
LSTM = [rng.standard_normal(shape) for shape in ((2, 8, 16), (8, 16), (8, 16), (64, 16),
                                                 (64, 16), (64,))]
LOGITS, LABELS = rng.standard_normal((16, 10)), np.arange(16) % 10

# operator -> the kernel its first launch refuses
OPERATORS = {
    "gemm": (lambda m: gemm(X[0, 0], X[0, 0], machine=m), "swgemm"),
    "linear_forward": (lambda m: dnn.linear_forward(X[0, 0], X[0, 0], machine=m), "swgemm"),
    "lstm_forward": (lambda m: dnn.lstm_forward(*LSTM, machine=m), "swgemm"),
    "lstm_forward baseline": (lambda m: dnn.lstm_forward(*LSTM, algo="baseline", machine=m),
                              "swgemm"),
    "conv implicit": (lambda m: dnn.conv2d_forward(X, W, algo="implicit", machine=m),
                      "conv_implicit"),
    "conv explicit": (lambda m: dnn.conv2d_forward(X, W, algo="explicit", machine=m), "im2col"),
    "conv winograd": (lambda m: dnn.conv2d_forward(X, W, algo="winograd", machine=m),
                      "winograd"),
    "softmax_cross_entropy": (lambda m: dnn.softmax_cross_entropy(LOGITS, LABELS, machine=m),
                              "softmax_split_run"),
    "ldm_gemm": (lambda m: primitive.ldm_gemm(X[0, 0], X[0, 0], machine=m), "gemm_prim_run"),
    "baseline_gemm": (lambda m: baseline.baseline_gemm(X[0, 0], np.hstack([X[0, 0]] * 2), machine=m),
                      "gemm_baseline"),
}


@pytest.mark.parametrize("name", OPERATORS)
def test_a_4x4_machine_refuses_every_kernel_written_for_8x8_by_name(name):
    call, kernel = OPERATORS[name]
    with pytest.raises(RequirementError) as caught:
        call(swsim.Machine(mesh_rows=4, mesh_cols=4))
    message = str(caught.value)
    assert isinstance(caught.value, ArgumentError)
    assert message.startswith("machine: ") and f"kernel {kernel} (" in message
    assert re.search(r"needs (mesh_rows|mesh_cols) = 8 .* has \1 = 4", message)


def test_the_requirement_checked_is_the_one_not_met():
    kernel = softmax.SPLIT
    with pytest.raises(RequirementError, match=r"needs mesh_cols = 8 \(REQ_MESH_COLS, "
                                               r"dnn/softmax\.s:\d+\); this machine has "
                                               r"mesh_cols = 4"):
        kernel.check(swsim.VMConfig.preset(mesh_rows=8, mesh_cols=4))
    with pytest.raises(RequirementError, match="needs mesh_rows = 8 .* has mesh_rows = 2"):
        kernel.check(swsim.VMConfig.preset(mesh_rows=2, mesh_cols=8))
    kernel.check(swsim.VMConfig.preset())


def test_a_launch_refuses_a_kernel_whose_ldm_does_not_fit():
    config = swsim.VMConfig.preset(ldm_bytes=1024)
    lstm.KERNEL.check(config)                            # the mesh alone is fine
    with pytest.raises(RequirementError, match=r"kernel lstm .* takes \d+ B of LDM .* "
                                               r"ldm_bytes = 1024"):
        lstm.KERNEL.check(config, nargs=1)


def test_hosts_read_the_mesh_side_from_the_kernels():
    assert primitive.MESH == lstm.MESH == conv_implicit.MESH == primitive.KERNEL.mesh_side == 8
    for kernel in (conv_explicit.KERNEL, conv_winograd.KERNEL, lstm.CELL_KERNEL,
                   baseline.KERNEL, conv_implicit.KERNEL, lstm.KERNEL):
        assert kernel.mesh_side == 8
    assert stream.KERNEL.requirements == ()
    with pytest.raises(swsim.SwsimError, match="declares 0 values of REQ_MESH_ROWS"):
        stream.KERNEL.required("mesh_rows")


def test_an_undeclared_requirement_name_is_a_kernel_error(monkeypatch):
    prog = swsim.assemble("\tREQ_LANES = 4\n\t.text\nf:\tret\n")
    monkeypatch.setattr("swsim.hostlib.runtime.kernel.object_file", lambda name: prog)
    monkeypatch.setattr("swsim.hostlib.runtime.kernel._requirements",
                        swsim.hostlib.runtime.kernel._requirements.__wrapped__)
    with pytest.raises(swsim.SwsimError, match="declares REQ_LANES, but the launch checks only "
                                               "mesh_cols, mesh_rows"):
        Kernel(("fake.s",), "f", "f").requirements


@pytest.mark.parametrize("rows, cols", [(4, 4), (3, 5)])
def test_the_kernels_declaring_nothing_run_right_on_any_mesh(rows, cols):
    m = swsim.Machine(mesh_rows=rows, mesh_cols=cols)
    y, _ = dnn.add(X, 2 * X, machine=m)
    assert np.array_equal(y, 3 * X)
    y, _ = dnn.activation_forward(X, "relu", machine=m)
    assert np.array_equal(y, np.maximum(X, 0))
    y, _ = dnn.pool2d_forward(X, 2, machine=m)
    assert np.array_equal(y, X.reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5)))
    y, _ = dnn.transform(X, "NCHW", "NHWC", machine=m)
    assert np.array_equal(y, X.transpose(0, 2, 3, 1))
    (y, *_), _ = dnn.batchnorm_forward(X, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3),
                                       machine=m)
    mean, var = X.mean(axis=(0, 2, 3), keepdims=True), X.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (X - mean) / np.sqrt(var + 1e-5), atol=1e-9)
