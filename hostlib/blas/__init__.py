"""Dense linear algebra on the VM: ``gemm`` (swGEMM, ``swgemm``), its performance model
(``gemm_model``), the LDM GEMM primitive's driver (``primitive``) and the baseline GEMM
(``baseline``). Built on ``hostlib.runtime``."""
from .swgemm import gemm

__all__ = ["gemm"]
