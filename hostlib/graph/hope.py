"""HOPE (Xia's thesis §3.6, digest ../shared/reference/thesis-xia-dnntune-souffle-gdpnpu.md
§1.1; docs/hope.md): scheduling a graph's DAG across the chip's units. Devices are the core
groups (each its 64-CPE mesh) and the MPE path; a node's latency on a device is sampled by
running it once on the VM (``profile``, memoised by operator, attributes and input shapes);
the cost of moving a tensor between devices is ``transfer_cycles`` (0 on this chip: every
unit addresses the one main memory, so data stays in place).

Schedulers, each returning a ``Plan`` (device and start of every unit):
``sequential`` (the graph engine's one-node-after-another on CG 0), ``chain_dp`` (MOSAIC-like:
the topological order as a chain, one device per node, no concurrency), ``greedy(k=1)``
(StarPU-like earliest finish), ``greedy(k=4)`` (Algorithm 2, top-K search), ``ilp`` (the ILP
of Fig. 3-13 with scipy's HiGHS, on the parts of the upward-rank bisection, Algorithm 1).
``merge_super_ops`` pins short single-predecessor nodes to their predecessor before
scheduling; ``execute`` runs a plan on the VM and replays its measured cycles."""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from .dispatch import mpe_cycles, run_node
from .ir import Graph, GraphError
from .ops import OPS

MPE = "MPE"
PART_NODES = 12              # Algorithm 1's NT: bisect until parts have fewer nodes
EPSILONS = (0.1, 0.2)        # balance slack of a bisection: tight first, then looser
SUPER_OP_RATIO = 0.1         # a node below this share of its predecessor's latency merges
ILP_NODES = 2000             # HiGHS branch-and-bound nodes per part (a node limit, unlike a
ILP_SECONDS = 120.0          # time limit, gives the same plan on any host; the time is a guard)
SEARCH_SWEEPS = 2            # local search: passes over the units, each unit tries every device


def devices(machine, cgs=None, mpe=True) -> list:
    """Device names: ``CG0`` .. ``CG{cgs-1}`` (default every core group), then ``MPE``."""
    count = machine.num_cgs if cgs is None else cgs
    if isinstance(count, bool) or not isinstance(count, int) or \
            not 1 <= count <= machine.num_cgs:
        raise GraphError(f"cgs must be an int in 1..{machine.num_cgs}, got {cgs!r}")
    return [f"CG{k}" for k in range(count)] + ([MPE] if mpe else [])


@dataclass
class Problem:
    """What a scheduler sees: units (graph nodes, or super-ops of several) in topological
    order, their predecessors, latency[unit][device] in cycles (math.inf: unsupported) and the
    bytes each edge carries. Devices that share one DMA engine (CPE sub-meshes of a CG) also
    give engine[unit][device], the cycles the unit holds that engine (the ILP bounds the
    makespan by their sum), and ``model``, plan -> cycles with the sharing (hope_submesh)."""
    units: list
    preds: dict                                        # unit -> list of units
    latency: dict                                      # unit -> {device: cycles}
    edge_bytes: dict = field(default_factory=dict)     # (from, to) -> bytes
    members: dict = field(default_factory=dict)        # unit -> graph node names, in order
    transfer: object = None                            # (bytes, src, dst) -> cycles
    engine: dict = None                                # unit -> {device: DMA engine cycles}
    model: object = None                               # Plan -> cycles, or None: the replay

    @property
    def devices(self) -> list:
        return list(self.latency[self.units[0]]) if self.units else []

    def cost(self, src_unit, dst_unit, src_device, dst_device) -> float:
        if src_device == dst_device or self.transfer is None:
            return 0
        return self.transfer(self.edge_bytes.get((src_unit, dst_unit), 0), src_device,
                             dst_device)


def transfer_cycles(nbytes, src, dst) -> int:
    """Moving a tensor between units: 0, because core groups and the MPE share main memory
    and a kernel's output stays where the next kernel reads it."""
    return 0


@dataclass
class Plan:
    scheduler: str
    device: dict                     # unit -> device
    start: dict                      # unit -> cycle
    finish: dict                     # unit -> cycle
    problem: Problem = None          # what it was scheduled on (its edges bind the replay)
    solve_seconds: float = 0.0

    @property
    def makespan(self) -> float:
        return max(self.finish.values(), default=0)

    def order(self) -> list:
        """Units by start (ties by finish): a topological order the executor follows."""
        return sorted(self.start, key=lambda u: (self.start[u], self.finish[u]))


# --------------------------------------------------------------------------- problem
def _signature(node, inputs):
    return (node.op_type, repr(sorted(node.attrs.items(), key=lambda kv: kv[0])),
            tuple(None if a is None else (a.dtype.str, a.shape) for a in inputs))


def profile(graph: Graph, machine, feeds: dict, device_names: list, cache=None) -> Problem:
    """Run the graph once on CG 0 (every suitable node on the CPEs) and cost every node on
    every device: a core group's latency is the node's simulated cycles there, the MPE's the
    MPE cost model's. ``cache`` (a dict) memoises cycles by node signature across calls."""
    cache = {} if cache is None else cache
    values = dict(graph.initializers)
    values.update(feeds)
    units, latency, preds, edge_bytes = [], {}, {}, {}
    producer = {}
    for node in graph.order():
        inputs = [values[name] if name else None for name in node.inputs]
        key = _signature(node, inputs)
        if key in cache:         # sampled before: the values from the MPE path
            outputs = _mpe_outputs(node, inputs)
        else:
            outputs, record = run_node(node, inputs, machine=machine.core_group(0),
                                       minimum_work=False)
            cache[key] = (record.cycles, mpe_cycles(node, _trimmed(inputs), outputs,
                                                    machine.config))
        cg_cycles, host_cycles = cache[key]
        latency[node.name] = {d: (host_cycles if d == MPE else cg_cycles) for d in device_names}
        for name, value in zip(node.outputs, outputs):
            if name:
                values[name] = value
                producer[name] = node.name
        preds[node.name] = []
        for name in node.inputs:
            source = producer.get(name)
            if source and source not in preds[node.name]:
                preds[node.name].append(source)
            if source:
                edge = (source, node.name)
                edge_bytes[edge] = edge_bytes.get(edge, 0) + values[name].nbytes
        units.append(node.name)
    return Problem(units, preds, latency, edge_bytes, {u: [u] for u in units}, transfer_cycles)


def merge_super_ops(problem: Problem, ratio=SUPER_OP_RATIO) -> Problem:
    """Super-ops: a unit with a single predecessor whose fastest latency is at most ``ratio``
    of the predecessor's is merged into it (runs right after it on the same device). Merging
    a single-predecessor unit into its predecessor cannot create a cycle."""
    owner = {u: u for u in problem.units}
    latency = {u: dict(problem.latency[u]) for u in problem.units}
    engine = problem.engine and {u: dict(problem.engine[u]) for u in problem.units}
    members = {u: list(problem.members[u]) for u in problem.units}
    for unit in problem.units:
        if len(problem.preds[unit]) != 1:
            continue
        head = owner[problem.preds[unit][0]]
        if min(latency[unit].values()) <= ratio * min(latency[head].values()):
            owner[unit] = head
            for device in latency[head]:
                latency[head][device] += latency[unit][device]
                if engine:
                    engine[head][device] += engine[unit][device]
            members[head] += members.pop(unit)
            del latency[unit]
    units = [u for u in problem.units if owner[u] == u]
    preds, edge_bytes = {u: [] for u in units}, {}
    for unit in problem.units:
        for pred in problem.preds[unit]:
            a, b = owner[pred], owner[unit]
            if a != b:
                if a not in preds[b]:
                    preds[b].append(a)
                edge_bytes[(a, b)] = edge_bytes.get((a, b), 0) + \
                    problem.edge_bytes.get((pred, unit), 0)
    return Problem(units, preds, latency, edge_bytes, members, problem.transfer,
                   engine and {u: engine[u] for u in units}, problem.model)


def _successors(problem: Problem) -> dict:
    succs = {u: [] for u in problem.units}
    for unit in problem.units:
        for pred in problem.preds[unit]:
            succs[pred].append(unit)
    return succs


# --------------------------------------------------------------------------- replay
def replay(problem: Problem, device: dict, order: list, latency=None, scheduler="") -> Plan:
    """Start and finish of every unit when each runs on ``device[unit]`` as soon as its
    inputs have arrived and its device is free, devices taking units in ``order``."""
    latency = latency or problem.latency
    free = {d: 0 for d in problem.devices}
    start, finish = {}, {}
    for unit in order:
        d = device[unit]
        ready = max((finish[p] + problem.cost(p, unit, device[p], d)
                     for p in problem.preds[unit]), default=0)
        start[unit] = max(ready, free[d])
        finish[unit] = free[d] = start[unit] + latency[unit][d]
    return Plan(scheduler, dict(device), start, finish, problem)


# --------------------------------------------------------------------------- baselines
def sequential(problem: Problem) -> Plan:
    """Every unit on the first device (CG 0) in topological order (the graph engine's
    Session)."""
    first = problem.devices[0] if problem.units else None
    return replay(problem, {u: first for u in problem.units}, problem.units,
                  scheduler="sequential")


def chain_dp(problem: Problem) -> Plan:
    """MOSAIC-like: the topological order as a chain; dynamic programming picks each unit's
    device minimising latency plus the transfer from the previous unit, nothing overlaps."""
    began = time.perf_counter()
    names = problem.devices
    best = {d: (problem.latency[problem.units[0]][d], [d]) for d in names} if problem.units \
        else {}
    for prev, unit in zip(problem.units, problem.units[1:]):
        best = {d: min(((cost + problem.cost(prev, unit, path[-1], d)
                         + problem.latency[unit][d], path + [d])
                        for cost, path in best.values()), key=lambda cp: cp[0])
                for d in names}
    path = min(best.values(), key=lambda cp: cp[0])[1] if best else []
    device = dict(zip(problem.units, path))
    # one after another: each unit waits for the previous one whatever its device
    plan = replay(_chained(problem), device, problem.units, problem.latency, "chain DP")
    plan.solve_seconds = time.perf_counter() - began
    return plan


def _chained(problem: Problem) -> Problem:
    preds = {u: list(problem.preds[u]) for u in problem.units}
    for prev, unit in zip(problem.units, problem.units[1:]):
        if prev not in preds[unit]:
            preds[unit].append(prev)
    return Problem(problem.units, preds, problem.latency, problem.edge_bytes, problem.members,
                   problem.transfer, problem.engine, problem.model)


def greedy(problem: Problem, k=4) -> Plan:
    """Algorithm 2: repeatedly take the ``k`` ready units of earliest start, try every
    assignment of them to devices (|devices|^k) placed in that order, keep the one whose
    last unit finishes first (ties: the smaller sum of finishes). k=1 is StarPU's
    earliest-finish heuristic."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise GraphError(f"k must be an int >= 1, got {k!r}")
    began = time.perf_counter()
    succs = _successors(problem)
    waiting = {u: len(problem.preds[u]) for u in problem.units}
    ready = [u for u in problem.units if not waiting[u]]
    rank = {u: i for i, u in enumerate(problem.units)}
    device, start, finish = {}, {}, {}
    free = {d: 0 for d in problem.devices}
    while ready:
        ready.sort(key=lambda u: (max((finish[p] for p in problem.preds[u]), default=0),
                                  rank[u]))
        batch, ready = ready[:k], ready[k:]
        best = None
        for choice in itertools.product(problem.devices, repeat=len(batch)):
            trial_free, placed = dict(free), {}
            for unit, d in zip(batch, choice):
                arrive = max((finish[p] + problem.cost(p, unit, device[p], d)
                              for p in problem.preds[unit]), default=0)
                begin = max(arrive, trial_free[d])
                trial_free[d] = begin + problem.latency[unit][d]
                placed[unit] = (d, begin, trial_free[d])
            score = (max(f for _, _, f in placed.values()),
                     sum(f for _, _, f in placed.values()))
            if best is None or score < best[0]:
                best = (score, placed, trial_free)
        _, placed, free = best
        for unit, (d, begin, end) in placed.items():
            device[unit], start[unit], finish[unit] = d, begin, end
            for succ in succs[unit]:
                waiting[succ] -= 1
                if not waiting[succ]:
                    ready.append(succ)
    plan = Plan("StarPU-like greedy" if k == 1 else f"greedy top-{k}", device, start, finish,
                problem)
    plan.solve_seconds = time.perf_counter() - began
    return plan


# --------------------------------------------------------------------------- Algorithm 1
def upward_ranks(problem: Problem) -> dict:
    """uprank(v) = 1 + max over predecessors (1 for sources): the longest path from a source."""
    rank = {}
    for unit in problem.units:
        rank[unit] = 1 + max((rank[p] for p in problem.preds[unit]), default=0)
    return rank


def bisect(units: list, rank: dict, weight: dict):
    """The acyclic cut {rank <= r} | {rank > r} balanced within (1+ε)·W/2 that has the fewest
    units at rank r (Algorithm 1); None when no rank splits the units."""
    ranks = sorted({rank[u] for u in units})
    if len(ranks) < 2:
        return None
    total = sum(weight[u] for u in units) or 1
    count = {r: sum(1 for u in units if rank[u] == r) for r in ranks}
    below = {}
    acc = 0
    for r in ranks:
        acc += sum(weight[u] for u in units if rank[u] == r)
        below[r] = acc
    cuts = ranks[:-1]
    for epsilon in EPSILONS:
        limit = (1 + epsilon) * total / 2
        balanced = [r for r in cuts if below[r] <= limit and total - below[r] <= limit]
        if balanced:
            cut = min(balanced, key=lambda r: (count[r], abs(2 * below[r] - total)))
            break
    else:
        cut = min(cuts, key=lambda r: abs(2 * below[r] - total))
    return [u for u in units if rank[u] <= cut], [u for u in units if rank[u] > cut]


def partition(problem: Problem, limit=PART_NODES) -> list:
    """Algorithm 1 applied recursively until every part has fewer than ``limit`` units; the
    parts in dependence order."""
    rank = upward_ranks(problem)
    weight = {u: min(problem.latency[u].values()) for u in problem.units}
    parts, pending = [], [list(problem.units)]
    while pending:
        part = pending.pop(0)
        halves = bisect(part, rank, weight) if len(part) >= limit else None
        if halves is None:
            parts.append(part)
        else:
            pending[:0] = list(halves)
    return parts


# --------------------------------------------------------------------------- the ILP
def ilp(problem: Problem, limit=PART_NODES, time_limit=ILP_SECONDS) -> Plan:
    """Fig. 3-13 per part of ``partition``: binary b[i,j] (unit i on device j), start s[i],
    makespan τ; precedence with the receive cost C·(b[i,j] − b[k,j]); for independent pairs
    on one device a binary order ψ with big-M disjunctions; minimise τ. Earlier parts'
    placements are fixed: their finishes are release times, their devices' busy ends device
    release times. With ``problem.engine`` the makespan is at least the DMA engine cycles of
    every unit (the engine serves one request at a time). Solved by scipy.optimize.milp
    (HiGHS)."""
    began = time.perf_counter()
    device, start, finish = {}, {}, {}
    free = {d: 0 for d in problem.devices}
    for part in partition(problem, limit):
        engine_before = sum(problem.engine[u][device[u]] for u in device) \
            if problem.engine else 0
        placed = _solve_part(problem, part, device, finish, free, time_limit, engine_before)
        for unit in part:
            device[unit] = placed[unit][0]
        # exact starts: replay the part in the solver's order after the fixed ones
        order = sorted(part, key=lambda u: (placed[u][1], placed[u][2]))
        sub = replay(problem, {**device}, list(start) + order)
        start, finish = sub.start, sub.finish
        for d in free:
            free[d] = max([free[d]] + [finish[u] for u in order if device[u] == d])
    plan = Plan(f"HOPE ILP (parts < {limit})", device, start, finish, problem)
    plan.solve_seconds = time.perf_counter() - began
    return plan


def _solve_part(problem, part, fixed_device, fixed_finish, free, time_limit, engine_before=0):
    try:
        from scipy.optimize import Bounds, LinearConstraint, milp
    except ImportError as missing:      # an optional dependency: swsim[hope]
        raise GraphError(f"the ILP scheduler needs scipy >= 1.9 (pip install 'swsim[hope]'): "
                         f"{missing}") from None

    names = problem.devices
    n, m = len(part), len(names)
    index = {u: i for i, u in enumerate(part)}
    inside = set(part)
    lat = np.array([[problem.latency[u][d] for d in names] for u in part], float)
    supported = np.isfinite(lat)
    if not supported.any(axis=1).all():
        bad = part[int(np.flatnonzero(~supported.any(axis=1))[0])]
        raise GraphError(f"unit {bad!r} has no device that can run it")
    lat[~supported] = 0
    ancestors = _ancestors(problem, part)
    pairs = [(a, b) for a, b in itertools.combinations(range(n), 2)
             if part[a] not in ancestors[part[b]] and part[b] not in ancestors[part[a]]]
    # variables: b (n*m), s (n), tau (1), psi (len(pairs))
    nb, ns = n * m, n
    tau = nb + ns
    total = nb + ns + 1 + len(pairs)
    big = max(free.values(), default=0) + max(fixed_finish.values(), default=0) + float(sum(lat.max(axis=1))) + sum(
        problem.cost(p, u, a, b) for u in part for p in problem.preds[u]
        for a in names for b in names if a != b) + 1
    rows, lower, upper = [], [], []

    def row(entries, lo, hi):
        vector = np.zeros(total)
        for column, value in entries:
            vector[column] += value
        rows.append(vector)
        lower.append(lo)
        upper.append(hi)

    def b(i, j):
        return i * m + j

    def runtime(i):
        return [(b(i, j), lat[i, j]) for j in range(m)]

    for i in range(n):
        row([(b(i, j), 1) for j in range(m)], 1, 1)                       # one device
        row([(tau, 1), (nb + i, -1)] + [(c, -v) for c, v in runtime(i)], 0, np.inf)
        for j, d in enumerate(names):                                    # device release
            row([(nb + i, 1), (b(i, j), -free[d])], 0, np.inf)
        for p in problem.preds[part[i]]:
            if p in inside:                                              # precedence
                k = index[p]
                for j, d in enumerate(names):
                    # s_i >= s_k + t_k + C·(b_ij - b_kj)
                    c = max((problem.cost(p, part[i], a, d) for a in names if a != d),
                            default=0)
                    row([(nb + i, 1), (nb + k, -1)] + [(cc, -v) for cc, v in runtime(k)] +
                        [(b(i, j), -c), (b(k, j), c)], 0, np.inf)
            else:                                                        # fixed producer
                for j, d in enumerate(names):
                    c = problem.cost(p, part[i], fixed_device[p], d)
                    row([(nb + i, 1), (b(i, j), -c)], fixed_finish[p], np.inf)
    if problem.engine:                                                   # one DMA engine
        row([(tau, 1)] + [(b(i, j), -problem.engine[u][d]) for i, u in enumerate(part)
                          for j, d in enumerate(names)], engine_before, np.inf)
    for q, (i, k) in enumerate(pairs):
        psi = nb + ns + 1 + q
        for j in range(m):
            # on device j together: psi=1 -> i after k, psi=0 -> k after i
            row([(nb + i, 1), (nb + k, -1)] + [(c, -v) for c, v in runtime(k)] +
                [(psi, -big), (b(i, j), -big), (b(k, j), -big)], -3 * big, np.inf)
            row([(nb + k, 1), (nb + i, -1)] + [(c, -v) for c, v in runtime(i)] +
                [(psi, big), (b(i, j), -big), (b(k, j), -big)], -2 * big, np.inf)
    objective = np.zeros(total)
    objective[tau] = 1
    objective[nb:nb + ns] = 1e-6                 # among equal makespans, start early
    lo = np.zeros(total)
    hi = np.full(total, np.inf)
    hi[:nb] = supported.reshape(-1).astype(float)
    hi[nb + ns + 1:] = 1
    integrality = np.zeros(total)
    integrality[:nb] = 1
    integrality[nb + ns + 1:] = 1
    result = milp(objective, integrality=integrality, bounds=Bounds(lo, hi),
                  constraints=LinearConstraint(np.array(rows), lower, upper),
                  options={"time_limit": time_limit, "node_limit": ILP_NODES})
    if result.x is None:
        raise GraphError(f"the ILP found no schedule for part {part}: {result.message}")
    x = result.x
    placed = {}
    for i, unit in enumerate(part):
        j = int(np.argmax(x[i * m:(i + 1) * m]))
        placed[unit] = (names[j], float(x[nb + i]), float(x[nb + i]) + lat[i, j])
    return placed


def _ancestors(problem, part):
    seen = {}
    for unit in problem.units:
        found = set()
        for p in problem.preds[unit]:
            found |= {p} | seen[p]
        seen[unit] = found
    return {u: seen[u] for u in part}


def ilp_whole(problem: Problem, time_limit=ILP_SECONDS) -> Plan:
    """The ILP on the whole graph in one part (no bisection): the best plan HiGHS finds within
    ``ILP_NODES`` branch-and-bound nodes (or ``time_limit`` seconds)."""
    plan = ilp(problem, limit=len(problem.units) + 1, time_limit=time_limit)
    plan.scheduler = "HOPE ILP whole"
    return plan


def search(problem: Problem, plan: Plan, sweeps=SEARCH_SWEEPS) -> Plan:
    """Local search from ``plan``: one unit moves to another device (the units keep their
    order) when ``problem.model`` (without one: the replay) gives a shorter makespan; at
    most ``sweeps`` passes over the units, fewer if a pass moves none."""
    began = time.perf_counter()
    cost = problem.model or (lambda p: p.makespan)
    order, device, best = plan.order(), dict(plan.device), cost(plan)
    for _ in range(sweeps):
        moved = False
        for unit in order:
            for d in problem.devices:
                if d == device[unit] or problem.latency[unit][d] == math.inf:
                    continue
                trial = replay(problem, {**device, unit: d}, order)
                makespan = cost(trial)
                if makespan < best:
                    best, device, moved = makespan, trial.device, True
        if not moved:
            break
    found = replay(problem, device, order, scheduler=plan.scheduler + " + search")
    found.solve_seconds = plan.solve_seconds + time.perf_counter() - began
    return found


SCHEDULERS = {"sequential": sequential, "chain DP": chain_dp,
              "StarPU-like greedy": lambda p: greedy(p, k=1),
              "greedy top-4": lambda p: greedy(p, k=4), "HOPE ILP": ilp,
              "HOPE ILP whole": ilp_whole, "HOPE ILP + search": lambda p: search(p, ilp(p))}


# --------------------------------------------------------------------------- executor
def execute(graph: Graph, problem: Problem, plan: Plan, machine, feeds: dict):
    """Run ``plan`` on the VM: every node on its unit's device (a core group through
    ``machine.core_group``, with every suitable node on its CPEs; the MPE path timed by the
    MPE cost model), in the plan's order; returns (outputs, simulated Plan), the latter the
    plan replayed with the cycles the VM measured."""
    nodes = {node.name: node for node in graph.nodes}
    values = dict(graph.initializers)
    values.update(feeds)
    measured = {}
    order = plan.order()
    for unit in order:
        d = plan.device[unit]
        measured[unit] = {x: 0 for x in problem.devices}
        for name in problem.members[unit]:
            node = nodes[name]
            inputs = [values[n] if n else None for n in node.inputs]
            if d == MPE:
                outputs = _mpe_outputs(node, inputs)
                cycles = mpe_cycles(node, _trimmed(inputs), outputs, machine.config)
            else:
                outputs, record = run_node(node, inputs, minimum_work=False,
                                           machine=machine.core_group(int(d[2:])))
                cycles = record.cycles
            measured[unit][d] += cycles
            for name_out, value in zip(node.outputs, outputs):
                if name_out:
                    values[name_out] = value
    simulated = replay(plan.problem or problem, plan.device, order, measured,
                       plan.scheduler + " (VM)")
    return {name: values[name] for name in graph.outputs}, simulated


def _trimmed(inputs):
    inputs = list(inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    return inputs


def _mpe_outputs(node, inputs):
    with np.errstate(all="ignore"):
        return tuple(np.asarray(o) for o in OPS[node.op_type].mpe(node, *_trimmed(inputs)))
