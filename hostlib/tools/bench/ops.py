"""`swsim bench ops`: achieved memory bandwidth of the DNN library's memory-bound operators
(element-wise, activations, pooling, batch normalisation, softmax with cross-entropy, layout
transforms) at realistic sizes, against the DMA engine's ceiling and the DMA figure of
`swsim bench fidelity`.

The streaming driver (hostlib/dnn/stream.py) runs in rounds: one chunk on each of the 64 CPEs
(pooling: a plane per CPE; transforms: 8 channels or one image; batch normalisation: a tile
of channels (resident scheme), or the fewest channels whose samples are cut into the full
map's pieces (streaming)). Rounds are identical work,
so the cycles of a size are linear in its rounds once the pipeline is full. Each case
simulates two samples (SAMPLE_ROUNDS), extrapolates to the full size from their difference,
and checks the extrapolation against a full run of VALIDATION_ROUNDS (plus a partial round):
the error is printed, and the worst below the table. Softmax cases are small and run whole.
Every run's values are checked against numpy.

Columns: GB/s = bytes the operator must move (each input read once, each output written
once; a transform's every pass) / time; "ceiling" = ``stream_bound_gbps`` for its mix of gets
and puts (docs/timing.md "DMA": a put line costs the engine more than a get line); "of get
BW" = against the measured `swsim bench fidelity` row ``dma_bandwidth`` (large aligned gets
only). Target: >= 80 % of the ceiling for every operator.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ....vm import Machine
from ... import dnn
from ...dnn import activation, batchnorm, stream
from ...dnn.layout_transform import swap_passes, swap_plan, tile_round
from . import fidelity

SAMPLE_ROUNDS = (2, 6)
VALIDATION_ROUNDS = 20.5
TARGET = 0.8


def _check(name, got, want, dtype):
    tol = 1e-5 if dtype == np.float32 else 1e-13
    if not np.allclose(got, want, rtol=tol, atol=tol * 10):
        raise RuntimeError(f"{name}: wrong values on the VM")


ACTIVATIONS = ("relu", "sigmoid", "tanh")
STREAMS = dict(stream.BODIES, **{kind: (1, 1) for kind in ACTIVATIONS},
               **{f"{kind}_backward": (2, 1) for kind in ACTIVATIONS})   # op: (in, out)


def _activation_reference(op, xs):
    x = xs[0]
    if op == "relu":
        return np.maximum(x, 0)
    if op == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if op == "tanh":
        return np.tanh(x)
    y, dy = xs
    return {"relu_backward": np.where(y > 0, dy, 0), "sigmoid_backward": dy * y * (1 - y),
            "tanh_backward": dy * (1 - y * y)}[op]


@dataclass(frozen=True)
class Case:
    """An element-wise operator (a streaming body: add, scale, sgd_update or an activation,
    forward or backward) on `elements` elements. A round is one chunk on each CPE."""
    name: str
    body: str
    elements: int
    dtype: type = np.float32

    def round_size(self, config):
        nin, nout = STREAMS[self.body]
        es = np.dtype(self.dtype).itemsize
        kernel = stream.KERNEL if self.body in stream.BODIES else activation.KERNEL
        return stream.chunk_elements(config, es, self.elements, nin + nout,
                                     config.num_cpes, kernel) * config.num_cpes

    @property
    def full(self):
        return self.elements

    def bytes_moved(self, n):
        nin, nout = STREAMS[self.body]
        return (nin + nout) * n * np.dtype(self.dtype).itemsize

    def run(self, n, engine, rng, machine=None):
        """Run the operator on n random elements; check it; return its Stats."""
        nin, _ = STREAMS[self.body]
        xs = [rng.standard_normal(n).astype(self.dtype) for _ in range(nin)]
        x64 = [x.astype(np.float64) for x in xs]
        if self.body == "axpby":
            out, stats = dnn.add(xs[0], xs[1], 1.0, 0.5, engine=engine, machine=machine)
            want = x64[0] + 0.5 * x64[1]
        elif self.body == "scale":
            out, stats = dnn.scale(xs[0], 0.5, engine=engine, machine=machine)
            want = 0.5 * x64[0]
        elif self.body == "sgd":
            (out, _), stats = dnn.sgd_update(*xs, 0.01, 0.9, 5e-4, engine=engine,
                                             machine=machine)
            want = x64[0] - (0.01 * (x64[1] + 5e-4 * x64[0]) + 0.9 * x64[2])
        elif self.body in ACTIVATIONS:
            out, stats = dnn.activation_forward(xs[0], self.body, engine=engine,
                                                machine=machine)
            want = _activation_reference(self.body, x64)
        else:
            kind = self.body.split("_")[0]
            given = {"x" if kind == "relu" else "y": xs[0]}
            out, stats = dnn.activation_backward(xs[1], mode=kind, engine=engine,
                                                 machine=machine, **given)
            want = _activation_reference(self.body, x64)
        _check(self.name, out, want, self.dtype)
        return stats


@dataclass(frozen=True)
class PoolCase:
    """Pooling of `planes` planes of h x w (N x C of a feature map); a round is one plane per
    CPE (the planes are independent units of work)."""
    name: str
    planes: int
    h: int
    w: int
    kernel: int
    stride: int
    padding: int
    mode: str
    backward: bool = False
    dtype: type = np.float32

    def round_size(self, config):
        return config.num_cpes

    @property
    def full(self):
        return self.planes

    def bytes_moved(self, planes):
        es = np.dtype(self.dtype).itemsize
        oh = (self.h + 2 * self.padding - self.kernel) // self.stride + 1
        ow = (self.w + 2 * self.padding - self.kernel) // self.stride + 1
        return planes * (self.h * self.w * es +
                         oh * ow * (es + (4 if self.mode == "max" else 0)))  # x, y, argmax

    def run(self, planes, engine, rng, machine=None):
        x = rng.standard_normal((planes, self.h, self.w)).astype(self.dtype)
        args = (self.kernel, self.stride, self.padding)
        y, stats = dnn.pool2d_forward(x, *args, mode=self.mode,
                                      return_indices=self.mode == "max", engine=engine,
                                      machine=machine)
        argmax = None
        if self.mode == "avg":      # count_include_pad: zero padding, sum / kernel^2
            padded = np.pad(x.astype(np.float64), ((0, 0),) + ((self.padding,) * 2,) * 2)
            windows = np.lib.stride_tricks.sliding_window_view(
                padded, (self.kernel, self.kernel), axis=(1, 2))
            want = windows[:, ::self.stride, ::self.stride].sum(axis=(3, 4)) / self.kernel ** 2
            _check(self.name, y, want[:, :y.shape[1], :y.shape[2]], self.dtype)
        if self.mode == "max":
            y, argmax = y
            # each window's maximum, read back through the argmax
            flat = x.reshape(planes, -1)
            _check(self.name, y, np.take_along_axis(flat, argmax.reshape(planes, -1),
                                                    1).reshape(y.shape), self.dtype)
        if not self.backward:
            return stats
        dy = np.ones_like(y)
        dx, stats = dnn.pool2d_backward(dy, x.shape, *args, mode=self.mode, indices=argmax,
                                        engine=engine, machine=machine)
        if self.mode == "max":     # every dy lands once
            _check(self.name, dx.sum(dtype=np.float64), dy.sum(dtype=np.float64), np.float64)
        return stats


@dataclass(frozen=True)
class TransformCase:
    """A layout transform of a (batch, channels, h, w) NCHW map, sampled along `axis`: the
    one the passes' work is proportional to with the tiles unchanged (a round: 8 channels or
    1 image, and whole tiles of every pass that cuts that axis into tiles:
    ``layout_transform.tile_round``)."""
    name: str
    dst: str
    shape: tuple
    axis: str = "channels"
    dtype: type = np.float32

    @property
    def _index(self):
        return 1 if self.axis == "channels" else 0

    def round_size(self, config):
        """8 channels or 1 image, and whole tiles of every pass along that axis; doubled
        until the first sample gives every CPE a tile in each pass (fewer tiles than CPEs
        run side by side: a launch's cycles grow slower than its tiles), unless the case
        then runs whole."""
        es = np.dtype(self.dtype).itemsize
        size = math.lcm(8 if self.axis == "channels" else 1, tile_round(
            self.shape, "NCHW", self.dst, "NCHW"[self._index], es, config))
        while SAMPLE_ROUNDS[1] * size < self.full and min(
                swap_plan(config, es, *piece, 0, 0)["units"] for piece in
                swap_passes(self._shape(SAMPLE_ROUNDS[0] * size), "NCHW", self.dst)) \
                < config.num_cpes:
            size *= 2
        return size

    @property
    def full(self):
        return self.shape[self._index]

    def _shape(self, n):
        shape = list(self.shape)
        shape[self._index] = n
        return tuple(shape)

    def bytes_moved(self, n):     # read once and written once per pass
        passes = len(swap_passes(self._shape(n), "NCHW", self.dst))
        return 2 * passes * int(np.prod(self._shape(n))) * np.dtype(self.dtype).itemsize

    def run(self, n, engine, rng, machine=None):
        x = rng.standard_normal(self._shape(n)).astype(self.dtype)
        y, stats = dnn.transform(x, "NCHW", self.dst, engine=engine, machine=machine)
        order = dnn.LAYOUTS[self.dst]
        if not np.array_equal(y, x.transpose(["NCHW".index(a) for a in order])):
            raise RuntimeError(f"{self.name}: wrong values on the VM")
        return stats


@dataclass(frozen=True)
class BatchNormCase:
    """Batch normalisation of a (batch, channels, h, w) map laid out as `layout`, `mode`
    "train" / "infer" (forward) or "backward"; sampled along the channels (tiles, units,
    folds and finishes are per channel). A round: resident scheme (training, backward;
    inference on row tiles), a tile of channels; streaming, the channels of a unit per CPE;
    doubled until the samples are cut into the tiles or pieces the full map gets."""
    name: str
    shape: tuple
    mode: str
    dtype: type = np.float32
    layout: str = "NCHW"

    def _order(self):
        return ["NCHW".index(axis) for axis in dnn.LAYOUTS[self.layout]]

    def _view(self, channels):
        """What the kernels see of the map with `channels` channels (batchnorm.view)."""
        shape = (self.shape[0], channels) + self.shape[2:]
        return batchnorm.view(tuple(shape[i] for i in self._order()), self.layout)

    def round_size(self, config):
        es = np.dtype(self.dtype).itemsize
        streams = 2 if self.mode == "backward" else 1
        layout = batchnorm.tiles(config, self._view(self.shape[1]), es, streams)
        if layout and (self.mode != "infer" or batchnorm.row_tiles(layout)):   # resident:
            channels = layout.channels  # tiles, doubled until the samples get the full map's
            while channels < self.shape[1] and layout != batchnorm.tiles(   # tiles (a segment
                    config, self._view(SAMPLE_ROUNDS[0] * channels), es, streams):  # tile's M
                channels *= 2           # depends on the channels)
            return channels
        streams = 3 if self.mode == "backward" else 2

        def cut(channels):      # the pieces but their count along the channels
            return dataclasses.replace(batchnorm.pieces(config, self._view(channels), es,
                                                        streams), blocks=0)

        full = cut(self.shape[1])
        cpes, batch = config.num_cpes, self._view(1)[0]
        if full.channels:       # units: batch x channel blocks
            channels = full.channels * -(-cpes // batch)
        else:                   # units: channels x pieces per channel
            channels = -(-cpes // full.per_channel)
        while cut(SAMPLE_ROUNDS[0] * channels) != full and channels < self.shape[1]:
            channels *= 2
        return channels

    @property
    def full(self):
        return self.shape[1]

    def bytes_moved(self, channels):      # what the operator must move: x (and dy) once, y
        batch, _, h, w = self.shape
        n = batch * channels * h * w * np.dtype(self.dtype).itemsize
        return 3 * n if self.mode == "backward" else 2 * n

    def run(self, channels, engine, rng, machine=None):
        shape = (self.shape[0], channels) + self.shape[2:]
        x = (rng.standard_normal(shape) * 2 + 1).astype(self.dtype)
        gamma, beta = (rng.standard_normal(channels).astype(self.dtype) for _ in range(2))
        rm, rv = np.zeros(channels, self.dtype), np.ones(channels, self.dtype)
        order = self._order()

        def laid_out(a):                  # the operands as the layout holds them
            return np.ascontiguousarray(a.transpose(order))

        def nchw(a):
            return a.transpose(np.argsort(order))
        x64 = x.astype(np.float64)
        axes = (0, 2, 3)
        mean, var = x64.mean(axis=axes), x64.var(axis=axes)
        invstd = 1 / np.sqrt(var + 1e-5)
        if self.mode == "backward":
            dy = rng.standard_normal(shape).astype(self.dtype)
            saved = (mean.astype(self.dtype), invstd.astype(self.dtype))
            (dx, _, _), stats = dnn.batchnorm_backward(laid_out(dy), laid_out(x), gamma,
                                                       *saved, layout=self.layout,
                                                       engine=engine, machine=machine)
            m, s = (np.float64(a)[None, :, None, None] for a in saved)
            xhat, dy64 = (x64 - m) * s, dy.astype(np.float64)
            want = (gamma.astype(np.float64)[None, :, None, None] * s) * (
                dy64 - dy64.mean(axis=axes, keepdims=True) -
                xhat * (dy64 * xhat).mean(axis=axes, keepdims=True))
            _check(self.name, nchw(dx), want, self.dtype)
            return stats
        training = self.mode == "train"
        (y, *_), stats = dnn.batchnorm_forward(laid_out(x), gamma, beta, rm, rv,
                                               training=training, layout=self.layout,
                                               engine=engine, machine=machine)
        if not training:                    # the running statistics: 0 and 1
            mean, invstd = np.zeros(channels), np.full(channels, 1 / np.sqrt(1 + 1e-5))
        per_channel = [a.astype(np.float64)[None, :, None, None]
                       for a in (mean, gamma * invstd, beta)]
        _check(self.name, nchw(y), (x64 - per_channel[0]) * per_channel[1] + per_channel[2],
               self.dtype)
        return stats


@dataclass(frozen=True)
class SoftmaxCase:
    """Softmax with cross-entropy of (batch, classes) logits: run whole (no sampling)."""
    name: str
    batch: int
    classes: int
    dtype: type = np.float32

    def round_size(self, config):
        return None

    @property
    def full(self):
        return self.batch

    def bytes_moved(self, batch):         # logits read, dlogits written, labels read
        return 2 * batch * self.classes * np.dtype(self.dtype).itemsize + 4 * batch

    def run(self, batch, engine, rng, machine=None):
        x = (rng.standard_normal((batch, self.classes)) * 3).astype(self.dtype)
        labels = rng.integers(0, self.classes, batch)
        (_, grad), stats = dnn.softmax_cross_entropy(x, labels, engine=engine,
                                                     machine=machine)
        z = np.exp(x - x.max(axis=1, keepdims=True).astype(np.float64))
        want = z / z.sum(axis=1, keepdims=True)
        want[np.arange(batch), labels] -= 1
        _check(self.name, grad, want / batch, self.dtype)
        return stats


RESNET_RESIDUAL = 32 * 256 * 56 * 56     # ResNet-50 conv2_x output, B = 32
VGG_CONV1 = 32 * 64 * 224 * 224          # VGG-16 conv1 feature map, B = 32
VGG_CONV3 = 32 * 256 * 56 * 56           # VGG-16 conv3 feature map, B = 32
CASES = (
    Case("add: ResNet-50 residual, 32x256x56x56", "axpby", RESNET_RESIDUAL),
    Case("add: ResNet-50 residual, 32x256x56x56, f64", "axpby", RESNET_RESIDUAL, np.float64),
    Case("scale: VGG-16 conv1 map, 32x64x224x224", "scale", VGG_CONV1),
    Case("sgd_update: ResNet-50 weights, 25.6 M", "sgd", 25_557_032),
    Case("sgd_update: VGG-16 weights, 138.4 M", "sgd", 138_357_544),
    Case("relu: VGG-16 conv1 map, 32x64x224x224", "relu", VGG_CONV1),
    Case("sigmoid: VGG-16 conv3 map, 32x256x56x56", "sigmoid", VGG_CONV3),
    Case("tanh: VGG-16 conv3 map, 32x256x56x56, f64", "tanh", VGG_CONV3, np.float64),
    Case("relu backward: VGG-16 conv1 map", "relu_backward", VGG_CONV1),
    Case("tanh backward: VGG-16 conv3 map", "tanh_backward", VGG_CONV3),
    PoolCase("max pool 3/2/1: ResNet-50 stem, 32x64x112x112", 32 * 64, 112, 112, 3, 2, 1,
             "max"),
    PoolCase("avg pool 3/2/1: ResNet-50 stem size, 32x64x112x112", 32 * 64, 112, 112, 3, 2,
             1, "avg"),
    PoolCase("max pool 2/2: VGG-16 pool1, 32x64x224x224", 32 * 64, 224, 224, 2, 2, 0, "max"),
    PoolCase("avg pool 2/2: VGG-16 pool1 size, 32x64x224x224", 32 * 64, 224, 224, 2, 2, 0,
             "avg"),
    PoolCase("max pool 2/2: VGG-16 pool3, 32x256x56x56", 32 * 256, 56, 56, 2, 2, 0, "max"),
    PoolCase("max pool 2/2, f64: VGG-16 pool3, 32x256x56x56", 32 * 256, 56, 56, 2, 2, 0,
             "max", dtype=np.float64),
    PoolCase("max pool backward 3/2/1: ResNet-50 stem", 32 * 64, 112, 112, 3, 2, 1, "max",
             backward=True),
    BatchNormCase("batchnorm train: ResNet-50 bn1, 32x64x112x112", (32, 64, 112, 112),
                  "train"),
    BatchNormCase("batchnorm train: ResNet-50 conv2_x, 32x256x56x56", (32, 256, 56, 56),
                  "train"),
    BatchNormCase("batchnorm infer: ResNet-50 conv2_x, 32x256x56x56", (32, 256, 56, 56),
                  "infer"),
    BatchNormCase("batchnorm backward: ResNet-50 conv2_x, 32x256x56x56", (32, 256, 56, 56),
                  "backward"),
    BatchNormCase("batchnorm train: ResNet-50 conv4_x, 32x1024x14x14", (32, 1024, 14, 14),
                  "train"),
    BatchNormCase("batchnorm backward: ResNet-50 conv4_x, 32x1024x14x14",
                  (32, 1024, 14, 14), "backward"),
    BatchNormCase("batchnorm train: ResNet-50 conv2_x, 32x256x56x56, f64", (32, 256, 56, 56),
                  "train", dtype=np.float64),
    BatchNormCase("batchnorm backward: ResNet-50 bn1, 32x64x112x112", (32, 64, 112, 112),
                  "backward"),
    BatchNormCase("batchnorm train, CNHW: ResNet-50 conv2_x, 32x256x56x56",
                  (32, 256, 56, 56), "train", layout="CNHW"),
    BatchNormCase("batchnorm backward, CNHW: ResNet-50 conv2_x, 32x256x56x56",
                  (32, 256, 56, 56), "backward", layout="CNHW"),
    BatchNormCase("batchnorm train, CNHW: ResNet-50 conv4_x, 32x1024x14x14",
                  (32, 1024, 14, 14), "train", layout="CNHW"),
    BatchNormCase("batchnorm train, RCNB: ResNet-50 conv3_x, 32x512x28x28",
                  (32, 512, 28, 28), "train", layout="RCNB"),
    BatchNormCase("batchnorm train, RCNB: ResNet-50 conv4_x, 32x1024x14x14",
                  (32, 1024, 14, 14), "train", layout="RCNB"),
    BatchNormCase("batchnorm backward, RCNB: ResNet-50 conv4_x, 32x1024x14x14",
                  (32, 1024, 14, 14), "backward", layout="RCNB"),
    BatchNormCase("batchnorm infer, RCNB: ResNet-50 conv4_x, 32x1024x14x14",
                  (32, 1024, 14, 14), "infer", layout="RCNB"),
    SoftmaxCase("softmax + cross-entropy: ImageNet, 32x1000", 32, 1000),
    SoftmaxCase("softmax + cross-entropy: ImageNet, 32x1000, f64", 32, 1000, np.float64),
    SoftmaxCase("softmax + cross-entropy: ImageNet, 128x1000", 128, 1000),
    SoftmaxCase("softmax + cross-entropy: ImageNet, 256x1000", 256, 1000),
    SoftmaxCase("softmax + cross-entropy: CIFAR-10, 64x10", 64, 10),
    TransformCase("transform NCHW->NHWC: 32x256x56x56", "NHWC", (32, 256, 56, 56), "batch"),
    TransformCase("transform NCHW->RCNB (2 passes): 32x256x56x56", "RCNB", (32, 256, 56, 56)),
)

# --quick: the first case of each operator kind
QUICK_CASES = tuple(next(c for c in CASES if type(c) is kind)
                    for kind in (Case, PoolCase, BatchNormCase, SoftmaxCase, TransformCase))


@dataclass
class Result:
    case: object
    chunk_bytes: int
    cycles: float          # extrapolated, full size
    gbps: float
    ceiling_gbps: float
    get_gbps: float        # bench fidelity's dma_bandwidth, measured
    validation_error: Optional[float]   # extrapolated vs simulated cycles at
    #                                     VALIDATION_ROUNDS (None: run whole)
    host_seconds: float
    latency_bound: bool    # the target is out of reach even with nothing but the ceiling's
    #                        time and one get's and one put's start-up latency

    @property
    def ratio(self):
        return self.gbps / self.ceiling_gbps


def sampled(case, engine: str, rng, config, machine=None):
    """(predict, stats): predict(n) = the case's cycles at n units, extrapolated linearly from
    simulated runs of SAMPLE_ROUNDS rounds (None: the case runs whole, stats is that run's) on
    `machine` (None: a default one, whose configuration is `config`); stats: the last run's."""
    per_round = case.round_size(config)
    if per_round is None:          # small enough to run whole
        return None, case.run(case.full, engine, rng, machine)
    rounds = np.array(SAMPLE_ROUNDS, float)
    samples = [case.run(int(r * per_round), engine, rng, machine) for r in rounds]
    cycles = np.array([s.cycles for s in samples], float)
    slope = (cycles[1] - cycles[0]) / (rounds[1] - rounds[0])

    def predict(n):
        return cycles[0] + slope * (n / per_round - rounds[0])

    return predict, samples[-1]


def measure(case, engine: str, get_gbps: float) -> Result:
    start = time.perf_counter()
    config = Machine().config
    rng = np.random.default_rng(0)
    predict, stats = sampled(case, engine, rng, config)
    if predict is None:
        full, error = stats.cycles, None
    else:
        n_valid = int(VALIDATION_ROUNDS * case.round_size(config))
        simulated = case.run(n_valid, engine, rng).cycles
        error = predict(n_valid) / simulated - 1
        full = predict(case.full)
    seconds = case.bytes_moved(case.full) / (stats.stream_gbps * 1e9)
    gbps = case.bytes_moved(case.full) / (full / config.clock_hz) / 1e9
    unit = stats.details.get("chunk_bytes", 0)
    return Result(case, unit, full, gbps, stats.stream_gbps, get_gbps, error,
                  time.perf_counter() - start, latency_bound(seconds, config))


def latency_bound(ceiling_seconds: float, config) -> bool:
    """Whether TARGET cannot be reached by an operator whose data take `ceiling_seconds` at
    the ceiling: it reads before it writes, so at best it also waits out one get's and one
    put's start-up latency (config.dma_latency each)."""
    ceiling = ceiling_seconds * config.clock_hz
    return ceiling / (ceiling + 2 * config.dma_latency) < TARGET


def run(engine="c", cases=CASES):
    (get_row,) = fidelity.dma_bandwidth(engine)
    return [measure(case, engine, get_row.measured) for case in cases]


def format_table(results) -> str:
    header = ("operator, size", "size (sampled axis)", "chunk B", "Mcycles", "GB/s", "ceiling",
              "of ceiling", "of get BW", "extrap. err", "host s")
    body = [(r.case.name, f"{r.case.full:,}", str(r.chunk_bytes or "-"), f"{r.cycles / 1e6:.2f}",
             f"{r.gbps:.2f}", f"{r.ceiling_gbps:.2f}", f"{100 * r.ratio:.1f} %",
             f"{100 * r.gbps / r.get_gbps:.1f} %",
             "whole run" if r.validation_error is None else f"{100 * r.validation_error:+.3f} %",
             f"{r.host_seconds:.1f}") for r in results]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    below = [r.case.name for r in results if r.ratio < TARGET and not r.latency_bound]
    out_of_reach = [r.case.name for r in results if r.ratio < TARGET and r.latency_bound]
    errors = [abs(r.validation_error) for r in results if r.validation_error is not None]
    get = results[0].get_gbps if results else 0
    lines += ["", f"ceiling: the DMA engine's rate for the operator's gets and puts in whole "
              f"lines; get BW: bench fidelity's dma_bandwidth, measured {get:.2f} GB/s.",
              f"extrap. err: cycles extrapolated from {SAMPLE_ROUNDS[0]} and "
              f"{SAMPLE_ROUNDS[1]} rounds vs a full run of {VALIDATION_ROUNDS} rounds; worst "
              f"{100 * max(errors, default=0):.3f} %.",
              f"target >= {100 * TARGET:.0f} % of the ceiling: " +
              ("met by every operator" if not below else "missed by " + ", ".join(below)) +
              ("" if not out_of_reach else
               "; out of reach for the latency-bound " + ", ".join(out_of_reach) +
               " (at the ceiling its data take less than 4 x (a get's + a put's start-up "
               "latency))")]
    return "\n".join(lines)
