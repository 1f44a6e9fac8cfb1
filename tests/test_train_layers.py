"""Convolution, max pooling, sigmoid, Eltwise with coefficients and a blob read by two layers,
trained on the VM, against a float64 numpy reference of the same net, weights and data order."""
import numpy as np

from swsim.hostlib import train

NET = """
name: "branches"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "%s" batch_size: 4 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "constant" value: 0.1 } } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ipa" type: "InnerProduct" bottom: "pool" top: "ipa"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "ipb" type: "InnerProduct" bottom: "pool" top: "ipb"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "sig" type: "Sigmoid" bottom: "ipa" top: "ipa" }
layer { name: "sum" type: "Eltwise" bottom: "ipa" bottom: "ipb" top: "sum"
        eltwise_param { operation: SUM coeff: 1 coeff: 0.5 } }
layer { name: "out" type: "InnerProduct" bottom: "sum" top: "out"
        inner_product_param { num_output: 1 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "out" bottom: "label" top: "loss" }
"""
LR, MOMENTUM = 0.05, 0.9


def _windows(x):
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    return np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))


def reference_losses(solver, steps):
    p = {name: solver.net.params[name].astype(np.float64) for name in solver.net.params.layout}
    v = {name: np.zeros_like(value) for name, value in p.items()}
    losses = []
    for step in range(steps):
        x, label = (a.astype(np.float64) for a in solver.order.batch(step))
        b = len(x)
        win = _windows(x)                                            # (B, C, H, W, 3, 3)
        conv = np.einsum("bchwij,ocij->bohw", win, p["conv/0"]) + p["conv/1"][:, None, None]
        blocks = conv.reshape(b, 3, 3, 2, 3, 2)
        pool = blocks.max(axis=(3, 5))
        flat = pool.reshape(b, -1)
        ipa = 1 / (1 + np.exp(-(flat @ p["ipa/0"].T + p["ipa/1"])))
        ipb = flat @ p["ipb/0"].T + p["ipb/1"]
        total = ipa + 0.5 * ipb
        out = (total @ p["out/0"].T + p["out/1"]).reshape(-1)
        diff = out - label
        losses.append(diff @ diff / (2 * b))
        dout = (diff / b)[:, None]
        dsum = dout @ p["out/0"]
        da = dsum * ipa * (1 - ipa)
        db = 0.5 * dsum
        dflat = da @ p["ipa/0"] + db @ p["ipb/0"]
        mask = blocks == pool[:, :, :, None, :, None]
        dconv = (mask * dflat.reshape(pool.shape)[:, :, :, None, :, None]).reshape(conv.shape)
        grads = {"conv/0": np.einsum("bchwij,bohw->ocij", win, dconv),
                 "conv/1": dconv.sum(axis=(0, 2, 3)),
                 "ipa/0": da.T @ flat, "ipa/1": da.sum(0), "ipb/0": db.T @ flat,
                 "ipb/1": db.sum(0), "out/0": dout.T @ total, "out/1": dout.sum(0)}
        for name in p:
            v[name] = LR * grads[name] + MOMENTUM * v[name]
            p[name] = p[name] - v[name]
    return losses


def test_a_branching_convolutional_net_matches_the_float64_reference(tmp_path):
    rng = np.random.default_rng(5)
    source = tmp_path / "set.npz"
    np.savez(source, data=rng.normal(size=(12, 2, 6, 6)), label=rng.normal(size=12))
    spec = NET % source
    solver_spec = train.SolverSpec(base_lr=LR, momentum=MOMENTUM, random_seed=3)
    solver = train.Solver(spec, solver_spec)
    assert solver.net.shapes["pool"] == (4, 3, 3, 3)
    expected = reference_losses(train.Solver(spec, solver_spec), 4)
    losses = [solver.step().loss for _ in range(4)]
    assert np.allclose(losses, expected, rtol=1e-3, atol=0)
