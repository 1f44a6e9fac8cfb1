"""Gradient synchronisation across ParaX instances on the CPE array (``kernels/parax/sync.s``):
PS, a parameter server on CPE 0 that sums, updates and copies W to every worker, who pulls
it; RAR, a ring all-reduce over register communication (reduce-scatter, update of the owned
segment, all-gather into every instance's private W); and GS, ParaX's gradient server: one
shared W, the reduction and the update partitioned over all CPEs by chunks (about one per
CPE: whole 128-byte lines, at most the kernel's CHUNK). All compute
W - (lr / P) sum_k G_k; PS and GS add in instance order and give the same bits, RAR adds in
ring order (a documented tolerance). docs/parax.md "Gradient synchronisation".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...vm import Machine
from ..runtime import Kernel
from .block import _line_masks

KERNEL = Kernel(("parax/sync.s",), "parax_sync", "sync_ldm_end")
RAR_KERNEL = Kernel(("parax/sync.s",), "parax_rar", "rar_ldm_end")
STRATEGIES = ("PS", "RAR", "GS")


@dataclass
class SyncRun:
    """What ``synchronise`` did: the updated weights and the run's cycles and traffic."""
    w: np.ndarray                # the updated weights
    strategy: str
    instances: int               # gradients summed (PS: its workers)
    cycles: int                  # the synchronisation's makespan (spawn excluded)
    dma_bytes: int               # bytes the DMA engine moved (whole 128-byte transactions)
    idle_cpes: int               # CPEs that compute no instance (PS: the server, unused CPEs)
    copies: object               # PS, RAR: the instances' private copies of W (GS: None)
    run: object


def _padded(a, length):
    """`a` with its last axis zero-padded to `length` (the kernels' whole chunks)."""
    out = np.zeros(a.shape[:-1] + (length,), np.float32)
    out[..., :a.shape[-1]] = a
    return out


def _symbol(name: str) -> int:
    return KERNEL.symbol(name)


def _chunk(n: int, instances: int, strategy: str, config) -> int:
    """f32 per chunk, whole 128-byte lines, at most the kernel's CHUNK: PS's one server takes
    all of W; GS cuts it into about P chunks so that every instance's CPE takes a share of
    the reduction (fixed 4 KiB chunks left all but ceil(n / 1024) CPEs idle)."""
    shares = instances if strategy == "GS" else 1
    line = config.dma_transaction_bytes // 4        # f32 per DMA line
    return min(_symbol("CHUNK"), -(-n // (shares * line)) * line)


def synchronise(gradients, w, lr: float, *, strategy: str = "GS", machine=None,
                engine: str = "c") -> SyncRun:
    """W - (lr / P) sum_k gradients[k] for P = len(gradients) instances, each gradient (n,)
    float32 in main memory. PS needs P + 1 CPEs (P <= 63); GS uses P CPEs."""
    if strategy not in STRATEGIES:
        raise ArgumentError(f"strategy must be one of {', '.join(STRATEGIES)}, got "
                            f"{strategy!r}")
    if not isinstance(gradients, np.ndarray) or not isinstance(w, np.ndarray):
        raise ArgumentTypeError("gradients and w must be numpy arrays")
    if gradients.dtype != np.float32 or w.dtype != np.float32 or gradients.ndim != 2 \
            or w.shape != gradients.shape[1:]:
        raise ArgumentError(f"gradients (P, n) and w (n,) float32 expected, got "
                            f"{gradients.dtype} {gradients.shape} and {w.dtype} {w.shape}")
    machine = machine or Machine()
    if strategy == "RAR":
        return _ring(gradients, w, lr, machine, engine)
    config = machine.config
    cpes = config.num_cpes
    instances, n = gradients.shape
    needed = instances + (strategy == "PS")
    if not 1 <= needed <= cpes:
        raise ArgumentError(f"{strategy} with {instances} instances needs {needed} CPEs, the "
                            f"core group has {cpes}")
    chunk = _chunk(n, instances, strategy, config)
    chunks = -(-n // chunk)
    padded = chunks * chunk
    grads, wpad = _padded(gradients, padded), _padded(w, padded)
    scale = float(np.float32(lr / instances))
    spawned = needed if needed <= config.mesh_cols or needed % config.mesh_cols == 0 else cpes
    rmask, cmask = _line_masks(0, spawned, config)
    chunk_bytes = chunk * 4
    row_bytes = padded * 4

    mem = machine.mem
    mark = mem.mark()
    try:
        gmem = mem.put(grads)
        wmem = mem.put(wpad)
        job = KERNEL.record("J_", "JOB_BYTES")
        words = np.zeros(spawned * job.nbytes // 8, np.int64)
        common = dict(g=gmem, gstride=row_bytes, ng=instances, w=wmem, scale=scale,
                      rmask=rmask, cmask=cmask, chunk=chunk_bytes)
        if strategy == "GS":
            for k in range(instances):
                job.write(words, k * job.nbytes, role=_symbol("ROLE_GS"),
                          n=len(range(k, chunks, instances)), first=k * chunk_bytes,
                          step=instances * chunk_bytes, **common)
        else:
            private = mem.alloc(instances * row_bytes)
            job.write(words, 0, role=_symbol("ROLE_SERVER"), n=chunks, first=0,
                      step=chunk_bytes, wp=private, wpstride=row_bytes, nwp=instances,
                      **common)
            for k in range(instances):
                job.write(words, (k + 1) * job.nbytes, role=_symbol("ROLE_WORKER"), n=chunks,
                          wp=private + k * row_bytes, rmask=rmask, cmask=cmask,
                          chunk=chunk_bytes)
        for k in range(needed, spawned):
            job.write(words, k * job.nbytes, rmask=rmask, cmask=cmask)
        jobs = mem.put(words)
        res = machine.run(KERNEL.program, entry=KERNEL.entry, args=[jobs], engine=engine,
                          cpes=range(spawned))
        out = mem.get(wmem, (padded,), np.float32)[:n]
        copies = (mem.get(private, (instances, padded), np.float32)[:, :n]
                  if strategy == "PS" else None)
    finally:
        mem.release(mark)
    return SyncRun(w=out, strategy=strategy, instances=instances, cycles=res.kernel_cycles,
                   dma_bytes=int(res.counters["dma_bytes_moved"]),
                   idle_cpes=cpes - instances, copies=copies, run=res)


def ring_order(instances: int, config) -> list:
    """The CPEs of the ring in order: a mesh row, or a snake over an even number of rows."""
    cols = config.mesh_cols
    if instances <= cols:
        return list(range(instances))
    rows = instances // cols
    if instances % cols or rows % 2 or instances > config.num_cpes:
        raise ArgumentError(f"RAR needs at most {cols} instances (a mesh row) or whole rows, "
                            f"an even number of them (a snake closing along column 0); got "
                            f"{instances}")
    return [r * cols + (c if r % 2 == 0 else cols - 1 - c)
            for r in range(rows) for c in range(cols)]


def _ring(gradients, w, lr, machine, engine) -> SyncRun:
    config = machine.config
    instances, n = gradients.shape
    ring = ring_order(instances, config)
    # segments of whole vectors, a block of P of them within the kernel's LDM block
    seg = min(RAR_KERNEL.symbol("RAR_SEG_MAX"), -(-n // (4 * instances)) * 4,
              RAR_KERNEL.symbol("RAR_BLOCK_MAX") // instances // 4 * 4)
    blocks = -(-n // (instances * seg))
    padded = blocks * instances * seg
    grads = _padded(gradients, padded)
    private = _padded(np.broadcast_to(w, gradients.shape), padded)
    cols = config.mesh_cols
    mem = machine.mem
    mark = mem.mark()
    try:
        gmem = mem.put(grads)
        wmem = mem.put(private)
        job = RAR_KERNEL.record("R_", "RJOB_BYTES")
        words = np.zeros((max(ring) + 1) * job.nbytes // 8, np.int64)
        for p, cpe in enumerate(ring):
            nxt, prev = ring[(p + 1) % instances], ring[p - 1]
            by_column = nxt // cols != cpe // cols
            job.write(words, cpe * job.nbytes, pos=p, p=instances, seg=seg, blocks=blocks,
                      g=gmem + p * padded * 4, wp=wmem + p * padded * 4,
                      scale=float(np.float32(lr / instances)),
                      sendto=nxt // cols if by_column else nxt % cols,
                      links=int(by_column) | int(prev // cols != cpe // cols) << 1)
        jobs = mem.put(words)
        res = machine.run(RAR_KERNEL.program, entry=RAR_KERNEL.entry, args=[jobs],
                          engine=engine, cpes=range(max(ring) + 1))
        copies = mem.get(wmem, (instances, padded), np.float32)[:, :n]
    finally:
        mem.release(mark)
    return SyncRun(w=copies[0].copy(), strategy="RAR", instances=instances,
                   cycles=res.kernel_cycles, dma_bytes=int(res.counters["dma_bytes_moved"]),
                   idle_cpes=config.num_cpes - instances, copies=copies, run=res)
