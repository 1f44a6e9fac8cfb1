"""A float64 numpy reference of a Solver's training: the same graph, the same initial weights,
the same data order and the same update rule, with every layer's forward and backward written
here in numpy (nothing is shared with the VM's operators), so the VM's float32 losses can be
checked step by step (``swsim train --reference``; docs/train.md "Reference").

It splits the minibatch over the solver's core groups as the VM does (per-slice losses and
gradients, then their mean), so a layer whose result depends on the slice (BatchNorm's batch
statistics) is compared like for like."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .common import TrainError
from .data import Order
from .solver import Solver, adam_rate, learning_rate


def _padded(x, pad, value=0.0):
    return np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=value)


def _windows(xp, kernel, stride):
    """(B, C, OH, OW, k, k) views of the (padded) planes."""
    return sliding_window_view(xp, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]


def _scatter_windows(dwin, shape, kernel, stride, pad):
    """The adjoint of ``_windows(_padded(x))``: window gradients summed back into x's shape."""
    b, c, h, w = shape
    oh, ow = dwin.shape[2:4]
    dxp = np.zeros((b, c, h + 2 * pad, w + 2 * pad))
    for i in range(kernel):
        for j in range(kernel):
            dxp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] += dwin[..., i, j]
    return dxp[:, :, pad:pad + h, pad:pad + w]


def convolution(layer, bottoms, params):
    (x,) = bottoms
    win = _windows(_padded(x, layer.pad), layer.kernel, layer.stride)
    y = np.einsum("bchwij,ocij->bohw", win, params[0], optimize=True)
    if len(params) > 1:
        y = y + params[1][:, None, None]
    return [y], win


def convolution_backward(layer, win, diffs, bottoms, params):
    (x,), (dy,) = bottoms, diffs
    grads = [np.einsum("bchwij,bohw->ocij", win, dy, optimize=True)]
    if len(params) > 1:
        grads.append(dy.sum(axis=(0, 2, 3)))
    dwin = np.einsum("bohw,ocij->bchwij", dy, params[0], optimize=True)
    return [_scatter_windows(dwin, x.shape, layer.kernel, layer.stride, layer.pad)], grads


def pooling(layer, bottoms, params):
    """Max pooling takes the first maximum of a window in row-major order (padding is -inf);
    average pooling divides by kernel² (padding counts as zeros)."""
    (x,) = bottoms
    k = layer.kernel
    fill = -np.inf if layer.mode == "max" else 0.0
    win = _windows(_padded(x, layer.pad, fill), k, layer.stride)
    flat = win.reshape(win.shape[:4] + (k * k,))
    if layer.mode == "max":
        first = flat.argmax(axis=-1)
        return [np.take_along_axis(flat, first[..., None], -1)[..., 0]], first
    return [flat.sum(axis=-1) / (k * k)], None


def pooling_backward(layer, first, diffs, bottoms, params):
    (x,), (dy,) = bottoms, diffs
    k = layer.kernel
    if layer.mode == "max":
        dwin = (np.arange(k * k) == first[..., None]) * dy[..., None]
    else:
        dwin = np.repeat(dy[..., None] / (k * k), k * k, axis=-1)
    dwin = dwin.reshape(dy.shape + (k, k))
    return [_scatter_windows(dwin, x.shape, k, layer.stride, layer.pad)], []


def inner_product(layer, bottoms, params):
    (x,) = bottoms
    flat = x.reshape(len(x), -1)
    y = flat @ params[0].T
    return [y + params[1] if len(params) > 1 else y], flat


def inner_product_backward(layer, flat, diffs, bottoms, params):
    (dy,) = diffs
    grads = [dy.T @ flat] + ([dy.sum(axis=0)] if len(params) > 1 else [])
    return [(dy @ params[0]).reshape(bottoms[0].shape)], grads


ACTIVATIONS = {
    "ReLU": (lambda x: np.maximum(x, 0), lambda x, y: (x > 0).astype(np.float64)),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda x, y: y * (1 - y)),
    "TanH": (np.tanh, lambda x, y: 1 - y * y),
}


def activation(layer, bottoms, params):
    y = ACTIVATIONS[layer.param.type][0](bottoms[0])
    return [y], y


def activation_backward(layer, y, diffs, bottoms, params):
    return [diffs[0] * ACTIVATIONS[layer.param.type][1](bottoms[0], y)], []


def eltwise(layer, bottoms, params):
    a, b = bottoms
    return [layer.coeff[0] * a + layer.coeff[1] * b], None


def eltwise_backward(layer, cache, diffs, bottoms, params):
    return [c * diffs[0] for c in layer.coeff], []


def batch_norm(layer, bottoms, params):
    """Normalisation by the batch's mean and biased variance (TRAIN; no affine)."""
    (x,) = bottoms
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    invstd = 1 / np.sqrt(x.var(axis=(0, 2, 3), keepdims=True)
                         + layer.param.batch_norm_param.eps)
    normalised = (x - mean) * invstd
    return [normalised], (normalised, invstd)


def batch_norm_backward(layer, cache, diffs, bottoms, params):
    (normalised, invstd), (dy,) = cache, diffs
    count = dy.size // dy.shape[1]
    total = dy.sum(axis=(0, 2, 3), keepdims=True)
    along = (dy * normalised).sum(axis=(0, 2, 3), keepdims=True)
    return [invstd / count * (count * dy - total - normalised * along)], []


def scale(layer, bottoms, params):
    (x,) = bottoms
    y = x * params[0][:, None, None]
    return [y + params[1][:, None, None] if len(params) > 1 else y], None


def scale_backward(layer, cache, diffs, bottoms, params):
    (x,), (dy,) = bottoms, diffs
    grads = [(dy * x).sum(axis=(0, 2, 3))] + ([dy.sum(axis=(0, 2, 3))] if len(params) > 1
                                              else [])
    return [dy * params[0][:, None, None]], grads


def sequence_transpose(layer, bottoms, params):
    """(N, C, H, W) -> (H, N, C·W); (A, B, F) -> (B, A, F); (A, B) -> (B, A)."""
    (x,) = bottoms
    if x.ndim == 4:
        n, c, h, w = x.shape
        return [x.transpose(2, 0, 1, 3).reshape(h, n, c * w)], None
    return [np.swapaxes(x, 0, 1)], None


def sequence_transpose_backward(layer, cache, diffs, bottoms, params):
    (x,), (dy,) = bottoms, diffs
    if x.ndim == 4:
        n, c, h, w = x.shape
        return [dy.reshape(h, n, c, w).transpose(1, 2, 0, 3)], []
    return [np.swapaxes(dy, 0, 1)], []


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def lstm(layer, bottoms, params, state=None):
    """Gates i, f, g, o (the layer's order). Caffe's recurrence: at step t the previous h and c
    are multiplied by cont_t (the second bottom; without one, 0 at t = 0 and 1 after), the
    first previous ones being ``state`` = [h, c] (the last minibatch's, zero without), which
    gets this minibatch's last h, c. Keeps every step's gates and c."""
    x, (w, b, r) = bottoms[0], params
    steps, batch, _ = x.shape
    hidden = r.shape[1]
    cont = bottoms[1] if len(bottoms) > 1 else (np.arange(steps) > 0)[:, None].repeat(batch, 1)
    h, c = state if state is not None else (np.zeros((batch, hidden)),) * 2
    ys, gates, c_in, c_out, h_in = [], [], [], [], []
    for t in range(steps):
        h, c = cont[t][:, None] * h, cont[t][:, None] * c
        h_in.append(h)
        c_in.append(c)
        i, f, g, o = np.split(x[t] @ w.T + h @ r.T + b, 4, axis=1)
        i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
        c = f * c + i * g
        h = o * np.tanh(c)
        ys.append(h)
        gates.append((i, f, g, o))
        c_out.append(c)
    if state is not None:
        state[:] = [h, c]
    return [np.stack(ys)], (gates, c_in, c_out, np.stack(h_in), cont)


def lstm_backward(layer, cache, diffs, bottoms, params):
    """Backward through time to the minibatch's first step (truncated, as Caffe)."""
    (gates, c_in, c_out, h_in, cont), (dy,), x, (w, b, r) = cache, diffs, bottoms[0], params
    steps, batch, _ = x.shape
    hidden = r.shape[1]
    dh, dc = np.zeros((batch, hidden)), np.zeros((batch, hidden))
    dz = np.empty((steps, batch, 4 * hidden))
    for t in reversed(range(steps)):
        i, f, g, o = gates[t]
        tc = np.tanh(c_out[t])
        dh = dh + dy[t]
        dc = dc + dh * o * (1 - tc * tc)
        dz[t] = np.concatenate([dc * g * i * (1 - i), dc * c_in[t] * f * (1 - f),
                                dc * i * (1 - g * g), dh * tc * o * (1 - o)], axis=1)
        dc = dc * f * cont[t][:, None]
        dh = (dz[t] @ r) * cont[t][:, None]
    dw = np.einsum("tbg,tbi->gi", dz, x)
    dr = np.einsum("tbg,tbh->gh", dz, h_in)
    return [dz @ w] + [None] * (len(bottoms) - 1), [dw, dz.sum(axis=(0, 1)), dr]


def softmax_loss(layer, bottoms, params):
    logits, labels = bottoms
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    classes = labels.astype(np.int64)
    dlogits = np.exp(log_p)
    dlogits[rows, classes] -= 1
    return [np.array(-log_p[rows, classes].mean())], dlogits / len(labels)


def softmax_loss_backward(layer, dlogits, diffs, bottoms, params):
    return [dlogits, None], []


def euclidean_loss(layer, bottoms, params):
    a, b = bottoms
    diff = a.reshape(len(a), -1) - b.reshape(len(a), -1)
    return [np.array((diff * diff).sum() / (2 * len(a)))], diff / len(a)


def euclidean_loss_backward(layer, scaled, diffs, bottoms, params):
    return [(sign * scaled).reshape(bottom.shape) for sign, bottom in zip((1, -1), bottoms)], []


def accuracy(layer, bottoms, params):
    scores, labels = bottoms
    top = np.argsort(-scores, axis=1, kind="stable")[:, :layer.param.accuracy_param.top_k]
    return [np.array((top == labels.astype(np.int64)[:, None]).any(axis=1).mean())], None


LAYERS = {      # type -> (forward, backward); forward returns (tops, what backward needs)
    "Convolution": (convolution, convolution_backward),
    "Pooling": (pooling, pooling_backward),
    "InnerProduct": (inner_product, inner_product_backward),
    "ReLU": (activation, activation_backward),
    "Sigmoid": (activation, activation_backward),
    "TanH": (activation, activation_backward),
    "Eltwise": (eltwise, eltwise_backward),
    "BatchNorm": (batch_norm, batch_norm_backward),
    "Scale": (scale, scale_backward),
    "SequenceTranspose": (sequence_transpose, sequence_transpose_backward),
    "LSTM": (lstm, lstm_backward),
    "SoftmaxWithLoss": (softmax_loss, softmax_loss_backward),
    "EuclideanLoss": (euclidean_loss, euclidean_loss_backward),
    "Accuracy": (accuracy, None),
}


def sgd(solver, lr, step, params, grads, state):
    """Caffe's SGD: v' = lr (g + wd w) + μ v, w' = w - v'."""
    for p, g, v in zip(params, grads, state["history"]):
        v[...] = lr * (g + solver.weight_decay * p) + solver.momentum * v
        p -= v


def adam(solver, lr, step, params, grads, state):
    """Caffe's Adam: g' = g + wd w, m' = β1 m + (1 - β1) g', v' = β2 v + (1 - β2) g'²,
    w' = w - lr_t m' / (√v' + δ) with ``adam_rate``'s lr_t."""
    beta1, beta2 = solver.momentum, solver.momentum2
    lr_t = adam_rate(solver, lr, step)
    for p, g, m, v in zip(params, grads, state["history"], state["second_moment"]):
        g = g + solver.weight_decay * p
        m[...] = beta1 * m + (1 - beta1) * g
        v[...] = beta2 * v + (1 - beta2) * g * g
        p -= lr_t * m / (np.sqrt(v) + solver.delta)


UPDATES = {"SGD": sgd, "Adam": adam}


class Reference:
    """The float64 twin of ``solver`` from its current state (weights, step, data position):
    ``step()`` returns the loss of the next minibatch, then updates, as ``Solver.step``."""

    def __init__(self, solver: Solver):
        net = solver.net
        unknown = sorted({n.layer.param.type for n in net.nodes
                          if n.layer.param.type not in LAYERS and n.layer.param.type != "Data"})
        if unknown:
            raise TrainError(f"the float64 reference has no layer type {', '.join(unknown)}")
        if solver.solver.type not in UPDATES:
            raise TrainError(f"the float64 reference has no solver type {solver.solver.type!r}")
        self.solver, self.net = solver.solver, net
        self.params = {name: net.params[name].astype(np.float64) for name in net.params.layout}
        self.state = {key: [net.params.member(buffer, name).astype(np.float64)
                            for name in self.params]
                      for key, buffer in (("history", solver.history),
                                          ("second_moment", solver.second_moment))}
        self.step_count = solver.step_count
        self.order = Order(solver.order.dataset, solver.order.batch_size, solver.order.seed)
        self.position = solver.feed.position
        self.slices = solver.cgs * solver.shards      # every node's core groups: the global mean
        # the LSTMs' carried h, c per (phase, slice, layer), from the core groups' replicas
        self.recurrent = {("TRAIN", k, node.layer.name): [replica.state[name].astype(np.float64)
                                                          for name in node.state]
                          for k, replica in enumerate(solver.replicas)
                          for node in replica.nodes if node.layer.carries_state and node.state}

    def forward(self, net, *batch, piece=0):
        """Every blob of ``net``'s forward pass on ``batch`` (the Data layer's tops) as slice
        ``piece`` (whose carried LSTM state it reads and updates), and what backward needs."""
        blobs, caches = {}, {}
        for node in net.nodes:
            kind = node.layer.param.type
            if kind == "Data":
                tops = [array.astype(np.float64) for array in batch]
            else:
                state = {}
                if node.layer.carries_state and node.state:
                    state["state"] = self.recurrent.setdefault(
                        (net.phase, piece, node.layer.name),
                        [np.zeros(shape) for shape in node.layer.state_shapes])
                tops, caches[node.layer.name] = LAYERS[kind][0](
                    node.layer, [blobs[b] for b in node.bottoms], self._params(node), **state)
            blobs.update(zip(node.tops, tops))
        return blobs, caches

    def gradients(self, *batch, piece=0):
        """The loss of one slice and the gradients of every parameter (zero if unused)."""
        blobs, caches = self.forward(self.net, *batch, piece=piece)
        loss = float(sum(blobs[n.tops[0]] for n in self.net.losses))
        diffs = {n.tops[0]: np.ones(()) for n in self.net.losses}
        grads = {name: np.zeros_like(value) for name, value in self.params.items()}
        for node in reversed(self.net.nodes):
            backward = LAYERS.get(node.layer.param.type, (None, None))[1]
            top_diffs = [diffs.get(t) for t in node.tops]
            if backward is None or all(d is None for d in top_diffs):
                continue
            bottom_diffs, param_grads = backward(
                node.layer, caches[node.layer.name], top_diffs,
                [blobs[b] for b in node.bottoms], self._params(node))
            grads.update(zip(node.params, param_grads))
            for name, diff in zip(node.bottoms, bottom_diffs):
                if diff is not None:
                    diffs[name] = diff if name not in diffs else diffs[name] + diff
        return loss, grads

    def step(self) -> float:
        """The next minibatch's loss (the mean over the core groups' slices, as the VM), then
        one update with the slices' mean gradient."""
        batch = self.order.batch(self.position)
        self.position += 1
        size = len(batch[0]) // self.slices
        losses, grads = [], {name: 0.0 for name in self.params}
        for k in range(self.slices):
            rows = slice(k * size, (k + 1) * size)
            loss, slice_grads = self.gradients(*(array[rows] for array in batch), piece=k)
            losses.append(loss)
            for name, grad in slice_grads.items():
                grads[name] = grads[name] + grad / self.slices
        names = list(self.params)
        lr = learning_rate(self.solver, self.step_count)
        UPDATES[self.solver.type](self.solver, lr, self.step_count,
                                  [self.params[n] for n in names],
                                  [grads[n] for n in names], self.state)
        self.step_count += 1
        return float(np.mean(losses))

    def _params(self, node) -> list:
        return [self.params[p] for p in node.params]
