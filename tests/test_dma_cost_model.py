"""The DMA engine's cost terms (docs/timing.md "DMA": per get request, per strided block,
alignment-independent strided puts, broadcast lines), hand-counted for one request alone, on
both engines (vm_helpers.run checks that they agree bit for bit), on the default preset; the
pre-issue-28 calibration (``sw26010-stream``) switches them off."""
import math

import numpy as np
import pytest

from swsim.vm import Machine
from vm_helpers import dma_descriptor_asm, run

REPLY, BUFFER = 0x100, 0x400
PRESET = "sw26010"


def engine_time(op, size, offset=0, preset=PRESET, **fields):
    """Cycles from a lone request's issue to its reply, less the start-up latency, and the
    configuration: CPE 0 issues it from memory `offset` bytes past a line and waits."""
    m = Machine(preset)
    address = m.mem.put(np.zeros(1 << 16, np.uint8)) + offset
    body = f"""
        {dma_descriptor_asm("$4", "$5", op, size, REPLY, **fields)}
        ldi $5, {BUFFER}($31)
        dma $4, $16, $5
    wait:
        ldw $6, {REPLY}($31)
        beq $6, wait
        halt
    """
    result, m = run(body, args=[address], machine=m, trace=True)
    (start, end), = [(s, e) for cpe, kind, s, e in result.spans if kind == "dma"]
    return end - start - m.config.dma_latency, m.config


def test_a_contiguous_get_costs_its_request_and_its_lines():
    cycles, config = engine_time("get", 1024, offset=80)      # 9 lines touched
    assert cycles == config.dma_get_request_cycles + 9 * config.dma_transaction_cycles


def test_a_strided_get_block_holds_the_engine_at_least_the_minimum():
    # three 8-byte blocks, each in a line of its own: each the minimum, the first also the
    # request's cost
    cycles, config = engine_time("get", 24, block=8, stride=120)
    assert cycles == config.dma_get_request_cycles + 3 * config.dma_block_get_min_cycles
    # 1024-byte blocks: 8 reads each (aligned), plus the per-block cost
    cycles, config = engine_time("get", 2048, block=1024, stride=1024)
    assert cycles == config.dma_get_request_cycles + 2 * (
        config.dma_block_get_cycles + 8 * config.dma_transaction_cycles)


@pytest.mark.parametrize("offset", [0, 80])
def test_a_strided_put_costs_the_same_at_any_line_alignment(offset):
    cycles, config = engine_time("put", 256, offset=offset, block=128, stride=384)
    per_block = config.dma_block_put_cycles + config.dma_put_write_cycles
    # 48 + 80 bytes of two lines cost their shares of a line, rounded up each: at most +1
    assert 0 <= cycles - (2 * per_block + config.dma_put_ack_cycles) <= 2 * (offset > 0)


def test_a_contiguous_put_writes_partial_lines_in_capped_pieces():
    cycles, config = engine_time("put", 1024, offset=80)      # 48 B | 7 lines | 80 B
    pieces = [math.ceil(48 / config.dma_put_write_bytes), math.ceil(80 / config.dma_put_write_bytes)]
    writes = 7 + sum(min(p, config.dma_put_partial_writes) for p in pieces)
    assert cycles == writes * config.dma_put_write_cycles + config.dma_put_ack_cycles


def test_a_broadcast_streams_its_lines_slower_and_blocks_without_stride_cost_nothing():
    plain, config = engine_time("get", 4096, mode="bcast", mask=1)
    assert plain == config.dma_get_request_cycles + 32 * config.dma_bcast_transaction_cycles
    with_blocks, _ = engine_time("get", 4096, mode="bcast", mask=1, block=64)
    assert with_blocks == plain


def test_the_stream_preset_keeps_the_earlier_model():
    # no request or block costs, strided puts by piece (alignment-dependent), broadcast lines
    # at the PE rate, blocks without a stride cut one by one
    def earlier(*args, **fields):
        return engine_time(*args, preset="sw26010-stream", **fields)[0]
    assert earlier("get", 1024, offset=80) == 9 * 6
    assert earlier("get", 24, block=8, stride=120) == 3 * 6
    assert earlier("put", 256, offset=0, block=128, stride=384) == 2 * 11 + 35
    assert earlier("put", 256, offset=80, block=128, stride=384) == 2 * (3 + 5) * 11 + 35
    assert earlier("get", 4096, mode="bcast", mask=1) == 32 * 6
    assert earlier("get", 4096, mode="bcast", mask=1, block=64) == 64 * 6
