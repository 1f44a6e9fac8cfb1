"""Data-parallel training with ParaX's instances and their gradient synchronisation
(docs/parax.md "Training"): every step, each of P instances runs the net's forward and backward
on its slice of the minibatch (the training stack's operators on the VM, one instance after the
other on one core group), and ``hostlib.parax.synchronise`` applies W -= lr mean_k(G_k) on the
CPE array by PS, RAR or GS. Plain SGD (no momentum, no weight decay), so it can be compared
with the ``Solver`` of the same rate and minibatch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import ArgumentError
from ...vm import Machine
from ..parax import cnn, mlp, synchronise
from .data import Order, load_digits
from .prototxt import parse_net
from .net import Net, Run
from .solver import batch_accuracy


@dataclass
class InstanceTraining:
    strategy: str
    instances: int
    losses: list = field(default_factory=list)
    sync_cycles: list = field(default_factory=list)
    sync_bytes: list = field(default_factory=list)
    test_accuracy: float = float("nan")


def train_instances(net_spec, *, instances: int = 4, strategy: str = "GS", steps: int = 100,
                    lr: float = 0.1, seed: int = 1, engine: str = "c",
                    test: bool = True) -> InstanceTraining:
    """Train `net_spec` for `steps` minibatches (the Data layer's batch_size, cut into
    `instances` slices) and return the losses, each step's synchronisation cycles and DMA
    bytes, and (`test`) the accuracy over one pass of the TEST phase's data."""
    if not isinstance(steps, int) or steps < 1:
        raise ArgumentError(f"steps must be a positive int, got {steps!r}")
    machine = Machine()
    net = Net(net_spec, "TRAIN", seed=seed, slices=instances)
    data = net.data_layer
    order = Order(net.datasets[data.layer.name], data.layer.param.data_param.batch_size, seed)
    result = InstanceTraining(strategy, instances)
    params = net.params.buffer
    for step in range(steps):
        batch = order.batch(step)
        size = len(batch[0]) // instances
        gradients, losses = [], []
        for k in range(instances):
            piece = tuple(array[k * size:(k + 1) * size] for array in batch)
            blobs = net.forward(Run(machine), piece)
            losses.append(net.loss(blobs))
            net.backward(Run(machine), blobs)
            gradients.append(net.grads.buffer.copy())
        sync = synchronise(np.stack(gradients), params.copy(), lr, strategy=strategy,
                           machine=machine, engine=engine)
        params[...] = sync.w
        result.losses.append(float(np.mean(losses)))
        result.sync_cycles.append(sync.cycles)
        result.sync_bytes.append(sync.dma_bytes)
    if test:
        result.test_accuracy = evaluate(net, machine, seed)
    return result


def evaluate(trained: Net, machine, seed) -> float:
    """Mean accuracy of the TEST net over one pass of its data with `trained`'s parameters."""
    net = Net(trained.spec, "TEST", seed=seed)
    for name in net.params.layout:
        net.params[name][...] = trained.params[name]
    data = net.data_layer
    batch_size = data.layer.param.data_param.batch_size
    dataset = net.datasets[data.layer.name]
    order = Order(dataset, batch_size, seed, shuffle=False)
    return float(np.mean([batch_accuracy(net, net.forward(Run(machine), order.batch(k)))
                          for k in range(len(dataset) // batch_size)]))


MLP_NET = """# ParaX's MLP 256 -> 64 -> 10 on the digits upsampled to 16 x 16 (docs/parax.md "Training")
name: "mlp256"
layer {{ name: "digits" type: "Data" top: "data" top: "label" include {{ phase: TRAIN }}
  data_param {{ source: "{train}" batch_size: {batch} }} }}
layer {{ name: "digits_test" type: "Data" top: "data" top: "label" include {{ phase: TEST }}
  data_param {{ source: "{test}" batch_size: 40 }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param {{ num_output: 64 }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param {{ num_output: 10 }} }}
layer {{ name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include {{ phase: TEST }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
"""


def digits_256(phase: str) -> tuple:
    """The training stack's digits split, each 8 x 8 image upsampled (every pixel 2 x 2) to
    16 x 16 = 256 inputs and scaled to [0, 1]: ((N, 1, 16, 16) float32, labels)."""
    images, labels = load_digits(phase)
    big = images.repeat(2, axis=2).repeat(2, axis=3) / 16
    return big.astype(np.float32), labels


def mlp_net_spec(directory, batch: int):
    """The MLP as a training-stack net on digits_256 (.npz files written into `directory`)."""
    paths = {}
    for phase in ("TRAIN", "TEST"):
        data, label = digits_256(phase)
        paths[phase.lower()] = Path(directory) / f"digits256_{phase.lower()}.npz"
        np.savez(paths[phase.lower()], data=data, label=label)
    return parse_net(MLP_NET.format(batch=batch, **paths))


def load_mlp_params(net: Net, params: np.ndarray) -> None:
    """Copy a ParaX parameter vector into the training stack's InnerProduct blobs (out, in)."""
    w1, b1, w2, b2 = mlp.unpack(params)
    for name, value in (("ip1/0", w1.T), ("ip1/1", b1), ("ip2/0", w2[:, :mlp.OUT].T),
                        ("ip2/1", b2[:mlp.OUT])):
        net.params[name][...] = value


@dataclass
class MlpTraining:
    """Per step: the loss, the instances' compute cycles, the synchronisation's cycles and DMA
    bytes; the test accuracy at the end."""
    strategy: str
    instances: int
    batch: int
    losses: list = field(default_factory=list)
    compute_cycles: list = field(default_factory=list)
    sync_cycles: list = field(default_factory=list)
    sync_bytes: list = field(default_factory=list)
    test_accuracy: float = float("nan")
    params: np.ndarray = None
    moments: np.ndarray = None   # the CNN's BN running mean and variance (train_cnn)

    @property
    def samples_per_megacycle(self) -> float:
        cycles = sum(self.compute_cycles) + sum(self.sync_cycles)
        return self.instances * self.batch * len(self.losses) / cycles * 1e6

    def record(self, run, labels, sync, *more_syncs) -> np.ndarray:
        """Log a step (the loss read from the kernel's probabilities), its synchronisations'
        cycles and bytes summed (`sync` the gradient's); the updated W."""
        picked = np.take_along_axis(run.probabilities.reshape(-1, run.probabilities.shape[-1]),
                                    labels.reshape(-1, 1).astype(np.int64), axis=1)
        self.losses.append(float(-np.mean(np.log(picked.astype(np.float64)))))
        self.compute_cycles.append(run.cycles)
        syncs = (sync, *more_syncs)
        self.sync_cycles.append(sum(s.cycles for s in syncs))
        self.sync_bytes.append(sum(s.dma_bytes for s in syncs))
        return sync.w


def _check_training(steps, strategy: str, instances: int) -> None:
    if not isinstance(steps, int) or steps < 1:
        raise ArgumentError(f"steps must be a positive int, got {steps!r}")
    if strategy == "PS" and instances >= 64:
        raise ArgumentError(f"PS keeps one CPE as its server: at most 63 instances, got "
                            f"{instances}")


def train_mlp(spec, *, instances: int = 4, batch: int = 8, strategy: str = "GS",
              steps: int = 50, lr: float = 0.1, seed: int = 1, engine: str = "c",
              test: bool = True) -> MlpTraining:
    """Train the MLP of `spec` (mlp_net_spec) with `instances` single-CPE instances of `batch`
    samples each (kernels/parax/mlp.s), synchronised by `strategy` every step: SGD on
    minibatches of instances x batch samples in the order the Solver of the same seed takes
    them. The loss is read from the kernel's probabilities."""
    _check_training(steps, strategy, instances)
    machine = Machine()
    net = Net(spec, "TRAIN", seed=seed)
    order = Order(net.datasets[net.data_layer.layer.name], instances * batch, seed)
    params = mlp.init_params(seed)
    result = MlpTraining(strategy, instances, batch)
    for step in range(steps):
        data, label = order.batch(step)
        run = mlp.instance_step(params, data.reshape(instances, batch, mlp.IN),
                                label.reshape(instances, batch).astype(np.int64),
                                machine=machine, engine=engine)
        params = result.record(run, label, synchronise(
            run.gradients, params, lr, strategy=strategy, machine=machine, engine=engine))
    result.params = params
    if test:
        result.test_accuracy = mlp_accuracy(params, machine, engine)
    return result


def mlp_accuracy(params, machine, engine: str = "c") -> float:
    """Accuracy over the digits_256 test set, the forward passes run by the MLP kernel (as
    many instances of 8 samples as the core group has; the remainder's gradient unused)."""
    data, label = digits_256("TEST")
    per = mlp.B_MAX
    usable = len(label) // per * per
    hits = 0
    for start in range(0, usable, per * 64):
        x = data[start:start + per * 64].reshape(-1, per, mlp.IN)
        y = label[start:start + len(x) * per].reshape(-1, per)
        run = mlp.instance_step(params, x, y.astype(np.int64), machine=machine, engine=engine)
        hits += int((run.probabilities.argmax(axis=2) == y).sum())
    return hits / usable


def digits_hwc(phase: str) -> tuple:
    """The training stack's digits split as parax.cnn samples: every 8 x 8 image in channel 0
    of 16 (the others 0), pixels / 16: ((N, 8, 8, 16) float32, labels)."""
    images, labels = load_digits(phase)
    x = np.zeros((len(labels), 8, 8, cnn.CHANNELS), np.float32)
    x[..., 0] = images[:, 0] / 16
    return x, labels


def train_cnn(*, instances: int = 4, batch: int = 4, strategy: str = "GS", steps: int = 50,
              lr: float = 0.5, seed: int = 1, engine: str = "c",
              test: bool = True) -> MlpTraining:
    """Train parax.cnn on digits with `instances` single-CPE instances of `batch` samples each
    (kernels/parax/cnn.s: BN on each instance's batch statistics), synchronised by `strategy`
    every step; the samples drawn epoch by epoch in a seeded random order. BN's running
    statistics (``result.moments``) follow the instances' mean batch statistics with momentum
    cnn.BN_MOMENTUM, each instance's term computed in its kernel and summed across them by the
    same `strategy` (its cycles and bytes counted in the step's synchronisation); the test
    accuracy uses them."""
    _check_training(steps, strategy, instances)
    machine = Machine()
    data, labels = digits_hwc("TRAIN")
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(len(labels))
                            for _ in range(-(-steps * instances * batch // len(labels)))])
    params, moments = cnn.init_params(seed), cnn.initial_moments()
    result = MlpTraining(strategy, instances, batch)
    for step in range(steps):
        pick = order[step * instances * batch:(step + 1) * instances * batch]
        label = labels[pick].reshape(instances, batch)
        run = cnn.cnn_step(params, data[pick].reshape(instances, batch, 8, 8, cnn.CHANNELS),
                           label, moments, machine=machine, engine=engine)
        running = cnn.update_running(moments, run, strategy=strategy, machine=machine,
                                     engine=engine)
        params = result.record(run, label, synchronise(
            run.gradients, params, lr, strategy=strategy, machine=machine, engine=engine),
            running)
        moments = running.w
    result.params, result.moments = params, moments
    if test:
        result.test_accuracy = cnn_accuracy(params, moments, machine, engine)
    return result


def cnn_accuracy(params, moments, machine, engine: str = "c") -> float:
    """Accuracy over the digits test set, the forward passes run by the CNN kernel with BN's
    running statistics (instances of 8 samples; the remainder under 8 left out)."""
    data, label = digits_hwc("TEST")
    per = cnn.KERNEL.symbol("MAX_BATCH")
    usable = len(label) // per * per
    hits = 0
    for start in range(0, usable, per * 64):
        x = data[start:start + min(per * 64, usable - start)]
        run = cnn.cnn_predict(params, moments, x.reshape(-1, per, 8, 8, cnn.CHANNELS),
                              machine=machine, engine=engine)
        hits += int((run.probabilities.reshape(-1, cnn.OUT).argmax(axis=1)
                     == label[start:start + len(x)]).sum())
    return hits / usable
