"""The host API's one contract (issue 30), enforced over every public name of the host
packages as tests/test_layers.py enforces the imports:

- every host package says what is public (``__all__``), every public callable has its own
  docstring, argument errors are ``ArgumentError`` subclasses;
- ``machine``, ``engine`` and ``cgs`` are keyword-only;
- one name per concept (in functions and classes; records' fields name what they hold):
  ``bias`` (not ``b``), ``kernel_size`` (not ``kernel``), ``padding`` (not ``pad``), and two
  selectors, ``mode`` (which function: ``mode="max"`` pooling,
  ``mode="relu"``) and ``algo`` (which implementation of the same function);
- backward passes take ``dy`` first (then what the forward took or returned, then the
  forward's shapes, then options), as hostlib.dnn's docstring documents;
- the operators return (result, Stats) -- convolution's ConvStats is a Stats -- and refuse a
  wrong dtype, a wrong rank, a mismatched shape, a zero-size dimension, a bad option, NaN in
  a scalar and a wrong type with an ArgumentError (ArgumentTypeError, also a TypeError, for
  the type) whose message names the argument.
"""
import dataclasses
import importlib
import inspect
import re

import numpy as np
import pytest

import swsim
from swsim.errors import ArgumentError, ArgumentTypeError
from swsim.hostlib import dnn
from swsim.hostlib.blas import gemm
from swsim.hostlib.runtime import Stats

HOST_PACKAGES = ("runtime", "blas", "autodnn", "dnn", "parax", "qinglong", "graph", "train",
                 "train.redsync")
KEYWORD_ONLY = ("machine", "engine", "cgs")
RENAMED = {"b": "bias", "kernel": "kernel_size", "pad": "padding", "kind": "mode",
           "algorithm": "algo"}


def public():
    """(qualified name, object) of every public name of the host packages."""
    for package in HOST_PACKAGES:
        module = importlib.import_module(f"swsim.hostlib.{package}")
        for name in module.__all__:
            yield f"{package}.{name}", getattr(module, name)


def callables():
    for name, obj in public():
        if callable(obj) and not (isinstance(obj, type) and issubclass(obj, BaseException)) \
                and not hasattr(obj, "DESCRIPTOR"):        # protobuf message classes
            yield name, obj


def parameters(obj):
    try:
        return inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return {}


def test_every_host_package_declares_its_public_names():
    for package in HOST_PACKAGES:
        module = importlib.import_module(f"swsim.hostlib.{package}")
        assert isinstance(getattr(module, "__all__", None), list), package
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, (package, missing)


def test_the_walk_sees_every_subsystem():
    names = {name for name, _ in callables()}
    for expected in ("dnn.conv2d_forward", "blas.gemm", "graph.Session", "autodnn.build",
                     "parax.run_block", "qinglong.Net", "train.Solver", "train.redsync.RedSync"):
        assert expected in names


@pytest.mark.parametrize("name, obj", list(callables()), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_public_callables_follow_the_contract(name, obj):
    doc = inspect.getdoc(obj) or ""
    generated = dataclasses.is_dataclass(obj) and doc.startswith(obj.__name__ + "(")
    assert doc.strip() and not generated, f"{name} has no docstring of its own"
    params = parameters(obj)
    for arg in KEYWORD_ONLY:
        if arg in params:
            assert params[arg].kind is inspect.Parameter.KEYWORD_ONLY, \
                f"{name}: {arg} must be keyword-only"
    if not dataclasses.is_dataclass(obj):     # records' fields name what they hold
        for arg in params:
            operands = arg == "b" and "a" in params          # add(a, b): two operands
            assert arg not in RENAMED or operands, f"{name}: {arg}= is spelt {RENAMED[arg]}="
    if "backward" in name.rsplit(".", 1)[-1] and inspect.isfunction(obj):
        assert next(iter(params)) == "dy", f"{name}: backward passes take dy first"


def test_errors_of_the_host_api_are_argument_errors():
    for name, obj in public():
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, swsim.SwsimError), name
            if name.endswith("Error"):
                assert issubclass(obj, (ArgumentError, swsim.SwsimError)), name


def test_the_backward_order_is_documented():
    assert "dy first" in dnn.__doc__


# The operators' calls: every argument by name, tiny, valid; the table below spoils one.
R = np.random.default_rng(1)
F = lambda *shape: R.standard_normal(shape)          # noqa: E731
X4, W4, DY4 = F(2, 1, 4, 4), F(2, 1, 3, 3), F(2, 2, 2, 2)
M8, V8 = F(8, 8), F(8)
POOL_X, POOL_DY = F(1, 2, 4, 4), F(1, 2, 2, 2)
LSTM = dict(x=F(2, 1, 4), h0=F(1, 4), c0=F(1, 4), W=F(16, 4), R=F(16, 4), bias=F(16))

OPERATORS = {
    "gemm": (gemm, dict(A=M8, B=M8)),
    "conv2d_forward": (dnn.conv2d_forward, dict(x=X4, w=W4, bias=F(2), algo="explicit")),
    "conv2d_backward_data": (dnn.conv2d_backward_data, dict(dy=DY4, w=W4, x_shape=X4.shape)),
    "conv2d_backward_filter": (dnn.conv2d_backward_filter, dict(dy=DY4, x=X4, w_shape=W4.shape)),
    "pool2d_forward": (dnn.pool2d_forward, dict(x=POOL_X, kernel_size=2, mode="avg")),
    "pool2d_backward": (dnn.pool2d_backward, dict(dy=POOL_DY, x_shape=POOL_X.shape,
                                                  kernel_size=2, mode="avg")),
    "activation_forward": (dnn.activation_forward, dict(x=V8, mode="tanh")),
    "activation_backward": (dnn.activation_backward, dict(dy=V8, x=V8, mode="relu")),
    "linear_forward": (dnn.linear_forward, dict(x=M8, w=M8, bias=V8)),
    "linear_backward": (dnn.linear_backward, dict(dy=M8, x=M8, w=M8)),
    "softmax_cross_entropy": (dnn.softmax_cross_entropy, dict(logits=M8, labels=np.arange(8))),
    "add": (dnn.add, dict(a=V8, b=V8, alpha=2.0)),
    "scale": (dnn.scale, dict(x=V8, alpha=2.0)),
    "sgd_update": (dnn.sgd_update, dict(param=V8, grad=V8, velocity=V8, lr=0.1)),
    "transform": (dnn.transform, dict(x=X4, src_layout="NCHW", dst_layout="CNHW")),
    "batchnorm_forward": (dnn.batchnorm_forward, dict(x=X4, gamma=F(1), beta=F(1),
                                                      running_mean=F(1), running_var=F(1) ** 2,
                                                      eps=1e-5)),
    "lstm_forward": (dnn.lstm_forward, LSTM),
}

# (operator, argument, bad value, error class); the message must name the argument.
BAD = []
for op, (_, good) in OPERATORS.items():
    for arg, value in good.items():
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            BAD.append((op, arg, value.astype(np.int32), ArgumentError))          # dtype
            BAD.append((op, arg, "text", ArgumentTypeError))                      # type
            BAD.append((op, arg, swsim.Machine, ArgumentTypeError))               # wrong position
            BAD.append((op, arg, value[..., :0], ArgumentError))                  # zero-size
    BAD += [(op, "machine", "x", ArgumentTypeError), (op, "engine", "fortran", ArgumentError),
            (op, "cgs", "2", ArgumentTypeError)]
RANK = [("gemm", "A", V8), ("conv2d_forward", "x", X4[0]), ("conv2d_forward", "w", W4[0]),
        ("conv2d_backward_data", "dy", DY4[0]), ("conv2d_backward_filter", "x", X4[0]),
        ("conv2d_backward_data", "x_shape", X4.shape[1:]), ("pool2d_forward", "x", V8),
        ("linear_forward", "x", V8), ("linear_backward", "dy", V8),
        ("softmax_cross_entropy", "logits", V8), ("lstm_forward", "x", LSTM["x"][0]),
        ("batchnorm_forward", "gamma", M8)]
SHAPE = [("gemm", "B", F(7, 8)), ("conv2d_forward", "w", F(2, 3, 3, 3)),
         ("conv2d_forward", "bias", F(3)), ("conv2d_backward_data", "dy", F(2, 2, 3, 3)),
         ("conv2d_backward_filter", "dy", F(2, 2, 3, 3)), ("pool2d_backward", "dy", F(1, 2, 3, 3)),
         ("activation_backward", "x", F(9)), ("linear_forward", "w", F(8, 7)),
         ("linear_forward", "bias", F(7)), ("linear_backward", "w", F(7, 8)),
         ("softmax_cross_entropy", "labels", np.arange(7)), ("add", "b", F(9)),
         ("sgd_update", "velocity", F(9)), ("lstm_forward", "h0", F(1, 5)),
         ("batchnorm_forward", "beta", F(2))]
OPTION = [("conv2d_forward", "algo", "fft"), ("conv2d_forward", "stride", 0),
          ("conv2d_forward", "padding", -1), ("pool2d_forward", "mode", "min"),
          ("pool2d_forward", "kernel_size", 0), ("pool2d_backward", "mode", "min"),
          ("activation_forward", "mode", "gelu"), ("activation_backward", "mode", "gelu"),
          ("transform", "dst_layout", "XYZW"), ("lstm_forward", "algo", "fast"),
          ("gemm", "blocking", "foo"), ("batchnorm_forward", "eps", -1.0)]
NAN = [("add", "alpha", float("nan")), ("scale", "alpha", float("inf")),
       ("sgd_update", "lr", float("nan")), ("batchnorm_forward", "eps", float("nan")),
       ("gemm", "alpha", float("nan"))]
TYPE = [("pool2d_forward", "return_indices", "yes"), ("pool2d_forward", "kernel_size", 2.5),
        ("conv2d_forward", "stride", "1"), ("add", "alpha", "2"),
        ("conv2d_backward_data", "x_shape", "shape")]
CASES = ([case + (ArgumentError,) for case in RANK + SHAPE + OPTION + NAN] + BAD +
         [case + (ArgumentTypeError,) for case in TYPE])


@pytest.mark.parametrize("op, arg, bad, error", CASES,
                         ids=[f"{op}-{arg}-{i}" for i, (op, arg, _, _) in enumerate(CASES)])
def test_a_bad_argument_is_refused_by_name(op, arg, bad, error):
    function, good = OPERATORS[op]
    with pytest.raises(error) as refused:
        function(**dict(good, **{arg: bad}))
    assert re.search(rf"\b{arg}\b", str(refused.value)), str(refused.value)
    assert len(str(refused.value)) < 1000


def test_the_operators_return_a_result_and_stats():
    m = swsim.Machine()
    for op, (function, good) in OPERATORS.items():
        result, stats = function(**good, machine=m)
        assert isinstance(stats, Stats), op
        assert stats.cycles > 0 and stats.seconds > 0, op


def test_max_pooling_returns_its_indices_when_asked():
    y, _ = dnn.pool2d_forward(POOL_X, 2)
    (same, indices), _ = dnn.pool2d_forward(POOL_X, 2, return_indices=True)
    assert np.array_equal(y, same) and indices.dtype == np.int64
    flat = POOL_X.reshape(2, 16)
    assert np.array_equal(np.take_along_axis(flat, indices.reshape(2, 4), 1).reshape(y.shape), y)
    with pytest.raises(ArgumentError, match="return_indices"):
        dnn.pool2d_forward(POOL_X, 2, mode="avg", return_indices=True)


# NaN in an array is data, not an error (as in numpy and PyTorch): it flows through the CPEs'
# IEEE arithmetic to exactly the outputs that depend on it. The references below are numpy's.
NAN_DATA = [
    ("add", "a", lambda a, b, alpha: a + alpha * b),
    ("scale", "x", lambda x, alpha: alpha * x),
    ("gemm", "B", lambda A, B: A @ B),
    ("linear_forward", "w", lambda x, w, bias: x @ w.T + bias),
    ("activation_forward", "x", lambda x, mode: np.tanh(x)),
    ("transform", "x", lambda x, src_layout, dst_layout: x.transpose(1, 0, 2, 3)),
    ("pool2d_forward", "x", lambda x, kernel_size, mode:
        x.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5))),
]


@pytest.mark.parametrize("op, arg, reference", NAN_DATA, ids=[c[0] for c in NAN_DATA])
def test_nan_in_an_array_reaches_the_outputs_numpy_says(op, arg, reference):
    function, good = OPERATORS[op]
    args = dict(good)
    args[arg] = good[arg].copy()
    args[arg].flat[1] = np.nan
    result, _ = function(**args)
    want = reference(**args)
    assert result.shape == want.shape
    assert np.array_equal(np.isnan(result), np.isnan(want)), (np.isnan(result), np.isnan(want))
    assert np.isnan(want).any()


def test_nan_meets_relu_as_a_comparison():
    """ReLU compares: forward keeps the NaN (numpy's maximum), backward gives 0 where x is NaN
    (x > 0 is false: PyTorch's threshold_backward)."""
    x = V8.copy()
    x[1] = np.nan
    y, _ = dnn.activation_forward(x, mode="relu")
    dx, _ = dnn.activation_backward(dy=np.ones(8), x=x, mode="relu")
    assert np.array_equal(np.isnan(y), np.isnan(np.maximum(x, 0)))
    assert dx[1] == 0 and not np.isnan(dx).any()
