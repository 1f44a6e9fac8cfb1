"""Tensor layout transforms on the streaming driver (``kernels/dnn/transform.inc``).

A layout names the order of a 4-D tensor's axes in memory, outermost first, with the letters
N (batch), C (channels), H (rows), W (columns). ``LAYOUTS`` registers the ones the library
uses: NCHW (Caffe, PyTorch), NHWC, CNHW, and RCNB, the thesis' (R, C, N, B) of swDNN's
convolution: rows, columns, channels, batch = H, W, C, N with the batch innermost.

``transform(x, src_layout, dst_layout)`` takes x laid out (shaped) as `src_layout` and returns
it laid out as `dst_layout`. Each pass on the VM swaps two adjacent groups of axes,
(A, P, Q, D) -> (A, Q, P, D); the host chains the fewest passes that reach the target over
the axes longer than 1 (a pass with P or Q = 1 moves nothing); a transform to the same layout,
or one that only relabels axes of length 1 (``moves_nothing``: NCHW to CNHW at batch 1), is one
copying pass.
"""
from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np

from ..runtime import host_operator
from . import stream
from .common import DnnError, combined, float_arrays, machine_and_cgs

LAYOUTS = {"NCHW": "NCHW", "NHWC": "NHWC", "CNHW": "CNHW", "RCNB": "HWCN"}
MAX_TILE = 64                 # rows of a tile along P and Q


def axes(layout: str, name: str = "layout") -> str:
    """The axis letters of `layout` (the argument `name`)."""
    try:
        return LAYOUTS[layout]
    except (KeyError, TypeError):
        raise DnnError(f"{name}: unknown layout {layout!r}; known: {', '.join(LAYOUTS)}") \
            from None


def group_swaps(src: str, dst: str):
    """The fewest swaps of adjacent axis groups taking order `src` to `dst`: a list of
    (i, j, k) meaning order[i:j] and order[j:k] trade places."""
    moves = [(i, j, k) for i, j, k in itertools.combinations(range(len(src) + 1), 3)]
    seen, queue = {src: []}, deque([src])
    while queue:
        order = queue.popleft()
        if order == dst:
            return seen[order]
        for i, j, k in moves:
            nxt = order[:i] + order[j:k] + order[i:j] + order[k:]
            if nxt not in seen:
                seen[nxt] = seen[order] + [(i, j, k)]
                queue.append(nxt)
    raise DnnError(f"no way from {src} to {dst}")     # unreachable: group swaps generate all


def _tile(config, p, q, d, es):
    """(PB, QB, DB) of a tile whose in and out buffers, double-buffered, fit the LDM arena."""
    budget = stream.arena(config).free // 4 - 32
    if d * es > budget:
        return 1, 1, budget // es
    pb, qb = min(p, MAX_TILE), min(q, MAX_TILE)
    while pb * qb * d * es > budget:
        if pb >= qb:
            pb = (pb + 1) // 2
        else:
            qb = (qb + 1) // 2
    return pb, qb, d


def swap_plan(config, es, a, p, q, d, source, target) -> dict:
    """The ``stream.launch`` / ``job_records`` arguments (but the machine, cgs and timing ones)
    of one pass (A, P, Q, D) -> (A, Q, P, D) of `es`-byte elements from `source` to `target`."""
    pb, qb, db = _tile(config, p, q, d, es)
    counts = (-(-p // pb), -(-q // qb), -(-d // db))
    tile = pb * qb * db * es
    return dict(name="transform", body=f"transform_{stream.SUFFIX[es]}",
                plan="transform_plan", inputs=[source], outputs=[target],
                buffer_bytes=[tile, tile], units=a * counts[0] * counts[1] * counts[2],
                es=es, ints=[p, q, d, pb, qb, db, *counts, int(db == d)], kernel=stream.KERNEL)


def permute(shape, src: str, dst: str) -> tuple:
    """A 4-D shape in axis order ``src`` (e.g. "NCHW") as the same tensor's shape in order
    ``dst``."""
    sizes = dict(zip(src, shape))
    return tuple(sizes[axis] for axis in dst)


def _moving_axes(shape, src_layout: str, dst_layout: str):
    """The axis orders of `src_layout` and `dst_layout` without the axes of length 1 (those
    move nothing) and the sizes of the axes, for a tensor of `shape` laid out as
    `src_layout`."""
    src, dst = axes(src_layout, "src_layout"), axes(dst_layout, "dst_layout")
    sizes = dict(zip(src, shape))
    return ("".join(c for c in src if sizes[c] != 1), "".join(c for c in dst if sizes[c] != 1),
            sizes)


def moves_nothing(shape, src_layout: str, dst_layout: str) -> bool:
    """Whether the tensor of `shape` has the same bytes in both (different) layouts: only
    axes of length 1 change places, e.g. NCHW and CNHW at batch 1 -- a relabelling, which a
    caller may take as a view of its operand instead of a ``transform``."""
    src, dst, _ = _moving_axes(shape, src_layout, dst_layout)
    return src_layout != dst_layout and src == dst


def swap_groups(shape, src_layout: str, dst_layout: str) -> list:
    """The axis letters (A, P, Q, D) of each pass of ``swap_passes`` (empty when nothing
    moves: the one copying pass)."""
    order, dst, _ = _moving_axes(shape, src_layout, dst_layout)
    groups = []
    for i, j, k in group_swaps(order, dst):
        groups.append((order[:i], order[i:j], order[j:k], order[k:]))
        order = order[:i] + order[j:k] + order[i:j] + order[k:]
    return groups


def swap_passes(shape, src_layout: str, dst_layout: str) -> list:
    """(A, P, Q, D) of each pass taking a tensor of `shape` (in `src_layout`) to `dst_layout`,
    the fewest over the axes longer than 1 (one copying pass (1, 1, 1, size) when nothing
    moves)."""
    sizes = dict(zip(axes(src_layout, "src_layout"), shape))
    groups = swap_groups(shape, src_layout, dst_layout)
    if not groups:
        return [(1, 1, 1, int(np.prod(shape, dtype=np.int64)))]
    return [tuple(int(np.prod([sizes[c] for c in group], dtype=np.int64)) for group in pass_)
            for pass_ in groups]


def tile_round(shape, src_layout: str, dst_layout: str, axis: str, es: int, config) -> int:
    """The smallest length of `axis` (a letter of `src_layout`) whose multiples are cut into
    the tiles of the full tensor's passes: along a pass's P or Q (and a D cut into pieces)
    the tiles are whole rows of the group, so a sample of the tensor that keeps the tiles
    must hold whole tiles (a sample of fewer rows than a tile runs smaller tiles, whose
    transactions cost more per byte: its cycles are not proportional)."""
    sizes = dict(zip(axes(src_layout, "src_layout"), shape))
    round_ = 1
    for groups, (_, p, q, d) in zip(swap_groups(shape, src_layout, dst_layout),
                                    swap_passes(shape, src_layout, dst_layout)):
        tiles = _tile(config, p, q, d, es)
        for group, tile, whole in zip(groups[1:], tiles, (False, False, tiles[2] == d)):
            if axis in group and not whole:
                inner = int(np.prod([sizes[c] for c in group[group.index(axis) + 1:]]))
                round_ = math.lcm(round_, tile // math.gcd(tile, inner))
    return round_


def _swap_pass(machine, cgs, data_addr, es, a, p, q, d, engine):
    out = machine.mem.alloc(a * p * q * d * es)
    nbytes = a * p * q * d * es
    plan = swap_plan(machine.config, es, a, p, q, d, data_addr, out)
    stats = stream.launch(machine, cgs, **plan, moved=(nbytes, nbytes), engine=engine,
                          details=dict(swap=(a, p, q, d), tile=tuple(plan["ints"][3:6])))
    return out, stats


@host_operator
def transform(x, src_layout, dst_layout, *, machine=None, cgs=1, engine="c"):
    """x (4-D, shaped as `src_layout`) laid out as `dst_layout`; returns (y, stats). The
    bytes are moved as raw words: values, NaN payloads and signed zeros are kept exactly."""
    src, dst = axes(src_layout, "src_layout"), axes(dst_layout, "dst_layout")
    (x,) = float_arrays(x=x)
    if x.ndim != 4:
        raise DnnError(f"x must be 4-D ({src_layout}), got shape {x.shape}")
    machine, cgs = machine_and_cgs(machine, cgs)
    sizes = dict(zip(src, x.shape))
    es = x.dtype.itemsize
    addr = machine.mem.put(np.ascontiguousarray(x))
    parts = []
    for a, p, q, d in swap_passes(x.shape, src_layout, dst_layout):
        addr, stats = _swap_pass(machine, cgs, addr, es, a, p, q, d, engine)
        parts.append(stats)
    shape = tuple(sizes[c] for c in dst)
    y = machine.mem.get(addr, shape, x.dtype)
    stats = combined(parts, op="transform", passes=len(parts))
    moved = sum(p.bytes_moved for p in parts)
    stats.details.update(bytes_moved=moved, bandwidth_gbps=moved / stats.seconds / 1e9,
                         stream_gbps=parts[0].stream_gbps,
                         bandwidth_ratio=moved / stats.seconds / 1e9 / parts[0].stream_gbps)
    return y, stats
