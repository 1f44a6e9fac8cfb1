"""The host library: what users call from Python on top of the VM's public API.

Subpackages, each importing only those before it: ``runtime`` (Kernel, launch, LDM planning,
Stats) <- ``blas`` (``gemm`` = swGEMM, its model, the LDM GEMM primitive, the baseline GEMM)
<- ``dnn`` (the DNN operators) <- ``parax`` (ParaX on the CPE array) <- ``train``;
``tools`` (analyze, report, bench, the CLI) sit on top. ``swsim.hostlib.gemm`` is swGEMM.
"""
from .blas import gemm

__all__ = ["gemm"]
