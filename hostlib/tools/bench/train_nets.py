"""`swsim bench train`: chip-level training throughput (img/s) of AlexNet, VGG-16 and
ResNet-50 (thesis Table 7.2) and its per-layer-class breakdown (Fig. 7.6), estimated from
per-layer SAMPLED simulation: whole layers at ImageNet sizes cannot be simulated here.

One iteration on the chip (Algorithm 9): the minibatch is split over the 4 core groups; each
CG runs forward and backward of its B/4 images (every CG alike, so one CG is estimated), then
the CGs average their gradients through memory (CGS - 1 `dnn.add` over the parameters, each
spread over the 4 CGs) and one `sgd_update` over the parameters on the 4 CGs. img/s = B /
(per-CG forward + backward + reduction + update).

Where each number comes from (printed with the table, docs/train.md "Benchmark: bench train"):
- convolution passes (forward, backward-data, backward-filter): the `estimate()` (a simulated
  sample, extrapolated) of every algorithm module whose `supports()` accepts the pass, the
  fastest kept — "sampled". A pass no module with an estimate supports is the swGEMM model's
  prediction of the explicit-GEMM GEMM (im2col/col2im not counted) — "model".
- fully connected layers: the swGEMM model's prediction of their three GEMMs — "model".
- memory-bound layers (ReLU, pooling, batch normalisation, Eltwise sum, softmax with cross
  entropy), the layout transforms, the gradient reduction and the update: `bench ops`' cases
  at this network's per-CG shapes, simulated on SAMPLE_ROUNDS rounds and extrapolated
  (`ops.sampled`) — "sampled".
- not counted: LRN and dropout (no operator), convolution bias (forward add and backward sum),
  data loading (prefetched by the I/O thread), the host.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ....errors import ArgumentError
from ....vm import HostError, Machine
from ....vm.config import PRESETS, VMConfig
from ...blas import gemm_model
from ...dnn import conv
from ...dnn.conv.common import ConvGeometry
from ...train import layers as train_layers
from . import ops

CGS = 4
DTYPE = np.float32
NCHW = "NCHW"
PASSES = ("forward", "backward_data", "backward_filter")
CLASSES = ("conv", "FC", "memory-bound", "layout transforms", "reduce + update")


# ---- the networks -------------------------------------------------------------------------

@dataclass(frozen=True)
class Conv:
    name: str
    n_i: int
    n_o: int
    size: int              # input rows = columns
    k: int
    stride: int = 1
    pad: int = 0
    groups: int = 1        # AlexNet's grouped convolutions: `groups` independent convolutions
    first: bool = False    # the data layer's consumer: no backward-data pass

    @property
    def out(self):
        return (self.size + 2 * self.pad - self.k) // self.stride + 1

    @property
    def params(self):
        return self.n_o * self.n_i // self.groups * self.k * self.k + self.n_o

    def geometry(self, batch):
        g = self.groups
        return ConvGeometry(batch, self.n_i // g, self.n_o // g, self.size, self.size, self.k,
                            self.k, (self.stride,) * 2, (self.pad,) * 2)


@dataclass(frozen=True)
class FC:
    name: str
    n_i: int
    n_o: int

    @property
    def params(self):
        return self.n_o * self.n_i + self.n_o


@dataclass(frozen=True)
class Pool:
    name: str
    channels: int
    size: int
    k: int
    stride: int
    pad: int = 0
    mode: str = "max"


@dataclass(frozen=True)
class Stream:
    """An element-wise layer over `channels` x size x size per image: "relu" or "add" (Eltwise
    sum; its backward is the sum of the two gradients reaching the block input)."""
    name: str
    kind: str
    channels: int
    size: int


@dataclass(frozen=True)
class BN:
    """BatchNorm + Scale (the batchnorm operator applies γ and β)."""
    name: str
    channels: int
    size: int


@dataclass(frozen=True)
class Softmax:
    name: str
    classes: int


def _alexnet():      # Caffe's bvlc_alexnet (227 input); LRN and dropout not counted
    return [Conv("conv1", 3, 96, 227, 11, 4, first=True), Stream("relu1", "relu", 96, 55),
            Pool("pool1", 96, 55, 3, 2), Conv("conv2", 96, 256, 27, 5, pad=2, groups=2),
            Stream("relu2", "relu", 256, 27), Pool("pool2", 256, 27, 3, 2),
            Conv("conv3", 256, 384, 13, 3, pad=1), Stream("relu3", "relu", 384, 13),
            Conv("conv4", 384, 384, 13, 3, pad=1, groups=2), Stream("relu4", "relu", 384, 13),
            Conv("conv5", 384, 256, 13, 3, pad=1, groups=2), Stream("relu5", "relu", 256, 13),
            Pool("pool5", 256, 13, 3, 2), FC("fc6", 9216, 4096), Stream("relu6", "relu", 4096, 1),
            FC("fc7", 4096, 4096), Stream("relu7", "relu", 4096, 1), FC("fc8", 4096, 1000),
            Softmax("loss", 1000)]


def _vgg16():
    layers, n_i, size = [], 3, 224
    for stage, (width, convs) in enumerate(((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)), 1):
        for i in range(1, convs + 1):
            layers += [Conv(f"conv{stage}_{i}", n_i, width, size, 3, pad=1, first=n_i == 3),
                       Stream(f"relu{stage}_{i}", "relu", width, size)]
            n_i = width
        layers.append(Pool(f"pool{stage}", width, size, 2, 2))
        size //= 2
    return layers + [FC("fc6", 512 * 7 * 7, 4096), Stream("relu6", "relu", 4096, 1),
                     FC("fc7", 4096, 4096), Stream("relu7", "relu", 4096, 1),
                     FC("fc8", 4096, 1000), Softmax("loss", 1000)]


def _resnet50():     # Caffe's ResNet-50: stride 2 in the first 1x1 of a stage's first block
    layers = [Conv("conv1", 3, 64, 224, 7, 2, 3, first=True), BN("bn_conv1", 64, 112),
              Stream("conv1_relu", "relu", 64, 112), Pool("pool1", 64, 112, 3, 2, 1)]
    n_i, size = 64, 56
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), 2):
        for b in range(blocks):
            name, stride = f"res{stage}{'abcdef'[b]}", 2 if b == 0 and stage > 2 else 1
            out = size // stride
            if b == 0:
                layers += [Conv(name + "_branch1", n_i, 4 * width, size, 1, stride),
                           BN(name + "_bn1", 4 * width, out)]
            layers += [Conv(name + "_branch2a", n_i, width, size, 1, stride),
                       BN(name + "_bn2a", width, out), Stream(name + "_relu2a", "relu", width, out),
                       Conv(name + "_branch2b", width, width, out, 3, pad=1),
                       BN(name + "_bn2b", width, out), Stream(name + "_relu2b", "relu", width, out),
                       Conv(name + "_branch2c", width, 4 * width, out, 1),
                       BN(name + "_bn2c", 4 * width, out),
                       Stream(name, "add", 4 * width, out),
                       Stream(name + "_relu", "relu", 4 * width, out)]
            n_i, size = 4 * width, out
    return layers + [Pool("pool5", 2048, 7, 7, 1, mode="avg"), FC("fc1000", 2048, 1000),
                     Softmax("loss", 1000)]


@dataclass(frozen=True)
class Network:
    name: str
    batch: int              # the thesis' minibatch per node (Table 7.2)
    thesis_img_s: float     # Table 7.2, SW26010
    thesis_conv_share: str  # Fig. 7.6 as the text gives it (§7.3)
    layers: tuple
    thesis_conv_fraction: float = None    # that share as a number ("< 60 %": its bound)

    @property
    def params(self):
        return sum(getattr(layer, "params", 0) for layer in self.layers) + sum(
            2 * layer.channels for layer in self.layers if isinstance(layer, BN))


NETWORKS = {
    "alexnet": Network("AlexNet", 256, 94.17, "~75 %", tuple(_alexnet()), 0.75),
    "vgg16": Network("VGG-16", 64, 9.93, "~75 %", tuple(_vgg16()), 0.75),
    "resnet50": Network("ResNet-50", 64, 14.28, "< 60 %", tuple(_resnet50()), 0.60),
}
THESIS_TRANS_SHARE = "< 10 %"     # Fig. 7.6: "Trans" below 10 % for all three


# ---- costs ----------------------------------------------------------------------------------

@dataclass
class Cost:
    """One pass of one layer: seconds on one CG, its class, how it was obtained."""
    layer: str
    what: str
    klass: str
    seconds: float
    source: str            # "sampled" or "model"
    note: str = ""


@functools.cache
def fingerprint() -> str:
    """A digest of this package's sources (Python, assembly, the C core) and the default
    preset: what an estimate depends on."""
    digest = hashlib.sha256(repr(Machine().config).encode())
    root = Path(__file__).resolve().parents[3]
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".s", ".c", ".h")
                       and not any(part.startswith(".") or part == "tests"
                                   for part in p.relative_to(root).parts)):
        digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


class EstimateCache(dict):
    """An Estimator's cache kept in the file `path` (a pickle) after every new estimate, so an
    interrupted run resumes where it stopped. The file carries fingerprint(): a cache of other
    sources or another default preset is not read (and is overwritten); a file that is not such
    a cache is refused, never overwritten."""

    def __init__(self, path):
        super().__init__()
        self.path = Path(path)
        self.fingerprint = fingerprint()
        if self.path.exists():
            stored = self._read()
            if stored["fingerprint"] == self.fingerprint:
                self.update(stored["estimates"])

    def _read(self) -> dict:
        try:
            with open(self.path, "rb") as handle:
                stored = pickle.load(handle)
        except Exception as exc:        # OSError, or any of the many errors of a bad pickle
            raise ArgumentError(f"cache {self.path}: not an estimate cache this command wrote "
                                f"({type(exc).__name__}: {exc})") from None
        if not (isinstance(stored, dict) and isinstance(stored.get("estimates"), dict)
                and "fingerprint" in stored):
            raise ArgumentError(f"cache {self.path}: not an estimate cache this command wrote")
        return stored

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        partial = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        with open(partial, "wb") as handle:
            pickle.dump({"fingerprint": self.fingerprint, "estimates": dict(self)}, handle)
        os.replace(partial, self.path)


class Estimator:
    """Layer costs on one CG, cached by shape (ResNet repeats its blocks). `quick`: a conv
    pass samples only the algorithm ``algo="auto"`` runs (``conv.choose``: the smallest
    ``predict``) instead of every supported one, so its time is at least the full mode's."""

    def __init__(self, engine="c", machine=None, progress=None, cache=None, quick=False):
        self.machine = machine or Machine()
        self.config = self.machine.config
        self.engine = engine
        self.progress = progress
        self.quick = quick
        self.cache = {} if cache is None else cache    # shared: estimators of one machine

    def _cached(self, key, compute):
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    def _seconds(self, cycles):
        return cycles / self.config.clock_hz

    # memory-bound: bench ops' cases, sampled and extrapolated; cached by shape, not by name
    # (a case's name only labels its messages): ResNet-50's blocks repeat a few shapes
    def stream(self, case):
        def compute():
            rng = np.random.default_rng(0)
            per_round = case.round_size(self.config)
            if per_round is not None and case.full <= ops.SAMPLE_ROUNDS[1] * per_round:
                return self._seconds(case.run(case.full, self.engine, rng, self.machine).cycles)
            predict, stats = ops.sampled(case, self.engine, rng, self.config, self.machine)
            return self._seconds(stats.cycles if predict is None else predict(case.full))
        return self._cached(replace(case, name=""), compute)

    def gemm(self, m, n, k, **layout):
        problem = gemm_model.Problem(m=m, n=n, k=k, itemsize=np.dtype(DTYPE).itemsize, **layout)
        return self._seconds(gemm_model.predict(problem, gemm_model.choose(problem, self.config),
                                                self.config))

    def conv(self, geo: ConvGeometry, direction):
        """(seconds, algorithm, layout, source) of the best supported algorithm's estimate."""
        return self._cached((geo, direction, self.quick), lambda: self._conv(geo, direction))

    def _candidates(self, geo, direction):
        """The algorithm modules whose estimate is sampled for the pass."""
        if self.quick:
            try:
                return [conv.choose(geo, direction, DTYPE, self.config)]
            except HostError:
                return []
        return [module for module in conv_modules()
                if module.supports(geo, direction, DTYPE, self.config) is None]

    def _conv(self, geo, direction):
        best = None
        for module in self._candidates(geo, direction):
            cycles, _ = module.estimate(geo, direction, DTYPE, self.machine, self.engine)
            if best is None or cycles < best[0]:
                best = (cycles, module.NAME, module.LAYOUT, "sampled")
        if best is None:
            return (self.explicit_gemm(geo, direction), "explicit GEMM (model, no im2col)",
                    NCHW, "model")
        return (self._seconds(best[0]),) + best[1:]

    def explicit_gemm(self, geo, direction):
        """The GEMM of explicit convolution (thesis §5.2.1): col (B R_o C_o x N_i K_r K_c)."""
        rows, inner = geo.batch * geo.r_o * geo.c_o, geo.n_i * geo.k_r * geo.k_c
        if direction == "forward":               # y = col wᵀ
            return self.gemm(rows, geo.n_o, inner, b_transposed=True)
        if direction == "backward_data":         # dcol = dy w
            return self.gemm(rows, inner, geo.n_o)
        return self.gemm(geo.n_o, inner, rows, a_transposed=True)    # dw = dyᵀ col


class ThesisEstimator(Estimator):
    """An Estimator whose convolution passes run at the thesis' efficiencies with swCaffe's
    per-layer algorithm choice (thesis_conv) instead of swsim's kernels; the other layers as
    Estimator (simulated or the swGEMM model). Its convolutions are not cached, so it may share
    an Estimator's cache of the same machine."""

    def conv(self, geo, direction):
        algo, efficiency = thesis_conv(geo)
        peak = self.config.flops_per_cycle * self.config.num_cpes * self.config.clock_hz
        return (geo.flops / (efficiency * peak), f"{algo} at the thesis' "
                f"{100 * efficiency:.0f} %", conv.ALGORITHMS[algo].LAYOUT, "thesis")


# swCaffe keeps the fastest of explicit GEMM, implicit GEMM and Winograd per layer (thesis
# §7.1); their mean efficiencies over thesis Listing 5.1's layers at B = 32/128 (§5.4, Figs.
# 5.12/5.13): explicit "< 30 %" (its bound taken), implicit ~57 %, Winograd "slightly > 60 %".
# The thesis gives one figure per algorithm, not per pass: every pass is taken at it.
THESIS_EFFICIENCY = {"explicit": 0.30, "implicit": 0.57, "winograd": 0.60}
THESIS_MIN_CHANNELS = 64      # implicit GEMM needs >= 64 channels (§7.1; Winograd: the same
#                               batched GEMMs, poor for small N_i / N_o, §5.4)


def thesis_conv(geo: ConvGeometry):
    """(algorithm, efficiency): swCaffe's choice for a convolution of `geo` by the thesis."""
    candidates = ["explicit"]
    if min(geo.n_i, geo.n_o) >= THESIS_MIN_CHANNELS:
        candidates.append("implicit")
        if (geo.k_r, geo.k_c) == (3, 3) and tuple(geo.stride) == (1, 1):
            candidates.append("winograd")
    best = max(candidates, key=THESIS_EFFICIENCY.get)
    return best, THESIS_EFFICIENCY[best]


def conv_modules():
    """The convolution algorithms (every one has the module interface of ``conv``)."""
    return list(conv.ALGORITHMS.values())


def _conv_costs(layer: Conv, batch, est: Estimator):
    costs, layouts = [], {}
    geo = layer.geometry(batch)
    for direction in PASSES:
        if direction == "backward_data" and layer.first:
            continue
        seconds, algo, layout, source = est.conv(geo, direction)
        layouts[direction] = layout
        groups = f" x {layer.groups} groups" if layer.groups > 1 else ""
        costs.append(Cost(layer.name, direction, "conv", layer.groups * seconds, source,
                          algo + groups))
    return costs, layouts


def _transform(layer_name, what, layout, shape, est):
    case = ops.TransformCase(f"{layer_name} {what}", layout, shape)
    return Cost(layer_name, f"transform {what} NCHW<->{layout}", "layout transforms",
                est.stream(case), "sampled")


def _tensors(layer, batch):
    """x and y (NCHW shapes) of a layer in the layout chain: a conv, BN or pooling."""
    if isinstance(layer, Conv):
        return (batch, layer.n_i, layer.size, layer.size), (batch, layer.n_o, layer.out,
                                                             layer.out)
    out = layer.size if isinstance(layer, BN) else \
        (layer.size + 2 * layer.pad - layer.k) // layer.stride + 1
    return (batch, layer.channels, layer.size, layer.size), (batch, layer.channels, out, out)


def _conv_transforms(chain, batch, est):
    """Layout transforms around the convolutions (thesis §7.1): a tensor a pass takes or gives
    in a layout other than its neighbour's is transformed (one pass over it; the reverse
    direction costed as NCHW -> layout). Neighbours: the adjacent layer of the chain (a
    convolution, or a BN or pooling layer, which runs every pass in one layout: its bottom's
    where its operators take it, else NCHW) through element-wise layers (which take any
    layout), else an NCHW layer. backward-filter reuses forward's x and backward-data's dy
    when they share its layout; the first conv takes its dy in backward-filter's layout."""
    costs = []
    for layer, layouts, prev, nxt in chain:
        x, y = _tensors(layer, batch)

        def neighbour(other, direction):
            if other and direction not in other[1]:     # the first conv: no backward-data,
                direction = "backward_filter"           # its backward-filter takes dy
            return other[1].get(direction, NCHW) if other else NCHW

        def need(direction, tensor, shape, other):
            layout = layouts.get(direction)
            if layout and layout != NCHW and neighbour(other, direction) != layout:
                costs.append(_transform(layer.name, f"{direction} {tensor}", layout, shape, est))

        need("forward", "x", x, prev)
        need("forward", "y", y, nxt)
        need("backward_data", "dy", y, nxt)
        need("backward_data", "dx", x, prev)
        wl = layouts["backward_filter"]
        arriving = neighbour(nxt, "backward_data")
        if wl not in (NCHW, layouts["forward"], neighbour(prev, "forward")):
            costs.append(_transform(layer.name, "backward_filter x", wl, x, est))
        if wl not in (NCHW, layouts.get("backward_data", arriving), arriving):
            costs.append(_transform(layer.name, "backward_filter dy", wl, y, est))
    return costs


LAYOUT_FREE = (Stream,)       # element-wise: any layout (ReLU; Eltwise sums two like maps)


def native_layouts(layer) -> tuple:
    """The layouts a BN or pooling layer takes its bottom in: the training stack's BatchNorm
    (and Scale) or Pooling layer's."""
    return (train_layers.BatchNorm if isinstance(layer, BN) else train_layers.Pooling).layouts


def layer_costs(network: Network, batch: int, est: Estimator) -> list:
    """Every pass of every layer of `network` at `batch` images per CG, on one CG."""
    costs, chain = [], []
    last, gap = None, False       # the chain's previous layer, and whether an NCHW layer follows it
    for layer in network.layers:
        if est.progress:
            est.progress(f"{network.name}: {layer.name}")
        if isinstance(layer, Conv):
            layer_costs_, layouts = _conv_costs(layer, batch, est)
            costs += layer_costs_
        elif isinstance(layer, (BN, Pool)):
            bottom = last[1]["forward"] if last is not None and not gap else NCHW
            layout = bottom if bottom in native_layouts(layer) else NCHW
            layouts = dict.fromkeys(PASSES, layout)
            costs += _other_costs(layer, batch, est, layout)
        else:
            if not isinstance(layer, LAYOUT_FREE):
                gap = True
            costs += _other_costs(layer, batch, est)
            continue
        entry = [layer, layouts, None if gap else last, None]
        if last is not None and not gap:
            last[3] = entry
        chain.append(entry)
        last, gap = entry, False
    return costs + _conv_transforms(chain, batch, est)


def _other_costs(layer, batch, est, layout=NCHW):
    name = layer.name
    if isinstance(layer, FC):
        i, o = layer.n_i, layer.n_o
        return [Cost(name, "forward", "FC", est.gemm(batch, o, i, b_transposed=True), "model"),
                Cost(name, "backward", "FC", est.gemm(batch, i, o)
                     + est.gemm(o, i, batch, a_transposed=True), "model")]
    if isinstance(layer, Pool):
        case = ops.PoolCase(name, batch * layer.channels, layer.size, layer.size, layer.k,
                            layer.stride, layer.pad, layer.mode)
        return [Cost(name, "forward", "memory-bound", est.stream(case), "sampled"),
                Cost(name, "backward", "memory-bound", est.stream(replace(case, backward=True)),
                     "sampled")]
    if isinstance(layer, Stream):
        n = batch * layer.channels * layer.size ** 2
        forward, backward = ("relu", "relu_backward") if layer.kind == "relu" else ("axpby",) * 2
        return [Cost(name, what, "memory-bound", est.stream(ops.Case(name, body, n)), "sampled")
                for what, body in (("forward", forward), ("backward", backward))]
    if isinstance(layer, BN):
        shape = (batch, layer.channels, layer.size, layer.size)
        return [Cost(name, what, "memory-bound",
                     est.stream(ops.BatchNormCase(name, shape, mode, layout=layout)),
                     "sampled")
                for what, mode in (("forward", "train"), ("backward", "backward"))]
    if isinstance(layer, Softmax):
        return [Cost(name, "forward + backward", "memory-bound",
                     est.stream(ops.SoftmaxCase(name, batch, layer.classes)), "sampled")]
    raise TypeError(f"unknown layer {layer!r}")


def chip_costs(network: Network, est: Estimator) -> list:
    """The per-chip step: the CGs' gradient mean (CGS - 1 adds, each over the 4 CGs) and one
    update over the 4 CGs, each CG's share sampled as one CG's run on a quarter."""
    share = -(-network.params // CGS)
    add = est.stream(ops.Case("gradient reduction", "axpby", share))
    update = est.stream(ops.Case("sgd_update", "sgd", share))
    return [Cost("(chip)", f"gradient mean over {CGS} CGs", "reduce + update",
                 (CGS - 1) * add, "sampled"),
            Cost("(chip)", "sgd_update", "reduce + update", update, "sampled")]


@dataclass
class Result:
    network: Network
    batch: int                  # per CG
    costs: list = field(default_factory=list)
    quick: bool = False         # the Estimator's quick mode (conv: the auto pick alone)

    @property
    def seconds(self):
        return sum(c.seconds for c in self.costs)

    @property
    def img_s(self):
        return self.network.batch / self.seconds

    def share(self, klass):
        return sum(c.seconds for c in self.costs if c.klass == klass) / self.seconds


def estimate(network: Network, est: Estimator) -> Result:
    if network.batch % CGS:
        raise ValueError(f"{network.name}: batch {network.batch} does not divide over {CGS} CGs")
    batch = network.batch // CGS
    return Result(network, batch, layer_costs(network, batch, est) + chip_costs(network, est),
                  est.quick)


QUICK_NETWORKS = ("alexnet",)
QUICK_NOTE = "; quick: each conv pass samples only algo=\"auto\"'s pick"


def run(networks=tuple(NETWORKS), engine="c", progress=None, quick=False, cache=None):
    est = Estimator(engine, progress=progress, quick=quick, cache=cache)
    return [estimate(NETWORKS[name], est) for name in networks]


def format_report(results, detail=False) -> str:
    lines = []
    for r in results:
        net = r.network
        lines.append(f"{net.name}: batch {net.batch} = {CGS} CGs x {r.batch}, "
                     f"{net.params / 1e6:.1f} M parameters" + QUICK_NOTE * r.quick)
        if detail:
            for c in r.costs:
                lines.append(f"  {c.layer:22s} {c.what:34s} {c.klass:18s} "
                             f"{c.seconds * 1e3:9.3f} ms  {c.source:7s} {c.note}")
        for klass in CLASSES:
            thesis = {"conv": net.thesis_conv_share,
                      "layout transforms": THESIS_TRANS_SHARE}.get(klass, "-")
            model = sum(c.seconds for c in r.costs if c.klass == klass and c.source == "model")
            lines.append(f"  {klass:18s} {100 * r.share(klass):5.1f} %   thesis {thesis:7s}"
                         + (f"  (of which model: {100 * model / r.seconds:.1f} %)"
                            if model else ""))
        lines.append(f"  iteration {r.seconds * 1e3:.1f} ms simulated -> {r.img_s:.2f} img/s"
                     f"   thesis Table 7.2: {net.thesis_img_s} img/s "
                     f"(ratio {r.img_s / net.thesis_img_s:.2f})")
        lines.append("")
    lines += ["sampled: simulated on the VM on a sample and extrapolated (conv: the "
              "algorithms' estimate(); memory-bound, transforms, reduction, update: bench ops' "
              "cases); model: swGEMM's performance model (FC; conv passes no algorithm with an "
              "estimate supports: the explicit GEMM without im2col).",
              "not counted: LRN, dropout, conv bias, data loading, host time; the 4 CGs modelled "
              "without contention."]
    return "\n".join(lines)


# ---- the gap to Table 7.2 (--thesis-kernels) --------------------------------------------------
# Each step re-runs the estimate with one more factor at the thesis' or the hardware's value,
# so the factor a step reports is measured: the img/s before it over the img/s after it.
HW_PRESET = "sw26010-hw"      # the DMA and launch model fitted to hardware (issue 28)


def gap_runs() -> int:
    """Estimates per network gap() makes: swsim's, the thesis', and the thesis' again on
    HW_PRESET unless that is the default preset (then step 4 is step 3, nothing to
    re-simulate)."""
    return 2 if Machine().config == VMConfig.preset(HW_PRESET) else 3

LAUNCH = "launch"             # the class of the launch costs gap() adds
GAP_CLASSES = CLASSES + (LAUNCH,)
NOT_MODELLED = ("not modelled: memory contention between the CGs, the instruction cache; not "
                "counted: LRN, dropout, conv bias, data loading, the framework on the MPE")


@dataclass
class GapStep:
    step: str              # what this step switches to the thesis' / hardware's value
    setting: str
    img_s: float
    factor: float          # the previous step's img/s over this one's (the first: 1)
    ms_by_class: dict


@dataclass
class GapRow:
    """One pass of one layer (its launch included in the last step): ms per iteration on one
    CG with swsim's kernels and at the last step (the thesis' convolutions on the hardware's
    launch and DMA)."""
    layer: str
    what: str
    klass: str
    swsim_ms: float
    last_ms: float


@dataclass
class Gap:
    network: str
    thesis_img_s: float
    preset: str            # the preset the first steps ran on (the default Machine's)
    steps: list
    quick: bool = False    # swsim's conv passes: the auto pick's estimate alone
    batch: int = 0         # the network's minibatch (Table 7.2's)
    thesis_conv_fraction: float = None    # Fig. 7.6's conv share of Table 7.2's iteration
    rows: list = field(default_factory=list)

    @property
    def remaining(self):
        """The last step's img/s over Table 7.2's: what no modelled factor explains."""
        return self.steps[-1].img_s / self.thesis_img_s

    @property
    def table_ms(self):
        """Table 7.2's iteration in ms (the minibatch over its img/s)."""
        return 1e3 * self.batch / self.thesis_img_s

    def attribution(self):
        """{"conv", "other"}: (Table 7.2's ms by Fig. 7.6's conv share, the last step's ms),
        or None without the share."""
        if self.thesis_conv_fraction is None:
            return None
        last = self.steps[-1].ms_by_class
        conv = self.table_ms * self.thesis_conv_fraction
        return {"conv": (conv, last["conv"]),
                "other": (self.table_ms - conv, sum(last.values()) - last["conv"])}


def gap_rows(swsim: Result, last: Result) -> list:
    """GapRows joining the two estimates' costs by (layer, pass); a launch is its pass's."""
    rows = {}
    for index, result in enumerate((swsim, last)):
        for c in result.costs:
            what = c.what.removeprefix(f"{LAUNCH}: ")      # a launch follows its pass
            entry = rows.setdefault((c.layer, what), [c.klass, 0.0, 0.0])
            entry[1 + index] += 1e3 * c.seconds
    return [GapRow(layer, what, *entry) for (layer, what), entry in rows.items()]


def preset_name(config) -> str:
    """The presets whose configuration is `config` (the default Machine's), or "custom"."""
    return "=".join(name for name in PRESETS if VMConfig.preset(name) == config) or "custom"


def with_launches(result: Result, config) -> Result:
    """`result` with one spawn to join (config.spawn_cycles) per cost: every pass of a layer,
    transform, the reduction and the update is at least one launch. The estimates time the
    kernels alone (a launch's Stats exclude the spawn), so this is the whole launch cost."""
    seconds = config.spawn_cycles / config.clock_hz
    return Result(result.network, result.batch, result.costs + [
        Cost(c.layer, f"launch: {c.what}", LAUNCH, seconds, "model") for c in result.costs],
        result.quick)


def gap(network: Network, engine="c", progress=None, quick=False, cache=None) -> Gap:
    """The steps from swsim's img/s to Table 7.2's; `quick`: swsim's conv passes as the
    Estimator's quick mode samples them (the thesis' steps have analytic convolutions);
    `cache`: an Estimator's cache on the default Machine's configuration, to reuse."""
    base = Machine().config
    hw = VMConfig.preset(HW_PRESET)
    cache = {} if cache is None else cache    # swsim's and the thesis' kernels on `base`
    swsim = estimate(network, Estimator(engine, Machine(base), progress, cache, quick))
    thesis = estimate(network, ThesisEstimator(engine, Machine(base), progress, cache))
    launched = with_launches(thesis, hw)
    on_hw = launched if base == hw else with_launches(
        estimate(network, ThesisEstimator(engine, Machine(hw), progress)), hw)
    steps, before = [], None
    for step, setting, result in (
            ("swsim's kernels", f"preset {preset_name(base)}, no launch cost", swsim),
            ("the thesis' convolutions", "swCaffe's choice at Figs. 5.12/5.13's efficiencies",
             thesis),
            ("+ the hardware's launch cost", f"{hw.spawn_cycles} cycles a pass "
             f"(spawn_cycles of {HW_PRESET})", launched),
            ("+ the hardware's DMA model", f"preset {HW_PRESET}", on_hw)):
        ms = {klass: 1e3 * sum(c.seconds for c in result.costs if c.klass == klass)
              for klass in GAP_CLASSES}
        steps.append(GapStep(step, setting, result.img_s,
                             1.0 if before is None else before / result.img_s, ms))
        before = result.img_s
    return Gap(network.name, network.thesis_img_s, preset_name(base), steps, quick,
               network.batch, network.thesis_conv_fraction, gap_rows(swsim, on_hw))


def run_gap(networks=QUICK_NETWORKS, engine="c", progress=None, quick=False, cache=None):
    return [gap(NETWORKS[name], engine, progress, quick, cache) for name in networks]


DETAIL_ROWS = 15      # format_gap(detail=True): the passes printed, the dearest last ones


def format_attribution(g: Gap) -> list:
    """Table 7.2's iteration split by Fig. 7.6's conv share against the last step's classes."""
    split = g.attribution()
    if split is None:
        return []
    missing = g.table_ms - sum(g.steps[-1].ms_by_class.values())
    lines = [f"  Table 7.2: {g.table_ms:.1f} ms per iteration; by Fig. 7.6's conv share "
             f"({100 * g.thesis_conv_fraction:.0f} %) against the last step:"]
    for part, (table, last) in split.items():
        lines.append(f"    {part:5s} {table:9.1f} ms against {last:8.1f} ({table / last:.2f}x): "
                     f"{100 * (table - last) / missing:5.1f} % of the {missing:.1f} ms missing")
    return lines


def format_gap_rows(g: Gap, top=DETAIL_ROWS) -> list:
    last_total = sum(r.last_ms for r in g.rows)
    rows = sorted(g.rows, key=lambda r: -r.last_ms)
    lines = [f"  {'layer':22s} {'pass':34s} {'class':18s} {'swsim ms':>9s} {'last ms':>9s} "
             f"{'last/swsim':>10s} {'% of last':>9s}"]
    for r in rows[:top]:
        ratio = f"{r.last_ms / r.swsim_ms:10.2f}" if r.swsim_ms else f"{'-':>10s}"
        lines.append(f"  {r.layer:22s} {r.what:34s} {r.klass:18s} {r.swsim_ms:9.1f} "
                     f"{r.last_ms:9.1f} {ratio} {100 * r.last_ms / last_total:9.1f}")
    rest = rows[top:]
    if rest:
        lines.append(f"  {f'{len(rest)} other passes':75s} {sum(r.swsim_ms for r in rest):9.1f} "
                     f"{sum(r.last_ms for r in rest):9.1f} {'':10s} "
                     f"{100 * sum(r.last_ms for r in rest) / last_total:9.1f}")
    return lines


def format_gap(gaps, detail=False) -> str:
    lines = []
    for g in gaps:
        total = g.steps[0].img_s / g.thesis_img_s
        lines += [f"{g.network}: swsim {g.steps[0].img_s:.2f} img/s against Table 7.2's "
                  f"{g.thesis_img_s} ({total:.2f}x), the default preset {g.preset}"
                  + QUICK_NOTE * g.quick,
                  f"  {'step':30s} {'setting':52s} {'img/s':>8s} {'factor':>7s}  "
                  + " ".join(f"{k[:10]:>10s}" for k in GAP_CLASSES) + "  (ms per iteration)"]
        for s in g.steps:
            lines.append(f"  {s.step:30s} {s.setting:52s} {s.img_s:8.2f} {s.factor:6.2f}x  "
                         + " ".join(f"{s.ms_by_class[k]:10.1f}" for k in GAP_CLASSES))
        lines += [f"  {'remaining (Table 7.2)':30s} {'not modelled, not counted (below)':52s} "
                  f"{g.thesis_img_s:8.2f} {g.remaining:6.2f}x"]
        if detail:
            lines += format_attribution(g) + format_gap_rows(g)
        lines.append("")
    lines += ["factor: the step before's img/s over this step's (their product is swsim's "
              "img/s over Table 7.2's); remaining: " + NOT_MODELLED + ".",
              "the thesis' convolutions: per layer the best of explicit (30 %), implicit "
              "(57 %, >= 64 channels) and Winograd (60 %, 3x3 stride 1) of the CG's peak, "
              "every pass; their layouts' transforms, FC and the memory-bound layers as "
              "swsim simulates them."] + (["last: the last step's pass with its launch."]
                                          if detail else [])
    return "\n".join(lines)
