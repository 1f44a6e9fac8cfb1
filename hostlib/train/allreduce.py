"""Multi-node data parallelism (thesis §7.2.1): the packed gradient buffer allreduced over MPI by
ring, Rabenseifner or Topawa, and the α-β network model of eq. 7-1…7-8 that times it.

One *schedule* per algorithm (``schedule``) is the single description of who sends which element
range to whom at every step; the MPI executor (``allreduce``) runs it over an mpi4py
communicator and the model (``simulate``) times it, so the two cannot drift apart. The closed
forms of the thesis (``closed_form``) are written separately, from the equations, and the tests
check that the step-by-step simulation gives them.

- **ring**: p-1 reduce-scatter steps (rank r sends block r-s to r+1 and adds block r-s-1 from
  r-1), then p-1 allgather steps without reduction (eq. 7-4…7-6).
- **rabenseifner**: reduce-scatter by recursive halving (distance p'/2 first, half the data),
  allgather by recursive doubling (distance 1 first); logical rank = physical rank (eq. 7-1…7-3).
  A non-power-of-two p folds the first 2r ranks (r = p - p', p' the largest power of two <= p)
  pairwise before and unfolds them after (Thakur et al.), each one full-buffer message.
- **topawa**: Rabenseifner over the round-robin rank mapping of the thesis: logical rank l sits in
  supernode l mod S, so the heavy first halving / last doubling steps stay inside a supernode and
  only the last log S halving and first log S doubling steps cross (eq. 7-7, 7-8).

Every element's final sum is computed once, on one rank, and then copied, so all ranks end
bit-identical. The received chunks are summed on the VM by the dnn ``add`` kernel (the thesis
reduces on the CPEs, not the MPE), on this rank's own Machine, and its simulated seconds are the
reduction time of the step; the latency and bandwidth terms come from the model.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from ...vm import Machine
from .. import dnn
from .common import TrainError

ALGORITHMS = ("ring", "rabenseifner", "topawa")

# The network of Sunway TaihuLight (thesis §7.2.1, Fig. 7.1 and 7.2).
NODES_PER_SUPERNODE = 256      # 160 supernodes x 256 nodes, full bisection inside a supernode
OVERSUBSCRIPTION = 4           # 64 uplinks per 256-node supernode: 1/4 of the bandwidth across,
                               # measured ~1/4 with OSU (Fig. 7.2); beta2 = 4 beta1
# The thesis gives no α or β; Fig. 7.2 says the bandwidth is "similar to InfiniBand FDR" and
# the small-message latency too. These are FDR 4x's: 54.54 Gb/s of data = 6.82 GB/s per
# direction, and ~1 µs MPI latency (an assumption of the same source, not a thesis figure).
LINK_BYTES_PER_SECOND = 54.54e9 / 8
LATENCY_SECONDS = 1.0e-6
# γ: the VM's own element-wise add kernel, fitted t(m) = t0 + m·g on the CGs that reduce, from
# two runs of these sizes (float32 elements): see ``reduction_cost``.
CALIBRATION_ELEMENTS = (1 << 12, 1 << 18)


# --- schedules --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Transfer:
    source: int     # physical ranks
    dest: int
    start: int      # the element range [start, stop) source sends and dest reduces / overwrites
    stop: int

    @property
    def elements(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Step:
    phase: str                    # "fold", "reduce-scatter", "allgather", "unfold"
    reduce: bool                  # dest adds what it receives (else it copies it)
    transfers: tuple


def check_algorithm(algorithm: str) -> None:
    if algorithm not in ALGORITHMS:
        raise TrainError(f"allreduce algorithm: unknown {algorithm!r}; known: "
                         f"{', '.join(ALGORITHMS)}")


def topawa_order(p: int, q: int) -> list:
    """Physical rank of each logical rank: the nodes dealt round robin over the supernodes
    (physical rank k is in supernode k // q), so logical neighbours sit in different supernodes
    (thesis: "physical nodes 0, 4, 8, ... -> supernode 0; 1, 5, 9, ... -> supernode 1")."""
    return sorted(range(p), key=lambda k: (k % q, k // q))


def schedule(algorithm: str, p: int, n: int, q: int = NODES_PER_SUPERNODE) -> list:
    """The steps of allreducing `n` elements over `p` ranks in supernodes of `q` ranks."""
    check_algorithm(algorithm)
    if p < 1 or n < 0 or q < 1:
        raise TrainError(f"allreduce: needs p >= 1 ranks, n >= 0 elements and a supernode size "
                         f">= 1, got p={p}, n={n}, q={q}")
    if p == 1:
        return []
    if algorithm == "ring":
        return _ring(p, n)
    physical = topawa_order(p, q) if algorithm == "topawa" else list(range(p))
    return _rabenseifner(physical, n)


def _block(n: int, parts: int, index: int, count: int = 1) -> tuple:
    """Element range of blocks index..index+count-1 of n elements cut into `parts` blocks."""
    return n * index // parts, n * (index + count) // parts


def _ring(p: int, n: int) -> list:
    steps = []
    for phase, reduce, first in (("reduce-scatter", True, 0), ("allgather", False, 1)):
        for s in range(p - 1):
            steps.append(Step(phase, reduce, tuple(
                Transfer(r, (r + 1) % p, *_block(n, p, (r + first - s) % p))
                for r in range(p))))
    return steps


def _rabenseifner(physical: list, n: int) -> list:
    p = len(physical)
    core = 1 << (p.bit_length() - 1)                 # p', the largest power of two <= p
    extra = p - core
    # Logical ranks 0..2*extra-1 pair up: even ones fold into the odd ones and sit out.
    members = [l for l in range(p) if l >= 2 * extra or l % 2]     # member index -> logical
    rank = [physical[l] for l in members]                           # member index -> physical
    whole = (0, n)
    steps = []
    if extra:
        steps.append(Step("fold", True, tuple(Transfer(physical[l], physical[l + 1], *whole)
                                              for l in range(0, 2 * extra, 2))))
    distance = core // 2
    while distance:                                  # recursive halving
        transfers = []
        for m in range(core):
            lower = m & ~(2 * distance - 1)          # this pair's window of 2*distance blocks
            give = lower if m & distance else lower + distance   # the half the partner keeps
            transfers.append(Transfer(rank[m], rank[m ^ distance],
                                      *_block(n, core, give, distance)))
        steps.append(Step("reduce-scatter", True, tuple(transfers)))
        distance //= 2
    distance = 1
    while distance < core:                           # recursive doubling
        steps.append(Step("allgather", False, tuple(
            Transfer(rank[m], rank[m ^ distance],
                     *_block(n, core, m & ~(distance - 1), distance)) for m in range(core))))
        distance *= 2
    if extra:
        steps.append(Step("unfold", False, tuple(Transfer(physical[l + 1], physical[l], *whole)
                                                 for l in range(0, 2 * extra, 2))))
    return steps


# --- the α-β model ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ReductionCost:
    """Simulated seconds of one element-wise sum of `nbytes` bytes on a node: t0 + nbytes·g."""
    seconds_per_call: float
    seconds_per_byte: float

    def __call__(self, nbytes: int) -> float:
        return self.seconds_per_call + nbytes * self.seconds_per_byte if nbytes else 0.0


@dataclass(frozen=True)
class Network:
    """Thakur's α + βn per message with the thesis' two-level network: β1 inside a supernode
    of `nodes_per_supernode` nodes; a message leaving its supernode shares the supernode's
    uplinks, 1/`oversubscription` of its nodes' bandwidth, with the other messages leaving it in
    the same step (so β2 = oversubscription·β1 when every node sends across, as in the tree's
    cross steps, and β1 for the ring's one crossing link per supernode)."""
    alpha: float = LATENCY_SECONDS
    beta1: float = 1 / LINK_BYTES_PER_SECOND
    oversubscription: float = OVERSUBSCRIPTION
    nodes_per_supernode: int = NODES_PER_SUPERNODE

    @property
    def beta2(self) -> float:
        return self.oversubscription * self.beta1

    def beta_across(self, flows: int) -> float:
        share = flows * self.oversubscription / self.nodes_per_supernode
        return self.beta1 * min(self.oversubscription, max(1.0, share))


@functools.lru_cache(maxsize=None)
def reduction_cost(config: str = "sw26010", cgs: int = 4) -> ReductionCost:
    """γ measured on the VM: the dnn add kernel's simulated time at CALIBRATION_ELEMENTS float32
    elements on `cgs` core groups, fitted with a straight line."""
    small, large = CALIBRATION_ELEMENTS
    seconds = []
    for elements in (small, large):
        ones = np.ones(elements, np.float32)
        seconds.append(dnn.add(ones, ones, machine=Machine(config), cgs=cgs)[1].seconds)
    per_byte = (seconds[1] - seconds[0]) / ((large - small) * 4)
    return ReductionCost(seconds[0] - small * 4 * per_byte, per_byte)


@dataclass(frozen=True)
class Timing:
    latency: float      # Σ α
    bandwidth: float    # Σ nβ
    reduction: float    # Σ γ terms

    @property
    def network(self) -> float:
        return self.latency + self.bandwidth

    @property
    def total(self) -> float:
        return self.latency + self.bandwidth + self.reduction


def simulate(steps: list, network: Network, itemsize: int = 4,
             reduction: Optional[ReductionCost] = None) -> Timing:
    """Time a schedule step by step: a step lasts as long as its slowest message (α + bytes·β,
    β by where it goes and how many messages leave its supernode with it) and its slowest
    reduction; the steps run one after another (bulk synchronous, as eq. 7-1…7-8 assume)."""
    latency = bandwidth = reduced = 0.0
    q = network.nodes_per_supernode
    for step in steps:
        leaving = {}
        for t in step.transfers:
            if t.source // q != t.dest // q:
                leaving[t.source // q] = leaving.get(t.source // q, 0) + 1
        latency += network.alpha
        bandwidth += max(t.elements * itemsize * (
            network.beta1 if t.source // q == t.dest // q
            else network.beta_across(leaving[t.source // q])) for t in step.transfers)
        if step.reduce and reduction is not None:
            reduced += max(reduction(t.elements * itemsize) for t in step.transfers)
    return Timing(latency, bandwidth, reduced)


def closed_form(algorithm: str, p: int, nbytes: float, network: Network,
                reduction: Optional[ReductionCost] = None) -> Timing:
    """Eq. 7-1…7-8 for p a power of two and supernodes of q | p nodes (q = p when p < q).
    γ_tree·(p-1)/p·n and γ_ring·(p-1)/p·n are written with the fitted reduction t0 + m·g: the
    tree makes log p calls, the ring p-1 (the thesis' γ_ring > γ_tree: smaller chunks)."""
    check_algorithm(algorithm)
    if p < 1 or p & (p - 1):
        raise TrainError(f"allreduce closed form: p must be a power of two, got {p}")
    q = min(network.nodes_per_supernode, p)
    if p % q:
        raise TrainError(f"allreduce closed form: the supernode size {q} must divide p={p}")
    log_p = p.bit_length() - 1
    b1, b2 = network.beta1, network.beta2
    if algorithm == "ring":                                              # 7-5, 7-6
        calls, alpha_steps = p - 1, 2 * (p - 1)
        bandwidth = 2 * nbytes * (p - 1) / p * b1
    else:
        calls, alpha_steps = log_p, 2 * log_p
        if algorithm == "rabenseifner":                                  # 7-2, 7-3
            bandwidth = 2 * (nbytes * (q - 1) / p * b1 + nbytes * (p - q) / p * b2)
        else:                                                            # 7-7, 7-8
            bandwidth = 2 * ((p - p / q) * nbytes / p * b1 + (p / q - 1) * nbytes / p * b2)
    reduced = 0.0
    if reduction is not None and p > 1:
        reduced = calls * reduction.seconds_per_call + \
            (p - 1) / p * nbytes * reduction.seconds_per_byte
    return Timing(alpha_steps * network.alpha, bandwidth, reduced)


# --- the MPI executor -------------------------------------------------------------------------

@dataclass
class Traffic:
    """What one rank's allreduce put through MPI (counted at the calls)."""
    messages: int = 0
    bytes_sent: int = 0
    bytes_across: int = 0       # sent to a rank of another (virtual) supernode
    reduce_seconds: float = 0.0  # simulated seconds of the VM's reductions


def allreduce(buffer: np.ndarray, comm, algorithm: str = "rabenseifner", *,
              supernode_size: int = NODES_PER_SUPERNODE, machine: Optional[Machine] = None,
              cgs: int = 1, steps: Optional[list] = None) -> tuple:
    """Sum the 1-D float32 `buffer` of every rank of the mpi4py communicator `comm` with
    `algorithm`; every rank gets the same bits. Returns (sum, Traffic). The buffer is not
    modified. `steps`: the schedule, when the caller keeps it between calls."""
    if buffer.dtype != np.float32:
        raise TrainError(f"allreduce: the packed gradient buffer is float32, got {buffer.dtype}")
    buffer = np.ascontiguousarray(buffer).reshape(-1)
    me, p = comm.Get_rank(), comm.Get_size()
    if steps is None:
        steps = schedule(algorithm, p, buffer.size, supernode_size)
    machine = machine or Machine()
    result = buffer.copy()
    received = np.empty_like(result)
    traffic = Traffic()
    for tag, step in enumerate(steps):
        send = next((t for t in step.transfers if t.source == me), None)
        recv = next((t for t in step.transfers if t.dest == me), None)
        incoming = received[:recv.elements] if recv else None
        if send and recv:
            comm.Sendrecv(result[send.start:send.stop], send.dest, tag,
                          incoming, recv.source, tag)
        elif send:
            comm.Send(result[send.start:send.stop], send.dest, tag)
        elif recv:
            comm.Recv(incoming, recv.source, tag)
        if send:
            traffic.messages += 1
            traffic.bytes_sent += send.elements * result.itemsize
            if send.source // supernode_size != send.dest // supernode_size:
                traffic.bytes_across += send.elements * result.itemsize
        if recv and recv.elements:
            target = result[recv.start:recv.stop]
            if step.reduce:
                total, stats = dnn.add(target, incoming, machine=machine, cgs=cgs)
                target[...] = total
                traffic.reduce_seconds += stats.seconds
            else:
                target[...] = incoming
    return result, traffic


def world():
    """MPI.COMM_WORLD when this process was started by mpiexec (MPICH's or Open MPI's
    environment says so), else None; a clear error when it was but mpi4py is missing."""
    launched = any(k in os.environ for k in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                             "PMIX_RANK", "HYDRA_CONTROL_FD"))
    if not launched:
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        raise TrainError("started by mpiexec but mpi4py is not installed: "
                         "pip install 'swsim[mpi]'") from None
    return MPI.COMM_WORLD


class GradientAllreduce:
    """The solver's ``gradient_reducer`` for one rank of a data-parallel run: the mean of every
    rank's packed gradient (allreduced sum, then scaled by 1/p on the VM), and the seconds it
    adds to the step: the model's latency + bandwidth for this schedule and the VM's simulated
    reduction and scaling."""

    def __init__(self, comm, algorithm: str = "rabenseifner", *,
                 supernode_size: int = NODES_PER_SUPERNODE, config: str = "sw26010",
                 cgs: int = 1, network: Optional[Network] = None):
        check_algorithm(algorithm)
        if supernode_size < 1:
            raise TrainError(f"--supernode-size: must be >= 1, got {supernode_size}")
        self.comm, self.algorithm, self.cgs, self.config = comm, algorithm, cgs, config
        self.size = comm.Get_size()
        self.network = network or Network(nodes_per_supernode=supernode_size)
        self._steps, self._elements = None, None     # the schedule, made for n elements
        self.traffic = Traffic()      # this rank's running totals
        self.step_bytes = 0           # what this rank sent in the last call
        self.machine = None           # where the sums and the scaling run: the rank's chip
        #                               (``Solver.chip``, set by ``swsim train``), else a new one

    def __call__(self, gradient: np.ndarray) -> tuple:
        if self.size == 1:
            return gradient, {}
        if self._elements != gradient.size:
            self._steps = schedule(self.algorithm, self.size, gradient.size,
                                   self.network.nodes_per_supernode)
            self._elements = gradient.size
        machine = self.machine or Machine(self.config)
        total, traffic = allreduce(gradient, self.comm, self.algorithm,
                                   supernode_size=self.network.nodes_per_supernode,
                                   machine=machine, cgs=self.cgs, steps=self._steps)
        mean, stats = dnn.scale(total, 1 / self.size, machine=machine, cgs=self.cgs)
        for field in ("messages", "bytes_sent", "bytes_across", "reduce_seconds"):
            setattr(self.traffic, field, getattr(self.traffic, field) + getattr(traffic, field))
        self.step_bytes = traffic.bytes_sent
        timing = simulate(self._steps, self.network, gradient.itemsize)
        return mean.reshape(gradient.shape), {
            "(allreduce network)": timing.network,
            "(allreduce reduce)": traffic.reduce_seconds + stats.seconds}

    def global_result(self, result):
        """A StepResult over all ranks: mean loss and accuracy (equal shards), the slowest
        rank's simulated time."""
        if self.size == 1:
            return result
        gather = self.comm.allgather((result.loss, result.accuracy, result.sim_seconds))
        accuracies = [a for _, a, _ in gather]
        return replace(result, loss=float(np.mean([l for l, _, _ in gather])),
                       accuracy=None if None in accuracies else float(np.mean(accuracies)),
                       sim_seconds=max(s for _, _, s in gather))
