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
(stride 1, padding 2 - p). Backward filter is not implemented (``supports`` says so).

The module implements the algorithm interface of ``conv`` (NAME, PHASES, LAYOUT, supports,
predict, forward, backward_data, backward_filter, estimate).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...vm import HostError, Machine
from ..blas import gemm
from ..blas import gemm_model
from ..blas.gemm_model import Blocking, Problem
from ..runtime.kernel import Kernel
from .conv_common import ConvGeometry

NAME = "winograd"
PHASES = ("filter_transform", "input_transform", "gemm", "output_transform")
LAYOUT = "NHWC"
KERNEL = Kernel(("dnn/winograd.s",), entry="winograd", ldm_end="winograd_ldm_end")
KERNEL_ARGS = 1
XI = 16                      # alpha^2 tile vectors per tile
FILTER_BLOCK = 16            # o and i per filter-transform task (8 when that leaves CPEs idle)
MIN_ROUNDS = 2               # tasks per CPE the transform planner aims for


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
    """LDM bytes of the in and out buffers (and the bias) of a task of m tiles x cb channels."""
    if op == "INPUT":
        return 4 * (2 * m + 2) * cb * es, XI * m * cb * es, 0
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


def filter_blocks(n_o: int, n_i: int, es: int, config) -> tuple:
    """(BO, BI) of a filter-transform task: FILTER_BLOCK square, halved while it leaves CPEs
    idle or does not fit (25 BO BI elements of LDM)."""
    bo, bi = min(n_o, FILTER_BLOCK), min(n_i, FILTER_BLOCK)
    while True:
        arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
        arena.take(9 * bo * bi * es)
        arena.take(XI * bo * bi * es)
        idle = -(-n_o // bo) * -(-n_i // bi) < config.num_cpes
        if arena.fits and not (idle and max(bo, bi) > 1):
            return bo, bi
        if bo >= bi:
            bo = -(-bo // 2)
        else:
            bi = -(-bi // 2)


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


def _filter_transform(w, rotate: bool, machine, engine):
    """U (16, K, N) of w (N_o, N_i, 3, 3): (K, N) = (N_i, N_o), or (N_o, N_i) with the filter
    rotated by 180 degrees (rotate). Returns (U, Stats)."""
    n_o, n_i = w.shape[:2]
    es, config, mem = w.itemsize, machine.config, machine.mem
    bo, bi = filter_blocks(n_o, n_i, es, config)
    nib = -(-n_i // bi)
    tasks = -(-n_o // bo) * nib
    _check_divisions(tasks, nib)
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    in_buf, out_buf = arena.take(9 * bo * bi * es), arena.take(XI * bo * bi * es)
    shape = (XI, n_o, n_i) if rotate else (XI, n_i, n_o)
    u_addr = mem.alloc(int(np.prod(shape)) * es)
    stats = _launch(machine, engine, op=KERNEL.symbol("OP_FILTER"), es=es, tasks=tasks,
                    src=mem.put(np.ascontiguousarray(w)), dst=u_addr, ncb=nib,
                    ncb_inv=_reciprocal(nib), m=bo, cb=bi, p=n_o, ch=n_i, rot=int(rotate),
                    in_buf=in_buf, out_buf=out_buf)
    return mem.get(u_addr, shape, w.dtype), stats


def _geometry_fields(geo: ConvGeometry, plan: TransformPlan, channels: int, es: int):
    tr, tc, p = _tiles(geo)
    tasks = plan.tasks(geo)
    _check_divisions(tasks, plan.ncb, plan.groups, tr)
    return dict(es=es, vec=int(plan.vec), tasks=tasks, ncb=plan.ncb,
                ncb_inv=_reciprocal(plan.ncb), groups=plan.groups,
                groups_inv=_reciprocal(plan.groups), tr=tr, tr_inv=_reciprocal(tr), ch=channels,
                cb=plan.cb, m=plan.m, tc=tc, p=p)


def _buffers(op: str, plan: TransformPlan, es: int, config) -> dict:
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    in_bytes, out_bytes, bias_bytes = _transform_bytes(op, plan.m, plan.cb, es)
    return dict(in_buf=arena.take(in_bytes), out_buf=arena.take(out_bytes),
                bias_buf=arena.take(bias_bytes))


def _input_transform(geo: ConvGeometry, x, machine, engine):
    """V (16, P, N_i) of x (B, R_i, C_i, N_i) with geo's padding. Returns (V, Stats)."""
    es, config, mem = x.itemsize, machine.config, machine.mem
    plan = transform_plan(geo, "INPUT", geo.n_i, es, config)
    _, _, p = _tiles(geo)
    v_addr = mem.alloc(XI * p * geo.n_i * es)
    stats = _launch(machine, engine, op=KERNEL.symbol("OP_INPUT"), src=mem.put(x), dst=v_addr,
                    ri=geo.r_i, ci=geo.c_i, pr=geo.padding[0], pc=geo.padding[1],
                    **_geometry_fields(geo, plan, geo.n_i, es),
                    **_buffers("INPUT", plan, es, config))
    return mem.get(v_addr, (XI, p, geo.n_i), x.dtype), stats


def _output_transform(geo: ConvGeometry, m, bias, machine, engine):
    """y (B, R_o, C_o, N_o) of M (16, P, N_o) (+ bias). Returns (y, Stats)."""
    es, config, mem = m.itemsize, machine.config, machine.mem
    plan = transform_plan(geo, "OUTPUT", geo.n_o, es, config)
    bias = np.zeros(geo.n_o, m.dtype) if bias is None else bias
    y_shape = (geo.batch, geo.r_o, geo.c_o, geo.n_o)
    y_addr = mem.alloc(int(np.prod(y_shape)) * es)
    stats = _launch(machine, engine, op=KERNEL.symbol("OP_OUTPUT"), src=mem.put(m),
                    dst=y_addr, bias=mem.put(bias), ri=geo.r_o, ci=geo.c_o,
                    **_geometry_fields(geo, plan, geo.n_o, es),
                    **_buffers("OUTPUT", plan, es, config))
    return mem.get(y_addr, y_shape, m.dtype), stats


# ---- the 16 GEMMs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class GemmPlan:
    """How swGEMM runs M[xi] = V[xi] (P x K) U[xi] (K x N): computing C^T = U^T V^T (swapped)
    or C, with the blocking the model picks; as ``gemm()`` decides without C."""
    swapped: bool
    blocking: Blocking
    problem: Problem

    @property
    def p_block(self) -> int:
        """Rows of V per CG block (P is the kernel's M, or its N when swapped)."""
        return 8 * (self.blocking.nb if self.swapped else self.blocking.mb)


def _gemm_problem(p: int, k: int, n: int, es: int, swapped: bool) -> Problem:
    if swapped:      # A' = U (K x N, natural), B' = V^T (V stored P x K: transposed)
        return Problem(m=n, n=p, k=k, itemsize=es, b_transposed=True, lda=n, ldb=k)
    return Problem(m=p, n=n, k=k, itemsize=es, a_transposed=True, lda=k, ldb=n)


def gemm_plan(p: int, k: int, n: int, es: int, config) -> GemmPlan:
    options = []
    for swapped in (False, True):
        problem = _gemm_problem(p, k, n, es, swapped)
        blocking = gemm_model.choose(problem, config)
        options.append((gemm_model.predict(problem, blocking, config), swapped, blocking,
                        problem))
    _, swapped, blocking, problem = min(options, key=lambda o: o[0])
    return GemmPlan(swapped, blocking, problem)


def _gemm(v, u, plan: GemmPlan, machine, engine):
    """M[xi] = V[xi] U[xi] through swGEMM with the plan's orientation and blocking (a zero C
    in that orientation, beta = 0, fixes it). Returns (M, Stats)."""
    p, n = v.shape[0], u.shape[1]
    c = np.zeros((n, p), v.dtype).T if plan.swapped else np.zeros((p, n), v.dtype)
    return gemm(v, u, C=c, beta=0.0, blocking=plan.blocking, machine=machine, engine=engine)


def _gemms(v, u, machine, stats, engine):
    plan = gemm_plan(v.shape[1], u.shape[1], u.shape[2], v.itemsize, machine.config)
    m = np.empty((XI, v.shape[1], u.shape[2]), v.dtype)
    for xi in range(XI):
        m[xi], run = _gemm(v[xi], u[xi], plan, machine, engine)
        stats.phases["gemm"].append(run)
    return m


# ---- the interface ---------------------------------------------------------------------------

def _data_geometry(geo: ConvGeometry) -> ConvGeometry:
    """Backward data as a forward convolution: dy (N_o channels, R_o x C_o) with the rotated,
    transposed filter and padding 2 - p gives dx (N_i channels, R_i x C_i)."""
    return ConvGeometry(geo.batch, geo.n_o, geo.n_i, geo.r_o, geo.c_o, 3, 3, (1, 1),
                        (2 - geo.padding[0], 2 - geo.padding[1]))


def supports(geo: ConvGeometry, direction: str, dtype, config) -> str | None:
    if (geo.k_r, geo.k_c) != (3, 3) or geo.stride != (1, 1):
        return "Winograd F(2x2, 3x3) needs K = 3, stride 1"
    if direction == "backward_filter":
        return "Winograd backward-filter is not implemented"
    if direction == "backward_data" and max(geo.padding) > 2:
        return "Winograd backward-data needs padding <= 2 (it pads dy by 2 - p)"
    es = np.dtype(dtype).itemsize
    inner = _data_geometry(geo) if direction == "backward_data" else geo
    try:
        for op, channels in (("INPUT", inner.n_i), ("OUTPUT", inner.n_o)):
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
    raise HostError(supports(geo, "backward_filter", x.dtype, machine.config))


def _winograd(geo: ConvGeometry, x, u, bias, machine, stats, engine) -> np.ndarray:
    v, run = _input_transform(geo, x, machine, engine)
    stats.phases["input_transform"].append(run)
    m = _gemms(v, u, machine, stats, engine)
    y, run = _output_transform(geo, m, bias, machine, engine)
    stats.phases["output_transform"].append(run)
    return y
