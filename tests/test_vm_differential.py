"""Differential tests: the C core and the Python reference engine agree bit for bit.

Random programs over the whole machine (vm/fuzzgen.py) — straight-line code, loops, calls,
register communication, DMA, barriers, races on shared memory, on any set of CPEs of meshes of
any shape and random valid configurations, and programs that fault or deadlock — run on both
engines from the same initial state; every register, LDM byte, memory byte, counter, the stop
report and the trace spans must match. (`swsim fuzz` runs the same campaign at length.)
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swsim.vm.fuzzgen import STRAIGHT, Case, programs, straight_instruction

from swsim.vm.differential import differences, run_both as run_job   # needs the C core built


def run_both(case, trace=False, max_cycles=200_000):
    return run_job(case.job(max_cycles=max_cycles, trace=trace))


def assert_same(jobs, results):
    assert differences(jobs, results) == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(programs())
def test_engines_agree_on_random_programs(case):
    assert_same(*run_both(case))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(programs(faults=True))
def test_engines_report_the_same_fault(case):
    jobs, results = run_both(case)
    assert_same(jobs, results)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(programs(faults=True, configs=True))
def test_engines_agree_on_random_configurations(case):
    assert_same(*run_both(case, trace=True))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(programs(max_cpes=9))
def test_engines_agree_on_traces(case):
    assert_same(*run_both(case, trace=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(programs(faults=True, configs=True, spmd=True), st.booleans())
def test_engines_agree_on_spmd_programs(case, trace):
    """Every CPE runs the same code on its own data: the C core's CPEs in step, and every way
    out of it (branches on data, accesses outside LDM, queues that differ, faults)."""
    assert_same(*run_both(case, trace=trace))


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.data_too_large])
@given(programs(max_cpes=16))
def test_cycle_limit_is_reported_identically(case):
    jobs, results = run_both(case, max_cycles=50)
    assert_same(jobs, results)


@pytest.mark.parametrize("instr", STRAIGHT, ids=[i.name for i in STRAIGHT])
@settings(max_examples=4, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_engines_agree_on_every_instruction(instr, data, seed):
    """Each instruction alone (the C core dispatches each one by its own case)."""
    line = straight_instruction(data.draw, only=instr)
    text = f"\t.text\n\t.globl\tentry\nentry:\n{line}\n\thalt\n"
    assert_same(*run_both(Case(text, 1, seed)))
