"""Issue rules and latencies of docs/timing.md, each with a hand-counted cycle budget.

Notation in the comments: cN = cycle N; "L"/"F" = leader/follower; pipes P0/P1.
"""
import numpy as np
import pytest

from swsim.vm import Machine
from vm_helpers import idle, reg, run


def memory_argument():
    """Keyword arguments of ``run`` passing an array in main memory as a0."""
    m = Machine()
    return {"args": [m.mem.put(np.arange(8, dtype=np.int64))], "machine": m}


def test_p0_and_p1_only_instructions_pair():
    res, _ = run("""
        vmad $1, $2, $3, $4     # c0 L P0; F ldl (P1, independent) pairs
        ldl $5, 0($31)
        halt                    # c1 P1; F not considered -> P0 idle "pairing"
    """)
    assert res.kernel_cycles == 2
    s = res.cpe[0]
    assert (s.p0_valid, s.p1_valid) == (1, 2)
    assert idle(res, pipe=0) == {"pairing": 1}


def test_leader_able_to_use_both_pipes_takes_p1_when_alone():
    res, _ = run("""
        addl $1, 1, $1          # c0 L (P01); F reads $1 -> no pair -> L on P1, P0 "pairing"
        addl $1, 1, $1          # c1 L; F halt (P1 only) pairs -> L P0, halt P1
        halt
    """)
    assert res.kernel_cycles == 2
    s = res.cpe[0]
    assert (s.p0_valid, s.p1_valid) == (1, 2)
    assert idle(res, pipe=0) == {"pairing": 1}
    assert idle(res, pipe=1) == {}


def test_two_either_pipe_instructions_pair():
    res, m = run("""
        addl $1, 1, $1          # c0 L P1, F P0
        addl $2, 2, $2
        halt                    # c1
    """)
    assert res.kernel_cycles == 2
    assert (res.cpe[0].p0_valid, res.cpe[0].p1_valid) == (1, 2)
    assert (reg(m, 1), reg(m, 2)) == (1, 2)


def test_raw_stall_on_float_latency():
    res, _ = run("""
        faddd $1, $2, $3        # c0 P0; F reads $3 -> P1 "pairing"
        faddd $3, $3, $4        # c1..c6 raw ($3 ready at c7); c7 issue, halt pairs on P1
        halt
    """)
    assert res.kernel_cycles == 8
    assert idle(res, pipe=0) == {"raw": 6}
    assert idle(res, pipe=1) == {"raw": 6, "pairing": 1}


def test_waw_stall():
    res, m = run("""
        fmuld $1, $2, $3        # c0 P0, $3 ready at c7; F writes $3 -> P1 "pairing"
        ldi $3, 1($31)          # c1..c6 waw; c7 issue on P0, halt on P1
        halt
    """)
    assert res.kernel_cycles == 8
    assert idle(res, pipe=0) == {"waw": 6}
    assert idle(res, pipe=1) == {"waw": 6, "pairing": 1}
    assert reg(m, 3) == 1


def test_idle_pipe_is_charged_the_followers_stall_reason():
    res, _ = run("""
        mull $5, $5, $1         # c0 P0 ($1 ready c5); F vaddl is P0 only -> P1 "pairing"
        vaddl $3, $3, $4        # c1 P0; F ldl waits for $1 -> P1 "raw"
        ldl $2, 0($1)           # c2..c4 raw; c5 P1; F halt is P1 only -> P0 "pairing"
        halt                    # c6 P1, P0 "pairing"
    """)
    assert res.kernel_cycles == 7
    assert idle(res, pipe=0) == {"raw": 3, "pairing": 2}
    assert idle(res, pipe=1) == {"raw": 4, "pairing": 1}
    assert (res.cpe[0].p0_valid, res.cpe[0].p1_valid) == (2, 2)


def test_taken_branch_ends_the_issue_group():
    res, m = run("""
        br $31, next            # c0 P1; F not considered -> P0 "pairing"
        ldi $1, 9($31)
    next:
        ldi $2, 1($31)          # c1 P0 with halt on P1
        halt
    """)
    assert res.kernel_cycles == 2
    assert (reg(m, 1), reg(m, 2)) == (0, 1)
    assert idle(res, pipe=0) == {"pairing": 1}


def test_branch_as_follower_is_taken_in_the_same_cycle():
    res, m = run("""
        ldi $1, 1($31)          # c0 L P0, F br P1: taken, the next group starts at `next`
        br $31, next
        ldi $1, 2($31)
    next:
        halt                    # c1
    """)
    assert res.kernel_cycles == 2
    assert reg(m, 1) == 1


def test_untaken_branch_costs_nothing():
    res, _ = run("""
        ldi $1, 1($31)          # c0 P1 (F bne reads $1 -> "pairing")
        beq $1, away            # c1 not taken
        halt                    # c2
    away:
        halt
    """)
    assert res.kernel_cycles == 3


def test_divide_keeps_p0_busy():
    res, _ = run("""
        fdivd $1, $2, $3        # c0 P0, P0 busy until c34; F P0 only -> P1 "pairing"
        faddd $4, $5, $6        # c1..c33 "divide"; c34 P0, halt P1
        halt
    """)
    assert res.kernel_cycles == 35
    assert idle(res, pipe=0) == {"divide": 33}
    assert idle(res, pipe=1) == {"divide": 33, "pairing": 1}


def test_either_pipe_instruction_issues_during_a_divide():
    res, _ = run("""
        fdivd $1, $2, $3        # c0 P0 (busy until c34); F addl independent -> P1
        addl $4, 1, $4
        addl $4, 1, $4          # c1 L; F halt pairs -> L P0 (only P0-only ops wait)
        halt
    """)
    assert res.kernel_cycles == 2


# Producer at c0, dependent consumer (addl, either pipe) issues at c0 + latency together with
# halt, so the run takes latency + 1 cycles. Latencies as in MACHINE.md §4.
@pytest.mark.parametrize("producer, latency", [
    ("addl $1, 1, $2", 1),             # int
    ("mull $1, $1, $2", 5),            # imul
    ("vaddl $1, $1, $2", 1),           # vint
    ("faddd $1, $1, $2", 7),           # fp
    ("vmad $1, $1, $1, $2", 7),        # fp (vector FMA)
    ("fdivs $1, $1, $2", 19),          # fdivs
    ("fsqrtd $1, $2", 34),             # fdivd
    ("fcvtds $1, $2", 7),              # fcvt
    ("fcmplt $1, $1, $2", 7),          # fcvt
    ("fcpys $1, $1, $2", 1),           # fmove
    ("vcpyf $1, $2", 1),               # shuffle
    ("ldl $2, 0($31)", 3),             # ldm_scalar
    ("vldd $2, 0($31)", 4),            # ldm_vector
    ("rcid $2", 1),                    # misc
])
def test_latency_classes(producer, latency):
    res, _ = run(f"""
        {producer}
        addl $2, 0, $3
        halt
    """)
    assert res.kernel_cycles == latency + 1


def test_link_register_latency():
    res, m = run("""
        bsr $2, next            # c0; $2 ready at c1
    next:
        addl $2, 0, $3          # c1 with halt
        halt
    """)
    assert res.kernel_cycles == 2
    assert reg(m, 3) == reg(m, 2) == 0x1000_0004


def test_rtc_reads_the_issue_cycle():
    res, m = run("""
        ldi $1, 1($31)          # c0 P1 (F reads $1: P0 "pairing")
        addl $1, 0, $1          # c1 L P0, F rtc (P1 only) pairs on P1
        rtc $2
        halt                    # c2
    """)
    assert reg(m, 2) == 1
    assert res.kernel_cycles == 3


def test_gld_latency_and_gst_occupancy_of_the_cpe():
    res, m = run("""
        ldl $2, 0($16)          # c0 global load: starts c0, $2 ready c177
        stl $2, 8($16)          # c1..c176 raw; c177 global store, next global access at c278
        ldl $4, 16($16)         # c178..c277 "global"; c278 load, $4 ready c455
        addl $4, 0, $5          # c455 with halt
        halt
    """, **memory_argument())
    assert res.kernel_cycles == 456
    # P0 "pairing" at c0, c177 (stl and ldl are both P1 only) and c278
    assert idle(res, pipe=0) == {"raw": 176 + 176, "global": 100, "pairing": 3}
    assert res.counters["gld_count"] == 2 and res.counters["gst_count"] == 1


def test_memory_interface_serves_one_global_access_per_occupancy():
    # Both CPEs load at c0: CPE 0 starts at c0, CPE 1 at c15 (gld_occupancy) -> ready c192.
    res, _ = run("""
        ldl $2, 0($16)
        addl $2, 0, $3
        halt
    """, cpes=[0, 1], **memory_argument())
    assert res.cpe[0].active_cycles == 178
    assert res.cpe[1].active_cycles == 193
    assert res.kernel_cycles == 193
    assert res.cpe[0].p0_idle["finished"] == 15


def test_finished_cpes_are_charged_until_the_run_ends():
    res, _ = run("""
        rcid $1                 # c0
        beq $1, done            # c1: CPE 0 branches to halt at c2
        mull $1, $1, $1         # CPE 1: c2 mull, c7 addl with halt
        addl $1, 0, $1
    done:
        halt
    """, cpes=[0, 1])
    assert res.kernel_cycles == 8
    assert res.cpe[0].active_cycles == 3
    assert res.cpe[0].p0_idle["finished"] == res.cpe[0].p1_idle["finished"] == 5
    for s in res.cpe.values():
        assert s.p0_valid + s.p0_idle_cycles == res.kernel_cycles
        assert s.p1_valid + s.p1_idle_cycles == res.kernel_cycles


def test_gemm_style_loop_runs_at_full_p0_efficiency():
    # 8 vmad (P0) beside 6 vldd + subl + bne (P1); each accumulator is reused every 8 cycles
    # (>= the fp latency 7), so nothing stalls. Iteration 1: c0 (ldi, vmad1), then (vldd,
    # vmad) pairs shifted by one, bne alone at c8. Iterations 2..50: 8 (vmad, P1) pairs each
    # (c9..c400). halt at c401.
    res, _ = run("""
        ldi $9, 50($31)
    loop:
        vmad $1, $2, $10, $10
        vldd $3, 0($31)
        vmad $1, $2, $11, $11
        vldd $4, 32($31)
        vmad $1, $2, $12, $12
        vldd $5, 64($31)
        vmad $1, $2, $13, $13
        vldd $6, 96($31)
        vmad $1, $2, $14, $14
        vldd $7, 128($31)
        vmad $1, $2, $15, $15
        vldd $8, 160($31)
        vmad $1, $2, $20, $20
        subl $9, 1, $9
        vmad $1, $2, $21, $21
        bne $9, loop
        halt
    """)
    assert res.kernel_cycles == 402
    assert res.cpe[0].p0_valid == 400
    assert res.cpe[0].ee == 400 / 402
