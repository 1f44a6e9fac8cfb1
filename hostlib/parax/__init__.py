"""ParaX on the CPE array (docs/parax.md): single-CPE f32 operators run one network instance
per CPE (``per_cpe``) or all CPEs per operator with a barrier (``per_cg``), delayed start and
seeded jitter, and the arithmetic-intensity classifier."""
from .block import BlockRun, block_ops, run_block, start_delays

__all__ = ["BlockRun", "block_ops", "run_block", "start_delays"]
