"""The Solver on the VM: a net trains and matches a float64 numpy reference of the same net,
weights and data order; checkpoints are atomic and resume bit-exactly; bad input is a clear
error; the `swsim train` command."""
import json
import os
import threading

import numpy as np
import pytest

from swsim.cli import main
from swsim.errors import ArgumentTypeError
from swsim.hostlib import train
from swsim.vm import Machine

NET = """
name: "regression"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "sklearn:digits" batch_size: 16 scale: 0.0625 } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 12 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 1 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""
SOLVER = train.SolverSpec(base_lr=0.01, momentum=0.9, weight_decay=0.001, lr_policy="step",
                          gamma=0.5, stepsize=8, random_seed=7)


def reference_losses(solver: train.Solver, steps: int) -> list:
    """The same net in numpy float64 from the solver's initial weights and data order."""
    p = {name: solver.net.params[name].astype(np.float64) for name in solver.net.params.layout}
    v = {name: np.zeros_like(value) for name, value in p.items()}
    losses = []
    for step in range(steps):
        x, label = solver.order.batch(step)
        x, label = x.reshape(len(x), -1).astype(np.float64), label.astype(np.float64)
        h = x @ p["ip1/0"].T + p["ip1/1"]
        r = np.maximum(h, 0)
        out = (r @ p["ip2/0"].T + p["ip2/1"]).reshape(-1)
        diff = out - label
        losses.append(diff @ diff / (2 * len(x)))
        dout = (diff / len(x)).reshape(-1, 1)
        dr = dout @ p["ip2/0"]
        dh = dr * (h > 0)
        grads = {"ip2/0": dout.T @ r, "ip2/1": dout.sum(0), "ip1/0": dh.T @ x, "ip1/1": dh.sum(0)}
        lr = train.learning_rate(SOLVER, step)
        for name in p:
            v[name] = lr * (grads[name] + SOLVER.weight_decay * p[name]) + SOLVER.momentum * v[name]
            p[name] = p[name] - v[name]
    return losses


def test_a_net_trains_on_the_vm_and_matches_the_float64_reference():
    solver = train.Solver(NET, SOLVER)
    expected = reference_losses(train.Solver(NET, SOLVER), 20)
    results = [solver.step() for _ in range(20)]
    losses = np.array([r.loss for r in results])
    assert np.allclose(losses, expected, rtol=1e-3, atol=0)
    assert losses[-5:].mean() < 0.8 * losses[:5].mean()
    assert all(r.sim_seconds > 0 and r.host_seconds > 0 for r in results)
    assert set(results[0].layer_seconds) == {"ip1", "relu", "ip2", "loss", "(update)"}


@pytest.mark.parametrize("cgs", [2, 4])
def test_the_minibatch_split_over_core_groups_gives_the_single_cg_losses(cgs):
    single = train.Solver(NET, SOLVER)
    split = train.Solver(NET, SOLVER, cgs=cgs)
    assert split.net.shapes["data"] == (16 // cgs, 1, 8, 8)
    one = [single.step() for _ in range(4)]
    many = [split.step() for _ in range(4)]
    assert np.allclose([r.loss for r in many], [r.loss for r in one], rtol=1e-5, atol=0)
    assert "(reduce)" in many[0].layer_seconds
    # Algorithm 9's threads: one per core group, started once and kept
    assert len({thread.name for thread in threading.enumerate()
                if thread.name.startswith(f"swsim-train-cg-{id(split):x}")}) == cgs
    # the chip's time: the slowest CG's slice of each layer (never slower than the whole
    # batch on one CG), then the reduction and the update. This net is launch-bound (a launch
    # costs 40 600 cycles), so the step as a whole need not be faster than on one CG.
    split_step, whole_step = many[0].layer_seconds, one[0].layer_seconds
    assert many[0].sim_seconds == pytest.approx(sum(split_step.values()))
    assert split_step["(reduce)"] > 0
    for layer in ("ip1", "relu", "ip2", "loss"):
        assert split_step[layer] <= whole_step[layer], layer


def test_one_chip_gives_bit_for_bit_what_a_machine_per_core_group_gives():
    """Algorithm 9 on CGs 0..3 of one Machine (shared memory, the CGs' threads at once) against
    each replica on a Machine of its own (how the Solver ran before): the same losses,
    simulated seconds per layer, weights and momentum, bit for bit."""
    net, spec = train.example("lenet"), train.example("lenet_solver")
    apart = train.Solver(net, spec, cgs=4)
    apart.core_group = lambda k: Machine(apart.config)
    solver = train.Solver(net, spec, cgs=4)
    chip = solver.chip
    spawn, running = chip.spawn, []

    def counting_spawn(*args, **kwargs):
        handle = spawn(*args, **kwargs)
        running.append(len(chip.running))
        return handle
    chip.spawn = counting_spawn
    capacities = []
    for _ in range(2):
        ours, theirs = solver.step(), apart.step()
        assert (ours.loss, ours.sim_seconds, ours.layer_seconds) == \
            (theirs.loss, theirs.sim_seconds, theirs.layer_seconds)
        # the step's scratch was given back; the room reserved for it did not move
        assert chip.mem.mark() == chip.mem.static_bytes and chip.running == []
        capacities.append(chip.mem.capacity)
    np.testing.assert_array_equal(solver.net.params.buffer, apart.net.params.buffer)
    np.testing.assert_array_equal(solver.history, apart.history)
    assert solver.test() == apart.test()
    assert sorted(chip.last_jobs) == [0, 1, 2, 3] and max(running) >= 2   # CGs ran at once
    assert capacities[0] == capacities[1] >= solver.scratch_bytes


def test_checkpoints_resume_bit_exactly(tmp_path):
    straight = train.Solver(NET, SOLVER)
    expected = [straight.step().loss for _ in range(6)]
    first = train.Solver(NET, SOLVER)
    losses = [first.step().loss for _ in range(3)]
    path = first.save(tmp_path)
    assert path.name == "checkpoint-00000003.npz"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]        # no temporary left
    first.step()                                    # work past the checkpoint is discarded
    second = train.Solver(NET, SOLVER)
    assert second.restore(tmp_path) == path and second.step_count == 3
    losses += [second.step().loss for _ in range(3)]
    assert losses == expected                       # the same bits
    assert np.array_equal(second.net.params.buffer, straight.net.params.buffer)


def test_a_checkpoint_resumes_on_another_number_of_core_groups(tmp_path):
    saved = train.Solver(NET, SOLVER, cgs=2)
    saved.step()
    saved.save(tmp_path)
    resumed = train.Solver(NET, SOLVER)
    resumed.restore(tmp_path)
    assert np.array_equal(resumed.net.params.buffer, saved.net.params.buffer)
    assert resumed.step_count == 1


def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    solver = train.Solver(NET, SOLVER)
    solver.save(tmp_path)
    solver.step()

    def crash(*args):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        solver.save(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-00000000.npz"]


def test_a_corrupt_or_foreign_checkpoint_is_a_clear_error(tmp_path):
    solver = train.Solver(NET, SOLVER)
    path = solver.save(tmp_path)
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[:len(data) // 2]))
    with pytest.raises(train.TrainError, match="is corrupt"):
        train.Solver(NET, SOLVER).restore(tmp_path)
    solver.save(tmp_path)
    other = train.SolverSpec(base_lr=0.5, random_seed=7)
    with pytest.raises(train.TrainError, match="does not match: its solver differs"):
        train.Solver(NET, other).restore(tmp_path)
    with pytest.raises(train.TrainError, match="no checkpoint"):
        solver.restore(tmp_path / "empty")


def test_a_nan_loss_stops_with_the_step_and_the_layer(tmp_path):
    solver = train.Solver(NET, SOLVER, cgs=2)
    solver.net.params["ip2/0"][0, 0] = np.nan
    with pytest.raises(train.TrainError, match=r"step 1: loss is nan; first non-finite blob in "
                                               r"layer 'ip2'"):
        solver.step()
    # every CG's thread was waited for: nothing runs, the step's scratch was given back
    assert solver.chip.running == [] and solver.chip.mem.mark() == solver.chip.mem.static_bytes


def test_solver_errors():
    with pytest.raises(train.TrainError, match="type: unknown 'RMSProp'"):
        train.Solver(NET, train.SolverSpec(base_lr=0.1, type="RMSProp"))
    with pytest.raises(train.TrainError, match="test_interval 5: net 'regression' has no "
                                               "Accuracy layer in phase TEST"):
        train.Solver(NET, train.SolverSpec(base_lr=0.1, test_interval=5))
    with pytest.raises(train.TrainError, match="no loss layer"):
        train.Solver(NET.split('layer { name: "loss"')[0], SOLVER)
    for fields, message in [
            (dict(base_lr=-0.1), "base_lr: must be a finite number >= 0, got -0.1"),
            (dict(base_lr=float("nan")), "base_lr: must be a finite number >= 0, got nan"),
            (dict(base_lr=0.1, momentum=5), r"momentum: must be in \[0, 1\) for SGD, got 5"),
            (dict(base_lr=0.1, momentum=-0.5), r"momentum: must be in \[0, 1\) for SGD"),
            (dict(base_lr=0.1, weight_decay=-1), "weight_decay: must be a finite number >= 0"),
            (dict(base_lr=0.1, max_iter=-1), "max_iter: must be >= 0"),
    ]:
        with pytest.raises(train.TrainError, match=message):
            train.Solver(NET, train.SolverSpec(**fields))


def test_the_cli_explains_trains_logs_checkpoints_and_resumes(tmp_path, capsys):
    net = tmp_path / "net.prototxt"
    net.write_text(NET)
    solver = tmp_path / "solver.prototxt"
    solver.write_text('base_lr: 0.01 momentum: 0.9 random_seed: 7 max_iter: 4')
    assert main(["train", str(net), "--explain"]) == 0
    table = capsys.readouterr().out
    assert "ip1" in table and "linear_forward" in table and "packed gradient buffer" in table
    log, ckpt = tmp_path / "log.jsonl", tmp_path / "ckpt"
    assert main(["train", str(net), "--solver", str(solver), "--steps", "2", "--log", str(log),
                 "--checkpoint-dir", str(ckpt), "--checkpoint-every", "2"]) == 0
    assert main(["train", str(net), "--solver", str(solver), "--log", str(log),
                 "--resume", str(ckpt), "--plot", str(tmp_path / "loss.png")]) == 0
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    # killed after step 4's record and before its checkpoint, mid-line: the resume from step
    # 2 logs steps 3 and 4 once
    (ckpt / "checkpoint-00000004.npz").unlink()
    with log.open("a") as killed:
        killed.write('{"step": 5, "lo')
    assert main(["train", str(net), "--solver", str(solver), "--log", str(log),
                 "--resume", str(ckpt)]) == 0
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2, 3, 4]
    assert all(set(r) >= {"step", "loss", "sim_seconds", "host_seconds"} for r in records)
    assert sorted(p.name for p in ckpt.iterdir()) == ["checkpoint-00000002.npz",
                                                      "checkpoint-00000004.npz"]
    assert main(["train", str(net), "--cgs", "5"]) == 1
    assert "cgs: 1..4 core groups, got 5" in capsys.readouterr().err
    assert main(["train", str(net), "--cgs", "3"]) == 1
    assert "batch_size: 16 does not divide among 3 core groups" in capsys.readouterr().err
    assert main(["train", str(tmp_path / "missing.prototxt")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_the_test_net_shares_the_weights_and_measures_accuracy_over_test_iter_batches():
    net = NET + ('layer { name: "acc" type: "Accuracy" bottom: "ip1" bottom: "label" '
                 'top: "acc" include { phase: TEST } }')
    solver = train.Solver(net, train.SolverSpec(base_lr=0.01, random_seed=7, test_interval=1,
                                                test_iter=[2]))
    solver.step()
    w, b = solver.net.params["ip1/0"], solver.net.params["ip1/1"]
    test_data = solver.test_net.datasets["d"]
    assert len(test_data) == 360                              # the held-out digits
    x, label = test_data.data[:32].reshape(32, -1), test_data.label[:32]
    expected = np.mean(np.argmax(np.maximum(x @ w.T + b, 0), axis=1) == label)
    assert solver.test() == pytest.approx(expected, abs=1e-6)


def test_the_gradient_reducer_hook_sees_the_packed_buffer_before_the_update():
    seen = []

    def reducer(gradient):
        seen.append(gradient.copy())
        return gradient, {"(allreduce)": 2e-6}
    solver = train.Solver(NET, SOLVER, cgs=2, shard=(1, 2), gradient_reducer=reducer)
    assert solver.net.shapes["data"] == (4, 1, 8, 8)          # half of 16, over 2 CGs
    result = solver.step()
    assert len(seen) == 1 and seen[0].shape == solver.net.grads.buffer.shape
    assert result.layer_seconds["(allreduce)"] == 2e-6
    with pytest.raises(train.TrainError, match=r"shard: node k of K needs 0 <= k < K"):
        train.Solver(NET, SOLVER, shard=(2, 2))


def test_solver_and_net_take_a_machine_like_the_operators():
    machine = Machine()
    solver = train.Solver(NET, SOLVER, machine=machine)
    assert solver.chip is machine and solver.config is machine.config
    assert train.Net(NET, machine=machine).choices == solver.net.choices
    with pytest.raises(train.TrainError, match="machine, config: give one of them"):
        train.Solver(NET, SOLVER, machine=machine, config="sw26010")
    with pytest.raises(train.TrainError, match="machine, config: give one of them"):
        train.Net(NET, machine=machine, config=machine.config)
    with pytest.raises(ArgumentTypeError, match="machine must be a swsim.Machine, got str"):
        train.Solver(NET, SOLVER, machine="sw26010")


def test_resume_takes_the_highest_step_and_refuses_a_bad_step_or_position(tmp_path):
    solver = train.Solver(NET, SOLVER)
    solver.step_count = 10
    newest = solver.save(tmp_path)                          # checkpoint-00000010.npz
    (tmp_path / "checkpoint-9.npz").write_bytes(b"older")   # sorts after it by name
    (tmp_path / "checkpoint-x.npz").write_bytes(b"not a step")
    assert train.Solver(NET, SOLVER).restore(tmp_path) == newest
    with np.load(newest) as archive:
        saved = {key: archive[key] for key in archive.files}
    for key, value in (("step", np.arange(3)), ("position", -1), ("step", 1.5)):
        np.savez(newest, **{**saved, key: value})
        with pytest.raises(train.TrainError, match=f"is corrupt: its {key} must be an integer"):
            train.Solver(NET, SOLVER).restore(tmp_path)
    np.savez(newest, **{k: v for k, v in saved.items() if k != "position"})
    with pytest.raises(train.TrainError, match="its position must be an integer >= 0, got None"):
        train.Solver(NET, SOLVER).restore(tmp_path)
