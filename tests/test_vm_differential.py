"""Differential tests: the C core and the Python reference engine agree bit for bit.

Random programs over the whole instruction subset (tests/vmgen.py) — straight-line code, loops,
register communication between random CPEs, DMA, barriers, on 1 to 64 CPEs, and programs that
fault or deadlock — run on both engines from the same initial state; every register, LDM byte,
memory byte, counter, the stop report and the trace spans must match.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import swsim
from swsim.vm import VMConfig
from swsim.vm.engine_api import EngineJob

from vmgen import STRAIGHT, Case, initial_state, programs, straight_instruction

from swsim.vm import cengine, pyengine   # the C core must be built: a missing one fails here

CONFIG = VMConfig.preset("sw26010")


def run_both(case, trace=False, max_cycles=200_000):
    program = swsim.assemble(case.text, filename="generated.s")
    regs, ldm, mem = initial_state(case, CONFIG, len(program.code))
    spawned = np.zeros(CONFIG.num_cpes, bool)
    spawned[:case.cpes] = True
    jobs = [EngineJob(config=CONFIG, code=program.code, spawned=spawned,
                      entry_pc=program.address_of("entry"), regs=regs.copy(), ldm=ldm.copy(),
                      mem=mem.copy(), max_cycles=max_cycles, trace=trace) for _ in range(2)]
    results = [pyengine.run(jobs[0]), cengine.run(jobs[1])]
    return jobs, results


def assert_same(jobs, results):
    py, c = results
    for name in ("regs", "ldm", "mem"):
        a, b = getattr(jobs[0], name), getattr(jobs[1], name)
        if not np.array_equal(a, b):
            where = np.argwhere(a != b)[:5]
            pytest.fail(f"{name} differ at {where.tolist()}: python {a[tuple(where[0])]} "
                        f"c {b[tuple(where[0])]}")
    assert py.stop == c.stop
    assert py.kernel_cycles == c.kernel_cycles
    np.testing.assert_array_equal(py.cpe_counters, c.cpe_counters)
    np.testing.assert_array_equal(py.cg_counters, c.cg_counters)
    np.testing.assert_array_equal(py.pcs, c.pcs)
    assert py.spans == c.spans


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


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(programs(max_cpes=9))
def test_engines_agree_on_traces(case):
    assert_same(*run_both(case, trace=True))


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
