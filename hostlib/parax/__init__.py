"""ParaX on the CPE array (docs/parax.md): single-CPE f32 operators run one network instance
per CPE (``per_cpe``), per x CPEs (``per_group``) or all CPEs per operator with a barrier
(``per_cg``), delayed start and seeded jitter; gradient synchronisation (PS, RAR, GS); the
arithmetic-intensity classifier and the overlap bound; the MLP's training step on one CPE per
instance (``parax.mlp``)."""
from .block import BlockRun, block_ops, run_block, start_delays
from .sync import SyncRun, synchronise

__all__ = ["BlockRun", "SyncRun", "block_ops", "run_block", "start_delays", "synchronise"]
