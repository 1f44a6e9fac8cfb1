"""The allreduce schedules and the α-β model of eq. 7-1…7-8 (hostlib/train/allreduce.py), in one
process; the MPI runs are in test_allreduce_mpi.py."""
import numpy as np
import pytest

from swsim.hostlib.train import TrainError
from swsim.hostlib.train import allreduce as ar

CLOSED_FORM_CASES = [(p, q) for p in (1, 2, 4, 8, 16, 64, 256) for q in (4, 16, 256)]


def contributions(algorithm, p, n, q):
    """Run the schedule on contribution counts: state[r, e, k] = how many times rank k's element e
    is in rank r's element e. An allreduce ends with every count 1."""
    state = np.zeros((p, n, p), np.int64)
    for k in range(p):
        state[k, :, k] = 1
    for step in ar.schedule(algorithm, p, n, q):
        senders = [t.source for t in step.transfers]
        receivers = [t.dest for t in step.transfers]
        assert len(set(senders)) == len(senders) and len(set(receivers)) == len(receivers), \
            "a rank sends or receives two messages in one step"
        before = state.copy()                       # every message of a step leaves at once
        for t in step.transfers:
            incoming = before[t.source, t.start:t.stop]
            if step.reduce:
                state[t.dest, t.start:t.stop] += incoming
            else:
                state[t.dest, t.start:t.stop] = incoming
    return state


@pytest.mark.parametrize("algorithm", ar.ALGORITHMS)
@pytest.mark.parametrize("p", range(1, 10))
def test_schedule_is_an_allreduce(algorithm, p):
    for n in (1, p - 1, 3 * p + 2, 40):
        state = contributions(algorithm, p, n, q=2)
        assert (state == 1).all(), (algorithm, p, n)


def test_message_counts_are_the_textbook_ones():
    for p in (2, 4, 8, 16):
        assert len(ar.schedule("ring", p, 64)) == 2 * (p - 1)
        for algorithm in ("rabenseifner", "topawa"):
            assert len(ar.schedule(algorithm, p, 64, 4)) == 2 * (p.bit_length() - 1)
    # non-power of two: a fold and an unfold step around the p' = 4 tree
    phases = [s.phase for s in ar.schedule("rabenseifner", 6, 60)]
    assert phases == ["fold"] + ["reduce-scatter"] * 2 + ["allgather"] * 2 + ["unfold"]


def test_topawa_deals_ranks_round_robin_over_supernodes():
    order = ar.topawa_order(16, 4)                 # 4 supernodes of 4 physical ranks
    assert order[:5] == [0, 4, 8, 12, 1]
    assert [order[l] // 4 for l in range(16)] == [l % 4 for l in range(16)]
    assert sorted(ar.topawa_order(7, 3)) == list(range(7))      # a bijection, ragged too
    # the first halving step (distance p/2) stays inside a supernode, the last crosses
    steps = ar.schedule("topawa", 16, 64, 4)
    assert all(t.source // 4 == t.dest // 4 for t in steps[0].transfers)
    assert all(t.source // 4 != t.dest // 4 for t in steps[3].transfers)
    classic = ar.schedule("rabenseifner", 16, 64, 4)
    assert all(t.source // 4 != t.dest // 4 for t in classic[0].transfers)


@pytest.mark.parametrize("algorithm", ar.ALGORITHMS)
@pytest.mark.parametrize("p,q", CLOSED_FORM_CASES)
def test_closed_form_equals_step_by_step_simulation(algorithm, p, q):
    network = ar.Network(alpha=2e-6, beta1=1.5e-10, nodes_per_supernode=q)
    reduction = ar.ReductionCost(seconds_per_call=3e-6, seconds_per_byte=4e-11)
    n = 4 * p * 1000                               # elements: every block a whole number
    simulated = ar.simulate(ar.schedule(algorithm, p, n, q), network, 4, reduction)
    closed = ar.closed_form(algorithm, p, 4 * n, network, reduction)
    for term in ("latency", "bandwidth", "reduction"):
        assert getattr(simulated, term) == pytest.approx(getattr(closed, term), rel=1e-12), term


def test_model_orders_the_algorithms_as_the_thesis():
    network = ar.Network()
    reduction = ar.ReductionCost(2e-6, 3e-11)
    nbytes = 256 << 20
    for p in (512, 1024):
        t = {a: ar.closed_form(a, p, nbytes, network, reduction) for a in ar.ALGORITHMS}
        assert t["topawa"].total < t["rabenseifner"].total        # β2 coefficient p-q -> p/q-1
        assert t["topawa"].total < t["ring"].total                # 2 log p α vs 2(p-1) α
    # the thesis' arithmetic, per phase, p = 1024, q = 256: 3.25 n β1 against 1.01 n β1
    classic = ar.closed_form("rabenseifner", 1024, 1.0, ar.Network(alpha=0, beta1=1.0))
    topawa = ar.closed_form("topawa", 1024, 1.0, ar.Network(alpha=0, beta1=1.0))
    assert classic.bandwidth / 2 == pytest.approx(3.25, abs=0.01)
    assert topawa.bandwidth / 2 == pytest.approx(1.01, abs=0.01)


def test_congestion_gives_beta2_only_when_the_supernode_is_full():
    network = ar.Network(beta1=1.0, nodes_per_supernode=256)
    assert network.beta2 == 4.0
    assert network.beta_across(256) == 4.0
    assert network.beta_across(1) == 1.0           # the ring's one link out of a supernode
    assert network.beta_across(128) == 2.0


def test_reduction_cost_is_fitted_on_the_vm():
    from swsim.hostlib import dnn
    from swsim.vm import Machine
    cost = ar.reduction_cost("sw26010", 4)
    assert cost.seconds_per_call > 0 and cost.seconds_per_byte > 0
    ones = np.ones(1 << 16, np.float32)
    measured = dnn.add(ones, ones, machine=Machine(), cgs=4)[1].seconds
    assert cost((1 << 16) * 4) == pytest.approx(measured, rel=0.1)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TrainError, match="unknown 'tree'.*ring, rabenseifner, topawa"):
        ar.schedule("tree", 4, 10)
    with pytest.raises(TrainError, match="p >= 1"):
        ar.schedule("ring", 0, 10)
    with pytest.raises(TrainError, match="power of two"):
        ar.closed_form("ring", 6, 1.0, ar.Network())
    with pytest.raises(TrainError, match="must divide"):
        ar.closed_form("topawa", 8, 1.0, ar.Network(nodes_per_supernode=3))


def test_bench_model_reproduces_the_shape_of_figs_7_7_and_7_8():
    from swsim.hostlib.tools.bench import allreduce as bench
    result = bench.run(real=False)
    for p in (512, 1024):
        bandwidth = result["bandwidth"][p]
        assert all(t > r for t, r in zip(bandwidth["topawa"], bandwidth["rabenseifner"]))
        assert bandwidth["ring"] == sorted(bandwidth["ring"])      # better with larger messages
        assert bandwidth["ring"][0] < bandwidth["topawa"][0] / 2    # latency and small chunks
    for name, *_ in bench.NETWORKS:
        assert result["scaling"]["topawa"][name][-1] <= 1024
    resnet, alexnet = (result["scaling"]["topawa"][n][-1] / 1024 for n in ("ResNet-50", "AlexNet"))
    assert resnet > 0.95 and alexnet < resnet                        # AlexNet scales worse
    report = bench.format_report(result)
    assert "Fig. 7.7" in report and "thesis (Topawa) 64.2%" in report


def test_executor_refuses_a_buffer_that_is_not_float32():
    class OneRank:                                   # the executor checks before any MPI call
        def Get_rank(self):
            return 0

        def Get_size(self):
            return 1
    with pytest.raises(TrainError, match="float32, got float64"):
        ar.allreduce(np.zeros(4), OneRank())
    total, traffic = ar.allreduce(np.arange(4, dtype=np.float32), OneRank())
    assert total.tolist() == [0, 1, 2, 3] and traffic.messages == 0
