"""HOPE's schedulers (hostlib/graph/hope.py): plans valid on random DAGs, the ILP optimal
against brute force, the bisection acyclic and balanced, super-ops, transfer costs, errors,
and one plan run on the VM against the graph engine."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.errors import ArgumentError
from swsim.hostlib.graph import Session, hope
from swsim.hostlib.tools.bench.hope import feeds_for, inception
from swsim.vm.machine import Machine


def make_problem(preds, latency, cost=0):
    units = list(preds)
    edge_bytes = {(p, u): 1 for u in units for p in preds[u]}
    return hope.Problem(units, preds, latency, edge_bytes, {u: [u] for u in units},
                        (lambda nbytes, a, b: cost * nbytes) if cost else None)


@st.composite
def dags(draw, max_units=5, devices=("A", "B")):
    n = draw(st.integers(1, max_units))
    preds, latency = {}, {}
    for i in range(n):
        unit = f"u{i}"
        preds[unit] = [f"u{j}" for j in range(i) if draw(st.booleans())]
        latency[unit] = {d: draw(st.integers(1, 20)) for d in devices}
    return make_problem(preds, latency, cost=draw(st.integers(0, 5)))


def assert_valid(problem, plan):
    assert set(plan.device) == set(problem.units)
    for unit in problem.units:
        d = plan.device[unit]
        assert plan.finish[unit] == pytest.approx(plan.start[unit] + problem.latency[unit][d])
        for p in problem.preds[unit]:
            arrive = plan.finish[p] + problem.cost(p, unit, plan.device[p], d)
            assert plan.start[unit] >= arrive - 1e-6
    for a, b in itertools.combinations(problem.units, 2):
        if plan.device[a] == plan.device[b]:
            assert plan.finish[a] <= plan.start[b] + 1e-6 or \
                plan.finish[b] <= plan.start[a] + 1e-6


def brute_force(problem):
    """The shortest makespan over every assignment and every topological order."""
    best = float("inf")
    for order in itertools.permutations(problem.units):
        seen = set()
        if any(not set(problem.preds[u]) <= seen or seen.add(u) for u in order):
            continue
        for choice in itertools.product(problem.devices, repeat=len(order)):
            plan = hope.replay(problem, dict(zip(problem.units, choice)), list(order))
            best = min(best, plan.makespan)
    return best


@settings(max_examples=25, deadline=None)
@given(dags())
def test_every_scheduler_gives_a_valid_plan_and_the_ilp_is_optimal(problem):
    plans = {name: schedule(problem) for name, schedule in hope.SCHEDULERS.items()}
    for plan in plans.values():
        assert_valid(problem, plan)
    optimum = brute_force(problem)
    assert plans["HOPE ILP whole"].makespan == pytest.approx(optimum)
    assert min(p.makespan for p in plans.values()) >= optimum - 1e-6


def test_top_k_search_beats_earliest_finish_where_lookahead_matters():
    # two ready units; A is fast for both, but "long" is much slower on B: putting "short"
    # on A first (earliest finish) forces "long" onto B or behind it
    problem = make_problem({"short": [], "long": []},
                           {"short": {"A": 2, "B": 3}, "long": {"A": 10, "B": 30}})
    assert hope.greedy(problem, k=1).makespan == 12
    assert hope.greedy(problem, k=2).makespan == 10
    assert hope.ilp(problem).makespan == 10


def test_transfer_cost_keeps_a_chain_on_one_device():
    problem = make_problem({"a": [], "b": ["a"]}, {"a": {"A": 5, "B": 6}, "b": {"A": 6, "B": 5}},
                           cost=100)
    plan = hope.ilp(problem)
    assert plan.device["a"] == plan.device["b"] and plan.makespan == 11
    free = make_problem({"a": [], "b": ["a"]}, {"a": {"A": 5, "B": 6}, "b": {"A": 6, "B": 5}})
    assert hope.ilp(free).makespan == 10


def test_bisection_is_acyclic_balanced_and_parts_are_small():
    # a 30-unit ladder of 3 parallel chains joined every 5 ranks
    preds, latency = {}, {}
    for r in range(10):
        for c in range(3):
            unit = f"r{r}c{c}"
            preds[unit] = [f"r{r - 1}c{c}"] if r else []
            if r and r % 5 == 0:
                preds[unit] = [f"r{r - 1}c{k}" for k in range(3)]
            latency[unit] = {"A": 1, "B": 2}
    problem = make_problem(preds, latency)
    rank = hope.upward_ranks(problem)
    low, high = hope.bisect(problem.units, rank, {u: 1 for u in problem.units})
    assert len(low) == len(high) == 15
    assert not any(p in high for u in low for p in preds[u])
    parts = hope.partition(problem)
    assert all(len(part) < hope.PART_NODES for part in parts)
    assert sorted(sum(parts, [])) == sorted(problem.units)
    placed = set()
    for part in parts:             # in dependence order
        assert all(p in placed or p in part for u in part for p in preds[u])
        placed |= set(part)
    assert_valid(problem, hope.ilp(problem, limit=6))


def test_super_ops_merge_short_single_predecessor_units():
    problem = make_problem({"conv": [], "relu": ["conv"], "other": [], "add": ["relu", "other"]},
                           {"conv": {"A": 100, "B": 300}, "relu": {"A": 5, "B": 9},
                            "other": {"A": 100, "B": 100}, "add": {"A": 1, "B": 1}})
    merged = hope.merge_super_ops(problem)
    assert merged.units == ["conv", "other", "add"]       # add has two predecessors
    assert merged.members["conv"] == ["conv", "relu"]
    assert merged.latency["conv"] == {"A": 105, "B": 309}
    assert merged.preds["add"] == ["conv", "other"]
    problem.engine = {u: {"A": 10, "B": 20} for u in problem.units}
    assert hope.merge_super_ops(problem).engine["conv"] == {"A": 20, "B": 40}


def test_search_follows_the_model_and_the_ilp_the_engine_bound():
    """Two independent units on two devices that share one DMA engine: the replay splits
    them; a model that charges the sharing makes the search put them on one device."""
    problem = make_problem({"a": [], "b": []}, {u: {"A": 10, "B": 12} for u in "ab"})
    split = hope.ilp(problem)
    assert set(split.device.values()) == {"A", "B"} and split.makespan == 12
    problem.model = lambda plan: plan.makespan + 15 * (len(set(plan.device.values())) - 1)
    found = hope.search(problem, split)
    assert len(set(found.device.values())) == 1
    assert problem.model(found) < problem.model(split) == 27
    assert hope.search(problem, found).device == found.device          # a local minimum
    # the ILP: the makespan is at least the engine's cycles, which B's requests hold longer
    problem.engine = {u: {"A": 10, "B": 15} for u in "ab"}
    assert set(hope.ilp(problem).device.values()) == {"A"}


def test_bad_arguments_are_refused_by_name():
    problem = make_problem({"a": []}, {"a": {"A": 1}})
    with pytest.raises(ArgumentError, match="k must be"):
        hope.greedy(problem, k=0)
    with pytest.raises(ArgumentError, match="cgs must be"):
        hope.devices(Machine(), cgs=99)
    with pytest.raises(ArgumentError, match="no device"):
        hope.ilp(make_problem({"a": []}, {"a": {"A": float("inf")}}))


def test_a_plan_runs_on_the_vm_and_matches_the_graph_engine():
    graph = inception(channels=4, size=4)
    feeds = feeds_for(graph)
    machine = Machine()
    want = Session(graph, machine=machine).run(feeds)
    problem = hope.profile(graph, machine, feeds, hope.devices(machine, cgs=2))
    plan = hope.greedy(problem, k=1)
    assert len(set(plan.device.values())) > 1
    got, simulated = hope.execute(graph, problem, plan, machine, feeds)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)
    assert simulated.makespan == plan.makespan
    assert plan.makespan < hope.sequential(problem).makespan


def test_bench_hope_refuses_an_unknown_graph(capsys):
    from swsim.cli import main
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "hope", "--graph", "resnet"])
    assert exit_.value.code == 2
    assert "invalid choice: 'resnet'" in capsys.readouterr().err
