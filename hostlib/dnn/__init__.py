"""The DNN library on the VM (thesis chapter 5), above ``hostlib.blas``: every operator takes
numpy arrays (float32 or float64), ``machine=`` and returns ``(result, Stats)`` (docs/dnn.md).

``activation_forward(x, kind)`` / ``activation_backward(dy, x=..., y=..., kind)`` are ReLU,
sigmoid and tanh; ``exp(x)`` is the element-wise exponential they are built on.
``linear_forward`` / ``linear_backward`` (FC through swGEMM), and the memory-bound operators on
one streaming driver (``stream``): ``add``, ``scale``, ``sgd_update``, pooling, ``transform``.
``conv2d_forward`` / ``conv2d_backward_data`` / ``conv2d_backward_filter`` are 2-D convolution
(explicit GEMM: im2col / col2im on the CPEs and swGEMM).
"""
from .activation import ActivationStats, activation_backward, activation_forward, exp
from .common import DnnError
from .conv import ConvStats, conv2d_backward_data, conv2d_backward_filter, conv2d_forward
from .elementwise import add, scale, sgd_update
from .layout import LAYOUTS, transform
from .linear import linear_backward, linear_forward
from .pool import pool2d_backward, pool2d_forward

__all__ = ["ActivationStats", "ConvStats", "DnnError", "LAYOUTS", "activation_backward",
           "activation_forward", "add", "conv2d_backward_data", "conv2d_backward_filter",
           "conv2d_forward", "exp", "linear_backward", "linear_forward", "pool2d_backward",
           "pool2d_forward", "scale", "sgd_update", "transform"]
