"""``swsim bench hope``: HOPE's schedulers (hostlib/graph/hope.py, docs/hope.md) on an
Inception-style 4-branch block and a tiny LSTM whose gates are scheduling units. Per graph and
scheduler: predicted makespan, the makespan of the plan run on the VM, solver seconds, with
and without super-ops; every plan's outputs are checked against the graph engine's. On
sub-meshes also the makespan modelled with the blocks sharing the DMA engine."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...graph import Session, hope, hope_submesh, import_onnx, souffle
from ....vm.machine import Machine

RTOL = 1e-4


def _model(nodes, inputs, outputs, initializers):
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        nodes, "hope",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers.items()])
    return import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def inception(channels=16, size=8, seed=0):
    """x -> {1x1; 1x1-3x3; 1x1-3x3-3x3; maxpool-1x1}, each conv + Relu, Concat."""
    from onnx import helper
    rng = np.random.default_rng(seed)
    c, half = channels, channels // 2
    weights, nodes = {}, []

    def conv(name, source, cin, cout, k):
        weights[name + "_w"] = (rng.standard_normal((cout, cin, k, k)) /
                                np.sqrt(cin * k * k)).astype(np.float32)
        nodes.append(helper.make_node("Conv", [source, name + "_w"], [name], name=name,
                                      pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [name], [name + "_r"], name=name + "_relu"))
        return name + "_r"
    branches = [conv("b1", "x", c, c, 1),
                conv("b2b", conv("b2a", "x", c, half, 1), half, c, 3),
                conv("b3c", conv("b3b", conv("b3a", "x", c, half, 1), half, half, 3),
                     half, c, 3)]
    nodes.append(helper.make_node("MaxPool", ["x"], ["pool"], name="pool",
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    branches.append(conv("b4", "pool", c, c, 1))
    nodes.append(helper.make_node("Concat", branches, ["y"], name="concat", axis=1))
    return _model(nodes, [("x", [1, c, size, size])], [("y", [1, 4 * c, size, size])],
                  weights)


def lstm(hidden=32, steps=2, batch=4, seed=0):
    """``steps`` LSTM steps; per step [x, h] -> four gate Gemms (+ Sigmoid/Tanh), the cell
    update c = f·c + i·g and h = o·tanh(c). Every gate is a scheduling unit."""
    from onnx import helper
    rng = np.random.default_rng(seed)
    weights, nodes = {}, []
    activation = {"i": "Sigmoid", "f": "Sigmoid", "o": "Sigmoid", "g": "Tanh"}
    for gate in activation:
        weights["W" + gate] = (rng.standard_normal((hidden, 2 * hidden)) /
                               np.sqrt(2 * hidden)).astype(np.float32)
        weights["b" + gate] = np.zeros(hidden, np.float32)
    h, cell = "h0", "c0"
    for t in range(steps):
        xh = f"xh{t}"
        nodes.append(helper.make_node("Concat", [f"x{t}", h], [xh], name=xh, axis=1))
        out = {}
        for gate, act in activation.items():
            z = f"{gate}{t}"
            nodes.append(helper.make_node("Gemm", [xh, "W" + gate, "b" + gate], [z + "_z"],
                                          name=z + "_gemm", transB=1))
            nodes.append(helper.make_node(act, [z + "_z"], [z], name=z))
            out[gate] = z
        nodes += [helper.make_node("Mul", [out["f"], cell], [f"fc{t}"], name=f"fc{t}"),
                  helper.make_node("Mul", [out["i"], out["g"]], [f"ig{t}"], name=f"ig{t}"),
                  helper.make_node("Add", [f"fc{t}", f"ig{t}"], [f"c{t + 1}"],
                                   name=f"c{t + 1}"),
                  helper.make_node("Tanh", [f"c{t + 1}"], [f"tc{t}"], name=f"tc{t}"),
                  helper.make_node("Mul", [out["o"], f"tc{t}"], [f"h{t + 1}"],
                                   name=f"h{t + 1}")]
        h, cell = f"h{t + 1}", f"c{t + 1}"
    inputs = [(f"x{t}", [batch, hidden]) for t in range(steps)] + \
        [("h0", [batch, hidden]), ("c0", [batch, hidden])]
    return _model(nodes, inputs, [(h, [batch, hidden])], weights)


GRAPHS = {"inception": inception, "lstm": lstm}
QUICK = {"inception": dict(channels=8, size=8), "lstm": dict(hidden=16, steps=2)}
FULL = {"inception": dict(channels=16, size=16), "lstm": dict(hidden=64, steps=4)}
DEVICE_SETS = {"CG0+MPE": 1, "all CGs+MPE": None}     # name -> core groups (None: all)
# --submeshes: CG 0's mesh as blocks of rows (name -> rows per block); on the whole mesh
# every scheduler gives the one order, so only the first two run there
SUBMESH_SETS = {"8x8": (8,), "4x8+4x8": (4, 4), "6x8+2x8": (6, 2), "4 x 2x8": (2, 2, 2, 2)}
WHOLE_MESH_SCHEDULERS = ("sequential", "StarPU-like greedy")


@dataclass
class Result:
    graph: str
    devices: str
    super_ops: bool
    scheduler: str
    units: int
    predicted_cycles: float
    modelled_cycles: float          # with the shared DMA engine (sub-meshes; else predicted)
    simulated_cycles: float
    solve_seconds: float
    devices_used: int
    max_relative_error: float


def feeds_for(graph, seed=1):
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(info.shape).astype(info.dtype)
            for name, info in graph.inputs.items()}


def run(quick=False, graphs=tuple(GRAPHS), progress=None) -> list:
    results = []
    sizes = QUICK if quick else FULL
    for name in graphs:
        graph = GRAPHS[name](**sizes[name])
        feeds = feeds_for(graph)
        machine = Machine()
        want = Session(graph, machine=machine).run(feeds)
        cache = {}
        for label, cgs in DEVICE_SETS.items():
            base = hope.profile(graph, machine, feeds, hope.devices(machine, cgs), cache)
            results += _schedule_all(name, label, graph, machine, feeds, base, want, progress)
    return results


def _schedule_all(name, label, graph, machine, feeds, base, want, progress):
    results = []
    for super_ops in (False, True):
        problem = hope.merge_super_ops(base) if super_ops else base
        for scheduler, schedule in hope.SCHEDULERS.items():
            if progress:
                progress(f"{name}, {label}: {scheduler}")
            plan = schedule(problem)
            got, simulated = hope.execute(graph, problem, plan, machine, feeds)
            results.append(Result(name, label, super_ops, scheduler, len(problem.units),
                                  plan.makespan, plan.makespan, simulated.makespan,
                                  plan.solve_seconds,
                                  len(set(plan.device.values())), _error(got, want)))
    return results


def run_submeshes(quick=False, graphs=tuple(GRAPHS), progress=None) -> list:
    """The graphs lowered to Souffle TEs, scheduled on CPE sub-meshes of CG 0 and run as one
    generated launch per plan (hope_submesh); errors against the TE program in numpy."""
    results = []
    sizes = QUICK if quick else FULL
    for name in graphs:
        graph = GRAPHS[name](**sizes[name])
        program = souffle.lower(graph)
        feeds = {k: v.astype(np.float64) for k, v in feeds_for(graph).items()}
        want = program.evaluate(feeds)
        machine, cache = Machine(), {}
        for label, rows in SUBMESH_SETS.items():
            problem = hope_submesh.profile(program, machine,
                                           hope_submesh.submeshes(machine.config, rows), cache)
            for scheduler, schedule in hope.SCHEDULERS.items():
                if len(rows) == 1 and scheduler not in WHOLE_MESH_SCHEDULERS:
                    continue
                if progress:
                    progress(f"{name}, {label}: {scheduler}")
                plan = schedule(problem)
                got, stats = hope_submesh.execute(program, plan, machine, feeds)
                results.append(Result(name, label, False, scheduler, len(problem.units),
                                      plan.makespan, problem.model(plan),
                                      sum(s.cycles for s in stats),
                                      plan.solve_seconds, len(set(plan.device.values())),
                                      _error(got, want)))
    return results


def _error(got, want) -> float:
    return max(float(np.max(np.abs(got[k] - want[k])) /
                     max(float(np.max(np.abs(want[k]))), 1e-30)) for k in want)


def format_report(results) -> str:
    header = ("graph", "devices", "super-ops", "scheduler", "units", "predicted", "modelled",
              "on the VM", "vs StarPU", "solve s", "devices", "error")
    starpu = {(r.graph, r.devices, r.super_ops): r.simulated_cycles for r in results
              if r.scheduler == "StarPU-like greedy"}
    rows = [header] + [
        (r.graph, r.devices, "yes" if r.super_ops else "no", r.scheduler, str(r.units),
         f"{r.predicted_cycles:,.0f}", f"{r.modelled_cycles:,.0f}",
         f"{r.simulated_cycles:,.0f}",
         f"{100 * (r.simulated_cycles / starpu[(r.graph, r.devices, r.super_ops)] - 1):+.1f}%",
         f"{r.solve_seconds:.3f}", str(r.devices_used), f"{r.max_relative_error:.1e}")
        for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)


def steps(graphs=tuple(GRAPHS), submeshes=False) -> int:
    """Plans ``run`` (or ``run_submeshes``) executes (for a progress bar)."""
    if submeshes:
        return len(graphs) * (len(WHOLE_MESH_SCHEDULERS) +
                              (len(SUBMESH_SETS) - 1) * len(hope.SCHEDULERS))
    return len(graphs) * len(DEVICE_SETS) * 2 * len(hope.SCHEDULERS)


def as_json(results) -> list:
    return [asdict(r) for r in results]
