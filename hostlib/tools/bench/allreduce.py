"""`swsim bench allreduce`: the shape of the thesis' Fig. 7.7 (allreduce bandwidth against
message size at 256 / 512 / 1024 nodes) and Fig. 7.8 (weak scaling of AlexNet and ResNet-50 to
1024 nodes) from the α-β model of eq. 7-1…7-8 (hostlib/train/allreduce.py), and a check of the
model against real multi-process runs at small p.

Model: the closed forms with α, β1 of FDR InfiniBand, β2 = 4 β1, q nodes per supernode and the
reduction γ fitted on the VM's add kernel (4 CGs). "Bandwidth" is the thesis' measured
bandwidth, 2(p-1)n/p bytes ÷ allreduce time. Weak scaling: each node trains a minibatch of 32
in the time Table 7.2's single-node throughput implies and then allreduces the model's
gradients (Topawa); speed-up(p) = p · T_compute / (T_compute + T_allreduce(p)).

Real runs (`mpiexec -n p` with p = 2, 4, 8 on this host; ranks in virtual supernodes of
REAL_SUPERNODE ranks): what one host CAN check is the traffic each rank actually puts through
MPI — messages, bytes sent, bytes sent out of its virtual supernode, counted at the MPI calls —
which is what the model charges α, β1 and β2 for; it is compared with the closed forms'
coefficients (2 log p or 2(p-1) messages, 2(p-1)/p·n bytes, a β2 share of 2(p-q)/p·n for
Rabenseifner against 2(p/q-1)/p·n for Topawa). What it can NOT check is α and β: the ranks talk
through shared memory on 2 cores shared with other jobs, and each rank's reduction is emulated,
so the wall time printed beside is the host's, not a network's.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ...train import allreduce as ar

FIG77_NODES = (256, 512, 1024)
MESSAGE_MB = tuple(2 ** k for k in range(11))            # 1 MB … 1 GB, Fig. 7.7's range
SCALING_NODES = tuple(2 ** k for k in range(11))         # 1 … 1024, Fig. 7.8
BATCH_PER_NODE = 32                                      # thesis §7.3.2: 32 per node, 32K at 1024
# (name, single-node img/s of Table 7.2, gradient bytes of §7.3.2 / Table 8.1, the thesis'
# 1024-node weak-scaling efficiency of §7.3.2)
NETWORKS = (("AlexNet", 94.17, 233e6, 0.642), ("ResNet-50", 14.28, 103e6, 0.980))
REAL_NODES = (2, 4, 8)
REAL_ELEMENTS = 1 << 16                                  # float32: 256 KB per rank
REAL_SUPERNODE = 2
REAL_REPEATS = 3
MB = 1 << 20
SHORT = {"ring": "ring", "rabenseifner": "rabens.", "topawa": "topawa"}
STYLE = {"ring": "o-", "rabenseifner": "s--", "topawa": "^-"}   # Rabenseifner = Topawa at q >= p


def bandwidth_table(network: ar.Network, reduction: ar.ReductionCost) -> dict:
    """{p: {algorithm: [GB/s per MESSAGE_MB]}}."""
    table = {}
    for p in FIG77_NODES:
        table[p] = {}
        for algorithm in ar.ALGORITHMS:
            table[p][algorithm] = [
                2 * (p - 1) / p * mb * MB
                / ar.closed_form(algorithm, p, mb * MB, network, reduction).total / 1e9
                for mb in MESSAGE_MB]
    return table


def scaling_table(network: ar.Network, reduction: ar.ReductionCost,
                  algorithm: str = "topawa") -> dict:
    """{net name: [speed-up per SCALING_NODES]}."""
    table = {}
    for name, images_per_second, nbytes, _ in NETWORKS:
        compute = BATCH_PER_NODE / images_per_second
        table[name] = [p * compute / (compute + ar.closed_form(algorithm, p, nbytes, network,
                                                                reduction).total)
                       for p in SCALING_NODES]
    return table


def expected_traffic(algorithm: str, p: int, n: int, q: int, itemsize: int = 4) -> dict:
    """The closed forms' per-rank coefficients, in messages and bytes (p a power of two)."""
    log_p = p.bit_length() - 1
    sent = 2 * (p - 1) * n * itemsize // p
    q = min(q, p)
    across = {"ring": None,                      # crossings exist, but one flow per supernode
              "rabenseifner": 2 * (p - q) * n * itemsize // p,
              "topawa": 2 * (p // q - 1) * n * itemsize // p}[algorithm]
    return dict(messages=2 * (p - 1) if algorithm == "ring" else 2 * log_p,
                bytes_sent=sent, bytes_across=across)


def real_runs(nodes=REAL_NODES, progress=None) -> list:
    """One `mpiexec -n p` per p running every algorithm; rows of measured against expected."""
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        raise RuntimeError("no mpiexec beside this python: pip install -e '.[mpi]'")
    rows = []
    for p in nodes:
        done = subprocess.run([str(mpiexec), "-n", str(p), sys.executable, "-m", __name__],
                              capture_output=True, text=True, timeout=900)
        if done.returncode:
            raise RuntimeError(f"mpiexec -n {p} failed: {done.stderr[-1000:]}")
        for record in map(json.loads, done.stdout.splitlines()):
            record["expected"] = expected_traffic(record["algorithm"], p, REAL_ELEMENTS,
                                                  REAL_SUPERNODE)
            rows.append(record)
        if progress:
            progress(p)
    return rows


def _worker() -> None:
    """Under mpiexec: allreduce REAL_ELEMENTS floats with each algorithm; rank 0 prints one JSON
    line per algorithm with every rank's traffic and the median wall time."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    mine = np.random.default_rng(comm.Get_rank()).standard_normal(REAL_ELEMENTS)
    mine = mine.astype(np.float32)
    for algorithm in ar.ALGORITHMS:
        steps = ar.schedule(algorithm, p, REAL_ELEMENTS, REAL_SUPERNODE)
        walls = []
        for _ in range(REAL_REPEATS):
            comm.Barrier()
            started = time.perf_counter()
            _, traffic = ar.allreduce(mine, comm, algorithm, supernode_size=REAL_SUPERNODE,
                                      steps=steps)
            walls.append(comm.allreduce(time.perf_counter() - started, op=MPI.MAX))
        ranks = comm.gather(dict(messages=traffic.messages, bytes_sent=traffic.bytes_sent,
                                 bytes_across=traffic.bytes_across,
                                 reduce_seconds=traffic.reduce_seconds), root=0)
        model = ar.simulate(steps, ar.Network(nodes_per_supernode=REAL_SUPERNODE))
        if comm.Get_rank() == 0:
            print(json.dumps(dict(algorithm=algorithm, p=p, ranks=ranks,
                                  wall_seconds=float(np.median(walls)),
                                  model_network_seconds=model.network)), flush=True)


def run(real: bool = True, quick: bool = False, supernode_size: int = ar.NODES_PER_SUPERNODE,
        progress=None) -> dict:
    network = ar.Network(nodes_per_supernode=supernode_size)
    reduction = ar.reduction_cost("sw26010", 4)
    result = dict(network=network, reduction=reduction,
                  bandwidth=bandwidth_table(network, reduction),
                  scaling={a: scaling_table(network, reduction, a) for a in ar.ALGORITHMS})
    if real:
        result["real"] = real_runs(REAL_NODES[:2] if quick else REAL_NODES, progress)
    return result


def format_report(result: dict) -> str:
    net, red = result["network"], result["reduction"]
    out = [f"α-β model: α = {net.alpha * 1e6:.2f} us, β1 = 1/{1 / net.beta1 / 1e9:.2f} GB/s, "
           f"β2 = {net.oversubscription:g} β1, q = {net.nodes_per_supernode} nodes per "
           f"supernode; reduction on the VM (add kernel, 4 CGs): "
           f"{red.seconds_per_call * 1e6:.2f} us + bytes / {1 / red.seconds_per_byte / 1e9:.1f}"
           f" GB/s", "",
           "Fig. 7.7 shape: allreduce bandwidth 2(p-1)n/p / time, GB/s"]
    out.append((f"{'nodes':>9}" + "".join(f"  {p:<{11 * len(ar.ALGORITHMS) - 2}}"
                                          for p in FIG77_NODES)).rstrip())
    out.append(f"{'message':>9}" + "".join(f"  {SHORT[a]:>9}" for _ in FIG77_NODES
                                           for a in ar.ALGORITHMS))
    for k, mb in enumerate(MESSAGE_MB):
        out.append(f"{mb:>6} MB" + "".join(f"  {result['bandwidth'][p][a][k]:>9.2f}"
                                           for p in FIG77_NODES for a in ar.ALGORITHMS))
    out += ["", f"Fig. 7.8 shape: weak scaling, {BATCH_PER_NODE} images per node, speed-up over "
            "one node (efficiency at 1024 beside the thesis')"]
    out.append((f"{'':>6}" + "".join(f"  {name:<{11 * len(ar.ALGORITHMS) - 2}}"
                                     for name, *_ in NETWORKS)).rstrip())
    out.append(f"{'nodes':>6}" + "".join(f"  {SHORT[a]:>9}" for _ in NETWORKS
                                         for a in ar.ALGORITHMS))
    for k, p in enumerate(SCALING_NODES):
        out.append(f"{p:>6}" + "".join(f"  {result['scaling'][a][name][k]:>9.1f}"
                                       for name, *_ in NETWORKS for a in ar.ALGORITHMS))
    for name, _, nbytes, thesis in NETWORKS:
        model = "  ".join(f"{a} {result['scaling'][a][name][-1] / SCALING_NODES[-1]:.1%}"
                          for a in ar.ALGORITHMS)
        out.append(f"  {name} ({nbytes / 1e6:.0f} MB of gradients) at 1024 nodes: model "
                   f"{model}; thesis (Topawa) {thesis:.1%}")
    if "real" in result:
        out += ["", f"Real MPI runs on this host: {REAL_ELEMENTS} float32 per rank, virtual "
                f"supernodes of {REAL_SUPERNODE} ranks; per-rank maximum measured (expected "
                "from the closed forms); wall time is the host's (not a network's)"]
        out.append(f"{'p':>3} {'algorithm':<13} {'messages':>13} {'bytes sent':>19} "
                   f"{'bytes across':>19} {'model net us':>12} {'wall ms':>8}  agrees")
        for row in result["real"]:
            got = {k: max(r[k] for r in row["ranks"]) for k in ("messages", "bytes_sent",
                                                                 "bytes_across")}
            want = row["expected"]
            agrees = all(want[k] is None or got[k] == want[k] for k in got)
            cells = [f"{got[k]} ({'-' if want[k] is None else want[k]})"
                     for k in ("messages", "bytes_sent", "bytes_across")]
            out.append(f"{row['p']:>3} {row['algorithm']:<13} {cells[0]:>13} {cells[1]:>19} "
                       f"{cells[2]:>19} {row['model_network_seconds'] * 1e6:>12.1f} "
                       f"{row['wall_seconds'] * 1e3:>8.1f}  {'yes' if agrees else 'NO'}")
    return "\n".join(out)


def plot(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(1, len(FIG77_NODES) + 1, figsize=(16, 4))
    for axis, p in zip(axes, FIG77_NODES):
        for algorithm in ar.ALGORITHMS:
            axis.plot(MESSAGE_MB, result["bandwidth"][p][algorithm], STYLE[algorithm],
                      label=algorithm)
        axis.set(xscale="log", xlabel="message size (MB)", ylabel="bandwidth (GB/s)",
                 title=f"{p} nodes (model)")
        axis.legend()
    axis = axes[-1]
    for name, *_ in NETWORKS:
        axis.plot(SCALING_NODES, result["scaling"]["topawa"][name], "o-", label=name)
    axis.plot(SCALING_NODES, SCALING_NODES, "k:", label="linear")
    axis.set(xscale="log", yscale="log", xlabel="nodes", ylabel="speed-up",
             title="weak scaling, Topawa (model)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":         # a rank of real_runs' mpiexec
    _worker()
