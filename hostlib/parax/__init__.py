"""ParaX on the CPE array (docs/parax.md): single-CPE f32 operators run one network instance
per CPE (``per_cpe``), per x CPEs (``per_group``) or all CPEs per operator with a barrier
(``per_cg``), delayed start and seeded jitter; the conv's and the [BN, ReLU] pair's backward
on one CPE per instance; gradient synchronisation (PS, RAR, GS); the arithmetic-intensity
classifier and the overlap bound; the training step of the MLP (``parax.mlp``) and of a small
CNN (``parax.cnn``) on one CPE per instance."""
from .block import Backward, BlockRun, block_ops, bn_relu_backward, conv_backward, run_block, \
    start_delays
from .sync import SyncRun, synchronise

__all__ = ["Backward", "BlockRun", "SyncRun", "block_ops", "bn_relu_backward", "conv_backward",
           "run_block", "start_delays", "synchronise"]
