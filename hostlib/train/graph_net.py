"""A graph-backed Net (docs/train.md "Training an imported graph"): ``GraphModel`` wraps an
imported graph (an ONNX model, or a ``hostlib.graph.Graph``), a data source and the loss, and
derives the training graph (``hostlib.graph.autodiff``); the Solver builds a ``GraphNet`` from it
as it builds a ``Net`` from a prototxt and runs it the same way: forward, loss, backward into
the packed gradient buffer, one ``sgd_update`` / ``adam_update`` over the packed parameters.
Every node (forward and backward) goes through swHMAE's dispatch: CPE code on the VM, or the
MPE fallback timed by the MPE cost model; its simulated seconds are the step's row for it."""
from __future__ import annotations

import hashlib

import numpy as np

from ..graph import DataflowSession, Graph, GraphError, import_onnx
from ..graph.autodiff import derive_training, with_loss
from ..graph.batch_statistics import global_batchnorm
from ..graph.dataflow import split as split_pass
from ..graph.dispatch import run_node
from .common import DTYPE, TrainError
from .data import Dataset
from .memory import Arena


class GraphModel:
    """What the Solver trains instead of a NetParameter: ``graph`` (an ONNX model -- path,
    bytes or ModelProto -- or a Graph), fed batches of ``batch_size`` samples of ``source``
    (as a Data layer's: "sklearn:digits" or an .npz) times ``scale``. The loss: the graph's
    scalar tensor ``loss``, or (the default) the mean softmax cross-entropy of ``logits``
    (default: the graph's one output) against the labels, fed as the int64 input ``labels``.
    ``parameters``: the initializers to train (default every float one a gradient reaches).
    ``check``: swHMAE's debug mode on every node; ``minimum_work``: its minimum-work rule.
    ``split``: None (default) shares each node's work among the Solver's core groups; an
    integer S runs the training graph by swFLOWpro's dataflow runtime (``DataflowSession``:
    nodes whole on the core groups, several at once) on the split pass's S copies, each on
    batch_size / S samples, their gradients summed on the CPEs (1: the graph as it is)."""

    def __init__(self, graph, *, source: str, batch_size: int, scale: float = 1.0,
                 logits: str = None, loss: str = None, labels: str = "labels",
                 parameters=None, check: bool = False, minimum_work: bool = True,
                 name: str = None, split: int = None):
        if not isinstance(graph, Graph):
            graph = import_onnx(graph)
        if loss is None:
            if logits is None:
                if len(graph.outputs) != 1:
                    raise TrainError(f"graph {graph.name!r}: logits= must name one of its "
                                     f"outputs {graph.outputs}")
                logits = graph.outputs[0]
            graph, loss = with_loss(graph, logits, labels), "loss"
        self.training = derive_training(graph, loss, parameters)
        self.name = name or graph.name
        self.labels = labels
        data_inputs = [n for n in graph.inputs if n != labels]
        if len(data_inputs) != 1 or labels not in graph.inputs:
            raise TrainError(f"graph {graph.name!r}: needs one data input and the labels "
                             f"input {labels!r}, has inputs {sorted(graph.inputs)}")
        self.data = data_inputs[0]
        shape = graph.inputs[self.data].shape
        if not isinstance(batch_size, int) or batch_size != shape[0]:
            raise TrainError(f"batch_size: the graph's input {self.data!r} is {list(shape)}, "
                             f"its batch {shape[0]}; got {batch_size!r}")
        self.dataset = Dataset(source, "TRAIN", scale, "GraphModel source")
        if (batch_size,) + self.dataset.sample_shape != tuple(shape):
            raise TrainError(f"source {source!r}: samples of {list(self.dataset.sample_shape)} "
                             f"do not fit the graph's input {self.data!r} {list(shape)}")
        self.batch_size = batch_size
        initializers = self.training.graph.initializers
        for name in self.training.parameters + list(self.training.state):
            if initializers[name].dtype != DTYPE:
                raise TrainError(f"parameter {name!r}: {initializers[name].dtype.name}; the "
                                 f"training stack's parameters are {np.dtype(DTYPE).name}")
        self.options = dict(check=check, minimum_work=minimum_work)
        self.slices = split
        self.parted = None if split is None else self._split(split)

    def _split(self, slices):
        """The split pass over the training graph: each copy's backward starts from 1/S
        (the seed), so the Sum of the S copies' gradients is the whole batch's mean
        gradient; the copies' losses are summed too (the Solver reports their mean)."""
        if isinstance(slices, bool) or not isinstance(slices, int) or slices < 1 or \
                self.batch_size % slices:
            raise TrainError(f"split: an integer >= 1 dividing batch_size {self.batch_size} "
                             f"(equal slices), got {slices!r}")
        if slices == 1:
            return None
        # BatchNormalization's statistics over the whole batch: sums reduced across copies
        graph, reduce = global_batchnorm(self.training)
        seeded = Graph(graph.name, graph.nodes, graph.inputs, graph.outputs, {
            **graph.initializers,
            self.training.seed: np.full((), 1 / slices, graph.initializers[self.training.seed]
                                        .dtype)})
        sums = [self.training.loss] + [g for g in self.training.gradients.values()
                                       if g not in reduce]
        try:
            return split_pass(seeded, slices, sums=sums, reduce=reduce)
        except GraphError as error:
            raise TrainError(f"graph {self.name!r}: {error}") from None

    def fingerprint(self) -> str:
        """A digest of the training graph and its initial parameters (checkpoint identity)."""
        digest = hashlib.sha256()
        graph = self.training.graph
        for node in graph.nodes:
            digest.update(repr((node.name, node.op_type, node.inputs, node.outputs,
                                sorted(node.attrs.items(), key=str))).encode())
        for name in sorted(graph.initializers):
            digest.update(name.encode() + np.ascontiguousarray(graph.initializers[name]).data)
        return digest.hexdigest()


class GraphNet:
    """The Net interface the Solver uses (``params``, ``grads`` and ``state`` arenas,
    ``forward``/``loss``/``backward``), over a GraphModel's training graph."""
    nodes = ()            # no Caffe layers: no Accuracy layer and no carried state

    def __init__(self, model: GraphModel, cgs: int = 1):
        """``cgs``: the core groups every node's operator shares its work among (with the
        model's ``split``: the dataflow runtime's core groups)."""
        self.spec, self.training, self.cgs = model, model.training, cgs
        graph = self.training.graph
        self.forward_nodes = graph.nodes[:self.training.forward]
        self.backward_nodes = graph.nodes[self.training.forward:]
        self.losses = [self.training.loss]
        self.params, self.grads, self.state = Arena(), Arena(), Arena()
        for name in self.training.parameters:
            self.params.add(name, graph.initializers[name].shape)
            self.grads.add(name, graph.initializers[name].shape)
        for name in self.training.state:          # BatchNormalization's running statistics
            self.state.add(name, graph.initializers[name].shape)
        for arena in (self.params, self.grads, self.state):
            arena.build()
        for arena, names in ((self.params, self.training.parameters),
                             (self.state, self.training.state)):
            for name in names:
                arena[name][...] = graph.initializers[name]
        self.records = []           # the last step's swHMAE records, node by node
        self.session = None         # with split: the DataflowSession, made on the first step

    def data_source(self):
        return self.spec.dataset, self.spec.batch_size

    def fingerprint(self) -> str:
        return self.spec.fingerprint()

    def forward(self, run, batch) -> dict:
        """Every tensor of the forward nodes on ``batch`` = (data, label) on ``run``'s core
        group (the labels, Caffe's floats, as the graph's int64). With ``split``: the whole
        training graph by the dataflow runtime (the backward too; ``backward`` then only
        hands the gradients over), its makespan the step's "(dataflow)" row."""
        graph = self.training.graph
        feeds = {self.spec.data: np.ascontiguousarray(batch[0]),
                 self.spec.labels: np.asarray(batch[1]).astype(np.int64)}
        if self.spec.slices is not None:
            return self._dataflow(run, feeds)
        values = dict(graph.initializers)
        values.update({name: self.params[name] for name in self.training.parameters})
        values.update({name: self.state[name] for name in self.training.state})
        values.update(feeds)
        self.records = []
        self._run(run, self.forward_nodes, values)
        for name, updated in self.training.state.items():
            self.state[name][...] = values[updated]
        return values

    def _dataflow(self, run, feeds) -> dict:
        parted = self.spec.parted
        if self.session is None or self.session.machine is not run.machine:
            graph = parted.graph if parted else self.training.graph
            # the parameters read in place from the arena the update writes
            graph = Graph(graph.name, graph.nodes, graph.inputs, graph.outputs, {
                **graph.initializers,
                **{name: self.params[name] for name in self.training.parameters},
                **{name: self.state[name] for name in self.training.state}})
            graph.infer()
            # the training graph's gradient operators read NCHW: no layout pass
            self.session = DataflowSession(graph, machine=run.machine, cgs=self.cgs,
                                           layouts=False, **self.spec.options)
        try:
            values = self.session.run(parted.feeds(feeds) if parted else feeds)
        except GraphError as error:
            raise TrainError(f"graph {self.spec.name!r}: {error}") from None
        self.records = self.session.records
        for name, updated in self.training.state.items():
            self.state[name][...] = values[updated]
        run.seconds["(dataflow)"] += self.session.cycles / run.machine.config.clock_hz
        return values

    def backward(self, run, blobs) -> None:
        """The backward nodes; the parameters' gradients into the packed gradient buffer."""
        if self.spec.slices is None:
            self._run(run, self.backward_nodes, blobs)
        for name, grad in self.training.gradients.items():
            self.grads[name][...] = blobs[grad]

    def _run(self, run, nodes, values) -> None:
        clock = run.machine.config.clock_hz
        for node in nodes:
            inputs = [values[name] if name else None for name in node.inputs]
            try:
                outputs, record = run_node(node, inputs, machine=run.machine, cgs=self.cgs,
                                           **self.spec.options)
            except GraphError as error:
                raise TrainError(f"graph {self.spec.name!r}: {error}") from None
            self.records.append(record)
            run.seconds[node.name] += record.cycles / clock
            values.update((name, value) for name, value in zip(node.outputs, outputs) if name)

    def loss(self, blobs) -> float:
        """The loss (with split: the copies' summed losses over S, the host's report)."""
        return float(blobs[self.training.loss]) / (self.spec.slices or 1)

    def nan_layer(self, blobs):
        """The first node (in forward order) one of whose outputs holds a NaN, or None."""
        for node in self.forward_nodes:
            for name in node.outputs:
                if name in blobs and np.isnan(np.asarray(blobs[name], np.float64)).any():
                    return node.name
        return None
