"""swDNN on the VM: the DNN operators of thesis chapter 5 (docs/dnn.md).

``activation_forward(x, kind)`` / ``activation_backward(dy, x=..., y=..., kind)`` are ReLU,
sigmoid and tanh; ``exp(x)`` is the element-wise exponential they are built on.
``conv2d_forward`` / ``conv2d_backward_data`` / ``conv2d_backward_filter`` are 2-D convolution
(explicit GEMM: im2col / col2im on the CPEs and swGEMM).
"""
from .activation import ActivationStats, activation_backward, activation_forward, exp
from .conv import ConvStats, conv2d_backward_data, conv2d_backward_filter, conv2d_forward

__all__ = ["ActivationStats", "activation_backward", "activation_forward", "exp",
           "ConvStats", "conv2d_backward_data", "conv2d_backward_filter", "conv2d_forward"]
