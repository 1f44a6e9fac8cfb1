"""Data-parallel training with ParaX's instances and their gradient synchronisation
(docs/parax.md "Training"): every step, each of P instances runs the net's forward and backward
on its slice of the minibatch (the training stack's operators on the VM, one instance after the
other on one core group), and ``hostlib.parax.synchronise`` applies W -= lr mean_k(G_k) on the
CPE array by PS, RAR or GS. Plain SGD (no momentum, no weight decay), so it can be compared
with the ``Solver`` of the same rate and minibatch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import ArgumentError
from ...vm import Machine
from ..parax import synchronise
from .data import Order
from .net import Net, Run
from .solver import _accuracy


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
    return float(np.mean([_accuracy(net, net.forward(Run(machine), order.batch(k)))
                          for k in range(len(dataset) // batch_size)]))
