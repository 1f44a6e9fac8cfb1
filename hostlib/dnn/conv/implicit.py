"""Implicit GEMM convolution (thesis §5.1.2, Algorithms 3 and 4; docs/dnn.md "Implicit
convolution"): ``kernels/dnn/conv_implicit.s`` runs the whole pass as LDM GEMM primitive calls
whose operands it DMAs straight out of the activation (RCNB: batch innermost) and the weights.

The host copies arrays into simulated memory, chooses the blocking with the model below and
writes one job record; the weights are rearranged on the VM (``dnn.transform``, phase
"weights") into one N_i x N_o matrix per tap. Passes:
    forward          y = conv(x, w) + bias
    backward-data    dx = conv(dy padded by K - 1 - p, w rotated by 180 degrees, its channels
                     swapped) (thesis eq. 5-2): the same kernel, the taps walked backwards (a
                     negative tap stride), the weights transformed as (K_r, K_c, N_o, N_i);
                     stride s > 1 (a power of 2) convolves dy dilated by s, which the kernel
                     never builds: it fetches the pixels at multiples of s, skips the kernel
                     rows that meet a zero row and zero-fills the columns' pieces
    backward-filter  dw = the same kernel on a swapped convolution (stride 1): x as the
                     input with batch and channels trading roles, dy as its weights (one
                     B x N_o matrix per output pixel), the output the K_r x K_c taps; so the
                     batch (and the output pixels) are the primitive's reduction K and N_i
                     its vector M. x and dy are rearranged on the VM (phase "operands"),
                     the result back into (N_o, N_i, K_r, K_c) (phase "weights")

The model (``predict``): per step of the kernel, the primitive's fitted time (eq. 4-2,
``gemm_model.primitive_cycles``) plus packing, against the DMA engine's time for the 64 CPEs'
pieces (eq. 3-1/3-2: 128-byte transactions, the waste of each row counted); a double-buffered
step costs the larger of the two (thesis eq. 5-5/5-6 are this ratio for full blocks), plus the
per-tile write-out and the weight loads. ``choose`` takes the cheapest feasible blocking,
which decides the variant: one output column per tile (CB = 1, Algorithm 3, batch-size-aware)
or several (CB > 1, Algorithm 4, image-size-aware).
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import NamedTuple

import numpy as np

from ....vm import HostError, Machine
from ...blas import gemm_model
from ...blas.primitive import MESH     # the primitive's mesh side (gemm_prim.inc)
from ...runtime.kernel import Kernel
from . import model as conv_model
from .common import ConvGeometry
from ..layout_transform import transform

NAME = "implicit"
PHASES = ("weights", "operands", "conv")
LAYOUT = "RCNB"

KERNEL = Kernel(("gemm/gemm_prim.s", "dnn/conv_implicit.s"), entry="conv_implicit",
                ldm_end="conv_implicit_ldm_end", stack="conv_implicit_stack")
KERNEL_ARGS = 1
MAX_DMAS_PER_STEP = 3         # the CPE's DMA channel depth: more would stall the prefetch
SAMPLE_ROW_TILES = 4          # estimate(): tile rows up to this long are sampled whole
FILTER_SAMPLE_COLS = 8        # estimate() of backward-filter: dy columns of its samples


@dataclasses.dataclass(frozen=True)
class PassGeometry(ConvGeometry):
    """The convolution the kernel runs, with an input dilation (rows, columns; powers of 2):
    R_i x C_i is then the size of x with dilation - 1 zeros between its pixels (the kernel
    fetches only the pixels at multiples of it)."""
    dilation: tuple = (1, 1)

    @property
    def stored_input(self) -> tuple:
        """Rows and columns of x in memory."""
        return tuple((n - 1) // d + 1 for n, d in zip((self.r_i, self.c_i), self.dilation))


def _dilation(geo: ConvGeometry) -> tuple:
    return getattr(geo, "dilation", (1, 1))


class Blocking(NamedTuple):
    """Per CPE: MB images of one output column (M), NB output channels, KI input channels of
    each of G taps per step (K = G KI); per tile BB images x CB columns (8 MB = BB CB);
    resident: the weights of an N_o block stay in LDM."""
    mb: int
    nb: int
    ki: int
    g: int
    bb: int
    cb: int
    resident: bool

    @property
    def kb(self) -> int:
        return self.g * self.ki


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def counts(geo: ConvGeometry, blk: Blocking) -> dict:
    """Block counts along N_o, the batch, the output columns, N_i and the tap groups."""
    return dict(nnb=_cdiv(geo.n_o, MESH * blk.nb), nbb=_cdiv(geo.batch, blk.bb),
                ncb=_cdiv(geo.c_o, blk.cb), nkb=_cdiv(geo.n_i, MESH * blk.ki),
                nkg=geo.k_c // blk.g)


def kernel_rows(geo: ConvGeometry) -> np.ndarray:
    """For every output row, the kernel rows whose input row is inside the image and a
    multiple of the row dilation (the others are padding or dilation rows: the kernel skips
    them)."""
    d = _dilation(geo)[0]
    top = np.arange(geo.r_o) * geo.stride[0] - geo.padding[0]
    lo = np.maximum(0, -top)
    lo = lo + (-(top + lo)) % d
    hi = np.minimum(geo.k_r, geo.r_i - top)
    return np.maximum(-(-(hi - lo) // d), 0)


def ldm_layout(geo: ConvGeometry, es: int, blk: Blocking, config):
    """LDM addresses of the kernel's buffers, or None if they do not fit beside its stack."""
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    take = arena.take
    c = counts(geo, blk)
    x_block, w_block = blk.kb * blk.mb, blk.kb * blk.nb
    layout = dict(a_raw0=take(x_block * es), a_raw1=take(x_block * es),
                  a_pack=take(x_block * 8), w_raw0=take(w_block * es),
                  w_raw1=0 if blk.resident else take(w_block * es),
                  w_pack=take(w_block * 8 * (geo.k_r * c["nkg"] * c["nkb"] if blk.resident
                                              else 1)),
                  c=take(blk.nb * blk.mb * 8), c_out=take(blk.nb * blk.mb * es),
                  bias_ldm=take(blk.nb * 8), bias_raw=take(blk.nb * es))
    return layout if arena.fits else None


def _grid(values, top):
    return sorted({min(v, top) for v in values})


@functools.lru_cache(maxsize=256)
def candidates(geo: ConvGeometry, es: int, config) -> tuple:
    """Every blocking of the grids that is legal (the primitive's nm shape rules: MB % 16, NB
    % 4; at most MAX_DMAS_PER_STEP DMAs a step; G divides K_c) and fits in LDM (remembered:
    ``supports``, ``predict`` and ``estimate`` all ask)."""
    out = []
    top_nb = _cdiv(_cdiv(geo.n_o, MESH), 4) * 4
    top_ki = _cdiv(geo.n_i, MESH)
    top_mb = _cdiv(max(geo.batch, 16), 16) * 16
    for mb, per_col, nb, ki, g, resident in itertools.product(
            _grid((16, 32, 48, 64, 96, 128), top_mb), (1, 2, 4, 8),
            _grid((4, 8, 12, 16, 24, 32, 48, 64), top_nb),
            _grid((1, 2, 4, 8, 12, 16, 24, 32, 48, 64), top_ki), (1, 2, 3, 5, 7), (False, True)):
        if geo.k_c % g or g * (1 if resident else 2) > MAX_DMAS_PER_STEP:
            continue
        bb = mb * per_col
        if per_col > 1 and bb > top_mb:
            continue
        blk = Blocking(mb, nb, ki, g, bb, MESH // per_col, resident)
        if ldm_layout(geo, es, blk, config) is not None:
            out.append(blk)
    return tuple(out)


# ---- the model -----------------------------------------------------------------------------
# CPE cycles of the kernel's work beside the primitive, measured on the VM with rtc around the
# kernel's parts (docs/dnn.md "Implicit convolution"): a step's bookkeeping (advance, issuing,
# waiting, the pack calls), packing an f32 element (widening; a full f64 block is used in
# place), and writing out a tile per element of C (bias, rounding, C zeroing).
STEP_CYCLES = 450.0
PACK_CYCLES = {4: 0.95, 8: 0.0}
FINISH_CYCLES = 4.2
# The 64 CPEs' puts of a tile leave together and hold the engine's FIFO: the prefetches behind
# them (and the piece deferred past the channel depth) wait, so a compute-bound tile still
# loses about this fraction of the put's engine time (fitted on 10 blockings, 2026-11-23).
PUT_EXPOSED = 0.7


def _step_dma(geo: ConvGeometry, es: int, blk: Blocking, config) -> tuple:
    """Engine cycles of one interior step's gets (X, and W when streamed) and of one tile's
    put, summed over the 64 CPEs (the first block of every dimension as the typical one):
    eq. 3-1/3-2 with the waste of every row, puts as the engine times them."""
    i, j = (a[:, None] for a in np.divmod(np.arange(MESH * MESH), MESH))

    def rows(first, count, valid, pitch, offset, length):
        """Byte ranges of `valid` rows (of `count`) per CPE: row r starts at (first + r)
        pitch + offset; rows of CPEs with no valid row or no length are masked out."""
        r = np.arange(max(count, 1))[None, :]
        starts = (first + r) * pitch + offset
        mask = (r < valid) & (length > 0)
        return starts, starts + np.maximum(length, 1) - 1, mask

    b0 = (i * blk.mb) % blk.bb
    bv = np.clip(geo.batch - b0, 0, blk.mb)
    kv_x = np.clip(geo.n_i - j * blk.ki, 0, blk.ki)
    # X: pixel 7 stands for a typical one (its alignment in memory)
    s, e, m = rows(j * blk.ki, blk.ki, kv_x, geo.batch * es,
                   7 * geo.n_i * geo.batch * es + b0 * es, bv * es)
    # with a column dilation d only every d-th piece is fetched
    x = blk.g / _dilation(geo)[1] * gemm_model.transactions(s, e, m, config)
    nv = np.clip(geo.n_o - j * blk.nb, 0, blk.nb)
    w = 0
    if not blk.resident:
        kv_w = np.clip(geo.n_i - i * blk.ki, 0, blk.ki)
        s, e, m = rows(i * blk.ki, blk.ki, kv_w, geo.n_o * es, j * blk.nb * es, nv * es)
        w = blk.g * gemm_model.transactions(s, e, m, config)
    s, e, m = rows(j * blk.nb, blk.nb, nv, geo.batch * es, b0 * es, bv * es)
    put = gemm_model.put_engine_cycles(s, e, m, config)
    read = config.dma_transaction_cycles
    return x * read, w * read, put


def _compute_step(geo: ConvGeometry, es: int, blk: Blocking) -> float:
    """CPE cycles of one step: the primitive call (eq. 4-2 fit), packing, bookkeeping."""
    prim = gemm_model.primitive_cycles(blk.nb, blk.mb, blk.kb)   # nm: (S, V) = (NB, MB)
    pack = PACK_CYCLES[es] * blk.kb * (blk.mb + (0 if blk.resident else blk.nb))
    return prim + pack + STEP_CYCLES


def step_count(geo: ConvGeometry, blk: Blocking) -> int:
    """Primitive calls the kernel makes (padding rows skipped)."""
    c = counts(geo, blk)
    return c["nnb"] * c["nbb"] * c["ncb"] * int(kernel_rows(geo).sum()) * c["nkg"] * c["nkb"]


def predict_blocking(geo: ConvGeometry, es: int, blk: Blocking, config) -> float:
    """Predicted cycles of the kernel with blocking `blk`."""
    c = counts(geo, blk)
    tiles = c["nnb"] * c["nbb"] * c["ncb"] * geo.r_o
    steps = step_count(geo, blk)
    x_dma, w_dma, put = _step_dma(geo, es, blk, config)
    steps_per_tile = steps / tiles
    # a tile: its steps double-buffered (the larger of compute and the engine's time for the
    # gets and the tile's put), then C written out
    tile = (max(steps_per_tile * _compute_step(geo, es, blk) + PUT_EXPOSED * put,
                steps_per_tile * (x_dma + w_dma) + put)
            + FINISH_CYCLES * blk.nb * blk.mb)
    # exposed: the job record, the first step's gets, the last put; the weight loads of each
    # N_o block
    job = _cdiv(KERNEL.record("J_", "JOB_BYTES").nbytes, config.dma_transaction_bytes)
    exposed = (2 * config.dma_latency + job * MESH * MESH * config.dma_transaction_cycles
               + x_dma + w_dma + put)
    return tiles * tile + exposed + c["nnb"] * nb_load(geo, es, blk, config)


def _tile_fixed(geo: ConvGeometry, es: int, blk: Blocking, config) -> float:
    """The model's cycles of a compute-bound tile that do not grow with its steps: the
    write-out and the exposed part of the put."""
    return FINISH_CYCLES * blk.nb * blk.mb + PUT_EXPOSED * _step_dma(geo, es, blk, config)[2]


def nb_load(geo: ConvGeometry, es: int, blk: Blocking, config) -> float:
    """Cycles of the start of an N_o block: the bias and, when resident, every W block
    fetched and packed one after the other."""
    bias = config.dma_latency + config.dma_transaction_cycles * MESH * MESH
    if not blk.resident:
        return bias
    c = counts(geo, blk)
    per_block = (config.dma_latency + _step_dma(geo, es, blk._replace(resident=False),
                                                config)[1]
                 + (PACK_CYCLES[es] + 0.25) * blk.kb * blk.nb + STEP_CYCLES)
    return bias + geo.k_r * c["nkg"] * c["nkb"] * per_block


def supports(geo: ConvGeometry, direction, dtype, config) -> str | None:
    if geo.padding[0] >= geo.k_r or geo.padding[1] >= geo.k_c:
        return "implicit GEMM needs padding < kernel size"
    if direction == "backward_filter" and geo.stride != (1, 1):
        return "implicit GEMM backward-filter needs stride 1"
    if direction == "backward_data" and any(s & (s - 1) for s in geo.stride):
        return "implicit GEMM backward-data needs a stride that is a power of 2"
    if direction == "backward_filter" and (geo.padding[0] >= geo.r_o
                                           or geo.padding[1] >= geo.c_o):
        return "implicit GEMM backward-filter needs padding < output size"
    pass_geo = pass_geometry(geo, direction)
    if kernel_rows(pass_geo).min() == 0:
        return ("implicit GEMM backward-data of stride > 1 needs a dy row for every dx row "
                "(K_r >= s_r and (R_i + 2 p_r - K_r) mod s_r <= p_r)")
    if not candidates(pass_geo, np.dtype(dtype).itemsize, config):
        return "no implicit GEMM blocking fits in LDM"
    return None


@functools.lru_cache(maxsize=256)
def _choose(geo: ConvGeometry, es: int, config) -> tuple:
    options = candidates(geo, es, config)
    if not options:
        raise HostError(f"implicit convolution: no blocking fits in LDM for {geo}")
    predictions = [predict_blocking(geo, es, b, config) for b in options]
    best = int(np.argmin(predictions))
    return options[best], predictions[best]


def choose(geo: ConvGeometry, es: int, config) -> Blocking:
    """The feasible blocking with the smallest predicted time."""
    return _choose(geo, es, config)[0]


def pass_geometry(geo: ConvGeometry, direction) -> ConvGeometry:
    """The forward convolution the kernel runs for a pass (stride 1 for the backward ones):
    backward-data convolves dy padded by K - 1 - p; backward-filter convolves x (N_i images of
    B channels) with dy (a R_o x C_o kernel, B -> N_o channels) into a K_r x K_c output."""
    if direction == "backward_data":    # dy dilated by the stride, the remainder rows added
        size = [(n - 1) * s + 1 + (m + 2 * p - k) % s for n, m, s, p, k in zip(
            (geo.r_o, geo.c_o), (geo.r_i, geo.c_i), geo.stride, geo.padding, (geo.k_r, geo.k_c))]
        return PassGeometry(geo.batch, geo.n_o, geo.n_i, *size, geo.k_r, geo.k_c, (1, 1),
                            (geo.k_r - 1 - geo.padding[0], geo.k_c - 1 - geo.padding[1]),
                            geo.stride)
    if direction == "backward_filter":
        return ConvGeometry(geo.n_i, geo.batch, geo.n_o, geo.r_i, geo.c_i, geo.r_o, geo.c_o,
                            (1, 1), geo.padding)
    return geo


def rearrangements(geo: ConvGeometry, direction) -> list:
    """The pass's ``dnn.transform`` launches beside the kernel, as (phase, shape, source
    layout, target layout): the weights into one matrix per tap (forward, backward-data);
    backward-filter's x and dy with the batch before the channels and its result back to
    (N_o, N_i, K_r, K_c)."""
    if direction == "forward":
        return [("weights", geo.w_shape, "NCHW", "RCNB")]
    if direction == "backward_data":
        return [("weights", geo.w_shape, "CNHW", "RCNB")]
    return [("operands", (geo.r_i * geo.c_i, geo.n_i, geo.batch, 1), "NCHW", "NHWC"),
            ("operands", (geo.r_o * geo.c_o, geo.n_o, geo.batch, 1), "NCHW", "NHWC"),
            ("weights", (geo.k_r, geo.k_c, geo.n_o, geo.n_i), "RCNB", "CNHW")]


def predict(geo: ConvGeometry, direction, dtype, config) -> float:
    """Predicted cycles of the pass on one CG: the kernel (the chosen blocking's model) and
    its rearrangements (``conv_model.transform_cycles``) -- the work ``estimate`` counts."""
    es = np.dtype(dtype).itemsize
    moves = sum(conv_model.transform_cycles(shape, src, dst, es, config)
                for _, shape, src, dst in rearrangements(geo, direction))
    return _choose(pass_geometry(geo, direction), es, config)[1] + moves


# ---- running the kernel --------------------------------------------------------------------

def stored_columns(geo: ConvGeometry) -> int:
    return geo.stored_input[1] if isinstance(geo, PassGeometry) else geo.c_i


def job_words(geo: ConvGeometry, es: int, blk: Blocking, layout: dict, addresses: dict,
              wtap: int, sample=None):
    """The kernel's int64 job record (addresses x, w, y, bias; tap stride `wtap` bytes)."""
    c = counts(geo, blk)
    per_col = MESH // blk.cb
    rows = np.arange(MESH)
    start, tiles = sample or ((0, 0, 0, 0), c["nnb"] * c["nbb"] * geo.r_o * c["ncb"])
    record = KERNEL.record("J_", "JOB_BYTES")
    words = record.new(
        es=es, wtap=wtap, b=geo.batch, ni=geo.n_i, no=geo.n_o, ri=geo.r_i, ci=geo.c_i,
        ro=geo.r_o, co=geo.c_o, kr=geo.k_r, kc=geo.k_c, sr=geo.stride[0], sc=geo.stride[1],
        pr=geo.padding[0], pc=geo.padding[1], mb=blk.mb, nb=blk.nb, ki=blk.ki, g=blk.g,
        kb=blk.kb, bb=blk.bb, cb=blk.cb, resident=int(blk.resident),
        start_nb=start[0], start_bb=start[1], start_ro=start[2], start_cb=start[3],
        tiles=tiles, wrow=int(geo.n_o == MESH * blk.nb), dr=_dilation(geo)[0],
        drsh=_dilation(geo)[0].bit_length() - 1, dcsh=_dilation(geo)[1].bit_length() - 1,
        xc=stored_columns(geo), **c, **addresses, **layout)
    at = record.offset("row_c") // 8
    words[at:at + MESH] = rows // per_col
    at = record.offset("row_b") // 8
    words[at:at + MESH] = (rows % per_col) * blk.mb
    return words


def run_kernel(geo: ConvGeometry, x, wt, bias, machine, engine, *, reverse=False,
               blocking=None, sample=None):
    """Run conv_implicit.s: x (R_i, C_i, N_i, B), wt (T, N_i, N_o) (walked from the last tap
    when `reverse`), bias (N_o,) or None. Returns (y (R_o, C_o, N_o, B), Stats); with `sample`
    = ((nb, bb, r_o, cb), tiles) only those tiles run (y is then partial)."""
    config = machine.config
    es = x.itemsize
    blk = blocking or choose(geo, es, config)
    layout = ldm_layout(geo, es, blk, config)
    if layout is None:
        raise HostError(f"implicit convolution: blocking {blk} does not fit in LDM")
    mem = machine.mem
    taps = geo.k_r * geo.k_c
    tap_bytes = geo.n_i * geo.n_o * es
    w_addr = mem.put(np.ascontiguousarray(wt))
    addresses = dict(x=mem.put(np.ascontiguousarray(x)),
                     w=w_addr + (taps - 1) * tap_bytes if reverse else w_addr,
                     y=mem.alloc(geo.r_o * geo.c_o * geo.n_o * geo.batch * es),
                     bias=mem.put(np.zeros(geo.n_o, x.dtype) if bias is None
                                  else np.ascontiguousarray(bias, x.dtype)))
    job = job_words(geo, es, blk, layout, addresses, -tap_bytes if reverse else tap_bytes,
                    sample)
    stats = KERNEL.launch(machine, [mem.put(job)], flops=geo.flops, engine=engine,
                          details=dict(blocking=blk, predicted_cycles=predict_blocking(
                              geo, es, blk, config),
                              variant="batch" if blk.cb == 1 else "image"))
    y = mem.get(addresses["y"], (geo.r_o, geo.c_o, geo.n_o, geo.batch), x.dtype)
    return y, stats


def _weights(w, layout, machine, stats, engine):
    """w (N_o, N_i, K_r, K_c) rearranged on the VM into one matrix per tap: "NCHW" -> RCNB
    gives (K_r, K_c, N_i, N_o); read as "CNHW" (channels swapped) it gives (K_r, K_c, N_o,
    N_i)."""
    wt, run = transform(w, layout, "RCNB", machine=machine, engine=engine)
    stats.phases["weights"].append(run)
    return wt


def _check(geo: ConvGeometry, direction, dtype, config) -> None:
    reason = supports(geo, direction, dtype, config)
    if reason:
        raise HostError(reason)


def forward(geo: ConvGeometry, x, w, bias, machine, stats, engine) -> np.ndarray:
    _check(geo, "forward", x.dtype, machine.config)
    wt = _weights(w, "NCHW", machine, stats, engine)
    y, run = run_kernel(geo, x, wt, bias, machine, engine)
    stats.phases["conv"].append(run)
    return y


def backward_data(geo: ConvGeometry, dy, w, machine, stats, engine) -> np.ndarray:
    _check(geo, "backward_data", dy.dtype, machine.config)
    wt = _weights(w, "CNHW", machine, stats, engine)
    dx, run = run_kernel(pass_geometry(geo, "backward_data"), dy, wt, None, machine, engine,
                         reverse=True)
    stats.phases["conv"].append(run)
    return dx


def batch_inside(a, machine, stats, engine):
    """a (R, C, N, B) rearranged on the VM into (R, C, B, N): read as NCHW (R C, N, B, 1) its
    NHWC is (R C, B, 1, N)."""
    r, c, n, b = a.shape
    out, run = transform(a.reshape(r * c, n, b, 1), "NCHW", "NHWC", machine=machine,
                         engine=engine)
    stats.phases["operands"].append(run)
    return out.reshape(r, c, b, n)


def backward_filter(geo: ConvGeometry, x, dy, machine, stats, engine) -> np.ndarray:
    _check(geo, "backward_filter", x.dtype, machine.config)
    swapped = pass_geometry(geo, "backward_filter")
    x_t = batch_inside(x, machine, stats, engine)            # (R_i, C_i, B, N_i)
    dy_t = batch_inside(dy, machine, stats, engine)          # (R_o, C_o, B, N_o): the taps
    dw_t, run = run_kernel(swapped, x_t, dy_t.reshape(geo.r_o * geo.c_o, geo.batch, geo.n_o),
                           None, machine, engine)             # (K_r, K_c, N_o, N_i)
    stats.phases["conv"].append(run)
    # (H, W, C, N) = (K_r, K_c, N_o, N_i) as CNHW: (N_o, N_i, K_r, K_c)
    dw, run = transform(dw_t, "RCNB", "CNHW", machine=machine, engine=engine)
    stats.phases["weights"].append(run)
    return dw


# ---- estimate: a sample of tiles, extrapolated ---------------------------------------------

def _sample_geometry(geo: ConvGeometry):
    """A geometry with the same tiles and as few output rows as give two consecutive interior
    rows (every kernel row inside the image), and the first of them; or (geo, None) when geo
    has no interior row."""
    first = _cdiv(geo.padding[0], geo.stride[0])
    top = np.arange(geo.r_o) * geo.stride[0] - geo.padding[0]
    if not ((top >= 0) & (top + geo.k_r <= geo.r_i))[first:first + 2].any():
        return geo, None
    r_o = min(geo.r_o, 2 * first + 2 * _dilation(geo)[0])
    r_i = min(geo.r_i, (r_o - 1) * geo.stride[0] + geo.k_r - 2 * geo.padding[0])
    return dataclasses.replace(geo, r_i=r_i), first


def _narrowed(geo: ConvGeometry, es: int, blk: Blocking, config) -> ConvGeometry:
    """geo with only SAMPLE_ROW_TILES + 1 column blocks (the last as narrow as geo's last):
    the tiles a row sample runs (1 and 2, the last two) then cost what they cost in geo --
    unless a column's address offset within a DMA line could change (an activation pixel
    not a whole number of lines), or the input is dilated: then geo."""
    pixels = (geo.n_i * geo.batch * es, geo.n_o * geo.batch * es)     # bytes of x's, y's
    blocks = counts(geo, blk)["ncb"]
    keep = SAMPLE_ROW_TILES + 1
    if (isinstance(geo, PassGeometry) or blocks <= keep
            or any(n % config.dma_transaction_bytes for n in pixels)):
        return geo
    return dataclasses.replace(geo, c_i=geo.c_i - (blocks - keep) * blk.cb * geo.stride[1])


@functools.lru_cache(maxsize=None)
def _sample_run(geo: ConvGeometry, blk: Blocking, sample, dtype, config, engine) -> int:
    """Cycles of the kernel on `geo` (the tiles of `sample`, or all) with blocking `blk`, on
    a new machine with random data: the cycles depend on neither, so a run is remembered and
    cases whose samples have the same geometry share it."""
    rng = np.random.default_rng(0)
    stored = geo.stored_input if isinstance(geo, PassGeometry) else (geo.r_i, geo.c_i)
    x = rng.standard_normal(stored + (geo.n_i, geo.batch), dtype=dtype)
    wt = rng.standard_normal((geo.k_r * geo.k_c, geo.n_i, geo.n_o), dtype=dtype)
    return run_kernel(geo, x, wt, None, Machine(config), engine, blocking=blk,
                      sample=sample)[1].cycles


@functools.lru_cache(maxsize=None)
def _rearrangement_cycles(shape, src, dst, dtype, config, engine) -> int:
    """Cycles of one ``dnn.transform`` of `shape` on a new machine (random data; remembered:
    its cycles depend on the shape only)."""
    x = np.random.default_rng(0).standard_normal(shape, dtype=dtype)
    return transform(x, src, dst, machine=Machine(config), engine=engine)[1].cycles


def _rearranged(geo: ConvGeometry, direction, dtype, config, engine) -> dict:
    """Simulated cycles of the pass's rearrangements, per phase."""
    phases = {}
    for phase, shape, src, dst in rearrangements(geo, direction):
        phases[phase] = phases.get(phase, 0) + _rearrangement_cycles(shape, src, dst, dtype,
                                                                     config, engine)
    return phases


def estimate(geo: ConvGeometry, direction, dtype, machine, engine="c", *, blocking=None):
    """Cycles of the pass extrapolated from simulating a sample (random data, the model's
    blocking). A tile row (the column blocks of one output row, batch block and N_o block) is
    the unit: the sample runs the tiles of one interior output row, then of two; the
    difference is an interior row's cycles, scaled by steps for the border rows (padding rows
    are skipped) and counted for every row of every batch and N_o block, plus the first run
    (start-up included) and the other N_o blocks' weight loads (by the model). Rows of more
    than SAMPLE_ROW_TILES tiles are sampled by an interior tile (and the last, narrower one
    if there is one) on a geometry cut to SAMPLE_ROW_TILES + 1 column blocks (``_narrowed``):
    the edge columns' missing pieces count as interior. Layers of at most 2 tiles run whole.
    The rearrangements (``rearrangements``: small transforms) run whole and are added
    (details: "weights", "operands"). `machine` gives the configuration (the samples run on
    machines of their own); `blocking` overrides the model's choice."""
    config = machine.config
    dtype = np.dtype(dtype)
    _check(geo, direction, dtype, config)
    moved = _rearranged(geo, direction, dtype, config, engine)
    extra = float(sum(moved.values()))
    if direction == "backward_filter":
        cycles, details = _estimate_filter(geo, dtype, config, engine, blocking)
        return cycles + extra, dict(details, **moved)
    geo = pass_geometry(geo, direction)
    es = dtype.itemsize
    blk = blocking or choose(geo, es, config)
    c = counts(geo, blk)
    rows = kernel_rows(geo)
    sample_geo, row = _sample_geometry(geo)
    if row is None or c["nnb"] * c["nbb"] * c["ncb"] * geo.r_o <= 2:
        cycles = _sample_run(geo, blk, None, dtype, config, engine)
        return extra + cycles, dict(moved, blocking=blk, whole=True)

    # with a row dilation d, interior rows repeat every d rows: a period of d rows is the unit
    period = _dilation(geo)[0]
    sample_rows = kernel_rows(sample_geo)
    tiles_sampled = c["ncb"] > SAMPLE_ROW_TILES and period == 1
    if tiles_sampled:
        sample_geo = _narrowed(sample_geo, es, blk, config)

    def cycles_of(cb, tiles):
        """Cycles of `tiles` tiles from column block `cb` of the interior row, and of the
        `tiles` after them (the difference of running 2 `tiles` and `tiles`)."""
        runs = [_sample_run(sample_geo, blk, ((0, 0, row, cb), n), dtype, config, engine)
                for n in (tiles, 2 * tiles)]
        return runs[0], runs[1] - runs[0]

    if not tiles_sampled:
        unit = c["ncb"] * period
        base, row_cycles = cycles_of(0, unit)
        measured = sample_rows[row + period:row + 2 * period].sum()
        base_rows = sample_rows[row:row + period].sum()
    else:               # an interior tile, and the last one if it has fewer columns
        unit = 1
        measured = sample_rows[row]
        base_rows = sample_rows[row] / c["ncb"]
        base, interior = cycles_of(1, 1)
        sample_blocks = counts(sample_geo, blk)["ncb"]
        last = cycles_of(sample_blocks - 2, 1)[1] if geo.c_o % blk.cb else interior
        row_cycles = (c["ncb"] - 1) * interior + last
    # a row's cycles = its tiles' write-outs (by the model) + its steps (the rest, measured)
    fixed = c["ncb"] * _tile_fixed(geo, es, blk, config)
    per_kernel_row = (row_cycles - period * fixed) / measured
    blocks = c["nnb"] * c["nbb"]
    cycles = (base + (blocks * geo.r_o - unit / c["ncb"]) * fixed
              + (blocks * rows.sum() - base_rows) * per_kernel_row
              + (c["nnb"] - 1) * nb_load(geo, es, blk, config))
    return extra + float(cycles), dict(moved, blocking=blk, whole=False, first_cycles=base,
                                       row_cycles=row_cycles)


def _estimate_filter(geo: ConvGeometry, dtype, config, engine, blocking):
    """The kernel's part of estimate() of backward-filter. Its output is only K_r x K_c
    pixels, so its tiles are few and long (every (r_o, c_o) of dy is a tap of the swapped
    convolution): the sample cuts the reduction instead. It runs the swapped kernel (the
    model's blocking for the whole pass) for dy of FILTER_SAMPLE_COLS columns and a, then 2a
    rows (a = p_r + 1, so a padding row is never a whole tap row), and extrapolates linearly
    in the kernel's steps."""
    es = dtype.itemsize
    swapped = pass_geometry(geo, "backward_filter")
    blk = blocking or choose(swapped, es, config)
    rows = geo.padding[0] + 1
    cols = min(geo.c_o, FILTER_SAMPLE_COLS)

    def run(r_o, c_o):
        sample = ConvGeometry(geo.batch, geo.n_i, geo.n_o, r_o + geo.k_r - 1 - 2 * geo.padding[0],
                              c_o + geo.k_c - 1 - 2 * geo.padding[1], geo.k_r, geo.k_c,
                              geo.stride, geo.padding)
        pass_geo = pass_geometry(sample, "backward_filter")
        return (float(_sample_run(pass_geo, blk, None, dtype, config, engine)),
                step_count(pass_geo, blk))

    if geo.r_o <= 2 * rows and cols == geo.c_o:
        return run(geo.r_o, geo.c_o)[0], dict(blocking=blk, whole=True)
    (c1, s1), (c2, s2) = run(rows, cols), run(2 * rows, cols)
    per_step = (c2 - c1) / (s2 - s1)
    cycles = c1 + (step_count(swapped, blk) - s1) * per_step
    return float(cycles), dict(blocking=blk, whole=False, step_cycles=per_step)
