"""ParaX's performance model (digest §1.3, formulas 1-3 with the corrected weight term) beside
the intensity measured from the VM's counters, and the overlap bound of §1.8.

Formula (1)-(3) for a convolution of batch B, C_i -> C_o channels, a D_K x D_K kernel and a
D_F x D_F map: xi = B C_i C_o D_K^2 D_F^2 multiply-adds, psi = B C_i D_F^2 + B C_o D_F^2 +
C_i C_o D_K^2 elements (input, output, weights: the corrected term), I = psi / xi =
1/(C_o D_K^2) + 1/(C_i D_K^2) + 1/(B D_F^2). An element-wise operator (BN, ReLU) of n elements
reads and writes n: I = 2. A layer is COMPUTE-bound when its flops per byte (2 xi / (psi
element bytes)) reach the machine's balance (peak flops per cycle / DMA bytes per cycle),
else ACCESS-bound.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ArgumentError

COMPUTE, ACCESS = "COMPUTE", "ACCESS"


@dataclass(frozen=True)
class Intensity:
    layer: str
    macs: int               # xi
    elements: int           # psi
    element_bytes: int

    @property
    def density(self) -> float:
        """The chapter's memory-access density I = psi / xi (elements per multiply-add)."""
        return self.elements / self.macs

    @property
    def flops_per_byte(self) -> float:
        return 2 * self.macs / (self.elements * self.element_bytes)

    def tag(self, balance: float) -> str:
        return COMPUTE if self.flops_per_byte >= balance else ACCESS


def conv_intensity(batch, c_in, c_out, kernel, feature, element_bytes=4) -> Intensity:
    """Formulas (1)-(3) with the weight term C_i C_o D_K^2."""
    macs = batch * c_in * c_out * kernel ** 2 * feature ** 2
    elements = batch * c_in * feature ** 2 + batch * c_out * feature ** 2 \
        + c_in * c_out * kernel ** 2
    return Intensity("conv", macs, elements, element_bytes)


def conv_terms(batch, c_in, c_out, kernel, feature) -> dict:
    """The three terms of formula (3) (corrected): what the output, the input and the weights
    each add to I."""
    return {"output 1/(C_o D_K^2)": 1 / (c_out * kernel ** 2),
            "input 1/(C_i D_K^2)": 1 / (c_in * kernel ** 2),
            "weights 1/(B D_F^2)": 1 / (batch * feature ** 2)}


def elementwise_intensity(layer, elements, element_bytes=4) -> Intensity:
    """BN (inference: one multiply-add per element) or ReLU (counted as one operation per
    element): n operations, 2n elements moved."""
    return Intensity(layer, elements, 2 * elements, element_bytes)


def machine_balance(config) -> float:
    """Flops per DMA byte at which a core group's compute and bandwidth balance."""
    peak = config.flops_per_cycle * config.num_cpes
    return peak / (config.dma_transaction_bytes / config.dma_transaction_cycles)


def measured_intensity(flops: int, dma_bytes: int) -> float:
    """flops / bytes from the counters (float_ops summed over CPEs, dma_bytes_moved)."""
    return flops / dma_bytes if dma_bytes else float("inf")


def dma_engine_cycles(get_bytes: int, put_bytes: int, puts: int, config,
                      gets: int = 0) -> float:
    """Cycles the core group's DMA engine is busy for gets and puts of whole 128-byte lines
    (docs/timing.md "DMA": a get line costs dma_transaction_cycles, each of the `gets`
    requests dma_get_request_cycles, a put line dma_put_write_cycles, and each put its
    dma_put_ack_cycles)."""
    line = config.dma_transaction_bytes
    return (get_bytes / line * config.dma_transaction_cycles
            + gets * config.dma_get_request_cycles
            + put_bytes / line * config.dma_put_write_cycles + puts * config.dma_put_ack_cycles)


def bandwidth_only(config):
    """`config` with a DMA engine that costs bytes only (every 128-byte line of a get or a put
    dma_transaction_cycles; no per-request, write or acknowledgement terms): the digest's
    b / beta model of §1.8, to separate what the per-request costs do (docs/parax.md "The
    per-operator signature")."""
    return config.replace(dma_get_request_cycles=0, dma_put_ack_cycles=0,
                          dma_put_write_cycles=config.dma_transaction_cycles)


def makespan_floor(engine_total: float, first_gets: float, first_compute: float,
                   chain: float) -> float:
    """The makespan no schedule of the instances can beat: one instance's uncontended `chain`
    of calls; and the DMA engine's work. Until the first instance has computed its first
    operator (at least `first_compute` cycles), the engine has nothing to serve but the
    first operator's gets (`first_gets`, all instances); every other engine cycle of
    `engine_total` comes after."""
    return max(chain, first_compute + engine_total - first_gets)


def overlap_bound(compute, dma_cycles, instances) -> dict:
    """§1.8's derived bound for per-layer compute cycles c_l and DMA-engine cycles d_l of one
    instance's call (lists in layer order; the digest's d_l = b_l / beta): barrier mode costs
    sum_l max(c_l, P d_l), ideal overlap max(sum_l c_l, P sum_l d_l); their ratio is the
    largest speed-up to expect if a barrier layer overlapped its own compute and DMA."""
    if len(compute) != len(dma_cycles) or not compute:
        raise ArgumentError(f"compute and dma_cycles must be equal-length, non-empty lists, "
                            f"got {len(compute)} and {len(dma_cycles)}")
    share = [instances * d for d in dma_cycles]
    barrier = sum(max(c, s) for c, s in zip(compute, share))
    ideal = max(sum(compute), sum(share))
    return {"barrier": barrier, "ideal": ideal, "bound": barrier / ideal}
