"""The Net: a static graph built once from a NetParameter (bottoms -> tops), shapes inferred
layer by layer, then the passes of thesis §7.1 before the first step: which blobs need a
gradient, operator selection per layer (kept for every iteration), layout planning with
transforms inserted only where a blob or a gradient reaches a layer in another layout, and
128-byte aligned packed buffers for the parameters, the gradients (ONE contiguous buffer) and
the blobs. A step's forward/backward takes one batch, so the 4-CG data parallelism of
Algorithm 9 runs it per core group on a slice of the batch (``slices``: the blobs are planned
for batch_size / slices samples)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ...errors import SwsimError
from ...vm.config import VMConfig
from .. import dnn
from ..blas import gemm
from .common import DTYPE, TrainError, digest
from .data import Dataset
from .layers import KINDS, LOSSES, missing_operators
from .layout_plan import CANONICAL, physical, transform_if_needed
from .memory import Arena
from .prototxt import NetParameter, parse_net

PHASES = ("TRAIN", "TEST")


@dataclass
class Run:
    """One step on one core group: every operator call goes through ``op``/``gemm``, which
    pass the Machine and add the simulated seconds to the layer's account."""
    machine: object
    seconds: dict = field(default_factory=lambda: defaultdict(float))
    backward: list = field(default_factory=list)   # (layer, seconds) in backward order

    def op(self, layer, name, *args, **kwargs):
        return self.op_with_stats(layer, name, *args, **kwargs)[0]

    def op_with_stats(self, layer, name, *args, **kwargs):
        """``op`` that also returns the operator's Stats (what a backward needs from them)."""
        return self._call(layer, name, getattr(dnn, name), *args, **kwargs)

    def gemm(self, layer, a, b, **kwargs):
        return self._call(layer, "gemm", gemm, a, b, **kwargs)[0]

    def transform(self, layer, row, array, src, dst):
        """A layout transform the layout pass inserted for ``layer``: its seconds go to its
        own ``row``."""
        return self._call(layer, "transform", dnn.transform, array, src, dst, row=row)[0]

    def _call(self, layer, name, operator, *args, row=None, **kwargs):
        """Run an operator on this CG and account its seconds to the layer (or ``row``); what
        it refuses (a shape its kernel cannot take, a buffer that does not fit in LDM) becomes
        an error naming the layer."""
        try:
            result, stats = operator(*args, machine=self.machine, **kwargs)
        except TrainError:
            raise
        except SwsimError as exc:
            raise layer.error("operator", f"{name}: {exc}") from None
        self.seconds[row or layer.name] += stats.seconds
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
    """A layer in the graph: its blobs by version (in-place tops get a new version), and what
    the layout pass planned around it."""

    def __init__(self, layer, bottoms, tops):
        self.layer, self.bottoms, self.tops = layer, bottoms, tops
        self.params = []           # names in the parameter / gradient arenas
        self.state = []            # names in the state arena
        self.inputs = list(bottoms)      # the versions its forward reads (maybe transformed)
        self.transforms = []       # (source, target, Transform) run before its forward
        self.diff_transforms = []  # per top: Transform of its gradient before the backward
        self.merges = []           # per bottom: None (no gradient) or (Transform, accumulate)


class Net:
    """A network from its NetParameter (or prototxt) for one phase, its layers' operators
    chosen for a machine."""

    def __init__(self, spec, phase: str = "TRAIN", *, seed: int = 0, slices: int = 1,
                 machine=None, config=None):
        """Operators are chosen for `machine`'s configuration (as the operators take it), or
        for `config` (a VMConfig; default the "sw26010" preset)."""
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
        self.losses = [n for n in self.nodes if n.layer.param.type in LOSSES]
        self.layouts = {}                           # blob version -> its stored layout
        self.choices = {}
        if machine is not None:
            if config is not None:
                raise TrainError("machine, config: give one of them (a machine has its config)")
            config = machine.config
        config = config or VMConfig.preset("sw26010")
        arenas = (self.params, self.grads, self.blobs, self.state)
        if sum(arena.nbytes for arena in arenas) > config.mem_limit:
            raise TrainError(f"net {self.spec.name!r}: its parameters, gradients and blobs take "
                             f"{sum(arena.nbytes for arena in arenas)} bytes, more than the "
                             f"{config.mem_limit} bytes of a core group's main memory "
                             f"(config.mem_limit)")
        self.select_operators(config)
        self._plan_forward_layouts()
        self._plan_backward_layouts()
        for arena in arenas:
            arena.build()
        rng = np.random.default_rng(seed)
        for node in self.nodes:
            if node.params:
                for name, value in zip(node.params, node.layer.init(rng)):
                    self.params[name][...] = value
            node.layer.state = [self.state[name] for name in node.state]
            for view, value in zip(node.layer.state, node.layer.init_state()):
                view[...] = value

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
        if p.batch_size > len(dataset):
            raise layer.error("data_param.batch_size", f"{p.batch_size} is more than the "
                              f"{len(dataset)} samples of {p.source!r} ({self.phase})")
        self.datasets[layer.name] = dataset
        tops = len(layer.param.top)
        if tops not in (2, 3):
            raise layer.error("top", f"a Data layer has 2 tops (data, label) or 3 (data, "
                              f"label, cont), got {tops}")
        if tops == 3 and dataset.cont is None:
            raise layer.error("top", f"a third top (cont) needs a 'cont' (N, T) array in "
                              f"{p.source!r}")
        per_slice = p.batch_size // slices          # what one core group's pass sees
        shapes = [(per_slice,) + dataset.sample_shape, (per_slice,)]
        return shapes + ([(per_slice, dataset.cont.shape[1])] if tops == 3 else [])

    def data_source(self):
        """(the Data layer's Dataset, its batch_size): what the solver's Order draws from."""
        data = self.data_layer
        return self.datasets[data.layer.name], data.layer.param.data_param.batch_size

    def fingerprint(self) -> str:
        """A digest of the net's definition (checkpoint identity)."""
        return digest(self.spec)

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
        performance models and kept for every iteration. First, which bottoms need a gradient
        (those below a layer with parameters; Caffe's propagate_down), so that no operator
        computes one nobody reads (the data's)."""
        needs = {}                       # blob version -> does any update depend on its diff
        for node in self.nodes:
            node.layer.propagate = [needs.get(b, False) for b in node.bottoms]
            below = bool(node.params) or any(node.layer.propagate)
            for top in node.tops:
                needs[top] = below
        self.choices = {n.layer.name: n.layer.choose([self.shapes[b] for b in n.bottoms],
                                                     config) for n in self.nodes}
        self.config = config

    def _plan_forward_layouts(self) -> None:
        """Each layer's layout (its operator's; a layout-free layer's bottom's), and a
        Transform on every edge whose two ends differ, made once per (blob, layout) and kept
        in the blob arena as a version of its own."""
        versions = {}                    # (blob version, layout) -> the version in that layout
        for node in self.nodes:
            layer = node.layer
            layer.plan_forward([self.layouts[b] for b in node.bottoms], node.bottoms,
                               node.tops)
            for i, bottom in enumerate(node.bottoms):
                transform = transform_if_needed(bottom, self.shapes[bottom],
                                                self.layouts[bottom], layer.layout, "forward")
                if transform is None:
                    continue
                key = (bottom, layer.layout)
                if key not in versions:
                    versions[key] = f"{bottom}:{layer.layout}"
                    self.shapes[versions[key]] = self.shapes[bottom]
                    self._add_blob(versions[key], self.shapes[bottom], layer.layout)
                    node.transforms.append((bottom, versions[key], transform))
                node.inputs[i] = versions[key]
            for top in node.tops:
                self._add_blob(top, self.shapes[top], layer.layout)

    def _add_blob(self, version, shape, layout):
        self.layouts[version] = layout if len(shape) == 4 else CANONICAL
        self.blobs.add(version, physical(shape, self.layouts[version]))

    def _plan_backward_layouts(self) -> None:
        """Walks the backward as it will run: a top gradient reaching a layer in another
        layout than the one it wants is transformed first; a bottom gradient added to an
        earlier one (a blob read by two layers) is transformed to that one's layout."""
        arrived = {node.tops[0]: CANONICAL for node in self.losses}   # diff -> its layout
        produced_by_now = set(arrived)
        self.backward_nodes = []
        for node in reversed(self.nodes):
            layer = node.layer
            if layer.param.type in ("Data", "Accuracy") or \
                    not any(t in arrived for t in node.tops):
                continue
            layer.plan_backward(arrived[node.tops[0]], self.config)
            node.diff_transforms = [
                None if t not in arrived else transform_if_needed(
                    f"d({t})", self.shapes[t], arrived[t], layer.diff_layout, "backward")
                for t in node.tops]
            produced = layer.grad_layout
            node.merges = []
            for bottom, needed in zip(node.bottoms, layer.propagate):
                if not needed:
                    node.merges.append(None)
                    continue
                layout = produced if len(self.shapes[bottom]) == 4 else CANONICAL
                earlier = arrived.setdefault(bottom, layout)
                node.merges.append((transform_if_needed(
                    f"d({bottom})", self.shapes[bottom], layout, earlier, "backward"),
                    bottom in produced_by_now))
                produced_by_now.add(bottom)
            self.backward_nodes.append(node)

    def transforms(self) -> list:
        """Every Transform the layout pass inserted, in the order a step runs them: those of
        the forward, then those of the backward (the gradients' and the ones layers run
        themselves)."""
        forward = [t for node in self.nodes for _, _, t in node.transforms]
        backward = []
        for node in self.backward_nodes:
            backward += [t for t in node.diff_transforms if t] + node.layer.transforms
            backward += [merge[0] for merge in node.merges if merge and merge[0]]
        return forward + backward

    def explain(self) -> list:
        """One row per layer (name, type, top shapes, operator, layout, predicted seconds),
        each forward transform before the layer it feeds, the backward's transforms after."""
        rows = []
        for node in self.nodes:
            for _, _, transform in node.transforms:
                rows.append(self._transform_row(transform))
            choice = self.choices[node.layer.name]._asdict()
            if any(len(self.shapes[b]) == 4 for b in node.bottoms + node.tops):
                choice["layout"] = _layouts(node.layer)
            rows.append(dict(layer=node.layer.name, type=node.layer.param.type,
                             shapes=[self.shapes[t] for t in node.tops],
                             params=int(sum(self.params[p].size for p in node.params)),
                             **choice))
        forward = {id(t) for node in self.nodes for _, _, t in node.transforms}
        rows += [self._transform_row(t) for t in self.transforms() if id(t) not in forward]
        return rows

    def _transform_row(self, transform) -> dict:
        return dict(layer=transform.row, type="Transform", shapes=[transform.shape], params=0,
                    operator=f"transform ({transform.direction})",
                    layout=f"{transform.src}>{transform.dst}",
                    predicted_seconds=transform.predicted_seconds(self.config))

    def forward(self, run, batch) -> dict:
        """All blobs of one forward pass on ``batch`` = the Data layer's tops (data, label[,
        cont])."""
        blobs = {}
        for node in self.nodes:
            for source, target, transform in node.transforms:
                self.blobs[target][...] = transform(run, node.layer, blobs[source])
                blobs[target] = self.blobs[target]
            if node.layer.param.type == "Data":
                tops = batch
            else:
                tops = node.layer.forward(run, [blobs[b] for b in node.inputs],
                                          [self.params[p] for p in node.params])
            for name, value in zip(node.tops, tops):
                planned = physical(self.shapes[name], self.layouts[name])
                if np.shape(value) != planned:
                    raise node.layer.error("top", f"produced {np.shape(value)}, the graph "
                                           f"planned {planned}")
                self.blobs[name][...] = value
                blobs[name] = self.blobs[name]
        return blobs

    def backward(self, run, blobs) -> None:
        """Gradients of the sum of the losses into the packed gradient buffer, in the order and
        layouts the layout pass planned."""
        self.grads.buffer[...] = 0
        diffs = {node.tops[0]: np.ones((), DTYPE) for node in self.losses}
        for node in self.backward_nodes:
            layer = node.layer
            started = sum(run.seconds.values())
            top_diffs = [diffs.get(t) if transform is None else transform(run, layer, diffs[t])
                         for t, transform in zip(node.tops, node.diff_transforms)]
            bottom_diffs = layer.backward(
                run, top_diffs, [blobs[b] for b in node.inputs], [blobs[t] for t in node.tops],
                [self.params[p] for p in node.params], [self.grads[p] for p in node.params])
            for name, diff, merge in zip(node.bottoms, bottom_diffs, node.merges):
                if merge is None:
                    continue
                transform, accumulate = merge
                if transform is not None:
                    diff = transform(run, layer, diff)
                # a blob read by two layers (a residual branch): gradients add
                diffs[name] = run.op(layer, "add", diffs[name], diff) if accumulate else diff
            run.backward.append((layer.name, sum(run.seconds.values()) - started))

    def loss(self, blobs) -> float:
        return float(sum(float(blobs[n.tops[0]]) for n in self.losses))

    def nan_layer(self, blobs):
        """The first layer (in forward order) one of whose tops holds a NaN, or None."""
        for node in self.nodes:
            for top in node.tops:
                if np.isnan(np.asarray(blobs[top], np.float64)).any():
                    return node.layer.name
        return None


def _layouts(layer) -> str:
    """A layer's planned layouts: the forward's, and the backward's where it differs."""
    backward = {layer.diff_layout, layer.grad_layout}
    if backward <= {layer.layout}:
        return layer.layout
    return f"{layer.layout}, backward {'/'.join(sorted(backward))}"
