"""The host library: what users call from Python on top of the VM's public API.

``gemm(A, B, C=None, alpha=1, beta=0, trans_a=False, trans_b=False)`` is swGEMM (``swgemm``);
``primitive`` drives the LDM GEMM primitive; ``analyze`` and ``report`` are the timing tools;
``bench`` holds the benchmark commands.
"""
from .swgemm import gemm

__all__ = ["gemm"]
