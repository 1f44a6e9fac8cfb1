"""Element-wise operators on the streaming driver: ``add`` (residuals), ``scale`` and
``sgd_update`` (Caffe's SGD with momentum and weight decay)."""
from __future__ import annotations

from . import stream
from .common import float_arrays, same_shape, scalar


def add(a, b, alpha=1.0, beta=1.0, *, machine=None, cgs=1, engine="c"):
    """alpha a + beta b on the VM; returns (result, Stats)."""
    a, b = float_arrays(a=a, b=b)
    same_shape(a=a, b=b)
    (out,), stats = stream.run("axpby", [a, b], [scalar("alpha", alpha), scalar("beta", beta)],
                               machine=machine, cgs=cgs, engine=engine)
    return out.reshape(a.shape), stats


def scale(x, alpha, *, machine=None, cgs=1, engine="c"):
    """alpha x on the VM; returns (result, Stats)."""
    (x,) = float_arrays(x=x)
    (out,), stats = stream.run("scale", [x], [scalar("alpha", alpha)], machine=machine,
                               cgs=cgs, engine=engine)
    return out.reshape(x.shape), stats


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
