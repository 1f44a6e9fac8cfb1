"""HOPE on CPE sub-meshes (hostlib/graph/hope_submesh.py): row-block devices, a plan run as one
generated launch whose blocks meet only at their own barriers, outputs against numpy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.hostlib.graph import hope, hope_submesh, te
from swsim.hostlib.graph.ir import GraphError
from swsim.hostlib.graph.souffle import Program
from swsim.vm.machine import Machine

N = 16
HALVES = ["R0-3", "R4-7"]


def _program():
    """Two independent chains (a transposed read is a DMA read, so each chain has a barrier
    inside its block), joined by e."""
    x = te.placeholder("x", (N, N))
    a = te.compute((N, N), lambda i, j: x[i, j] * 2.0, "a")
    b = te.compute((N, N), lambda i, j: x[i, j] + 1.0, "b")
    c = te.compute((N, N), lambda i, j: a[j, i], "c")
    d = te.compute((N, N), lambda i, j: b[j, i] * b[j, i], "d")
    e = te.compute((N, N), lambda i, j: c[i, j] - d[i, j], "e")
    return Program({"x": x}, {}, [a, b, c, d, e], ["e"])


@pytest.fixture(scope="module")
def setup():
    machine, program = Machine(), _program()
    x = np.random.default_rng(0).standard_normal((N, N))
    problem = hope_submesh.profile(program, machine, HALVES)
    return machine, program, problem, {"x": x}, 2 * x.T - (x.T + 1) ** 2


def _plan(problem, devices: dict):
    return hope.replay(problem, devices, problem.units)


def test_devices_and_errors():
    config = Machine().config
    assert hope_submesh.submeshes(config, (8,)) == ["R0-7"]
    assert hope_submesh.submeshes(config, (6, 2)) == ["R0-5", "R6-7"]
    assert hope_submesh.span("R6-7", config) == (48, 16, 0xc0)
    for rows in ((4, 3), (4, 4.0), (), 8, (True, 7)):
        with pytest.raises(GraphError, match="rows"):
            hope_submesh.submeshes(config, rows)
    for name in ("CG0", "R3-9", "R5-4"):
        with pytest.raises(GraphError, match="sub-mesh"):
            hope_submesh.span(name, config)


def test_profile(setup):
    _, program, problem, _, _ = setup
    assert problem.units == ["a", "b", "c", "d", "e"]
    assert problem.preds == {"a": [], "b": [], "c": ["a"], "d": ["b"], "e": ["c", "d"]}
    assert all(0 < problem.latency[u][d] < 200_000 for u in problem.units for d in HALVES)


def test_blocks_meet_only_at_their_barriers(setup):
    machine, program, problem, feeds, want = setup
    chains = {"a": "R0-3", "c": "R0-3", "e": "R0-3", "b": "R4-7", "d": "R4-7"}
    launch, = hope_submesh._launch([(t, chains[t.name]) for t in program.tensors], ["e"],
                                   machine.config)
    assert {s.tensor.name: s.barrier for s in launch.steps} == \
        {"a": 0, "b": 0, "c": 0x0f, "d": 0xf0, "e": 0xff}
    got, stats = hope_submesh.execute(program, _plan(problem, chains), machine, feeds)
    np.testing.assert_allclose(got["e"], want, rtol=1e-12)
    # the two chains really run at once: the same TEs in the same order on one block are slower
    _, alone = hope_submesh.execute(program, _plan(problem, dict.fromkeys(chains, "R0-3")),
                                    machine, feeds)
    assert stats[0].cycles < 0.9 * alone[0].cycles


@settings(max_examples=4, deadline=None)
@given(st.lists(st.sampled_from(HALVES), min_size=5, max_size=5))
def test_any_placement_matches_numpy(setup, placement):
    machine, program, problem, feeds, want = setup
    plan = _plan(problem, dict(zip(problem.units, placement)))
    got, _ = hope_submesh.execute(program, plan, machine, feeds)
    np.testing.assert_allclose(got["e"], want, rtol=1e-12)


def test_request_cycles_follow_the_dma_model():
    config = Machine().config
    lines = 3
    assert hope_submesh._request_cycles(config, lines * 128, 0, 0, False) == \
        config.dma_get_request_cycles + lines * config.dma_transaction_cycles
    assert hope_submesh._request_cycles(config, 128, 0, 0, True) == \
        config.dma_put_write_cycles + config.dma_put_ack_cycles
    # a strided get: each block of one line holds the engine at least dma_block_get_min_cycles
    assert hope_submesh._request_cycles(config, 4 * 64, 64, 64, False) == \
        config.dma_get_request_cycles + 4 * max(
            config.dma_transaction_cycles + config.dma_block_get_cycles,
            config.dma_block_get_min_cycles)


def test_model_sees_the_shared_dma_engine(setup):
    """The blocks' plan and the one-block plan as the VM runs them, within 10 %; the replay
    of the alone latencies is too short for the blocks' plan (they share the DMA engine)."""
    machine, program, problem, feeds, _ = setup
    chains = {"a": "R0-3", "c": "R0-3", "e": "R0-3", "b": "R4-7", "d": "R4-7"}
    for devices in (dict.fromkeys(chains, "R0-3"), chains):
        plan = _plan(problem, devices)
        _, stats = hope_submesh.execute(program, plan, machine, feeds)
        assert problem.model(plan) == pytest.approx(stats[0].cycles, rel=0.1)
    assert plan.makespan < 0.9 * stats[0].cycles
