"""The baseline GEMM of `swsim bench gemm` experiment 4: ``baseline_gemm(A, B)`` = A B in double
precision on the VM with ``kernels/gemm/gemm_baseline.s``, the straightforward algorithm the issue
defines (each CPE computes whole output tiles, fetching its A and B panels by DMA, with no
register communication). docs/gemm.md ("Baseline GEMM") describes it.

The host only places the operands in memory (A k-major, i.e. column-major; B and C
row-major) and picks the tile size; every flop runs on the CPEs.
"""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError
from ...vm import Machine
from ..runtime import Kernel

KERNEL = Kernel(("gemm/gemm_baseline.s",), entry="gemm_baseline", ldm_end="baseline_ldm_end")
KERNEL_ARGS = 9                 # A, B, C, M, N, K, Mt, Nt, Kc
MICRO_M, MICRO_N = 4, 16        # the kernel's register block: M and N must be multiples
TILE_LIMITS = (128, 256)        # largest Mt, Nt tried
MIN_CHUNK_K = 16                # smallest K chunk worth a pair of DMAs


def _chunk_k(mt, nt, k, ldm_free):
    """The longest K chunk whose panels fit beside the Mt x Nt C tile (doubles)."""
    return min(k, (ldm_free - 8 * mt * nt) // (8 * (mt + nt)))


def choose_tile(m, n, k, ldm_free, config):
    """(Mt, Nt, Kc): the tile with the least estimated time, rounds of tiles per CPE times
    each tile's vmad cycles (Mt Nt / 4 per k) plus its share of the DMA stream (Mt + Nt
    doubles per k, the CG's DMA bytes per cycle shared by the active CPEs)."""
    cpes = config.num_cpes
    dma_bytes_per_cycle = config.dma_transaction_bytes / config.dma_transaction_cycles

    def divisors(size, step, limit):
        return [t for t in range(step, min(size, limit) + 1, step) if size % t == 0]

    best = None
    for mt in divisors(m, MICRO_M, TILE_LIMITS[0]):
        for nt in divisors(n, MICRO_N, TILE_LIMITS[1]):
            kc = _chunk_k(mt, nt, k, ldm_free)
            if kc < min(k, MIN_CHUNK_K):
                continue
            tiles = (m // mt) * (n // nt)
            rounds, active = -(-tiles // cpes), min(tiles, cpes)
            cost = rounds * (mt * nt / 4 + 8 * (mt + nt) * active / dma_bytes_per_cycle)
            if best is None or cost < best[0]:
                best = (cost, (mt, nt, -(-k // -(-k // kc))))   # equal chunks
    return best[1]


def baseline_gemm(A, B, *, engine="c", machine=None, tile=None):
    """A (M x K) @ B (K x N) on the VM in double precision; returns (C, Stats).

    M must be a multiple of 4 and N of 16 (the kernel's 4 x 16 register block, no padding).
    `tile` = (Mt, Nt, Kc) overrides the choice of ``choose_tile``. Details of the Stats: m, n,
    k, tile.
    """
    A, B = np.asarray(A), np.asarray(B)
    if A.dtype != np.float64 or B.dtype != np.float64 or A.ndim != 2 or B.ndim != 2:
        raise ArgumentError(f"A and B must be 2-D float64 arrays, got {A.dtype} {A.shape} and "
                         f"{B.dtype} {B.shape}")
    (m, k), (k2, n) = A.shape, B.shape
    if k != k2:
        raise ArgumentError(f"A is {m} x {k} but B is {k2} x {n}")
    if k < 1 or m < 1 or n < 1 or m % MICRO_M or n % MICRO_N:
        raise ArgumentError(f"the baseline needs M a multiple of {MICRO_M}, N of {MICRO_N} and "
                         f"K >= 1, got M, N, K = {m}, {n}, {k}")
    machine = machine or Machine()
    ldm_free = KERNEL.arena(machine.config.ldm_bytes, KERNEL_ARGS).free
    mt, nt, kc = tile or choose_tile(m, n, k, ldm_free, machine.config)
    fits = 1 <= kc == _chunk_k(mt, nt, kc, ldm_free)
    if m % mt or n % nt or mt % MICRO_M or nt % MICRO_N or not fits:
        raise ArgumentError(f"tile (Mt, Nt, Kc) = {(mt, nt, kc)} does not divide {m} x {n} into "
                         "4 x 16 micro-tiles or does not fit in LDM")

    mem = machine.mem
    a_km = mem.put(np.ascontiguousarray(A.T))   # free when A is column-major (A.T row-major)
    b_kn = mem.put(np.ascontiguousarray(B))
    c = mem.alloc(m * n * 8)
    stats = KERNEL.launch(machine, [a_km, b_kn, c, m, n, k, mt, nt, kc], flops=2 * m * n * k,
                          engine=engine, details=dict(m=m, n=n, k=k, tile=(mt, nt, kc)))
    return mem.get(c, (m, n), np.float64), stats
