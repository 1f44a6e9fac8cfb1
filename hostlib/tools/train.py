"""``swsim train NET.prototxt``: build the Net, print the operator table (``--explain``) or run
the Solver with a progress bar, a JSONL log, atomic checkpoints and ``--resume``."""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from typing import Optional

from tqdm import tqdm

from ...vm.vm_commands import count_argument
from ..train import Net, Solver, TrainError, parse_net, parse_solver
from ..train import allreduce
from ..train.prototxt import SolverParameter, example
from ..train.reference import Reference

DEFAULT_STEPS = 100
REFERENCE_TOLERANCE = 1e-3      # relative loss difference float32 VM vs float64 numpy (issue 12)


def register(subparsers) -> None:
    train = subparsers.add_parser("train", help="train a Caffe prototxt net on the VM "
                                  "(docs/train.md)")
    train.add_argument("net", metavar="NET.prototxt",
                       help="a net prototxt, or a shipped example's name (lenet, mlp, ...)")
    train.add_argument("--solver", metavar="SOLVER.prototxt",
                       help="solver, or an example's (lenet_solver); default: SGD, base_lr "
                            "0.01, lr_policy fixed")
    train.add_argument("--cgs", type=count_argument(1), default=1, metavar="N",
                       help="core groups sharing each minibatch (Algorithm 9; default 1)")
    train.add_argument("--steps", type=count_argument(1), metavar="N",
                       help=f"steps to run (default: the solver's max_iter, else "
                            f"{DEFAULT_STEPS})")
    train.add_argument("--log", metavar="FILE.jsonl", help="one JSON object per step")
    train.add_argument("--checkpoint-dir", metavar="D")
    train.add_argument("--checkpoint-every", type=count_argument(1), metavar="N",
                       help="steps between checkpoints (default: the solver's snapshot)")
    train.add_argument("--resume", metavar="D", help="continue from the latest checkpoint in D "
                       "(and save into D unless --checkpoint-dir says otherwise)")
    train.add_argument("--plot", metavar="FILE.png", help="loss (and test accuracy) per step")
    train.add_argument("--allreduce", choices=allreduce.ALGORITHMS, default="rabenseifner",
                       help="under mpiexec -n P: the gradient allreduce between the P nodes "
                            "(default rabenseifner)")
    train.add_argument("--supernode-size", type=count_argument(1),
                       default=allreduce.NODES_PER_SUPERNODE, metavar="Q",
                       help="nodes per supernode in the network model and Topawa's "
                            f"rank mapping (default {allreduce.NODES_PER_SUPERNODE})")
    train.add_argument("--reference", action="store_true",
                       help="run the float64 numpy reference beside the VM: log each step's "
                            "reference loss and relative difference, fail if one exceeds "
                            f"{REFERENCE_TOLERANCE:g}")
    train.add_argument("--explain", action="store_true",
                       help="print each layer's operator, layout and predicted time; no training")
    train.set_defaults(func=run)


def format_explain(net: Net) -> str:
    rows = net.explain()
    header = ("layer", "type", "top shape", "params", "operator", "layout", "predicted")
    table = [header] + [(r["layer"], r["type"], " ".join("x".join(map(str, s)) or "scalar"
                                                         for s in r["shapes"]),
                         str(r["params"]), r["operator"], r["layout"],
                         "-" if r["predicted_seconds"] is None
                         else f"{r['predicted_seconds'] * 1e6:.1f} us") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    known = [r["predicted_seconds"] for r in rows if r["predicted_seconds"] is not None]
    lines.append(f"predicted step time (layers with a model): {sum(known) * 1e3:.3f} ms; "
                 f"parameters {net.params.buffer.size}, packed gradient buffer "
                 f"{net.grads.nbytes} bytes")
    return "\n".join(lines)


def _source(text: str):
    """A prototxt path, or the name of a shipped example (``lenet``, ``lenet_solver``)."""
    if os.path.exists(text) or not re.fullmatch(r"[\w-]+", text):
        return text
    return example(text)


def run(args) -> int:
    spec = parse_net(_source(args.net))
    solver = (parse_solver(_source(args.solver)) if args.solver
              else SolverParameter(base_lr=0.01))
    if args.explain:
        from ...vm import Machine
        print(format_explain(Net(spec, "TRAIN", slices=args.cgs, machine=Machine())))
        return 0
    comm = allreduce.world()
    reducer = None if comm is None else allreduce.GradientAllreduce(
        comm, args.allreduce, supernode_size=args.supernode_size, cgs=args.cgs)
    if reducer is None or reducer.size == 1:
        return _run(args, spec, solver, reducer)
    try:
        return _run(args, spec, solver, reducer)
    except BaseException as exc:          # one rank failing would leave the others waiting
        print(f"swsim train: rank {comm.Get_rank()}: {exc}", file=sys.stderr, flush=True)
        comm.Abort(1)                     # asks mpiexec to end every rank
        raise SystemExit(1) from None


def _open_log(path: str, resumed: Optional[int]):
    """The --log file to append to: a new one, or on a resume from step `resumed` the old one
    without the records of the steps after it (a run killed after its last checkpoint logged
    them; they run again) nor a line cut by the kill."""
    if resumed is None:
        return open(path, "w", encoding="utf-8")
    kept = []
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as old:
        for line in old:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and isinstance(record.get("step"), int) and \
                        record["step"] <= resumed:
                    kept.append(line if line.endswith("\n") else line + "\n")
    log = open(path, "w", encoding="utf-8")
    log.writelines(kept)
    return log


def _run(args, spec, solver, reducer) -> int:
    """Train; with a reducer (one node of an MPI run) only rank 0 logs, saves and plots."""
    lead = reducer is None or reducer.comm.Get_rank() == 0
    trainer = Solver(spec, solver, cgs=args.cgs, gradient_reducer=reducer,
                     shard=(0, 1) if reducer is None else
                     (reducer.comm.Get_rank(), reducer.size))
    if reducer is not None:
        reducer.machine = trainer.chip      # the node's reductions on its one chip too
    every = args.checkpoint_every or solver.snapshot
    directory = args.checkpoint_dir or args.resume     # a resumed run goes on saving there
    if directory is None and args.checkpoint_every:
        raise TrainError("--checkpoint-every needs --checkpoint-dir")
    if args.reference and reducer is not None and reducer.size > 1:
        raise TrainError("--reference follows one node's data; run it without mpiexec")
    compressed = hasattr(trainer.gradient_reducer, "state")   # RedSync: per-rank residuals
    # the ranks' parameters are the same; RedSync's save is collective (rank 0 writes)
    directory = directory if lead or compressed else None
    if compressed and lead:
        print(trainer.gradient_reducer.format_plan(), flush=True)
    if args.resume:
        trainer.restore(args.resume)
    reference = Reference(trainer) if args.reference else None
    worst = 0.0
    steps = args.steps or solver.max_iter or DEFAULT_STEPS
    log = _open_log(args.log, trainer.step_count if args.resume else None) \
        if args.log and lead else None
    records, switches_shown = [], 0
    try:
        with tqdm(total=steps, initial=trainer.step_count, unit="step",
                  dynamic_ncols=True, disable=not lead) as bar:
            while trainer.step_count < steps:
                result = trainer.step()
                if reducer is not None:
                    result = reducer.global_result(result)
                    bytes_sent = reducer.comm.allgather(trainer.gradient_reducer.step_bytes)
                record = dict(step=result.step, loss=result.loss, lr=result.lr,
                              sim_seconds=result.sim_seconds, host_seconds=result.host_seconds)
                if reducer is not None:
                    record["bytes_sent"] = bytes_sent     # by each rank, in rank order
                if reference is not None:
                    record["reference_loss"] = reference.step()
                    record["relative_difference"] = abs(result.loss / record["reference_loss"]
                                                        - 1)
                    worst = max(worst, record["relative_difference"])
                if lead and solver.test_interval and result.step % solver.test_interval == 0:
                    record["test_accuracy"] = trainer.test()
                records.append(record)
                if compressed and lead:               # blobs re-planned sparse <-> dense
                    switches = trainer.gradient_reducer.switches
                    for iteration, plan in switches[switches_shown:]:   # 0-based
                        tqdm.write(f"step {iteration + 1}: "
                                   + trainer.gradient_reducer.format_plan([plan]))
                    switches_shown = len(switches)
                if log:
                    log.write(json.dumps(record) + "\n")
                    log.flush()
                if directory and every and result.step % every == 0:
                    trainer.save(directory)
                bar.set_postfix(loss=f"{result.loss:.4f}",
                                acc=_percent(record.get("test_accuracy", result.accuracy)),
                                sim=f"{result.sim_seconds * 1e3:.2f}ms",
                                host=f"{result.host_seconds:.2f}s")
                bar.update(1)
    finally:
        if log:
            log.close()
    if directory and not (every and trainer.step_count % every == 0):
        trainer.save(directory)                        # the last step is always kept
    if args.plot and lead:
        plot(records, args.plot)
    if reference is not None:
        verdict = "within" if worst <= REFERENCE_TOLERANCE else "EXCEEDS"
        print(f"float64 reference: largest relative loss difference {worst:.3g} over "
              f"{len(records)} steps ({verdict} {REFERENCE_TOLERANCE:g})")
        return 0 if worst <= REFERENCE_TOLERANCE else 1
    return 0


def plot(records: list, path: str) -> None:
    """Loss per step (left axis) and test accuracy where evaluated (right axis) as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, loss_axis = plt.subplots(figsize=(7, 4))
    loss_axis.plot([r["step"] for r in records], [r["loss"] for r in records], color="C0")
    loss_axis.set(xlabel="step", ylabel="training loss")
    tested = [r for r in records if "test_accuracy" in r]
    if tested:
        accuracy_axis = loss_axis.twinx()
        accuracy_axis.plot([r["step"] for r in tested], [r["test_accuracy"] for r in tested],
                           "o-", color="C1")
        accuracy_axis.set(ylabel="test accuracy", ylim=(0, 1))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _percent(value) -> str:
    return "-" if value is None else f"{value:.1%}"
