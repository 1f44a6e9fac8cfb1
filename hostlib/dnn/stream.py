"""The streaming driver of the memory-bound operators (``kernels/dnn/stream.s``): units of work
round robin over the CPEs of one or more core groups, up to 3 input and 2 output streams moved
by double-buffered DMA, an operator's plan routine saying what each unit moves and a body
routine computing it in LDM (thesis §5.3).

``run`` is the element-wise case: every stream has N elements, a unit is a chunk of them. The
chunk is the largest whole number of 128-byte lines whose double buffers for every stream fit
the LDM arena, at most ``MAX_CHUNK_BYTES``, and no more than an even share of the data per CPE.
Other operators (pooling) call ``launch`` with their own plan, buffers and parameters.
"""
from __future__ import annotations

import numpy as np

from ..runtime import Kernel
from .common import DnnError, machine_and_cgs

KERNEL = Kernel(("dnn/stream.s",), "stream_run", "stream_ldm_end",
                stack="stream_stack")
MAX_CHUNK_BYTES = 8192        # past this the put's acknowledgement is under 5% of a chunk
MAX_IN, MAX_OUT = 3, 2
SUFFIX = {4: "s", 8: "d"}     # a body's routine for f32 / f64 elements
BODIES = {"axpby": (2, 1), "scale": (1, 1), "sgd": (3, 2), "adam_moments": (3, 2),
          "adam_step": (3, 1)}   # body: (inputs, outputs)


def stream_bound_gbps(config, gets: float, puts: float, cgs: int = 1) -> float:
    """The DMA engines' ceiling for moving `gets` bytes in and `puts` bytes out (or any amounts
    in that ratio) in large whole-line requests (docs/timing.md "DMA": a line costs a get
    dma_transaction_cycles and a put dma_put_write_cycles of engine time; acknowledgements
    amortised away), in GB/s over `cgs` core groups: the "DMA stream figure" the operators'
    bandwidth is measured against."""
    line = config.dma_transaction_bytes
    cycles = (gets * config.dma_transaction_cycles + puts * config.dma_put_write_cycles) / line
    return (gets + puts) / cycles * config.clock_hz / 1e9 * cgs


def arena(config, kernel=KERNEL):
    return kernel.arena(config.ldm_bytes, nargs=1)


def chunk_elements(config, itemsize: int, n: int, streams: int, workers: int,
                   kernel=KERNEL) -> int:
    line = config.dma_transaction_bytes
    fit = arena(config, kernel).free // (2 * streams) // line * line
    share = -(-n * itemsize // (workers * line)) * line
    chunk_bytes = max(line, min(MAX_CHUNK_BYTES, fit, share))
    return chunk_bytes // itemsize


def launch(machine, cgs, *, name, body, plan, inputs, outputs, buffer_bytes, units, es,
           params=(), ints=(), chunk=0, n=0, moved, engine="c", details=None, kernel=KERNEL):
    """Run the driver: `units` units split over `cgs` core groups in contiguous ranges, the
    plan and body routines named `plan` and `body`, stream addresses `inputs` / `outputs`,
    LDM buffers of `buffer_bytes` (per stream, inputs then outputs), `params` (doubles,
    J_P) and `ints` (J_X); `moved` = (bytes read, bytes written) the operator must move;
    `kernel`: the driver's program, with the operator's routines linked in when they live
    outside stream.s (softmax.s).
    Returns Stats with bytes_moved, bandwidth_gbps, stream_gbps and bandwidth_ratio."""
    records = job_records(machine.config, cgs, name=name, body=body, plan=plan, inputs=inputs,
                          outputs=outputs, buffer_bytes=buffer_bytes, units=units, es=es,
                          params=params, ints=ints, chunk=chunk, n=n, kernel=kernel)
    jobs = [[machine.mem.put(words)] for words in records]
    stats = kernel.launch_cgs(machine, jobs, flops=0, engine=engine,
                              details=dict(details or {}, cgs=len(jobs)))
    return with_bandwidth(stats, machine.config, moved, len(jobs))


def stream_field(kernel, direction: str, index: int) -> int:
    """The int64 word of a job record holding the address of stream `index` of `direction`
    ("in" or "out"): where a caller that keeps the records patches a new address."""
    return (kernel.record("J_", "JOB_BYTES").offset(direction) + 8 * index) // 8


def job_records(config, cgs, *, name, body, plan, inputs, outputs, buffer_bytes, units, es,
                params=(), ints=(), chunk=0, n=0, kernel=KERNEL):
    """The int64 job records ``launch`` places, one per core group that has units (arguments
    as ``launch``'s), without placing or running them."""
    nin, nout = len(inputs), len(outputs)
    record = kernel.record("J_", "JOB_BYTES")
    max_ints = (record.nbytes - record.offset("x")) // 8
    if not (1 <= nin <= MAX_IN and 1 <= nout <= MAX_OUT and len(params) <= 4
            and len(buffer_bytes) == nin + nout and len(ints) <= max_ints):
        raise DnnError(f"{name}: the driver takes 1-{MAX_IN} inputs, 1-{MAX_OUT} outputs, "
                       f"a buffer per stream, at most 4 parameters and {max_ints} words")
    space = arena(config, kernel)
    sizes = list(buffer_bytes[:nin]) + [0] * (MAX_IN - nin) + list(buffer_bytes[nin:]) + \
        [0] * (MAX_OUT - nout)
    frames = [[space.take(size) if size else 0 for size in sizes] for _ in range(2)]
    if not space.fits:
        raise DnnError(f"{name}: LDM buffers of {sum(sizes) * 2} bytes do not fit in the "
                       f"{space.limit - kernel.symbol(kernel.ldm_end)} bytes free")
    frame_bytes = kernel.symbol("FRAME_BYTES")
    jobs = []
    for cg in range(cgs):
        first, last = units * cg // cgs, units * (cg + 1) // cgs
        if first == last:
            continue
        words = record.new(n=n, es=es, chunk=chunk, first=first, chunks=last,
                           cpes=config.num_cpes, nin=nin, nout=nout,
                           body=kernel.symbol(body), plan=kernel.symbol(plan))
        fields = [("in", inputs), ("out", outputs), ("p", params), ("x", ints)]
        for field, values in fields:
            for index, value in enumerate(values):
                words[(record.offset(field) + 8 * index) // 8] = (
                    np.float64(value).view(np.int64) if field == "p" else int(value))
        for parity, frame in enumerate(frames):
            base = (record.offset("frame") + parity * frame_bytes) // 8
            words[base:base + len(frame)] = frame
        jobs.append(words)
    return jobs


def with_bandwidth(stats, config, moved, cgs: int = 1):
    """`stats` with the memory-bound operator's details: bytes_moved, bandwidth_gbps, the
    ceiling stream_gbps for its mix of `moved` = (bytes read, bytes written) and their ratio."""
    bound = stream_bound_gbps(config, *moved, cgs)
    bandwidth = sum(moved) / stats.seconds / 1e9
    stats.details.update(bytes_moved=sum(moved), bandwidth_gbps=bandwidth, stream_gbps=bound,
                         bandwidth_ratio=bandwidth / bound)
    return stats


def run(body: str, inputs, params=(), *, outputs=None, kernel=KERNEL, machine=None, cgs=1,
        engine="c", details=None):
    """Run element-wise body `body` (``BODIES``, or a body of `kernel`'s with `outputs`
    outputs) over the flat inputs (numpy arrays of one dtype and size, already checked) on the
    element-wise plan; returns (outputs as flat arrays, Stats). Stats details: body, n, dtype,
    chunk_bytes, cgs, `details` and those of ``launch``."""
    nin, nout = len(inputs), BODIES[body][1] if outputs is None else outputs
    machine, cgs = machine_and_cgs(machine, cgs)
    dtype = inputs[0].dtype
    es, n = dtype.itemsize, inputs[0].size
    mem = machine.mem
    in_addr = [mem.put(np.ascontiguousarray(a).reshape(-1)) for a in inputs]
    out_addr = [mem.alloc(n * es) for _ in range(nout)]
    plan = elementwise_plan(machine.config, body, n, dtype, in_addr, out_addr, params, cgs,
                            kernel)
    stats = launch(machine, cgs, moved=(nin * n * es, nout * n * es), engine=engine,
                   details=dict(details or {}, body=body, n=n, dtype=dtype.name,
                                chunk_bytes=plan["chunk"] * es), **plan)
    return [mem.get(addr, (n,), dtype) for addr in out_addr], stats


def elementwise_plan(config, body, n, dtype, inputs, outputs, params, cgs, kernel=KERNEL):
    """The arguments of ``launch`` / ``job_records`` (but the machine, cgs and timing ones) for
    element-wise body `body` over `n` elements of `dtype`, streams at addresses `inputs` and
    `outputs`."""
    es = np.dtype(dtype).itemsize
    streams = len(inputs) + len(outputs)
    chunk = chunk_elements(config, es, n, streams, config.num_cpes * cgs, kernel)
    return dict(name=body, body=f"{body}_{SUFFIX[es]}", plan="elementwise_plan",
                inputs=list(inputs), outputs=list(outputs), buffer_bytes=[chunk * es] * streams,
                units=-(-n // chunk), es=es, params=list(params), chunk=chunk, n=n, kernel=kernel)
