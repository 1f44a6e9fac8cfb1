"""The Net's static passes (packed aligned buffers, operator selection, explain), the
learning-rate policies and the data order."""
import math

import numpy as np
import pytest

from swsim import Machine
from swsim.hostlib import train
from swsim.hostlib.train.data import Dataset, Order, Prefetcher
from swsim.hostlib.train.memory import Arena

from test_train_model import GOOD


def test_an_arena_packs_members_at_128_byte_aligned_offsets_of_one_buffer():
    arena = Arena()
    for name, shape in (("a", (3,)), ("b", (5, 7)), ("c", ()), ("d", (32,))):
        arena.add(name, shape)
    arena.build()
    base = arena.buffer.ctypes.data
    assert base % 128 == 0 and arena.buffer.nbytes == arena.nbytes == 128 + 256 + 128 + 128
    for name in "abcd":
        view = arena[name]
        assert view.base is not None and np.shares_memory(view, arena.buffer)
        assert (view.ctypes.data - base) % 128 == 0
    arena["b"][...] = 1
    assert arena.buffer.sum() == 35


def test_all_parameter_gradients_live_in_one_contiguous_buffer():
    net = train.Net(GOOD)
    names = list(net.grads.layout)
    assert names == ["ip/0", "ip/1", "out/0", "out/1"]
    assert [net.grads[n].shape for n in names] == [(4, 64), (4,), (1, 4), (1,)]
    for name in names:
        assert np.shares_memory(net.grads[name], net.grads.buffer)
        assert (net.grads[name].ctypes.data - net.grads.buffer.ctypes.data) % 128 == 0
    assert net.grads.buffer.ctypes.data % 128 == 0
    assert net.params.layout == net.grads.layout           # one update call covers both
    # the blobs too: in-place ReLU gets a blob of its own version
    assert set(net.blobs.layout) == {"data", "label", "ip", "ip@relu", "out", "loss"}


def test_explain_lists_every_layer_with_its_operator_and_a_model_time():
    net = train.Net(GOOD, config=Machine().config)
    rows = net.explain()
    assert [r["layer"] for r in rows] == ["d", "ip", "relu", "out", "loss"]
    ip = rows[1]
    assert "swGEMM" in ip["operator"] and ip["shapes"] == [(8, 4)] and ip["params"] == 260
    assert 0 < ip["predicted_seconds"] < 1e-3
    assert rows[0]["predicted_seconds"] is None


@pytest.mark.parametrize("policy, fields, formula", [
    ("fixed", {}, lambda it: 0.1),
    ("step", dict(gamma=0.5, stepsize=3), lambda it: 0.1 * 0.5 ** (it // 3)),
    ("exp", dict(gamma=0.9), lambda it: 0.1 * 0.9 ** it),
    ("inv", dict(gamma=1e-2, power=0.75), lambda it: 0.1 * (1 + 1e-2 * it) ** -0.75),
    ("poly", dict(power=2.0, max_iter=20), lambda it: 0.1 * (1 - it / 20) ** 2),
])
def test_learning_rate_policies_follow_caffes_formulas(policy, fields, formula):
    solver = train.SolverSpec(base_lr=0.1, lr_policy=policy, **fields)
    for it in range(0, 20, 3):
        assert math.isclose(train.learning_rate(solver, it), formula(it), rel_tol=1e-6)


def test_a_bad_policy_is_a_clear_error():
    with pytest.raises(train.TrainError, match="lr_policy: unknown 'cosine'"):
        train.learning_rate(train.SolverSpec(base_lr=0.1, lr_policy="cosine"), 0)
    with pytest.raises(train.TrainError, match="stepsize"):
        train.learning_rate(train.SolverSpec(base_lr=0.1, lr_policy="step"), 0)


def test_the_data_order_is_a_function_of_the_seed_and_the_batch_index():
    data = Dataset("sklearn:digits", "TRAIN")
    assert len(data) == 1437 and data.sample_shape == (1, 8, 8)
    assert len(Dataset("sklearn:digits", "TEST")) == 360
    a, b = Order(data, 100, seed=3), Order(data, 100, seed=3)
    assert np.array_equal(a.indices(20), b.indices(20))       # crosses an epoch boundary
    assert not np.array_equal(a.indices(0), Order(data, 100, seed=4).indices(0))
    first_epoch = np.concatenate([a.indices(k) for k in range(14)] + [a.indices(14)[:37]])
    assert sorted(first_epoch) == list(range(1437))           # every sample once per epoch
    feed = Prefetcher(a, position=5)
    x, y = feed.next()
    assert feed.position == 6 and np.array_equal(y, data.label[a.indices(5)])


def test_the_digits_loader_is_the_sources_split():
    images, labels = train.load_digits("TRAIN")
    test_images, test_labels = train.load_digits("TEST")
    assert images.shape == (1437, 1, 8, 8) and test_images.shape == (360, 1, 8, 8)
    data = Dataset("sklearn:digits", "TRAIN")
    assert np.array_equal(data.data, images.astype(np.float32))
    assert np.array_equal(data.label, labels.astype(np.float32))
    assert sorted(set(labels)) == sorted(set(test_labels)) == list(range(10))
    with pytest.raises(train.TrainError, match="phase must be 'TRAIN' or 'TEST', got 'test'"):
        train.load_digits("test")


def test_npz_sources(tmp_path):
    path = tmp_path / "set.npz"
    np.savez(path, data=np.ones((10, 3)), label=np.arange(10))
    assert Dataset(str(path), "TRAIN").sample_shape == (3,)
    np.savez(tmp_path / "bad.npz", images=np.ones((10, 3)))
    with pytest.raises(train.TrainError, match="must hold arrays 'data' and 'label'"):
        Dataset(str(tmp_path / "bad.npz"), "TRAIN")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(train.TrainError, match="is not a .npz archive of arrays"):
        Dataset(str(tmp_path / "junk.npz"), "TRAIN")
