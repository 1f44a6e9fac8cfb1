"""Element-wise operators on the streaming driver: ``add`` (residuals), ``scale`` and
``sgd_update`` (Caffe's SGD with momentum and weight decay) and ``adam_update`` (Caffe's Adam)."""
from __future__ import annotations

from ..runtime import host_operator
from . import stream
from .common import combined, float_arrays, machine_and_cgs, same_shape, scalar


@host_operator
def add(a, b, alpha=1.0, beta=1.0, *, machine=None, cgs=1, engine="c"):
    """alpha a + beta b on the VM; returns (result, Stats)."""
    a, b = float_arrays(a=a, b=b)
    same_shape(a=a, b=b)
    (out,), stats = stream.run("axpby", [a, b], [scalar("alpha", alpha), scalar("beta", beta)],
                               machine=machine, cgs=cgs, engine=engine)
    return out.reshape(a.shape), stats


@host_operator
def scale(x, alpha, *, machine=None, cgs=1, engine="c"):
    """alpha x on the VM; returns (result, Stats)."""
    (x,) = float_arrays(x=x)
    (out,), stats = stream.run("scale", [x], [scalar("alpha", alpha)], machine=machine,
                               cgs=cgs, engine=engine)
    return out.reshape(x.shape), stats


@host_operator
def sgd_update(param, grad, velocity, lr, momentum=0.0, weight_decay=0.0, *, machine=None,
               cgs=1, engine="c"):
    """One step of Caffe's SGD (SGDSolver::ComputeUpdateValue + Blob::Update) on the VM:
    v' = lr (grad + weight_decay param) + momentum v, param' = param - v'.
    Returns ((param', v'), Stats); the inputs are not modified."""
    param, grad, velocity = float_arrays(param=param, grad=grad, velocity=velocity)
    same_shape(param=param, grad=grad, velocity=velocity)
    (new_param, new_velocity), stats = stream.run(
        "sgd", [param, grad, velocity],
        [scalar("lr", lr), scalar("momentum", momentum), scalar("weight_decay", weight_decay)],
        machine=machine, cgs=cgs, engine=engine)
    return (new_param.reshape(param.shape), new_velocity.reshape(param.shape)), stats


@host_operator
def adam_update(param, grad, m, v, lr_t, beta1, beta2, eps, weight_decay=0.0, *, machine=None,
                cgs=1, engine="c"):
    """One step of Caffe's Adam (AdamSolver::ComputeUpdateValue after Regularize) on the VM,
    with the step's learning rate lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t) from the host:
    g' = grad + weight_decay param, m' = beta1 m + (1 - beta1) g',
    v' = beta2 v + (1 - beta2) g'^2, param' = param - lr_t m' / (sqrt(v') + eps).
    Returns ((param', m', v'), Stats); the inputs are not modified.

    The driver's 3 input streams cannot hold param, grad, m and v, so it runs as passes:
    ``add`` (g', only when weight_decay != 0), ``adam_moments`` (g', m, v -> m', v') and
    ``adam_step`` (param, m', v' -> param'). Stats: the passes' ``combined``, with the bandwidth
    of what Adam must move (4 streams in, 3 out)."""
    param, grad, m, v = float_arrays(param=param, grad=grad, m=m, v=v)
    same_shape(param=param, grad=grad, m=m, v=v)
    lr_t, beta1, beta2, eps, weight_decay = (
        scalar(name, value) for name, value in (("lr_t", lr_t), ("beta1", beta1),
                                                ("beta2", beta2), ("eps", eps),
                                                ("weight_decay", weight_decay)))
    machine, cgs = machine_and_cgs(machine, cgs)
    on = dict(machine=machine, cgs=cgs, engine=engine)
    parts = []
    if weight_decay != 0.0:
        (grad,), stats = stream.run("axpby", [grad, param], [1.0, weight_decay], **on)
        parts.append(stats)
    (new_m, new_v), stats = stream.run("adam_moments", [grad, m, v],
                                       [beta1, 1.0 - beta1, beta2, 1.0 - beta2], **on)
    parts.append(stats)
    (new_param,), stats = stream.run("adam_step", [param, new_m, new_v], [lr_t, eps], **on)
    parts.append(stats)
    n, es = param.size, param.dtype.itemsize
    total = stream.with_bandwidth(combined(parts, op="adam", n=n, dtype=param.dtype.name,
                                           cgs=cgs, passes=len(parts)),
                                  machine.config, (4 * n * es, 3 * n * es), cgs)
    return tuple(a.reshape(param.shape) for a in (new_param, new_m, new_v)), total
