"""The Solver: learning-rate policies (host scalars), Algorithm 9's data parallelism over the
core groups of one simulated chip (one host thread and one Net replica per CG), SGD with
momentum and weight decay and Adam as one ``hostlib.dnn.sgd_update`` / ``adam_update`` call over
the packed parameter, gradient and history buffers (on the CPEs), test evaluation, and atomic
checkpoints that resume bit-exactly."""
from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import ArgumentTypeError
from ...vm import Machine
from .. import dnn
from .common import TrainError, digest
from .data import Order, Prefetcher
from .prototxt import SolverParameter, parse_solver
from .graph_net import GraphModel, GraphNet
from .net import Net, Run
from .redsync import Compression, RedSync

POLICIES = ("fixed", "step", "exp", "inv", "poly")
SOLVER_TYPES = ("SGD", "Adam")
CHECKPOINT_FORMAT = 4          # 2: the state arena (BatchNorm's running statistics); 3: Adam's v;
#                                4: every core group's state arena (LSTM's carried h, c)
# Main memory reserved ahead for a step's scratch (the operators' copies of their operands), so
# that a CG's thread may allocate while the other CGs run (docs/vm.md "Chip"); only the pages
# written take RAM. Grown between steps to twice the largest step's scratch.
SCRATCH_BYTES = 1 << 30


def learning_rate(solver: SolverParameter, step: int) -> float:
    """Caffe's SGDSolver::GetLearningRate for the policies in POLICIES."""
    base, policy = solver.base_lr, solver.lr_policy
    if policy == "fixed":
        return base
    if policy == "step":
        if solver.stepsize <= 0:
            raise TrainError("solver stepsize: must be > 0 for lr_policy 'step'")
        return base * solver.gamma ** (step // solver.stepsize)
    if policy == "exp":
        return base * solver.gamma ** step
    if policy == "inv":
        return base * (1 + solver.gamma * step) ** (-solver.power)
    if policy == "poly":
        if solver.max_iter <= 0:
            raise TrainError("solver max_iter: must be > 0 for lr_policy 'poly'")
        return base * (1 - step / solver.max_iter) ** solver.power
    raise TrainError(f"solver lr_policy: unknown {policy!r}; known: {', '.join(POLICIES)}")


def adam_rate(solver: SolverParameter, lr: float, step: int) -> float:
    """Caffe's AdamSolver step size at 0-based iteration `step`:
    lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t), t = step + 1 (beta1 = momentum,
    beta2 = momentum2)."""
    t = step + 1
    return lr * math.sqrt(1 - solver.momentum2 ** t) / (1 - solver.momentum ** t)


@dataclass
class StepResult:
    step: int                 # the step just done (1-based count of updates)
    loss: float
    accuracy: Optional[float]
    lr: float
    sim_seconds: float        # simulated time of the step on the chip (slowest CG + reduction)
    host_seconds: float
    layer_seconds: dict


CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)\.npz")


def chip_of(machine, config) -> Machine:
    """The Machine a training object runs on: `machine`, or one built from `config`."""
    if machine is None:
        return Machine(config if config is not None else "sw26010")
    if config is not None:
        raise TrainError("machine, config: give one of them (a machine has its config)")
    if not isinstance(machine, Machine):
        raise ArgumentTypeError(f"machine must be a swsim.Machine, got {type(machine).__name__}")
    return machine


def _check_hyperparameters(s: SolverParameter) -> None:
    """Refuse the values that train off to infinity or silently do nothing."""
    if not (math.isfinite(s.base_lr) and s.base_lr >= 0):
        raise TrainError(f"solver base_lr: must be a finite number >= 0, got {s.base_lr}")
    if not (math.isfinite(s.weight_decay) and s.weight_decay >= 0):
        raise TrainError(f"solver weight_decay: must be a finite number >= 0, got "
                         f"{s.weight_decay}")
    if s.max_iter < 0:
        raise TrainError(f"solver max_iter: must be >= 0 (0: the caller's step count), got "
                         f"{s.max_iter}")
    fields = ("momentum", "momentum2") if s.type == "Adam" else ("momentum",)
    for field in fields:          # SGD's momentum >= 1 never forgets a step: it diverges
        if not 0 <= getattr(s, field) < 1:
            raise TrainError(f"solver {field}: must be in [0, 1) for {s.type}, got "
                             f"{getattr(s, field)}")


class Solver:
    """Trains a net with SGD or Adam on the core groups of one chip: ``step()``, ``test()``."""

    def __init__(self, net_spec, solver=None, *, cgs: int = 1, machine=None, config=None,
                 shard: tuple = (0, 1), gradient_reducer=None,
                 compression: Optional[Compression] = None):
        """The chip is `machine` (as for the operators), else a Machine built from `config` (a
        preset name or VMConfig; default "sw26010"). `shard` = (k, K): this process is node k of K in a data-parallel run and takes the
        k-th K-th of every minibatch; `gradient_reducer(gradient) -> (gradient, seconds)` is
        called on the packed gradient buffer before the update (multi-node allreduce,
        ``allreduce.GradientAllreduce`` on main), its seconds added to the step's; `compression` (a ``redsync.Compression``,
        docs/redsync.md) replaces the solver's ``compression { ... }``."""
        self.solver = (solver if isinstance(solver, SolverParameter)
                       else parse_solver(solver) if solver is not None else SolverParameter())
        s = self.solver
        if s.type not in SOLVER_TYPES:
            raise TrainError(f"solver type: unknown {s.type!r}; known: "
                             f"{', '.join(SOLVER_TYPES)}")
        _check_hyperparameters(s)
        learning_rate(s, 0)                      # a bad policy fails here, not at step 1
        # the chip: every step's operators run on its core groups, its memory holds their
        # operands (a step's scratch, given back after the step)
        self.chip = chip_of(machine, config)
        self.config = chip = self.chip.config
        if not 1 <= cgs <= chip.num_cgs:
            raise TrainError(f"cgs: 1..{chip.num_cgs} core groups, got {cgs}")
        self.cgs = cgs
        self.shard, self.shards = shard
        if not 0 <= self.shard < self.shards:
            raise TrainError(f"shard: node k of K needs 0 <= k < K, got {shard}")
        self.gradient_reducer = gradient_reducer or (lambda gradient: (gradient, {}))
        if compression is not None and not isinstance(compression, Compression):
            raise ArgumentTypeError(f"compression: a redsync.Compression, got "
                                    f"{type(compression).__name__}")
        self.compression = (compression or Compression.from_proto(s.compression)).check(
            self.shards)
        compression = self.compression
        if compression.method == "RGC" and s.type != "SGD":
            raise TrainError(f"solver compression RGC: for SGD (its momentum correction), not "
                             f"{s.type}")
        if compression.method == "RGC" and gradient_reducer is None:
            raise TrainError("solver compression RGC: needs the ranks' gradient_reducer "
                             "(allreduce.GradientAllreduce)")
        self.seed = s.random_seed if s.random_seed >= 0 else 0
        slices = cgs * self.shards
        if isinstance(net_spec, GraphModel):
            if self.shards != 1 or s.test_interval > 0 or compression.method != "NONE":
                raise TrainError("a GraphModel trains on one node, without test phase or "
                                 "compression (one shard, no test_interval) for now")
            # one replica: each node's work shared by the cgs core groups (the dnn operators'
            # cgs=), not Algorithm 9's slices of the batch
            self.net = GraphNet(net_spec, cgs=cgs)
            self.replicas = [self.net]
        else:
            self.net = Net(net_spec, "TRAIN", seed=self.seed, slices=slices, machine=self.chip)
            # one replica per core group (its blobs, gradients and layer state), one parameter
            # copy
            self.replicas = [self.net] + [Net(self.net.spec, "TRAIN", seed=self.seed,
                                              slices=slices, machine=self.chip)
                                          for _ in range(cgs - 1)]
        for replica in self.replicas[1:]:
            replica.share_parameters(self.net)
        if compression.method == "RGC":       # RedSync (Algorithm 10) around the allreduce
            self.gradient_reducer = RedSync(gradient_reducer, compression, self.net.params,
                                            momentum=s.momentum, config_name=self.config,
                                            cgs=cgs)
        # feed-forward nets compress each blob as its layer's backward is done (issue 24); a
        # recurrent net's gradients are complete only after the whole BPTT
        self.overlaps_compression = compression.method == "RGC" and not any(
            node.layer.param.type == "LSTM" for node in self.net.nodes)
        self.overlap_saved = 0.0      # the last step's seconds saved by that overlap
        # with RedSync's momentum correction the reduced gradient already carries momentum
        self.momentum = 0.0 if getattr(self.gradient_reducer, "applies_momentum", False) \
            else s.momentum
        self.scratch_bytes = SCRATCH_BYTES
        # Algorithm 9's threads, one per core group, started once
        self._threads = ThreadPoolExecutor(max_workers=cgs,
                                           thread_name_prefix=f"swsim-train-cg-{id(self):x}")
        if not self.net.losses:
            raise TrainError(f"net {self.net.spec.name!r} has no loss layer in phase TRAIN")
        self.history = np.zeros_like(self.net.params.buffer)     # SGD's v, Adam's m
        self.second_moment = np.zeros_like(self.history)        # Adam's v (0 for SGD)
        self.step_count = 0
        self.order = Order(*self.net.data_source(), self.seed)
        self.feed = Prefetcher(self.order)
        self.test_net = None
        if s.test_interval > 0:
            self.test_net = Net(self.net.spec, "TEST", seed=self.seed, machine=self.chip)
            self._check_test_net()

    def _check_test_net(self):
        test = self.test_net
        for name, (offset, shape) in test.params.layout.items():
            if self.net.params.layout.get(name, (None, None))[1] != shape:
                raise TrainError(f"layer {name.split('/')[0]!r} in phase TEST has a parameter "
                                 f"{shape} the TRAIN net does not have")
        test.data_layer                      # exactly one Data layer (raises otherwise)
        if _accuracy_node(test) is None:
            raise TrainError(f"solver test_interval {self.solver.test_interval}: net "
                             f"{test.spec.name!r} has no Accuracy layer in phase TEST")

    def step(self) -> StepResult:
        """One iteration of Algorithm 9 on the solver's chip: each core group's forward/backward
        on its slice of the minibatch, on CG k of the chip from the solver's thread for that CG
        (all at once: the C engine releases the GIL), the gradients averaged by CPE kernels on
        all ``cgs`` core groups, one update; the step's scratch in the chip's memory is given
        back. Simulated time: the slowest CG, then the reduction and the update."""
        started = time.perf_counter()
        batch = self.feed.next()
        count = len(batch[0])
        mine = slice(self.shard * count // self.shards, (self.shard + 1) * count // self.shards)
        size = count // self.shards // len(self.replicas)
        pieces = [tuple(array[mine][k * size:(k + 1) * size] for array in batch)
                  for k in range(len(self.replicas))]
        with self._scratch():
            futures = [self._threads.submit(self._slice_pass, k, replica, piece)
                       for k, (replica, piece) in enumerate(zip(self.replicas, pieces))]
            wait(futures)           # every CG's thread is done before anything is raised
            passes = [future.result() for future in futures]
            runs = [run for run, _, _ in passes]
            seconds = dict(max(runs, key=lambda r: r.total_seconds).seconds)
            gradient = self._average_gradients(seconds)
            gradient, reducer_seconds = self.gradient_reducer(gradient)
            seconds.update(reducer_seconds)
            if self.overlaps_compression:
                slowest = max(runs, key=lambda r: r.total_seconds)
                self.overlap_saved = self.gradient_reducer.overlap(slowest.backward, seconds)
            lr = learning_rate(self.solver, self.step_count)
            seconds["(update)"] = self.update(gradient, lr)
        self.step_count += 1
        accuracies = [accuracy for _, _, accuracy in passes]
        accuracy = None if None in accuracies else float(np.mean(accuracies))
        return StepResult(self.step_count, float(np.mean([loss for _, loss, _ in passes])),
                          accuracy, lr, sum(seconds.values()), time.perf_counter() - started,
                          seconds)

    @contextlib.contextmanager
    def _scratch(self):
        """Room reserved in the chip's memory for what the operators allocate inside (so the
        CGs' threads may allocate while the others run), given back at the end; the room grows
        to twice the largest scratch seen."""
        mem = self.chip.mem
        mem.reserve(min(self.scratch_bytes, mem.available))
        mark = mem.mark()
        try:
            yield
        finally:
            self.scratch_bytes = max(self.scratch_bytes, 2 * (mem.end - mem.base - mark))
            mem.release(mark)

    def core_group(self, k: int):
        """Where core group ``k``'s replica runs its operators: CG k of the chip, as a machine
        of one core group (``Machine.core_group``)."""
        return self.chip.core_group(k)

    def _slice_pass(self, k: int, net: Net, batch):
        """Forward and backward of one core group's slice on CG ``k`` of the chip; the gradients
        land in that replica's packed buffer."""
        run = Run(self.chip if isinstance(net, GraphNet) else self.core_group(k))
        blobs = net.forward(run, batch)
        loss = net.loss(blobs)
        if not math.isfinite(loss):
            raise TrainError(f"step {self.step_count + 1}: loss is {loss}; first "
                             f"non-finite blob in layer {net.nan_layer(blobs)!r}")
        net.backward(run, blobs)
        return run, loss, batch_accuracy(net, blobs)

    def _average_gradients(self, seconds) -> np.ndarray:
        """(1/N) sum of the replicas' packed gradient buffers, on the CPEs of N CGs."""
        gradient = self.replicas[0].grads.buffer
        for index, other in enumerate(self.replicas[1:]):
            gradient, stats = dnn.add(gradient, other.grads.buffer,
                                      alpha=1.0 if index else 1 / self.cgs,
                                      beta=1 / self.cgs, machine=self.chip, cgs=self.cgs)
            seconds["(reduce)"] = seconds.get("(reduce)", 0.0) + stats.seconds
        return gradient

    def update(self, gradient: np.ndarray, lr: float) -> float:
        """The packed gradient buffer -> the packed parameters (and the solver's history), one
        update operator over the whole buffer on ``cgs`` core groups; returns its simulated
        seconds. ``gradient_reducer`` (a cross-node allreduce) runs right before this call."""
        s, params = self.solver, self.net.params.buffer
        on = dict(machine=self.chip, cgs=self.cgs)
        if s.type == "Adam":
            (new_params, new_history, new_second), stats = dnn.adam_update(
                params, gradient, self.history, self.second_moment,
                adam_rate(s, lr, self.step_count), s.momentum, s.momentum2, s.delta,
                s.weight_decay, **on)
            self.second_moment[...] = new_second
        else:
            (new_params, new_history), stats = dnn.sgd_update(
                params, gradient, self.history, lr, self.momentum, s.weight_decay, **on)
        params[...] = new_params
        self.history[...] = new_history
        return stats.seconds

    def test(self) -> float:
        """Mean accuracy of the TEST net over ``test_iter`` batches with the current weights."""
        net = self.test_net
        for name in net.params.layout:
            net.params[name][...] = self.net.params[name]
        for node in net.nodes:      # CG 0's running statistics; a fresh recurrent state
            for name, initial in zip(node.state, node.layer.init_state()):
                net.state[name][...] = (initial if node.layer.carries_state
                                        else self.net.state[name])
        order = Order(*net.data_source(), self.seed, shuffle=False)
        iterations = self.solver.test_iter[0] if self.solver.test_iter else 1
        accuracies = []
        for k in range(iterations):
            with self._scratch():
                blobs = net.forward(Run(self.chip), order.batch(k))
            accuracies.append(batch_accuracy(net, blobs))
        return float(np.mean(accuracies))

    # Checkpoints: one .npz per step, written to a temporary file and renamed into place.

    def _identity(self) -> dict:
        identity = dict(format=CHECKPOINT_FORMAT, net=self.net.fingerprint(),
                        solver=digest(self.solver))
        if self.compression.method != "NONE":
            identity["compression"] = repr(self.compression)
        return identity

    def save(self, directory) -> Optional[Path]:
        """Write a checkpoint; with RedSync a collective call (every rank's residuals are
        gathered) that only rank 0 writes (returns None on the others)."""
        extra = {}
        if hasattr(self.gradient_reducer, "state"):
            extra = self.gradient_reducer.state()
            if extra is None:
                return None
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"checkpoint-{self.step_count:08d}.npz"
        identity = self._identity()
        fd, temporary = tempfile.mkstemp(prefix=".checkpoint-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, params=self.net.params.buffer, history=self.history,
                         second_moment=self.second_moment,
                         state=self._states(),
                         step=self.step_count, position=self.feed.position, **extra,
                         **{k: np.array(v) for k, v in identity.items()})
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return target

    def _states(self) -> np.ndarray:
        """A copy of every core group's state arena, one row each."""
        return np.stack([replica.state.buffer for replica in self.replicas])

    def restore(self, directory) -> Path:
        """Load the latest checkpoint in ``directory`` (raises if none, corrupt or another
        net's/solver's)."""
        steps = {int(match.group(1)): path for path in Path(directory).glob("checkpoint-*.npz")
                 if (match := CHECKPOINT_NAME.fullmatch(path.name))}
        if not steps:
            raise TrainError(f"--resume {directory}: no checkpoint-<step>.npz there")
        path = steps[max(steps)]          # by step number: checkpoint-9 is older than -00000010
        try:
            with np.load(path) as archive:
                saved = {key: archive[key] for key in archive.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise TrainError(f"checkpoint {path} is corrupt: {exc}") from None
        expected = self._identity()
        for key, value in expected.items():
            if key not in saved or saved[key].item() != value:
                raise TrainError(f"checkpoint {path} does not match: its {key} differs from "
                                 f"this run's (another net, solver or format)")
        states = saved.get("state")
        if states is not None and states.ndim == 2 and len(states) != len(self.replicas):
            if any(n.layer.carries_state and n.state for n in self.net.nodes):
                raise TrainError(f"checkpoint {path} holds the LSTM state of {len(states)} core "
                                 f"groups, this run has --cgs {self.cgs}")
            states = states[:1].repeat(len(self.replicas), axis=0)  # CG 0's running statistics
        buffers = dict(params=self.net.params.buffer, history=self.history,
                       second_moment=self.second_moment)
        for key, buffer in (*buffers.items(), ("state", self._states())):
            found = states if key == "state" else saved.get(key)
            if found is None or found.shape != buffer.shape:
                raise TrainError(f"checkpoint {path} is corrupt: its {key} buffer is missing "
                                 f"or of another size")
        step, position = (_count(saved, key, path) for key in ("step", "position"))
        for key, buffer in buffers.items():
            buffer[...] = saved[key]
        for replica, state in zip(self.replicas, states):
            replica.state.buffer[...] = state
        if hasattr(self.gradient_reducer, "load_state"):
            self.gradient_reducer.load_state(saved, path)
        self.step_count = step
        self.feed = Prefetcher(self.order, position)
        return path


def _count(saved: dict, key: str, path) -> int:
    """A checkpoint's integer scalar `key` (>= 0), or TrainError naming it."""
    value = saved.get(key)
    if value is None or value.shape != () or value.dtype.kind not in "iu" or value < 0:
        raise TrainError(f"checkpoint {path} is corrupt: its {key} must be an integer >= 0, "
                         f"got {value!r}")
    return int(value)


def _accuracy_node(net: Net):
    return next((n for n in net.nodes if n.layer.param.type == "Accuracy"), None)


def batch_accuracy(net: Net, blobs) -> Optional[float]:
    """The value of `net`'s Accuracy layer in the blobs of a forward pass (None without one)."""
    node = _accuracy_node(net)
    return None if node is None else float(blobs[node.tops[0]])
