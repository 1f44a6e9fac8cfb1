"""The DNN library on the VM (thesis chapter 5), above ``hostlib.blas``: every operator takes
numpy arrays (float32 or float64), keyword-only ``machine=``, ``engine=`` and ``cgs=`` (the
core groups sharing the work), returns ``(result, stats)`` (a ``runtime.Stats``) and gives
back the machine memory it allocated; docs/dnn.md describes them. ``mode=`` selects the
function (``"max"`` pooling, ``"relu"``), ``algo=`` one of its implementations. Backward
passes take dy first, then what the forward took (its inputs, or its output where the
derivative needs it), then the forward's shapes, then its options.

- ``activation_forward(x, mode)`` / ``activation_backward(dy, x=..., y=..., mode)``: ReLU,
  sigmoid and tanh; ``exp(x)``, the element-wise exponential they are built on;
- ``conv2d_forward`` / ``conv2d_backward_data`` / ``conv2d_backward_filter``: 2-D convolution
  (``conv.ALGORITHMS``, chosen by their models with ``algo="auto"``; explicit GEMM: im2col /
  col2im on the CPEs and one swGEMM on col in memory), with ``layout=`` and ``cgs=``;
- ``linear_forward`` / ``linear_backward``: FC through swGEMM;
- ``lstm_forward`` (tensorized Algorithm 6 or the cuDNN-style baseline) / ``lstm_backward``:
  one LSTM layer, forward and backward through time;
- the memory-bound operators on one streaming driver (``stream``): the activations, ``add``,
  ``scale``, ``sgd_update``, ``adam_update``, ``pool2d_forward`` / ``pool2d_backward``, ``transform`` between
  the ``LAYOUTS``, ``softmax_cross_entropy(logits, labels)`` (the mean loss and the logits'
  gradient) and ``batchnorm_forward`` / ``batchnorm_backward`` (any shape).
"""
from .activation import activation_backward, activation_forward, exp
from .batchnorm import batchnorm_backward, batchnorm_forward
from .common import DnnError
from .conv import ConvStats, conv2d_backward_data, conv2d_backward_filter, conv2d_forward
from .elementwise import adam_update, add, scale, sgd_update
from .layout_transform import LAYOUTS, transform
from .linear import linear_backward, linear_forward
from .lstm import lstm_backward, lstm_forward
from .pool import pool2d_backward, pool2d_forward
from .softmax import softmax_cross_entropy

__all__ = ["ConvStats", "DnnError", "LAYOUTS", "activation_backward", "activation_forward",
           "adam_update", "add", "batchnorm_backward", "batchnorm_forward", "conv2d_backward_data",
           "conv2d_backward_filter", "conv2d_forward", "exp", "linear_backward", "linear_forward",
           "lstm_backward", "lstm_forward", "pool2d_backward", "pool2d_forward", "scale",
           "sgd_update", "softmax_cross_entropy", "transform"]
