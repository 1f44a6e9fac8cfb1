"""Running a graph on the VM (docs/graph.md "Running"): ``Session(graph).run(feeds)`` takes
the nodes in topological order through swHMAE's dispatch (``dispatch.run_node``), frees each
tensor after its last reader, and keeps the per-node ``Record``s; ``report()`` is the per-node
table (device, algorithm, cycles, DMA bytes, share of the graph's simulated time)."""
from __future__ import annotations

import numpy as np

from ...vm import Machine
from .dispatch import run_node
from .ir import Graph, GraphError


class Session:
    """A graph ready to run on `machine`: ``run(feeds)`` returns the outputs."""

    def __init__(self, graph: Graph, *, machine=None, cgs=1, engine="c", check=False,
                 minimum_work=True, progress=None):
        self.graph = graph
        self.nodes = graph.order()
        if not graph.info:
            graph.infer()
        self.machine = machine or Machine()
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
            outputs, record = run_node(node, inputs, machine=self.machine, **self.options)
            self.records.append(record)
            for name, value in zip(node.outputs, outputs):
                if name:
                    values[name] = value
            for name in node.inputs:
                if name and last_use.get(name) == index and name not in keep:
                    values.pop(name, None)
        return {name: values[name] for name in self.graph.outputs}

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
    def cycles(self) -> int:
        """Simulated cycles of the last run, nodes one after another on one core group's
        MPE or CPE array (the ``cgs`` CGs sharing a node's work)."""
        return sum(r.cycles for r in self.records)

    def report(self) -> str:
        return format_records(self.records, self.machine.config.clock_hz)


def format_records(records: list, clock_hz: float) -> str:
    total = sum(r.cycles for r in records) or 1
    header = ("node", "op", "device", "algorithm", "cycles", "DMA bytes", "share", "note")
    rows = [header] + [(r.node, r.op_type, r.device, r.algorithm, f"{r.cycles:,}",
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

