"""``swsim onnx MODEL.onnx``: import an ONNX model, run it on the VM through swHMAE's dispatch
with a progress bar (on ``--cgs`` core groups by the dataflow runtime, after ``--split``'s
pass), print each output's summary and the per-node table (docs/graph.md)."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict

import numpy as np
from tqdm import tqdm

from ...vm import Machine
from ...vm.config import PRESETS
from ..graph import DataflowSession, GraphError, import_onnx, souffle
from ..graph import souffle_codegen as codegen
from ..graph.dataflow import schedule, split
from ..graph.dispatch import Record
from ..graph.runtime import format_schedule


def register(subparsers) -> None:
    onnx = subparsers.add_parser("onnx", help="run an ONNX model on the VM: outputs and the "
                                 "per-node table (docs/graph.md)")
    onnx.add_argument("model", metavar="MODEL.onnx")
    onnx.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                      help="a graph input's value (default: seeded normal random values)")
    onnx.add_argument("--batch", type=int, metavar="N",
                      help="the size of symbolic first dimensions of the inputs")
    onnx.add_argument("--cgs", type=int, default=1, metavar="N",
                      help="core groups running nodes at once, each node on one (the dataflow "
                      "runtime; default 1)")
    onnx.add_argument("--split", type=int, default=1, metavar="S",
                      help="the split pass: S copies of the graph, each on a slice of the "
                      "batch, outputs concatenated (default 1: no split)")
    onnx.add_argument("--config", choices=sorted(PRESETS), default="sw26010",
                      help="machine preset (default sw26010)")
    onnx.add_argument("--check", action="store_true",
                      help="debug mode: check every CPE result against the MPE path")
    onnx.add_argument("--explain", action="store_true",
                      help="print the imported graph (nodes, shapes), with --souffle the "
                      "passes' decisions; do not run it")
    onnx.add_argument("--souffle", action="store_true",
                      help="run it as Souffle's fused generated kernels (docs/souffle.md)")
    onnx.add_argument("--estimate", choices=("model", "sampled"),
                      help="do not run the graph: place its nodes by the dataflow rules on "
                      "node times estimated by op and shape (bench graph's: the performance "
                      "models, or sampled simulation)")
    onnx.add_argument("--json", metavar="FILE", help="write the per-node records as JSON")
    onnx.set_defaults(func=run)


def _feeds(args, graph) -> dict:
    feeds = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise GraphError(f"--input must be NAME=FILE.npy, got {item!r}")
        try:
            feeds[name] = np.load(path)
        except (OSError, ValueError) as error:
            raise GraphError(f"--input {name}: cannot load {path!r}: {error}") from None
    rng = np.random.default_rng(0)
    for name, info in graph.inputs.items():
        if name not in feeds:
            feeds[name] = rng.standard_normal(info.shape).astype(info.dtype)
            print(f"input {name}: seeded normal random {info.dtype.name} "
                  f"{list(info.shape)}", file=sys.stderr)
    return feeds


def _shapes(path, batch):
    """The graph inputs' shapes with symbolic dimensions set to ``batch``."""
    if batch is None:
        return None
    from ..graph.onnx_import import load_model
    shapes = {}
    for value in load_model(path).graph.input:
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [batch if d.dim_param or not d.HasField("dim_value")
                              else d.dim_value for d in dims]
    return shapes


def explain(graph) -> str:
    lines = []
    for node in graph.order():
        shapes = " ".join("x".join(map(str, graph.info[n].shape)) or "scalar"
                          for n in node.outputs if n)
        lines.append(f"{node.name}  {node.op_type}  -> {shapes}")
    lines.append(f"{len(graph.nodes)} nodes, {len(graph.initializers)} constants "
                 f"({sum(v.nbytes for v in graph.initializers.values()):,} bytes)")
    return "\n".join(lines)


def run(args) -> int:
    if args.batch is not None and args.batch < 1:
        raise GraphError(f"--batch must be at least 1, got {args.batch}")
    if args.split < 1:
        raise GraphError(f"--split must be at least 1, got {args.split}")
    graph = import_onnx(args.model, shapes=_shapes(args.model, args.batch))
    if args.souffle:
        return _souffle(args, graph)
    plan = split(graph, args.split) if args.split > 1 else None
    if args.explain:
        print(explain(plan.graph if plan else graph))
        return 0
    machine = Machine(args.config)
    if args.estimate:
        records, placement = estimate(plan.graph if plan else graph, machine, args.cgs,
                                      args.estimate == "sampled")
        print(format_schedule(records, placement, machine.config.clock_hz))
        _write_json(args.json, records)
        return 0
    feeds = _feeds(args, graph)
    if plan:
        graph, feeds = plan.graph, plan.feeds(feeds)
    with tqdm(unit="node", file=sys.stderr, disable=not sys.stderr.isatty()) as bar:
        def progress(node):
            bar.set_description(node.name)
            bar.update(1)
        session = DataflowSession(graph, machine=machine, cgs=args.cgs,
                                  check=args.check, progress=progress)
        bar.reset(total=len(session.nodes))     # with the layout pass's transforms
        outputs = session.run(feeds)
    _summaries(outputs)
    print(session.report())
    _write_json(args.json, session.records)
    return 0


def _souffle(args, graph) -> int:
    """Lower, transform (vertical, horizontal), fuse and run the generated kernels."""
    if args.cgs != 1 or args.check or args.split != 1 or args.estimate:
        raise GraphError("--souffle runs the fused kernels on one core group, without --check, "
                         "--split or --estimate (its tests compare them with the unfused "
                         "program)")
    program = souffle.lower(graph)
    for name in souffle.PASSES:
        program = souffle.PASSES[name](program)
    if args.explain:
        print(souffle.explain(program))
        return 0
    machine = Machine(args.config)
    launches = codegen.plan(program, machine.config, fused=True)
    outputs, stats = codegen.run(program, launches, machine, _feeds(args, graph))
    _summaries(outputs)
    print(codegen.report(stats))
    if args.json:
        from .bench import as_json
        as_json.dump(args.json, stats)
    return 0


def _summaries(outputs) -> None:
    for name, value in outputs.items():
        flat = value.reshape(-1)
        summary = (f"mean {flat.mean():.6g}, min {flat.min():.6g}, max {flat.max():.6g}"
                   if flat.size and np.issubdtype(value.dtype, np.number) else "")
        top = f", argmax {int(flat.argmax())}" if flat.size else ""
        print(f"output {name}: {value.dtype.name} {list(value.shape)} {summary}{top}")


def _write_json(path, records) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump([asdict(r) for r in records], handle, indent=1)


def estimate(graph, machine, cgs, sampled):
    """(records, schedule) of `graph` on `cgs` CGs of `machine` without running it: node
    times by op and shape from ``bench graph``'s NodeCosts, placed by ``dataflow.schedule``."""
    from .bench.graph import NodeCosts
    if isinstance(cgs, bool) or not isinstance(cgs, int) or not 1 <= cgs <= machine.num_cgs:
        raise GraphError(f"cgs must be an integer in 1..{machine.num_cgs} (the chip's core "
                         f"groups), got {cgs!r}")
    costs = NodeCosts(machine, sampled=sampled)
    placed = schedule(graph, lambda node: costs.cpe(graph, node)[0], cgs)
    by_name = {node.name: node for node in graph.nodes}
    records = []
    for name, (cg, start, end) in placed.placed.items():
        node = by_name[name]
        _, device, source = costs.cpe(graph, node)
        records.append(Record(name, node.op_type, device, f"estimate ({source})", end - start,
                              0, cg=cg, start=start))
    return records, placed
