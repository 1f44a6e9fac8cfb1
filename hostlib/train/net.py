"""The Net: a static graph built once from a NetParameter (bottoms -> tops), shapes inferred
layer by layer, then the passes of thesis §7.1 before the first step: operator selection per
layer (kept for every iteration), and 128-byte aligned packed buffers for the parameters, the
gradients (ONE contiguous buffer) and the blobs. A step's forward/backward takes one batch, so
the 4-CG data parallelism of Algorithm 9 runs it per core group on a slice of the batch
(``slices``: the blobs are planned for batch_size / slices samples)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ...errors import SwsimError
from .. import dnn
from ..blas import gemm
from .common import DTYPE, TrainError
from .data import Dataset
from .layers import KINDS, LOSSES, missing_operators
from .memory import Arena
from .model import NetParameter, parse_net

PHASES = ("TRAIN", "TEST")


@dataclass
class Run:
    """One step on one core group: every operator call goes through ``op``/``gemm``, which
    pass the Machine and add the simulated seconds to the layer's account."""
    machine: object
    seconds: dict = field(default_factory=lambda: defaultdict(float))

    def op(self, layer, name, *args, **kwargs):
        return self.op_with_stats(layer, name, *args, **kwargs)[0]

    def op_with_stats(self, layer, name, *args, **kwargs):
        """``op`` that also returns the operator's Stats (what a backward needs from them)."""
        return self._call(layer, name, getattr(dnn, name), *args, **kwargs)

    def gemm(self, layer, a, b, **kwargs):
        return self._call(layer, "gemm", gemm, a, b, **kwargs)[0]

    def _call(self, layer, name, operator, *args, **kwargs):
        """Run an operator on this CG and account its seconds to the layer; what it refuses (a
        shape its kernel cannot take, a buffer that does not fit in LDM) becomes an error
        naming the layer."""
        try:
            result, stats = operator(*args, machine=self.machine, **kwargs)
        except TrainError:
            raise
        except SwsimError as exc:
            raise layer.error("operator", f"{name}: {exc}") from None
        self.seconds[layer.name] += stats.seconds
        return result, stats

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())


def _in_phase(layer, phase: str) -> bool:
    number = PHASES.index(phase)
    if layer.include:
        return any(rule.phase == number for rule in layer.include)
    return not any(rule.phase == number for rule in layer.exclude)


class Node:
    """A layer in the graph: its blobs by version (in-place tops get a new version)."""

    def __init__(self, layer, bottoms, tops):
        self.layer, self.bottoms, self.tops = layer, bottoms, tops
        self.params = []           # names in the parameter / gradient arenas
        self.state = []            # names in the state arena


class Net:
    def __init__(self, spec, phase: str = "TRAIN", *, seed: int = 0, slices: int = 1,
                 config=None):
        if phase not in PHASES:
            raise TrainError(f"phase must be one of {PHASES}, got {phase!r}")
        self.spec = spec if isinstance(spec, NetParameter) else parse_net(spec)
        self.phase = phase
        self.nodes, self.shapes, self.datasets = [], {}, {}
        self.params, self.grads, self.blobs = Arena(), Arena(), Arena()
        self.state = Arena()                        # running statistics (BatchNorm): not learned
        latest = {}                                 # Caffe blob name -> current version
        for index, lp in enumerate(self.spec.layer):
            if _in_phase(lp, phase):
                self._add(index, lp, latest, slices)
        if not self.nodes:
            raise TrainError(f"net {self.spec.name!r} has no layer in phase {phase}")
        for arena in (self.params, self.grads, self.blobs, self.state):
            arena.build()
        rng = np.random.default_rng(seed)
        for node in self.nodes:
            if node.params:
                for name, value in zip(node.params, node.layer.init(rng)):
                    self.params[name][...] = value
            node.layer.state = [self.state[name] for name in node.state]
            for view, value in zip(node.layer.state, node.layer.init_state()):
                view[...] = value
        self.losses = [n for n in self.nodes if n.layer.param.type in LOSSES]
        self.choices = {}
        if config is not None:
            self.select_operators(config)

    def _add(self, index, lp, latest, slices):
        where = f"layer {lp.name or '#' + str(index)!r}"
        if not lp.name:
            raise TrainError(f"layer #{index} ({lp.type or 'no type'}), name: must be given")
        if lp.name in (n.layer.name for n in self.nodes):
            raise TrainError(f"{where}, name: used by an earlier layer")
        cls = KINDS.get(lp.type)
        if cls is None:
            raise TrainError(f"{where}, type: unknown layer type {lp.type!r}; known: "
                             f"{', '.join(sorted(KINDS))}")
        layer = cls(lp)
        layer.set_phase(self.phase)
        missing = missing_operators(cls)
        if missing:
            raise layer.error("type", f"needs hostlib.dnn.{', hostlib.dnn.'.join(missing)}, "
                              f"not available yet")
        low, high = cls.bottoms
        if not low <= len(lp.bottom) <= high:
            raise layer.error("bottom", f"takes {low}..{high} bottoms, got {len(lp.bottom)}")
        for bottom in lp.bottom:
            if bottom not in latest:
                raise layer.error("bottom", f"blob {bottom!r} is no earlier layer's top")
        bottoms = [latest[b] for b in lp.bottom]
        if lp.type == "Data":
            tops = self._data_tops(layer, slices)
        else:
            tops = layer.setup([self.shapes[b] for b in bottoms])
        if len(lp.top) != len(tops):
            raise layer.error("top", f"has {len(tops)} tops, got {len(lp.top)}")
        versions = []
        for top, shape in zip(lp.top, tops):
            version = f"{top}@{lp.name}" if top in latest else top
            latest[top] = version
            self.shapes[version] = tuple(shape)
            self.blobs.add(version, shape)
            versions.append(version)
        node = Node(layer, bottoms, versions)
        for i, shape in enumerate(layer.param_shapes):
            name = f"{lp.name}/{i}"
            self.params.add(name, shape)
            self.grads.add(name, shape)
            node.params.append(name)
        for i, shape in enumerate(layer.state_shapes):
            node.state.append(f"{lp.name}/state{i}")
            self.state.add(node.state[-1], shape)
        if any(weight != 1 for weight in lp.loss_weight):
            raise layer.error("loss_weight", "only 1 is supported")
        if any(ps.lr_mult != 1 or ps.decay_mult != 1 for ps in lp.param):
            raise layer.error("param", "lr_mult/decay_mult other than 1 are not supported yet "
                              "(the update is one call over the packed buffer)")
        self.nodes.append(node)

    def _data_tops(self, layer, slices):
        p = layer.param.data_param
        if not p.source:
            raise layer.error("data_param.source", "must be given")
        if p.batch_size <= 0:
            raise layer.error("data_param.batch_size", "must be given and > 0")
        if p.batch_size % slices:
            raise layer.error("data_param.batch_size", f"{p.batch_size} does not divide among "
                              f"{slices} core groups")
        dataset = Dataset(p.source, self.phase, p.scale, f"layer {layer.name!r} data_param")
        self.datasets[layer.name] = dataset
        if len(layer.param.top) != 2:
            raise layer.error("top", f"a Data layer has 2 tops (data, label), got "
                              f"{len(layer.param.top)}")
        per_slice = p.batch_size // slices          # what one core group's pass sees
        return [(per_slice,) + dataset.sample_shape, (per_slice,)]

    def share_parameters(self, other: "Net") -> None:
        """Read ``other``'s parameter arena (one copy of the weights for every core group's
        replica; forward and backward only read it)."""
        if other.params.layout != self.params.layout:
            raise TrainError(f"net {self.spec.name!r}: the replicas' parameters differ")
        self.params = other.params

    @property
    def data_layer(self):
        data = [n for n in self.nodes if n.layer.param.type == "Data"]
        if len(data) != 1:
            raise TrainError(f"net {self.spec.name!r} needs exactly one Data layer in phase "
                             f"{self.phase}, has {len(data)}")
        return data[0]

    def select_operators(self, config) -> None:
        """The selection pass (thesis §7.1): each layer's operator, asked once of the
        performance models and kept for every iteration."""
        self.choices = {n.layer.name: n.layer.choose([self.shapes[b] for b in n.bottoms],
                                                     config) for n in self.nodes}

    def explain(self) -> list:
        """One row per layer: name, type, top shapes, operator, layout, predicted seconds."""
        if not self.choices:
            raise TrainError("explain() needs the selection pass: build the Net with config= "
                             "or call select_operators(config)")
        return [dict(layer=n.layer.name, type=n.layer.param.type,
                     shapes=[self.shapes[t] for t in n.tops],
                     params=int(sum(self.params[p].size for p in n.params)),
                     **self.choices[n.layer.name]._asdict()) for n in self.nodes]

    def forward(self, run, batch) -> dict:
        """All blobs of one forward pass on ``batch`` = (data, label)."""
        blobs = {}
        for node in self.nodes:
            if node.layer.param.type == "Data":
                tops = batch
            else:
                tops = node.layer.forward(run, [blobs[b] for b in node.bottoms],
                                          [self.params[p] for p in node.params])
            for name, value in zip(node.tops, tops):
                if np.shape(value) != self.shapes[name]:
                    raise node.layer.error("top", f"produced {np.shape(value)}, the graph "
                                           f"planned {self.shapes[name]}")
                self.blobs[name][...] = value
                blobs[name] = self.blobs[name]
        return blobs

    def backward(self, run, blobs) -> None:
        """Gradients of the sum of the losses into the packed gradient buffer."""
        self.grads.buffer[...] = 0
        diffs = {blobs_name: None for blobs_name in blobs}
        for node in self.losses:
            diffs[node.tops[0]] = np.ones((), DTYPE)
        for node in reversed(self.nodes):
            if node.layer.param.type in ("Data", "Accuracy"):
                continue
            top_diffs = [diffs[t] for t in node.tops]
            if all(d is None for d in top_diffs):
                continue
            bottom_diffs = node.layer.backward(
                run, top_diffs, [blobs[b] for b in node.bottoms], [blobs[t] for t in node.tops],
                [self.params[p] for p in node.params], [self.grads[p] for p in node.params])
            for name, diff in zip(node.bottoms, bottom_diffs):
                if diff is None:
                    continue
                if diffs[name] is None:
                    diffs[name] = diff
                else:       # a blob read by two layers (a residual branch): gradients add
                    diffs[name] = run.op(node.layer, "add", diffs[name], diff)

    def loss(self, blobs) -> float:
        return float(sum(float(blobs[n.tops[0]]) for n in self.losses))

    def nan_layer(self, blobs):
        """The first layer (in forward order) one of whose tops holds a NaN, or None."""
        for node in self.nodes:
            for top in node.tops:
                if np.isnan(np.asarray(blobs[top], np.float64)).any():
                    return node.layer.name
        return None
