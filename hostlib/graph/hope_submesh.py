"""HOPE on CPE sub-meshes of one core group (docs/hope.md, "Sub-mesh devices"): the devices are
blocks of whole mesh rows (``R0-3`` is rows 0..3, 32 CPEs), the units the TEs of a Souffle
program (souffle.py), and HOPE's schedulers (hope.py) place them.

``profile`` times every TE alone on every sub-mesh: one generated launch of that TE on the
block's CPEs, run on the VM (memoised by TE structure and block). ``execute`` runs a plan for
real as one launch on the core group: the TEs in the plan's start order, each on its block's
CPEs (the others skip it), a barrier before a TE only among the rows of its block and of the
blocks that wrote what it fetches (``synr 0xff`` then ``sync`` with that row mask), so blocks
run at once between their dependences.

The blocks share the CG's one DMA engine, which the alone latencies cannot see. ``predict``
(the problem's ``model``) therefore times a plan's launch as the executor builds it: every CPE
runs the steps in order (its barriers; if the step's grid has it, the step's table get, its
gets, its loop nest and its puts); each request costs the engine the cycles of the VM's DMA
model (vm/config.py's dma_* parameters through pyengine.transaction_cycles) and the
engine serves the requests first come first served after dma_latency. A TE's loop-nest cycles
on a block are the part of its alone latency this model does not account for DMA
(``_compute_cycles``)."""
from __future__ import annotations

import functools
import heapq
import math
import re
from collections import defaultdict

import numpy as np

from . import souffle_codegen as codegen
from . import te
from .hope import Plan, Problem
from .ir import GraphError
from .souffle import Program, _signature
from ...vm import pyengine

_NAME = re.compile(r"R(\d+)-(\d+)$")


def submeshes(config, rows=(4, 4)) -> list:
    """Device names of consecutive row blocks of ``rows`` mesh rows each (they must sum to
    the mesh's rows): (8,) is the whole mesh, (4, 4) two 4x8 halves, (6, 2) unequal parts."""
    if not isinstance(rows, (tuple, list)) or not rows or \
            any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in rows) or \
            sum(rows) != config.mesh_rows:
        raise GraphError(f"rows must be positive ints summing to the mesh's "
                         f"{config.mesh_rows} rows, got {rows!r}")
    firsts = np.cumsum([0] + list(rows[:-1]))
    return [f"R{f}-{f + r - 1}" for f, r in zip(firsts, rows)]


def span(name: str, config) -> tuple:
    """(first CPE, CPEs, row mask) of a sub-mesh device name such as ``R4-7``."""
    if config.mesh_cols != 1 << codegen.MESH_COLS_LOG2:
        raise GraphError(f"sub-mesh barriers take a CPE's row as id >> "
                         f"{codegen.MESH_COLS_LOG2}: the mesh must have 8 columns, not "
                         f"{config.mesh_cols}")
    found = _NAME.match(name)
    if not found or not int(found[1]) <= int(found[2]) < config.mesh_rows:
        raise GraphError(f"{name!r} is not a sub-mesh device (R<first row>-<last row>)")
    first, last = int(found[1]), int(found[2])
    mask = sum(1 << r for r in range(first, last + 1))
    return first * config.mesh_cols, (last - first + 1) * config.mesh_cols, mask


def _writers(program: Program) -> dict:
    """Buffer name -> the TEs that write it (a Concat's parts all write its whole)."""
    out = {}
    for t in program.tensors:
        out.setdefault(t.storage, []).append(t.name)
    return out


def _launch(steps, outputs: list, config) -> list:
    """Launches of ``steps`` ((TE, device)) in that order, each TE on its block's CPEs."""
    return codegen.plan_ranges([(t, *span(device, config)) for t, device in steps], config,
                               outputs)


def _alone(t: te.Tensor, program: Program, device: str, machine, seed: int) -> int:
    """Kernel cycles of TE ``t`` alone on ``device``, its inputs random."""
    rng = np.random.default_rng(seed)
    feeds = {r.tensor.name: rng.standard_normal(r.tensor.shape) for r in te.reads(t)
             if r.tensor.name not in program.constants}
    constants = {r.tensor.name: program.constants[r.tensor.name] for r in te.reads(t)
                 if r.tensor.name in program.constants}
    alone = Program({}, constants, [t], [t.storage])
    _, stats = codegen.run(alone, _launch([(t, device)], alone.outputs, machine.config),
                           machine, feeds)
    return sum(s.cycles for s in stats)


def profile(program: Program, machine, device_names: list, cache=None) -> Problem:
    """Units: the program's TEs; preds from their reads; latency per sub-mesh from ``_alone``,
    with the loop nest's share and the DMA engine's cycles of that alone launch (``cache``
    memoises them by the TE's structure and its block). The problem's ``model`` is
    ``predict``."""
    cache = {} if cache is None else cache
    config = machine.config
    writers, by_name = _writers(program), {t.name: t for t in program.tensors}
    units, preds, latency, edge_bytes, engine, compute = [], {}, {}, {}, {}, {}
    for t in program.tensors:
        units.append(t.name)
        preds[t.name] = list(dict.fromkeys(w for r in te.reads(t)
                                           for w in writers.get(r.tensor.name, ())))
        for p in preds[t.name]:
            edge_bytes[(p, t.name)] = codegen.ES * by_name[p].size
        latency[t.name], engine[t.name] = {}, {}
        for d in device_names:
            key = (_signature(t, program.constants),
                   t.into and (t.into[0].shape, t.into[1]), span(d, config))
            if key not in cache:
                cycles = _alone(t, program, d, machine, seed=len(cache))
                cache[key] = (cycles, *_compute_cycles(t, d, cycles, config))
            latency[t.name][d], compute[(t.name, d)], engine[t.name][d] = cache[key]
    problem = Problem(units, preds, latency, edge_bytes, {u: [u] for u in units},
                      engine=engine)
    problem.model = lambda plan: predict(program, plan, compute, config)
    return problem


def execute(program: Program, plan: Plan, machine, feeds: dict):
    """Run ``plan`` (devices: sub-meshes) as launches of the program's TEs in the plan's start
    order (one launch unless the LDM overflows); returns (outputs, [LaunchStats])."""
    by_name = {t.name: t for t in program.tensors}
    order = plan.order()
    launches = _launch([(by_name[u], plan.device[u]) for u in order], program.outputs,
                       machine.config)
    return codegen.run(program, launches, machine, feeds)


# ---- the launch model: the blocks share the CG's DMA engine --------------------------------

@functools.lru_cache(maxsize=4096)
def _request_cycles(config, size: int, block: int, stride: int, put: bool,
                    memory: int = 0) -> int:
    """Engine cycles of one DMA request in the VM's model (docs/timing.md "DMA")."""
    merge = bool(config.dma_merge_unstrided_blocks)
    pieces = pyengine.dma_pieces(memory, size, block, stride, config.dma_transaction_bytes,
                                 merge)
    request = pyengine.DmaRequest(0, put, False, None, pieces, 0, 0, strided=pyengine.is_strided(
        size, block, stride, merge))
    return sum(pyengine.transaction_cycles(config, request, k) for k in range(len(pieces)))


def _requests(launch, config) -> list:
    """Per step: ([each CPE's table get], {active CPE: its gets}, {active CPE: its puts}), in
    engine cycles. Buffers (the table too) are 128-byte aligned (main memory's allocation), so
    offsets from 0 cost what the real addresses do."""
    table, offsets, _ = codegen._tables(launch, defaultdict(int), config.num_cpes, 0)
    row_bytes, out = table.shape[1] * 8, []
    for step, (start, size, _, _) in zip(launch.steps, offsets):
        t, gets, puts = step.tensor, {}, {}
        for cpe in range(config.num_cpes):
            box = codegen.tile(t, step.grid, cpe, step.first)
            if box is None:
                continue
            gets[cpe] = [_request_cycles(config, *piece[1:4], False, piece[0])
                         for p in step.reads if not p.local
                         for piece in codegen.read_pieces(codegen.read_box(t, p.read, box),
                                                          p.read.shape, 0, 0)]
            puts[cpe] = [_request_cycles(config, *piece[1:4], True, piece[0])
                         for piece in codegen.dma_pieces(*codegen._into(t, box), 0, 0)] \
                if step.put else []
        out.append(([_request_cycles(config, size, 0, 0, False, cpe * row_bytes + start)
                     for cpe in range(config.num_cpes)], gets, puts))
    return out


def _cpe_actions(launch, requests, compute, cpe: int, cols: int):
    """What CPE ``cpe`` does, in order: ("barrier", step, row mask), ("dma", [engine cycles]),
    ("compute", cycles)."""
    for k, (step, (table, gets, puts)) in enumerate(zip(launch.steps, requests)):
        mask = step.barrier or (codegen.FULL_MESH if step.bcast_rows else 0)
        if mask >> (cpe // cols) & 1:
            yield "barrier", k, mask
        if cpe in gets or not launch.confined:
            yield "dma", [table[cpe]]
        if cpe in gets:
            if gets[cpe]:
                yield "dma", gets[cpe]
            yield "compute", compute[k]
            if puts[cpe]:
                yield "dma", puts[cpe]


def simulate(launch, compute: list, config, requests=None) -> float:
    """Cycles of ``launch`` when each active CPE's loop nest of step k takes ``compute[k]``:
    CPEs advance in time order; a request waits dma_latency, then the one engine serves it
    after those issued before it; a barrier releases barrier_cycles after its last row."""
    requests = requests or _requests(launch, config)
    cols, cpes = config.mesh_cols, config.num_cpes
    actions = [_cpe_actions(launch, requests, compute, c, cols) for c in range(cpes)]
    ready, arrived = [(0, c) for c in range(cpes)], {}
    engine_free = end = 0
    while ready:
        t, cpe = heapq.heappop(ready)
        action = next(actions[cpe], None)
        if action is None:
            end = max(end, t)
        elif action[0] == "dma":
            for cycles in action[1]:
                engine_free = max(engine_free, t + config.dma_latency) + cycles
            heapq.heappush(ready, (engine_free, cpe))
        elif action[0] == "compute":
            heapq.heappush(ready, (t + action[1], cpe))
        else:
            _, k, mask = action
            here = arrived.setdefault(k, [])
            here.append((t, cpe))
            if len(here) == bin(mask).count("1") * cols:
                release = max(when for when, _ in here) + config.barrier_cycles
                for _, member in here:
                    heapq.heappush(ready, (release, member))
    return end


def _compute_cycles(t: te.Tensor, device: str, alone: int, config) -> tuple:
    """((loop-nest cycles, CPEs of its grid), DMA engine cycles) of TE ``t``'s alone launch
    on ``device``: the loop nest's cycles are those with which ``simulate`` gives the
    ``alone`` cycles the VM measured (a bisection: the model is monotone in them)."""
    launch, = _launch([(t, device)], [t.storage], config)
    requests = _requests(launch, config)
    low, high = 0, alone
    while high - low > 1:
        middle = (low + high) // 2
        if simulate(launch, [middle], config, requests) <= alone:
            low = middle
        else:
            high = middle
    table, gets, puts = requests[0]
    engine = sum(table[cpe] for cpe in gets) + sum(map(sum, gets.values())) + \
        sum(map(sum, puts.values()))
    return (low, math.prod(launch.steps[0].grid)), engine


def predict(program: Program, plan: Plan, compute: dict, config) -> float:
    """Modelled cycles of ``plan`` run by ``execute``: its launches as ``simulate`` times them,
    each step's loop nest from ``compute[(TE, device)]`` (cycles, CPEs) rescaled to the
    step's grid."""
    by_name = {t.name: t for t in program.tensors}
    order = [m for u in plan.order() for m in plan.problem.members[u]]
    device = {m: plan.device[u] for u in plan.order() for m in plan.problem.members[u]}
    total = 0
    for launch in _launch([(by_name[m], device[m]) for m in order], program.outputs, config):
        loops = []
        for step in launch.steps:
            cycles, cpes = compute[(step.tensor.name, device[step.tensor.name])]
            loops.append(cycles * cpes / math.prod(step.grid))
        total += simulate(launch, loops, config)
    return total
