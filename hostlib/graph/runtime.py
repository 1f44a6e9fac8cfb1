"""Running a graph on the VM (docs/graph.md "Running"): ``Session(graph).run(feeds)`` takes
the nodes in topological order through swHMAE's dispatch (``dispatch.run_node``), frees each
tensor after its last reader, and keeps the per-node ``Record``s; ``report()`` is the per-node
table (device, algorithm, cycles, DMA bytes, share of the graph's simulated time).
``DataflowSession`` is the two-level parallel runtime: nodes on several core groups at once."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace

import numpy as np

from ...vm import Machine
from .dataflow import Schedule, place
from .dispatch import run_node
from .ir import Graph, GraphError
from .layout_selection import plan_layouts

# Main memory reserved for the operands of the nodes running at once (the CGs' threads
# allocate while the others run; docs/vm.md "Chip"); only the pages written take RAM. Grown
# whenever nothing runs to twice the most the running nodes took so far.
SCRATCH_BYTES = 1 << 30


class Session:
    """A graph ready to run on `machine`: ``run(feeds)`` returns the outputs."""

    def __init__(self, graph: Graph, *, machine=None, cgs=1, engine="c", check=False,
                 minimum_work=True, progress=None, layouts=True):
        if not graph.info:
            graph.infer()
        self.machine = machine or Machine()
        self.transforms_planned = 0       # Transforms the layout pass inserted (layouts=True)
        if layouts:        # on a copy: the caller's graph stays as it was
            graph = Graph(graph.name, [replace(node, inputs=list(node.inputs),
                                               outputs=list(node.outputs)) for node in graph.nodes],
                          dict(graph.inputs), list(graph.outputs), graph.initializers,
                          dict(graph.info))
            self.transforms_planned = plan_layouts(graph, self.machine.config, cgs, minimum_work)
        # the pass's Transforms run where the convolutions they came out of ran them: on the
        # CPEs, whatever the minimum-work rule would say of a transform alone
        self.on_cpes = {node.name for node in graph.nodes if node.attr("layout_pass")}
        self.graph = graph
        self.nodes = graph.order()
        self.options = dict(cgs=cgs, engine=engine, check=check, minimum_work=minimum_work)
        self.progress = progress          # called with each node before it runs
        self.records: list = []

    def run(self, feeds: dict) -> dict:
        """The graph's outputs (name -> array) for ``feeds`` (graph input name -> array of
        its declared dtype and shape)."""
        values = dict(self.graph.initializers)
        values.update(self._check_feeds(feeds))
        last_use = {}
        for index, node in enumerate(self.nodes):
            for name in node.inputs:
                last_use[name] = index
        keep = set(self.graph.outputs) | set(self.graph.initializers)
        self.records = []
        for index, node in enumerate(self.nodes):
            if self.progress:
                self.progress(node)
            inputs = [values[name] if name else None for name in node.inputs]
            outputs, record = run_node(node, inputs, machine=self.machine,
                                       **self.node_options(node))
            self.records.append(record)
            for name, value in zip(node.outputs, outputs):
                if name:
                    values[name] = value
            for name in node.inputs:
                if name and last_use.get(name) == index and name not in keep:
                    values.pop(name, None)
        return {name: values[name] for name in self.graph.outputs}

    def node_options(self, node) -> dict:
        """run_node's options for ``node``."""
        if node.name in self.on_cpes:
            return dict(self.options, minimum_work=False)
        return self.options

    def _check_feeds(self, feeds: dict) -> dict:
        if not isinstance(feeds, dict):
            raise GraphError(f"feeds must be a dict of input name -> array, got "
                             f"{type(feeds).__name__}")
        unknown = sorted(set(feeds) - set(self.graph.inputs))
        if unknown:
            raise GraphError(f"feeds name {unknown}, which are not graph inputs (they are "
                             f"{sorted(self.graph.inputs)})")
        checked = {}
        for name, info in self.graph.inputs.items():
            if name not in feeds:
                raise GraphError(f"graph input {name!r} is not fed")
            value = np.asarray(feeds[name])
            if value.dtype != info.dtype or value.shape != info.shape:
                raise GraphError(f"graph input {name!r} must be {info.dtype.name} of shape "
                                 f"{list(info.shape)}, got {value.dtype.name} of shape "
                                 f"{list(value.shape)}")
            checked[name] = value
        return checked

    @property
    def layout_transforms(self) -> int:
        """Layout transforms the last run ran: the pass's Transform nodes and those the
        operators ran themselves (a Conv whose algorithm's layout is not its operand's)."""
        return sum(r.layout_transforms for r in self.records)

    @property
    def cycles(self) -> int:
        """Simulated cycles of the last run, nodes one after another on one core group's
        MPE or CPE array (the ``cgs`` CGs sharing a node's work)."""
        return sum(r.cycles for r in self.records)

    def report(self) -> str:
        return format_records(self.records, self.machine.config.clock_hz)


class DataflowSession(Session):
    """swFLOWpro's two-level parallelism on the chip (docs/graph.md "Two-level parallelism"):
    each node runs whole on one core group (its CPE array or its MPE), up to ``cgs`` nodes at
    once, one worker thread per CG driving ``machine.core_group(k)`` (the C engine releases
    the GIL, so the CGs are simulated side by side). ``dataflow.place`` decides, in simulated
    time, which node each CG runs next; the outputs are those of a ``Session`` on one CG,
    bit for bit, and the simulated time is the schedule's makespan."""

    def __init__(self, graph: Graph, *, machine=None, cgs=1, engine="c", check=False,
                 minimum_work=True, progress=None, layouts=True):
        super().__init__(graph, machine=machine, engine=engine, check=check,
                         minimum_work=minimum_work, progress=progress, layouts=layouts)
        if isinstance(cgs, bool) or not isinstance(cgs, int) or \
                not 1 <= cgs <= self.machine.num_cgs:
            raise GraphError(f"cgs must be an integer in 1..{self.machine.num_cgs} (the "
                             f"chip's core groups), got {cgs!r}")
        self.cgs = cgs
        self.schedule: Schedule | None = None

    def run(self, feeds: dict) -> dict:
        values = dict(self.graph.initializers)
        values.update(self._check_feeds(feeds))
        readers = {}
        for node in self.nodes:
            for name in node.inputs:
                readers[name] = readers.get(name, 0) + 1
        keep = set(self.graph.outputs) | set(self.graph.initializers)
        records = {}
        mem = self.machine.mem
        mem.reserve(min(SCRATCH_BYTES, mem.available))
        mark = mem.mark()
        with ExitStack() as stack:
            stack.callback(mem.release, mark)      # after the workers are joined (below)
            workers = [stack.enter_context(ThreadPoolExecutor(
                1, thread_name_prefix=f"swsim-graph-cg{k}")) for k in range(self.cgs)]

            def launch(node, cg, start):
                if self.progress:
                    self.progress(node)
                future = workers[cg].submit(
                    run_node, node, [values[name] if name else None for name in node.inputs],
                    machine=self.machine.core_group(cg), release=False,
                    **self.node_options(node))

                def cycles():
                    outputs, record = future.result()
                    record.cg, record.start = cg, start
                    records[node.name] = record
                    for name, value in zip(node.outputs, outputs):
                        if name:
                            values[name] = value
                    for name in node.inputs:
                        readers[name] -= 1
                        if name and not readers[name] and name not in keep:
                            values.pop(name, None)
                    return record.cycles
                return cycles
            room = [mem.capacity - mark]

            def settle():      # every node placed so far is done: nothing uses the operands
                used = mem.mark() - mark
                mem.release(mark)
                if 2 * used > room[0]:
                    room[0] = min(2 * used, mem.available)
                    mem.reserve(room[0])
            self.schedule = place(self.graph, self.cgs, launch, settle=settle)
        self.records = [records[name] for name in self.schedule.placed]
        return {name: values[name] for name in self.graph.outputs}

    @property
    def cycles(self) -> int:
        """Simulated cycles of the last run: the schedule's makespan over the CGs."""
        return self.schedule.makespan if self.schedule else 0

    def report(self) -> str:
        return format_schedule(self.records, self.schedule, self.machine.config.clock_hz)


def format_schedule(records: list, schedule: Schedule, clock_hz: float) -> str:
    """The per-node table of placed records, and the makespan with each CG's busy cycles."""
    busy = ", ".join(f"{b:,}" for b in schedule.busy)
    return (format_records(records, clock_hz) +
            f"\n{schedule.cgs} CGs: makespan {schedule.makespan:,} cycles = "
            f"{schedule.makespan / clock_hz * 1e3:.3f} ms simulated (busy per CG: {busy}; "
            f"{sum(schedule.busy) / max(schedule.makespan, 1):.2f}x the nodes one after "
            "another)")


def format_records(records: list, clock_hz: float) -> str:
    total = sum(r.cycles for r in records) or 1
    placed = any(r.cg is not None for r in records)      # the dataflow runtime's: where, when
    header = ("node", "op", "device", "algorithm", "cycles", "DMA bytes", "share", "note")
    header = ("node", "cg", "start") + header[1:] if placed else header
    rows = [header] + [(r.node,) + ((str(r.cg), f"{r.start:,}") if placed else ()) +
                       (r.op_type, r.device, r.algorithm, f"{r.cycles:,}",
                        f"{r.dma_bytes:,}", f"{100 * r.cycles / total:.1f}%",
                        r.reason if r.device == "MPE" else
                        ("" if r.check_error is None else f"check {r.check_error:.1e}"))
                       for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    by_device = {}
    for r in records:
        by_device[r.device] = by_device.get(r.device, 0) + r.cycles
    summary = ", ".join(f"{device} {100 * c / total:.1f}%" for device, c in by_device.items())
    lines.append(f"total {sum(r.cycles for r in records):,} cycles = "
                 f"{sum(r.cycles for r in records) / clock_hz * 1e3:.3f} ms simulated "
                 f"({summary})")
    return "\n".join(lines)

