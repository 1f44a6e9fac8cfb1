"""swDNN on the VM: the DNN operators of thesis chapter 5 (docs/dnn.md).

``activation_forward(x, kind)`` / ``activation_backward(dy, x=..., y=..., kind)`` are ReLU,
sigmoid and tanh; ``exp(x)`` is the element-wise exponential they are built on.
"""
from .activation import ActivationStats, activation_backward, activation_forward, exp

__all__ = ["ActivationStats", "activation_backward", "activation_forward", "exp"]
