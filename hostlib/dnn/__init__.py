"""The DNN library on the VM (thesis chapter 5), above ``hostlib.blas``: every operator takes
numpy arrays (float32 or float64), ``machine=`` and ``cgs=`` and returns ``(result, Stats)``.

This part: ``linear_forward`` / ``linear_backward`` (FC through swGEMM), and the memory-bound
operators on one streaming driver (``stream``): ``add``, ``scale``, ``sgd_update``,
``pool2d_forward`` / ``pool2d_backward`` and ``transform`` between the ``LAYOUTS``.
docs/dnn.md describes them.
"""
from .common import DnnError
from .elementwise import add, scale, sgd_update
from .layout import LAYOUTS, transform
from .linear import linear_backward, linear_forward
from .pool import pool2d_backward, pool2d_forward

__all__ = ["DnnError", "LAYOUTS", "add", "linear_backward", "linear_forward", "pool2d_backward", "pool2d_forward", "scale", "sgd_update", "transform"]
