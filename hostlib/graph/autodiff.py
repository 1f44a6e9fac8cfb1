"""Reverse-mode automatic differentiation over the graph IR (docs/graph.md "Training"), as
swFLOWpro trains TensorFlow graphs: ``derive_training(graph, loss)`` appends to the forward
nodes the backward graph -- per forward node, in reverse topological order, the gradient
operators of ``gradients`` (each run, like every node, through swHMAE's dispatch: the DNN
library's backward operators on the CPEs, else the timed MPE path) and ``Sum`` nodes where a
tensor's gradient has several contributions -- and returns a graph whose outputs are the loss
and the gradient of every trained parameter. ``with_loss`` appends ONNX's
SoftmaxCrossEntropyLoss to a model that ends in its logits."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ir import Graph, GraphError, Node, TensorInfo
from .ops import FLOATS


@dataclass
class TrainingGraph:
    graph: Graph              # the forward nodes, then the backward's; outputs: loss, gradients
    forward: int              # graph.nodes[:forward]: the forward nodes (topological order)
    loss: str
    parameters: list          # the trained initializers, in the forward graph's order
    gradients: dict = field(default_factory=dict)   # parameter -> its gradient tensor
    # running statistics (BatchNormalization's mean and variance initializers) -> the tensor
    # of their updated values, also outputs of the graph
    state: dict = field(default_factory=dict)
    seed: str = "grad/seed"   # the initializer d loss / d loss (1) the backward starts from


# LSTM's X, W, R, B, initial_h, initial_c (not sequence_lens)
LSTM_INPUTS = (0, 1, 2, 3, 5, 6)
# op -> the input positions a gradient flows to (the others: labels, shapes)
DIFFERENTIABLE = {
    "Conv": (0, 1, 2), "Gemm": (0, 1, 2), "MaxPool": (0,), "AveragePool": (0,),
    "GlobalAveragePool": (0,), "BatchNormalization": (0, 1, 2),
    "BatchNormalizationTraining": (0, 1, 2), "MaxPoolTraining": (0,), "Relu": (0,),
    "Sigmoid": (0,), "Tanh": (0,),
    "Flatten": (0,), "Reshape": (0,), "Identity": (0,), "Add": (0, 1), "Sum": None,
    "Sub": (0, 1), "Mul": (0, 1), "Div": (0, 1), "MatMul": (0, 1), "Concat": None,
    "Transpose": (0,), "Softmax": (0,), "LogSoftmax": (0,), "LRN": (0,),
    "SoftmaxCrossEntropyLoss": (0,), "LeakyRelu": (0,), "Gelu": (0,),
    "LayerNormalization": (0, 1, 2), "LSTM": LSTM_INPUTS, "LSTMTraining": LSTM_INPUTS,
}


def _positions(node: Node) -> tuple:
    """The inputs a gradient flows to: all of them for an operator without a gradient rule
    (so that a parameter below it is reported as needing one)."""
    positions = DIFFERENTIABLE.get(node.op_type)
    return tuple(range(len(node.inputs))) if positions is None else positions


def with_loss(graph: Graph, logits: str, labels: str = "labels") -> Graph:
    """A copy of ``graph`` with the mean softmax cross-entropy of tensor ``logits`` (N, C)
    against a new int64 graph input ``labels`` (N,) as its one output, "loss"."""
    info = graph.info or graph.infer()
    if logits not in info or len(info[logits].shape) != 2:
        raise GraphError(f"logits {logits!r}: not a 2-D (N, C) tensor of the graph")
    if labels in info:
        raise GraphError(f"labels {labels!r}: the graph already has a tensor of that name")
    loss = Node("loss", "SoftmaxCrossEntropyLoss", [logits, labels], ["loss"], opset=13)
    inputs = dict(graph.inputs)
    inputs[labels] = TensorInfo(np.dtype(np.int64), info[logits].shape[:1])
    result = Graph(graph.name, list(graph.nodes) + [loss], inputs, ["loss"],
                   dict(graph.initializers))
    result.infer()
    return result


def derive_training(graph: Graph, loss: str, parameters=None) -> TrainingGraph:
    """The training graph of ``graph`` for the scalar tensor ``loss``. ``parameters``: the
    initializers to train (default: every float initializer a gradient reaches). Raises
    GraphError naming the node for an operator without a gradient on the path to a
    parameter, a parameter the loss does not depend on, or a loss that is not a scalar."""
    info = graph.info or graph.infer()
    order = graph.order()
    if loss not in info or info[loss].shape != () or info[loss].dtype not in FLOATS:
        raise GraphError(f"loss {loss!r}: not a float scalar tensor of the graph")
    candidates = [name for name, value in graph.initializers.items()
                  if value.dtype in FLOATS and _read_differentiably(order, name)]
    if parameters is None:
        parameters = candidates
    else:
        parameters = list(parameters)
        for name in parameters:
            if name not in candidates:
                raise GraphError(f"parameter {name!r}: not a float initializer any "
                                 "differentiable operator reads")
    requires = set(parameters)             # tensors that depend on a parameter
    for node in order:
        if any(node.inputs[i] in requires for i in _positions(node) if i < len(node.inputs)):
            requires.update(out for out in node.outputs if out)
    order, state = _training_mode(order, graph, info)
    builder = _Builder(graph, info)
    seed = builder.constant("grad/seed", np.ones((), info[loss].dtype))
    builder.contribute(loss, seed)
    for node in reversed(order):
        if not any(out in builder.pending for out in node.outputs):
            continue
        needs = [index in _positions(node) and name in requires
                 for index, name in enumerate(node.inputs)]
        if not any(needs):
            continue
        rule = RULES.get(node.op_type)
        if rule is None:
            raise GraphError(f"{node}: no gradient for {node.op_type} (training supports "
                             f"{', '.join(sorted(RULES))})")
        dys = [builder.total(out) if out in builder.pending else None for out in node.outputs]
        for name, grad in zip(node.inputs, rule(builder, node, dys, needs)):
            if grad is not None:
                builder.contribute(name, grad)
    grads = {}
    for name in parameters:
        if name not in builder.pending:
            raise GraphError(f"parameter {name!r}: the loss {loss!r} does not depend on it")
        grads[name] = builder.total(name)
    result = Graph(graph.name + "/train", order + builder.nodes, dict(graph.inputs),
                   [loss] + [grads[p] for p in parameters] + list(state.values()),
                   {**graph.initializers, **builder.constants})
    result.infer()
    return TrainingGraph(result, len(order), loss, parameters, grads, state, seed)


def _training_mode(order, graph, info):
    """The forward nodes as training runs them: BatchNormalization with the batch's
    statistics (``BatchNormalizationTraining``, whose extra outputs are the updated running
    statistics and what its backward reads), MaxPool keeping its argmax (``MaxPoolTraining``).
    Returns (nodes, running statistic -> its updated tensor)."""
    nodes, state = [], {}
    for node in order:
        if node.op_type == "MaxPool" and not any(node.outputs[1:]):
            nodes.append(Node(node.name, "MaxPoolTraining", list(node.inputs),
                              [node.outputs[0], f"{node.name}/argmax"], dict(node.attrs),
                              node.opset))
            continue
        if node.op_type == "LSTM":
            nodes.append(_lstm_training(node))
            continue
        if node.op_type != "BatchNormalization":
            nodes.append(node)
            continue
        x, _, _, mean, var = node.inputs
        if node.opset < 9 and not node.attr("spatial", 1):
            raise GraphError(f"{node}: no training with spatial=0 (per-activation statistics)")
        if len(node.outputs) > 1 and any(node.outputs[1:]):
            raise GraphError(f"{node}: training reads no running statistics outputs")
        for name in (mean, var):
            if name not in graph.initializers or name in state:
                raise GraphError(f"{node}: its running statistic {name!r} must be an "
                                 "initializer of its own to be updated")
        if int(np.prod(info[x].shape)) // info[x].shape[1] < 2:
            raise GraphError(f"{node}: training needs more than one value per channel")
        names = [f"{mean}/updated", f"{var}/updated", f"{node.name}/saved_mean",
                 f"{node.name}/saved_invstd"]
        state.update({mean: names[0], var: names[1]})
        nodes.append(Node(node.name, "BatchNormalizationTraining", list(node.inputs),
                          node.outputs[:1] + names, dict(node.attrs), node.opset))
    return nodes, state


def _lstm_training(node):
    """An LSTM as training runs it: ``LSTMTraining``, whose extra outputs are the backward's
    reserve (the activated gates and the cells); its Y is named even where nobody read it
    (the backward reads it)."""
    direction = node.attr("direction", "forward")
    if (direction.decode() if isinstance(direction, bytes) else direction) != "forward":
        raise GraphError(f"{node}: training supports the forward direction only, got "
                         f"{direction!r}")
    if len(node.inputs) > 7 and node.inputs[7] or node.attr("clip") is not None:
        raise GraphError(f"{node}: no gradient with peepholes or clip (the DNN library's "
                         "LSTM has neither)")
    outputs = (list(node.outputs) + ["", ""])[:3]
    outputs[0] = outputs[0] or f"{node.name}/Y"
    return Node(node.name, "LSTMTraining", list(node.inputs),
                outputs + [f"{node.name}/gates", f"{node.name}/cells"], dict(node.attrs),
                node.opset)


def _read_differentiably(order, name) -> bool:
    return any(node.op_type in DIFFERENTIABLE and name in
               [node.inputs[i] for i in _positions(node) if i < len(node.inputs)]
               for node in order)


class _Builder:
    """The backward nodes being built and each tensor's gradient contributions so far."""

    def __init__(self, graph, info):
        self.info = info
        self.nodes, self.constants = [], {}
        self.pending = {}           # tensor -> [gradient contributions]
        self.taken = set(info) | {n.name for n in graph.nodes}

    def name(self, wanted: str) -> str:
        name, k = wanted, 1
        while name in self.taken:
            name, k = f"{wanted}.{k}", k + 1
        self.taken.add(name)
        return name

    def constant(self, wanted, value) -> str:
        name = self.name(wanted)
        self.constants[name] = value
        return name

    def add(self, op_type, inputs, outputs, forward: Node = None, name=None,
            attrs=None) -> list:
        """A backward node; ``outputs``: wanted names ("" for outputs nobody reads). Its
        attributes: ``attrs``, else the forward node's."""
        outputs = [self.name(o) if o else "" for o in outputs]
        if attrs is None:
            attrs = dict(forward.attrs) if forward else {}
        self.nodes.append(Node(self.name(name or f"{forward.name}/grad"), op_type, list(inputs),
                               outputs, attrs, forward.opset if forward else 0))
        return outputs

    def contribute(self, tensor, grad) -> None:
        self.pending.setdefault(tensor, []).append(grad)

    def total(self, tensor) -> str:
        """The gradient of ``tensor``: its one contribution, or their Sum (on the CPEs)."""
        parts = self.pending[tensor]
        if len(parts) > 1:
            (total,) = self.add("Sum", parts, [f"grad/{tensor}"], name=f"grad/{tensor}/sum")
            self.pending[tensor] = [total]
        return self.pending[tensor][0]


def _grad_names(node, needs):
    return [f"grad/{name}" if need else "" for name, need in zip(node.inputs, needs)]


def _conv(builder, node, dys, needs):
    return builder.add("ConvGrad", [dys[0]] + node.inputs[:2], _grad_names(node, needs), node)


def _gemm(builder, node, dys, needs):
    return builder.add("GemmGrad", [dys[0]] + node.inputs, _grad_names(node, needs), node)


def _unary(op_type, reads_output=False):
    """Gradient operator op_type(dy, x) (or (dy, y) when it reads the forward output)."""
    def rule(builder, node, dys, needs):
        forward = node.outputs[0] if reads_output else node.inputs[0]
        return builder.add(op_type, [dys[0], forward], _grad_names(node, needs)[:1], node)
    return rule


def _maxpool(builder, node, dys, needs):
    return builder.add("MaxPoolGrad", [dys[0], node.inputs[0], node.outputs[1]],
                       _grad_names(node, needs), node)


def _pool(builder, node, dys, needs):
    if len(node.outputs) > 1 and node.outputs[1]:
        raise GraphError(f"{node}: no gradient through the Indices output")
    return _unary(node.op_type + "Grad")(builder, node, dys, needs)


def _view(builder, node, dys, needs):
    """Reshape, Flatten, Identity: the gradient viewed in the input's shape (no data moves)."""
    shape = builder.constant(f"grad/{node.name}/shape",
                             np.array(builder.info[node.inputs[0]].shape, np.int64))
    return builder.add("Reshape", [dys[0], shape], _grad_names(node, needs)[:1], node) + \
        [None] * (len(node.inputs) - 1)


def _aligned(builder, node, index) -> tuple:
    """Input ``index``'s shape as it broadcast against the output (opset < 7's
    ``broadcast=1, axis=`` aligns the second operand at ``axis``: padded on the right)."""
    shape = builder.info[node.inputs[index]].shape
    out = builder.info[node.outputs[0]].shape
    if index == 1 and node.opset < 7 and node.attr("broadcast", 0) and len(shape) < len(out):
        axis = node.attr("axis", len(out) - len(shape)) % len(out)
        return tuple(shape) + (1,) * (len(out) - axis - len(shape))
    return tuple(shape)


def _reduce(builder, node, index, grad, alpha=1.0):
    """``grad`` (of the output's shape) given back to input ``index``: summed over the axes
    its broadcast stretched (SumTo), times alpha; ``grad`` itself when there is nothing to
    do."""
    name = node.inputs[index]
    aligned = _aligned(builder, node, index)
    if aligned == builder.info[node.outputs[0]].shape and alpha == 1.0:
        return grad
    attrs = dict(aligned=list(aligned), shape=list(builder.info[name].shape), alpha=alpha)
    (total,) = builder.add("SumTo", [grad], [f"grad/{name}"], node,
                           name=f"{node.name}/grad/sum{index}", attrs=attrs)
    return total


def _sum(builder, node, dys, needs):
    """Add, Sub, Sum: each input gets the output's gradient (Sub's second negated), summed
    over the axes its broadcast stretched."""
    signs = [1.0, -1.0] if node.op_type == "Sub" else [1.0] * len(node.inputs)
    return [_reduce(builder, node, i, dys[0], sign) if need else None
            for i, (need, sign) in enumerate(zip(needs, signs))]


def _product(builder, node, dys, needs):
    """Mul: da = dy b, db = dy a; Div: da = dy / b, db = -(dy / b) y (the forward's output),
    each then summed back to its operand's shape."""
    a, b = node.inputs
    grads = [None, None]
    if node.op_type == "Mul":
        for index, other in ((0, b), (1, a)):
            if needs[index]:
                (full,) = builder.add("Mul", [dys[0], other], [f"grad/{node.inputs[index]}/full"],
                                      node, name=f"{node.name}/grad/mul{index}")
                grads[index] = _reduce(builder, node, index, full)
        return grads
    (quotient,) = builder.add("Div", [dys[0], b], [f"grad/{a}/full"], node,
                              name=f"{node.name}/grad/div")
    if needs[0]:
        grads[0] = _reduce(builder, node, 0, quotient)
    if needs[1]:
        (full,) = builder.add("Mul", [quotient, node.outputs[0]], [f"grad/{b}/full"], node,
                              name=f"{node.name}/grad/mul", attrs={})
        grads[1] = _reduce(builder, node, 1, full, -1.0)
    return grads


def _matmul(builder, node, dys, needs):
    return builder.add("MatMulGrad", [dys[0]] + node.inputs, _grad_names(node, needs), node)


def _transpose(builder, node, dys, needs):
    """The inverse permutation (a Transpose too: the CPEs' layout transform where it fits)."""
    ndim = len(builder.info[node.inputs[0]].shape)
    perm = [int(p) for p in node.attr("perm", list(range(ndim))[::-1])]
    return builder.add("Transpose", [dys[0]], _grad_names(node, needs), node,
                       attrs=dict(perm=[int(i) for i in np.argsort(perm)]))


def _concat(builder, node, dys, needs):
    """ConcatGrad: the output's gradient cut into the inputs' pieces."""
    shapes = [builder.info[name].shape for name in node.inputs]
    axis = int(node.attr("axis", 0)) % len(shapes[0])
    return builder.add("ConcatGrad", [dys[0]], _grad_names(node, needs), node,
                       attrs=dict(axis=axis, split=[int(s[axis]) for s in shapes]))


def _batchnorm(builder, node, dys, needs):
    saved = node.outputs[3:5]
    return builder.add("BatchNormalizationGrad", [dys[0]] + node.inputs[:2] + saved,
                       _grad_names(node, needs)[:3], node) + [None, None]


def _lstm(builder, node, dys, needs):
    """LSTMGrad(dY, dY_h, dY_c, X, W, R, B, initial_h, initial_c, Y, gates, cells): the
    gradients of the inputs (sequence_lens gets none)."""
    x, w, r, b, _, h0, c0 = (list(node.inputs) + [""] * 7)[:7]
    inputs = [dy or "" for dy in dys[:3]] + [x, w, r, b, h0, c0] + [node.outputs[0]] + \
        node.outputs[3:5]
    return builder.add("LSTMGrad", inputs, _grad_names(node, needs), node)


def _layernorm(builder, node, dys, needs):
    return builder.add("LayerNormalizationGrad", [dys[0]] + node.inputs,
                       _grad_names(node, needs), node)


def _loss(builder, node, dys, needs):
    return builder.add("SoftmaxCrossEntropyLossGrad", [dys[0]] + node.inputs[:2],
                       _grad_names(node, needs)[:1], node) + [None]


RULES = {
    "Conv": _conv, "Gemm": _gemm, "MaxPool": _pool, "MaxPoolTraining": _maxpool,
    "AveragePool": _pool,
    "GlobalAveragePool": _unary("GlobalAveragePoolGrad"), "Relu": _unary("ReluGrad"),
    "BatchNormalizationTraining": _batchnorm,
    "Sigmoid": _unary("SigmoidGrad", reads_output=True),
    "Tanh": _unary("TanhGrad", reads_output=True),
    "Flatten": _view, "Reshape": _view, "Identity": _view, "Add": _sum, "Sum": _sum,
    "Sub": _sum, "Mul": _product, "Div": _product, "MatMul": _matmul, "Transpose": _transpose,
    "Concat": _concat, "Softmax": _unary("SoftmaxGrad", reads_output=True),
    "LogSoftmax": _unary("LogSoftmaxGrad", reads_output=True), "LRN": _unary("LRNGrad"),
    "SoftmaxCrossEntropyLoss": _loss, "LeakyRelu": _unary("LeakyReluGrad"),
    "Gelu": _unary("GeluGrad"), "LayerNormalization": _layernorm, "LSTMTraining": _lstm,
}
