"""``swsim analyze``: steady-state loop analysis on the reference engine's issue rules.
Expected cycle counts are hand-counted from docs/timing.md (latencies: vmad 7, vldd 4,
integer 1, fdivd 34 with P0 busy as long)."""
import json
import re

import numpy as np
import pytest

import swsim
from swsim.cli import main
from swsim.hostlib.tools.analyze import AnalysisError, analyze_loop
from swsim.kernels import program, source_path

AXPY = "examples/axpy.s"

LOOPS = """
    .text
chain:
1:  vmad  $1, $2, $3, $3
    vmad  $1, $2, $3, $3
    vmad  $1, $2, $3, $3
    vmad  $1, $2, $3, $3
    subl  $27, 1, $27
    bgt   $27, 1b
independent:
2:  vmad  $1, $2, $3, $3
    vmad  $1, $2, $4, $4
    vmad  $1, $2, $5, $5
    vmad  $1, $2, $6, $6
    subl  $27, 1, $27
    bgt   $27, 2b
divide:
    fdivd $1, $2, $3
    fmuld $4, $5, $6
    faddd $6, $6, $7
    subl  $27, 1, $27
    bgt   $27, divide
    ret
"""
# The first vmad of KBODY in kernels/gemm/gemm_kbody.inc: the line starts the loops of all four
# roles of kernels/gemm/gemm_kloop.s (macro expansions, told apart by --instance).
GEMM_LOOP_LINE = "gemm_kbody.inc:%d" % next(
    n for n, text in enumerate(source_path("gemm/gemm_kbody.inc").read_text().splitlines(), 1)
    if "# 0  C00" in text)


@pytest.fixture(scope="module")
def loops():
    return swsim.assemble(LOOPS)


def assert_consistent(analysis):
    """Per iteration, every cycle of each pipe is valid or idle for one reason."""
    cycles = analysis.cycles_per_iteration
    assert analysis.p0_valid + sum(analysis.p0_idle.values()) == pytest.approx(cycles)
    assert analysis.p1_valid + sum(analysis.p1_idle.values()) == pytest.approx(cycles)
    assert len(analysis.timeline) == cycles * analysis.period


@pytest.mark.parametrize("instance, p1_valid", [(1, 12), (2, 11), (3, 11), (4, 10)])
def test_gemm_inner_loop_is_16_cycles_at_full_efficiency(instance, p1_valid):
    # The four roles (row send/receive x column send/receive) are four expansions of the line.
    a = analyze_loop(program("gemm/gemm_kloop.s"), GEMM_LOOP_LINE, instance=instance)
    assert len(a.loop.body) == 16 + p1_valid
    assert a.converged and a.cycles_per_iteration == 16
    assert a.ee == 1.0 and a.p0_valid == 16 and a.p1_valid == p1_valid
    assert a.rbw_mbw == pytest.approx(16 / p1_valid)          # eq. 3-4
    assert a.limited_by == "P0" and a.p0_idle == {}
    assert [link.latency for link in a.critical_chain] == [7]   # one accumulator
    assert "4 loops (macro expansions)" in a.notes[0]
    assert_consistent(a)


def test_axpy_stalls_on_load_use_and_store_use():
    # c0 vldd $2 (P1; vldd $3 needs P1 too), c1 vldd $3, c2-4 vmad waits for $3 (ready c5),
    # c5 vmad + addl, c6 subl (vstd waits for $3 until c12), c12 vstd + addl, c13 bne:
    # 14 cycles; the next vldd $3 waits for vmad's $3 (WAW), ready at c12: no extra stall.
    a = analyze_loop(program(AXPY), "17", source_file=str(source_path(AXPY)))
    assert a.cycles_per_iteration == 14 and a.p0_valid == 2 and a.p1_valid == 6
    assert a.p0_idle == {"raw": 10, "pairing": 2} and a.p1_idle == {"raw": 8}
    bounds = {b.name: b.cycles for b in a.bounds}
    assert bounds == {"recurrence": 11, "P0": 1, "P1": 4, "dual issue": 4}
    assert a.limited_by.startswith("in-order issue: 3 cycles/iteration")
    assert [(link.index, link.latency, link.next_iteration)
            for link in a.critical_chain] == [(1, 4, False), (2, 7, True)]
    assert a.timeline[2][1].reason == "raw" and "$3 from [1]" in a.timeline[2][1].detail
    assert_consistent(a)


def test_axpy_analysis_matches_the_engine():
    # Ideal environment = real one for axpy (LDM operands): each extra iteration costs what
    # the analysis says.
    def kernel_cycles(vectors):
        m = swsim.Machine()
        return m.run(program(AXPY), entry="axpy", args=[4 * vectors, 0, 8192, 1.5],
                     cpes=[0]).kernel_cycles
    per_iteration = (kernel_cycles(30) - kernel_cycles(10)) / 20
    assert per_iteration == analyze_loop(program(AXPY), "axpy.s:17").cycles_per_iteration


def test_dependent_vmads_are_bound_by_the_recurrence(loops):
    # c0 vmad #1; #2, #3, #4 each wait 7 for $3 (c7, c14, c21); subl pairs with #4 at c21,
    # bgt c22; the next #1 waits for $3 until c28: 28 cycles, 4 x 7 of recurrence.
    a = analyze_loop(loops, "chain")
    assert a.cycles_per_iteration == 28 and a.limited_by == "recurrence"
    assert a.ee == pytest.approx(4 / 28)
    assert [(link.index, link.latency) for link in a.critical_chain] == \
        [(0, 7), (1, 7), (2, 7), (3, 7)]
    assert a.critical_chain[-1].next_iteration
    assert a.p0_idle == {"raw": 23, "pairing": 1}
    assert_consistent(a)


def test_independent_vmads_wait_only_for_their_own_accumulator(loops):
    # c0-c3 the four vmads (subl pairs with the 4th), c4 bgt; vmad $3 again at c7: 7 cycles.
    a = analyze_loop(loops, "independent")
    assert a.cycles_per_iteration == 7 and a.limited_by == "recurrence"
    assert_consistent(a)


def test_divide_holds_p0(loops):
    # c0 fdivd (P0 busy, $3 ready at c34), c1-33 fmuld waits for P0 (divide), c34 fmuld,
    # c35-40 faddd waits for $6 (raw), c41 faddd + subl, c42 bgt, c43 fdivd again: 43 cycles.
    a = analyze_loop(loops, "divide")
    assert a.cycles_per_iteration == 43
    assert a.p0_idle["divide"] == 33 and a.p0_idle["raw"] == 6
    assert {b.name: b.cycles for b in a.bounds}["P0"] == 36
    assert a.limited_by.startswith("in-order issue")
    assert_consistent(a)


def test_too_few_iterations_are_reported_as_not_converged(loops):
    a = analyze_loop(loops, "chain", iterations=2)
    assert not a.converged and "NOT converged" in str(a)


def test_text_output_names_the_assumptions_bound_and_timeline(loops):
    text = str(analyze_loop(loops, "chain"))
    for expected in ("global accesses are timed as LDM accesses", "28.00 cycles/iteration",
                     "limited by: recurrence", "Critical chain", "Timeline of iteration 19",
                     "raw: [1] waits 6 for $3 from [0]"):
        assert expected in text


@pytest.mark.parametrize("loop, options, message", [
    ("chian", {}, "no label 'chian' (did you mean chain?)"),
    ("ret_label", {}, "no label"),
    ("999", {}, "no code at or after line 999"),
    ("19", {}, "no backward branch to line 19"),
    ("chain", {"entry": "nope"}, "--entry nope: no such function"),
    ("chain", {"iterations": 0}, "--iterations must be 1..10000, got 0"),
    ("chain", {"iterations": 10**9}, "--iterations must be 1..10000, got 1000000000"),
    ("chain", {"instance": 0}, "--instance must be at least 1, got 0"),
])
def test_bad_loops_are_reported(loops, loop, options, message):
    with pytest.raises(AnalysisError, match=re.escape(message)):
        analyze_loop(loops, loop, **options)


def test_a_label_without_a_backward_branch_is_reported():
    with pytest.raises(AnalysisError, match=r"no backward branch to \.Ldone"):
        analyze_loop(program("gemm/gemm_kloop.s"), ".Ldone")


def test_entry_limits_the_search_to_one_function(loops):
    # The first code at or after line 3 is line 4 in `chain`, line 18 in `divide`.
    assert analyze_loop(loops, "3", entry="chain").loop.head == loops.address_of("chain")
    assert analyze_loop(loops, "3", entry="divide").loop.head == loops.address_of("divide")


def test_cli_json(capsys):
    status = main(["analyze", str(source_path("gemm/gemm_kloop.s")), "--loop", GEMM_LOOP_LINE,
                   "--instance", "2", "--json"])
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cycles_per_iteration"] == 16 and report["ee"] == 1.0
    assert report["rbw_mbw_ldm_to_registers"] == pytest.approx(16 / 11)
    assert len(report["loop"]["instructions"]) == 27
    assert {"text", "source", "pipes", "latency"} <= set(report["loop"]["instructions"][0])
    assert len(report["timeline"]) == 16
    assert set(report["timeline"][0]) == {"cycle", "p0", "p1"}
    assert set(report["timeline"][0]["p0"]) == {"index", "iteration", "reason", "detail"}
    assert [b["name"] for b in report["bounds"]] == ["recurrence", "P0", "P1", "dual issue"]
    assert report["limited_by"] == "P0" and report["converged"]
    assert np.isclose(sum(report["p1_idle"].values()) + report["p1_valid"], 16)


@pytest.mark.parametrize("argv, message", [
    (["--loop", "nolabel"], "no label 'nolabel'"),
    (["--loop", GEMM_LOOP_LINE, "--instance", "9"],
     f"--instance 9: line {GEMM_LOOP_LINE} starts 4 loops"),
])
def test_cli_bad_input_exits_1_with_a_message(capsys, argv, message):
    assert main(["analyze", str(source_path("gemm/gemm_kloop.s")), *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_missing_file_exits_1(capsys, tmp_path):
    assert main(["analyze", str(tmp_path / "none.s"), "--loop", "1"]) == 1
    assert "No such file" in capsys.readouterr().err
