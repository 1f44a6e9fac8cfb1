"""The streaming driver of the memory-bound operators (``kernels/dnn/stream.s``): element-wise
bodies over up to 3 input and 2 output streams of one length, data parallel over the CPEs of
one or more core groups, double-buffered DMA in whole 128-byte lines (thesis §5.3).

The host copies the operands into main memory, chooses the chunk (the largest whole number of
lines whose double buffers for every stream fit the LDM arena, at most ``MAX_CHUNK_BYTES``,
and no more than an even share of the data per CPE), gives each core group a contiguous range
of chunks and writes one job record per group; every element is loaded, computed and stored by
the CPEs.
"""
from __future__ import annotations

import numpy as np

from ..runtime import Kernel
from .common import DnnError, machine_and_cgs

KERNEL = Kernel(("dnn/stream.s",), "stream_run", "stream_ldm_end", stack="stream_stack")
MAX_CHUNK_BYTES = 8192        # past this the put's acknowledgement is under 5% of a chunk
MAX_IN, MAX_OUT = 3, 2
SUFFIX = {4: "s", 8: "d"}     # a body's routine for f32 / f64 elements
BODIES = {"axpby": (2, 1), "scale": (1, 1), "sgd": (3, 2)}   # body: (inputs, outputs)


def stream_bound_gbps(config, gets: int, puts: int, cgs: int = 1) -> float:
    """The DMA engines' ceiling for a stream of `gets` reads and `puts` writes per element in
    large whole-line requests (docs/timing.md "DMA": a line costs a get dma_transaction_cycles
    and a put dma_put_write_cycles of engine time; acknowledgements amortised away), in GB/s
    over `cgs` core groups: the "DMA stream figure" the operators' bandwidth is measured against."""
    line = config.dma_transaction_bytes
    cycles = gets * config.dma_transaction_cycles + puts * config.dma_put_write_cycles
    return (gets + puts) * line / cycles * config.clock_hz / 1e9 * cgs


def chunk_elements(config, itemsize: int, n: int, streams: int, workers: int) -> int:
    line = config.dma_transaction_bytes
    arena = KERNEL.arena(config.ldm_bytes, nargs=1)
    fit = arena.free // (2 * streams) // line * line
    share = -(-n * itemsize // (workers * line)) * line
    chunk_bytes = max(line, min(MAX_CHUNK_BYTES, fit, share))
    return chunk_bytes // itemsize


def run(body: str, inputs, params=(), *, machine=None, cgs=1, engine="c", details=None):
    """Run body `body` (``BODIES``) over the flat inputs (numpy arrays of one dtype and size,
    already checked); returns (outputs as flat arrays, Stats). Stats details: body, n, dtype,
    chunk_bytes, cgs, bytes_moved, bandwidth_gbps, stream_gbps (``stream_bound_gbps``) and
    bandwidth_ratio."""
    nin, nout = BODIES[body]
    machine, cgs = machine_and_cgs(machine, cgs)
    config = machine.config
    if len(inputs) != nin or len(params) > 4:
        raise DnnError(f"body {body} takes {nin} inputs and at most 4 parameters")
    dtype = inputs[0].dtype
    es = dtype.itemsize
    n = inputs[0].size
    cpes = config.num_cpes
    chunk = chunk_elements(config, es, n, nin + nout, cpes * cgs)
    chunks = -(-n // chunk)
    mem = machine.mem
    in_addr = [mem.put(np.ascontiguousarray(a).reshape(-1)) for a in inputs]
    out_addr = [mem.alloc(n * es) for _ in range(nout)]
    arena = KERNEL.arena(config.ldm_bytes, nargs=1)
    # frame of a parity: in0, in1, in2, out0, out1 (0: stream unused)
    buffers = [[arena.take(chunk * es) if used else 0
                for used in [i < nin for i in range(MAX_IN)] + [o < nout for o in range(MAX_OUT)]]
               for _ in range(2)]
    if not arena.fits:
        raise DnnError(f"body {body}: {2 * (nin + nout)} buffers of {chunk * es} bytes do not "
                       "fit in LDM")
    record = KERNEL.record("J_", "JOB_BYTES")
    frame_bytes = KERNEL.symbol("FRAME_BYTES")
    jobs = []
    for cg in range(cgs):
        first, last = chunks * cg // cgs, chunks * (cg + 1) // cgs
        if first == last:
            continue
        start = first * chunk
        count = min(n, last * chunk) - start
        words = record.new(n=count, es=es, chunk=chunk, chunks=last - first, cpes=cpes,
                           nin=nin, nout=nout, body=KERNEL.symbol(f"{body}_{SUFFIX[es]}"))
        for index, addr in enumerate(in_addr):
            words[(record.offset("in") + 8 * index) // 8] = addr + start * es
        for index, addr in enumerate(out_addr):
            words[(record.offset("out") + 8 * index) // 8] = addr + start * es
        for parity, frame in enumerate(buffers):
            base = (record.offset("frame") + parity * frame_bytes) // 8
            words[base:base + len(frame)] = frame
        for index, value in enumerate(params):
            words[(record.offset("p") + 8 * index) // 8] = np.float64(value).view(np.int64)
        jobs.append([mem.put(words)])
    moved = (nin + nout) * n * es
    stats = KERNEL.launch_cgs(machine, jobs, flops=0, engine=engine,
                              details=dict(details or {}, body=body, n=n, dtype=dtype.name,
                                           chunk_bytes=chunk * es, cgs=len(jobs)))
    bandwidth = moved / stats.seconds / 1e9
    bound = stream_bound_gbps(config, nin, nout, len(jobs))
    stats.details.update(bytes_moved=moved, bandwidth_gbps=bandwidth, stream_gbps=bound,
                         bandwidth_ratio=bandwidth / bound)
    outputs = [mem.get(addr, (n,), dtype) for addr in out_addr]
    return outputs, stats
