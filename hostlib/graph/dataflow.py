"""swFLOWpro's two-level parallelism as a fast estimate (docs/graph.md "Dataflow estimate"):
the nodes of a graph, each taking the simulated cycles a ``Session`` measured for it on one
core group, scheduled over ``cgs`` core groups by the dataflow runtime of swFLOWpro §2.6 --
node states unavailable -> ready -> running -> done, one worker per CG with a FIFO queue,
newly ready nodes dealt to the queues round robin, and an idle worker taking, in order, a ready
successor of the node it just finished, a ready successor of that node's predecessors, the
head of its own queue, or the head of the longest other queue (threads grab tasks). ``split``
runs S copies of a graph (each on a 1/S slice of the batch, with their own measured times) as
one graph. This is a discrete-event estimate on measured node times; contention between CGs
for memory is not modelled and the CGs are not simulated side by side."""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Graph, GraphError


@dataclass
class Schedule:
    cgs: int
    makespan: int                       # cycles until the last node is done
    placed: dict = field(default_factory=dict)    # node name -> (cg, start, end)

    @property
    def busy(self) -> list:
        """Cycles each CG spent running nodes."""
        totals = [0] * self.cgs
        for cg, start, end in self.placed.values():
            totals[cg] += end - start
        return totals


def replicate(graph: Graph, copies: int) -> Graph:
    """The nodes of `copies` independent copies of `graph` (names and tensors suffixed
    ``@i``; initializers shared): swFLOWpro's split pass for the scheduler, each copy standing
    for a slice of the batch. Inputs and outputs are the copies' (slicing and merging are
    copies the estimate does not time)."""
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise GraphError(f"copies must be an integer >= 1, got {copies!r}")
    shared = set(graph.initializers)

    def rename(name, i):
        return name if not name or name in shared else f"{name}@{i}"
    nodes = []
    for i in range(copies):
        for node in graph.order():
            nodes.append(type(node)(f"{node.name}@{i}", node.op_type,
                                    [rename(n, i) for n in node.inputs],
                                    [rename(n, i) for n in node.outputs], node.attrs,
                                    node.opset))
    inputs = {rename(n, i): info for i in range(copies) for n, info in graph.inputs.items()}
    outputs = [rename(n, i) for i in range(copies) for n in graph.outputs]
    return Graph(f"{graph.name}x{copies}", nodes, inputs, outputs, dict(graph.initializers))


def schedule(graph: Graph, cycles: dict, cgs: int) -> Schedule:
    """Place `graph`'s nodes, node name -> cycles on one CG (``cycles``; for a replicated
    graph the copies' names ``name@i`` or the original name), on `cgs` CGs."""
    if isinstance(cgs, bool) or not isinstance(cgs, int) or cgs < 1:
        raise GraphError(f"cgs must be an integer >= 1, got {cgs!r}")
    nodes = graph.order()

    def cost(node):
        name = node.name if node.name in cycles else node.name.rsplit("@", 1)[0]
        if name not in cycles:
            raise GraphError(f"{node}: no measured cycles")
        return int(cycles[name])
    producers = graph.producers()
    preds = {n.name: {producers[i].name for i in n.inputs if i in producers} for n in nodes}
    succs = {n.name: [] for n in nodes}
    for n in nodes:
        for p in sorted(preds[n.name]):
            succs[p].append(n.name)
    by_name = {n.name: n for n in nodes}
    waiting = {name: len(p) for name, p in preds.items()}
    queues = [[] for _ in range(cgs)]
    ready, dealt = set(), [0]

    def make_ready(name):
        ready.add(name)
        queues[dealt[0] % cgs].append(name)
        dealt[0] += 1
    for n in nodes:
        if not waiting[n.name]:
            make_ready(n.name)
    free_at = [0] * cgs
    last = [None] * cgs
    running = []                       # (end, cg, name)
    placed = {}
    while len(placed) < len(nodes):
        for cg in sorted(range(cgs), key=lambda k: free_at[k]):
            if any(r[1] == cg for r in running) or not ready:
                continue
            pick = _pick(cg, last[cg], ready, queues, succs, preds)
            for queue in queues:
                if pick in queue:
                    queue.remove(pick)
            ready.discard(pick)
            start = free_at[cg]
            end = start + cost(by_name[pick])
            placed[pick] = (cg, start, end)
            running.append((end, cg, pick))
        if not running:
            raise GraphError("the dataflow schedule stalled (a node never became ready)")
        running.sort()
        end, cg, name = running.pop(0)
        free_at[cg], last[cg] = end, name
        for k in range(cgs):          # idle CGs wait until something completes
            if not any(r[1] == k for r in running):
                free_at[k] = max(free_at[k], end)
        for s in succs[name]:
            waiting[s] -= 1
            if not waiting[s]:
                make_ready(s)
    return Schedule(cgs, max((e for _, _, e in placed.values()), default=0), placed)


def _pick(cg, finished, ready, queues, succs, preds):
    """swFLOWpro's locality rule, then the CG's own FIFO queue, then the longest queue."""
    if finished is not None:
        for s in succs[finished]:
            if s in ready:
                return s
        for p in sorted(preds[finished]):
            for s in succs[p]:
                if s in ready:
                    return s
    if queues[cg]:
        return queues[cg][0]
    return max(queues, key=len)[0]
