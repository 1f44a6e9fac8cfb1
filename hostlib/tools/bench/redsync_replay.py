"""A float64 numpy replay of the accuracy runs' RGC (``redsync_accuracy``), for diagnosis only:
Algorithm 10 with DGC's momentum correction and masking as ``train.redsync.RedSync`` does it,
at `ranks` simulated ranks in one process, the gradients from ``train.reference`` (each rank's
slice of the minibatch, as the Solver's shards), an exact top-k per blob instead of the CPE
selection (which sends k ... 2k), the dense warm-up, optionally DGC's local gradient clipping.
No emulator: 300 LeNet steps take ~12 s of CPU where 150 emulated ones take ~10 min, so
warm-ups and seeds can be swept; the emulated runs remain the measurement (docs/redsync.md,
"Why LeNet diverged at 0.1 %"). Prints one JSON line per test: the test accuracy, the training
loss, rank 0's residual norm (all blobs) and the largest weight step since the last test.

    python -m swsim.hostlib.tools.bench.redsync_replay --net lenet --density 0.001 --warmup 10
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np


def _clipped(grads: dict, clip_norm: float, ranks: int) -> dict:
    """DGC's local clipping: this rank's gradient scaled to a norm of at most clip/sqrt(p)."""
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    limit = clip_norm / math.sqrt(ranks)
    return grads if not clip_norm or norm <= limit else \
        {name: g * (limit / norm) for name, g in grads.items()}


def replay(net: str = "lenet", steps: int = 150, density: float = 0.001, warmup: int = 10,
           seed: int = 1, ranks: int = 4, test_every: int = 75, clip_norm: float = 0.0,
           dense: bool = False):
    """Yields a dict per test (every `test_every` steps and the last)."""
    from ...train import Solver, example, parse_net, parse_solver
    from ...train.data import Order
    from ...train.reference import Reference
    from ...train.solver import learning_rate
    from .redsync_accuracy import NETS
    parameters = parse_solver(example(NETS[net]))
    parameters.random_seed = seed
    solver = Solver(parse_net(example(net)), parameters, shard=(0, ranks))   # its start only
    reference = Reference(solver)
    weights = reference.params
    momentum, decay = parameters.momentum, parameters.weight_decay
    velocity = {n: np.zeros((ranks, *w.shape)) for n, w in weights.items()}   # u per rank
    residual = {n: np.zeros((ranks, *w.shape)) for n, w in weights.items()}   # V per rank
    largest_step = 0.0
    for step in range(steps):
        batch = reference.order.batch(reference.position)
        reference.position += 1
        size = len(batch[0]) // ranks
        losses, grads = [], []
        for k in range(ranks):
            loss, g = reference.gradients(*(a[k * size:(k + 1) * size] for a in batch), piece=k)
            losses.append(loss)
            grads.append(_clipped(g, clip_norm, ranks))
        lr = learning_rate(parameters, step)
        for name, w in weights.items():
            rank_grads = np.stack([g[name] for g in grads])
            if dense or step < warmup:            # the allreduce's mean, u = m u + mean
                velocity[name][...] = momentum * velocity[name] + rank_grads.mean(axis=0)
                update = velocity[name][0]
            else:
                k = max(1, round(density * w.size))
                velocity[name][...] = momentum * velocity[name] + rank_grads
                residual[name] += velocity[name]
                flat_v = residual[name].reshape(ranks, -1)
                flat_u = velocity[name].reshape(ranks, -1)
                update = np.zeros(w.size)
                for r in range(ranks):           # each rank's top k of |V|, sent and cleared
                    sent = np.argsort(-np.abs(flat_v[r]), kind="stable")[:k]
                    update[sent] += flat_v[r, sent] / ranks
                    flat_v[r, sent] = 0.0
                    flat_u[r, sent] = 0.0        # momentum-factor masking
                update = update.reshape(w.shape)
            change = lr * (update + decay * w)   # the Solver's update with momentum 0
            largest_step = max(largest_step, float(np.abs(change).max()))
            w -= change
        if (step + 1) % test_every == 0 or step + 1 == steps:
            yield dict(step=step + 1, accuracy=_test_accuracy(solver, reference, Order),
                       loss=float(np.mean(losses)), largest_step=largest_step,
                       residual_norm=math.sqrt(sum(float((v[0] ** 2).sum())
                                                   for v in residual.values())))
            largest_step = 0.0


def _test_accuracy(solver, reference, order_class) -> float:
    """The replayed weights' accuracy on the TEST net's batches, as ``Solver.test``."""
    net = solver.test_net
    order = order_class(*net.data_source(), solver.seed, shuffle=False)
    iterations = solver.solver.test_iter[0] if solver.solver.test_iter else 1
    return float(np.mean([reference.forward(net, *order.batch(k))[0]["accuracy"]
                          for k in range(iterations)]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", default="lenet", choices=["lenet", "mlp"])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--density", type=float, default=0.001)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--test-every", type=int, default=75)
    parser.add_argument("--clip-norm", type=float, default=0.0)
    parser.add_argument("--dense", action="store_true", help="dense SGD throughout")
    args = parser.parse_args(argv)
    with np.errstate(all="ignore"):              # a diverging run overflows: reported as NaN
        for row in replay(**vars(args)):
            print(json.dumps(dict(row, **vars(args))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
