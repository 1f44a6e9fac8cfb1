"""The CPE instruction caches (config `icache`, vm/icache.py, vm/core/icache.c; docs/timing.md
"Instruction cache"): both engines agree bit for bit with the model on, the C core's fast paths
(batches, CPEs in step, idle skips) included, which check lines once per block or cycle where
the Python engine fetches at every issue; a loop that fits pays its lines once, one larger than
the L1 pays again each iteration; the core group's L2 fetches a line from memory once."""
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from swsim.vm import VMConfig, cengine
from swsim.vm.config import ConfigError
from swsim.vm.differential import differences, run_both
from swsim.vm.engine_api import CPE_COUNTER_INDEX
from swsim.vm.fuzzgen import programs

from vm_helpers import agree_three_ways, iterations, job_of

ON = VMConfig.preset(icache=1)
LINE = ON.icache_line_bytes


def loop(body_words, extra=""):
    """$16 iterations of a loop of `body_words` integer words (two independent chains)."""
    body = "".join(f"\taddl ${1 + k % 2}, 1, ${1 + k % 2}\n" for k in range(body_words))
    return f"1:\n{body}\tsubl $16, 1, $16\n\tbgt $16, 1b\n{extra}\thalt\n"


def counters(result, name):
    return result.cpe_counters[:, CPE_COUNTER_INDEX[name]]


def run(text, n, config, cpes=1):
    """The agreed result of both engines (and of the core stepping every cycle) and the core's
    fast-path cycles."""
    return agree_three_ways(job_of(text, cpes, iterations([n] * cpes), config=config))


def code_lines(text):
    job = job_of(text, 1)
    first = job.config.code_base // LINE
    return (job.config.code_base + 4 * len(job.code) - 1) // LINE - first + 1


def test_a_loop_that_fits_pays_its_lines_once():
    text = loop(200)
    on = {n: run(text, n, ON) for n in (2, 6)}
    off = {n: run(text, n, VMConfig.preset())[0] for n in (2, 6)}
    misses = {n: int(counters(r, "icache_l1_misses")[0]) for n, (r, _) in on.items()}
    assert misses[2] == misses[6] == code_lines(text)
    # the four more iterations cost what they cost without the model
    assert (on[6][0].kernel_cycles - on[2][0].kernel_cycles
            == off[6].kernel_cycles - off[2].kernel_cycles)
    assert on[2][0].kernel_cycles > off[2].kernel_cycles
    assert on[6][1].batch > 0      # warm, the core's batches run the loop again
    assert int(counters(on[6][0], "p0_idle_icache")[0]) > 0


def test_a_loop_larger_than_the_l1_pays_every_iteration():
    words = ON.icache_l1_bytes // 4 + 512           # 18 KiB of code, in the 64 KiB L2
    text = loop(words)
    (one, _), (two, _) = run(text, 1, ON), run(text, 2, ON)
    off = [cengine.run(job_of(text, 1, iterations([n]))) for n in (1, 2)]
    again = int(counters(two, "icache_l1_misses")[0] - counters(one, "icache_l1_misses")[0])
    assert 0 < again <= code_lines(text)
    # the second iteration's lines come from the L2, none from memory
    assert counters(two, "icache_l2_misses")[0] == counters(one, "icache_l2_misses")[0]
    extra = (two.kernel_cycles - one.kernel_cycles) - (off[1].kernel_cycles - off[0].kernel_cycles)
    assert extra >= again * ON.icache_l2_cycles / 2   # a pair's lines come one after the other


def test_the_core_group_fetches_each_line_from_memory_once():
    text = loop(40)
    result, paths = run(text, 3, ON, cpes=8)
    lines = code_lines(text)
    assert list(counters(result, "icache_l1_misses")[:8]) == [lines] * 8
    assert int(counters(result, "icache_l2_misses").sum()) == lines
    # the CPEs that find a line on its way from memory wait for it: they stay together
    assert len(set(counters(result, "p0_idle_icache")[:8])) == 1 and paths.batch > 0


def test_a_wake_during_a_fill_does_not_end_it():
    """CPE 1 misses on a distant line while CPE 0's put arrives in its empty queue (which
    wakes a CPE waiting for data in the core): it keeps waiting for its line."""
    far = "".join("\tnop\n" for _ in range(4 * LINE // 4))
    text = f"""
\trcid $1
\tbne $1, 1f
\tldi $2, 7($31)
\tputr $2, 1
\thalt
{far}1:\tgetr $3
\thalt
"""
    result, _ = agree_three_ways(job_of(text, 2, config=ON))
    assert counters(result, "icache_l2_misses").sum() > 0 and result.stop is None


def test_trace_spans_of_fetch_stalls():
    jobs, results = run_both(replace(job_of(loop(20), 2, iterations([2, 2]), config=ON),
                                     trace=True))
    assert differences(jobs, results) == []
    assert any(kind == "stall:icache" for _, kind, _, _ in results[0].spans)


def test_off_by_default():
    result, _ = run(loop(20), 2, VMConfig.preset())
    assert VMConfig.preset().icache == 0
    assert not counters(result, "icache_l1_misses").any()
    assert not counters(result, "p0_idle_icache").any()


@pytest.mark.parametrize("level", ["l1", "l2"])
def test_a_cache_smaller_than_one_set_is_refused(level):
    with pytest.raises(ConfigError, match=f"icache_{level}_bytes"):
        VMConfig.preset(**{f"icache_{level}_bytes": 64, f"icache_{level}_ways": 2})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(programs(icache=True))
def test_engines_agree_on_random_programs_with_small_caches(case):
    assert differences(*run_both(case.job(max_cycles=200_000, trace=True))) == []
