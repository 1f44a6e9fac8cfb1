"""RedSync's per-layer residual compression (hostlib/train/redsync.py): two ranks in one
process, against a float32 numpy replay."""
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from swsim.errors import ArgumentTypeError
from swsim.hostlib.train import Solver, example, parse_net, parse_solver
from swsim.hostlib.train.allreduce import GradientAllreduce
from swsim.hostlib.train.common import TrainError
from swsim.hostlib.train.memory import Arena
from swsim.hostlib.train.prototxt import SolverParameter
from swsim.hostlib.train.redsync import (Compression, LayerResidual, RedSync, decompress,
                                         overlap_saving, pack, unpack)
from swsim.vm import Machine


def test_residuals_keep_what_was_not_sent_and_the_update_adds_every_rank():
    rng = np.random.default_rng(0)
    config = Compression("RGC", 0.01, "BINARY").check(2)
    machine = Machine()
    ranks = [LayerResidual(1000, config, machine=machine) for _ in range(2)]
    replay = [np.zeros(1000, np.float32) for _ in range(2)]
    weights = rng.standard_normal(1000).astype(np.float32)
    for iteration in range(3):
        grads = [rng.standard_normal(1000).astype(np.float32) for _ in range(2)]
        messages = [r.compress(g, iteration) for r, g in zip(ranks, grads)]
        expected = weights.copy()
        for rank, (message, grad) in enumerate(zip(messages, grads)):
            replay[rank] = replay[rank] + grad
            indices, values = unpack(message)
            assert 10 <= len(indices) <= 20                       # k <= nnz <= 2k
            assert np.array_equal(values, replay[rank][indices])
            threshold = np.sort(np.abs(values)).min()
            assert np.abs(np.delete(replay[rank], indices)).max() < threshold
            replay[rank][indices] = 0
            assert np.array_equal(ranks[rank].residual, replay[rank])
            expected[indices] = expected[indices] + np.float32(-0.1) * values
        weights, _ = decompress(weights, messages, -0.1, machine=machine)
        assert np.array_equal(weights, expected)


def test_asq_alternates_the_sign_and_sends_one_mean_but_not_for_the_output_layer():
    rng = np.random.default_rng(1)
    config = Compression("RGC", 0.01, "TRIMMED", "ASQ").check(2)
    hidden = LayerResidual(2000, config)
    with pytest.raises(TrainError, match="never applied to the output layer"):
        LayerResidual(2000, config, output_layer=True)       # asked for: refused, not skipped
    output = LayerResidual(2000, Compression("RGC", 0.01, "TRIMMED").check(2),
                           output_layer=True)
    for iteration, positive in ((0, True), (1, False)):
        grad = rng.standard_normal(2000).astype(np.float32)
        message = hidden.compress(grad, iteration)
        assert len(message) == 1 + 20 + 1
        indices, values = unpack(message)
        assert np.all(values == values[0]) and (values[0] > 0) == positive
        plain = output.compress(grad, iteration)
        assert len(plain) == 1 + 2 * 20


def test_sampled_reuses_the_threshold_between_searches():
    config = Compression("RGC", 0.01, "SAMPLED").check(2)
    layer = LayerResidual(1500, config)
    rng = np.random.default_rng(2)
    layer.compress(rng.standard_normal(1500).astype(np.float32), 0)
    first = layer.threshold
    layer.compress(rng.standard_normal(1500).astype(np.float32), 1)
    assert layer.threshold == first


def test_pack_round_trip_and_bad_messages():
    message = pack([3, 7], np.float32([1.5, -2.0]))
    indices, values = unpack(message)
    assert list(indices) == [3, 7] and list(values) == [1.5, -2.0]
    asq = pack([1, 2, 4], None, np.float32(0.25))
    assert len(asq) == 5 and list(unpack(asq)[1]) == [0.25] * 3
    with pytest.raises(TrainError, match="words"):
        unpack(message[:-1])


@pytest.mark.parametrize("config, ranks, needle", [
    (Compression("RGC", 0.0), 2, "density"),
    (Compression("RGC", 1.5), 2, "density"),
    (Compression("RGC", 0.01, "SAMPLED", "ASQ"), 2, "sampled"),
    (Compression("RGC", 0.01), 1, "2 ranks"),
    (Compression("TOPK"), 2, "method"),
    (Compression("RGC", 0.01, "BINARY", "NONE", -1), 2, "warmup_iter"),
    (Compression("RGC", 0.01, clip_norm=-1.0), 2, "clip_norm"),
    (Compression("RGC", 0.01, clip_norm=float("inf")), 2, "clip_norm"),
])
def test_bad_configurations_are_refused_with_the_reason(config, ranks, needle):
    with pytest.raises(TrainError, match=needle):
        config.check(ranks)


def test_two_mpi_ranks_exchange_and_apply_the_same_update():
    import test_allreduce_mpi as mpi
    line = mpi.mpiexec(2, sys.executable, str(Path(__file__).parent / "redsync_ranks.py"))
    assert json.loads(line) == {"ranks": 2, "identical": True, "replayed": True}


def test_the_solver_prototxt_compression_message_is_the_python_config():
    solver = parse_solver("compression { method: RGC density: 0.01 select: SAMPLED "
                          "quantize: NONE warmup_iter: 10 replan_every: 5 }")
    assert Compression.from_proto(solver.compression) == Compression(
        "RGC", float(np.float32(0.01)), "SAMPLED", "NONE", 10, replan_every=5)
    assert Compression.from_proto(SolverParameter().compression) == Compression(
        density=float(np.float32(0.001)))        # the proto's float


@pytest.mark.parametrize("text, needle", [
    ("compression { method: RGC }", "at least 2 ranks"),
    ("compression { method: RGC density: 0 }", "density"),
    ("compression { method: RGC density: 1.5 }", "density"),
    ("compression { method: RGC select: SAMPLED quantize: ASQ }", "sampled"),
    ("compression { method: RGC replan_every: -1 }", "replan_every must be an integer >= 0"),
])
def test_the_solver_refuses_impossible_compression(text, needle):
    with pytest.raises(TrainError, match=needle):
        Solver(parse_net(example("mlp")), parse_solver(text))


def test_the_solver_refuses_rgc_with_adam_or_without_the_ranks_reducer():
    rgc = Compression("RGC", 0.01)
    with pytest.raises(TrainError, match="for SGD"):
        Solver(parse_net(example("mlp")), SolverParameter(type="Adam"), shard=(0, 2),
               compression=rgc)
    with pytest.raises(TrainError, match="gradient_reducer"):
        Solver(parse_net(example("mlp")), shard=(0, 2), compression=rgc)
    with pytest.raises(ArgumentTypeError, match="compression"):
        Solver(parse_net(example("mlp")), compression="RGC")


class FourRanks:
    """What RedSync's plan asks of a communicator."""
    def Get_size(self):
        return 4

    def Get_rank(self):
        return 0


def test_each_blob_goes_sparse_or_dense_by_eq_8_1_against_eq_8_2():
    params = Arena()
    params.add("big/0", (1 << 16,))
    params.add("small/0", (8,))
    params.build()
    reducer = RedSync(GradientAllreduce(FourRanks()), Compression("RGC", 0.001), params)
    plan = {p.name: p for p in reducer.plan}
    assert plan["small/0"].offset * 4 == params.layout["small/0"][0]
    assert not plan["small/0"].sparse                # a few bytes: the allreduce is cheaper
    assert plan["big/0"].sparse_seconds < plan["big/0"].dense_seconds
    assert plan["big/0"].sparse and plan["big/0"].k == 66
    assert "big/0: 65536 elements, k=66, sparse (eq. 8-1 sparse" in reducer.format_plan()
    forced = RedSync(GradientAllreduce(FourRanks()), Compression("RGC", 0.001,
                                                                 layers="sparse"), params)
    assert all(p.sparse for p in forced.plan)


def test_two_mpi_ranks_train_deterministically_and_resume_bit_exact():
    import test_allreduce_mpi as mpi
    line = mpi.mpiexec(2, sys.executable, str(Path(__file__).parent / "redsync_train_ranks.py"))
    assert json.loads(line) == {"ranks": 2, "same_on_every_rank": True, "deterministic": True,
                                "resumed_bit_exact": True, "residual_kept": True,
                                "sparse_bytes_below_dense": True, "overlap_saves_time": True,
                                "replanned_after_the_warm_up": True,
                                "replanned_alike_on_every_rank": True}


def test_local_gradient_clipping_scales_each_rank_to_clip_over_sqrt_ranks():
    params = Arena()
    params.add("w/0", (3000,))
    params.build()
    reducer = RedSync(GradientAllreduce(FourRanks()), Compression("RGC", 0.01, clip_norm=2.0),
                      params)
    gradient = np.random.default_rng(3).standard_normal(3000).astype(np.float32)
    clipped, seconds = reducer._clip(gradient)
    assert np.linalg.norm(clipped.astype(np.float64)) == pytest.approx(2.0 / 2, rel=1e-6)
    assert np.allclose(clipped / np.linalg.norm(clipped), gradient / np.linalg.norm(gradient),
                       atol=1e-6) and seconds > 0
    small = gradient * np.float32(1e-4)              # already within the limit: untouched
    assert reducer._clip(small)[0] is small


def test_overlap_hides_each_allgather_behind_the_later_backward():
    backward = [("ip2", 1.0), ("ip1", 3.0), ("conv1", 2.0)]
    blobs = [("ip2", 0.5, 2.0, 0.1), ("ip1", 0.5, 1.0, 0.1)]
    # CPEs: ip2 1.0 + select 0.5; network: ip2's allgather 1.5-3.5, ip1's after its select
    # at 5.0 to 6.0, behind conv1's backward (to 7.0); decompressions 7.1, 7.2
    assert overlap_saving(backward, blobs) == pytest.approx(10.2 - 7.2)
    assert overlap_saving([("ip", 1.0)], [("ip", 0.5, 2.0, 0.1)]) == 0     # nothing after it


def test_a_residual_selects_on_the_core_groups_a_part_each():
    from swsim.hostlib.dnn.select import select
    grad = np.random.default_rng(4).standard_normal(4000).astype(np.float32)
    layer = LayerResidual(4000, Compression("RGC", 0.01, "TRIMMED").check(2), cgs=4)
    indices, values = unpack(layer.compress(grad, 0))
    expected = select(grad, 40, method="trimmed", cgs=4)
    assert np.array_equal(indices, expected.indices) and len(indices) == 40
    assert np.all(layer.residual[indices] == 0) and np.count_nonzero(layer.residual) == 3960


class FourEqualRanks(FourRanks):
    """Four ranks sending the same message: what sparse_allgather asks of a communicator."""
    def allgather(self, value):
        return [value] * 4

    def Allgatherv(self, message, spec):
        spec[0][...] = np.tile(message, 4)

    def gather(self, value, root=0):
        return [value] * 4


@pytest.mark.parametrize("options, masked, corrected", [
    ({}, True, True),
    (dict(momentum_masking=False), False, True),
    (dict(momentum_correction=False, momentum_masking=False), False, False)])
def test_dgc_momentum_correction_and_masking_are_configurable(options, masked, corrected):
    params = Arena()
    params.add("w/0", (1000,))
    params.build()
    reducer = RedSync(GradientAllreduce(FourEqualRanks()),
                      Compression("RGC", 0.01, layers="sparse", **options), params, momentum=0.9)
    assert reducer.applies_momentum == corrected
    gradient = np.zeros(reducer.total, np.float32)            # the arena's padding: 0
    gradient[:1000] = np.random.default_rng(5).standard_normal(1000)
    update, _ = reducer(gradient)
    sent = np.flatnonzero(update)
    assert 10 <= len(sent) <= 20
    assert np.array_equal(update[sent], gradient[sent])        # 4 equal sets, scaled by 1/4
    unsent = np.setdiff1d(np.arange(1000), sent)
    if corrected:                                             # u = 0.9 * 0 + G, masked or not
        assert np.array_equal(reducer.velocity[unsent], gradient[unsent])
        assert np.all(reducer.velocity[sent] == 0) == masked
    else:                                                     # the Solver's momentum instead
        assert not reducer.velocity.any()


def test_refused_masking_without_correction():
    with pytest.raises(TrainError, match="momentum_correction"):
        Compression("RGC", 0.01, momentum_correction=False).check(2)
    with pytest.raises(TrainError, match="True or False"):
        Compression("RGC", 0.01, momentum_masking=1).check(2)


def test_the_plan_is_re_predicted_from_the_measured_selections():
    params = Arena()
    params.add("w/0", (1000,))
    params.add("b/0", (10,))
    params.build()
    reducer = RedSync(GradientAllreduce(FourEqualRanks()),
                      Compression("RGC", 0.01, layers="sparse"), params)
    plan = reducer.plan[0]
    again = plan.remeasured(plan.select_seconds + 1.0)
    assert again.sparse_seconds == pytest.approx(plan.sparse_seconds + 1.0)
    assert plan.sparse_seconds < plan.dense_seconds + 1.0 <= again.sparse_seconds
    assert reducer.replan() == [(p, p) for p in reducer.plan]          # nothing measured yet
    reducer(np.random.default_rng(6).standard_normal(reducer.total).astype(np.float32))
    for before, after in reducer.replan():
        measured = reducer.measured_select[before.name]
        assert len(measured) == 1 and after.select_seconds == measured[0] > 0
        assert after.dense_seconds == before.dense_seconds
    table = reducer.format_replan().splitlines()
    assert len(table) == 3 and table[1].startswith("w/0") and "dense" in table[1]


class FourEqualRanksReduced(GradientAllreduce):
    """The dense allreduce of four ranks holding the same gradient: its mean is it."""
    def __init__(self):
        super().__init__(FourEqualRanks())

    def __call__(self, gradient):
        return gradient.copy(), {"(allreduce network)": 0.0}


@pytest.fixture(scope="module")
def replanned():
    """Two blobs at 0.1 %, re-planned at every step: "heavy" (64 K elements) is sparse by the
    plan (eq. 8-1 on normal data), but its heavy-tailed (Cauchy) residual takes the binary
    search more passes (7 against ~3); "few" (40 000) is dense by the plan, but its gradient
    (60 elements standing out, the rest 0, as an embedding's rows) takes one. Both selections, measured, flip eq. 8-1 against eq. 8-2
    at the replan of step 1."""
    params = Arena()
    params.add("heavy/0", (1 << 16,))
    params.add("few/0", (40000,))
    params.build()
    reducer = RedSync(FourEqualRanksReduced(), Compression("RGC", 0.001, replan_every=1),
                      params)
    heavy, few = (slice(plan.offset, plan.offset + plan.size) for plan in reducer.plan)
    rng = np.random.default_rng(7)
    gradients = []
    for _ in range(3):
        gradient = np.zeros(reducer.total, np.float32)
        gradient[heavy] = rng.standard_cauchy(heavy.stop - heavy.start)
        rows = few.start + rng.choice(few.stop - few.start, 60, replace=False)
        gradient[rows] = rng.choice([-1, 1], 60) * (1 + 0.1 * np.abs(rng.standard_normal(60)))
        gradients.append(gradient)
    planned = list(reducer.plan)
    first, _ = reducer(gradients[0])
    kept = reducer.residuals[0].residual.copy()
    second, seconds = reducer(gradients[1])
    return dict(reducer=reducer, planned=planned, first=first, kept=kept, gradients=gradients,
                second=second, seconds=seconds, params=params, parts=(heavy, few))


def test_measured_selections_flip_the_plan_both_ways(replanned):
    run = replanned
    reducer, (heavy, few) = run["reducer"], run["parts"]
    assert run["planned"][0].sparse and not run["planned"][1].sparse
    assert 66 <= np.count_nonzero(run["first"][heavy]) <= 132      # step 0: heavy sparse,
    assert np.array_equal(run["first"][few], run["gradients"][0][few])    # few dense
    switched = dict((plan.name, (step, plan)) for step, plan in reducer.switches)
    assert switched.keys() == {"heavy/0", "few/0"}
    for name, sparse in (("heavy/0", False), ("few/0", True)):
        step, plan = switched[name]
        before = next(p for p in run["planned"] if p.name == name)
        assert step == 1 and plan.sparse == sparse and plan.dense_seconds == before.dense_seconds
        # the measured selection alone moved eq. 8-1 across eq. 8-2
        assert plan.select_seconds != before.select_seconds
    assert [plan.sparse for plan in reducer.plan] == [False, True]
    # step 1: heavy dense, the mean gradient plus the residual kept so far, now empty
    assert np.array_equal(run["second"][heavy], run["gradients"][1][heavy] + run["kept"])
    assert not reducer.residuals[0].residual.any() and run["seconds"]["(redsync flush)"] > 0
    assert run["seconds"]["(redsync probe)"] > 0             # few's selection, measured
    sent = np.flatnonzero(run["second"][few])                # few sparse: k..2k sent, the
    assert 40 <= len(sent) <= 80                             # rest kept in its residual
    assert np.array_equal(run["second"][few][sent], run["gradients"][1][few][sent])
    assert np.array_equal(reducer.residuals[1].residual + run["second"][few],
                          run["gradients"][1][few])
    third, seconds = reducer(run["gradients"][2])            # the same choices again
    assert np.array_equal(third[heavy], run["gradients"][2][heavy])
    assert len(reducer.switches) == 2


def test_the_plan_in_use_and_its_measurements_are_in_the_checkpoint(replanned):
    reducer = replanned["reducer"]                           # both blobs flipped at step 1
    restored = RedSync(FourEqualRanksReduced(), reducer.config, replanned["params"])
    assert [plan.sparse for plan in restored.plan] == [True, False]
    restored.load_state(reducer.state(), "memory")
    assert restored.plan == reducer.plan and [p.sparse for p in restored.plan] == [False, True]
    config = replace(reducer.config, replan_every=3)       # a step measured, not replanned
    measuring, restored = (RedSync(FourEqualRanksReduced(), config, replanned["params"])
                           for _ in range(2))
    measuring(replanned["gradients"][0])
    restored.load_state(measuring.state(), "memory")
    assert restored.measured_select == measuring.measured_select
    assert [len(times) for times in restored.measured_select.values()] == [1, 0]


def test_refused_replanning_a_forced_plan():
    with pytest.raises(TrainError, match="replan_every"):
        Compression("RGC", 0.01, layers="sparse", replan_every=5).check(2)
    with pytest.raises(TrainError, match="replan_every must be an integer >= 0"):
        Compression("RGC", 0.01, replan_every=-1).check(2)
