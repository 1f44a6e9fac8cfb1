"""Souffle's partition, fusion and code generation (docs/souffle.md): a TE program (souffle.py)
becomes launches of generated CPE kernels run on the VM.

Partition. Each TE's output is cut into equal tiles over up to three leading axes of extent
above 1 (a grid of
at most 64 CPEs; the others idle in that step). For every read the CPE needs one box of the
read buffer (its index maps are affine with non-negative coefficients), fetched by strided DMA
(one descriptor per box row-run: the composed pattern of the vertical transformation) into
LDM. The grid is the one with the smallest ``estimate`` (DMA lines and loop-nest points)
among those whose LDM fits.

Fusion. ``plan(program, fused=True)`` puts the TEs one after the other into one launch. A TE's
tile and the boxes it fetched stay in LDM; a reader whose box on every CPE lies in what the
same CPE holds reads it there (no DMA, no barrier: a softmax's or layernorm's reductions fused
with their producer, a weight fetched once for every LSTM step). Other readers fetch it from
memory after a whole-mesh barrier (``synr 0xff`` then ``sync 0xff``). The LDM is a ring
managed first in, first out (``_fit``): a step overwrites the oldest held regions, and an
evicted tile read later is put and fetched again. A step that fits nowhere starts a new
launch (the partition under the LDM budget). With ``fused=False`` every TE is its own launch
(the graph engine's node-at-a-time execution).

Generated code (one text per launch, from a template per step): per step the CPE fetches its
part of its row of the host-made table (active flag, the get list and the put list of
(memory, size, block, stride, LDM) descriptors), then runs the loop nest over its tile and the
reduce axes with scalar double arithmetic (``fmad`` for a sum of products, 8, 4 or 2 outputs
of a reduction at once; the addresses are sums of per-axis scaled counters), a body
``exp(...)`` through vmath.inc's ``vexp_d`` over the tile, and the puts. Every request is
waited for, except with ``plan(overlap=True)``: a step then issues the next step's gets before
its own loop nest and the next step waits for them (``_prefetches`` says which steps may).
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ...asm import assemble_object
from ...kernels import KERNEL_DIR, object_file
from ...kernels.athread import link_with_runtime
from ..runtime.kernel import align
from . import te
from .ir import GraphError

ES = 8                      # float64 elements
ENTRY = "souffle_kernel"
MAX_GRID_AXES = 3
LDM_RESERVE = 4096          # kernel data, constants, vmath.inc's variables (1064 B; checked after
                            # linking); the table is counted step by step
TABLE_LIMIT = 16384         # bytes of one step's part of a CPE's table row (its LDM copy)
LINE = 128                  # bytes of a memory transaction (dma_transaction_bytes)
# the scalar loop nest's cycles per (output, reduce) point: ~12 instructions around a 7-cycle
# fmad chain (the GEMM steps of the BERT block measure 9-10 on the C engine)
COMPUTE_CYCLES_PER_POINT = 10
ENTRY_WORDS = 5             # a DMA list entry: memory, size, block, stride, LDM
INCLUDE_DIRS = (str(KERNEL_DIR / "include"),)
# registers the loop nests may use: not $26 (ra), $29 (dma.inc's temporary), $30, $31
POOL = [f"${k}" for k in list(range(0, 26)) + [27, 28]]
UNROLL = (8, 4, 2)          # outputs a reduction's loop nest computes at once (the first that
                            # divides the axis and whose registers fit)
FP_OP = {"add": "faddd", "sub": "fsubd", "mul": "fmuld", "div": "fdivd"}
FULL_MESH = 0xff            # a barrier's row mask: every row
MESH_COLS_LOG2 = 3          # a CPE id's row is id >> 3 (8 columns; _launch checks the config)
DMA_GET_BCAST = 1 | 1 << 4  # a descriptor's op GET and mode BCAST (kernels/include/dma.inc)


class GeneratorError(GraphError):
    """A TE the generator cannot map onto the CPEs (the reason names it)."""


# ---- geometry ---------------------------------------------------------------------------

def tile(t: te.Tensor, grid: tuple, cpe: int, first: int = 0):
    """(lo, hi) per output axis of CPE ``cpe``'s tile, or None when it is idle; the grid's
    CPEs are ``first`` and the ones after it."""
    cpe -= first
    if cpe < 0 or cpe >= math.prod(grid):
        return None
    cuts = {}                   # axis -> (coordinate, parts): the CPE's place in the grid
    for k, parts in reversed(list(zip(grid_axes(t), grid))):
        cpe, cuts[k] = cpe // parts, (cpe % parts, parts)
    box = []
    for k, extent in enumerate(t.shape):
        if k in cuts:
            step = extent // cuts[k][1]
            box.append((cuts[k][0] * step, (cuts[k][0] + 1) * step))
        else:
            box.append((0, extent))
    return box


def grid_axes(t: te.Tensor) -> list:
    """The output axes a grid cuts: the first MAX_GRID_AXES of extent above 1 (a batch of 1,
    a Conv's, cuts nothing), the last axis only below rank 4 (an image's rows stay whole: a
    window's DMA runs are whole rows; cut, the 1x1 Convs of the Inception block took 2.2x
    the cycles)."""
    cut = len(t.shape) if len(t.shape) < 4 else len(t.shape) - 1
    return [k for k in range(cut) if t.shape[k] > 1][:MAX_GRID_AXES]


def read_box(t: te.Tensor, r: te.Read, box) -> list:
    """The box of the read buffer (in ``r.shape``) the tile ``box`` and the reduce axes touch."""
    ranges = dict(zip(t.axes, box))
    ranges.update({a: (0, a.extent) for a in t.reduce_axes})
    out = []
    for index in r.index:
        lo = hi = index.const
        for axis, coef in index.coefs.items():
            if coef < 0:
                raise GeneratorError(f"{t.name}: a negative index coefficient in {r.tensor.name}")
            lo += coef * ranges[axis][0]
            hi += coef * (ranges[axis][1] - 1)
        out.append((lo, hi + 1))
    return out


def strides(shape) -> list:
    return [int(math.prod(shape[k + 1:])) for k in range(len(shape))]


def dma_pieces(box, shape, base: int, ldm: int) -> list:
    """(memory, size, block, stride, LDM) descriptors moving ``box`` of a row-major buffer of
    ``shape`` at ``base`` to/from a packed LDM copy at ``ldm``: the contiguous run of the
    innermost full dimensions, strided over the next one, one descriptor per outer index."""
    ext = [hi - lo for lo, hi in box]
    st = strides(shape)
    d = len(shape) - 1
    while d > 0 and ext[d] == shape[d]:
        d -= 1
    run = ext[d] * st[d] if shape else 1
    outer = list(range(d - 1)) if d > 0 else []
    blocks = ext[d - 1] if d > 0 else 1
    gap = (st[d - 1] - run) if d > 0 else 0
    pieces = []
    for index in itertools.product(*[range(lo, hi) for lo, hi in (box[m] for m in outer)]):
        offset = sum(i * st[m] for i, m in zip(index, outer))
        offset += sum(box[m][0] * st[m] for m in range(len(outer), d + 1))
        size = blocks * run * ES
        block = run * ES if blocks > 1 and gap else 0
        pieces.append((base + offset * ES, size, block, gap * ES if block else 0,
                       ldm + len(pieces) * size))
    return pieces


def _clip(box, shape) -> list:
    return [(max(lo, 0), min(hi, n)) for (lo, hi), n in zip(box, shape)]


def read_pieces(box, shape, base: int, ldm: int) -> list:
    """``dma_pieces`` of a read's box; a box that leaves the buffer (a padded read) moves only
    its part inside, one descriptor per row of the packed LDM copy of the whole box (whose
    other elements hold the fill)."""
    inside = _clip(box, shape)
    if inside == [tuple(b) for b in box]:
        return dma_pieces(box, shape, base, ldm)
    if any(lo >= hi for lo, hi in inside):
        return []
    st, lst = strides(shape), strides([hi - lo for lo, hi in box])
    (lo, hi), pieces = inside[-1], []
    for index in itertools.product(*[range(a, b) for a, b in inside[:-1]]):
        index += (lo,)
        pieces.append((base + ES * sum(i * s for i, s in zip(index, st)), ES * (hi - lo), 0, 0,
                       ldm + ES * sum((i - b[0]) * s for i, b, s in zip(index, box, lst))))
    return pieces


def _into(t: te.Tensor, box) -> tuple:
    """(box, shape) of a tile in the buffer the TE writes (a Concat part's: shifted)."""
    if not t.into or box is None:
        return box, t.shape
    whole, offsets = t.into
    return [(lo + o, hi + o) for (lo, hi), o in zip(box, offsets)], whole.shape


# ---- the plan ---------------------------------------------------------------------------

@dataclass
class ReadPlan:
    read: te.Read
    local: bool                 # read from what this CPE holds in LDM (no DMA)
    base: int = 0               # LDM offset of the element at local index 0 (from SF_BUF)
    coefs: dict = field(default_factory=dict)   # axis -> bytes per step
    box_elements: int = 0       # DMA'd box size (elements)
    held: "Resident" = None     # what a local read reads
    fill: bool = False          # the box leaves the buffer on some CPE: its LDM copy is filled
                                # with the read's fill before the gets
    bcast: bool = False         # every active CPE reads the same box: CPE 0 fetches it once
                                # with a BCAST get into every CPE of the active rows
    early: bool = False         # got while the step before computes (plan(overlap=True))


@dataclass
class Step:
    tensor: te.Tensor
    grid: tuple
    reads: list
    out: int = 0                # LDM offset of the tile (from SF_BUF)
    put: bool = False
    barrier: int = 0            # the mesh rows (a mask) that meet at a barrier before the
                                # step: FULL_MESH, or fewer for HOPE's sub-meshes (hope_submesh)
    rows: int = 0xff            # the mesh rows the step's CPEs are confined to (its barriers')
    bcast_rows: int = 0         # the mask of the mesh rows a broadcast get writes (0: none)
    first: int = 0              # the grid's first CPE (a sub-mesh: CPEs first, first + 1, ...)
    group: int = None           # steps of one group run at once on disjoint sub-meshes
    prefetched: int = 0         # get list entries (the first ones) the step before issued
                                # before its own loop nest (the same on every active CPE)


@dataclass
class Launch:
    steps: list
    buffer_bytes: int = 0       # LDM from SF_BUF the launch uses
    confined: bool = False      # a CPE outside a step's grid skips the step, its table get too
                                # (HOPE's sub-mesh launches: no broadcast, no prefetch)


def _tile_elements(t, grid) -> int:
    return int(math.prod([hi - lo for lo, hi in tile(t, grid, 0)]))


def _grids(t: te.Tensor, cpes: int):
    """The grids of at most ``cpes`` CPEs; the parts divide the axes, so every CPE's tile, and
    each of its read boxes, has the same extents (one code for all)."""
    options = [[g for g in range(1, t.shape[k] + 1) if t.shape[k] % g == 0]
               for k in grid_axes(t)]
    for grid in itertools.product(*options):
        if math.prod(grid) <= cpes:
            yield tuple(grid)


@dataclass
class Resident:
    """A region of a tensor (read as ``shape``) that each CPE holds in LDM from ``out`` for the
    rest of the launch: a tile it computed or a box it fetched (tensors are written once)."""
    shape: tuple
    boxes: list                 # per CPE: [(lo, hi)] per dimension, or None (idle)
    out: int
    end: int                    # LDM offset past it
    fill: float = None          # the value held outside the buffer (a padded read's box)


def _local_base(step_t, r, grid, held: Resident, first: int):
    """The LDM offset of the read's index-0 element in ``held`` when every CPE's box lies in
    what the same CPE holds, at the same offset on every CPE; None otherwise."""
    if tuple(r.shape) != tuple(held.shape):
        return None
    base = None
    for cpe in range(first, first + math.prod(grid)):
        own = tile(step_t, grid, cpe, first)
        box, have = read_box(step_t, r, own), held.boxes[cpe]
        if have is None or any(lo < hlo or hi > hhi for (lo, hi), (hlo, hhi) in zip(box, have)):
            return None
        if held.fill is not None and held.fill != r.fill and _clip(box, r.shape) != box:
            return None             # the held box's padding holds another fill
        hst = strides([hi - lo for lo, hi in have])
        lows = dict(zip(step_t.axes, [lo for lo, _ in own]))
        start = [i.const + sum(c * lows.get(a, 0) for a, c in i.coefs.items()) for i in r.index]
        offset = held.out + ES * sum(s * (f - hlo) for s, f, (hlo, _) in zip(hst, start, have))
        if base is not None and offset != base:
            return None
        base = offset
    return base


def _coefs(t, r, layout_strides) -> dict:
    coefs = {}
    for s, index in zip(layout_strides, r.index):
        for axis, c in index.coefs.items():
            coefs[axis] = coefs.get(axis, 0) + ES * s * c
    return {a: c for a, c in coefs.items() if c}


def _read_key(r: te.Read):
    return (r.tensor.name, r.view, tuple((tuple((a.name, c) for a, c in i.coefs.items()),
                                          i.const) for i in r.index))


def _shared(t, r, grid) -> bool:
    """Every active CPE (more than one) reads the same box, inside the buffer: no axis the
    grid cuts appears in the read's index."""
    cut = {t.axes[k] for k, parts in zip(grid_axes(t), grid) if parts > 1}
    if not cut or any(c and a in cut for i in r.index for a, c in i.coefs.items()):
        return False
    box = read_box(t, r, tile(t, grid, 0))
    return _clip(box, r.shape) == box


def _place(t, grid, resident: dict, top: int, config, broadcast: bool, first: int):
    """(reads, LDM end, DMA engine cycles of all active CPEs' requests, CPE 0's table words)
    of TE t on ``grid`` with its tile at ``top`` and the DMA boxes above; reads of one element
    pattern share one ReadPlan; ``broadcast``: a box every CPE reads is one BCAST get."""
    plans, address = {}, top + align(ES * _tile_elements(t, grid))
    box0, cpes = tile(t, grid, first, first), math.prod(grid)
    put = dma_pieces(*_into(t, box0), 0, 0)
    engine, words = cpes * _engine_cycles(put, config, put=True), 4 + ENTRY_WORDS * len(put)
    for r in te.reads(t):
        key = _read_key(r)
        if key in plans:
            continue
        held = next(((h, b) for h in resident.get(r.tensor.name, ())
                     for b in [_local_base(t, r, grid, h, first)] if b is not None), None)
        if held is not None:
            plans[key] = ReadPlan(r, True, held[1], _coefs(t, r, strides(
                [hi - lo for lo, hi in held[0].boxes[first]])), held=held[0])
            continue
        box = read_box(t, r, box0)
        ext = [hi - lo for lo, hi in box]
        elements = int(math.prod(ext))
        fill = r.fill is not None and any(
            _clip(b, r.shape) != b for cpe in range(first, first + cpes)
            for b in [read_box(t, r, tile(t, grid, cpe, first))])
        bcast = broadcast and _shared(t, r, grid)
        plans[key] = ReadPlan(r, False, address, _coefs(t, r, strides(ext)), elements,
                              fill=fill, bcast=bcast)
        gets = read_pieces(box, r.shape, 0, 0)
        engine += _engine_cycles(gets, config, put=False, bcast=bcast) * (1 if bcast else cpes)
        words += ENTRY_WORDS * len(gets)
        address += align(ES * elements)
    return list(plans.values()), address, engine, words


def _engine_cycles(pieces, config, put: bool, bcast: bool = False) -> int:
    """DMA engine cycles of the descriptors, roughly, from the configuration's DMA model
    (docs/timing.md): per block its 128-byte lines at dma_transaction_cycles (a put's at
    dma_put_write_cycles) plus the per-block costs, at least dma_block_get_min_cycles a block
    of a strided get; a get request's own cost (the put's acknowledgement is left out: with
    it the estimate picked slower grids on the sw26010 preset's BERT block); a broadcast get's
    lines at dma_bcast_transaction_cycles (when not 0)."""
    line_cycles = (bcast and config.dma_bcast_transaction_cycles) or config.dma_transaction_cycles
    total = 0
    for _, size, block, _, _ in pieces:
        run = block or size
        lines = -(-run // LINE)
        if put:
            per_block = lines * config.dma_put_write_cycles + config.dma_block_put_cycles * bool(block)
            total += (size // run) * per_block
        else:
            per_block = lines * line_cycles
            if block:
                per_block = max(per_block + config.dma_block_get_cycles,
                                config.dma_block_get_min_cycles)
            total += (size // run) * per_block + config.dma_get_request_cycles
    return total


def estimate(t, grid, engine: int, config) -> float:
    """Cycles of a step, roughly: the DMA engine's time for every active CPE's requests (the
    engine is shared: ``engine``, from _place) plus one CPE's loop nest at
    COMPUTE_CYCLES_PER_POINT."""
    return engine + te.points(t) / math.prod(grid) * COMPUTE_CYCLES_PER_POINT


def _fit(t, grid, resident: dict, start: int, config, broadcast: bool, first: int):
    """TE t placed from LDM offset ``start``, evicting what it overwrites (the FIFO LDM
    manager: the space is a ring, the oldest regions are overwritten first). Returns
    (reads, end, DMA engine cycles, words, the residents kept). An evicted tile read later is read from
    memory (plan's put and barrier follow from that: the reload DMA)."""
    held = resident
    for _ in range(len(resident) + 2):
        reads, end, engine, words = _place(t, grid, held, start, config, broadcast, first)
        keep = {name: [h for h in hs if h.end <= start or h.out >= end]
                for name, hs in resident.items()}
        if all(p.held in keep[p.read.tensor.name] for p in reads if p.local):
            return reads, end, engine, words, keep
        held = keep
    raise GeneratorError(f"{t.name}: the LDM eviction did not settle")


def plan(program, config, fused: bool = True, broadcast: bool = True,
         submeshes: str = None, overlap: bool = False) -> list:
    """Launches: grids, LDM layout, local reads, puts and barriers (see the module doc);
    ``broadcast``: a box that every CPE of a step reads is fetched once (a BCAST get);
    ``submeshes`` ("even" or "work"): consecutive TEs that read none of each other run at
    once, each on its part of the mesh (equal parts, or parts by their points);
    ``overlap``: a step gets the next step's boxes while it computes (``_prefetches``)."""
    if submeshes not in (None, "even", "work"):
        raise GeneratorError(f"submeshes must be None, 'even' or 'work', not {submeshes!r}")
    state = _Planner(config, fused, broadcast, tables=2 if overlap else 1)
    pending = list(program.tensors)
    while pending:
        run = _independent(pending, config.num_cpes) if fused and submeshes else pending[:1]
        shares = _shares(run, config.num_cpes, submeshes) if len(run) > 1 else \
            [(0, config.num_cpes)]
        group = state.groups if len(run) > 1 else None
        for t, (first, cpes) in zip(run, shares):
            state.add(t, first, cpes, group)
        state.groups += len(run) > 1
        pending = pending[len(run):]
    _puts_and_barriers(state.launches, program.outputs)
    if overlap:
        _prefetches(state.launches)
    return state.launches


def plan_ranges(placed, config, outputs: list) -> list:
    """Launches of ``placed`` ((TE, first CPE, CPEs, row mask) in order, the TEs fused): each
    TE on its range of CPEs, confined to the rows of the mask (its barriers join only those
    rows and its writers'); no broadcast gets; a CPE outside a TE's grid
    skips its step (``Launch.confined``). HOPE's sub-mesh executor (hope_submesh)."""
    state = _Planner(config, fused=True, broadcast=False, tables=1)
    for t, first, cpes, rows in placed:
        state.add(t, first, cpes, None)
        state.launches[-1].steps[-1].rows = rows
    _puts_and_barriers(state.launches, outputs)
    for launch in state.launches:
        launch.confined = True
    return state.launches


def _independent(pending, cpes: int) -> list:
    """The longest run at the head of ``pending`` (at most 8 TEs, and at most one per CPE)
    whose TEs read none of each other's outputs."""
    run, written = [], set()
    for t in pending[:min(8, cpes)]:
        if any(r.tensor.name in written for r in te.reads(t)):
            break
        run.append(t)
        written.add(t.storage)
    return run


def _shares(run, cpes: int, how: str) -> list:
    """(first CPE, CPEs) of each TE of ``run``: equal parts, or parts by the TEs' points."""
    weights = [1.0] * len(run) if how == "even" else [float(te.points(t)) for t in run]
    sizes = [max(1, int(cpes * w / sum(weights))) for w in weights]
    while sum(sizes) > cpes:
        sizes[sizes.index(max(sizes))] -= 1
    firsts = np.cumsum([0] + sizes[:-1])
    return [(int(f), n) for f, n in zip(firsts, sizes)]


class _Planner:
    """The state of ``plan``: the launches so far, what the current one holds in LDM."""

    def __init__(self, config, fused, broadcast, tables: int):
        self.config, self.fused, self.broadcast, self.tables = config, fused, broadcast, tables
        self.launches, self.resident, self.top, self.table, self.groups = [], {}, 0, 0, 0

    def add(self, t, first: int, cpes: int, group):
        """Place TE t on a grid of at most ``cpes`` CPEs from CPE ``first``."""
        config, best = self.config, None
        broadcast = self.broadcast and group is None   # a broadcast's barriers would serialise
        # after the previous step; from LDM's start (the ring wraps); in a new launch
        attempts = [(self.resident, self.top, False), (self.resident, 0, False)] \
            if self.fused and self.launches else []
        for res, start, new in attempts + [({}, 0, True)]:
            for grid in _grids(t, cpes):
                reads, end, engine, words, keep = _fit(t, grid, res, start, config, broadcast,
                                                       first)
                # the launch's buffers and its table area (the largest step's part)
                room = config.ldm_bytes - LDM_RESERVE - 8 * self.tables * max(
                    words, 0 if new else self.table)
                high = end if new else max(end, self.launches[-1].buffer_bytes)
                if high > room:
                    continue
                key = (estimate(t, grid, engine, config), end)
                if best is None or key < best[0]:
                    best = (key, grid, reads, end, words, keep, start, new)
            if best is not None:
                break
        if best is None:
            raise GeneratorError(f"{t.name}: no tiling of {list(t.shape)} fits the LDM of "
                                 f"{config.ldm_bytes} B per CPE")
        _, grid, reads, end, words, self.resident, start, new = best
        if new:
            self.launches.append(Launch([]))
            self.resident, self.table = {}, 0
        launch = self.launches[-1]
        rows = -(-math.prod(grid) // config.mesh_cols)
        launch.steps.append(Step(t, grid, reads, out=start, bcast_rows=(
            (1 << rows) - 1 if any(p.bcast for p in reads) else 0), first=first, group=group))
        launch.buffer_bytes = max(launch.buffer_bytes, end)
        self.table = max(self.table, words)
        tiles = [tile(t, grid, cpe, first) for cpe in range(config.num_cpes)]
        self.resident.setdefault(t.storage, []).append(Resident(
            _into(t, tiles[first])[1], [_into(t, box)[0] for box in tiles], start,
            start + align(ES * _tile_elements(t, grid))))
        for p in reads:                 # fetched boxes stay too: later readers reuse them
            if not p.local:
                self.resident.setdefault(p.read.tensor.name, []).append(Resident(
                    p.read.shape, [box and read_box(t, p.read, box) for box in tiles], p.base,
                    p.base + align(ES * p.box_elements), p.read.fill))
        self.top = end


def _puts_and_barriers(launches, outputs):
    dma_read = {p.read.tensor.name for launch in launches for s in launch.steps
                for p in s.reads if not p.local}
    for launch in launches:
        written = {}                    # buffer -> the rows of the steps that put it
        for step in launch.steps:
            storage = step.tensor.storage
            step.put = storage in outputs or storage in dma_read
            # the rows of the step and of the steps that wrote what it fetches meet
            writers = [written[p.read.tensor.name] for p in step.reads
                       if not p.local and p.read.tensor.name in written]
            step.barrier = functools.reduce(int.__or__, writers, step.rows) if writers else 0
            if step.put:
                written[storage] = written.get(storage, 0) | step.rows
        # a group's barrier goes before its first step (its steps read none of each other,
        # and a barrier between them would run them one after the other)
        for k, step in enumerate(launch.steps):
            if step.group is not None and k and launch.steps[k - 1].group == step.group:
                head = next(s for s in launch.steps if s.group == step.group)
                head.barrier, step.barrier = head.barrier | step.barrier, 0


def _regions(step: Step) -> list:
    """The LDM ranges (from SF_BUF) the step writes or reads: its tile and its boxes."""
    tile_end = step.out + align(ES * _tile_elements(step.tensor, step.grid))
    return [(step.out, tile_end)] + [
        (p.held.out, p.held.end) if p.local else (p.base, p.base + align(ES * p.box_elements))
        for p in step.reads]


def _prefetches(launches):
    """Mark the reads the step before gets before its own loop nest, so they land while it
    computes (get k+1 while computing k): a DMA read of a tensor this launch has not written
    (a weight, an input: the step's barrier is not for it), without broadcast or padding,
    outside sub-mesh groups, whose box misses every LDM range the step before uses."""
    for launch in launches:
        written = set()
        for before, step in zip(launch.steps, launch.steps[1:]):
            if before.put:
                written.add(before.tensor.storage)
            busy = _regions(before)
            for p, (lo, hi) in zip(step.reads, _regions(step)[1:]):
                p.early = not (p.local or p.bcast or p.fill or p.read.tensor.name in written or
                               step.group is not None or before.group is not None or
                               any(lo < end and start < hi for start, end in busy))
            early = [p for p in step.reads if p.early]
            box = tile(step.tensor, step.grid, step.first, step.first)
            step.prefetched = sum(len(read_pieces(read_box(step.tensor, p.read, box),
                                                  p.read.shape, 0, 0)) for p in early)


# ---- code -------------------------------------------------------------------------------

class _Code:
    """Assembly of one launch; ``buf`` is the LDM address of SF_BUF (the second pass's)."""

    def __init__(self, launch: Launch, table_offsets: list, row_bytes: int, buf: int):
        self.launch, self.offsets, self.row_bytes, self.buf = launch, table_offsets, \
            row_bytes, buf
        self.lines, self.consts, self.labels = [], {}, 0
        self.step_bytes = max(size for _, size, _, _ in table_offsets)
        # a prefetching launch alternates two table buffers: step k's part in buffer k % 2
        self.tables = 2 if any(s.prefetched for s in launch.steps) else 1

    def emit(self, line):
        self.lines.append("\t" + line if not line.endswith(":") else line)

    def label(self):
        self.labels += 1
        return f".Ls{self.labels}"

    def const(self, value: float) -> str:
        return self.consts.setdefault(float(value), f"SF_K{len(self.consts)}")

    def text(self) -> str:
        body = list(self.lines)
        self.lines = []
        head = ["\t.set\tnoreorder", '\t.include "dma.inc"', "\t.ldm", "\t.align\t5",
                "SF_REPLY:\t.skip\t32", "SF_RA:\t.skip\t8"]
        head += [f"{label}:\t.quad\t{np.float64(v).view(np.int64)}"
                 for v, label in self.consts.items()]
        if self.tables == 2:
            head.append("SF_PREPLY:\t.skip\t32")
        head += ["SF_TBASE:\t.quad\t0", "\t.align\t5",
                 f"SF_TABLE:\t.skip\t{self.tables * self.step_bytes}",
                 DMA_LIST_MACRO, "\t.text", f"\t.globl\t{ENTRY}", f"\t.ent\t{ENTRY}",
                 f"{ENTRY}:", "\tstl\t$26, SF_RA($31)", "\trcid\t$1",
                 f"\tldi\t$2, {self.row_bytes}", "\tmull\t$1, $2, $1", "\taddl\t$16, $1, $1",
                 "\tstl\t$1, SF_TBASE($31)         # this CPE's table row"]
        tail = ["\tldl\t$26, SF_RA($31)", "\tret", f"\t.end\t{ENTRY}", "\t.ldm", "\t.align\t5",
                f"SF_BUF:\t.skip\t{max(self.launch.buffer_bytes, 32)}"]
        return "\n".join(head + body + tail) + "\n"

    # ---- one step ----
    def table(self, k: int) -> str:
        return f"SF_TABLE+{(k % self.tables) * self.step_bytes}"

    def step(self, k: int, step: Step):
        t = step.tensor
        self.emit(f"# step {k}: {t.name} on a {'x'.join(map(str, step.grid)) or '1'} grid")
        if step.barrier or step.bcast_rows:     # also: no CPE still reads what a broadcast
            self.barrier(step.barrier or FULL_MESH)    # overwrites
        skip = self.label()
        table, (_, _, puts, bcasts) = self.table(k), self.offsets[k]
        gets, active = 8, 0
        if self.launch.confined:
            self.outside(step, skip)
        if not step.prefetched:
            self.fetch_table(k)
        if step.bcast_rows:                    # CPE 0's list; the others' is empty
            mask = ((step.bcast_rows << 24) ^ 1 << 31) - (1 << 31)
            self.emit(f"SF_DMA_LIST {table}+{bcasts}, {DMA_GET_BCAST}, {mask}")
            self.barrier()                     # the broadcast has arrived everywhere
        self.emit(f"ldl\t$2, {table}+{active}($31)")
        self.emit(f"beq\t$2, {skip}")
        for p in step.reads:
            if p.fill:
                self.fill(p)
        if step.prefetched:
            if any(not (p.local or p.bcast or p.early) for p in step.reads):
                self.emit(f"SF_DMA_LIST {table}+{gets}, DMA_GET, 0, SF_REPLY, 1, "
                          f"{step.prefetched}")
            self.emit(f"ldi\t$2, {step.prefetched}     # the gets the step before issued")
            self.emit("WAIT_COUNT SF_PREPLY, $2, $12")
        elif any(not p.local for p in step.reads):
            self.emit(f"SF_DMA_LIST {table}+{gets}, DMA_GET")
        following = self.launch.steps[k + 1] if k + 1 < len(self.launch.steps) else None
        if following is not None and following.prefetched:
            self.prefetch(k + 1)
        mark = len(self.lines)
        for self.width in UNROLL + (1,):
            try:
                self.loops(step)
                break
            except GeneratorError:
                if self.width == 1:
                    raise
                del self.lines[mark:]          # fewer outputs at once: fewer registers
        if isinstance(t.expr, te.Unary) and t.expr.op == "exp":
            vectors = align(ES * _tile_elements(t, step.grid)) // 32
            self.emit(f"ldi\t$16, {self.buf + step.out}")
            self.emit(f"ldi\t$17, {self.buf + step.out}")
            self.emit(f"ldi\t$18, {vectors}")
            self.emit("bsr\t$26, vexp_d")
        if step.put:
            self.emit(f"SF_DMA_LIST {table}+{puts}, DMA_PUT")
        if following is not None and following.prefetched:
            done = self.label()                # a CPE idle in this step prefetches too
            self.emit(f"br\t{done}")
            self.emit(f"{skip}:")
            self.prefetch(k + 1)
            self.emit(f"{done}:")
        else:
            self.emit(f"{skip}:")

    def outside(self, step: Step, skip: str):
        """CPEs outside the step's grid (ids first .. first + CPEs - 1) branch to ``skip``
        before its table get: one request fewer each for the CG's DMA engine."""
        self.emit("rcid\t$1")
        self.emit(f"ldi\t$2, {step.first}")
        self.emit("subl\t$1, $2, $1")
        self.emit(f"ldi\t$2, {math.prod(step.grid)}")
        self.emit("cmpult\t$1, $2, $2             # unsigned: below first wraps around")
        self.emit(f"beq\t$2, {skip}")

    def fetch_table(self, k: int):
        """Step k's part of this CPE's table row into its table buffer (waited for)."""
        start, size, _, _ = self.offsets[k]
        self.emit("ldl\t$1, SF_TBASE($31)       # the step's part of the table row")
        self.emit(f"ldi\t$2, {start}")
        self.emit("addl\t$1, $2, $1")
        self.emit(f"MAKE_DESC $10, DMA_GET, {size}, SF_REPLY")
        self.emit(f"ldi\t$2, {self.table(k)}")
        self.emit("DMA_WAIT $10, $1, $2, SF_REPLY")

    def prefetch(self, k: int):
        """Step k's table part, then its gets issued without waiting (reply SF_PREPLY)."""
        self.fetch_table(k)
        self.emit(f"SF_DMA_LIST {self.table(k)}+8, DMA_GET, 0, SF_PREPLY, 0, 0, "
                  f"{self.launch.steps[k].prefetched}")

    def barrier(self, rows: int = FULL_MESH):
        """The CPEs of the mesh rows in ``rows`` meet (whole rows: ``synr 0xff``, then ``sync``
        down the columns of those rows); a CPE of another row skips it."""
        if rows == FULL_MESH:
            self.emit("synr\t0xff")
            self.emit("sync\t0xff")
            return
        skip = self.label()
        self.emit("rcid\t$1")
        self.emit(f"srl\t$1, {MESH_COLS_LOG2}, $1      # this CPE's row")
        self.emit(f"ldi\t$2, {rows}")
        self.emit("srl\t$2, $1, $2")
        self.emit(f"blbc\t$2, {skip}")
        self.emit("synr\t0xff")
        self.emit(f"sync\t{rows:#x}")
        self.emit(f"{skip}:")

    def fill(self, plan: ReadPlan):
        """Stores of the read's fill over its LDM box, four elements an iteration (the box is
        aligned to 32 bytes); the gets then overwrite the part inside the buffer."""
        top = self.label()
        self.emit(f"fldd\t$2, {self.const(plan.read.fill)}($31)   # the padding of "
                  f"{plan.read.tensor.name}")
        self.emit(f"ldi\t$1, {self.buf + plan.base}")
        self.emit(f"ldi\t$3, {align(ES * plan.box_elements) // 32}")
        self.emit(f"{top}:")
        for k in range(4):
            self.emit(f"fstd\t$2, {8 * k}($1)")
        self.emit("ldi\t$1, 32($1)")
        self.emit("subl\t$3, 1, $3")
        self.emit(f"bne\t$3, {top}")

    def loops(self, step: Step):
        t = step.tensor
        box = tile(t, step.grid, 0)
        out_strides = strides([hi - lo for lo, hi in box])
        out_coefs = {a: ES * s for a, s in zip(t.axes, out_strides)}
        extents = {a: hi - lo for a, (lo, hi) in zip(t.axes, box)}
        extents.update({a: a.extent for a in t.reduce_axes})
        looped = [a for a in t.axes + t.reduce_axes if extents[a] > 1]
        outer = [a for a in looped if not a.reduce]
        pairs = {}                              # (axis, bytes) -> register
        free = list(POOL)
        for coefs in [out_coefs] + [p.coefs for p in step.reads]:
            for a, c in coefs.items():
                if a in looped and (a, c) not in pairs:
                    pairs[(a, c)] = free.pop(0)
        self.free, self.pairs, self.pinned, self.cache = free, pairs, set(), {}
        expr = t.expr.a if isinstance(t.expr, te.Unary) and t.expr.op == "exp" else t.expr
        reduce = t.body.op if isinstance(t.body, te.Reduce) else None
        if reduce and len(outer) == len(looped):
            raise GeneratorError(f"{t.name}: a reduction over one element")
        # register tiling: a reduction computes UNROLL outputs along its innermost output axis
        # at once (independent fmad chains; loads that do not depend on the axis shared)
        self.unroll, width = None, 1
        if reduce and outer:
            width = next((u for u in UNROLL if extents[outer[-1]] % u == 0 and u <= self.width),
                         1)
            self.unroll = outer[-1]

        def nest(level):
            if level == len(looped):
                if reduce:
                    for j in range(width):
                        self.accumulate(reduce, expr, step, j)
                    self.unpin()
                else:
                    self.store(self.value(expr, step, 0), out_coefs, step, 0)
                return
            axis = looped[level]
            if reduce and level == len(outer):
                self.accs = [self.take() for _ in range(width)]
                for acc in self.accs:
                    if reduce == "sum":
                        self.emit(f"fcpys\t$31, $31, {acc}")
                    else:
                        self.emit(f"fldd\t{acc}, {self.const(-np.inf)}($31)")
            step_by = width if axis is self.unroll else 1
            mine = [(c, r) for (a, c), r in pairs.items() if a is axis]
            if not mine:                        # an axis no address uses: a counter of its own
                mine = [(1, self.take())]
            for _, reg in mine:
                self.emit(f"clr\t{reg}")
            top = self.label()
            self.emit(f"{top}:")
            nest(level + 1)
            for c, reg in mine:
                self.emit(f"ldi\t{reg}, {c * step_by}({reg})")
            tmp = self.take()
            self.emit(f"ldi\t{tmp}, {mine[0][0] * extents[axis]}")
            self.emit(f"cmplt\t{mine[0][1]}, {tmp}, {tmp}")
            self.emit(f"bne\t{tmp}, {top}")
            self.give(tmp)
            if reduce and level == len(outer):
                for j, acc in enumerate(self.accs):
                    self.store(acc, out_coefs, step, j)
                for acc in self.accs:
                    self.give(acc)
        nest(0)

    def take(self) -> str:
        if not self.free:
            raise GeneratorError("the step's loop nest needs more registers than the CPE has")
        return self.free.pop(0)

    def give(self, reg):
        if reg not in self.pinned:
            self.free.insert(0, reg)

    def unpin(self):
        for reg in self.pinned:
            self.free.insert(0, reg)
        self.pinned, self.cache = set(), {}

    def shift(self, coefs: dict, j: int) -> int:
        """Bytes from output j = 0 to output j along the unrolled axis."""
        return coefs.get(self.unroll, 0) * j

    def address(self, coefs: dict, base: int) -> tuple:
        """(register holding the sum of the scaled counters, displacement)."""
        regs = [self.pairs[(a, c)] for a, c in coefs.items() if (a, c) in self.pairs]
        reg = self.take()
        first = regs[1] if len(regs) > 1 else "$31"
        self.emit(f"addl\t{regs[0] if regs else '$31'}, {first}, {reg}")
        for other in regs[2:]:
            self.emit(f"addl\t{reg}, {other}, {reg}")
        address = self.buf + base
        if address >= 32768:
            self.emit(f"ldi\t{reg}, {address}({reg})")
            address = 0
        return reg, address

    def load(self, plan: ReadPlan, j: int) -> str:
        """The element for output j. In an unrolled body each address is computed once and
        each element loaded once (both pinned until the body ends)."""
        key = _read_key(plan.read)
        shift = self.shift(plan.coefs, j)
        if self.unroll is None:
            reg, disp = self.address(plan.coefs, plan.base)
            self.emit(f"fldd\t{reg}, {disp}({reg})")
            return reg
        if (key, shift) not in self.cache:
            if key not in self.cache:
                self.cache[key] = self.address(plan.coefs, plan.base)
                self.pinned.add(self.cache[key][0])
            base, disp = self.cache[key]
            reg = self.take()
            self.emit(f"fldd\t{reg}, {disp + shift}({base})")
            self.cache[(key, shift)] = reg
            self.pinned.add(reg)
        return self.cache[(key, shift)]

    def value(self, e, step, j) -> str:
        """A register holding e for output j (a pinned register is never overwritten)."""
        if isinstance(e, te.Const):
            reg = self.take()
            self.emit(f"fldd\t{reg}, {self.const(e.value)}($31)")
            return reg
        if isinstance(e, te.Read):
            key = _read_key(e)
            return self.load(next(p for p in step.reads if _read_key(p.read) == key), j)
        if isinstance(e, te.Unary):
            if e.op != "sqrt":
                raise GeneratorError(f"{step.tensor.name}: exp only as a TE's whole body")
            a = self.value(e.a, step, j)
            out = self.take() if a in self.pinned else a
            self.emit(f"fsqrtd\t{a}, {out}")
            return out
        a, b = self.value(e.a, step, j), self.value(e.b, step, j)
        out = self.take() if a in self.pinned else a
        if e.op == "max":
            flag, done = self.take(), self.label()
            self.emit(f"fcpys\t{a}, {a}, {out}")
            self.emit(f"fcmplt\t{a}, {b}, {flag}")
            self.emit(f"fbeq\t{flag}, {done}")
            self.emit(f"fcpys\t{b}, {b}, {out}")
            self.emit(f"{done}:")
            self.give(flag)
        else:
            self.emit(f"{FP_OP[e.op]}\t{a}, {b}, {out}")
        self.give(b)
        return out

    def accumulate(self, op, e, step, j):
        acc = self.accs[j]
        if op == "sum" and isinstance(e, te.Binary) and e.op == "mul":
            a, b = self.value(e.a, step, j), self.value(e.b, step, j)
            self.emit(f"fmad\t{a}, {b}, {acc}, {acc}")
            self.give(b)
            self.give(a)
            return
        v = self.value(e, step, j)
        if op == "sum":
            self.emit(f"faddd\t{acc}, {v}, {acc}")
        else:
            flag, done = self.take(), self.label()
            self.emit(f"fcmplt\t{acc}, {v}, {flag}")
            self.emit(f"fbeq\t{flag}, {done}")
            self.emit(f"fcpys\t{v}, {v}, {acc}")
            self.emit(f"{done}:")
            self.give(flag)
        self.give(v)

    def store(self, value, out_coefs, step, j):
        reg, disp = self.address(out_coefs, step.out)
        self.emit(f"fstd\t{value}, {disp + self.shift(out_coefs, j)}({reg})")
        self.give(reg)
        if value not in getattr(self, "accs", ()):
            self.give(value)


DMA_LIST_MACRO = """
# SF_DMA_LIST list, op, mask, reply, wait, skip, take: issue the count entries (memory, size,
# block, stride, LDM) at the LDM address list + 8 and (wait = 1) wait for all of them; op: the
# descriptor's op | mode << 4, mask: the broadcast mask << 24 as a signed 32-bit number (the
# reply lane's high byte); reply: the word that counts their completions; skip: leave out the
# first entries; take (not 0): only the first entries, of a list not empty
	.macro	SF_DMA_LIST list, op, mask=0, reply=SF_REPLY, wait=1, skip=0, take=0
	ldi	$1, \\list
	ldl	$2, 0($1)
	beq	$2, 3f
	.if	\\take
	ldi	$2, \\take
	.endif
	.if	\\skip
	ldi	$3, \\skip
	subl	$2, $3, $2
	beq	$2, 3f
	ldi	$1, 40 * \\skip($1)
	.endif
	stw	$31, \\reply($31)
	mov	$2, $3
	ldi	$9, \\op
	ldi	$11, \\reply + \\mask
4:	ldl	$4, 8($1)
	ldl	$5, 16($1)
	ldl	$6, 24($1)
	ldl	$7, 32($1)
	ldl	$8, 40($1)
	MAKE_DESC_REGS $10, $9, $5, $6, $7, $11
	dma	$10, $4, $8
	addl	$1, 40, $1
	subl	$3, 1, $3
	bne	$3, 4b
	.if	\\wait
	WAIT_COUNT \\reply, $2, $12
	.endif
3:
	.endm
"""


@functools.lru_cache(maxsize=64)
def _link(text: str):
    obj = assemble_object(text, str(KERNEL_DIR / "souffle_generated.s"), INCLUDE_DIRS)
    return link_with_runtime([object_file("dnn/vmath.s"), obj])   # its variables below 32 KiB


# ---- host side ----------------------------------------------------------------------------

@dataclass
class LaunchStats:
    tensors: list
    cycles: int
    dma_bytes: int
    ldm_peak: int


def report(stats: list) -> str:
    """Per launch (fused subgraph): its TEs, cycles, DMA bytes and LDM peak."""
    lines = [f"{'launch':<6} {'TEs':>4} {'first .. last TE':<40} {'cycles':>10} "
             f"{'DMA bytes':>10} {'LDM peak':>9}"]
    for k, s in enumerate(stats):
        span = s.tensors[0] if len(s.tensors) == 1 else f"{s.tensors[0]} .. {s.tensors[-1]}"
        lines.append(f"{k:<6} {len(s.tensors):>4} {span:<40} {s.cycles:>10,} {s.dma_bytes:>10,} "
                     f"{s.ldm_peak:>9,}")
    return "\n".join(lines)


def _tables(launch: Launch, addresses: dict, cpes: int, buf: int):
    """Per CPE the int64 table row and per step (start, bytes, the put list's offset in the
    step's part): active flag at 0, the get list at 8."""
    rows, offsets, dma_bytes = [[] for _ in range(cpes)], [], 0
    for step in launch.steps:
        t = step.tensor
        lists = []
        for cpe in range(cpes):
            box = tile(t, step.grid, cpe, step.first)
            gets, puts, bcasts = [], [], []
            if box is not None:
                for p in sorted(step.reads, key=lambda p: not p.early):   # early ones first
                    if not p.local and (cpe == 0 or not p.bcast):
                        pieces = read_pieces(read_box(t, p.read, box), p.read.shape,
                                             addresses[p.read.tensor.name], buf + p.base)
                        (bcasts if p.bcast else gets).extend(pieces)
                if step.put:
                    puts = dma_pieces(*_into(t, box), addresses[t.storage], buf + step.out)
            if box is not None and len(gets) < step.prefetched:
                raise GeneratorError(f"{t.name}: CPE {cpe} has fewer gets than the prefetched "
                                     f"{step.prefetched}")
            lists.append((box is not None, gets, puts, bcasts))
            dma_bytes += sum(piece[1] for piece in gets + puts + bcasts)
        counts = [max(len(entry[k]) for entry in lists) for k in (1, 2, 3)]
        start = len(rows[0]) * 8
        size = 8 * (4 + ENTRY_WORDS * sum(counts))
        if size > TABLE_LIMIT:
            raise GeneratorError(f"{step.tensor.name}: its DMA lists take {size} B per CPE, more "
                                 f"than {TABLE_LIMIT}")
        offsets.append((start, size, 16 + ENTRY_WORDS * 8 * counts[0],
                        24 + ENTRY_WORDS * 8 * (counts[0] + counts[1])))
        for cpe, (active, *entries) in enumerate(lists):
            row = [int(active)]
            for entry, count in zip(entries, counts):     # the get, put and broadcast lists
                row += [len(entry)] + [w for piece in entry for w in piece]
                row += [0] * (ENTRY_WORDS * (count - len(entry)))
            rows[cpe] += row
    return np.array(rows, np.int64), offsets, dma_bytes


def generate(launch: Launch, offsets, row_bytes: int) -> str:
    """The launch's assembly (two passes: the first finds SF_BUF's LDM address)."""
    buf = 0
    for _ in range(2):
        code = _Code(launch, offsets, row_bytes, buf)
        for k, step in enumerate(launch.steps):
            code.step(k, step)
        text = code.text()
        found = _link(text).address_of("SF_BUF")
        if found == buf:
            break
        buf = found
    return text, buf


def run(program, launches: list, machine, feeds: dict, engine: str = "c"):
    """Run the launches on the VM: (outputs by name, [LaunchStats])."""
    config = machine.config
    addresses = {}
    for name, value in {**program.constants, **feeds}.items():
        addresses[name] = machine.mem.put(np.ascontiguousarray(value, np.float64))
    wholes = {t.into[0].name: t.into[0] for t in program.tensors if t.into}
    for launch in launches:
        for step in launch.steps:
            t = step.tensor
            if step.put and t.storage not in addresses:
                addresses[t.storage] = machine.mem.alloc(ES * (t.into[0] if t.into else t).size)
    stats = []
    for launch in launches:
        probe_table, offsets, _ = _tables(launch, addresses, config.num_cpes, 0)
        text, buf = generate(launch, offsets, probe_table.shape[1] * 8)
        table, offsets, dma_bytes = _tables(launch, addresses, config.num_cpes, buf)
        ldm = len(_link(text).ldm_image)
        if ldm > config.ldm_bytes:
            raise GeneratorError(f"the launch of {launch.steps[0].tensor.name} .. "
                                 f"{launch.steps[-1].tensor.name} takes {ldm} B of LDM, more "
                                 f"than {config.ldm_bytes}")
        result = machine.run(_link(text), entry=ENTRY, args=[machine.mem.put(table)],
                             engine=engine)
        stats.append(LaunchStats([s.tensor.name for s in launch.steps], result.kernel_cycles,
                                 dma_bytes + table.nbytes, ldm))
    shapes = {**{t.name: t.shape for t in program.tensors},
              **{name: whole.shape for name, whole in wholes.items()}}
    outputs = {name: machine.mem.get(addresses[name], shapes[name], np.float64)
               for name in program.outputs}
    return outputs, stats
