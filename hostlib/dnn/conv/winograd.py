"""Winograd F(2x2, 3x3) convolution (thesis §5.1.3, Algorithm 5; docs/dnn.md "Winograd
convolution"). Four phases, each on the CPEs:
    filter_transform   U[xi] = G g G^T of every 3 x 3 filter      (kernels/dnn/winograd.s OP_FILTER)
    input_transform    V[xi] = B^T d B of every 4 x 4 input tile   (OP_INPUT, padding fused)
    gemm               M[xi] = V[xi] U[xi], 16 swGEMM launches     (hostlib.blas.gemm)
    output_transform   y = A^T m A (+ bias) of every tile          (OP_OUTPUT, odd edges cropped)
with tiles at stride 2 (P = B ceil(R_o/2) ceil(C_o/2)), V (16, P, N_i), U (16, N_i, N_o),
M (16, P, N_o). Activations are NHWC (``LAYOUT``): a pixel's channels are contiguous, so the
transforms move whole rows of pixels and are vectorised across channels.

Backward data is the forward transform of dy with the 180-degree rotated, transposed filter
(stride 1, padding 2 - p). Backward filter: V as forward, Z = A dy A^T per tile (OP_DY),
dU[xi] = V[xi]^T Z[xi] (16 swGEMM launches, a sum over the P tiles) and dw = G^T dU G (OP_DW).

The module implements the algorithm interface of ``conv`` (NAME, PHASES, LAYOUT, supports,
predict, forward, backward_data, backward_filter, estimate).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from ....vm import HostError, Machine
from ...blas import gemm
from ...blas import gemm_model
from ...blas.gemm_model import Blocking, Problem
from ...runtime.kernel import Kernel
from . import model as conv_model
from .common import ConvGeometry

NAME = "winograd"
PHASES = ("filter_transform", "input_transform", "gemm", "output_transform")
LAYOUT = "NHWC"
KERNEL = Kernel(("dnn/winograd.s",), entry="winograd", ldm_end="winograd_ldm_end")
KERNEL_ARGS = 1
XI = 16                      # alpha^2 tile vectors per tile
MIN_ROUNDS = 2               # tasks per CPE the transform planner aims for
DESC_STRIDE_LIMIT = 1 << 32  # a DMA descriptor's stride lane: 32 bits (include/dma.inc)


# ---- the plan: tiles, tasks and LDM buffers --------------------------------------------------

def _tiles(geo: ConvGeometry):
    """Tile rows per image, tiles per tile row, tiles in all."""
    tr, tc = -(-geo.r_o // 2), -(-geo.c_o // 2)
    return tr, tc, geo.batch * tr * tc


def _reciprocal(d: int) -> int:
    """ceil(2^32 / d): the kernel's n / d is (n ceil(2^32 / d)) >> 32, exact for n < 2^32 / d."""
    return -(-(1 << 32) // d)


@dataclass(frozen=True)
class TransformPlan:
    """An OP_INPUT / OP_OUTPUT launch: tiles per task (m), channels per block (cb), and the
    task counts: channel blocks, tile groups per tile row."""
    m: int
    cb: int
    ncb: int
    groups: int
    vec: bool

    def tasks(self, geo: ConvGeometry) -> int:
        tr, _, _ = _tiles(geo)
        return geo.batch * tr * self.groups * self.ncb


def _transform_bytes(op: str, m: int, cb: int, es: int) -> tuple:
    """LDM bytes of the in and out buffers (and the bias) of an OP_INPUT, OP_OUTPUT or OP_DY
    task of m tiles x cb channels."""
    if op == "INPUT":
        return 4 * (2 * m + 2) * cb * es, XI * m * cb * es, 0
    if op == "DY":
        return 2 * 2 * m * cb * es, XI * m * cb * es, 0
    return XI * m * cb * es, 2 * 2 * m * cb * es, cb * es


def _fits(op, m, cb, es, config) -> bool:
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    for nbytes in _transform_bytes(op, m, cb, es):
        arena.take(nbytes)
    return arena.fits


def transform_plan(geo: ConvGeometry, op: str, channels: int, es: int, config) -> TransformPlan:
    """Whole channel rows when m >= min(TC, 4) tiles fit (one contiguous DMA per row and one
    for the 16 slices), else the largest channel block (a multiple of 32 elements, 4 for the
    vectors) that does; m as large as LDM allows but balanced over the tile row and small
    enough to give every CPE MIN_ROUNDS tasks where the layer has that many tiles."""
    tr, tc, _ = _tiles(geo)
    vec = channels % 4 == 0
    step = 4 if vec else 1
    want = min(tc, 4)
    blocks = [channels] + [c for c in range(channels - channels % 32, 0, -32) if c < channels]
    blocks += [c for c in (16, 8, 4, 1) if c % step == 0 and c < min(blocks)]
    for cb in blocks:
        if _fits(op, want, cb, es, config):
            break
    else:
        raise HostError(f"winograd: no {op.lower()} transform task fits in LDM")
    m_max = want
    while m_max < tc and _fits(op, m_max + 1, cb, es, config):
        m_max += 1
    ncb = -(-channels // cb)
    rows = geo.batch * tr * ncb
    groups = -(-tc // m_max)
    while groups < tc and rows * groups < MIN_ROUNDS * config.num_cpes:
        groups += 1
    m = -(-tc // groups)
    return TransformPlan(m, cb, ncb, -(-tc // m), vec)


# CPE cycles per filter of the scalar G g G^T (OP_FILTER) and G^T u G (OP_DW) loops, measured
# (C engine, one task of 16 x 16 against 8 x 8 filters: 171 and 146 cycles; the FP latency
# chains of a filter are not interleaved).
FILTER_CPE_CYCLES = {"FILTER": 171, "DW": 146}
BLOCK_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def _filter_fits(bo, bi, es, config) -> bool:
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    arena.take(9 * bo * bi * es)
    arena.take(XI * bo * bi * es)
    return arena.fits


@functools.lru_cache(maxsize=4096)
def filter_blocks(op: str, n_o: int, n_i: int, rotate: bool, es: int, config) -> tuple:
    """(BO, BI) of an OP_FILTER / OP_DW task (25 BO BI elements of LDM): the block of the grid
    (and the whole N_o, N_i) with the smallest modelled time (``_filter_time``). One side of
    the transfer is strided whatever the block: w's rows (o) hold 9 N_i elements, U's rows
    (i, rotated o) hold N_o (N_i); a get costs the engine 6 cycles per touched line, a put 11
    per whole line or 16-byte piece, so the best block makes the puts' rows long and the gets'
    blocks no shorter than a line where LDM allows."""
    grid_o = sorted({min(b, n_o) for b in BLOCK_GRID} | {n_o})
    grid_i = sorted({min(b, n_i) for b in BLOCK_GRID} | {n_i})
    options = [(bo, bi) for bo in grid_o for bi in grid_i if _filter_fits(bo, bi, es, config)]
    if not options:
        raise HostError("winograd: no filter-transform block fits in LDM")
    return min(options, key=lambda block: _filter_time(op, *block, n_o, n_i, rotate, es, config,
                                                       every_task=False))


def _check_divisions(tasks: int, *divisors) -> None:
    for d in divisors:
        if tasks >= (1 << 32) // d:
            raise HostError(f"winograd: {tasks} tasks are too many for the kernel's divisions")


# ---- launches --------------------------------------------------------------------------------

def _launch(machine, engine, **fields):
    """One run of winograd.s with the job `fields` (J_* in lower case); returns its Stats."""
    job = KERNEL.record("J_", "JOB_BYTES").new(**fields)
    return KERNEL.launch(machine, [machine.mem.put(job)], flops=0, engine=engine,
                         details=dict(op=fields["op"]))


def _filter_launch(op: str, src, shape, n_o, n_i, rotate, machine, engine, blocks):
    """One OP_FILTER / OP_DW launch over (BO, BI) blocks of (o, i) filters; returns the result
    (`shape`) and its Stats."""
    es, config, mem = src.itemsize, machine.config, machine.mem
    bo, bi = blocks or filter_blocks(op, n_o, n_i, rotate, es, config)
    nib = -(-n_i // bi)
    tasks = -(-n_o // bo) * nib
    _check_divisions(tasks, nib)
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    in_buf, out_buf = arena.take(9 * bo * bi * es), arena.take(XI * bo * bi * es)
    dst = mem.alloc(int(np.prod(shape)) * es)
    stats = _launch(machine, engine, op=KERNEL.symbol(f"OP_{op}"), es=es, tasks=tasks,
                    src=mem.put(np.ascontiguousarray(src)), dst=dst, ncb=nib,
                    ncb_inv=_reciprocal(nib), m=bo, cb=bi, p=n_o, ch=n_i, rot=int(rotate),
                    in_buf=in_buf, out_buf=out_buf)
    return mem.get(dst, shape, src.dtype), stats


def _filter_transform(w, rotate: bool, machine, engine, blocks=None):
    """U (16, K, N) of w (N_o, N_i, 3, 3): (K, N) = (N_i, N_o), or (N_o, N_i) with the filter
    rotated by 180 degrees (rotate); `blocks` (BO, BI) overrides ``filter_blocks``. Returns
    (U, Stats)."""
    n_o, n_i = w.shape[:2]
    shape = (XI, n_o, n_i) if rotate else (XI, n_i, n_o)
    return _filter_launch("FILTER", w, shape, n_o, n_i, rotate, machine, engine, blocks)


def _dw_transform(du, machine, engine, blocks=None):
    """dw (N_o, N_i, 3, 3) = G^T dU G of dU (16, N_i, N_o). Returns (dw, Stats)."""
    n_i, n_o = du.shape[1:]
    return _filter_launch("DW", du, (n_o, n_i, 3, 3), n_o, n_i, False, machine, engine, blocks)


def _geometry_fields(geo: ConvGeometry, plan: TransformPlan, channels: int, es: int):
    tr, tc, p = _tiles(geo)
    tasks = plan.tasks(geo)
    _check_divisions(tasks, plan.ncb, plan.groups, tr)
    if p * channels * es >= DESC_STRIDE_LIMIT:
        raise HostError(f"winograd: the 16 slices of {p} tiles x {channels} channels lie too "
                        f"far apart for a DMA stride ({DESC_STRIDE_LIMIT} bytes)")
    return dict(es=es, vec=int(plan.vec), tasks=tasks, ncb=plan.ncb,
                ncb_inv=_reciprocal(plan.ncb), groups=plan.groups,
                groups_inv=_reciprocal(plan.groups), tr=tr, tr_inv=_reciprocal(tr), ch=channels,
                cb=plan.cb, m=plan.m, tc=tc, p=p)


def _buffers(op: str, plan: TransformPlan, es: int, config) -> dict:
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    in_bytes, out_bytes, bias_bytes = _transform_bytes(op, plan.m, plan.cb, es)
    return dict(in_buf=arena.take(in_bytes), out_buf=arena.take(out_bytes),
                bias_buf=arena.take(bias_bytes))


def _input_transform(geo: ConvGeometry, x, machine, engine, plan=None):
    """V (16, P, N_i) of x (B, R_i, C_i, N_i) with geo's padding (`plan` overrides
    ``transform_plan``). Returns (V, Stats)."""
    es, config, mem = x.itemsize, machine.config, machine.mem
    plan = plan or transform_plan(geo, "INPUT", geo.n_i, es, config)
    _, _, p = _tiles(geo)
    v_addr = mem.alloc(XI * p * geo.n_i * es)
    stats = _launch(machine, engine, op=KERNEL.symbol("OP_INPUT"), src=mem.put(x), dst=v_addr,
                    ri=geo.r_i, ci=geo.c_i, pr=geo.padding[0], pc=geo.padding[1],
                    **_geometry_fields(geo, plan, geo.n_i, es),
                    **_buffers("INPUT", plan, es, config))
    return mem.get(v_addr, (XI, p, geo.n_i), x.dtype), stats


def _output_transform(geo: ConvGeometry, m, bias, machine, engine, plan=None):
    """y (B, R_o, C_o, N_o) of M (16, P, N_o) (+ bias) (`plan` overrides ``transform_plan``).
    Returns (y, Stats)."""
    es, config, mem = m.itemsize, machine.config, machine.mem
    plan = plan or transform_plan(geo, "OUTPUT", geo.n_o, es, config)
    bias = np.zeros(geo.n_o, m.dtype) if bias is None else bias
    y_shape = (geo.batch, geo.r_o, geo.c_o, geo.n_o)
    y_addr = mem.alloc(int(np.prod(y_shape)) * es)
    stats = _launch(machine, engine, op=KERNEL.symbol("OP_OUTPUT"), src=mem.put(m),
                    dst=y_addr, bias=mem.put(bias), ri=geo.r_o, ci=geo.c_o,
                    **_geometry_fields(geo, plan, geo.n_o, es),
                    **_buffers("OUTPUT", plan, es, config))
    return mem.get(y_addr, y_shape, m.dtype), stats


def _dy_transform(geo: ConvGeometry, dy, machine, engine, plan=None):
    """Z (16, P, N_o) = A dy A^T of dy (B, R_o, C_o, N_o)'s 2 x 2 tiles (zeros past the
    edges). Returns (Z, Stats)."""
    es, config, mem = dy.itemsize, machine.config, machine.mem
    plan = plan or transform_plan(geo, "DY", geo.n_o, es, config)
    _, _, p = _tiles(geo)
    z_addr = mem.alloc(XI * p * geo.n_o * es)
    stats = _launch(machine, engine, op=KERNEL.symbol("OP_DY"), src=mem.put(dy), dst=z_addr,
                    ri=geo.r_o, ci=geo.c_o, **_geometry_fields(geo, plan, geo.n_o, es),
                    **_buffers("DY", plan, es, config))
    return mem.get(z_addr, (XI, p, geo.n_o), dy.dtype), stats


# ---- the 16 GEMMs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class GemmPlan:
    """How swGEMM runs the 16 products: forward M[xi] = V[xi] (P x K) U[xi] (K x N), or
    (kind "filter") the filter gradient dU[xi] = V[xi]^T Z[xi], (N_i x P)(P x N_o), a sum over
    P. Computing C^T (swapped) or C, with the blocking the model picks; as ``gemm()`` decides
    without C."""
    kind: str
    swapped: bool
    blocking: Blocking
    problem: Problem

    @property
    def p_block(self) -> int:
        """Rows of V per CG block (P is the kernel's K, M or, swapped, N)."""
        mb, nb, kb = self.blocking
        return 8 * (kb if self.kind == "filter" else nb if self.swapped else mb)


def _gemm_problem(kind: str, p: int, a: int, b: int, es: int, swapped: bool) -> Problem:
    """The kernel's problem for operands of P x a and (forward) a x b or (filter) P x b,
    numpy arrays that gemm() places (padded, or in column panels: ``gemm_model.panels``)."""
    if kind == "filter":    # V^T Z: both stored P x ., the kernel's natural K-major operands
        if swapped:
            return Problem(m=b, n=a, k=p, itemsize=es)
        return Problem(m=a, n=b, k=p, itemsize=es)
    if swapped:      # A' = U (K x N, natural), B' = V^T (V stored P x K: transposed)
        return Problem(m=b, n=p, k=a, itemsize=es, b_transposed=True)
    return Problem(m=p, n=b, k=a, itemsize=es, a_transposed=True)


def gemm_plan(kind: str, p: int, a: int, b: int, es: int, config) -> GemmPlan:
    options = []
    for swapped in (False, True):
        problem = _gemm_problem(kind, p, a, b, es, swapped)
        blocking = gemm_model.choose(problem, config)
        options.append((gemm_model.predict(problem, blocking, config), swapped, blocking,
                        problem))
    _, swapped, blocking, problem = min(options, key=lambda o: o[0])
    return GemmPlan(kind, swapped, blocking, problem)


def _gemm(v, u, plan: GemmPlan, machine, engine):
    """One product of the plan (V[xi] U[xi], or V[xi]^T Z[xi]) through swGEMM with the plan's
    orientation and blocking (a zero C in that orientation, beta = 0, fixes it). Returns
    (result, Stats)."""
    rows, cols = (v.shape[1] if plan.kind == "filter" else v.shape[0]), u.shape[1]
    c = np.zeros((cols, rows), v.dtype).T if plan.swapped else np.zeros((rows, cols), v.dtype)
    return gemm(v, u, C=c, beta=0.0, trans_a=plan.kind == "filter", blocking=plan.blocking,
                machine=machine, engine=engine)


def _gemms(kind, v, u, machine, stats, engine):
    """The 16 products of `kind` ("forward": (16, P, K) x (16, K, N); "filter": (16, P, N_i)^T
    x (16, P, N_o)), one swGEMM launch each."""
    plan = gemm_plan(kind, v.shape[1], v.shape[2], u.shape[2], v.itemsize, machine.config)
    rows = v.shape[2] if kind == "filter" else v.shape[1]
    out = np.empty((XI, rows, u.shape[2]), v.dtype)
    for xi in range(XI):
        out[xi], run = _gemm(v[xi], u[xi], plan, machine, engine)
        stats.phases["gemm"].append(run)
    return out


# ---- the interface ---------------------------------------------------------------------------

def _data_geometry(geo: ConvGeometry) -> ConvGeometry:
    """Backward data as a forward convolution: dy (N_o channels, R_o x C_o) with the rotated,
    transposed filter and padding 2 - p gives dx (N_i channels, R_i x C_i)."""
    return ConvGeometry(geo.batch, geo.n_o, geo.n_i, geo.r_o, geo.c_o, 3, 3, (1, 1),
                        (2 - geo.padding[0], 2 - geo.padding[1]))


def supports(geo: ConvGeometry, direction: str, dtype, config) -> str | None:
    if (geo.k_r, geo.k_c) != (3, 3) or geo.stride != (1, 1):
        return "Winograd F(2x2, 3x3) needs K = 3, stride 1"
    if direction == "backward_data" and max(geo.padding) > 2:
        return "Winograd backward-data needs padding <= 2 (it pads dy by 2 - p)"
    es = np.dtype(dtype).itemsize
    inner = _data_geometry(geo) if direction == "backward_data" else geo
    try:
        for op, channels in _transforms(inner, direction):
            plan = transform_plan(inner, op, channels, es, config)
            tr, _, _ = _tiles(inner)
            _check_divisions(plan.tasks(inner), plan.ncb, plan.groups, tr)
    except HostError as error:
        return str(error)
    return None


def forward(geo: ConvGeometry, x, w, bias, machine, stats, engine) -> np.ndarray:
    """y (B, R_o, C_o, N_o) of x (B, R_i, C_i, N_i) (NHWC) and w (N_o, N_i, 3, 3)."""
    u, run = _filter_transform(w, False, machine, engine)
    stats.phases["filter_transform"].append(run)
    return _winograd(geo, x, u, bias, machine, stats, engine)


def backward_data(geo: ConvGeometry, dy, w, machine, stats, engine) -> np.ndarray:
    """dx (B, R_i, C_i, N_i) of dy (B, R_o, C_o, N_o) (NHWC) and w (N_o, N_i, 3, 3)."""
    u, run = _filter_transform(w, True, machine, engine)
    stats.phases["filter_transform"].append(run)
    return _winograd(_data_geometry(geo), dy, u, None, machine, stats, engine)


def backward_filter(geo: ConvGeometry, x, dy, machine, stats, engine) -> np.ndarray:
    """dw (N_o, N_i, 3, 3) of x (B, R_i, C_i, N_i) and dy (B, R_o, C_o, N_o) (NHWC): the
    gradient of y = A^T [U (.) V] A with respect to U is dU[xi] = V[xi]^T Z[xi] with
    Z = A dy A^T per tile, and dw = G^T dU G. Phases: the dy transform is the pass's
    output_transform, G^T dU G its filter_transform."""
    v, run = _input_transform(geo, x, machine, engine)
    stats.phases["input_transform"].append(run)
    z, run = _dy_transform(geo, dy, machine, engine)
    stats.phases["output_transform"].append(run)
    du = _gemms("filter", v, z, machine, stats, engine)
    dw, run = _dw_transform(du, machine, engine)
    stats.phases["filter_transform"].append(run)
    return dw


def _transforms(geo: ConvGeometry, direction: str):
    """The pass's tile transforms and their channels: (op, channels)."""
    return (("INPUT", geo.n_i), ("DY" if direction == "backward_filter" else "OUTPUT", geo.n_o))


def _winograd(geo: ConvGeometry, x, u, bias, machine, stats, engine) -> np.ndarray:
    v, run = _input_transform(geo, x, machine, engine)
    stats.phases["input_transform"].append(run)
    m = _gemms("forward", v, u, machine, stats, engine)
    y, run = _output_transform(geo, m, bias, machine, engine)
    stats.phases["output_transform"].append(run)
    return y


# ---- performance model -----------------------------------------------------------------------
# The transforms are DMA bound (thesis eq. 5-7): with 64 CPEs issuing, the CG's DMA engine is
# never idle, and a saturated engine spends on every request exactly its engine time
# (docs/timing.md "DMA"): a get 6 cycles per 128-byte transaction (each strided block cut at
# line boundaries), a put 11 per whole line or per 16-byte piece of a partial line plus 35 for
# the acknowledgement. The model adds up the engine time of every request the kernel issues
# (image 0's, times B; the interior tile rows are priced once each and weighted), the job
# fetches and one DMA latency. The 16 GEMMs are swGEMM's model (hostlib/blas/gemm_model.py).

def _bytes(starts, nbytes):
    """First and last byte of blocks of `nbytes` at `starts`."""
    starts = np.asarray(starts, np.int64)
    return starts, starts + nbytes - 1


def _get_cycles(starts, nbytes, config, requests=1) -> int:
    """Engine cycles of `requests` get requests whose blocks start at `starts` (`nbytes`
    each), timed as one request of those blocks (strided if they lie apart) plus the other
    requests' own engine time (docs/timing.md "DMA")."""
    starts, ends = _bytes(starts, nbytes)
    return (gemm_model.get_engine_cycles(starts[None], ends[None], np.ones((1, starts.size), bool),
                                         config)
            + (requests - 1) * config.dma_get_request_cycles)


def _put_cycles(starts, nbytes, config, requests=1) -> int:
    """Engine cycles of `requests` put requests whose blocks start at `starts` (`nbytes`
    each), timed as one request of those blocks plus the other requests' acknowledgements."""
    starts, ends = _bytes(starts, nbytes)
    return (gemm_model.put_engine_cycles(starts[None], ends[None], np.ones((1, starts.size), bool),
                                         config)
            + (requests - 1) * config.dma_put_ack_cycles)


def _xi_requests(plan: TransformPlan, channels, p, p0, mt, c0, ncv, es):
    """The (blocks' starts, block bytes) of the request(s) moving a task's 16 m tile vectors
    of V / M: one request of 16 blocks, or 16 requests of m blocks."""
    xi = np.arange(XI)[:, None]
    if ncv == channels:
        return [(((xi[:, 0] * p + p0) * channels) * es, mt * channels * es)]
    j = np.arange(mt)[None, :]
    starts = ((xi * p + p0 + j) * channels + c0) * es
    return [(row, ncv * es) for row in starts]


def _row_blocks(row_start_pixel, pixels, channels, c0, ncv, es):
    """Blocks of `pixels` pixels' channel blocks from pixel `row_start_pixel`."""
    if ncv == channels:
        return [row_start_pixel * channels * es], pixels * channels * es
    q = row_start_pixel + np.arange(pixels)
    return (q * channels + c0) * es, ncv * es


def _task_cycles(op: str, geo: ConvGeometry, plan: TransformPlan, channels, tr, g, cb, es,
                 config) -> int:
    """Engine cycles of the requests of one OP_INPUT / OP_OUTPUT / OP_DY task of image 0."""
    _, tc, p = _tiles(geo)
    tc0 = g * plan.m
    mt = min(plan.m, tc - tc0)
    c0 = cb * plan.cb
    ncv = min(plan.cb, channels - c0)
    p0 = tr * tc + tc0
    cycles = 0
    xi_cost = _get_cycles if op == "OUTPUT" else _put_cycles       # V, Z put; M got
    for starts, nbytes in _xi_requests(plan, channels, p, p0, mt, c0, ncv, es):
        cycles += xi_cost(starts, nbytes, config)
    if op == "INPUT":
        cs = 2 * tc0 - geo.padding[1]
        lo, hi = max(cs, 0), min(cs + 2 * mt + 2, geo.c_i)
        for r in range(4):
            ir = 2 * tr - geo.padding[0] + r
            if 0 <= ir < geo.r_i and hi > lo:
                cycles += _get_cycles(*_row_blocks(ir * geo.c_i + lo, hi - lo, channels, c0,
                                                   ncv, es), config)
    else:
        if op == "OUTPUT":
            cycles += _get_cycles([c0 * es], ncv * es, config)      # the bias
        rows_cost = _put_cycles if op == "OUTPUT" else _get_cycles  # y put; dy got
        cols = min(2 * mt, geo.c_o - 2 * tc0)
        for r in range(2):
            if 2 * tr + r < geo.r_o:
                cycles += rows_cost(*_row_blocks((2 * tr + r) * geo.c_o + 2 * tc0, cols,
                                                   channels, c0, ncv, es), config)
    return cycles


def _launch_overhead(config) -> int:
    """Every CPE's job fetch, and the first request's latency."""
    job = KERNEL.record("J_", "JOB_BYTES").nbytes
    return (config.num_cpes * -(-job // config.dma_transaction_bytes)
            * config.dma_transaction_cycles + config.dma_latency)


def transform_cycles(op: str, geo: ConvGeometry, es: int, config) -> float:
    """Predicted cycles of an OP_INPUT / OP_OUTPUT / OP_DY launch."""
    channels = geo.n_i if op == "INPUT" else geo.n_o
    plan = transform_plan(geo, op, channels, es, config)
    tr_count, _, _ = _tiles(geo)
    # tile rows 0, 1 and the last two touch the padding or the crop; the others cost alike
    edges = sorted({0, 1, tr_count - 2, tr_count - 1} & set(range(tr_count)))
    interior = [tr for tr in (2,) if tr < tr_count - 2]
    weights = {tr: 1 for tr in edges}
    if interior:
        weights[2] = tr_count - len(edges)
    engine = sum(weight * _task_cycles(op, geo, plan, channels, tr, g, cb, es, config)
                 for tr, weight in weights.items() for g in range(plan.groups)
                 for cb in range(plan.ncb))
    return geo.batch * engine + _launch_overhead(config)


def _filter_task_cycles(op, o0, i0, bo, bi, n_o, n_i, rotate, es, config) -> tuple:
    """Engine cycles of one OP_FILTER (w got, U put) or OP_DW (U got, w put) task's gets and
    puts: the block of filters (o0.., i0..) in w and its 16 slices in U; and the requests of
    its gets and of its puts."""
    rows, cols = min(bo, n_o - o0), min(bi, n_i - i0)
    if cols == n_i:      # contiguous rows of w
        w_side = ([o0 * n_i * 9 * es], rows * 9 * n_i * es)
    else:
        w_side = ((o0 + np.arange(rows)) * n_i * 9 * es + i0 * 9 * es, 9 * cols * es)
    n_k, n_n = (n_o, n_i) if rotate else (n_i, n_o)
    k0, n0, nk, nn = (o0, i0, rows, cols) if rotate else (i0, o0, cols, rows)
    if nn == n_n:        # whole rows of U: one request
        u_side, requests = ((np.arange(XI) * n_k + k0) * n_n * es, nk * n_n * es), 1
    else:
        starts = ((np.arange(XI)[:, None] * n_k + k0 + np.arange(nk)) * n_n + n0) * es
        u_side, requests = (starts.ravel(), nn * es), XI
    if op == "DW":
        return (_get_cycles(*u_side, config, requests=requests),
                _put_cycles(*w_side, config)), (requests, 1)
    return (_get_cycles(*w_side, config), _put_cycles(*u_side, config, requests=requests)), (
        1, requests)


def _filter_time(op, bo, bi, n_o, n_i, rotate, es, config, every_task=True) -> float:
    """Modelled cycles of an OP_FILTER / OP_DW launch with (bo, bi) blocks (every task priced,
    or the first one times the tasks). The CPEs work in rounds of 64 tasks: get, compute,
    put, synchronously. When compute is short the engine never idles (its total time); when
    it is long the round's CPEs run in lockstep: their gets queue behind one another, and so
    do their puts, after the compute: rounds x compute + the longer of (a round's gets, then
    one put) and (one get, then a round's puts). A side of several requests per task is not
    one: the engine takes requests in turn, so they interleave with every other CPE's and
    the round's CPEs all finish that side together, at the end of the round's."""
    origins = [(o0, i0) for o0 in range(0, n_o, bo) for i0 in range(0, n_i, bi)]
    tasks = len(origins)
    priced = [_filter_task_cycles(op, o0, i0, bo, bi, n_o, n_i, rotate, es, config)
              for o0, i0 in (origins if every_task else origins[:1])]
    gets, puts = (sum(c) * (1 if every_task else tasks) for c in zip(*(p[0] for p in priced)))
    get_requests, put_requests = priced[0][1]
    rounds = -(-tasks // config.num_cpes)
    compute = bo * bi * FILTER_CPE_CYCLES[op]
    first_get = gets / (tasks if get_requests == 1 else rounds)
    first_put = puts / (tasks if put_requests == 1 else rounds)
    lockstep = (rounds * (compute + 2 * config.dma_latency)
                + max(gets / rounds + first_put, first_get + puts / rounds))
    return max(gets + puts, lockstep)


def filter_cycles(op: str, n_o: int, n_i: int, rotate: bool, es: int, config) -> float:
    """Predicted cycles of an OP_FILTER / OP_DW launch (``_filter_time``), with the job
    fetches and a latency."""
    bo, bi = filter_blocks(op, n_o, n_i, rotate, es, config)
    return _filter_time(op, bo, bi, n_o, n_i, rotate, es, config) + _launch_overhead(config)


def _inner(geo: ConvGeometry, direction: str) -> ConvGeometry:
    return _data_geometry(geo) if direction == "backward_data" else geo


def _gemm_kind(direction: str) -> str:
    return "filter" if direction == "backward_filter" else "forward"


def predict_phases(geo: ConvGeometry, direction: str, dtype, config) -> dict:
    """Predicted cycles of each phase of the pass (the model; nothing simulated)."""
    es = np.dtype(dtype).itemsize
    inner = _inner(geo, direction)
    _, _, p = _tiles(inner)
    plan = gemm_plan(_gemm_kind(direction), p, inner.n_i, inner.n_o, es, config)
    (_, _), (side, _) = _transforms(inner, direction)
    filter_op = "DW" if direction == "backward_filter" else "FILTER"
    return {"filter_transform": filter_cycles(filter_op, geo.n_o, geo.n_i,
                                              direction == "backward_data", es, config),
            "input_transform": transform_cycles("INPUT", inner, es, config),
            "gemm": XI * gemm_model.predict(plan.problem, plan.blocking, config),
            "output_transform": transform_cycles(side, inner, es, config)}


@functools.lru_cache(maxsize=4096)
def predict(geo: ConvGeometry, direction: str, dtype, config) -> float:
    """Predicted cycles of the pass on one CG (the model; nothing simulated; remembered:
    ``conv.choose`` and the bench ask for the same passes)."""
    return float(sum(predict_phases(geo, direction, dtype, config).values()))


# ---- estimate: a simulated sample, extrapolated ----------------------------------------------
# Every phase is a loop over identical units: blocks of o (filter side), tile rows of images
# (transforms; every image's tile rows alike), CG blocks of P (a GEMM; the 16 GEMMs have one
# shape). estimate() simulates each phase on two sizes u1 < u2 of its unit count, with the full
# pass's plans (blocks, tiles per task, GEMM orientation and blocking) forced, and extrapolates
# linearly to the full count (exact for a linear cost: the fixed part, pipeline fill and
# drain, is the intercept). A phase whose count is at most u2 runs whole. The edge units
# (padding rows, a ragged last block) are in every sample. A transform over several large
# images is linear in the images and in their tile rows: it is sampled on one image of t and
# 2t tile rows and on two images of t rows (``_transform_cycles``). Every sample runs on a
# new machine with random data and is remembered (``_run``): cases whose samples coincide
# (the filter side of every batch and image size, the transforms of one image size at any
# batch) simulate them once.

def _extrapolate(run, full: int, u1: int, u2: int):
    """Cycles at `full` units from run(u) at u1 < u2 (or run(full) when full <= u2)."""
    if full <= u2:
        return float(run(full)), {"simulated": full, "of": full}
    c1, c2 = run(u1), run(u2)
    return (c1 + (c2 - c1) * (full - u1) / (u2 - u1),
            {"simulated": (u1, u2), "of": full, "cycles": (c1, c2)})


@functools.lru_cache(maxsize=None)
def _run(phase: str, args: tuple, dtype, config, engine) -> int:
    """Cycles of one launch of `phase` on random operands, on a new machine of `config`:
    "filter" (dw, rows of o, N_i, rotate, blocks), "transform" (op, geometry, plan) or "gemm"
    (rows of V, N_i, N_o, the GemmPlan: its orientation and blocking, the problem left out).
    Remembered: the cycles depend on these only."""
    rng = np.random.default_rng(0)
    machine = Machine(config)

    def data(*shape):
        return rng.standard_normal(shape, dtype=dtype)

    if phase == "filter":
        dw, rows, n_i, rotate, blocks = args
        if dw:
            return _dw_transform(data(XI, n_i, rows), machine, engine, blocks)[1].cycles
        return _filter_transform(data(rows, n_i, 3, 3), rotate, machine, engine,
                                 blocks)[1].cycles
    if phase == "transform":
        op, g, plan = args
        if op == "INPUT":
            return _input_transform(g, data(g.batch, g.r_i, g.c_i, g.n_i), machine, engine,
                                    plan)[1].cycles
        if op == "DY":
            return _dy_transform(g, data(g.batch, g.r_o, g.c_o, g.n_o), machine, engine,
                                 plan)[1].cycles
        _, _, p = _tiles(g)
        return _output_transform(g, data(XI, p, g.n_o), None, machine, engine, plan)[1].cycles
    rows, n_i, n_o, plan = args
    v = data(rows, n_i)
    u = data(rows, n_o) if plan.kind == "filter" else data(n_i, n_o)
    return _gemm(v, u, plan, machine, engine)[1].cycles


def _transform_cycles(inner: ConvGeometry, plan: TransformPlan, cpes: int, run):
    """Cycles of the OP_INPUT / OP_OUTPUT / OP_DY launch of `inner` from samples ``run(g)``
    (the launch on geometry g with `plan`), and what was simulated. Units: whole images
    when a few of them fill the CPEs, else tile rows; images with many tile rows, when there
    are several, as c(B, T) = c0 + B e + B T s: one image of t and 2t rows gives s, two of t
    rows e + t s (t rows: MIN_ROUNDS rounds of tasks, and the padding rows)."""
    tr, _, _ = _tiles(inner)
    per_row = plan.groups * plan.ncb
    images = -(-cpes // (tr * per_row))
    rows = max(-(-MIN_ROUNDS * cpes // per_row), inner.padding[0], 2)
    if inner.batch > 1 and tr > 2 * rows and 5 * rows < 3 * images * tr:
        one, two = (replace(_rows(inner, rows), batch=b) for b in (1, 2))
        c1, c2, slope = run(one), run(two), (run(replace(_rows(inner, 2 * rows), batch=1))
                                              - run(one)) / rows
        cycles = c1 + (inner.batch - 1) * (c2 - c1) + inner.batch * (tr - rows) * slope
        return cycles, {"unit": "tile row", "simulated": ((1, rows), (1, 2 * rows), (2, rows)),
                        "of": (inner.batch, tr)}
    if inner.batch > 2 * images:
        cycles, info = _extrapolate(lambda n: run(replace(inner, batch=n)), inner.batch,
                                    images, 2 * images)
        return cycles, dict(info, unit="image")
    u1 = max(-(-cpes // (inner.batch * per_row)), inner.padding[0], 2)
    cycles, info = _extrapolate(lambda n: run(_rows(inner, n)), tr, u1, 2 * u1)
    return cycles, dict(info, unit="tile row")


def estimate(geo: ConvGeometry, direction: str, dtype, machine=None, engine="c"):
    """Cycles of the pass extrapolated from simulated samples of each phase (random data);
    details: per phase what was simulated (units, of how many) and its cycles. `machine`
    gives the configuration (the samples run on machines of their own)."""
    config = (machine or Machine()).config
    reason = supports(geo, direction, dtype, config)
    if reason is not None:
        raise HostError(reason)
    dtype = np.dtype(dtype)
    es = dtype.itemsize
    rotate = direction == "backward_data"
    inner = _inner(geo, direction)
    cpes = config.num_cpes

    def sample(phase, *args):
        return _run(phase, args, dtype, config, engine)

    details, total = {}, 0.0
    # filter side: blocks of the dimension it does not span whole (i forward; o backward)
    dw = direction == "backward_filter"
    bo, bi = filter_blocks("DW" if dw else "FILTER", geo.n_o, geo.n_i, rotate, es, config)
    o_blocks = -(-geo.n_o // bo)
    # blocks of o, a multiple of 64 tasks per sample (every CPE busy alike)
    per_o = -(-geo.n_i // bi)
    u1 = -(-cpes // per_o)
    cycles, info = _extrapolate(
        lambda count: sample("filter", dw, min(count * bo, geo.n_o), geo.n_i, rotate, (bo, bi)),
        o_blocks, u1, 2 * u1)
    details["filter_transform"], total = dict(info, unit="o block", cycles=cycles), cycles

    for op, channels in _transforms(inner, direction):
        plan = transform_plan(inner, op, channels, es, config)
        cycles, info = _transform_cycles(inner, plan, cpes,
                                         lambda g, op=op, plan=plan: sample("transform", op,
                                                                            g, plan))
        name = "input_transform" if op == "INPUT" else "output_transform"
        details[name] = dict(info, cycles=cycles)
        total += cycles

    # one GEMM, CG blocks of P (the first blocks of a row of steps cost more: the slope is
    # taken from the 3rd, as swGEMM's samples do); the 16 have one shape
    _, _, p = _tiles(inner)
    plan = gemm_plan(_gemm_kind(direction), p, inner.n_i, inner.n_o, es, config)
    block = plan.p_block
    n_p = -(-p // block)
    tail = p - (n_p - 1) * block
    cycles, info = _extrapolate(
        lambda count: sample("gemm", p if count == n_p else (count - 1) * block + tail,
                             inner.n_i, inner.n_o, replace(plan, problem=None)),
        n_p, *conv_model.SAMPLE_BLOCKS)
    details["gemm"] = dict(info, unit="P block", cycles=XI * cycles)
    total += XI * cycles
    return total, details


def _rows(geo: ConvGeometry, tile_rows: int) -> ConvGeometry:
    """geo with `tile_rows` tile rows per image (R_o = 2 tile_rows; the full geometry when that
    is all of them)."""
    if tile_rows >= -(-geo.r_o // 2):
        return geo
    r_o = 2 * tile_rows
    return replace(geo, r_i=r_o + 2 - 2 * geo.padding[0])
