"""The layer kinds of the training stack. Each layer infers its top shapes from its bottoms,
names the ``hostlib.dnn`` operators its forward and backward run (checked when the Net is
built: no layer falls back to numpy arithmetic), and offers its operator candidates with a
predicted time to the selection pass (``choose``).

Shapes are Caffe's NCHW for images and (B, features) after InnerProduct; the layout pass
(``plan_forward``, ``plan_backward``) decides in which layout each layer's operators run."""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple, Optional

import numpy as np

from ...errors import SwsimError
from .. import dnn
from ..blas import gemm_model
from ..dnn import conv as conv_ops
from ..dnn import lstm_model
from ..dnn.batchnorm import NATIVE_LAYOUTS
from ..dnn.conv.common import make_geometry
from ..dnn.layout_transform import LAYOUTS
from .common import DTYPE, TrainError, stream_seconds
from .layout_plan import CANONICAL, physical, transform_if_needed


class Choice(NamedTuple):
    """What the selection pass keeps for a layer for every iteration."""
    operator: str
    layout: str
    predicted_seconds: Optional[float]     # None: no performance model for this operator yet


def gemm_seconds(m: int, n: int, k: int, config, **layout) -> float:
    problem = gemm_model.Problem(m=m, n=n, k=k, itemsize=np.dtype(DTYPE).itemsize, **layout)
    blocking = gemm_model.choose(problem, config)
    return gemm_model.predict(problem, blocking, config) / config.clock_hz


class Layer:
    """One layer: ``setup`` (shapes), ``forward``/``backward`` through ``run.op``."""
    operators: tuple = ()        # hostlib.dnn names the layer calls
    bottoms: tuple = (1, 1)      # (min, max) number of bottoms
    layout_free = False          # element-wise: runs in whatever layout its bottom comes in
    layouts = (CANONICAL,)       # the layouts its operators take: a bottom in one is taken as
    #                              it comes, any other is transformed to NCHW
    carries_state = False        # its state is the run's (LSTM's h, c), not statistics for TEST

    def __init__(self, param):
        self.param = param
        self.name = param.name
        self.param_shapes = []       # learnable blobs, in Caffe's order (weights, bias)
        self.fillers = []
        self.state_shapes = []       # blobs the layer keeps between steps, not learned
        self.state = []              # their views in the Net's state arena
        self.propagate = []          # per bottom: does the backward need its gradient (Net)
        self.layout = self.diff_layout = self.grad_layout = CANONICAL
        self.transforms = []         # Transforms the layer's backward runs itself (explain)

    def plan_forward(self, bottom_layouts: list, inputs: list, tops: list) -> None:
        """The layout pass, once (the Net's, after ``choose``): ``layout``, the forward's (of
        the layer's 4-D bottoms and tops): NCHW unless the operator takes another; layout-free
        layers, and layers whose operators take their first bottom's layout (``layouts``),
        run in that one. ``inputs``/``tops``: the blob versions read and written (names for
        the transforms a layer inserts itself)."""
        if bottom_layouts and (self.layout_free or bottom_layouts[0] in self.layouts):
            self.layout = bottom_layouts[0]

    def plan_backward(self, arriving: str, config) -> None:
        """The backward's layouts, given the one its top gradient arrives in: ``diff_layout``,
        the one it takes it in (the Net transforms it where they differ), and ``grad_layout``,
        its bottom gradients'. By default the forward's (ReLU reads x beside dy). ``config``:
        the machine's, for the models of what the layouts leave to choose."""
        self.diff_layout = self.grad_layout = self.layout

    def set_phase(self, phase: str) -> None:
        """Called once by the Net with "TRAIN" or "TEST"."""

    def init_state(self) -> list:
        """The initial values of the ``state_shapes`` blobs."""
        return []

    def error(self, field: str, message: str) -> TrainError:
        return TrainError(f"layer {self.name!r} ({self.param.type}), {field}: {message}")

    def setup(self, shapes: list) -> list:
        raise NotImplementedError

    def choose(self, shapes: list, config) -> Choice:
        """The operator kept for this layer (one candidate: trivial)."""
        nbytes = sum(int(np.prod(s)) for s in shapes) * 2 * np.dtype(DTYPE).itemsize
        return Choice("+".join(self.operators) or "host", "NCHW",
                      stream_seconds(nbytes, config) if self.operators else None)

    def forward(self, run, bottoms, params):
        raise NotImplementedError

    def backward(self, run, diffs, bottoms, tops, params, grads):
        """Bottom diffs (a list, None where a bottom needs none); parameter gradients are
        written into ``grads`` (views of the packed gradient buffer)."""
        raise NotImplementedError


def _filler(filler, shape, fan_in, rng):
    kind = filler.type if filler is not None else "constant"
    if kind == "constant":
        return np.full(shape, filler.value if filler is not None else 0.0, DTYPE)
    if kind == "uniform":
        return rng.uniform(filler.min, filler.max, shape).astype(DTYPE)
    if kind == "gaussian":
        return rng.normal(filler.mean, filler.std, shape).astype(DTYPE)
    if kind == "xavier":
        bound = math.sqrt(3.0 / fan_in)
        return rng.uniform(-bound, bound, shape).astype(DTYPE)
    if kind == "msra":
        return rng.normal(0.0, math.sqrt(2.0 / fan_in), shape).astype(DTYPE)
    raise TrainError(f"unknown filler type {kind!r} (constant, uniform, gaussian, xavier, msra)")


class Data(Layer):
    bottoms = (0, 0)

    def setup(self, shapes):
        raise AssertionError("the Net sets up Data layers from their source")

    def forward(self, run, bottoms, params):
        raise AssertionError("the Net feeds Data layers")


class InnerProduct(Layer):
    operators = ("linear_forward", "linear_backward")

    def setup(self, shapes):
        (shape,) = shapes
        p = self.param.inner_product_param
        if p.num_output <= 0:
            raise self.error("inner_product_param.num_output", "must be given and > 0")
        inputs = int(np.prod(shape[1:]))
        self.param_shapes = [(p.num_output, inputs)] + ([(p.num_output,)] if p.bias_term else [])
        self.fillers = [p.weight_filler if p.HasField("weight_filler") else None,
                        p.bias_filler if p.HasField("bias_filler") else None]
        return [(shape[0], p.num_output)]

    def init(self, rng):
        return [_filler(f, s, self.param_shapes[0][1], rng)
                for f, s in zip(self.fillers, self.param_shapes)]

    def choose(self, shapes, config):
        (shape,) = shapes
        b, i, o = shape[0], int(np.prod(shape[1:])), self.param_shapes[0][0]
        seconds = (gemm_seconds(b, o, i, config, b_transposed=True)    # y = x wᵀ
                   + gemm_seconds(b, i, o, config)                     # dx = dy w
                   + gemm_seconds(o, i, b, config, a_transposed=True))  # dw = dyᵀ x
        return Choice("linear_forward+linear_backward (swGEMM)", "(B, I)", seconds)

    def forward(self, run, bottoms, params):
        (x,) = bottoms
        return [run.op(self, "linear_forward", x.reshape(x.shape[0], -1), *params)]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        (x,), (dy,) = bottoms, diffs
        dx, dw, db = run.op(self, "linear_backward", dy, x.reshape(x.shape[0], -1), params[0])
        grads[0][...] = dw
        if len(grads) > 1:
            grads[1][...] = db
        return [dx.reshape(x.shape)]


class Activation(Layer):
    operators = ("activation_forward", "activation_backward")
    kind = ""
    layout_free = True

    def setup(self, shapes):
        return [shapes[0]]

    def forward(self, run, bottoms, params):
        return [run.op(self, "activation_forward", bottoms[0], mode=self.kind)]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        given = {"x": bottoms[0]} if self.kind == "relu" else {"y": tops[0]}
        return [run.op(self, "activation_backward", diffs[0], mode=self.kind, **given)]


class ReLU(Activation):
    kind = "relu"


class Sigmoid(Activation):
    kind = "sigmoid"


class TanH(Activation):
    kind = "tanh"


def _pairs(values, name, layer, default):
    """Caffe's repeated kernel_size/stride/pad: one value for both axes, or none."""
    values = list(values)
    if not values:
        if default is None:
            raise layer.error(f"convolution_param.{name}", "must be given")
        return default
    if len(values) != 1:
        raise layer.error(f"convolution_param.{name}", "give one value (square)")
    return values[0]


def _window(layer, field, size, kernel, stride, pad):
    """Output size of a window; Caffe pools with ceil, the operators with floor: a shape where
    they differ is refused rather than silently changed."""
    if kernel < 1 or stride < 1:
        raise layer.error(field, f"kernel_size and stride must be >= 1, got kernel {kernel} "
                          f"and stride {stride}")
    if pad >= kernel:                   # a window of padding only (and a runaway plane)
        raise layer.error(field, f"pad {pad} must be smaller than the kernel {kernel}")
    if kernel > size + 2 * pad:
        raise layer.error(field, f"kernel {kernel} larger than the padded input {size + 2 * pad}")
    if (size + 2 * pad - kernel) % stride:
        raise layer.error(field, f"(input {size} + 2 pad {pad} - kernel {kernel}) is not a "
                          f"multiple of stride {stride}")
    return (size + 2 * pad - kernel) // stride + 1


class Convolution(Layer):
    operators = ("conv2d_forward", "conv2d_backward_data", "conv2d_backward_filter")

    def setup(self, shapes):
        (shape,) = shapes
        if len(shape) != 4:
            raise self.error("bottom", f"needs an (N, C, H, W) blob, got {shape}")
        p = self.param.convolution_param
        if p.num_output <= 0:
            raise self.error("convolution_param.num_output", "must be given and > 0")
        if p.group != 1:
            raise self.error("convolution_param.group", "only group 1 is supported")
        self.kernel = _pairs(p.kernel_size, "kernel_size", self, None)
        self.stride = _pairs(p.stride, "stride", self, 1)
        self.pad = _pairs(p.pad, "pad", self, 0)
        n, c, h, w = shape
        oh, ow = (_window(self, "convolution_param", size, self.kernel, self.stride, self.pad)
                  for size in (h, w))
        self.param_shapes = [(p.num_output, c, self.kernel, self.kernel)] + (
            [(p.num_output,)] if p.bias_term else [])
        self.fillers = [p.weight_filler if p.HasField("weight_filler") else None,
                        p.bias_filler if p.HasField("bias_filler") else None]
        return [(n, p.num_output, oh, ow)]

    def init(self, rng):
        fan_in = int(np.prod(self.param_shapes[0][1:]))
        return [_filler(f, s, fan_in, rng) for f, s in zip(self.fillers, self.param_shapes)]

    def choose(self, shapes, config):
        """Each pass's algorithm by the conv performance models (``dnn.conv.choose``, what
        ``algo="auto"`` would run), kept for every step; no backward-data where the bottom
        needs no gradient (the data)."""
        geo = make_geometry(shapes[0], self.param_shapes[0], self.stride, self.pad, "w")
        self.x_shape, self.y_shape = tuple(shapes[0]), geo.y_shape
        directions = ("forward", "backward_filter") + (
            ("backward_data",) if self.propagate[0] else ())
        try:
            self.algos = {d: conv_ops.choose(geo, d, DTYPE, config) for d in directions}
        except SwsimError as exc:
            raise self.error("operator", str(exc)) from None
        self.predicted = {d: m.predict(geo, d, DTYPE, config) / config.clock_hz
                          for d, m in self.algos.items()}
        operator = "conv2d " + ", ".join(f"{d} {m.NAME}" for d, m in self.algos.items())
        return Choice(operator, self.algos["forward"].LAYOUT, sum(self.predicted.values()))

    def plan_forward(self, bottom_layouts, inputs, tops):
        """In the forward algorithm's layout."""
        self.layout = self.algos["forward"].LAYOUT
        self.blob_names = inputs[0], tops[0]

    def plan_backward(self, arriving, config):
        """The top gradient is taken as it arrives when one of the two backward passes wants
        that layout, else (thesis §7.1, greedy) in the layout of the more expensive pass; the
        other pass, and backward-filter's x when its layout is not the forward's, get
        Transforms of their own; the bottom gradient leaves in backward-data's layout."""
        passes = {d: self.algos[d].LAYOUT for d in ("backward_data", "backward_filter")
                  if d in self.algos}
        self.diff_layout = arriving if arriving in passes.values() else \
            passes[max(passes, key=self.predicted.get)]
        self.grad_layout = passes.get("backward_data", self.diff_layout)
        x, y = self.blob_names
        self.to_pass = {d: transform_if_needed(f"d({y})", self.y_shape, self.diff_layout,
                                               layout, "backward")
                        for d, layout in passes.items()}
        self.x_to_filter = transform_if_needed(x, self.x_shape, self.layout,
                                               passes["backward_filter"], "backward")
        self.transforms = [t for t in (*self.to_pass.values(), self.x_to_filter) if t]
        if len(self.param_shapes) > 1:
            self._plan_bias_gradient(config)

    def _geometry(self, direction):
        algo = self.algos[direction]
        return dict(stride=self.stride, padding=self.pad, algo=algo.NAME, layout=algo.LAYOUT)

    def forward(self, run, bottoms, params):
        return [run.op(self, "conv2d_forward", bottoms[0], params[0],
                       bias=params[1] if len(params) > 1 else None,
                       **self._geometry("forward"))]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        (x,), (dy,) = bottoms, diffs

        def operand(transform, array):
            return transform(run, self, array) if transform else array
        grads[0][...] = run.op(self, "conv2d_backward_filter",
                               operand(self.to_pass["backward_filter"], dy),
                               operand(self.x_to_filter, x), params[0].shape,
                               **self._geometry("backward_filter"))
        if len(grads) > 1:
            grads[1][...] = self._bias_gradient(run, dy)
        if not self.propagate[0]:
            return [None]
        layout = self.algos["backward_data"].LAYOUT
        return [run.op(self, "conv2d_backward_data", operand(self.to_pass["backward_data"], dy),
                       params[0], physical(self.x_shape, layout),
                       **self._geometry("backward_data"))]

    def _plan_bias_gradient(self, config) -> None:
        """db = the sums of dy (in ``diff_layout``) over every axis but C, as GEMMs with ones
        vectors: the axes before C in one ones(1, A)·dy, those after C in chunks of adjacent
        axes, innermost first, each a (rows, chunk)·ones(chunk, 1). A GEMM with one long
        side wastes swGEMM's blocks (one 4096-long sum of conv1's CNHW dy: 71 us against 30
        us as 64 + 64), so the chunking is chosen by swGEMM's model, once."""
        shape = physical(self.y_shape, self.diff_layout)
        axis = LAYOUTS[self.diff_layout].index("C")
        channels, trailing = shape[axis], shape[axis + 1:]
        self.bias_outer = int(np.prod(shape[:axis]))
        lead = gemm_seconds(1, channels * int(np.prod(trailing)), self.bias_outer, config) \
            if self.bias_outer > 1 else 0.0

        def cost(chunks):
            rows, total = channels * int(np.prod(trailing)), lead
            for chunk in chunks:
                rows //= chunk
                total += gemm_seconds(rows, 1, chunk, config)
            return total
        plans = []
        for cuts in itertools.product((False, True), repeat=max(0, len(trailing) - 1)):
            chunks, size = [], 1
            for index, dim in enumerate(reversed(trailing)):   # innermost first
                size *= dim
                if index == len(trailing) - 1 or cuts[index]:
                    chunks.append(size)
                    size = 1
            plans.append([c for c in chunks if c > 1])
        self.bias_chunks = min(plans, key=cost)

    def _bias_gradient(self, run, dy):
        sums = dy.reshape(self.bias_outer, -1)
        if self.bias_outer > 1:
            sums = run.gemm(self, np.ones((1, self.bias_outer), dy.dtype), sums)
        for chunk in self.bias_chunks:
            sums = run.gemm(self, sums.reshape(-1, chunk), np.ones((chunk, 1), dy.dtype))
        return sums.reshape(-1)


class Pooling(Layer):
    """Pools every (H, W) plane: in NCHW or CNHW, whose planes are the innermost two axes
    (the operators take any leading axes), the blob is taken as it comes."""
    operators = ("pool2d_forward", "pool2d_backward")
    layouts = (CANONICAL, "CNHW")

    def setup(self, shapes):
        (shape,) = shapes
        if len(shape) != 4:
            raise self.error("bottom", f"needs an (N, C, H, W) blob, got {shape}")
        p = self.param.pooling_param
        n, c, h, w = shape
        if p.global_pooling:
            if h != w:
                raise self.error("pooling_param.global_pooling", "needs square planes")
            self.kernel, self.stride, self.pad = h, 1, 0
        else:
            if not p.kernel_size:
                raise self.error("pooling_param.kernel_size", "must be given")
            self.kernel, self.stride, self.pad = p.kernel_size, p.stride, p.pad
        self.mode = "max" if p.pool == p.MAX else "avg"
        oh, ow = (_window(self, "pooling_param", size, self.kernel, self.stride, self.pad)
                  for size in (h, w))
        return [(n, c, oh, ow)]

    def _geometry(self):
        return dict(kernel_size=self.kernel, stride=self.stride, padding=self.pad, mode=self.mode)

    def forward(self, run, bottoms, params):
        result = run.op(self, "pool2d_forward", bottoms[0], **self._geometry(),
                        return_indices=self.mode == "max")
        if self.mode == "max":
            y, self.argmax = result
            return [y]
        return [result]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        indices = {"indices": self.argmax} if self.mode == "max" else {}
        return [run.op(self, "pool2d_backward", diffs[0], bottoms[0].shape,
                       **self._geometry(), **indices)]


class Eltwise(Layer):
    operators = ("add", "scale")
    bottoms = (2, 2)
    layout_free = True

    def plan_backward(self, arriving, config):
        self.diff_layout = self.grad_layout = arriving      # its backward reads no activation

    def setup(self, shapes):
        p = self.param.eltwise_param
        if p.operation != p.SUM:
            raise self.error("eltwise_param.operation", "only SUM is supported")
        if shapes[0] != shapes[1]:
            raise self.error("bottom", f"shapes differ: {shapes[0]} and {shapes[1]}")
        if len(p.coeff) not in (0, 2):
            raise self.error("eltwise_param.coeff", "give one coefficient per bottom")
        self.coeff = list(p.coeff) or [1.0, 1.0]
        return [shapes[0]]

    def forward(self, run, bottoms, params):
        return [run.op(self, "add", *bottoms, alpha=self.coeff[0], beta=self.coeff[1])]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        return [diffs[0] if c == 1.0 else run.op(self, "scale", diffs[0], c)
                for c in self.coeff]


class EuclideanLoss(Layer):
    """Caffe's EuclideanLoss: loss = ||a - b||² / (2 N), da = (a - b) / N = -db."""
    operators = ("add", "scale")
    bottoms = (2, 2)

    def setup(self, shapes):
        a, b = shapes
        if a[0] != b[0] or int(np.prod(a)) != int(np.prod(b)):     # Caffe: equal counts
            raise self.error("bottom", f"needs blobs of one batch and count, got {a} and {b}")
        return [()]

    def forward(self, run, bottoms, params):
        a, b = bottoms
        self.diff = run.op(self, "add", a, b.reshape(a.shape), alpha=1.0,
                           beta=-1.0).reshape(1, -1)
        loss = run.gemm(self, self.diff, self.diff.reshape(-1, 1), alpha=0.5 / a.shape[0])
        return [loss.reshape(())]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        n = bottoms[0].shape[0]
        return [run.op(self, "scale", self.diff, sign / n).reshape(bottom.shape)
                for sign, bottom in zip((1, -1), bottoms)]


def _scores_and_labels(layer, shapes):
    """The setup of a layer reading (B, classes) scores and (B,) labels into a scalar."""
    logits, labels = shapes
    if len(logits) != 2 or labels != (logits[0],):
        raise layer.error("bottom", f"needs (B, classes) scores and (B,) labels, got "
                          f"{logits} and {labels}")
    return [()]


class SoftmaxWithLoss(Layer):
    operators = ("softmax_cross_entropy",)
    bottoms = (2, 2)

    setup = _scores_and_labels

    def forward(self, run, bottoms, params):
        loss, self.dlogits = run.op(self, "softmax_cross_entropy", *bottoms)
        return [np.asarray(loss, DTYPE).reshape(())]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        return [self.dlogits, None]


class Accuracy(Layer):
    """The fraction of rows whose top-k scores hold the label: a metric read by the host, which
    no gradient or update depends on (it has no backward)."""
    bottoms = (2, 2)

    def setup(self, shapes):
        tops = _scores_and_labels(self, shapes)
        k, classes = self.param.accuracy_param.top_k, shapes[0][1]
        if not 1 <= k <= classes:       # more than the classes would always report 100%
            raise self.error("accuracy_param.top_k", f"must be 1..{classes} (the classes), "
                             f"got {k}")
        return tops

    def forward(self, run, bottoms, params):
        scores, labels = bottoms
        k = self.param.accuracy_param.top_k
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return [np.asarray((top == labels.astype(np.int64)[:, None]).any(axis=1).mean(), DTYPE)]


def _planes(layer, shapes):
    (shape,) = shapes
    if len(shape) != 4:
        raise layer.error("bottom", f"needs an (N, C, H, W) blob, got {shape}")
    return shape


class BatchNorm(Layer):
    """Caffe's BatchNorm (normalisation only; a Scale layer after it holds γ and β) on
    ``dnn.batchnorm_forward/backward`` with γ = 1, β = 0. TRAIN normalises by the slice's
    statistics and updates the running mean and variance (the Net's state, not learned:
    PyTorch's rule with momentum = 1 - moving_average_fraction); TEST uses them. Runs in its
    bottom's layout where the batchnorm kernels take it (``dnn.batchnorm.NATIVE_LAYOUTS``)."""
    operators = ("batchnorm_forward", "batchnorm_backward")
    layouts = NATIVE_LAYOUTS

    def setup(self, shapes):
        shape = _planes(self, shapes)
        channels = shape[1]
        self.state_shapes = [(channels,), (channels,)]      # running mean, running variance
        self.ones, self.zeros = np.ones(channels, DTYPE), np.zeros(channels, DTYPE)
        return [shape]

    def init_state(self):
        return [self.zeros, self.ones]

    def set_phase(self, phase):
        p = self.param.batch_norm_param
        global_stats = p.use_global_stats if p.HasField("use_global_stats") else phase == "TEST"
        if phase == "TRAIN" and global_stats:
            raise self.error("batch_norm_param.use_global_stats", "training with the running "
                             "statistics is not supported")
        self.training = not global_stats

    def forward(self, run, bottoms, params):
        p = self.param.batch_norm_param
        mean, var = self.state
        y, new_mean, new_var, self.saved_mean, self.saved_invstd = run.op(
            self, "batchnorm_forward", bottoms[0], self.ones, self.zeros, mean, var,
            training=self.training, momentum=1 - p.moving_average_fraction, eps=p.eps,
            layout=self.layout)
        mean[...], var[...] = new_mean, new_var
        return [y]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        dx, _, _ = run.op(self, "batchnorm_backward", diffs[0], bottoms[0], self.ones,
                          self.saved_mean, self.saved_invstd, layout=self.layout)
        return [dx]


class Scale(Layer):
    """Caffe's Scale with one bottom: y = γ_c x + β_c per channel. hostlib.dnn has no
    per-channel affine operator, so it runs on the batchnorm kernels with mean 0, variance 1
    and eps 0 (1/sqrt(1) = 1 exactly): forward and dx = γ dy are inference-mode
    ``batchnorm_forward``; dγ = Σ dy x and dβ = Σ dy are ``batchnorm_backward``'s. Runs in
    its bottom's layout where those kernels take it, as BatchNorm."""
    operators = ("batchnorm_forward", "batchnorm_backward")
    layouts = NATIVE_LAYOUTS

    def setup(self, shapes):
        shape = _planes(self, shapes)
        p = self.param.scale_param
        channels = shape[1]
        self.param_shapes = [(channels,)] + ([(channels,)] if p.bias_term else [])
        self.fillers = [p.filler if p.HasField("filler") else None,
                        p.bias_filler if p.HasField("bias_filler") else None]
        self.ones, self.zeros = np.ones(channels, DTYPE), np.zeros(channels, DTYPE)
        return [shape]

    def init(self, rng):
        gamma = (_filler(self.fillers[0], self.param_shapes[0], 1, rng)
                 if self.fillers[0] is not None else self.ones.copy())
        return [gamma] + [_filler(self.fillers[1], s, 1, rng) for s in self.param_shapes[1:]]

    def _affine(self, run, x, gamma, beta):
        y, *_ = run.op(self, "batchnorm_forward", x, gamma, beta, self.zeros, self.ones,
                       training=False, eps=0.0, layout=self.layout)
        return y

    def forward(self, run, bottoms, params):
        beta = params[1] if len(params) > 1 else self.zeros
        return [self._affine(run, bottoms[0], params[0], beta)]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        _, dgamma, dbeta = run.op(self, "batchnorm_backward", diffs[0], bottoms[0], params[0],
                                  self.zeros, self.ones, layout=self.layout)
        grads[0][...] = dgamma
        if len(grads) > 1:
            grads[1][...] = dbeta
        return [self._affine(run, diffs[0], params[0], self.zeros)]


class SequenceTranspose(Layer):
    """Swaps a blob's time and batch axes (not a Caffe layer; Caffe would need a Permute).
    A 4-D image blob (N, C, H, W) is read as the sequence of its H rows: -> (T = H, B = N,
    I = C·W), the time-major input of LSTM; a 3-D (A, B, F) blob -> (B, A, F), e.g. an LSTM's
    (T, B, H) back to batch-major for InnerProduct; a 2-D (A, B) one -> (B, A), e.g. the Data
    layer's (N, T) cont flags to the LSTM's (T, N). One ``dnn.transform`` pass on the VM (the
    blob viewed as (P, Q, D, 1) NCHW and laid out CNHW = (Q, P, D, 1)); backward the inverse."""
    operators = ("transform",)

    def setup(self, shapes):
        (shape,) = shapes
        if len(shape) == 4:
            n, c, h, w = shape
            self.view, self.top = (n * c, h, w), (h, n, c * w)
        elif len(shape) in (2, 3):
            self.view = tuple(shape) + (1,) * (3 - len(shape))
            self.top = (shape[1], shape[0]) + tuple(shape[2:])
        else:
            raise self.error("bottom", f"needs an (N, C, H, W), a (T, B, F) or a (T, B) blob, "
                             f"got {shape}")
        return [self.top]

    def forward(self, run, bottoms, params):
        p, q, d = self.view
        y = run.op(self, "transform", bottoms[0].reshape(p, q, d, 1), "NCHW", "CNHW")
        return [y.reshape(self.top)]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        p, q, d = self.view
        dx = run.op(self, "transform", diffs[0].reshape(q, p, d, 1), "CNHW", "NCHW")
        return [dx.reshape(bottoms[0].shape)]


class LSTM(Layer):
    """Caffe's LSTM: bottom x (T, B, I), time-major, and optionally Caffe's second bottom
    ``cont`` (T, B): 0 where a sequence starts (h and c reset to 0), 1 where it continues. With
    ``cont`` the layer keeps h_T and c_T of each minibatch (its state, in the Net's state arena)
    as the h0, c0 of the next, per batch row (stream), as Caffe does; without, every sequence
    starts at t = 0 with h0 = c0 = 0. Gradients stop at the minibatch's start (Caffe's truncated
    backpropagation through time). Top h (T, B, H), H = ``recurrent_param.num_output``.
    Parameters in Caffe's blob order: W_xc (4H, I), b_c (4H), W_hc (4H, H), weight_filler for
    both matrices, bias_filler for b. The rows of the four gates follow ``dnn.lstm_*``
    (PyTorch): i, f, g, o; Caffe's LSTMUnit orders them i, f, o, g, so Caffe weights load with
    the last two H-row blocks of each blob swapped.

    A reset inside the minibatch (cont = 0 at t > 0 in some row) splits the T steps into
    segments, one ``lstm_forward`` each, the rows that restart getting zero state (a row
    selection on the host, no arithmetic); the backward runs the segments in reverse, each
    one's dh0, dc0 (of the continuing rows) the next one's dh_n, dc_n, and the parameter
    gradients of the segments added on the VM.

    Operator: the forward algorithm the LSTM model predicts faster (``dnn.lstm_model``:
    sampled simulation of both on this layer's sizes), chosen once: in TRAIN with the reserve
    (the gates and cells the backward through time needs: the baseline always writes it, the
    tensorized kernel with ``reserve=True``), in TEST without."""
    operators = ("lstm_forward", "lstm_backward", "add")
    bottoms = (1, 2)
    carries_state = True

    def setup(self, shapes):
        shape = shapes[0]
        if len(shape) != 3:
            raise self.error("bottom", f"needs a (T, B, I) blob, got {shape}")
        p = self.param.recurrent_param
        if p.num_output <= 0:
            raise self.error("recurrent_param.num_output", "must be given and > 0")
        steps, batch, inputs = shape
        if len(shapes) == 2 and tuple(shapes[1]) != (steps, batch):
            raise self.error("bottom", f"cont (the second bottom) must be (T, B) = "
                             f"{(steps, batch)}, got {shapes[1]}")
        self.continued = len(shapes) == 2
        hidden = p.num_output
        self.param_shapes = [(4 * hidden, inputs), (4 * hidden,), (4 * hidden, hidden)]
        weights = p.weight_filler if p.HasField("weight_filler") else None
        self.fillers = [weights, p.bias_filler if p.HasField("bias_filler") else None, weights]
        self.zeros = np.zeros((batch, hidden), DTYPE)          # h0 and c0
        self.state_shapes = [(batch, hidden)] * 2 if self.continued else []   # h_T, c_T
        return [(steps, batch, hidden)]

    def init_state(self):
        return [self.zeros, self.zeros] if self.continued else []

    def set_phase(self, phase):
        self.reserve = phase == "TRAIN"
        self.algo = "tensorized"          # until ``choose`` (its own fallback when LDM is short)

    def init(self, rng):
        return [_filler(f, s, s[1] if len(s) == 2 else 1, rng)
                for f, s in zip(self.fillers, self.param_shapes)]

    def choose(self, shapes, config):
        """The forward with the smaller estimate (ties: tensorized), its reserve in TRAIN;
        the predicted time is the forward's, plus in TRAIN the backward through time's (the
        same whichever forward runs)."""
        steps, batch, inputs = shapes[0]
        hidden = self.param_shapes[2][1]
        estimates = [lstm_model.estimate_forward(steps, batch, inputs, hidden, DTYPE, algo=algo,
                                                 reserve=self.reserve, config=config)
                     for algo in ("tensorized", "baseline")]
        best = min(estimates, key=lambda e: e.cycles)
        self.algo = best.algo
        reserve = ", reserve" if self.reserve and self.algo == "tensorized" else ""
        operator = f"lstm_forward({self.algo}{reserve})" + (
            "+lstm_backward" if self.reserve else "")
        cycles = best.cycles + (lstm_model.backward(steps, batch, inputs, hidden, DTYPE,
                                                    config=config) if self.reserve else 0)
        return Choice(operator, "(T, B, I)", cycles / config.clock_hz)

    def _segments(self, bottoms):
        """[(start, stop, rows that carry their state into ``start``)]: one segment unless
        ``cont`` restarts some row at t > 0."""
        steps, batch = bottoms[0].shape[:2]
        if not self.continued:
            return [(0, steps, np.zeros(batch, bool))]
        cont = bottoms[1]
        if not np.isin(cont, (0, 1)).all():
            raise self.error("bottom", "cont must hold 0 (a sequence starts) or 1 (it "
                             f"continues), got {np.unique(cont)[:5]}")
        starts = [0] + [t for t in range(1, steps) if not cont[t].all()] + [steps]
        return [(a, b, cont[a] == 1) for a, b in zip(starts, starts[1:])]

    def forward(self, run, bottoms, params):
        x = bottoms[0]
        w, b, r = params
        h, c = self.state if self.continued else (self.zeros, self.zeros)
        self.segments, ys = [], []
        for start, stop, carried in self._segments(bottoms):
            h0, c0 = (np.where(carried[:, None], state, 0).astype(DTYPE) for state in (h, c))
            (y, h, c), stats = run.op_with_stats(self, "lstm_forward", x=x[start:stop], h0=h0,
                                                 c0=c0, W=w, R=r, bias=b, algo=self.algo,
                                                 reserve=self.reserve)
            reserve = stats.reserve if self.reserve else None
            self.segments.append((start, stop, carried, h0, c0, reserve))
            ys.append(y)
        if self.continued:
            self.state[0][...], self.state[1][...] = h, c
        return [np.concatenate(ys) if len(ys) > 1 else ys[0]]

    def backward(self, run, diffs, bottoms, tops, params, grads):
        x, (dy,) = bottoms[0], diffs
        w, b, r = params
        dh = dc = None                      # nothing flows back from the next minibatch
        dxs, sums = [], None
        for start, stop, carried, h0, c0, reserve in reversed(self.segments):
            dx, dh0, dc0, dw, dr, db = run.op(
                self, "lstm_backward", dy=dy[start:stop], x=x[start:stop], h0=h0, c0=c0, W=w,
                R=r, bias=b, dh_n=dh, dc_n=dc, reserve=reserve)
            dh, dc = (np.where(carried[:, None], d, 0).astype(DTYPE) for d in (dh0, dc0))
            dxs.append(dx)
            sums = (dw, db, dr) if sums is None else \
                tuple(run.op(self, "add", total, part) for total, part in zip(sums, (dw, db, dr)))
        for grad, value in zip(grads, sums):
            grad[...] = value
        dx = np.concatenate(dxs[::-1]) if len(dxs) > 1 else dxs[0]
        return [dx] + [None] * (len(bottoms) - 1)


KINDS = {cls.__name__: cls for cls in (
    Data, InnerProduct, ReLU, Sigmoid, TanH, Convolution, Pooling, Eltwise, EuclideanLoss,
    SoftmaxWithLoss, Accuracy, BatchNorm, Scale, SequenceTranspose, LSTM)}
LOSSES = ("EuclideanLoss", "SoftmaxWithLoss")


def missing_operators(cls) -> list:
    return [name for name in cls.operators if not hasattr(dnn, name)]
