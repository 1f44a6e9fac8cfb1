"""Performance model and blocking choice for swGEMM (thesis §4.2.3).

The time of one run of kernels/gemm/swgemm.s is predicted from
- DMA: thesis eq. 3-1/3-2, T = T_latency + (size + waste) / (PEAK_BW / #CPE), with the waste of
  every strided block counted against the 128-byte transactions it touches;
- compute: thesis eq. 4-2, T_primitive = a K + b K M / (vecM x 4) + c K M N / 4 + d, for one
  primitive call on M = 8 Mb, N = 8 Nb, K = 8 Kb, fitted by least squares against VM
  measurements (``fit_primitive``; the stored coefficients say when and on how many samples),
  plus the CPE work around it (packing, C scaling, loop control: per-element and per-step
  costs read off the kernel's loops and checked against runs, docs/gemm.md);
- overlap (§3.2.2): the primitive communicates, so nothing overlaps unless double buffered;
  swGEMM double buffers A and B and fetches C ahead, so a step costs max(compute, DMA) and only
  the first fetch and the last write stay exposed.
``choose`` returns the feasible blocking (LDM: double buffers + C + packing buffers + the
stack the kernel declares) with the smallest predicted time. Every function takes the machine's
configuration (LDM size, mesh, DMA rates).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ...errors import ArgumentError
from ...vm.config import VMConfig
from ..runtime import Kernel

KERNEL = Kernel(("gemm/gemm_prim.s", "gemm/swgemm.s"), entry="swgemm",
                ldm_end="swgemm_ldm_end", stack="swgemm_stack")
KERNEL_ARGS = 1               # the job record's address
# Block grids the model searches (per CPE): Mb multiple of 4, Nb of 16 (the primitive's
# register tile, "mn" layout); Kb multiple of 4 (vector packing of transposed operands).
MB_GRID = (4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
NB_GRID = (16, 32, 48, 64, 96, 128)
KB_GRID = (4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


class Blocking(NamedTuple):
    mb: int
    nb: int
    kb: int


@dataclass(frozen=True)
class Problem:
    """One kernel run: C (m x n, row-major) = alpha A B + beta C, A stored K x M (or M x K if
    a_transposed), B stored K x N (or N x K); lda, ldb, ldc: elements per memory row (default:
    as swGEMM places them, ``leading_dims``)."""
    m: int
    n: int
    k: int
    itemsize: int
    a_transposed: bool = False
    b_transposed: bool = False
    has_beta: bool = False
    lda: Optional[int] = None
    ldb: Optional[int] = None
    ldc: Optional[int] = None
    row_major_result: bool = False   # the caller keeps C in memory row-major (gemm_in_memory)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def line_padded(cols: int, itemsize: int, config: VMConfig) -> int:
    """Elements per memory row of a matrix with rows of `cols` elements as swGEMM places it: a
    row longer than a DMA line is padded to whole lines, so that every row starts on a line
    (a CPE's block row then touches the fewest lines, and the puts of C can write whole
    lines: docs/timing.md "DMA", a partial line is written 16 bytes at a time); a shorter row
    stays packed (padding it would multiply the matrix's memory and leave each row a partial
    line)."""
    line, row = config.dma_transaction_bytes, cols * itemsize
    return _ceil_div(row, line) * line // itemsize if row > line else cols


def group_padded(cols: int, block: int, itemsize: int, config: VMConfig) -> int:
    """Elements per memory row of a matrix swGEMM places whose rows are one CG block wide
    (`block` per CPE): ``line_padded``, or the 8 blocks' width when the row is wider than
    half of it, so that its sharers move whole rows (``sharing``; the padding is zeros, at
    most as much as the data)."""
    ld, group = line_padded(cols, itemsize, config), SHARING_MESH * block
    return group if mesh(config) == SHARING_MESH and ld < group < 2 * cols else ld


class Panels(NamedTuple):
    """An operand swGEMM places as column panels: `count` panels of one CG block's columns
    (the memory row's ld), `stride` elements from one panel to the next."""
    count: int
    stride: int


def panels(problem: Problem, config: VMConfig, blocking: Blocking) -> tuple:
    """Per operand (A, B, C), its ``Panels`` or None (docs/gemm.md "Wide rows"): an operand
    swGEMM places whose memory rows are wider than its 8 sharers' blocks (one CG block) is
    stored as panels one CG block wide, each panel's rows contiguous (the last panel's
    columns zero-padded, each panel starting on a line), so that its sharers move a panel's
    rows whole as for a matrix one CG block wide (``sharing``). Not an operand given in
    memory, an empty product (its operands are not moved), C with beta (C_in is read in PE
    mode) or C that the caller keeps in memory row-major."""
    if mesh(config) != SHARING_MESH or problem.k == 0:
        return None, None, None
    es, line = problem.itemsize, config.dma_transaction_bytes
    widths, blocks = _memory_widths(problem, blocking)
    mem_rows = ((problem.m if problem.a_transposed else problem.k),
                (problem.n if problem.b_transposed else problem.k), problem.m)
    placed = (problem.lda is None, problem.ldb is None,
              problem.ldc is None and not problem.has_beta and not problem.row_major_result)
    result = []
    for width, block, rows, ours in zip(widths, blocks, mem_rows, placed):
        group = SHARING_MESH * block
        if not ours or width <= group or block * es >= 1 << 20:
            result.append(None)
            continue
        result.append(Panels(_ceil_div(width, group),
                             _ceil_div(rows * group * es, line) * line // es))
    return tuple(result)


def _memory_widths(problem: Problem, blocking: Optional[Blocking]) -> tuple:
    """Elements per memory row of A, B and C as stored, and the per-CPE block along them."""
    widths = ((problem.k if problem.a_transposed else problem.m),
              (problem.k if problem.b_transposed else problem.n), problem.n)
    if blocking is None:
        return widths, (None,) * 3
    return widths, ((blocking.kb if problem.a_transposed else blocking.mb),
                    (blocking.kb if problem.b_transposed else blocking.nb), blocking.nb)


def leading_dims(problem: Problem, config: VMConfig, blocking: Optional[Blocking] = None
                 ) -> tuple:
    """(lda, ldb, ldc) of the problem: the given ones, else as swGEMM places the matrix:
    ``line_padded``, for `blocking` ``group_padded`` or, in ``panels``, the panel's width."""
    es = problem.itemsize
    widths, blocks = _memory_widths(problem, blocking)
    panelled = (None,) * 3 if blocking is None else panels(problem, config, blocking)
    return tuple(ld if ld is not None else line_padded(cols, es, config) if block is None
                 else SHARING_MESH * block if panel else group_padded(cols, block, es, config)
                 for ld, cols, block, panel in zip((problem.lda, problem.ldb, problem.ldc),
                                                   widths, blocks, panelled))


def c_grain(problem: Problem, blocking: Blocking, config: VMConfig) -> int:
    """The C operand's O_GRAIN: when C's rows and every CPE's column block start on a line,
    each CPE's valid columns are rounded up to whole lines (the columns past N are C's row
    padding: written, never returned), so its puts write only whole lines; else 1."""
    line, es = config.dma_transaction_bytes, problem.itemsize
    if leading_dims(problem, config, blocking)[2] * es % line or blocking.nb * es % line:
        return 1
    return line // es


# DMA modes of the descriptor (MACHINE.md section 6; kernels/include/dma.inc)
DMA_PE, DMA_ROW, DMA_RANK = 0, 2, 4
SHARING_MESH = 8      # the kernel splits a group's rows by eighths (a shift)


def _memory_shape(rows, cols, r, l, transposed):
    """(memory rows, memory columns, per-CPE block along the memory columns) of an operand."""
    return (cols, rows, r) if transposed else (rows, cols, l)


def sharing(problem: Problem, blocking: Blocking, config: VMConfig) -> tuple:
    """The DMA mode of A, B and C (docs/gemm.md "Shared DMA"): DMA_ROW or DMA_RANK when the
    8 CPEs that share an operand's memory rows cover each row exactly (the memory row is 8
    of their blocks wide, one CG block: no padding, zero padding swGEMM placed,
    ``group_padded``, or the column panels of a wider matrix it placed, ``panels``), so that
    they move whole rows together as contiguous requests dealt block by block instead of 8
    strided requests of short blocks; else DMA_PE. C shares only its put (not with beta:
    C_in stays PE mode)."""
    if mesh(config) != SHARING_MESH or problem.k == 0:
        return DMA_PE, DMA_PE, DMA_PE
    es = problem.itemsize
    lds = leading_dims(problem, config, blocking)
    placed = (problem.lda is None, problem.ldb is None, problem.ldc is None)
    operands = ((problem.k, problem.m, blocking.kb, blocking.mb, problem.a_transposed, True),
                (problem.k, problem.n, blocking.kb, blocking.nb, problem.b_transposed, False),
                (problem.m, problem.n, blocking.mb, blocking.nb, False, False))
    modes = []
    for (rows, cols, r, l, transposed, swap), ld, ours in zip(operands, lds, placed):
        _, width, block = _memory_shape(rows, cols, r, l, transposed)
        whole = (ld == SHARING_MESH * block and (width == ld or ours)
                 and block * es < 1 << 20)
        # the sharers vary along the CPE coordinate that picks the memory column block:
        # j (a row of CPEs, ROW mode) or i (a column, RANK mode)
        modes.append(DMA_PE if not whole else
                     DMA_ROW if swap == transposed else DMA_RANK)
    if problem.has_beta:
        modes[2] = DMA_PE
    return tuple(modes)


def mesh(config: VMConfig) -> int:
    """CPEs along each side of the (square) mesh the kernel's 8 x 8 blocks are spread on."""
    if config.mesh_rows != config.mesh_cols:
        raise ArgumentError(f"swGEMM needs a square CPE mesh, the config has "
                         f"{config.mesh_rows} x {config.mesh_cols}")
    return config.mesh_rows


def block_counts(problem: Problem, blocking: Blocking, config: VMConfig) -> tuple:
    """CG blocks along M, N, K (at least one along K, even for an empty product)."""
    side = mesh(config)
    return (_ceil_div(problem.m, side * blocking.mb), _ceil_div(problem.n, side * blocking.nb),
            max(1, _ceil_div(problem.k, side * blocking.kb)))


def needs_packing(problem: Problem, blocking: Blocking, config: VMConfig) -> tuple:
    """Whether A and B ever need the packed buffer: f32, transposed, or partial (or, for an
    empty product, empty) blocks."""
    side = mesh(config)
    k_partial = problem.k % (side * blocking.kb) != 0 or problem.k == 0
    a = (problem.itemsize == 4 or problem.a_transposed or k_partial
         or problem.m % (side * blocking.mb) != 0)
    b = (problem.itemsize == 4 or problem.b_transposed or k_partial
         or problem.n % (side * blocking.nb) != 0)
    return a, b


def ldm_layout(problem: Problem, blocking: Blocking, config: VMConfig) -> Optional[dict]:
    """LDM addresses of the kernel's buffers, or None if they do not fit beside the stack."""
    mb, nb, kb = blocking
    if mb % 4 or nb % 16 or kb < 1 or mb < 4:
        return None
    es = problem.itemsize
    pack_a, pack_b = needs_packing(problem, blocking, config)
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    take = arena.take
    layout = {}
    layout["c_ldm"] = take(mb * nb * 8)
    layout["c_out"] = take(mb * nb * es)
    layout["c_in"] = take(mb * nb * es) if problem.has_beta else 0
    layout["a_raw"] = (take(kb * mb * es), take(kb * mb * es))
    layout["b_raw"] = (take(kb * nb * es), take(kb * nb * es))
    layout["a_pack"] = take(kb * mb * 8) if pack_a else 0
    layout["b_pack"] = take(kb * nb * 8) if pack_b else 0
    return layout if arena.fits else None


def candidates(problem: Problem, config: VMConfig, grids=(MB_GRID, NB_GRID, KB_GRID)) -> list:
    """Every feasible blocking of the (Mb, Nb, Kb) grids, without blocks larger than the
    problem needs."""
    side = mesh(config)
    largest = (_ceil_div(_ceil_div(problem.m, side), 4) * 4,
               _ceil_div(_ceil_div(problem.n, side), 16) * 16,
               _ceil_div(_ceil_div(max(problem.k, 1), side), 4) * 4)
    clipped = [sorted({min(v, top) for v in grid}) for grid, top in zip(grids, largest)]
    return [Blocking(*b) for b in itertools.product(*clipped)
            if ldm_layout(problem, Blocking(*b), config) is not None]


# ---- compute: eq. 4-2 ----------------------------------------------------------------------
# T_primitive (cycles) = a K + b K M / (vecM x 4) + c K M N / 4 + d + e M N / 64 for one call
# on M = 8 Mb, N = 8 Nb, K = 8 Kb, vecM = 16. The last term is ours: gemm_prim.s loads and
# stores every register tile of C once per step (~38 cycles per tile, Mb Nb / 64 tiles per
# step), a cost the thesis' form has no term for; without it the fit's mean error is 21%
# instead of 0.9% (docs/gemm.md).
VEC_M = 16
FIT_SHAPES = tuple((mb, nb, kb) for mb in (4, 8, 16, 32, 64) for nb in (16, 32, 64)
                   for kb in (4, 8, 16, 32, 64))
# fit_primitive() on the FIT_SHAPES that fit in LDM (71 samples), C engine, preset sw26010
# (its 8 x 8 mesh: FIT_MESH), 2026-11-22:
PRIMITIVE_COEFFICIENTS = (-0.354442, 0.352092, 0.0155711, 483.569, 4.36505)
PRIMITIVE_FIT_SAMPLES = 71
PRIMITIVE_FIT_MEAN_ERROR = 0.0089
FIT_MESH = 8


def primitive_features(mb, nb, kb) -> np.ndarray:
    m, n, k = (FIT_MESH * np.asarray(x, float) for x in (mb, nb, kb))
    return np.stack([k, k * m / (VEC_M * 4), k * m * n / 4, np.ones_like(k), m * n / 64],
                    axis=-1)


def primitive_cycles(mb, nb, kb, coefficients=PRIMITIVE_COEFFICIENTS) -> float:
    return float(primitive_features(mb, nb, kb) @ np.asarray(coefficients))


def fit_primitive(shapes=FIT_SHAPES, engine="c"):
    """Least-squares fit of the eq. 4-2 coefficients to the primitive's cycles measured on the
    VM (hostlib/blas/primitive.py) for the `shapes` that fit in LDM. Returns (coefficients, mean
    relative error, number of samples)."""
    from .primitive import fits, sweep
    shapes = [s for s in shapes if fits(*s)]
    rows = sweep(shapes=shapes, engine=engine, check=False).rows
    features = primitive_features(*np.array(shapes).T)
    cycles = np.array([r.cycles for r in rows], float)
    coefficients = np.linalg.lstsq(features, cycles, rcond=None)[0]
    mean_error = float(np.mean(np.abs(features @ coefficients / cycles - 1)))
    return tuple(float(c) for c in coefficients), mean_error, len(shapes)


# CPE cycles per element of the work around the primitive: packing an A or B element (none
# for a full natural f64 block, used in place), zeroing and finishing (alpha C + beta C_in) a
# C element, and the driver's bookkeeping per step (kernels/gemm/swgemm.s).
PACK_CYCLES = {"natural_d": 0.0, "natural_s": 0.75, "transposed": 2.5}
FINISH_CYCLES, ZERO_CYCLES, STEP_CYCLES = 1.5, 0.25, 400.0


# ---- DMA: eq. 3-1 / 3-2, puts as docs/timing.md "DMA" times them ---------------------------
def _operand_rows(rows, cols, r, l, ld_bytes, es, transposed, swap, config: VMConfig):
    """The memory rows the CPEs' DMAs of the first CG block of an operand (rows x cols
    logical, per-CPE block r x l) move: first and last byte addresses (relative) of each CPE's
    strided blocks, and which of them exist (each CPE moves only its valid part)."""
    side = mesh(config)
    i, j = np.divmod(np.arange(side * side), side)
    r0, c0 = ((j, i) if swap else (i, j))
    r0, c0 = r0 * r, c0 * l
    rv, cv = np.clip(rows - r0, 0, r), np.clip(cols - c0, 0, l)
    if transposed:      # memory rows are the logical columns
        r0, c0, rv, cv = c0, r0, cv, rv
    line = np.arange(max(r, l))[None, :]
    valid = (line < rv[:, None]) & (cv[:, None] > 0)
    starts = (r0[:, None] + line) * ld_bytes + (c0 * es)[:, None]
    ends = starts + (cv * es)[:, None] - 1
    return starts, ends, valid


def _shared_rows(rows, cols, r, l, ld_bytes, es, transposed, swap, config: VMConfig):
    """The requests of a shared operand's first CG block (arguments of ``_operand_rows``):
    in each of the 8 sharing groups, each CPE moves its eighth of the group's memory rows,
    whole rows, as one contiguous request (one block each, as ``_operand_rows`` returns
    them)."""
    side = mesh(config)
    mem_rows, _, _ = _memory_shape(rows, cols, r, l, transposed)
    per_group = r if not transposed else l     # memory rows of a CPE's block
    group_first = np.arange(side) * per_group
    valid_rows = np.clip(mem_rows - group_first, 0, per_group)
    share = np.arange(side)
    first = (share[None, :] * valid_rows[:, None]) >> 3
    last = ((share[None, :] + 1) * valid_rows[:, None]) >> 3
    starts = ((group_first[:, None] + first) * ld_bytes).reshape(-1, 1)
    ends = ((group_first[:, None] + last) * ld_bytes - 1).reshape(-1, 1)
    return starts, ends, (last > first).reshape(-1, 1)


def transactions(starts, ends, valid, config: VMConfig) -> int:
    """128-byte transactions of the DMA blocks [starts, ends] (byte addresses, inclusive;
    arrays, those with `valid` false skipped): every block costs the segments it touches
    (eq. 3-2's waste)."""
    segment = config.dma_transaction_bytes
    return int(np.sum((ends // segment - starts // segment + 1) * valid))


def _request_shape(starts, ends, valid):
    """Per request (a row of the arrays, its valid blocks first): whether it has any block,
    whether its blocks lie apart in memory (strided), and the last byte of its last block."""
    starts, ends, valid = np.atleast_2d(starts), np.atleast_2d(ends), np.atleast_2d(valid)
    count = valid.sum(axis=-1)
    gap = np.zeros(len(count), dtype=np.int64)
    if starts.shape[-1] > 1:
        gap = np.where(count > 1, starts[:, 1] - ends[:, 0] - 1, 0)
    last = ends[np.arange(len(count)), np.maximum(count - 1, 0)]
    return count > 0, gap > 0, last


def get_engine_cycles(starts, ends, valid, config: VMConfig) -> int:
    """Engine cycles of gets of the blocks [starts, ends] (arrays as ``put_engine_cycles``)
    as the engine times them (docs/timing.md "DMA"): ``dma_get_request_cycles`` per request and
    ``dma_transaction_cycles`` per line touched, a strided request's blocks each also
    ``dma_block_get_cycles`` but at least ``dma_block_get_min_cycles`` in all."""
    starts, ends, valid = np.atleast_2d(starts), np.atleast_2d(ends), np.atleast_2d(valid)
    requests, strided, last = _request_shape(starts, ends, valid)
    line, read = config.dma_transaction_bytes, config.dma_transaction_cycles
    merged = last // line - starts[:, 0] // line + 1
    contiguous = int(np.sum(merged * (requests & ~strided))) * read
    per_block = np.maximum(config.dma_block_get_cycles
                           + read * (ends // line - starts // line + 1),
                           config.dma_block_get_min_cycles)
    blocks = int(np.sum(per_block * valid * strided[:, None]))
    return contiguous + blocks + int(np.sum(requests)) * config.dma_get_request_cycles


def put_engine_cycles(starts, ends, valid, config: VMConfig) -> int:
    """Engine cycles of puts of the blocks [starts, ends] (arrays (requests, blocks); a
    request is a row with a valid block, its valid blocks first) as the engine times them
    (docs/timing.md "DMA"): a request whose blocks follow each other in memory is one
    contiguous block, a write command per whole line and per write piece of a partial line
    (``row_put_writes``); a request of blocks apart in memory is strided, each block costing
    ``dma_block_put_cycles`` and ``dma_put_write_cycles`` per line pro rata; every request
    waits for the write acknowledgement."""
    starts, ends, valid = np.atleast_2d(starts), np.atleast_2d(ends), np.atleast_2d(valid)
    requests, strided, last = _request_shape(starts, ends, valid)
    merged = row_put_writes(starts[:, 0], last, config)
    contiguous = int(np.sum(merged * (requests & ~strided)))
    blocks = int(np.sum(strided_put_cycles(starts, ends, config) * valid * strided[:, None]))
    return (contiguous * config.dma_put_write_cycles + blocks
            + int(np.sum(requests)) * config.dma_put_ack_cycles)


def strided_put_cycles(starts, ends, config: VMConfig) -> np.ndarray:
    """Engine cycles of the blocks [starts, ends] of strided puts: ``dma_block_put_cycles``,
    and ``dma_put_write_cycles`` per line pro rata for each of the line pieces of a block."""
    line, per_line = config.dma_transaction_bytes, config.dma_put_write_cycles
    first, last = starts // line, ends // line
    head = np.minimum(ends, first * line + line - 1) - starts + 1
    tail = np.where(last > first, ends - last * line + 1, 0)
    middle = np.maximum(last - first - 1, 0)
    return (config.dma_block_put_cycles + -(-per_line * head // line)
            + -(-per_line * tail // line) + middle * per_line)


def row_put_writes(starts, ends, config: VMConfig) -> np.ndarray:
    """Write commands of contiguous put rows from byte `starts` to `ends` (inclusive, arrays):
    one per whole line, one per write piece of a partial line, at most
    ``dma_put_partial_writes`` (docs/timing.md "DMA")."""
    line, piece = config.dma_transaction_bytes, config.dma_put_write_bytes
    first, last = starts // line, ends // line

    def writes(lo, hi):   # write commands of the bytes lo..hi of one line
        whole = (lo % line == 0) & (hi % line == line - 1)
        return np.where(whole, 1, np.minimum(hi // piece - lo // piece + 1,
                                             config.dma_put_partial_writes))

    head = writes(starts, np.minimum(ends, first * line + line - 1))
    tail = np.where(last > first, writes(last * line, ends), 0)
    middle = np.maximum(last - first - 1, 0)
    return head + tail + middle


def _requests(block, config: VMConfig, mode=DMA_PE):
    return (_operand_rows if mode == DMA_PE else _shared_rows)(*block, config)


def operand_transactions(*block, config: VMConfig, mode=DMA_PE) -> int:
    """Transactions of the CPEs' DMAs of an operand block (arguments of ``_operand_rows``)
    in DMA `mode`."""
    return transactions(*_requests(block, config, mode), config)


def operand_get_cycles(*block, config: VMConfig, mode=DMA_PE) -> int:
    """Engine cycles of the CPEs' gets of an operand block (PE: one request per CPE with a
    valid part; shared: ``_shared_rows``)."""
    return get_engine_cycles(*_requests(block, config, mode), config)


def operand_put_cycles(*block, config: VMConfig, mode=DMA_PE) -> int:
    """Engine cycles of the CPEs' puts of an operand block (as ``operand_get_cycles``;
    operands start line-aligned)."""
    return put_engine_cycles(*_requests(block, config, mode), config)


def dma_cycles(engine_cycles: float, config: VMConfig) -> float:
    """Eq. 3-1 for the 64 CPEs together: T_latency + the CG engine's time for their
    transactions (a get's: one 128-byte transaction per 6 cycles, PEAK_BW = 30.94 GB/s)."""
    return config.dma_latency + engine_cycles


def predict(problem: Problem, blocking: Blocking, config: VMConfig,
            coefficients=PRIMITIVE_COEFFICIENTS) -> float:
    """Predicted kernel cycles of one swgemm run (memoised: a pure function of its arguments,
    asked again for the same shapes at every training step)."""
    return _predicted(problem, Blocking(*blocking), config, tuple(coefficients))


@functools.lru_cache(maxsize=4096)
def _predicted(problem: Problem, blocking: Blocking, config: VMConfig, coefficients) -> float:
    mb, nb, kb = blocking
    es = problem.itemsize
    n_m, n_n, n_k = block_counts(problem, blocking, config)
    k = problem.k
    lda, ldb, ldc = leading_dims(problem, config, blocking)
    a_mode, b_mode, c_mode = sharing(problem, blocking, config)
    a_dma = operand_get_cycles(k, problem.m, kb, mb, lda * es, es, problem.a_transposed, True,
                               config=config, mode=a_mode)
    b_dma = operand_get_cycles(k, problem.n, kb, nb, ldb * es, es, problem.b_transposed, False,
                               config=config, mode=b_mode)
    grain = c_grain(problem, blocking, config)
    c_block = (problem.m, _ceil_div(problem.n, grain) * grain, mb, nb,
               ldc * es, es, False, False)
    c_dma = operand_put_cycles(*c_block, config=config, mode=c_mode) + (
        operand_get_cycles(*c_block, config=config) if problem.has_beta else 0)
    # A changes every step unless K has one block and only N advances; B likewise.
    a_loads = n_m * n_k if n_k == 1 else n_m * n_n * n_k
    b_loads = n_n if (n_k == 1 and n_n == 1) else n_m * n_n * n_k
    steps = n_m * n_n * n_k
    pack_a, pack_b = needs_packing(problem, blocking, config)

    def pack_cost(transposed):
        kind = "transposed" if transposed else ("natural_s" if es == 4 else "natural_d")
        return PACK_CYCLES[kind]

    compute = (steps * (primitive_cycles(mb, nb, kb, coefficients) + STEP_CYCLES)
               + a_loads * pack_a * pack_cost(problem.a_transposed) * kb * mb
               + b_loads * pack_b * pack_cost(problem.b_transposed) * kb * nb
               + n_m * n_n * (FINISH_CYCLES + ZERO_CYCLES) * mb * nb)
    # Every CPE's fetch of the job record, the first fetch of A and B and the last write of C
    # are exposed; the rest overlaps.
    job_transactions = _ceil_div(KERNEL.record("J_", "JOB_BYTES").nbytes,
                                 config.dma_transaction_bytes)
    job_dma = (config.dma_get_request_cycles + config.dma_transaction_cycles * job_transactions
               ) * mesh(config) ** 2
    overlapped = a_dma * (a_loads - 1) + b_dma * (b_loads - 1) + c_dma * (n_m * n_n - 1)
    dma_per_step = dma_cycles(overlapped / steps, config)
    exposed = (dma_cycles(job_dma, config) + dma_cycles(a_dma + b_dma, config)
               + dma_cycles(c_dma, config))
    return steps * max(compute / steps, dma_per_step) + exposed


def choose(problem: Problem, config: VMConfig, options=None) -> Blocking:
    """The feasible blocking (of `options`, default ``candidates``) with the smallest
    predicted time."""
    if options is None:
        return _best(problem, config)
    if not options:
        raise ArgumentError(f"no blocking fits in LDM for {problem}")
    return min(options, key=lambda b: predict(problem, b, config))


@functools.lru_cache(maxsize=1024)
def _best(problem: Problem, config: VMConfig) -> Blocking:
    """``choose`` of every candidate, memoised (it predicts dozens of blockings)."""
    return choose(problem, config, candidates(problem, config))
