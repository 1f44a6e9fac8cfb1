"""RedSync's per-layer residual compression (thesis Algorithm 10, ch. 8; docs/redsync.md), the
building blocks the Solver is to call: the residual V += G, the communication set chosen on the
CPEs (hostlib/dnn/select.py), the packed message (length, indices, values — or one mean with
ASQ), V kept where not sent, and the received sets added into the dense update on the CPEs
(``decompress``). Exchanging the messages (one Allgather(v)) is the caller's.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np

from ...vm import Machine
from .. import dnn
from ..dnn.select import scatter_add, select, sum_of_squares
from . import allreduce as ar
from .common import TrainError

METHODS = ("NONE", "RGC")
SELECTS = {"TRIMMED": "trimmed", "BINARY": "binary", "SAMPLED": "sampled", "RADIX": "radix"}
QUANTIZE = ("NONE", "ASQ")
LAYER_CHOICES = ("model", "sparse")
SEARCH_EVERY = 5              # the sampled search reruns every 5 iterations (thesis §8.2.1)
ASQ_FLAG = 1 << 31            # in the message's length word: one mean follows the indices

__all__ = ["Compression", "LayerResidual", "RedSync", "decompress", "overlap_saving", "pack",
           "sparse_allgather", "unpack"]


@dataclass(frozen=True)
class Compression:
    """The solver's ``compression { method density select quantize warmup_iter
    replan_every }``."""
    method: str = "NONE"
    density: float = 0.001
    select: str = "BINARY"
    quantize: str = "NONE"
    warmup_iter: int = 0
    layers: str = "model"     # Python API only: "model" (eq. 8-1 vs 8-2) or "sparse" (all)
    clip_norm: float = 0.0    # Python API only: local gradient clipping (0: none), see RedSync
    # Python API only, DGC's two momentum tricks (with the solver's momentum > 0): correction
    # (u = m u + G accumulated into V, the update returned already carrying the momentum) and,
    # with it, masking (u zeroed where V is sent); without correction V += G and the Solver
    # applies its momentum to the synchronised update
    momentum_correction: bool = True
    momentum_masking: bool = True
    # every replan_every compressed steps the plan is re-predicted from the selections
    # measured since it was made and applied (RedSync._apply_replan); 0: never
    replan_every: int = 0

    @classmethod
    def from_proto(cls, parameter) -> "Compression":
        """From the solver's ``CompressionParameter`` message (its enums by name)."""
        def name(field):
            enum = parameter.DESCRIPTOR.fields_by_name[field].enum_type
            return enum.values_by_number[getattr(parameter, field)].name
        return cls(name("method"), float(parameter.density), name("select"), name("quantize"),
                   parameter.warmup_iter, replan_every=parameter.replan_every)

    def check(self, ranks: int) -> "Compression":
        """The configuration if it can run on `ranks` ranks; else a TrainError saying why."""
        for name, value, allowed in (("method", self.method, METHODS),
                                     ("layers", self.layers, LAYER_CHOICES),
                                     ("select", self.select, tuple(SELECTS)),
                                     ("quantize", self.quantize, QUANTIZE)):
            if value not in allowed:
                raise TrainError(f"compression {name} must be one of {', '.join(allowed)}, "
                                 f"got {value!r}")
        if isinstance(self.density, bool) or not isinstance(self.density, numbers.Real) or \
                not 0 < self.density <= 1:
            raise TrainError(f"compression density must be in (0, 1], got {self.density!r}")
        for name in ("warmup_iter", "replan_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
                raise TrainError(f"compression {name} must be an integer >= 0, got {value!r}")
        if self.replan_every and self.layers == "sparse":
            raise TrainError("compression: replan_every re-chooses sparse or dense per blob, "
                             "layers=\"sparse\" fixes every blob sparse: give one of them")
        if isinstance(self.clip_norm, bool) or not isinstance(self.clip_norm, numbers.Real) \
                or not math.isfinite(self.clip_norm) or self.clip_norm < 0:
            raise TrainError(f"compression clip_norm must be a finite real >= 0 (0: no "
                             f"clipping), got {self.clip_norm!r}")
        for name in ("momentum_correction", "momentum_masking"):
            if not isinstance(getattr(self, name), bool):
                raise TrainError(f"compression {name} must be True or False, got "
                                 f"{getattr(self, name)!r}")
        if self.momentum_masking and not self.momentum_correction:
            raise TrainError("compression: momentum_masking masks the corrected momentum u, "
                             "so it needs momentum_correction (or momentum_masking=False)")
        if self.quantize == "ASQ" and self.select == "SAMPLED":
            raise TrainError("compression: ASQ cannot be combined with the sampled search "
                             "(the reused threshold is for |x|, ASQ alternates the sign)")
        if self.quantize == "ASQ" and self.method == "NONE":
            raise TrainError("compression: quantize ASQ needs method RGC")
        if self.method == "RGC" and ranks < 2:
            raise TrainError(f"compression RGC needs at least 2 ranks (there is nothing to "
                             f"synchronise), got {ranks}")
        return self


def pack(indices, values, mean=None) -> np.ndarray:
    """One message as int32 words: the length (| ASQ_FLAG with a mean), the indices, then the
    values' bits or the mean's."""
    indices = np.asarray(indices, np.int32)
    head = np.array([len(indices) | (ASQ_FLAG if mean is not None else 0)], np.uint32)
    tail = np.float32([mean]) if mean is not None else np.asarray(values, np.float32)
    return np.concatenate([head.view(np.int32), indices, tail.view(np.int32)])


def unpack(message) -> tuple:
    """(indices int32, values float32) of a message made by `pack` (ASQ: the mean repeated)."""
    message = np.asarray(message, np.int32)
    head = int(message[0].view(np.uint32))
    count, asq = head & (ASQ_FLAG - 1), bool(head & ASQ_FLAG)
    expected = 1 + count + (1 if asq else count)
    if len(message) != expected:
        raise TrainError(f"a compressed message of {count} elements must have {expected} "
                         f"words, got {len(message)}")
    indices = message[1:1 + count]
    tail = message[1 + count:].view(np.float32)
    return indices, (np.full(count, tail[0], np.float32) if asq else tail.copy())


class LayerResidual:
    """One layer's residual V and its compression (Algorithm 10's inner loop body)."""

    def __init__(self, size: int, config: Compression, *, output_layer: bool = False,
                 machine=None, engine: str = "c", cgs: int = 1):
        if output_layer and config.quantize == "ASQ":
            raise TrainError("compression: ASQ is never applied to the output layer (thesis "
                             "§8.2.2: its gradients carry the class scores); give the output "
                             "layer quantize NONE")
        self.config = config
        self.residual = np.zeros(int(size), np.float32)
        self.k = max(1, round(config.density * self.residual.size))
        self.quantize = config.quantize == "ASQ"
        self.threshold = None                   # the sampled search's, between searches
        self.machine = machine or Machine()
        self.engine = engine
        self.cgs = cgs                          # core groups selecting, a part each
        self.seconds = 0.0                      # simulated seconds of the last compress
        self.select_seconds = 0.0               # of which the selection's

    def state(self) -> tuple:
        """(residual, the sampled search's threshold or NaN) for a checkpoint."""
        return self.residual.copy(), np.float32(np.nan if self.threshold is None
                                                else self.threshold)

    def load_state(self, residual, threshold) -> None:
        self.residual = np.asarray(residual, np.float32).copy()
        self.threshold = None if np.isnan(threshold) else np.float32(threshold)

    def compress(self, grad, iteration: int) -> np.ndarray:
        """V += grad; the communication set of V packed; V zeroed where sent."""
        grad = np.asarray(grad, np.float32).reshape(-1)
        if grad.size != self.residual.size:
            raise TrainError(f"gradient of {grad.size} elements for a residual of "
                             f"{self.residual.size}")
        run = dict(machine=self.machine, engine=self.engine)
        self.residual, stats = dnn.add(self.residual, grad, **run)
        self.seconds = stats.seconds
        method, threshold = SELECTS[self.config.select], None
        if method == "sampled":
            if iteration % SEARCH_EVERY == 0 or self.threshold is None:
                method = "binary"
            else:
                threshold = float(self.threshold)
        sign = ("positive" if iteration % 2 == 0 else "negative") if self.quantize else "abs"
        sel = select(self.residual, self.k, method=method, sign=sign, threshold=threshold,
                     cgs=self.cgs, **run)
        self.seconds += sel.stats.seconds
        self.select_seconds = sel.stats.seconds
        if method == "binary":
            self.threshold = sel.threshold
        if sel.nnz:                              # v + (-1) v = 0 exactly: sent, so cleared
            self.residual, stats = scatter_add(self.residual, [(sel.indices, sel.values)],
                                               -1.0, **run)
            self.seconds += stats.seconds
        return pack(sel.indices, sel.values, np.float32(sel.mean) if self.quantize else None)


def overlap_saving(backward, blobs) -> float:
    """The seconds a step saves when each sparse blob is compressed as soon as its layer's
    backward is done (feed-forward nets): the CPEs run the layers' backward and the blobs'
    selections in backward order, the network each blob's allgather as soon as its selection
    and the allgather before are done, then the CPEs decompress each set once it arrived —
    against all of these one after another. `backward`: (layer, seconds) in backward order;
    `blobs`: (layer, select, allgather, decompress) seconds of the sparse blobs. The saving
    is the allgather time hidden behind the CPEs' later work."""
    pending = {}
    for blob in blobs:
        pending.setdefault(blob[0], []).append(blob[1:])
    order = [(layer, seconds, pending.pop(layer, [])) for layer, seconds in backward]
    order += [(layer, 0.0, rest) for layer, rest in pending.items()]   # not in the backward
    cpes = network = 0.0
    arrivals = []
    for _, seconds, layer_blobs in order:
        cpes += seconds
        for select_s, allgather_s, decompress_s in layer_blobs:
            cpes += select_s
            network = max(network, cpes) + allgather_s
            arrivals.append((network, decompress_s))
    for arrival, decompress_s in arrivals:
        cpes = max(cpes, arrival) + decompress_s
    serial = sum(seconds for _, seconds in backward) + sum(sum(blob[1:]) for blob in blobs)
    return serial - cpes


def decompress(dense, messages, alpha: float, *, machine=None, engine: str = "c") -> tuple:
    """(dense + alpha · (every message's set), added in message order on the CPEs, their
    simulated seconds)."""
    sets = [unpack(message) for message in messages]
    sets = [s for s in sets if len(s[0])]
    if not sets:
        return np.asarray(dense, np.float32).copy(), 0.0
    dense, stats = scatter_add(dense, sets, alpha, machine=machine, engine=engine)
    return dense, stats.seconds


def sparse_allgather(message, comm) -> list:
    """Every rank's packed message, in rank order, over the mpi4py communicator `comm`: the
    message lengths by one allgather, the messages by one Allgatherv (they differ in length
    with the binary search)."""
    from mpi4py import MPI
    message = np.ascontiguousarray(message, np.int32)
    counts = np.array(comm.allgather(len(message)), np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    gathered = np.empty(int(counts.sum()), np.int32)
    comm.Allgatherv(message, [gathered, counts, offsets, MPI.INT])
    return np.split(gathered, np.cumsum(counts)[:-1])


@dataclass(frozen=True)
class LayerPlan:
    """One parameter blob's choice: sent sparse when eq. 8-1 predicts less than eq. 8-2."""
    name: str
    offset: int
    size: int
    k: int
    select_seconds: float     # eq. 8-1's selection: on the synthetic blob, or measured
    transfer_seconds: float   # eq. 8-1's rest: allgather (log p α + (p-1) bytes β1) + p γ1
    dense_seconds: float      # eq. 8-2: this blob's own allreduce (the dense reducer's schedule)
    forced: bool = False      # Compression.layers "sparse"

    @property
    def sparse_seconds(self) -> float:
        """Eq. 8-1."""
        return self.select_seconds + self.transfer_seconds

    def remeasured(self, select_seconds: float) -> "LayerPlan":
        """The plan with eq. 8-1's selection time replaced by `select_seconds`."""
        return replace(self, select_seconds=select_seconds)

    @property
    def sparse(self) -> bool:
        return self.forced or self.sparse_seconds < self.dense_seconds


class RedSync:
    """The Solver's ``gradient_reducer`` for ``compression { method: RGC ... }`` (Algorithm 10):
    `dense` (an ``allreduce.GradientAllreduce``) for the first ``warmup_iter`` steps and for
    the blobs eq. 8-2 predicts faster; for the others the residual V += G (with DGC's momentum
    correction u = m u + G first when ``momentum`` > 0), the communication set of V on the
    CPEs of `cgs` core groups (a part of V each, ``select``'s cgs=), one sparse allgather per
    blob, the sets added into the update on the CPEs, V and u
    zeroed where sent (momentum-factor masking). With momentum the update it returns already
    carries it (``applies_momentum``: the Solver then updates with momentum 0)."""

    def __init__(self, dense, config: Compression, params, *, momentum: float = 0.0,
                 config_name: str = "sw26010", engine: str = "c", cgs: int = 1):
        self.dense, self.comm, self.size = dense, dense.comm, dense.size
        self.config = config.check(self.size)
        if config.method != "RGC":
            raise TrainError(f"RedSync needs compression method RGC, got {config.method!r}")
        self.machine, self.engine = Machine(config_name), engine
        self.momentum = float(momentum)
        self.applies_momentum = self.momentum > 0 and config.momentum_correction
        # `params`: the packed parameter arena (hostlib/train/memory.py), byte offsets
        blobs = sorted(((name, (offset // params.buffer.itemsize, shape))
                        for name, (offset, shape) in params.layout.items()),
                       key=lambda item: item[1][0])
        self.total = params.buffer.size          # with the blobs' alignment padding
        output = blobs[-1][0].split("/")[0]        # the last parameterised layer: the output
        run = dict(machine=self.machine, engine=engine)
        unquantized = replace(config, quantize="NONE")     # the output layer's (the thesis')
        self.residuals = []
        for name, (_, shape) in blobs:
            last = name.split("/")[0] == output
            self.residuals.append(LayerResidual(int(np.prod(shape)),
                                                unquantized if last else config, **run,
                                                output_layer=last, cgs=cgs))
        reduction = ar.reduction_cost(config_name, dense.cgs)
        self.plan = [self._predict(name, offset, residual, reduction)
                     for (name, (offset, _)), residual in zip(blobs, self.residuals)]
        self.velocity = np.zeros(self.total, np.float32)   # u (momentum correction)
        self.iteration = 0
        self.step_bytes = 0           # what this rank sent in the last step
        self.blob_seconds = []        # the last step's sparse blobs: (layer, select, allgather,
                                      # decompress) seconds
        # every sparse step's since the plan was made (at construction or the last replan)
        self.measured_select = {plan.name: [] for plan in self.plan}
        self.switches = []            # (step, the blob's new LayerPlan) where a replan changed it

    def _predict(self, name, offset, residual, reduction) -> LayerPlan:
        """Eq. 8-1 and 8-2 for one blob, the same on every rank: selection and decompression
        simulated once on a synthetic blob of its size (normal random data, seed 0)."""
        n, k, p = residual.residual.size, residual.k, self.size
        network = self.dense.network
        synthetic = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        method = "binary" if self.config.select == "SAMPLED" else SELECTS[self.config.select]
        sel = select(synthetic, k, method=method, machine=self.machine, engine=self.engine,
                     cgs=residual.cgs)
        _, decompress_seconds = decompress(np.zeros(n, np.float32),
                                           [pack(sel.indices, sel.values)], 1.0,
                                           machine=self.machine, engine=self.engine)
        words = 1 + k + (1 if residual.quantize else k)
        transfer = (math.log2(p) * network.alpha + (p - 1) * 4 * words * network.beta1
                    + p * decompress_seconds)
        dense = ar.simulate(ar.schedule(self.dense.algorithm, p, n, network.nodes_per_supernode),
                            network, 4, reduction).total
        return LayerPlan(name, offset, n, k, sel.stats.seconds, transfer, dense,
                         self.config.layers == "sparse")

    def __call__(self, gradient: np.ndarray) -> tuple:
        iteration, self.iteration = self.iteration, self.iteration + 1
        self.blob_seconds = []
        gradient, clip_seconds = self._clip(gradient)
        update, seconds = self._synchronise(gradient, iteration)
        if self.config.clip_norm:
            seconds["(redsync clip)"] = clip_seconds
        return update, seconds

    def overlap(self, backward, seconds: dict) -> float:
        """The last step's `seconds` with its sparse blobs compressed as their layers'
        backward (`backward`: the step's (layer, seconds), in backward order) is done: the
        allgather time hidden (``overlap_saving``) taken off "(redsync allgather)"; returns
        it."""
        saved = overlap_saving(backward, self.blob_seconds)
        if self.blob_seconds:
            seconds["(redsync allgather)"] = max(0.0, seconds["(redsync allgather)"] - saved)
        return saved

    def _clip(self, gradient: np.ndarray) -> tuple:
        """Local gradient clipping (DGC, for recurrent nets: the gradient after the whole
        BPTT): this rank's gradient scaled to an L2 norm of at most clip_norm / sqrt(ranks),
        so the ranks' sum stays within clip_norm; the norm and the scaling on the CPEs. Returns
        (the gradient, simulated seconds)."""
        if not self.config.clip_norm:
            return gradient, 0.0
        run = dict(machine=self.machine, engine=self.engine)
        squares, stats = sum_of_squares(gradient, **run)
        seconds = stats.seconds
        limit = self.config.clip_norm / math.sqrt(self.size)
        if squares > limit * limit:
            gradient, stats = dnn.scale(gradient, limit / math.sqrt(squares), **run)
            seconds += stats.seconds
        return gradient, seconds

    def _synchronise(self, gradient: np.ndarray, iteration: int) -> tuple:
        """(the update, its seconds by part) of Algorithm 10's step `iteration`."""
        before = self.dense.traffic.bytes_sent
        run = dict(machine=self.machine, engine=self.engine)
        if iteration < self.config.warmup_iter:           # warm-up: all dense
            mean, seconds = self.dense(gradient)
            self.step_bytes = self.dense.traffic.bytes_sent - before
            return self._with_momentum(mean, slice(0, self.total), seconds), seconds
        update = np.zeros(self.total, np.float32)        # the padding stays 0
        seconds = {"(redsync select)": 0.0, "(redsync allgather)": 0.0,
                   "(redsync decompress)": 0.0}
        flushed = self._replan_if_due(iteration, gradient, seconds)   # blobs turned dense
        dense = [plan for plan in self.plan if not plan.sparse]
        if dense:
            parts = [slice(plan.offset, plan.offset + plan.size) for plan in dense]
            # a blob turned dense sends its residual once, in the same allreduce: what was
            # kept is applied, not lost (added to the update as it is: it already carries
            # the momentum correction)
            mean, dense_seconds = self.dense(np.concatenate(
                [gradient[s] for s in parts] + [self.residuals[i].residual for i in flushed]))
            seconds.update(dense_seconds)
            start = 0
            for part in parts:
                update[part] = self._with_momentum(mean[start:start + part.stop - part.start],
                                                   part, seconds)
                start += part.stop - part.start
            for i in flushed:
                plan, residual = self.plan[i], self.residuals[i]
                part = slice(plan.offset, plan.offset + plan.size)
                update[part], stats = dnn.add(update[part], mean[start:start + plan.size], **run)
                seconds["(redsync flush)"] = seconds.get("(redsync flush)", 0.0) + stats.seconds
                residual.residual = np.zeros_like(residual.residual)
                start += plan.size
        sent = 0
        network = self.dense.network
        for plan, residual in zip(self.plan, self.residuals):
            if not plan.sparse:
                continue
            before_blob = dict(seconds)
            part = slice(plan.offset, plan.offset + plan.size)
            grad = gradient[part]
            if self.applies_momentum:                     # momentum correction: u = m u + G
                velocity, stats = dnn.add(self.velocity[part], grad, alpha=self.momentum,
                                          beta=1.0, **run)
                seconds["(redsync select)"] += stats.seconds
                grad = velocity
            message = residual.compress(grad, iteration)
            seconds["(redsync select)"] += residual.seconds
            self.measured_select[plan.name].append(residual.select_seconds)
            if self.applies_momentum:                     # momentum-factor masking: u = 0
                indices, _ = unpack(message)              # where sent
                if len(indices) and self.config.momentum_masking:
                    velocity, stats = scatter_add(velocity, [(indices, velocity[indices])],
                                                  -1.0, **run)
                    seconds["(redsync select)"] += stats.seconds
                self.velocity[part] = velocity
            messages = sparse_allgather(message, self.comm)
            sent += (self.size - 1) * 4 * len(message)
            seconds["(redsync allgather)"] += (
                math.log2(self.size) * network.alpha
                + (self.size - 1) * 4 * max(map(len, messages)) * network.beta1)
            update[part], decompress_seconds = decompress(np.zeros(plan.size, np.float32),
                                                          messages, 1 / self.size, **run)
            seconds["(redsync decompress)"] += decompress_seconds
            self.blob_seconds.append((plan.name.split("/")[0], *(
                seconds[key] - before_blob[key] for key in (
                    "(redsync select)", "(redsync allgather)", "(redsync decompress)"))))
        self.step_bytes = self.dense.traffic.bytes_sent - before + sent
        return update.reshape(gradient.shape), seconds

    def _with_momentum(self, mean, part: slice, seconds: dict) -> np.ndarray:
        """u = m u + mean over `part` (dense blobs and warm-up), on the VM; mean without
        momentum."""
        if not self.applies_momentum:
            return mean
        velocity, stats = dnn.add(self.velocity[part], mean, alpha=self.momentum, beta=1.0,
                                  machine=self.machine, engine=self.engine)
        seconds["(redsync momentum)"] = seconds.get("(redsync momentum)", 0.0) + stats.seconds
        self.velocity[part] = velocity
        return velocity

    def _medians(self) -> dict:
        """Each blob's median selection seconds on this rank since the plan was made (None:
        not sent sparse since)."""
        return {name: float(np.median(times)) if times else None
                for name, times in self.measured_select.items()}

    def replan(self, measured: dict = None) -> list:
        """(plan in use, plan re-predicted) per blob: eq. 8-1 again with `measured` (blob
        name: selection seconds; by default the median of the selections measured on this
        rank's residuals since the plan was made); blobs without one keep theirs."""
        measured = self._medians() if measured is None else measured
        return [(plan, plan if measured[plan.name] is None
                 else plan.remeasured(measured[plan.name])) for plan in self.plan]

    def _apply_replan(self) -> list:
        """A collective call: the plan re-predicted (``replan``) from every blob's slowest
        rank's median selection (the allgather waits for it; and so every rank makes the
        same choices) becomes the plan of the following steps, its measurements restarted.
        Returns the indices of the blobs whose choice changed. A blob turned sparse starts
        the sampled search afresh; the residual of one turned dense is the caller's to send
        (``_synchronise``: in the same step's dense allreduce)."""
        gathered = self.comm.allgather(self._medians())
        slowest = {name: None if gathered[0][name] is None else max(m[name] for m in gathered)
                   for name in self.measured_select}
        changed = []
        for i, (before, after) in enumerate(self.replan(slowest)):
            self.plan[i] = after
            self.measured_select[after.name] = []
            if after.sparse != before.sparse:
                changed.append(i)
                self.residuals[i].threshold = None
        return changed

    def _replan_if_due(self, iteration: int, gradient: np.ndarray, seconds: dict) -> list:
        """``_apply_replan`` every ``replan_every`` steps after the warm-up, the changes
        recorded in ``switches``; returns the indices of the blobs turned dense. A dense blob
        is never selected, so first its selection is measured once on this step's gradient
        (a probe, its time in `seconds` "(redsync probe)"): without it a blob could never
        turn sparse."""
        since = iteration - self.config.warmup_iter
        if not self.config.replan_every or not since or since % self.config.replan_every:
            return []
        method = "binary" if self.config.select == "SAMPLED" else SELECTS[self.config.select]
        for plan, residual in zip(self.plan, self.residuals):
            if not plan.sparse:
                sel = select(gradient[plan.offset:plan.offset + plan.size], plan.k,
                             method=method, cgs=residual.cgs, machine=self.machine,
                             engine=self.engine)
                self.measured_select[plan.name].append(sel.stats.seconds)
                seconds["(redsync probe)"] = (seconds.get("(redsync probe)", 0.0)
                                              + sel.stats.seconds)
        changed = self._apply_replan()
        self.switches += [(iteration, self.plan[i]) for i in changed]
        return [i for i in changed if not self.plan[i].sparse]

    def format_replan(self) -> str:
        """The table of ``replan``: both selection times, eq. 8-1 with each, eq. 8-2 and both
        choices ("!" where they differ)."""
        lines = ["blob          elements     k  select us: in plan measured  eq. 8-1 us: "
                 "in plan measured  eq. 8-2 us  choice: in plan measured"]
        for before, after in self.replan():
            choice = ("sparse" if before.sparse_seconds < before.dense_seconds else "dense",
                      "sparse" if after.sparse_seconds < after.dense_seconds else "dense")
            lines.append(
                f"{before.name:12} {before.size:9} {before.k:5} {before.select_seconds * 1e6:20.1f}"
                f" {after.select_seconds * 1e6:8.1f} {before.sparse_seconds * 1e6:21.1f}"
                f" {after.sparse_seconds * 1e6:8.1f} {before.dense_seconds * 1e6:11.1f}"
                f" {choice[0]:>17} {choice[1]:>8}{' !' if choice[0] != choice[1] else ''}")
        return "\n".join(lines)

    def global_result(self, result):
        return self.dense.global_result(result)

    def format_plan(self, plans=None) -> str:
        """One line per blob of `plans` (the plan in use by default): its choice and both
        predictions."""
        return "\n".join(
            f"redsync {plan.name}: {plan.size} elements, k={plan.k}, "
            f"{'sparse' if plan.sparse else 'dense'}{' (forced)' if plan.forced else ''} "
            f"(eq. 8-1 sparse "
            f"{plan.sparse_seconds * 1e6:.1f} us, eq. 8-2 dense {plan.dense_seconds * 1e6:.1f} us)"
            for plan in (self.plan if plans is None else plans))

    # Checkpoints: every rank's residuals (they differ), gathered to rank 0, which writes.

    def state(self):
        """A collective call: on rank 0 a dict of every rank's residuals, thresholds and u
        (one row per rank) and the step count; None on the other ranks."""
        rows = [residual.state() for residual in self.residuals]
        longest = max(map(len, self.measured_select.values()))
        measured = np.full((len(self.plan), longest), np.nan)     # NaN-padded per blob
        for row, times in zip(measured, self.measured_select.values()):
            row[:len(times)] = times
        mine = (np.concatenate([r for r, _ in rows]), np.array([t for _, t in rows]),
                self.velocity.copy(), measured)
        gathered = self.comm.gather(mine, root=0)
        if self.comm.Get_rank():
            return None
        return dict(redsync_residuals=np.stack([g[0] for g in gathered]),
                    redsync_thresholds=np.stack([g[1] for g in gathered]),
                    redsync_velocity=np.stack([g[2] for g in gathered]),
                    redsync_measured=np.stack([g[3] for g in gathered]),
                    # the plan in use (the same on every rank): its selection times
                    redsync_plan_select=np.array([plan.select_seconds for plan in self.plan]),
                    redsync_iteration=np.array(self.iteration))

    def load_state(self, saved: dict, origin: str) -> None:
        rank = self.comm.Get_rank()
        residuals = saved.get("redsync_residuals")
        elements = sum(residual.residual.size for residual in self.residuals)
        if residuals is None or residuals.shape != (self.size, elements):
            raise TrainError(f"checkpoint {origin} holds no RedSync residuals for "
                             f"{self.size} ranks of {elements} elements")
        start = 0
        for residual, threshold in zip(self.residuals, saved["redsync_thresholds"][rank]):
            size = residual.residual.size
            residual.load_state(residuals[rank, start:start + size], threshold)
            start += size
        self.velocity[...] = saved["redsync_velocity"][rank]
        self.iteration = int(saved["redsync_iteration"])
        if "redsync_plan_select" in saved:         # absent from checkpoints before replanning
            self.plan = [plan.remeasured(float(seconds))
                         for plan, seconds in zip(self.plan, saved["redsync_plan_select"])]
            for plan, row in zip(self.plan, saved["redsync_measured"][rank]):
                self.measured_select[plan.name] = row[~np.isnan(row)].tolist()
