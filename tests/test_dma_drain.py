"""DMA requests still in the engine when the last CPE halts complete (docs/timing.md "Halting"):
a put's data reaches memory, a get's reaches LDM, and the run ends the cycle after the engine's
last step. Every run goes through both engines (vm_helpers.run), which must agree bit for bit.
"""
import numpy as np
import pytest

from swsim.vm import Machine, RunStopped
from vm_helpers import dma_descriptor_asm, fill_ldm_asm, run

BUFFER, REPLY, WORDS = 0x400, 0x100, 64


@pytest.fixture(params=["sw26010", "sw26010-stream"])
def preset(request):
    """The default DMA model and the pre-issue-28 one (vm.config.PRESETS)."""
    return request.param


def fill_and_put_then_halt(op="put", block=0, stride=0):
    """Each CPE writes (cpe << 16) + 1.. to its LDM buffer and issues one PE-mode `op` of it to
    its slice of memory a0, then halts at once without waiting for the reply."""
    size = WORDS * 8
    return f"""
        {fill_ldm_asm(BUFFER, WORDS)}
        rcid $1
        ldi $6, {size + (size // block * stride if block else 0)}($31)
        mull $1, $6, $1
        addl $16, $1, $16
        {dma_descriptor_asm("$4", "$5", op, size, REPLY, block=block, stride=stride)}
        ldi $5, {BUFFER}($31)
        dma $4, $16, $5
        halt
    """


def expected_words(cpe):
    return np.arange(1, WORDS + 1, dtype=np.int64) + (cpe << 16)


@pytest.mark.parametrize("block, stride", [(0, 0), (64, 192)])
def test_a_put_in_flight_at_the_halt_reaches_memory(preset, block, stride):
    cpes = range(4)
    step = WORDS * 8 + (WORDS * 8 // block * stride if block else 0)
    m = Machine(preset)
    out = m.mem.put(np.full(step // 8 * len(cpes), -1, np.int64))
    result, m = run(fill_and_put_then_halt(block=block, stride=stride), cpes=cpes, args=[out],
                    machine=m)
    memory = m.mem.get(out, (len(cpes), step // 8), np.int64)
    for cpe in cpes:
        if block:
            landed = memory[cpe].reshape(-1, (block + stride) // 8)[:, :block // 8].ravel()
        else:
            landed = memory[cpe]
        np.testing.assert_array_equal(landed, expected_words(cpe))
        assert int(m.last_job.ldm[cpe, REPLY:REPLY + 4].view(np.uint32)[0]) == 1
    # the run lasts until the last put landed: at least the start-up latency after the dma
    halts = [result.cpe[cpe].active_cycles for cpe in cpes]
    assert result.kernel_cycles > max(halts) + m.config.dma_latency - 10
    assert all(result.cpe[cpe].p0_idle["finished"] == result.kernel_cycles - halts[cpe]
               for cpe in cpes)


def test_a_get_in_flight_at_the_halt_lands_in_ldm(preset):
    m = Machine(preset)
    data = np.arange(4 * WORDS, dtype=np.int64) * 3
    src = m.mem.put(data)
    _, m = run(fill_and_put_then_halt(op="get"), cpes=range(4), args=[src], machine=m)
    for cpe in range(4):
        got = m.last_job.ldm[cpe, BUFFER:BUFFER + WORDS * 8].view(np.int64)
        np.testing.assert_array_equal(got, data[cpe * WORDS:(cpe + 1) * WORDS])


def test_the_cycle_limit_stops_the_drain(preset):
    m = Machine(preset)
    out = m.mem.put(np.zeros(4 * WORDS, np.int64))
    unlimited, _ = run(fill_and_put_then_halt(), cpes=range(4), args=[out], machine=m)
    halted = max(unlimited.cpe[cpe].active_cycles for cpe in range(4))
    with pytest.raises(RunStopped) as stopped:
        run(fill_and_put_then_halt(), cpes=range(4), args=[out], machine=m,
            max_cycles=halted + 5)
    assert stopped.value.result.kernel_cycles == halted + 5
    assert "limit" in str(stopped.value)
