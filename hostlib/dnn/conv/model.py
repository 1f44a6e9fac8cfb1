"""The convolution's performance model (thesis §3.2 eq. 3-1/3-2, §4.2.3; docs/dnn.md
"Convolution"), beside swGEMM's ``hostlib.blas.gemm_model``: pieces every algorithm module
can build its ``predict`` on, and the sampling its ``estimate`` uses.

Model pieces (no simulation):
- ``strided_get_cycles`` / ``strided_put_cycles``: a strided DMA (blocks of `block` bytes,
  `stride` bytes apart) timed as the configuration's DMA engine does (eq. 3-2: every block
  pays the 128-byte lines it touches; a put by its write pieces and acknowledgement);
- ``primitive_cycles``: one call of the LDM GEMM primitive (eq. 4-2 as fitted);
- ``gemm_cycles``: one swGEMM launch as ``gemm_in_memory`` would plan it;
- ``im2col_cycles``: the im2col / col2im kernel (the explicit algorithm's data movement);
- ``transform_cycles``: a ``dnn.transform`` between layouts (the weights' rearrangement of
  implicit convolution, its backward-filter operands).

Sampling (simulation of part of a pass, then extrapolation):
- ``sampled_launches``: a launch whose cycles are linear in its units of work (whole rounds
  over the CPEs), from two sample sizes;
- ``sampled_gemm``: a swGEMM launch, from sub-GEMMs with 3 and 4 blocks along its longest
  block dimensions, extrapolated in the block counts (a launch's time is the sum of its
  steps, and every inner block's steps cost the same).
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from ....vm import Machine
from ...blas import gemm_model
from ...blas.gemm_model import Blocking
from ...blas.gemm_model import put_engine_cycles, transactions
from ...blas.swgemm import InMemory, gemm_in_memory, gemm_plan
from .. import layout_transform as layout

# CPE cycles per element of the im2col kernel's LDM loops (kernels/dnn/im2col.s ROW_COL:
# load, store, two address adds, count, branch; the col2im loop also loads and adds), read
# off the loop and checked against runs (tests/test_dnn_conv.py).
SELECT_CYCLES = {False: 3.0, True: 9.0}
SAMPLE_ROUNDS = (2, 4)        # rounds of CPE work simulated by sampled_launches
# Blocks along a sampled GEMM dimension: the first three blocks of a row of steps cost more
# than the next (measured: 66 601, 63 123, then 40 727 cycles per block, 64 x 1568 x 576 f32),
# so the slope is taken between 3 and 4.
SAMPLE_BLOCKS = (3, 4)
SAMPLED_AXES = 2              # GEMM dimensions sampled at most (the ones with most blocks)
# CPE cycles of a layout transform's LDM loop (kernels/dnn/transform.inc TRANSFORM): per word
# moved (load, store, two address steps, count, branch) and per row of D words (the row's
# set-up and the loop over p), read off the loop.
TRANSFORM_WORD_CYCLES = 6.0
TRANSFORM_ROW_CYCLES = 8.0


def _blocks(start: int, block: int, stride: int, count: int):
    """First and last byte of each of `count` blocks (arrays)."""
    starts = start + np.arange(count) * (block + stride)
    return starts, starts + block - 1


def strided_get_cycles(block: int, stride: int, count: int, config, start: int = 0) -> float:
    """Eq. 3-2 for one get of `count` blocks: T_latency + its lines at the engine's rate, the
    request's engine time and, strided, each block's (docs/timing.md "DMA")."""
    starts, ends = _blocks(start, block, stride, count)
    lines = transactions(starts, ends, np.ones(count, bool), config)
    blocks = count if stride and count > 1 else 0
    return (config.dma_latency + lines * config.dma_transaction_cycles
            + config.dma_get_request_cycles + blocks * config.dma_block_get_cycles)


def strided_put_cycles(block: int, stride: int, count: int, config, start: int = 0) -> float:
    """One put of `count` blocks: T_latency + the engine's writes and acknowledgement."""
    starts, ends = _blocks(start, block, stride, count)
    return config.dma_latency + put_engine_cycles(starts[None], ends[None],
                                                  np.ones((1, count), bool), config)


def primitive_cycles(mb: int, nb: int, kb: int) -> float:
    """One LDM GEMM primitive call on 8 Mb x 8 Nb x 8 Kb (eq. 4-2, gemm_model's fit)."""
    return gemm_model.primitive_cycles(mb, nb, kb)


def _operands(shape, dtype, address=lambda rows, ld: 0):
    """InMemory A, B, C of (M, N, K, trans_a, trans_b, {"lda"/"ldb"/"ldc": ld}), placed by
    ``address(rows, ld)`` (default: nowhere, for planning)."""
    m, n, k, trans_a, trans_b, leads = shape
    dtype = np.dtype(dtype)
    matrices = []
    for name, (rows, cols) in (("lda", (k, m) if trans_a else (m, k)),
                               ("ldb", (n, k) if trans_b else (k, n)), ("ldc", (m, n))):
        ld = leads.get(name, cols)
        matrices.append(InMemory(address(rows, ld), (rows, cols), dtype, ld))
    return matrices


def gemm_cycles(shape, itemsize: int, config) -> float:
    """swGEMM's predicted cycles for (M, N, K, trans_a, trans_b, leading dimensions) with
    a row-major C (gemm_model.predict on the blocking it would choose)."""
    return _gemm_plan(*shape[:5], tuple(sorted(shape[5].items())), itemsize, config)[0]


@functools.lru_cache(maxsize=4096)
def _gemm_plan(m, n, k, trans_a, trans_b, leads, itemsize, config):
    """(predicted cycles, Blocking) of gemm_in_memory's plan, remembered (choosing the
    blocking evaluates every candidate)."""
    a, b, c = _operands((m, n, k, trans_a, trans_b, dict(leads)),
                        np.float32 if itemsize == 4 else np.float64)
    predicted, _, blocking, _ = gemm_plan(a, b, c, trans_a=trans_a, trans_b=trans_b,
                                          config=config)
    return predicted, blocking


def _over_starts(cost, starts, config) -> float:
    """The mean of ``cost(start)`` over byte addresses `starts` (only their offsets within a
    DMA line matter)."""
    offsets, counts = np.unique(np.asarray(starts) % config.dma_transaction_bytes,
                                return_counts=True)
    return float(np.dot([cost(int(o)) for o in offsets], counts) / counts.sum())


def im2col_cycles(geo, itemsize: int, group: int, col2im: bool, config) -> float:
    """The im2col (or col2im) kernel: tasks of `group` input rows over the CPEs. Per task its
    row DMAs, per kernel row the strided DMA of K_c runs and the LDM selections (sums), each
    DMA priced at the line offsets the tasks' rows and runs start at; the CG's DMA engine
    serves every CPE, so the launch takes the longer of the engine's total work and one
    CPE's share of the tasks (its own DMA latencies and LDM loops)."""
    es, cpes = itemsize, config.num_cpes
    groups = -(-geo.r_i // group)
    tasks = geo.batch * geo.n_i * groups
    row = geo.c_i * es
    first_rows = np.arange(groups) * group
    images = np.arange(min(geo.batch, config.dma_transaction_bytes))
    row_starts = ((images[:, None] * geo.r_i + first_rows) * row).ravel()
    rows_dma = _over_starts(lambda start: (strided_put_cycles if col2im else strided_get_cycles)(
        row * group if col2im else row, 0, 1 if col2im else group, config, start),
        row_starts, config)
    run_bytes = -(-group // geo.stride[0]) * geo.c_o * es
    pitch = geo.batch * geo.r_o * geo.c_o * es
    run_starts = ((images[:, None] * geo.r_o + first_rows // geo.stride[0])
                  * geo.c_o * es).ravel()
    col_dma = _over_starts(lambda start: (strided_get_cycles if col2im else strided_put_cycles)(
        run_bytes, pitch - run_bytes, geo.k_c, config, start), run_starts, config)
    dma = rows_dma + geo.k_r * col_dma
    engine = dma - (1 + geo.k_r) * config.dma_latency
    select = SELECT_CYCLES[col2im] * geo.k_r * geo.k_c * run_bytes / es
    per_cpe = -(-tasks // cpes) * (dma + select)
    return max(per_cpe, tasks * engine)


def _strided(cost, block: int, stride: int, count: int, config) -> float:
    """`cost` (strided_get_cycles / strided_put_cycles) of `count` blocks `stride` bytes
    apart, as one block when they touch (the engine sees one contiguous request)."""
    return cost(block * count, 0, 1, config) if stride == 0 else cost(block, stride, count,
                                                                         config)


def transform_cycles(shape, src: str, dst: str, es: int, config) -> float:
    """Predicted cycles of ``dnn.transform`` of an array of `shape` (laid out as `src`) to
    `dst` on one CG: per pass (layout's own plan: its group swaps and tiles), every tile's
    strided get (eq. 3-2) and put as the engine times them (the first tile of the pass
    stands for all), against one CPE's share of the tiles' LDM loop; the driver's DMAs are
    double-buffered, so a pass takes the longer of the two, plus a latency and every CPE's
    job fetch."""
    cpes, total = config.num_cpes, 0.0
    for a, p, q, d in layout.swap_passes(shape, src, dst):
        pb, qb, db = layout._tile(config, p, q, d, es)
        units = a * -(-p // pb) * -(-q // qb) * -(-d // db)
        full = db == d
        get_block, get_count = (qb * d if full else db) * es, pb
        put_block, put_count = (pb * d if full else db) * es, qb if full else pb
        get = _strided(strided_get_cycles, get_block, q * d * es - get_block, get_count,
                       config)
        put = _strided(strided_put_cycles, put_block, (p if full else 1) * d * es - put_block,
                       put_count, config)
        engine = units * (get + put - 2 * config.dma_latency)
        compute = -(-units // cpes) * pb * qb * (TRANSFORM_WORD_CYCLES * db
                                                 + TRANSFORM_ROW_CYCLES)
        total += max(engine, compute) + config.dma_latency + cpes * config.dma_transaction_cycles
    return total


def sampled_launches(units: int, unit: int, run):
    """Cycles of a launch over `units` units of work (whole rounds every `unit` units),
    extrapolated linearly from ``run(n)`` (the cycles of a launch on n units) at
    SAMPLE_ROUNDS rounds; simulated whole when that is no more work. Returns (cycles,
    details)."""
    sizes = [unit * r for r in SAMPLE_ROUNDS]
    if units <= sizes[-1]:
        return float(run(units)), dict(units=units, simulated=[units])
    first, second = (run(n) for n in sizes)
    slope = (second - first) / (sizes[1] - sizes[0])
    return first + slope * (units - sizes[0]), dict(units=units, simulated=sizes)


def sampled_gemm(shape, dtype, machine, engine="c"):
    """Cycles of the swGEMM launch of (M, N, K, trans_a, trans_b, leading dimensions) as
    ``gemm_in_memory`` runs it, from sub-GEMMs with the same blocking: along each of the (at
    most SAMPLED_AXES) dimensions with more than SAMPLE_BLOCKS[-1] blocks, SAMPLE_BLOCKS
    blocks (the last one the full problem's last, partial or not), the others as they are;
    every memory row starts where the full problem's does modulo a DMA line. The kernel's steps run m, n, k from outer to inner, so the time is
    a + b c_outer + c c_outer c_inner in the sampled block counts (no term for the inner
    dimension alone); solved from the samples and evaluated at the full counts. Random data,
    each sample on a new machine of `machine`'s configuration, remembered (cases sharing
    the sub-GEMMs share them). Returns (cycles, details)."""
    config = machine.config
    dtype = np.dtype(dtype)
    _, blocking = _gemm_plan(*shape[:5], tuple(sorted(shape[5].items())), dtype.itemsize,
                             config)
    side = gemm_model.mesh(config)
    sizes = dict(m=shape[0], n=shape[1], k=shape[2])
    widths = dict(m=side * blocking.mb, n=side * blocking.nb, k=side * blocking.kb)
    counts = {axis: -(-sizes[axis] // widths[axis]) for axis in sizes}
    axes = [axis for axis in sorted(counts, key=lambda axis: -counts[axis])
            if counts[axis] > SAMPLE_BLOCKS[-1]][:SAMPLED_AXES]
    axes.sort(key="mnk".index)                           # outer first
    first, last = SAMPLE_BLOCKS
    points = [(first,) * len(axes)] + [tuple(last if i == j else first for i in range(len(axes)))
                                       for j in range(len(axes))]
    samples = []
    for blocks in points:
        sub = dict(sizes)
        for axis, count in zip(axes, blocks):
            sub[axis] = sizes[axis] - (counts[axis] - count) * widths[axis]
        leads = _sample_leads(shape, sub, dtype.itemsize, config)
        samples.append((blocks, _gemm_run(sub["m"], sub["n"], sub["k"], *shape[3:5],
                                          tuple(sorted(leads.items())), dtype.name,
                                          tuple(blocking), config, engine)))

    def terms(blocks):        # 1, c_outer, c_outer c_inner
        return [np.prod(blocks[:r]) for r in range(len(blocks) + 1)]

    matrix = np.array([terms(blocks) for blocks, _ in samples], float)
    coefficients = np.linalg.solve(matrix, np.array([cycles for _, cycles in samples], float))
    cycles = float(np.dot(terms([counts[axis] for axis in axes]), coefficients))
    return cycles, dict(blocking=tuple(blocking), blocks=counts, sampled_axes=axes,
                        samples=len(samples))


def _sample_leads(shape, sub, es, config) -> dict:
    """Leading dimensions of a sub-GEMM's operands: at least their columns, congruent to the
    full problem's modulo a DMA line (so their rows start at the same offsets in lines)."""
    m, n, k, trans_a, trans_b, leads = shape
    columns = dict(lda=sub["m"] if trans_a else sub["k"], ldb=sub["k"] if trans_b else sub["n"],
                   ldc=sub["n"])
    line = config.dma_transaction_bytes // es
    return {name: columns[name] + (ld - columns[name]) % line for name, ld in leads.items()}


@functools.lru_cache(maxsize=None)
def _gemm_run(m, n, k, trans_a, trans_b, leads, dtype, blocking, config, engine) -> int:
    """Cycles of one gemm_in_memory launch on random operands, on a new machine of `config`
    (remembered: a bench meets the same sample in many cases)."""
    rng = np.random.default_rng(0)
    machine = Machine(config)
    mem = machine.mem

    def place(rows, ld):
        return mem.put(rng.standard_normal((rows, ld)).astype(dtype))

    a, b, c = _operands((m, n, k, trans_a, trans_b, dict(leads)), dtype, place)
    _, stats = gemm_in_memory(a, b, c, trans_a=trans_a, trans_b=trans_b,
                              blocking=Blocking(*blocking), machine=machine, engine=engine)
    return stats.cycles
