"""The IR optimiser (Fang 2019 §6.3): the geometry of each gemm_op operand (what block every
CPE holds, where it lives in memory: one strided DMA), DMA placement (Algorithm 7), double
buffering with the priming DMA (Algorithm 8 is the next-iteration address, computed by the
code generator), and the checks that refuse a schedule the primitive cannot run.

The primitive (kernels/gemm/gemm_prim.s) holds A, B, C in 8 x 8 blocks: CPE (i, j) has A's
(M chunk i, K chunk j), B's (K chunk i, N chunk j), C's (M chunk i, N chunk j). Each LDM block
is `rows` x `vec` with the vector dimension contiguous: A K x M, B K x N, C N x M (vector M, the
nm variant) or M x N (vector N, mn). A block is one strided DMA when its vector chunk is
contiguous in memory and its rows are equally spaced: `rows` blocks of `vec` elements, `pitch`
apart (the descriptor's block size and stride).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ArgumentError
from .ir import Dma, Expr, For, GemmOp, ScheduleError, Seed, walk

MESH = 8
VECTOR_TILE, SPLAT_TILE = 16, 4          # the primitive's register tile (hostlib.blas.primitive)
# operand -> (vector dimension, row dimension, the mesh coordinate that picks each chunk)
OPERAND_DIMS = {"a": ("m", "k", "i", "j"), "b": ("n", "k", "j", "i")}
C_DIMS = {"M": ("m", "n", "i", "j"), "N": ("n", "m", "j", "i")}


@dataclass
class Operand:
    """One operand's per-CPE block: `base` (elements, over the loop iterators) plus the CPE's
    chunk offsets `offsets["i"][i] + offsets["j"][j]`; `rows` x `vec` elements in LDM, rows
    `pitch` apart in memory."""
    key: str
    tensor: str
    base: Expr
    offsets: dict
    rows: int
    vec: int
    pitch: int
    deps: tuple
    line: int | None
    depth: int = -1             # where its DMA is placed: the loop's index, -1 the root
    spans: tuple = ()           # resident: the loops inside `depth` its blocks are kept for
    window: tuple = ()          # sliding window: (p, q), the block of p + q kept over p

    @property
    def elements(self) -> int:
        return self.rows * self.vec


@dataclass
class Plan:
    """A scheduled seed ready for code generation."""
    seed: Seed
    gemm: GemmOp
    loops: tuple                # the For nodes around the gemm_op, outermost first
    extents: dict               # M, N, K
    blocks: dict                # mb, nb, kb
    operands: dict              # "a", "b", "c" -> Operand
    body: list                  # the optimised IR: the seed's nest with the Dma nodes
    strides: dict               # tensor -> {dim: element stride}
    trips: dict                 # loop iterator -> its iterations

    @property
    def flops(self) -> int:
        calls = 1
        for count in self.trips.values():
            calls *= count
        return 2 * calls * self.extents["m"] * self.extents["n"] * self.extents["k"]


def _const(consts, expr: Expr, what: str, line) -> int:
    try:
        return expr.value(consts)
    except ValueError:
        raise ScheduleError("constant bounds", f"{what} {expr} is not a constant", line) from None


def _trip_count(loop: For, consts) -> int:
    lo, step, hi = (_const(consts, e, f"loop {loop.iter}'s bound", loop.line)
                    for e in (loop.min, loop.stride, loop.max))
    if step < 1 or hi <= lo:
        raise ScheduleError("loop bounds", f"loop {loop.iter} must run at least once with a "
                            f"positive stride (min {lo}, stride {step}, max {hi})", loop.line)
    return -(-(hi - lo) // step)


def tensor_strides(seed: Seed) -> dict:
    consts = seed.registry.const_values()
    strides = {}
    for name, tensor in seed.registry.tensors.items():
        step, out = 1, {}
        for dim in reversed(tensor.dims):
            out[dim] = step
            step *= consts[dim]
        strides[name] = out
    return strides


def _ranges(consts, loops, trips, gemm: GemmOp) -> dict:
    """iterator -> (lowest, highest) value."""
    ranges = {}
    for loop in loops:
        lo = _const(consts, loop.min, "a loop bound", loop.line)
        step = _const(consts, loop.stride, "a loop bound", loop.line)
        ranges[loop.iter] = (lo, lo + (trips[loop.iter] - 1) * step)
    for it, extent in gemm.fused.items():
        ranges[it] = (0, _const(consts, extent, "a fused extent", gemm.line) - 1)
    return ranges


def _check_bounds(consts, acc, ranges) -> None:
    for dim, expr in acc.index.items():
        lo = hi = expr.subs(consts).const
        for name, coef in expr.subs(consts).terms.items():
            a, b = ranges[name]
            lo += min(coef * a, coef * b)
            hi += max(coef * a, coef * b)
        if lo < 0 or hi >= consts[dim]:
            raise ScheduleError("index in bounds", f"{acc.tensor}'s index {{{dim}, {expr}}} "
                                f"spans {lo}..{hi}, outside 0..{consts[dim] - 1}", acc.line)


def _parts(consts, gemm, acc, dim_key, strides) -> list:
    """[(extent, memory stride)] of a primitive dimension for an operand, outermost first."""
    parts = []
    for part in getattr(gemm, dim_key):
        if part in gemm.fused:
            stride = sum(expr.terms.get(part, 0) * strides[dim]
                         for dim, expr in acc.index.items())
            parts.append((_const(consts, gemm.fused[part], "a fused extent", gemm.line), stride))
        else:
            parts.append((consts[part], strides[part]))
    merged = [parts[-1]]
    for extent, stride in reversed(parts[:-1]):
        inner_extent, inner_stride = merged[0]
        if stride == inner_extent * inner_stride:
            merged[0] = (extent * inner_extent, inner_stride)
        else:
            merged.insert(0, (extent, stride))
    return merged


def _chunk_offsets(parts, chunk) -> list:
    offsets = []
    for c in range(MESH):
        index, offset = c * chunk, 0
        for extent, stride in reversed(parts):
            offset += (index % extent) * stride
            index //= extent
        offsets.append(offset)
    return offsets


def _operand(seed, gemm, key, acc, dims, blocks, strides, ranges) -> Operand:
    vec_dim, row_dim, vec_coord, row_coord = dims
    tstrides = strides[acc.tensor]
    consts = seed.registry.const_values()
    vec_parts = _parts(consts, gemm, acc, vec_dim, tstrides)
    row_parts = _parts(consts, gemm, acc, row_dim, tstrides)
    vec, rows = blocks[vec_dim], blocks[row_dim]
    if vec_parts[-1][1] != 1 or vec_parts[-1][0] % vec:
        raise ScheduleError("contiguous DMA", f"operand {acc.tensor}: a CPE's "
                            f"{vec_dim.upper()} chunk ({vec} elements) is not contiguous in "
                            f"memory (tensor order {seed.registry.tensors[acc.tensor].dims}); "
                            "change the layout", acc.line)
    if row_parts[-1][0] % rows:
        raise ScheduleError("contiguous DMA", f"operand {acc.tensor}: a CPE's "
                            f"{row_dim.upper()} chunk ({rows} rows) is not equally spaced in "
                            "memory", acc.line)
    fixed = {it: 0 for it in gemm.fused}
    base = Expr()
    for dim, expr in acc.index.items():
        base = base + expr.subs(fixed).subs(consts) * tstrides[dim]
    loops_in_order = [it for it in ranges if it not in gemm.fused]
    deps = tuple(it for it in loops_in_order if it in base.names)
    offsets = {vec_coord: _chunk_offsets(vec_parts, vec), row_coord: _chunk_offsets(row_parts, rows)}
    return Operand(key, acc.tensor, base, offsets, rows, vec, row_parts[-1][1], deps, acc.line)


def plan(seed: Seed) -> Plan:
    """Check the scheduled seed and infer its DMAs."""
    found = [(node, loops) for node, loops in walk(seed.body) if isinstance(node, GemmOp)]
    if len(found) != 1:
        raise ScheduleError("one gemm_op", f"the code generator takes one gemm_op per seed, "
                            f"found {len(found)}")
    gemm, loops = found[0]
    for node, _ in walk(seed.body):
        if isinstance(node, For) and all(node is not loop for loop in loops):
            raise ScheduleError("perfect nest", f"loop {node.iter} does not enclose the "
                                "gemm_op", node.line)
    for loop in loops:
        if len(loop.body) != 1:
            raise ScheduleError("perfect nest", f"loop {loop.iter} holds more than the nest",
                                loop.line)
    if gemm.layout[0] != "notrans" or gemm.layout[1] != "trans":
        raise ScheduleError("layout", "the primitive's LDM blocks are K-major (A notrans, B "
                            f"trans; no DMA transposes); got {gemm.layout}", gemm.line)
    if gemm.layout[2] != ("notrans" if gemm.vector == "M" else "trans"):
        raise ScheduleError("layout", f"vectorising {gemm.vector} needs C "
                            f"{'notrans' if gemm.vector == 'M' else 'trans'}", gemm.line)
    consts = seed.registry.const_values()
    extents = primitive_extents(gemm, consts)
    blocks = {key: extents[key] // MESH for key in "mnk"}
    trips = {loop.iter: _trip_count(loop, consts) for loop in loops}
    ranges = _ranges(consts, loops, trips, gemm)
    for acc in (gemm.a, gemm.b, gemm.c):
        _check_bounds(consts, acc, ranges)
    strides = tensor_strides(seed)
    dims = dict(OPERAND_DIMS, c=C_DIMS[gemm.vector])
    operands = {key: _operand(seed, gemm, key, getattr(gemm, key), dims[key], blocks, strides,
                              ranges) for key in "abc"}
    for key, op in operands.items():
        op.depth = placement(loops, op.deps)
        if key != "c":
            op.depth, op.spans = _resident(consts, loops, trips, op)
            if not op.spans:
                op.window = _window(consts, loops, trips, op)
            if op.window:
                op.depth = [l.iter for l in loops].index(op.window[0])
    return Plan(seed, gemm, tuple(loops), extents, blocks, operands,
                place_dmas(seed, gemm, loops, operands), strides, trips)


def primitive_extents(gemm: GemmOp, consts: dict) -> dict:
    """The gemm_op's M, N, K at these ConstVar values; raises the primitive's constraints
    (multiples of the mesh and of its register tile) as rule `primitive constraint`."""
    extents = {}
    for key in "mnk":
        extent = 1
        for part in getattr(gemm, key):
            try:
                extent *= gemm.fused[part].value(consts) if part in gemm.fused else consts[part]
            except (ArgumentError, KeyError):
                raise ScheduleError("constant bounds", f"the extent of {part} is not a "
                                    "constant", gemm.line) from None
        if extent % MESH:
            raise ScheduleError("primitive constraint", f"{key.upper()} = {extent} is not a "
                                f"multiple of {MESH}", gemm.line)
        extents[key] = extent
    blocks = {key: extents[key] // MESH for key in "mnk"}
    vector, splat = ("m", "n") if gemm.vector == "M" else ("n", "m")
    if blocks[vector] % VECTOR_TILE or blocks[splat] % SPLAT_TILE:
        raise ScheduleError("primitive constraint", f"vectorising {gemm.vector} needs "
                            f"{vector.upper()}/8 a multiple of {VECTOR_TILE} and "
                            f"{splat.upper()}/8 of {SPLAT_TILE}; got M={extents['m']}, "
                            f"N={extents['n']}", gemm.line)
    return extents


def placement(loops, deps) -> int:
    """Algorithm 7: the depth (index into `loops`) of the innermost loop whose iterator the
    DMA's address uses; -1 for the root."""
    for depth in range(len(loops) - 1, -1, -1):
        if loops[depth].iter in deps:
            return depth
    return -1


# LDM bytes (per CPE, at 8 bytes an element) an input may keep resident
RESIDENT_BYTES = 36 * 1024


def _resident(consts, loops, trips, op: Operand) -> tuple:
    """(depth, spans): the thesis' hoisted DMA. An input whose block does not change over a
    loop inside its placement's nest is fetched once outside that loop -- every block of the
    loops it depends on inside, kept in LDM -- at the outermost depth where those blocks fit
    RESIDENT_BYTES (loops from 0 by 1 only). Else (its placement, ()): double-buffered."""
    depth = placement(loops, op.deps)
    for outer in range(-1, depth):
        inside = loops[outer + 1:depth + 1]
        if all(l.iter in op.deps or trips[l.iter] == 1 for l in inside):
            break                           # nothing to reuse from here inwards
        spans = [l for l in inside if l.iter in op.deps]
        if any(_const(consts, l.min, "a loop bound", l.line) != 0 or
               _const(consts, l.stride, "a loop bound", l.line) != 1 for l in spans):
            continue
        count = 1
        for l in spans:
            count *= trips[l.iter]
        if count * op.elements * 8 <= RESIDENT_BYTES:
            return outer, tuple(l.iter for l in spans)
    return depth, ()


def _window(consts, loops, trips, op: Operand) -> tuple:
    """(p, q) when the operand's block is the same at (p, q) as at (p + 1, q - 1) -- its
    address uses the loops p (outer) and q (innermost) with the same coefficient and no
    other loop of more than one iteration inside p, both from 0 by 1: a convolution's input rows over the output rows p and
    the kernel rows q. Its blocks are then kept in a ring of trips(q) + 1 LDM blocks (when
    they fit RESIDENT_BYTES) over p's iterations, and each later iteration of p fetches one
    new block instead of trips(q). Else ()."""
    deps = [l for l in loops if l.iter in op.deps and trips[l.iter] > 1]
    if len(deps) < 2:
        return ()
    p, q = deps[-2], deps[-1]
    if op.base.terms[p.iter] != op.base.terms[q.iter]:
        return ()
    if any(_const(consts, l.min, "a loop bound", l.line) != 0 or
           _const(consts, l.stride, "a loop bound", l.line) != 1 for l in (p, q)):
        return ()
    q_trips = trips[q.iter]
    if q_trips < 2 or trips[p.iter] < 2 or \
            (q_trips + 1) * op.elements * 8 > RESIDENT_BYTES:
        return ()
    return p.iter, q.iter


def place_dmas(seed: Seed, gemm: GemmOp, loops, operands) -> list:
    """The optimised IR: a copy of the nest with each operand's DMA nodes where Algorithm 7
    puts them (leftmost child of the placement loop or the root); inputs double-buffered
    under a loop, with a priming DMA under the root; C got/zeroed there and put back as the
    loop body's rightmost child."""
    copies = [For(l.iter, l.min, l.stride, l.max, [], line=l.line) for l in loops]
    for outer, inner in zip(copies, copies[1:]):
        outer.body.append(inner)
    root = [copies[0]] if copies else []
    (copies[-1].body if copies else root).append(gemm)
    for key in "abc":
        op = operands[key]
        depth = op.depth
        body = copies[depth].body if depth >= 0 else root
        if key == "c":
            body.insert(0, Dma("c", gemm.name, "get", "C_buf", double=depth >= 0, deps=op.deps))
            body.append(Dma("c", gemm.name, "put", "C_buf", double=depth >= 0, deps=op.deps))
            continue
        buffer = f"{key.upper()}_buf"
        if op.window:
            body.insert(0, Dma(key, gemm.name, "get", buffer, deps=op.deps, window=op.window))
            continue
        if op.spans:
            body.insert(0, Dma(key, gemm.name, "get", buffer, deps=op.deps, spans=op.spans))
            continue
        body.insert(0, Dma(key, gemm.name, "get", buffer, double=depth >= 0, deps=op.deps))
        if depth >= 0:
            root.insert(0, Dma(key, gemm.name, "get", buffer, deps=op.deps, prime=True))
    return root
