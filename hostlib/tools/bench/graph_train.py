"""`swsim bench graph`'s training-step table (docs/graph.md "Benchmark: bench graph"): whole
training steps (forward, backward, update) of a GraphModel run by the Solver on the VM -- the
Caffe LeNet lowered to the graph IR, on scikit-learn's digits -- on 1 core group and on 4:
each node's work shared by the 4 CGs, the dataflow runtime without split (nodes whole on the
CGs, several at once), and with the split pass (4 copies on a quarter of the batch each, the
gradients summed on the CPEs). Simulated, not estimated: every node runs."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ... import train
from ...train.lower import graph_model

CGS = 4
QUICK_BATCH, BATCH = 16, 64
QUICK_STEPS, STEPS = 1, 3
# (label, core groups, GraphModel's split)
CONFIGS = (("1 CG", 1, None), (f"{CGS} CGs, nodes shared", CGS, None),
           (f"{CGS} CGs, dataflow", CGS, 1), (f"{CGS} CGs, dataflow, split {CGS}", CGS, CGS))


@dataclass
class TrainRow:
    config: str
    cgs: int
    split: int              # None: each node shared by the CGs
    step_ms: float          # simulated time of the last step
    host_seconds: float     # median host time of a step
    losses: list = field(default_factory=list)
    speedup: float = 1.0    # over the 1-CG row's step


@dataclass
class TrainTable:
    model: str
    batch: int
    steps: int
    rows: list


def lenet(batch: int):
    """The example LeNet's NetParameter with its Data layers' batch set to ``batch``."""
    spec = train.parse_net(train.example("lenet"))
    for layer in spec.layer:
        if layer.type == "Data":
            layer.data_param.batch_size = batch
    return spec


def run(quick=False, progress=None) -> TrainTable:
    batch, steps = (QUICK_BATCH, QUICK_STEPS) if quick else (BATCH, STEPS)
    spec = train.SolverSpec(base_lr=0.1, momentum=0.9, random_seed=1)
    rows = []
    for label, cgs, split in CONFIGS:
        if progress:
            progress(f"train step: {label}")
        solver = train.Solver(graph_model(lenet(batch), seed=1, split=split), spec, cgs=cgs)
        results, hosts = [], []
        for _ in range(steps):
            started = time.perf_counter()
            results.append(solver.step())
            hosts.append(time.perf_counter() - started)
        rows.append(TrainRow(label, cgs, split, results[-1].sim_seconds * 1e3,
                             float(np.median(hosts)), [r.loss for r in results]))
    for row in rows:
        row.speedup = rows[0].step_ms / row.step_ms
    return TrainTable("LeNet (Caffe, lowered)", batch, steps, rows)


def format_table(table: TrainTable) -> list:
    lines = [f"{table.model}, batch {table.batch}, training step (forward, backward, update; "
             f"{table.steps} step{'s' if table.steps > 1 else ''} each)"]
    header = ("configuration", "step ms", "speed-up", "host s/step", "losses")
    rows = [header] + [(r.config, f"{r.step_ms:.3f}", f"{r.speedup:.2f}x",
                        f"{r.host_seconds:.1f}", " ".join(f"{x:.5f}" for x in r.losses))
                       for r in table.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return lines + ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                    for row in rows]
