"""The C core's replays (docs/vm.md "Engines"): a CPE in a loop with gets and puts issues the
loop's precomputed schedule cycle by cycle, making only the structural checks (a get finds
data, a put finds room, a load or store stays in LDM). Each case is built to take that path
(the core's count of replayed cycles says so) and to leave or bend it in one of the ways the
core must get exactly right: a get that finds no data or a put that finds no room (the rest of
the iteration comes later), a load that leaves LDM, a put that faults, another CPE's fault, the
cycle limit and pauses. Both engines must agree bit for bit, and the core must agree with
itself stepping every cycle (no replays)."""
from dataclasses import replace

import pytest

from swsim.vm import cengine
from swsim.vm.engine_api import CG_COUNTERS

from test_engine_batches import agree, copy, iterations, job_of

# A row of CPEs in step, as the GEMM loop `vmad_comm`: vmads on P0 while P1 broadcasts along
# the row and takes the row mates' broadcasts of the iteration before (software-pipelined).
PIPELINED = """
\tputr $1, 8
1:\tvmad $0, $4, $8, $8
\tputr $1, 8
\tvmad $0, $4, $9, $9
\tgetr $2
\tvmad $0, $4, $10, $10
\tgetr $2
\tvmad $0, $4, $11, $11
\tgetr $2
\tvmad $0, $4, $12, $12
\tgetr $2
\tvmad $0, $4, $13, $13
\tgetr $2
\tvmad $0, $4, $14, $14
\tgetr $2
\tvmad $0, $4, $15, $15
\tsubl $16, 1, $16
\tvmad $0, $4, $17, $17
\tgetr $2
\tvmad $0, $4, $18, $18
\tbgt $16, 1b
""" + "\tgetr $2\n" * 7

# Register communication only, as `rc_exchange`: its gets regularly find no data yet.
EXCHANGE = """
\trcid $1
\tputr $1, 8
1:\tputr $1, 8
""" + "\tgetr $2\n\taddl $3, $2, $3\n" * 7 + """
\tsubl $16, 1, $16
\tbgt $16, 1b
""" + "\tgetr $2\n" * 7

# A slow start on some CPEs (a dependent chain of rcid + 1 multiplies), so that the row's
# first gets find no data at different places of the loop.
STAGGER = """
\trcid $5
\tldi $6, 3($31)
9:\tmull $6, $6, $6
\tsubl $5, 1, $5
\tbge $5, 9b
"""


def replayed(job):
    return cengine.replay_cycles(copy(job))


def test_a_pipelined_row_replays_its_loop():
    job = job_of(PIPELINED + "\thalt\n", 8, iterations([30] * 8))
    job.regs[:8, 0] = 0x3FF0000000000000   # vmad operands 1.0
    job.regs[:8, 4] = 0x3FE0000000000000
    job.regs[:8, 1, 0] = range(8)
    result, _ = agree(job)
    assert result.stop is None
    assert replayed(job) > 8 * result.kernel_cycles // 2


@pytest.mark.parametrize("stagger", [False, True])
def test_gets_that_find_no_data_delay_the_rest_of_the_iteration(stagger):
    job = job_of((STAGGER if stagger else "") + EXCHANGE + "\thalt\n", 16,
                 iterations([25] * 16))
    result, _ = agree(job)
    assert result.stop is None and replayed(job) > 0


def test_puts_that_find_no_room_delay_the_rest_of_the_iteration():
    """CPE 0 puts to CPE 1 every few cycles; CPE 1 takes them slowly (a multiply chain per
    get), so CPE 0's send buffer fills and its puts stall."""
    text = """
\trcid $11
\tbne $11, 5f
1:\tputr $16, 1
\taddl $3, $16, $3
\tsubl $16, 1, $16
\tbgt $16, 1b
\thalt
5:\tgetr $2
\tmull $2, $2, $3
\tmull $3, $3, $3
\tmull $3, $3, $3
\tsubl $16, 1, $16
\tbgt $16, 5b
\thalt
"""
    job = job_of(text, 2, iterations([40, 40]))
    result, _ = agree(job)
    assert result.stop is None and replayed(job) > 0


def test_a_get_that_finds_no_data_before_a_wait_on_an_earlier_result():
    """CPE 0's get comes between a multiply and the add that waits for its result: a get that
    finds no data shortens that wait, so the rest of the iteration cannot simply come later
    (issue() takes it). CPE 1 puts to CPE 0 at a slower pace."""
    text = """
\trcid $11
\tbne $11, 5f
\tldi $4, 3($31)
1:\tmull $4, $4, $4
\taddl $7, 1, $7
\tgetr $2
\taddl $4, $2, $5
\tsubl $16, 1, $16
\tbgt $16, 1b
\thalt
5:\tputr $16, 0
\tmull $3, $3, $3
\tmull $3, $3, $3
\tsubl $16, 1, $16
\tbgt $16, 5b
\thalt
"""
    job = job_of(text, 2, iterations([40, 40]))
    result, _ = agree(job)
    assert result.stop is None and replayed(job) > 0


def test_a_load_that_leaves_ldm_every_fourth_iteration():
    """The load's address is in main memory when $16 is a multiple of 4, else in LDM: the
    replay ends before each global load, which issue() takes."""
    text = """
\tldi $22, 0x100($31)
\tldih $23, 0x4000($31)
\txor $23, $22, $23
\trcid $1
\tputr $1, 8
3:\tputr $1, 8
\tand $16, 3, $6
\tcmpeq $6, 0, $6
\tmull $6, $23, $6
\txor $6, $22, $6
\tldl $4, 0($6)
""" + "\tgetr $2\n\taddl $3, $2, $3\n" * 7 + """
\tsubl $16, 1, $16
\tbgt $16, 3b
""" + "\tgetr $2\n" * 7 + "\thalt\n"
    job = job_of(text, 8, iterations([30] * 8))
    result, _ = agree(job)
    assert result.stop is None and result.cg_counters[CG_COUNTERS.index("gld_count")] == 8 * 7
    assert replayed(job) > 0


def put_faulting_text(fault_at):
    """PIPELINED, whose put takes its position from $5: 9 (outside the row) on CPE 2 once $16
    reaches fault_at, else 8 (the whole row)."""
    loop = PIPELINED.replace("1:\tvmad $0, $4, $8, $8\n\tputr $1, 8",
                             "1:\tvmad $0, $4, $8, $8\n\tputr $1, $5")
    loop = loop.replace("\tsubl $16, 1, $16\n", "\tsubl $16, 1, $16\n"
                        f"\tcmpeq $16, {fault_at}, $6\n\tand $6, $7, $6\n\taddl $6, 8, $5\n")
    return "\trcid $1\n\tcmpeq $1, 2, $7\n\tldi $5, 8($31)\n" + loop + "\thalt\n"


def test_the_put_of_a_replay_can_take_its_position_from_a_register():
    job = job_of(put_faulting_text(200), 8, iterations([20] * 8))
    result, _ = agree(job)
    assert result.stop is None and replayed(job) > 8 * result.kernel_cycles // 2


@pytest.mark.parametrize("fault_at", [1, 4, 9])
def test_a_put_that_faults_inside_a_replay(fault_at):
    job = job_of(put_faulting_text(fault_at), 8, iterations([15] * 8))
    result, _ = agree(job)
    assert result.stop.name == "put_outside" and result.stop.cpe == 2
    assert replayed(job) > 0


@pytest.mark.parametrize("faulting_cpe", [3, 8, 13])
def test_a_fault_of_another_cpe_while_rows_replay(faulting_cpe):
    """Rows 0 and 1 exchange; CPE faulting_cpe waits in a loop of its own first and then makes
    a misaligned load (its row mates wait for its puts meanwhile)."""
    text = (f"\trcid $11\n\tcmpeq $11, {faulting_cpe}, $12\n\tbeq $12, 6f\n"
            "\tldi $14, 60($31)\n8:\tsubl $14, 1, $14\n\tbgt $14, 8b\n"
            "\tldl $13, 3($31)\n6:" + EXCHANGE + "\thalt\n")
    job = job_of(text, 16, iterations([30] * 16))
    result, _ = agree(job)
    assert result.stop.name == "misaligned" and result.stop.cpe == faulting_cpe
    assert replayed(job) > 0


@pytest.mark.parametrize("max_cycles", [83, 140, 301])
def test_the_cycle_limit_inside_a_replay(max_cycles):
    job = job_of(STAGGER + EXCHANGE + "\thalt\n", 8, iterations([60] * 8),
                 max_cycles=max_cycles)
    result, _ = agree(job)
    assert result.stop.name == "cycle_limit" and result.kernel_cycles == max_cycles
    assert replayed(job) > 0


@pytest.mark.parametrize("every", [1, 3, 17])
def test_pauses_inside_replays(monkeypatch, every):
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", every)
    seen = []
    job = job_of(STAGGER + EXCHANGE + "\thalt\n", 8, iterations([20] * 8))
    result, _ = agree(job, progress=seen.append)
    assert result.stop is None and len(seen) > 1 and replayed(job) > 0


def test_no_replays_while_tracing():
    job = job_of(EXCHANGE + "\thalt\n", 8, iterations([20] * 8))
    assert replayed(job) > 0
    assert cengine.replay_cycles(replace(copy(job), trace=True)) == 0
