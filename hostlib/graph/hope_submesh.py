"""HOPE on CPE sub-meshes of one core group (docs/hope.md, "Sub-mesh devices"): the devices are
blocks of whole mesh rows (``R0-3`` is rows 0..3, 32 CPEs), the units the TEs of a Souffle
program (souffle.py), and HOPE's schedulers (hope.py) place them.

``profile`` times every TE alone on every sub-mesh: one generated launch of that TE on the
block's CPEs, run on the VM (memoised by TE structure and block). ``execute`` runs a plan for
real as one launch on the core group: the TEs in the plan's start order, each on its block's
CPEs (the others skip it), a barrier before a TE only among the rows of its block and of the
blocks that wrote what it fetches (``synr 0xff`` then ``sync`` with that row mask), so blocks
run at once between their dependences. The predicted makespan assumes a block's TE takes what
it took alone; the simulated one also has the blocks sharing the CG's one DMA engine and the
barriers."""
from __future__ import annotations

import re

import numpy as np

from . import souffle_codegen as codegen
from . import te
from .hope import Plan, Problem
from .ir import GraphError
from .souffle import Program, _signature

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
    """Units: the program's TEs; preds from their reads; latency per sub-mesh from ``_alone``
    (``cache`` memoises it by the TE's structure and its block)."""
    cache = {} if cache is None else cache
    writers, by_name = _writers(program), {t.name: t for t in program.tensors}
    units, preds, latency, edge_bytes = [], {}, {}, {}
    for t in program.tensors:
        units.append(t.name)
        preds[t.name] = list(dict.fromkeys(w for r in te.reads(t)
                                           for w in writers.get(r.tensor.name, ())))
        for p in preds[t.name]:
            edge_bytes[(p, t.name)] = codegen.ES * by_name[p].size
        latency[t.name] = {}
        for d in device_names:
            key = (_signature(t, program.constants),
                   t.into and (t.into[0].shape, t.into[1]), span(d, machine.config))
            if key not in cache:
                cache[key] = _alone(t, program, d, machine, seed=len(cache))
            latency[t.name][d] = cache[key]
    return Problem(units, preds, latency, edge_bytes, {u: [u] for u in units})


def execute(program: Program, plan: Plan, machine, feeds: dict):
    """Run ``plan`` (devices: sub-meshes) as launches of the program's TEs in the plan's start
    order (one launch unless the LDM overflows); returns (outputs, [LaunchStats])."""
    by_name = {t.name: t for t in program.tensors}
    order = plan.order()
    launches = _launch([(by_name[u], plan.device[u]) for u in order], program.outputs,
                       machine.config)
    return codegen.run(program, launches, machine, feeds)
