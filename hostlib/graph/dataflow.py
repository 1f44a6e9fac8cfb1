"""swFLOWpro's two-level parallelism (§2.6; docs/graph.md "Two-level parallelism"): the rules
that place a graph's nodes on ``cgs`` core groups, and the ``split`` pass.

``place`` is the dataflow runtime's scheduler, in simulated time: node states unavailable ->
ready -> running -> done, one worker per CG with a FIFO queue, newly ready nodes dealt to the
queues round robin, and a CG that falls idle taking, in order, a ready successor of the node it
just finished, a ready successor of that node's predecessors (the locality rule), the head of
its own queue, or the head of the longest other queue (threads grab tasks). A node starts when
its CG is free and its inputs are done and takes its cycles. Where the cycles come from is the
caller's: ``schedule`` looks them up (the fast estimate, on measured or sampled node times);
``runtime.DataflowSession`` runs each node on its CG's host thread when it is placed (the real
runtime). Both therefore place alike. Contention between CGs for memory is not modelled.

``split`` is the split pass: S copies of a graph, each on a slice of the batch, their outputs
merged (concatenated on the batch axis), and a training graph's gradients summed before the
nodes that read them (the update) run once."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ir import Graph, GraphError, Node, TensorInfo


@dataclass
class Schedule:
    cgs: int
    makespan: int                       # cycles until the last node is done
    placed: dict = field(default_factory=dict)    # node name -> (cg, start, end), in order

    @property
    def busy(self) -> list:
        """Cycles each CG spent running nodes."""
        totals = [0] * self.cgs
        for cg, start, end in self.placed.values():
            totals[cg] += end - start
        return totals


def _check_count(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise GraphError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def place(graph: Graph, cgs: int, launch, settle=None) -> Schedule:
    """Place `graph`'s nodes on `cgs` CGs by the rules above. ``launch(node, cg, start)`` is
    called when a node is placed and returns a function giving its cycles (called later, so
    a launch may start the node and only then wait for it). Every running node's cycles are
    known before the earliest of them completes, so the placement depends only on the nodes'
    cycles: the same cycles give the same schedule, however the launches are timed on the
    host. ``settle()`` (if given) is called whenever they all are known (nothing runs)."""
    cgs = _check_count("cgs", cgs)
    nodes = graph.order()
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
    running = {}                       # cg -> (name, start, cycles function)
    placed = {}
    done = 0
    while done < len(nodes):
        for cg in sorted(range(cgs), key=lambda k: free_at[k]):
            if cg in running or not ready:
                continue
            pick = _pick(cg, last[cg], ready, queues, succs, preds)
            for queue in queues:
                if pick in queue:
                    queue.remove(pick)
            ready.discard(pick)
            running[cg] = (pick, free_at[cg], launch(by_name[pick], cg, free_at[cg]))
        if not running:
            raise GraphError("the dataflow schedule stalled (a node never became ready)")
        for cg, (name, start, cycles) in running.items():
            if name not in placed:
                placed[name] = (cg, start, start + int(cycles()))
        if settle:
            settle()
        cg = min(running, key=lambda k: (placed[running[k][0]][2], k))
        name = running.pop(cg)[0]
        end = placed[name][2]
        free_at[cg], last[cg] = end, name
        done += 1
        for k in range(cgs):          # idle CGs wait until something completes
            if k not in running:
                free_at[k] = max(free_at[k], end)
        for s in succs[name]:
            waiting[s] -= 1
            if not waiting[s]:
                make_ready(s)
    return Schedule(cgs, max((e for _, _, e in placed.values()), default=0), placed)


def schedule(graph: Graph, cycles, cgs: int) -> Schedule:
    """The estimate: `graph`'s nodes placed on `cgs` CGs with their cycles on one CG taken
    from ``cycles``, a dict node name -> cycles or a function node -> cycles (e.g. memoised
    sampled times by op and shape)."""
    if callable(cycles):
        cost = cycles
    else:
        def cost(node):
            if node.name not in cycles:
                raise GraphError(f"{node}: no measured cycles")
            return cycles[node.name]
    return place(graph, cgs, lambda node, cg, start: (lambda value=int(cost(node)): value))


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


# ---- the split pass ----------------------------------------------------------------------

@dataclass
class Split:
    """What ``split`` made: the graph of the copies and merges, and the batch slices of the
    original graph inputs (name -> [(copy input name, start, stop)])."""
    graph: Graph
    slices: dict

    def feeds(self, feeds: dict) -> dict:
        """The split graph's feeds from the original graph's: each batch slice a contiguous
        piece of its input (no data moves on the chip, so it is not timed)."""
        split = {name: value for name, value in feeds.items() if name not in self.slices}
        for name, pieces in self.slices.items():
            if name in feeds:
                value = np.asarray(feeds[name])
                split.update({copy: value[start:stop] for copy, start, stop in pieces})
        return split


def split(graph: Graph, slices: int, *, sums=(), reduce=()) -> Split:
    """swFLOWpro's split pass: `slices` copies of `graph`, copy i running on the i-th piece of
    the batch (``np.array_split`` sizes; the batch is the first dimension of the first graph
    input, and every graph input of that first dimension is sliced). Tensors of copy i are
    named ``name@i``; initializers and unsliced inputs are shared. Each graph output is merged
    by a Concat on axis 0 named as the output; a tensor in ``sums`` (a training graph's
    gradients) is merged by a Sum instead, and the nodes that read it (the update) run once,
    after the merge, on the summed value. A tensor in ``reduce`` (a statistic of the batch:
    batch_statistics.global_batchnorm's sums) is summed likewise, but the graph goes on in
    copies: each copy reads the sum, and a node reading only sums, their successors of that
    kind, initializers and unsliced inputs runs once. Reshape targets fixed at the batch
    take the slice's.
    Shape inference then checks that every tensor that carried the batch on axis 0 carries the
    slice's, and that the others are unchanged (else GraphError naming the node)."""
    slices = _check_count("slices", slices)
    if not graph.info:
        graph.infer()
    if not graph.inputs:
        raise GraphError("split: the graph has no inputs to slice")
    first = next(iter(graph.inputs.values()))
    if not first.shape:
        raise GraphError("split: the first graph input is a scalar (no batch axis)")
    batch = first.shape[0]
    if slices > batch:
        raise GraphError(f"split: {slices} slices of a batch of {batch}")
    sizes = [len(piece) for piece in np.array_split(np.arange(batch), slices)]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    sliced = {name for name, info in graph.inputs.items() if info.shape[:1] == (batch,)}
    producers = graph.producers()
    sums, reduce = list(sums), list(reduce)
    for name in sums + reduce:
        if name not in producers:
            raise GraphError(f"split: sums or reduce names {name!r}, which no node produces")
    tail = _downstream(graph, set(sums))
    shared = set(graph.initializers) | (set(graph.inputs) - sliced)

    once = set(reduce)          # tensors every copy reads whole: sums and what runs once

    def rename(name, i):
        return name if not name or name in shared else f"{name}@{i}"
    nodes, initializers = [], dict(graph.initializers)
    for i, size in enumerate(sizes):
        for node in graph.order():
            if node.name in tail:
                continue
            if any(n in once for n in node.inputs) and \
                    all(not n or n in once or n in shared for n in node.inputs):
                if i == 0:
                    nodes.append(node)
                    once.update(node.outputs)
                continue
            inputs = [n if n in once else rename(n, i) for n in node.inputs]
            if node.op_type == "Reshape" and size != batch:
                inputs[1] = _slice_target(graph, node, batch, size, i, initializers) or \
                    inputs[1]
            nodes.append(Node(f"{node.name}@{i}", node.op_type, inputs,
                              [rename(n, i) for n in node.outputs], node.attrs, node.opset))
    for name in sums + reduce:
        nodes.append(Node(f"sum {name}", "Sum", [f"{name}@{i}" for i in range(slices)], [name],
                          opset=13))
    for node in graph.order():
        if node.name in tail:
            for name in node.inputs:
                if name and name not in shared and name not in sums and name not in once and \
                        producers.get(name) and producers[name].name not in tail:
                    raise GraphError(f"split: {node} runs after the gradient sum but reads "
                                     f"{name!r}, a tensor of each slice that is not summed")
            nodes.append(node)
    tail_outputs = {out for node in graph.nodes if node.name in tail for out in node.outputs}
    for name in graph.outputs:
        if name in tail_outputs or name in sums or name in once:
            continue
        if name in shared:
            raise GraphError(f"split: graph output {name!r} is an input or initializer")
        if graph.info[name].shape[:1] != (batch,):
            raise GraphError(f"split: graph output {name!r} of shape "
                             f"{list(graph.info[name].shape)} does not carry the batch on axis "
                             "0 (name it in sums= if it is a gradient)")
        nodes.append(Node(f"merge {name}", "Concat", [f"{name}@{i}" for i in range(slices)],
                          [name], {"axis": 0}, 13))
    inputs = {}
    for name, info in graph.inputs.items():
        if name in sliced:
            inputs.update({f"{name}@{i}": TensorInfo(info.dtype, (size,) + info.shape[1:])
                           for i, size in enumerate(sizes)})
        else:
            inputs[name] = info
    result = Graph(f"{graph.name} split {slices}", nodes, inputs, list(graph.outputs),
                   initializers)
    try:
        result.infer()
    except GraphError as error:
        raise GraphError(f"split: {error} (the graph does not keep the batch on axis 0 "
                         "there, so it cannot be split)") from None
    _check_slices(graph, result, batch, sizes, set(sums) | once)
    pieces = {name: [(f"{name}@{i}", bounds[i], bounds[i + 1]) for i in range(slices)]
              for name in sliced}
    return Split(result, pieces)


def _downstream(graph: Graph, tensors: set) -> set:
    """Names of the nodes that read `tensors`, directly or through other nodes."""
    found = set()
    for node in graph.order():
        if any(name in tensors for name in node.inputs):
            found.add(node.name)
            tensors |= set(node.outputs)
    return found


def _slice_target(graph, node, batch, size, i, initializers):
    """A Reshape's constant target with the batch as its first entry: the name of copy i's own,
    with the slice's size (an initializer added); None for other targets."""
    data, target = node.inputs[0], node.inputs[1]
    value = graph.initializers.get(target)
    if value is None or value.ndim != 1 or not value.size or value[0] != batch or \
            graph.info[data].shape[:1] != (batch,):
        return None
    own = value.copy()
    own[0] = size
    initializers[f"{target}@{i}"] = own
    return f"{target}@{i}"


def _check_slices(graph, result, batch, sizes, sums):
    """Every copy's tensor has the slice's batch on axis 0 where the graph's had the batch,
    and the graph's shape otherwise -- the summed gradients, whatever their first dimension,
    always the latter."""
    producers = graph.producers()
    for name, info in graph.info.items():
        if name not in producers:
            continue
        for i, size in enumerate(sizes):
            got = result.info.get(f"{name}@{i}")
            if got is None:
                continue
            carries = info.shape[:1] == (batch,) and name not in sums
            want = (size,) + info.shape[1:] if carries else info.shape
            if got.shape != want:
                raise GraphError(f"split: {producers[name]} gives {name!r} the shape "
                                 f"{list(got.shape)} on slice {i}, not {list(want)}: it does "
                                 "not keep the batch on axis 0, so the graph cannot be split")
