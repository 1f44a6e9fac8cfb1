"""The C core's CPEs in step (docs/vm.md "Engines"): while every running CPE has the same issue
state (pc, ready times, waits), a cycle's decision is made once for all of them. Each case is
built to take that path (the core's count of cycles in step says so) and to leave it in one of
the ways the core must get exactly right: a branch on data, a get that finds data on some CPEs
only, an access to main memory or a fault on one CPE, halts at different cycles, a barrier,
DMA, the cycle limit and pauses. Both engines must agree bit for bit, and the core must agree
with itself stepping every cycle (which never runs CPEs in step)."""
import numpy as np
import pytest

from swsim.vm import VMConfig

from vm_helpers import agree_three_ways, dma_descriptor_asm, iterations, job_of

def rc_loop(mates=7):
    """Vector FMAs on P0 beside a row broadcast and the gets of its `mates` row mates on P1,
    software-pipelined as the `vmad_comm` loop of `swsim bench speed`: $16 iterations."""
    body = "".join(f"\tvmad $0, $4, ${8 + k}, ${8 + k}\n\tgetr $2\n" for k in range(mates))
    return ("\tputr $1, 8\n1:\tvmad $0, $4, $15, $15\n\tputr $1, 8\n" + body
            + "\tsubl $16, 1, $16\n\tbgt $16, 1b\n" + "\tgetr $2\n" * mates)


RC_LOOP = rc_loop()


def float_regs(per_cpe_iterations, num_cpes=64):
    """a0 = iterations; $0, $1, $4 and $8-$15 vectors of doubles that differ per CPE, on a mesh
    of num_cpes."""
    cpes = len(per_cpe_iterations)
    regs = np.zeros((num_cpes, 32, 4), np.uint64)
    regs[:cpes, 16, 0] = per_cpe_iterations
    values = np.random.default_rng(cpes).uniform(-2, 2, size=(cpes, 32, 4))
    for r in (0, 1, 4, *range(8, 16)):
        regs[:cpes, r] = values[:, r].view(np.uint64)
    return regs


def test_a_row_broadcast_loop_runs_in_step():
    result, paths = agree_three_ways(job_of(RC_LOOP + "\thalt\n", 64, float_regs([30] * 64)))
    assert result.stop is None
    assert paths.in_step > 0.9 * result.kernel_cycles


def test_loops_of_different_lengths_leave_step_at_the_first_exit():
    """Each CPE's iterations differ: the branch of the shortest loop ends the step, and the
    halted CPEs leave the others out of step."""
    result, paths = agree_three_ways(job_of(RC_LOOP + "\thalt\n", 16,
                                            float_regs([20 + k % 3 for k in range(16)])))
    assert paths.in_step > 0
    assert result.stop is not None and result.stop.name == "deadlock"   # gets of a halted mate


def test_a_branch_on_data_splits_the_cpes_and_a_loop_head_joins_them():
    """Odd CPEs take a few more cycles in each iteration; the CPEs then run apart, and in step
    again once each has done the same number of extra cycles (rtc: loops that do not run in
    batches)."""
    text = """
\trcid $3
\tand $3, 1, $3
\tldi $5, 0($31)
1:\trtc $20
\tbeq $3, 2f
\taddl $5, 1, $5
\tmull $5, $5, $6
2:\taddl $5, 3, $5
\tsubl $16, 1, $16
\tbgt $16, 1b
\tldi $16, 12($31)
3:\trtc $20
\taddl $5, 1, $5
\tsubl $16, 1, $16
\tbgt $16, 3b
\thalt
"""
    result, paths = agree_three_ways(job_of(text, 8, iterations([9] * 8)))
    assert result.stop is None and paths.in_step > 0


def test_gets_and_puts_that_differ_between_cpes_in_step():
    """Every CPE of a row puts to position 1 but position 1 puts to 0, from the same code (the
    target in a register): position 1's queue fills and its senders wait for room, position
    0 gets data and the others wait forever."""
    text = """
\trcid $3
\tand $3, 7, $4
\tcmpeq $4, 1, $7
\txor $7, 1, $7
\tldi $5, 6($31)
1:\trtc $20
\tsubl $5, 1, $5
\tbgt $5, 1b
\tputr $1, $7
\tgetr $2
\tgetr $2
\thalt
"""
    result, paths = agree_three_ways(job_of(text, 16, iterations([1] * 16)))
    assert result.stop.name == "deadlock" and paths.in_step > 0


@pytest.mark.parametrize("odd_cpe", [0, 5, 15])
def test_an_access_to_main_memory_on_one_cpe_in_step(odd_cpe):
    """One CPE's loop reads main memory (through the shared interface, in run order), the
    others their LDM, from the same code."""
    text = f"""
\trcid $3
\tcmpeq $3, {odd_cpe}, $6
\tldih $9, 0x4000($31)
\tmull $6, $9, $9
\tldi $7, 0x100($9)
1:\tldl $2, 0($7)
\trtc $20
\taddl $2, 1, $2
\tsubl $16, 1, $16
\tbgt $16, 1b
\thalt
"""
    result, paths = agree_three_ways(job_of(text, 16, iterations([6] * 16)))
    assert result.stop is None and paths.in_step > 0


@pytest.mark.parametrize("fault", ["ldl $2, 3($8)", "putr $1, $7"])
@pytest.mark.parametrize("faulting_cpe", [0, 6, 13])
def test_a_fault_on_one_cpe_in_step(fault, faulting_cpe):
    """A misaligned load or a put to itself on one CPE only, from the same code in step; the
    CPEs before it in the cycle's order have issued, the others not."""
    text = f"""
\trcid $3
\tand $3, 7, $4
\tcmpeq $3, {faulting_cpe}, $6
\taddl $4, 1, $7
\tsubl $7, $6, $7
\tand $7, 7, $7
\tmull $6, 5, $9
\tldi $8, 5($31)
\tsubl $8, $9, $8
\tldi $5, 10($31)
2:\trtc $20
\tsubl $5, 1, $5
\tbgt $5, 2b
\t{fault}
\thalt
"""
    result, paths = agree_three_ways(job_of(text, 16, iterations([1] * 16)))
    assert result.stop is not None and result.stop.cpe == faulting_cpe
    assert paths.in_step > 0.8 * result.kernel_cycles


def test_a_barrier_and_dma_replies_in_step():
    """Every CPE gets a block by DMA, spins on its reply word, then meets the others at a row
    barrier: the DMA engine serves them at different cycles."""
    get = dma_descriptor_asm("$9", "$10", "get", 256, 0x800).replace("\n", "\n\t")
    text = f"""
\tldi $16, 4($31)
1:\trtc $20
\tsubl $16, 1, $16
\tbgt $16, 1b
\t{get}
\tldih $12, 0x4000($31)
\tdma $9, $12, $31
2:\tldw $13, 0x800($31)
\tbeq $13, 2b
\tsynr 0xff
\thalt
"""
    job = job_of(text, 16, mem=4096)
    result, paths = agree_three_ways(job)
    assert result.stop is None and paths.in_step > 0


def test_cpes_apart_are_in_step_again_after_a_barrier():
    """Each CPE spins a delay of its own length (its registers' ready times then differ, all in
    the past) before a row and a column barrier; released in the same cycle, they run the
    broadcast loop in step: times up to the current cycle are alike to every later decision."""
    text = """
\trcid $3
\tand $3, 7, $5
\taddl $5, 1, $5
1:\tmull $5, 1, $6
\tsubl $5, 1, $5
\tbgt $5, 1b
\tsynr 0xff
\tsync 0xff
""" + rc_loop() + "\thalt\n"
    result, paths = agree_three_ways(job_of(text, 64, float_regs([40] * 64)))
    assert result.stop is None
    assert paths.in_step > 0.7 * result.kernel_cycles


@pytest.mark.parametrize("max_cycles", [5, 41, 170])
def test_the_cycle_limit_in_step(max_cycles):
    result, paths = agree_three_ways(job_of(RC_LOOP + "\thalt\n", 64, float_regs([30] * 64),
                                            max_cycles=max_cycles))
    assert result.stop.name == "cycle_limit" and paths.in_step > 0


@pytest.mark.parametrize("every", [1, 7, 64])
def test_pauses_in_step(every, monkeypatch):
    from swsim.vm import cengine
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", every)
    seen = []
    result, paths = agree_three_ways(job_of(RC_LOOP + "\thalt\n", 64, float_regs([12] * 64)),
                                     progress=seen.append)
    assert result.stop is None and paths.in_step > 0 and len(seen) > 1


def test_a_mesh_of_another_shape_in_step():
    config = VMConfig.preset(mesh_rows=4, mesh_cols=4, rc_queue_depth=2, rc_latency=3)
    result, paths = agree_three_ways(job_of(rc_loop(3) + "\thalt\n", 16,
                                            float_regs([15] * 16, 16), config=config))
    assert result.stop is None and paths.in_step > 0


# ---- a group in step: some running CPEs alike, the others issuing one by one ----

def delayed(cpes):
    """A prologue: CPE cpes[k] spins 6 (k + 2) rtc iterations of delay first, the others none, so
    that they alone stay alike (a group in step once the first CPE reaches a loop head)."""
    count = "".join(f"\tcmpeq $3, {cpe}, $7\n\tmull $7, {6 * (k + 2)}, $7\n\taddl $6, $7, $6\n"
                    for k, cpe in enumerate(cpes))
    return ("\trcid $3\n\tldi $6, 0($31)\n" + count
            + "\tbeq $6, 2f\n1:\trtc $20\n\tsubl $6, 1, $6\n\tbgt $6, 1b\n2:\n")


def loading_loop(address):
    """$16 iterations of a load from the address in register `address` (rtc keeps the loop out
    of batches), then halt."""
    return (f"3:\tldl $2, 0({address})\n\trtc $20\n\taddl $5, 1, $5\n\tsubl $16, 1, $16\n"
            "\tbgt $16, 3b\n\thalt\n")


@pytest.mark.parametrize("odd_member", [None, 9])
def test_a_group_in_step_beside_delayed_cpes(odd_member):
    """Two of 16 CPEs start late; the 14 others run the loop as a group. With `odd_member`,
    one of the 14 reads main memory in its loop (the group's check finds it apart: the cycle
    goes to each CPE)."""
    odd = "" if odd_member is None else \
        f"\tcmpeq $3, {odd_member}, $8\n\tldih $9, 0x4000($31)\n\tmull $8, $9, $9\n"
    text = delayed((1, 6)) + odd + "\tldi $10, 0x100($9)\n" + loading_loop("$10")
    result, paths = agree_three_ways(job_of(text, 16, iterations([25] * 16)))
    assert result.stop is None and paths.group > 0 and paths.in_step > 0


@pytest.mark.parametrize("faulting_cpe", [0, 6, 15])
def test_a_fault_beside_a_group_in_step(faulting_cpe):
    """A CPE outside the group (a late one) faults on a misaligned load while the group runs:
    the group's CPEs before it in the cycle's order issue in that cycle, the later ones not."""
    text = delayed((faulting_cpe, 3)) + f"""\tcmpeq $3, {faulting_cpe}, $7
\tmull $7, 3, $7
\tldi $8, 0x100($7)
""" + loading_loop("$8")
    result, paths = agree_three_ways(job_of(text, 16, iterations([40] * 16)))
    assert result.stop is not None and result.stop.cpe == faulting_cpe
    assert paths.group > 0
