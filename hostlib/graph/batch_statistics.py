"""BatchNormalization over the whole batch when the split pass cuts it into copies
(docs/graph.md "Training with split"): ``global_batchnorm(training)`` rewrites a training
graph's ``BatchNormalizationTraining`` / ``BatchNormalizationGrad`` pairs so that every
statistic is a sum the split pass can reduce across the copies (``split(..., reduce=)``):

- forward: per copy ``BatchNormalizationMoments(x)`` = per channel [sum x, sum x^2] of its
  slice; the copies' moments summed (a Sum on the CPEs); once, ``BatchNormalizationStatistics``
  (the batch's mean and variance, 1/sqrt(var + eps), the running statistics updated); per
  copy ONNX's inference ``BatchNormalization`` (the CPEs' batchnorm) with the batch's mean
  and variance;
- backward: per copy ``BatchNormalizationGrad`` for its slice's sums dscale and dbias (with
  the batch's statistics); those summed across the copies (they are the parameters'
  gradients); per copy ``BatchNormalizationGradApply`` for dx from the batch's sums.

The moments, statistics and dx operators have no CPE kernel: they run on the MPE, timed by
its cost model. Importing this module (the package does) registers them in ``ops.TRAINING``."""
from __future__ import annotations

import numpy as np

from .autodiff import TrainingGraph
from .gradients import _channel_view
from .ir import Graph, Node
from .ops import TRAINING, Op, TensorInfo


def moments(node, x):
    """Per channel [sum x, sum x^2] over the other axes, in float64 (no cancellation when
    the copies' sums make the variance)."""
    axes, _ = _channel_view(x)
    x64 = x.astype(np.float64)
    return (np.stack([x64.sum(axis=axes), (x64 * x64).sum(axis=axes)]),)


def statistics(node, sums, mean, var):
    """From the batch's moments (``count`` values per channel): the running mean and
    variance updated as batchnorm_training updates them, the batch's mean and (biased)
    variance, and 1/sqrt(var + eps)."""
    count = int(node.attr("count"))
    mu = sums[0] / count
    variance = np.maximum(sums[1] / count - mu * mu, 0.0)
    m = node.attr("momentum", 0.9)
    running = (m * mean + (1 - m) * mu, m * var + (1 - m) * variance * count / (count - 1))
    invstd = 1.0 / np.sqrt(variance + node.attr("epsilon", 1e-5))
    return tuple(a.astype(mean.dtype) for a in (*running, mu, variance, invstd))


def grad_apply(node, dy, x, scale, saved_mean, saved_invstd, dscale, dbias):
    """dx of the batch's normalisation from the batch's sums dscale and dbias (``count``
    values per channel in the whole batch)."""
    axes, shape = _channel_view(x)
    count = int(node.attr("count"))
    xhat = (x - saved_mean.reshape(shape)) * saved_invstd.reshape(shape).astype(np.float64)
    dx = (scale.astype(np.float64) * saved_invstd).reshape(shape) / count * (
        count * dy.astype(np.float64) - dbias.reshape(shape) - xhat * dscale.reshape(shape))
    return (dx.astype(x.dtype),)


def _moments_shape(node, info):
    return [TensorInfo(np.dtype(np.float64), (2, info[0].shape[1]))]


def _statistics_shape(node, info):
    return [info[1]] * 5


def _first_shape(node, info):
    return [info[1]]


def global_batchnorm(training: TrainingGraph) -> tuple:
    """(the training graph's Graph with its batch normalisations rewritten as the module
    says, the tensors the split pass must sum across the copies)."""
    graph = training.graph
    nodes, reduce = [], []
    for node in graph.nodes:
        if node.op_type == "BatchNormalizationTraining":
            x, scale, bias, mean, var = node.inputs
            y, mean_upd, var_upd, saved_mean, saved_invstd = node.outputs
            info = graph.info[x]
            count = int(np.prod(info.shape)) // info.shape[1]
            sums, saved_var = f"{node.name}/moments", f"{node.name}/saved_var"
            attrs = dict(count=count, momentum=node.attr("momentum", 0.9),
                         epsilon=node.attr("epsilon", 1e-5))
            nodes += [Node(f"{node.name}/moments", "BatchNormalizationMoments", [x], [sums]),
                      Node(f"{node.name}/statistics", "BatchNormalizationStatistics",
                           [sums, mean, var],
                           [mean_upd, var_upd, saved_mean, saved_var, saved_invstd], attrs),
                      Node(node.name, "BatchNormalization",
                           [x, scale, bias, saved_mean, saved_var], [y],
                           dict(epsilon=attrs["epsilon"]), 15)]
            reduce.append(sums)
        elif node.op_type == "BatchNormalizationGrad":
            # the parameters' gradients are the copies' sums: each copy's partial sum is
            # named as the gradient, the split pass sums them into it
            dy, x, scale, saved_mean, saved_invstd = node.inputs
            dx, dscale, dbias = (list(node.outputs) + ["", ""])[:3]
            parts = [dscale or f"{node.name}/dscale", dbias or f"{node.name}/dbias"]
            nodes.append(Node(node.name, "BatchNormalizationGrad", node.inputs, [""] + parts,
                              node.attrs, node.opset))
            reduce += parts
            if dx:
                count = int(np.prod(graph.info[x].shape)) // graph.info[x].shape[1]
                nodes.append(Node(f"{node.name}/dx", "BatchNormalizationGradApply",
                                  node.inputs + parts, [dx], dict(count=count)))
        else:
            nodes.append(node)
    result = Graph(graph.name, nodes, dict(graph.inputs), list(graph.outputs),
                   dict(graph.initializers))
    result.infer()
    return result, reduce


def _register():
    TRAINING.update(
        BatchNormalizationMoments=Op(moments, "stream", shape=_moments_shape),
        BatchNormalizationStatistics=Op(statistics, "stream", shape=_statistics_shape),
        BatchNormalizationGradApply=Op(grad_apply, "stream", shape=_first_shape))


_register()
