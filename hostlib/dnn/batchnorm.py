"""Batch normalisation (per-channel statistics over B, H, W; PyTorch's semantics) of x in any
layout of ``layout.LAYOUTS`` (NCHW by default), two ways (docs/dnn.md "Batch normalisation"):

- **resident** (``kernels/dnn/batchnorm_group.s``, training forward and backward; inference
  of row tiles, ``row_tiles``): a tile of channels is held in the LDM of a core group's 64 CPEs,
  its sums are combined over the group by register communication, and x (backward: dy and x)
  is read once. Used when a channel fits (``tiles``).
- **streaming** (``kernels/dnn/batchnorm.s`` on the streaming driver), for any shape and for
  the other inference: a channel's B H W elements are cut into pieces of a few KiB (whole planes, or
  segments of a plane), so nothing has to hold a whole channel. Training forward: per-piece
  statistics, folded per channel in a fixed order (Chan's pairwise update) until one record
  is left, the channel's finish (mean, invstd, running averages), then the normalisation of
  every piece (x read twice); inference: finish and normalisation only. Backward: per-piece
  sums, folded, finished, then dx per piece.

Both kernels see x as (B, C, H, W); x in another layout is the same bytes seen as
(outer, C, 1, inner) (``view``): the axes before C are the "images", those after it one
"plane" (CNHW: one image, each channel one contiguous plane of B H W; RCNB = HWCN: H W images
of planes of B). Every sum runs on the CPEs in double; the work is shared by `cgs` core groups
and the results do not depend on `cgs`."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..runtime import Kernel, host_operator
from ..runtime.kernel import align
from . import stream
from .layout_transform import axes
from .common import DnnError, combined, float_arrays, machine_and_cgs, scalar, split

KERNEL = Kernel(("dnn/batchnorm.s", "dnn/stream.s"), "stream_run", "stream_ldm_end",
                stack="stream_stack")
NONE, PIECE, CHANNEL, UNIT, GROUP = (KERNEL.symbol(f"MODE_{m}")
                                     for m in ("NONE", "PIECE", "CHANNEL", "UNIT", "GROUP"))
REC_BYTES, APPLY_BYTES = KERNEL.symbol("REC_BYTES"), KERNEL.symbol("APPLY_BYTES")
VECTOR = 32                   # the arena hands out buffers in whole 32-byte vectors
MAX_PIECE_BYTES = stream.MAX_CHUNK_BYTES   # a piece's bytes per stream, at most
MAX_FOLD = 512                # records one fold unit combines, at most (and what fits LDM)
# The layouts whose channel runs (the axes after C) the kernels read at DMA speed for the
# shapes of a training step: NCHW (planes), CNHW (each channel one contiguous run), RCNB (runs
# of the batch). Every layout of LAYOUTS is computed right; NHWC's runs are single elements
# (strided DMA of one element each: 2-3 % of the stream bound, 13-20x a transform to NCHW).
NATIVE_LAYOUTS = ("NCHW", "CNHW", "RCNB")
GROUP_KERNEL = Kernel(("dnn/batchnorm_group.s",), "bn_group", "bn_group_ldm_end")
MAX_TILE, MAX_SLOTS = GROUP_KERNEL.symbol("MAX_TILE"), GROUP_KERNEL.symbol("MAX_SLOTS")
MIN_SEGMENT_BYTES = 1024      # resident segments: smaller ones cost more in tiles than CPEs give


@dataclass(frozen=True)
class Tiles:
    """How the resident scheme cuts x (kernels/dnn/batchnorm_group.s): tiles of `channels`
    consecutive channels, each image's part of a tile cut into `per_image` pieces of `planes`
    whole planes or (planes = 0) of `segment` elements of a plane; a CPE holds up
    to `slots` pieces per stream in slots of `slot_bytes`, for `parities` tiles at a time
    (2: double-buffered; 1: a tile's gets, compute and puts in turn)."""
    channels: int
    planes: int
    segment: int
    per_image: int
    slots: int
    slot_bytes: int
    parities: int = 2

    def count(self, shape):
        return -(-shape[1] // self.channels)


def tiles(config, shape, es, streams):
    """The resident scheme's tiles for x of `shape` (element size `es`) with `streams` inputs
    held per tile (forward 1, backward 2): double-buffered where a tile fits half the core
    group's LDM, else one at a time where it fits all of it; None when a channel does not fit
    (the streaming scheme then) or the mesh is not the 8 x 8 one the scheme is tested on.
    Pieces of whole lines where the planes allow; at least as many pieces per tile as CPEs
    where the batch and channels allow."""
    if config.num_cpes != 64:
        return None
    free = GROUP_KERNEL.arena(config.ldm_bytes, nargs=1).free
    for parities in (2, 1):
        layout = _tiles(config, shape, es, free // (parities * streams))
        if layout:
            return dataclasses.replace(layout, parities=parities)
    return None


def _tiles(config, shape, es, budget):
    """Tiles whose slots take at most `budget` bytes of each CPE's LDM per stream and parity."""
    batch, channels, h, w = shape
    plane, cpes, line = h * w, config.num_cpes, config.dma_transaction_bytes

    def ceil(a, b):
        return -(-a // b)

    def fitting(pieces, elements):
        slots, slot = ceil(pieces, cpes), align(elements * es)
        return (slots, slot) if slots <= MAX_SLOTS and slots * slot <= budget else None

    whole = None
    if plane % 4 == 0:        # whole planes start on vectors: several channels per piece
        planes = min(channels, next(m for m in range(1, 9) if m * plane * es % line == 0))
        per_image = min(ceil(cpes, batch), ceil(channels, planes), MAX_TILE // planes)
        if per_image == 1:    # the images give every CPE a piece: the largest pieces that fit
            planes = next((m for m in range(min(channels, MAX_TILE) // planes * planes,
                                            planes, -planes) if fitting(batch, m * plane)),
                          planes)
        fit = fitting(batch * per_image, planes * plane)
        if fit:
            whole = Tiles(planes * per_image, planes, 0, per_image, *fit)
    # segments of whole lines of M channels' planes, about a piece per CPE but none under
    # MIN_SEGMENT_BYTES, M as large as keeps 8 tiles (each tile's group sums and finish are
    # paid once for its M channels; fewer, larger tiles would leave the first tile's gets and
    # the last one's puts exposed)
    step = line // es
    least = ceil(MIN_SEGMENT_BYTES // es, step) * step
    for m in range(min(MAX_TILE, max(1, channels // 8)), 0, -1):
        segment = min(plane, max(least, ceil(ceil(plane, ceil(cpes, batch * m)), step) * step))
        per_plane = ceil(plane, segment)
        fit = fitting(batch * per_plane * m, segment)
        if fit:
            cut = Tiles(m, 0, segment, per_plane * m, *fit)
            break
    else:
        return whole
    # whole planes unless segments keep more CPEs busy (B = 1, CNHW's one image: whole
    # planes would be a piece per channel)
    if whole and batch * whole.per_image >= min(cpes, batch * cut.per_image):
        return whole
    return cut


@dataclass(frozen=True)
class Pieces:
    """How x is cut (kernels/dnn/batchnorm.s): `channels` > 0: the planes of that many
    consecutive channels of one image (`blocks` per image); else `planes` > 0 whole planes of
    one channel, or segments of `segment` elements of one plane (`segments` per plane).
    `per_channel`: the records a channel's statistics come in; `elements`: the largest piece."""
    per_channel: int
    planes: int
    segment: int
    segments: int
    elements: int
    channels: int = 0
    blocks: int = 0

    def units(self, shape):
        return shape[0] * self.blocks if self.channels else shape[1] * self.per_channel

    def records(self, shape):
        """The per-unit records a statistics launch writes (channels: M per unit)."""
        return self.units(shape) * max(1, self.channels)

    def words(self, shape):
        batch, channels, h, w = shape
        if self.channels:
            return [batch, h * w, channels, self.blocks, -self.channels, 0, 0]
        return [batch, h * w, channels, self.per_channel, self.planes, self.segment,
                self.segments]


def pieces(config, shape, es, streams, workers=None) -> Pieces:
    """The pieces of x of `shape` (element size `es`) for launches moving `streams` piece
    buffers (double-buffered, with a per-channel record beside them) over `workers` CPEs
    (default: the whole chip's, whatever cgs: the same sums)."""
    workers = workers or config.num_cpes * config.num_cgs
    batch, channels, h, w = shape
    plane = h * w
    line = config.dma_transaction_bytes
    frame = stream.arena(config, KERNEL).free // 2
    free = frame - 2 * APPLY_BYTES
    budget = min(MAX_PIECE_BYTES, free // streams // VECTOR * VECTOR)
    if plane * es <= budget and plane % 4 == 0:
        # consecutive channels' planes (whole vectors each): one contiguous DMA, whole lines
        # when the piece is a multiple of a line and that costs at most half the channels;
        # no fewer pieces than CPEs when the planes allow it; the apply launch holds a
        # channel's APPLY_BYTES beside the pieces for each of the M channels
        most = min(channels, budget // (plane * es), max(1, batch * channels // workers),
                   frame // (streams * plane * es + APPLY_BYTES))
        m = next((m for m in range(most, most // 2, -1) if m * plane * es % line == 0), most)
        return Pieces(batch, 0, 0, 0, m * plane, channels=m, blocks=-(-channels // m))
    if plane * es <= budget:
        # whole planes; no fewer pieces than CPEs when the planes allow it
        planes = min(batch, budget // (plane * es), max(1, batch * channels // workers))
        per_channel = -(-batch // planes)
        return Pieces(per_channel, -(-batch // per_channel), 0, 0,
                      -(-batch // per_channel) * plane)
    segments = -(-plane * es // budget)
    step = line // es         # segments of whole lines
    segment = -(-(-(-plane // segments)) // step) * step
    segments = -(-plane // segment)
    return Pieces(batch * segments, 0, segment, segments, segment)


def view(shape, layout="NCHW"):
    """The NCHW shape the kernels see for x of `shape` laid out as `layout`: (B, C, H, W)
    itself for NCHW, else (outer, C, 1, inner), outer the product of the axes before C and
    inner of those after it (the same bytes: channel c's elements are the runs of `inner`
    starting at (o C + c) inner)."""
    order = axes(layout)
    if len(shape) != 4:
        names = ", ".join(order.replace("N", "B"))
        raise DnnError(f"x must be ({names}) (layout {layout}), got shape {tuple(shape)}")
    if order == "NCHW":
        return tuple(shape)
    axis = order.index("C")
    return (int(np.prod(shape[:axis])), shape[axis], 1, int(np.prod(shape[axis + 1:])))


def _per_channel(channels, dtype, **arrays):
    out = float_arrays(dtype, **arrays)
    for name, array in zip(arrays, out):
        if array.shape != (channels,):
            raise DnnError(f"{name} must have shape ({channels},) (one per channel), got "
                           f"{array.shape}")
    return out


class _Run:
    """The launches of one call: `shape`, element size, machine and core groups; `parts`
    collects their Stats and `transferred` the bytes they move."""

    def __init__(self, machine, cgs, shape, es, piece_streams, engine, name, plans=None):
        self.machine, self.cgs, self.shape, self.es, self.engine, self.name = \
            machine, cgs, shape, es, engine, name
        self.pieces = pieces(machine.config, shape, es, piece_streams)
        self.parts = []
        self.plans = plans        # a list: launch only collects stream.job_records' arguments

    def launch(self, body, inputs, outputs, *, per_channel=None, group=(0, 0, 0, 0),
               params=()):
        """Run `body` over the pieces (through bn_planes), or over `per_channel` units per
        channel (folds: `group` = (records per unit, records per channel, their strides
        between channels and within one); finishes). `inputs` / `outputs`: (mode, bytes,
        address) per stream; a piece stream's bytes are ignored. The Stats go to `parts`."""
        batch, channels, h, w = self.shape
        inner = 0
        if per_channel is None:
            words = self.pieces.words(self.shape)
            units = self.pieces.units(self.shape)
            piece_bytes = self.pieces.elements * self.es
            body, inner = "bn_planes", KERNEL.symbol(body)
            records = max(1, self.pieces.channels)
        else:             # no piece streams: a harmless geometry of one-element planes
            words = [per_channel, 1, channels, per_channel, 1, *group[2:]]
            units, piece_bytes, records = channels * per_channel, 0, 1
        streams = list(inputs) + list(outputs)
        kinds = [nbytes << 3 | mode for mode, nbytes, _ in streams]
        kinds = kinds[:len(inputs)] + [NONE] * (stream.MAX_IN - len(inputs)) + \
            kinds[len(inputs):] + [NONE] * (stream.MAX_OUT - len(outputs))
        buffers = [piece_bytes if mode == PIECE else nbytes * (
            group[0] if mode == GROUP else records) for mode, nbytes, _ in streams]
        moved = [0, 0]
        for index, (mode, nbytes, _) in enumerate(streams):
            total = (batch * channels * h * w * self.es if mode == PIECE else
                     nbytes * {UNIT: units * records, GROUP: channels * group[1],
                               CHANNEL: channels}.get(mode, 0))
            moved[index >= len(inputs)] += total
        plan = dict(name=self.name, body=body, plan="bn_plan",
                    inputs=[a for _, _, a in inputs], outputs=[a for _, _, a in outputs],
                    buffer_bytes=buffers, units=units, es=self.es, params=params,
                    ints=words + list(group[:2]) + kinds + [inner], kernel=KERNEL)
        if self.plans is not None:
            self.plans.append(plan)
            return
        self.parts.append(stream.launch(self.machine, self.cgs, moved=tuple(moved),
                                        engine=self.engine, details=dict(op=body), **plan))

    def fold(self, body, records):
        """Fold the statistics launch's records at `records` (REC_BYTES each) until one per
        channel is left; returns its address. Channel pieces leave a channel's records one
        image apart (strided); a fold's output is by channel."""
        per_channel = self.pieces.per_channel
        strides = (1, self.pieces.blocks * self.pieces.channels) if self.pieces.channels \
            else (per_channel, 1)
        limit = min(MAX_FOLD, (stream.arena(self.machine.config, KERNEL).free // 2 -
                               REC_BYTES) // REC_BYTES)
        while per_channel > 1:
            size = min(per_channel, limit)
            groups = -(-per_channel // size)
            out = self.machine.mem.alloc(self.shape[1] * groups * REC_BYTES)
            self.launch(body, [(GROUP, REC_BYTES, records)], [(UNIT, REC_BYTES, out)],
                        per_channel=groups, group=(size, per_channel, *strides))
            records, per_channel, strides = out, groups, (groups, 1)
        return records

    def stats(self, moved, **details):
        """One Stats for the launches: bandwidth against the bytes the operator must move
        (`moved`: read, written); ``bytes_transferred``: what the launches moved."""
        config = self.machine.config
        total = combined(self.parts, op=self.name, cgs=self.cgs, scheme="streaming",
                         pieces=self.pieces,
                         bytes_transferred=sum(p.bytes_moved for p in self.parts), **details)
        return stream.with_bandwidth(total, config, moved, self.cgs)


def row_tiles(layout):
    """Whether every piece of the tiles is an image's part of a whole tile (a piece per image
    holding all the tile's channels, as RCNB's positions): the row passes then go channel by
    channel over the slots (batchnorm_group.s)."""
    return layout.per_image == 1 and layout.planes == layout.channels


def _skip(config, layout, shape, es):
    """The bytes between a CPE's pieces in memory when they are one strided request per stream
    (a piece per image holding all the tile's channels, filling its slot: the CPE's pieces are
    `num_cpes` images apart), else 0 (a request per piece)."""
    batch, channels, h, w = shape
    piece = layout.planes * h * w * es
    skip = config.num_cpes * channels * h * w * es - piece
    return skip if row_tiles(layout) and layout.slots > 1 and piece == layout.slot_bytes and \
        0 < skip < 1 << 32 else 0


def _resident(machine, cgs, engine, name, layout, shape, es, inputs, output, param, result,
              results, routines, moved, settings=(0.0, 0.0)):
    """One launch of the resident kernel over `cgs` core groups (contiguous ranges of tiles):
    `inputs` (x, or dy and x), `output` (y or dx), `param` the per-channel 4 elements,
    `result` the per-channel `results` elements written, `routines` the pass routines' names
    (G_F0..), `settings` (momentum, eps). Returns its Stats with the bandwidth of `moved`."""
    config = machine.config
    batch, channels, h, w = shape
    space = GROUP_KERNEL.arena(config.ldm_bytes, nargs=1)
    slots = space.take(layout.parities * len(inputs) * layout.slots * layout.slot_bytes)
    record = GROUP_KERNEL.record("G_", "GJOB_BYTES")
    n = batch * h * w
    jobs = []
    skip = _skip(config, layout, shape, es)
    for first, last in split(layout.count(shape), cgs):
        words = record.new(
            in0=inputs[0], in1=inputs[-1] if len(inputs) > 1 else 0, out=output, param=param,
            result=result, results=results, b=batch, c=channels, hw=h * w, es=es,
            m=layout.channels, planes=layout.planes, seg=layout.segment, q=layout.per_image,
            slot=layout.slot_bytes, k=layout.slots, buf=slots, first=first, last=last,
            streams=len(inputs), cols=config.mesh_cols, rows=config.mesh_rows,
            n=float(n), n1=float(n - 1), momentum=settings[0], eps=settings[1],
            parities=layout.parities, skip=skip,
            **{f"f{i}": GROUP_KERNEL.symbol(f"{routine}_{stream.SUFFIX[es]}") if routine else 0
               for i, routine in enumerate(routines)})
        jobs.append([machine.mem.put(words)])
    part = GROUP_KERNEL.launch_cgs(machine, jobs, flops=0, engine=engine,
                                   details=dict(op=name))
    transferred = (len(inputs) + 1) * n * channels * es + (4 + results) * channels * es
    total = combined([part], op=name, cgs=len(jobs), scheme="resident", tiles=layout,
                     bytes_transferred=transferred)
    return stream.with_bandwidth(total, config, moved, len(jobs))


@host_operator
def batchnorm_forward(x, gamma, beta, running_mean, running_var, *, training=True,
                      momentum=0.1, eps=1e-5, layout="NCHW", machine=None, cgs=1,
                      engine="c"):
    """y = (x - mean) / sqrt(var + eps) gamma + beta per channel of x (B, C, H, W) laid out as
    `layout` (its axes in that order; y in the same), any size. Training: the batch's mean
    and biased variance, running stats updated as (1 - momentum) r + momentum s with the
    unbiased variance; inference: the running stats (returned unchanged). Returns ((y,
    new_running_mean, new_running_var, saved_mean, saved_invstd), Stats): saved_* are the
    mean and 1/sqrt(var + eps) used, for batchnorm_backward."""
    (x,) = float_arrays(x=x)
    shape = view(x.shape, layout)
    batch, channels, h, w = shape
    params = _per_channel(channels, x.dtype, gamma=gamma, beta=beta,
                          running_mean=running_mean, running_var=running_var)
    if not isinstance(training, bool):
        raise DnnError(f"training must be True or False, got {training!r}")
    if training and batch * h * w < 2:
        raise DnnError("batchnorm_forward(training=True) needs more than one value per "
                       f"channel, got x of shape {x.shape}")
    settings = [scalar("momentum", momentum), scalar("eps", eps), float(training)]
    if not 0 <= settings[0] <= 1:       # the running statistics' weight of the batch's
        raise DnnError(f"momentum must be in [0, 1], got {momentum}")
    if settings[1] < 0:                 # 1 / sqrt(var + eps): a NaN for a constant channel
        raise DnnError(f"eps must be >= 0, got {eps}")
    machine, cgs = machine_and_cgs(machine, cgs)
    es, mem = x.itemsize, machine.mem
    x_addr = mem.put(np.ascontiguousarray(x))
    record = mem.put(np.ascontiguousarray(np.stack(params, axis=1)))   # gamma, beta, rm, rv
    moved = (x.nbytes + 4 * channels * es, x.nbytes + 4 * channels * es)
    cut = tiles(machine.config, shape, es, 1)
    if cut and (training or row_tiles(cut)):    # inference: where the streaming scheme would
        y, out = mem.alloc(x.nbytes), mem.alloc(channels * 4 * es)   # write a record per run
        rows = "rows_" if row_tiles(cut) else ""
        routines = ((f"bn_group_{rows}sums", f"bn_group_{rows}deviations", "bn_group_finish")
                    if training else (None, None, "bn_group_infer_finish"))
        stats = _resident(machine, cgs, engine, "batchnorm_forward", cut, shape, es,
                          [x_addr], y, record, out, 4, routines + (f"bn_group_{rows}apply",),
                          moved, settings[:2])
        stats.details.update(training=training, layout=layout)
        out = mem.get(out, (channels, 4), x.dtype)
        return (mem.get(y, x.shape, x.dtype), *(out[:, i].copy() for i in range(4))), stats
    run = _Run(machine, cgs, shape, es, 2, engine, "batchnorm_forward")
    statistics = (NONE, 0, 0)
    if training:
        pieces = mem.alloc(run.pieces.records(shape) * REC_BYTES)
        run.launch(f"bn_stats_{stream.SUFFIX[es]}", [(PIECE, 0, x_addr)],
                   [(UNIT, REC_BYTES, pieces)])
        statistics = (CHANNEL, REC_BYTES, run.fold("bn_fold_stats", pieces))
    out, apply = mem.alloc(channels * 4 * es), mem.alloc(channels * APPLY_BYTES)
    y = mem.alloc(x.nbytes)
    _normalise(run, statistics, record, x_addr, (out, apply, y), settings)
    stats = run.stats(moved, training=training, layout=layout)
    out = mem.get(out, (channels, 4), x.dtype)
    return (mem.get(y, x.shape, x.dtype), *(out[:, i].copy() for i in range(4))), stats


def _normalise(run, statistics, record, x, outputs, settings):
    """The forward's last two launches: each channel's finish (from its `statistics`, none in
    inference, and its gamma, beta, running mean and variance `record`) into the `out` record
    and the `apply` coefficients, then y from x and apply; `outputs` = (out, apply, y)."""
    es = run.es
    out, apply, y = outputs
    run.launch(f"bn_finish_forward_{stream.SUFFIX[es]}", [statistics, (CHANNEL, 4 * es, record)],
               [(CHANNEL, 4 * es, out), (CHANNEL, APPLY_BYTES, apply)], per_channel=1,
               params=settings)
    run.launch(f"bn_apply_forward_{stream.SUFFIX[es]}",
               [(PIECE, 0, x), (CHANNEL, APPLY_BYTES, apply)], [(PIECE, 0, y)])


def inference_plans(machine, shape, dtype, eps=1e-5):
    """The ``stream.job_records`` arguments of the launches ``batchnorm_forward(training=False)``
    runs on one core group for NCHW x of `shape` where it streams, every address 0 (the caller
    places them: finish inputs (none, record), outputs (out, apply); apply inputs (x, apply),
    output y). A DnnError where it would take the resident scheme instead."""
    es = np.dtype(dtype).itemsize
    cut = tiles(machine.config, shape, es, 1)
    if cut and row_tiles(cut):
        raise DnnError(f"batchnorm inference of {shape} runs resident, not as job records")
    run = _Run(machine, 1, shape, es, 2, "c", "batchnorm_forward", plans=[])
    _normalise(run, (NONE, 0, 0), 0, 0, (0, 0, 0), [0.1, scalar("eps", eps), 0.0])
    return run.plans


@host_operator
def batchnorm_backward(dy, x, gamma, saved_mean, saved_invstd, *, layout="NCHW",
                       machine=None, cgs=1, engine="c"):
    """The gradients of batchnorm_forward(training=True) from dy and its saved mean and
    invstd, dy and x laid out as `layout` (dx in the same): returns ((dx, dgamma, dbeta),
    Stats)."""
    dy, x = float_arrays(dy=dy, x=x)
    if dy.shape != x.shape:
        raise DnnError(f"dy must have x's shape {x.shape}, got {dy.shape}")
    shape = view(x.shape, layout)
    batch, channels, h, w = shape
    params = _per_channel(channels, x.dtype, gamma=gamma, saved_mean=saved_mean,
                          saved_invstd=saved_invstd)
    machine, cgs = machine_and_cgs(machine, cgs)
    es, mem = x.itemsize, machine.mem
    dy_addr, x_addr = mem.put(np.ascontiguousarray(dy)), mem.put(np.ascontiguousarray(x))
    record = mem.put(np.ascontiguousarray(np.stack(params + [np.zeros_like(params[0])],
                                                   axis=1)))     # gamma, mean, invstd, 0
    moved = (2 * x.nbytes + 3 * channels * es, x.nbytes + 2 * channels * es)
    cut = tiles(machine.config, shape, es, 2)
    if cut:
        rows = "rows_" if row_tiles(cut) else ""
        dx, out = mem.alloc(x.nbytes), mem.alloc(channels * 2 * es)
        stats = _resident(machine, cgs, engine, "batchnorm_backward", cut, shape, es,
                          [dy_addr, x_addr], dx, record, out, 2,
                          (f"bn_group_{rows}backward_sums", "bn_group_backward_means",
                           f"bn_group_{rows}backward_apply"), moved)
        stats.details.update(layout=layout)
        out = mem.get(out, (channels, 2), x.dtype)
        return (mem.get(dx, x.shape, x.dtype), out[:, 0].copy(), out[:, 1].copy()), stats
    run = _Run(machine, cgs, shape, es, 3, engine, "batchnorm_backward")
    pieces = mem.alloc(run.pieces.records(shape) * REC_BYTES)
    run.launch(f"bn_backward_stats_{stream.SUFFIX[es]}",
               [(PIECE, 0, dy_addr), (PIECE, 0, x_addr), (CHANNEL, 4 * es, record)],
               [(UNIT, REC_BYTES, pieces)])
    sums = run.fold("bn_fold_sums", pieces)
    out, apply = mem.alloc(channels * 2 * es), mem.alloc(channels * APPLY_BYTES)
    run.launch(f"bn_finish_backward_{stream.SUFFIX[es]}",
               [(CHANNEL, REC_BYTES, sums), (CHANNEL, 4 * es, record)],
               [(CHANNEL, 2 * es, out), (CHANNEL, APPLY_BYTES, apply)], per_channel=1)
    dx = mem.alloc(x.nbytes)
    run.launch(f"bn_apply_backward_{stream.SUFFIX[es]}",
               [(PIECE, 0, dy_addr), (PIECE, 0, x_addr), (CHANNEL, APPLY_BYTES, apply)],
               [(PIECE, 0, dx)])
    stats = run.stats(moved, layout=layout)
    out = mem.get(out, (channels, 2), x.dtype)
    return (mem.get(dx, x.shape, x.dtype), out[:, 0].copy(), out[:, 1].copy()), stats
