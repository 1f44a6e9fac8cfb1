"""The Adam solver (hostlib/train/solver.py on dnn.adam_update, reference.py's float64 twin):
its step size, a few steps against the reference on one and two core groups, bit-exact resume
with both moments checkpointed, `swsim train --reference` with Adam, bad betas."""
import math

import numpy as np
import pytest

from swsim.cli import main
from swsim.hostlib import train
from swsim.hostlib.train.reference import Reference
from swsim.hostlib.train.solver import adam_rate

from test_train_solver import NET

ADAM = train.SolverSpec(type="Adam", base_lr=0.01, momentum=0.9, momentum2=0.99,
                        delta=1e-6, weight_decay=0.001, random_seed=7)


def test_the_step_size_is_caffes_bias_corrected_rate():
    # t = 1: lr sqrt(1 - 0.99) / (1 - 0.9) = lr * 0.1 / 0.1 (float32 fields, hence approx)
    assert adam_rate(ADAM, 0.5, 0) == pytest.approx(0.5, rel=1e-6)
    assert adam_rate(ADAM, 0.5, 9) == pytest.approx(
        0.5 * math.sqrt(1 - 0.99 ** 10) / (1 - 0.9 ** 10), rel=1e-6)


@pytest.mark.parametrize("cgs", [1, 2])
def test_adam_trains_and_matches_the_float64_reference(cgs):
    solver = train.Solver(NET, ADAM, cgs=cgs)
    reference = Reference(solver)
    results = [solver.step() for _ in range(10)]
    expected = [reference.step() for _ in range(10)]
    losses = [r.loss for r in results]
    np.testing.assert_allclose(losses, expected, rtol=1e-3, atol=0)
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])
    assert "(update)" in results[0].layer_seconds
    assert solver.second_moment.any() and solver.history.any()


def test_adam_resumes_bit_exactly(tmp_path):
    straight = train.Solver(NET, ADAM)
    expected = [straight.step().loss for _ in range(6)]
    first = train.Solver(NET, ADAM)
    losses = [first.step().loss for _ in range(3)]
    first.save(tmp_path)
    first.step()                                    # discarded
    second = train.Solver(NET, ADAM)
    second.restore(tmp_path)
    assert second.second_moment.tobytes() != np.zeros_like(second.second_moment).tobytes()
    losses += [second.step().loss for _ in range(3)]
    assert losses == expected                       # the same bits
    for buffer in ("history", "second_moment"):
        assert getattr(second, buffer).tobytes() == getattr(straight, buffer).tobytes()
    assert second.net.params.buffer.tobytes() == straight.net.params.buffer.tobytes()
    # the reference picks up both moments and the step count (the bias correction) as well
    resumed = train.Solver(NET, ADAM)
    resumed.restore(tmp_path)
    again = train.Solver(NET, ADAM)
    reference = Reference(again)
    want = [reference.step() for _ in range(4)][-1]
    assert Reference(resumed).step() == pytest.approx(want, rel=1e-4)


def test_the_cli_compares_adam_with_the_reference(tmp_path, capsys):
    net, solver = tmp_path / "net.prototxt", tmp_path / "solver.prototxt"
    net.write_text(NET)
    solver.write_text('type: "Adam" base_lr: 0.01 momentum: 0.9 momentum2: 0.999 delta: 1e-8 '
                      'random_seed: 7')
    assert main(["train", str(net), "--solver", str(solver), "--steps", "2",
                 "--reference"]) == 0
    assert "largest relative loss difference" in capsys.readouterr().out


@pytest.mark.parametrize("field, value", [("momentum", 1.0), ("momentum2", -0.5)])
def test_betas_outside_0_1_are_refused(field, value):
    spec = train.SolverSpec(type="Adam", base_lr=0.01, **{field: value})
    with pytest.raises(train.TrainError, match=rf"solver {field}: must be in \[0, 1\) for Adam"):
        train.Solver(NET, spec)
