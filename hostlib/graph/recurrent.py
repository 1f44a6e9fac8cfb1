"""ONNX's LSTM on the graph (docs/graph.md "LSTM"): the operator (its shape function, MPE
implementation and cost), its CPE path on the DNN library's LSTM (``dnn.lstm_forward``, the
tensorized kernel), and for training ``LSTMTraining`` (the forward keeping the backward's
reserve: the activated gates and the cells) and ``LSTMGrad`` (``dnn.lstm_backward`` given that
reserve). Importing this module (the package does) registers them in ``ops.OPS`` /
``ops.TRAINING`` and ``cpe.CPE``.

ONNX's conventions: W (D, 4H, I), R (D, 4H, H) with the gates in the order i, o, f, c; B (D, 8H)
the input and recurrence biases; Y (T, D, B, H), Y_h and Y_c (D, B, H) (``layout=1``: batch
first, X (B, T, I), Y (B, T, D, H), Y_h (B, D, H)). The DNN library's are PyTorch's: time
first, gates i, f, g, o, one bias. The CPE path permutes the gate rows and the axes (host
copies) and gives the recurrence bias to the kernel as one more input column of ones whose
weights are Rb (so the two biases are added by the hoisted GEMM, on the CPEs)."""
from __future__ import annotations

import numpy as np

from .. import dnn
from ..dnn.lstm import Reserve
from .cpe import CPE, NotSuitable, _floats, _launch
from .ir import GraphError
from .ops import OPS, TRAINING, Op, TensorInfo

# the library's gate blocks (i, f, g, o) are ONNX's blocks (i, o, f, c) in this order
LIBRARY_GATES = (0, 2, 3, 1)
ONNX_GATES = tuple(int(k) for k in np.argsort(LIBRARY_GATES))
DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")
DIRECTIONS = ("forward", "reverse", "bidirectional")


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _direction(node) -> str:
    return _text(node.attr("direction", "forward"))


def _reversed(node, d: int) -> bool:
    """Whether direction ``d`` of the node runs from the last step to the first."""
    return _direction(node) == "reverse" or d == 1


# ---- arguments --------------------------------------------------------------------------

def _lstm_check(node, info):
    if _direction(node) not in DIRECTIONS:
        return f"direction {_direction(node)!r} is none of {', '.join(DIRECTIONS)}"
    activations = node.attr("activations")
    if activations is not None:
        names = [_text(a) for a in activations]
        if names != list(DEFAULT_ACTIVATIONS) * (len(names) // 3) or not names:
            return f"activations {names}: only ONNX's default Sigmoid, Tanh, Tanh"
    if node.attr("input_forget", 0):
        return "input_forget=1 is not implemented"
    if len(info[0].shape) != 3:
        return f"X must be 3-D, got {len(info[0].shape)}-D"
    return None


def _time_major(node, x):
    """X or a state (layout 1: batch first) in the time-major / direction-major layout."""
    return np.swapaxes(x, 0, 1) if node.attr("layout", 0) else x


def _lstm_shape(node, info):
    x, w = info[0].shape, info[1].shape
    steps, batch = (x[1], x[0]) if node.attr("layout", 0) else x[:2]
    dirs, hidden = w[0], int(node.attr("hidden_size", info[2].shape[-1]))
    if node.attr("layout", 0):
        y, state = (batch, steps, dirs, hidden), (batch, dirs, hidden)
    else:
        y, state = (steps, dirs, batch, hidden), (dirs, batch, hidden)
    dtype = info[0].dtype
    outputs = [TensorInfo(dtype, y), TensorInfo(dtype, state), TensorInfo(dtype, state)]
    if node.op_type == "LSTMTraining":   # + the reserve: activated gates, cells (time-major)
        outputs += [TensorInfo(dtype, (steps, batch, 4 * hidden)),
                    TensorInfo(dtype, (steps, batch, hidden))]
    return outputs[:len(node.outputs)]


def _lstm_flops(node, inputs, outputs):
    """The products of every step and direction: 2 flops per multiply-add of W x_t and
    R h_{t-1} (the gates' element-wise work is small beside them)."""
    x, w, r = inputs[:3]
    return 2 * int(x.shape[0] * x.shape[1]) * int(w.shape[0] * w.shape[1]) * \
        int(w.shape[2] + r.shape[2])


def _lstm_grad_flops(node, inputs, outputs):
    """The backward's products: dG R per step, then dW, dR and dx (twice the forward's)."""
    return 2 * _lstm_flops(node, inputs[3:6], outputs)


# ---- MPE implementations (numpy, float64 inside) ----------------------------------------

def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _operands(node, inputs):
    """The inputs as float64 in the time-major layout, the optional ones filled in:
    (x, W, R, Wb, Rb, h0, c0, P). sequence_lens shorter than the sequence are refused."""
    x, w, r, b, lens, h0, c0, p = (list(inputs) + [None] * 8)[:8]
    x = _time_major(node, x.astype(np.float64))
    steps, batch = x.shape[:2]
    dirs, hidden = w.shape[0], r.shape[-1]
    if lens is not None and np.any(np.asarray(lens) != steps):
        raise GraphError(f"{node}: sequence_lens {np.asarray(lens).tolist()} shorter than the "
                         f"{steps} steps are not implemented")
    zeros = np.zeros((dirs, batch, hidden))
    b = np.zeros((dirs, 8 * hidden)) if b is None else b.astype(np.float64)
    h0, c0 = (zeros if s is None else _time_major(node, s.astype(np.float64))
              for s in (h0, c0))
    p = np.zeros((dirs, 3 * hidden)) if p is None else p.astype(np.float64)
    return (x, w.astype(np.float64), r.astype(np.float64), b[:, :4 * hidden],
            b[:, 4 * hidden:], h0, c0, p)


def _recurrence(node, x, w, r, bias, h, c, p):
    """One direction over time-major x: (y (T, B, H), the activated gates in the library's
    order (T, B, 4H), the cells (T, B, H)), ONNX's equations (peepholes p, ``clip``)."""
    hidden = r.shape[1]
    clip = node.attr("clip")
    ys, gates, cells = [], [], []
    for x_t in x:
        z = x_t @ w.T + h @ r.T + bias
        zi, zo, zf, zc = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
        zi, zf = zi + p[:hidden] * c, zf + p[2 * hidden:] * c
        if clip is not None:
            zi, zf, zc = (np.clip(v, -clip, clip) for v in (zi, zf, zc))
        i, f, g = _sigmoid(zi), _sigmoid(zf), np.tanh(zc)
        c = f * c + i * g
        zo = zo + p[hidden:2 * hidden] * c
        o = _sigmoid(np.clip(zo, -clip, clip) if clip is not None else zo)
        h = o * np.tanh(c)
        ys.append(h)
        gates.append(np.concatenate([i, f, g, o], axis=1))
        cells.append(c)
    return np.stack(ys), np.stack(gates), np.stack(cells)


def _sequence(node, y):
    """The one direction of Y as (T, B, H)."""
    return np.swapaxes(y[:, :, 0], 0, 1) if node.attr("layout", 0) else y[:, 0]


def _outputs(node, ys, hs, cs, dtype):
    """Y (T, D, B, H), Y_h, Y_c (D, B, H) in the node's layout."""
    y, h, c = np.stack(ys, axis=1), np.stack(hs), np.stack(cs)
    if node.attr("layout", 0):
        y, h, c = np.transpose(y, (2, 0, 1, 3)), np.swapaxes(h, 0, 1), np.swapaxes(c, 0, 1)
    return tuple(np.ascontiguousarray(a).astype(dtype) for a in (y, h, c))


def lstm(node, *inputs):
    x, w, r, wb, rb, h0, c0, p = _operands(node, inputs)
    ys, hs, cs, reserve = [], [], [], []
    for d in range(w.shape[0]):
        flip = _reversed(node, d)
        y, gates, cells = _recurrence(node, x[::-1] if flip else x, w[d], r[d], wb[d] + rb[d],
                                      h0[d], c0[d], p[d])
        ys.append(y[::-1] if flip else y)
        hs.append(y[-1])
        cs.append(cells[-1])
        reserve += [gates, cells]
    outputs = _outputs(node, ys, hs, cs, inputs[0].dtype)
    if node.op_type == "LSTMTraining":
        outputs += tuple(a.astype(inputs[0].dtype) for a in reserve)
    return outputs


def _library_rows(matrix):
    """ONNX's gate blocks of a (4H, ...) matrix or (4H,) vector in the library's order."""
    blocks = np.split(matrix, 4)
    return np.concatenate([blocks[k] for k in LIBRARY_GATES])


def _onnx_rows(matrix):
    blocks = np.split(matrix, 4)
    return np.concatenate([blocks[k] for k in ONNX_GATES])


def _gradient_operands(node, inputs):
    """LSTMGrad's inputs: (dy, dh_n, dc_n) time-major (zeros for gradients nobody gave),
    then the forward's (x, W, R, B, h0, c0) as given, then the reserve (y, gates, cells)."""
    dy, dh_n, dc_n, x, w, r, b, h0, c0, y, gates, cells = (list(inputs) + [None] * 12)[:12]
    steps, batch, hidden = cells.shape
    dy = np.zeros((steps, 1, batch, hidden), x.dtype) if dy is None else \
        (np.transpose(dy, (1, 2, 0, 3)) if node.attr("layout", 0) else dy)
    states = [np.zeros((batch, hidden), x.dtype) if s is None else _time_major(node, s)[0]
              for s in (dh_n, dc_n)]
    return (np.ascontiguousarray(dy[:, 0]), *states, x, w, r, b, h0, c0, y, gates, cells)


def _gradient_outputs(node, x, dx, dh0, dc0, dw, dr, db):
    """The gradients of the forward's inputs in ONNX's layouts and gate order; None for
    those nobody needs."""
    dx = _time_major(node, dx)
    dw, dr, db = _onnx_rows(dw)[None], _onnx_rows(dr)[None], _onnx_rows(db)
    states = [_time_major(node, s[None]) for s in (dh0, dc0)]
    values = [dx, dw, dr, np.concatenate([db, db])[None], None] + states
    return tuple(None if not out else np.ascontiguousarray(v).astype(x.dtype)
                 for v, out in zip(values, node.outputs))


def lstm_grad(node, *inputs):
    """Backward through time (one forward direction, no peepholes or clip: the training
    check) from the reserve, in the library's gate order, as dnn.lstm_backward computes it."""
    dy, dh, dc, x, w, r, b, h0, c0, y, gates, cells = _gradient_operands(node, inputs)
    x64, (w64, r64) = _time_major(node, x).astype(np.float64), (
        _library_rows(m[0].astype(np.float64)) for m in (w, r))
    steps, batch, hidden = cells.shape
    h_first, c_first = (np.zeros((batch, hidden)) if s is None else
                        _time_major(node, s)[0].astype(np.float64) for s in (h0, c0))
    dh, dc = dh.astype(np.float64), dc.astype(np.float64)
    # each gate's derivative by its pre-activation, from its activated value
    a = gates.astype(np.float64)
    slopes = a * (1 - a)
    slopes[..., 2 * hidden:3 * hidden] = 1 - a[..., 2 * hidden:3 * hidden] ** 2
    d_pre = np.zeros(gates.shape)
    for t in reversed(range(steps)):
        i, f, g, o = np.split(a[t], 4, axis=1)
        dh = dh + dy[t]
        tc = np.tanh(cells[t].astype(np.float64))
        dc = dc + dh * o * (1 - tc ** 2)
        c_prev = c_first if t == 0 else cells[t - 1].astype(np.float64)
        d_pre[t] = slopes[t] * np.concatenate([dc * g, dc * c_prev, dc * i, dh * tc], axis=1)
        dc, dh = dc * f, d_pre[t] @ r64
    flat = d_pre.reshape(-1, 4 * hidden)
    h_prev = np.concatenate([h_first[None], _sequence(node, y)[:-1].astype(np.float64)])
    h_prev = h_prev.reshape(-1, hidden)
    dx = (flat @ w64).reshape(x64.shape)
    return _gradient_outputs(node, x, dx, dh, dc, flat.T @ x64.reshape(-1, x64.shape[2]),
                             flat.T @ h_prev, flat.sum(axis=0))


def _grad_shape(node, info):
    forward = info[3:]        # x, W, R, B, (sequence_lens), h0, c0 as the forward's
    names = ["x", "w", "r", "b", "lens", "h0", "c0"]
    shapes = dict(zip(names[:4], forward[:4]))
    shapes.update(h0=forward[4], c0=forward[5])
    return [shapes.get(name) for name, out in zip(names, node.outputs)]


# ---- CPE implementations ----------------------------------------------------------------

def _library_operands(node, x, w, r, b, h0, c0, d):
    """Direction d's operands as dnn.lstm_forward takes them (host copies: axes, gate rows,
    the recurrence bias as the weights of a column of ones appended to x)."""
    x = _time_major(node, x)
    x = x[::-1] if _reversed(node, d) else x
    steps, batch, _ = x.shape
    hidden = r.shape[-1]
    w_lib, r_lib = _library_rows(w[d]), _library_rows(r[d])
    bias = np.zeros(4 * hidden, x.dtype)
    if b is not None:
        bias = _library_rows(b[d, :4 * hidden])
        x = np.concatenate([x, np.ones((steps, batch, 1), x.dtype)], axis=2)
        w_lib = np.concatenate([w_lib, _library_rows(b[d, 4 * hidden:])[:, None]], axis=1)
    states = [np.zeros((batch, hidden), x.dtype) if s is None else _time_major(node, s)[d]
              for s in (h0, c0)]
    return [np.ascontiguousarray(a) for a in (x, *states, w_lib, r_lib, bias)]


def _cpe_suitable(node, inputs):
    x, w, r, b, lens, h0, c0, p = (list(inputs) + [None] * 8)[:8]
    _floats(node, x, w, r, b, h0, c0)
    if p is not None or node.attr("clip") is not None:
        raise NotSuitable("peepholes and clip: the DNN library's LSTM has neither")
    if lens is not None and np.any(np.asarray(lens) != _time_major(node, x).shape[0]):
        raise NotSuitable("sequence_lens shorter than the sequence")
    return x, w, r, b, h0, c0


def cpe_lstm(node, inputs, on):
    """dnn.lstm_forward (the tensorized kernel; the baseline when its state does not fit in
    LDM) per direction; LSTMTraining keeps the reserve it writes (``reserve=True``)."""
    x, w, r, b, h0, c0 = _cpe_suitable(node, inputs)
    training = node.op_type == "LSTMTraining"
    ys, hs, cs, reserve, parts = [], [], [], [], []
    for d in range(w.shape[0]):
        (y, h, c), stats = _launch(dnn.lstm_forward, *_library_operands(node, x, w, r, b, h0,
                                                                         c0, d),
                                   algo="tensorized", reserve=training, **on)
        ys.append(y[::-1] if _reversed(node, d) else y)
        hs.append(h)
        cs.append(c)
        parts.append(stats)
        if training:
            reserve += [stats.reserve.gates, stats.reserve.c]
    outputs = _outputs(node, ys, hs, cs, x.dtype) + tuple(reserve)
    return outputs, parts, "lstm " + "+".join(sorted({s.algo for s in parts}))


def cpe_lstm_grad(node, inputs, on):
    """dnn.lstm_backward from the forward's reserve (no forward re-run)."""
    dy, dh, dc, x, w, r, b, h0, c0, y, gates, cells = _gradient_operands(node, inputs)
    _floats(node, dy, x, w, r, y, gates, cells)
    x_lib, h_first, c_first, w_lib, r_lib, bias = _library_operands(node, x, w, r, None, h0,
                                                                    c0, 0)
    y_seq = np.ascontiguousarray(_sequence(node, y))
    (dx, dh0, dc0, dw, dr, db), stats = _launch(
        dnn.lstm_backward, dy, x_lib, h_first, c_first, w_lib, r_lib, bias, dh_n=dh, dc_n=dc,
        reserve=Reserve(y_seq, gates, cells), **on)
    return _gradient_outputs(node, x, dx, dh0, dc0, dw, dr, db), [stats], \
        "lstm_backward (reserve)"


def _register():
    OPS["LSTM"] = Op(lstm, "gemm", check=_lstm_check, shape=_lstm_shape, flops=_lstm_flops)
    TRAINING["LSTMTraining"] = OPS["LSTM"]
    TRAINING["LSTMGrad"] = Op(lstm_grad, "gemm", shape=_grad_shape, flops=_lstm_grad_flops)
    CPE.update(LSTM=cpe_lstm, LSTMTraining=cpe_lstm, LSTMGrad=cpe_lstm_grad)


_register()
