"""The hardware DMA descriptor (MACHINE.md section 6) and its modes and ops, on both engines:
exact data placement, the reply word, the cost, BARRIER ordering and the faults of bad
combinations (docs/timing.md "DMA descriptor and modes")."""
import re

import numpy as np
import pytest

import swsim
from swsim.kernels import source_path
from swsim.vm import Machine, VMFault
from swsim.vm.engine_api import DMA_FIELDS, DMA_MODES, DMA_OPS
from vm_helpers import dma_descriptor, fill_ldm_asm

ENGINES = ["python", "c"]
BUFFER, REPLY, BARRIER_REPLY = 0x100, 0x40, 0x44
ISSUER = 10                        # row 1, column 2 of the 8 x 8 mesh


# ---- the shared include agrees with the engines' field table -------------------------------
def include_constants():
    text = source_path("include/dma.inc").read_text()
    return {name: int(value) for name, value in
            re.findall(r"^\s*(D(?:ESC|MA)_\w+)\s*=\s*(\d+)", text, re.M)}


def test_dma_inc_names_the_engines_bits():
    c = include_constants()
    lane_bit = {name: (c[f"DESC_{lane}"], shift) for name, lane, shift in (
        ("size", "SIZE", 0), ("block", "CTRL", 0), ("op", "CTRL", c["DESC_OP_SHIFT"]),
        ("mode", "CTRL", c["DESC_MODE_SHIFT"]), ("reply", "REPLY", 0),
        ("mask", "REPLY", c["DESC_MASK_SHIFT"]), ("stride", "STRIDE", 0))}
    assert {name: 32 * lane + shift for name, (lane, shift) in lane_bit.items()} == \
        {name: low for name, (low, _) in DMA_FIELDS.items()}
    assert {name: c[f"DMA_{name.upper()}"] for name in DMA_OPS} == DMA_OPS
    assert {name: c[f"DMA_{name.upper()}"] for name in DMA_MODES} == DMA_MODES


@pytest.mark.parametrize("engine", ENGINES)
def test_make_desc_builds_the_hardware_layout(engine):
    # each macro's descriptor stored to LDM, compared with the layout built from DMA_FIELDS
    program = swsim.assemble(f"""
        .include "{source_path('include/dma.inc')}"
        .text
        .globl kernel
    kernel:
        MAKE_DESC $1, DMA_GET, 1000, 0x7ff0
        ldi $2, 96
        MAKE_DESC $3, DMA_GET_P, 0($2), 0x40, mode=DMA_BROW, block=$2, mask=0xa5
        ldi $4, 4000
        DESC_SET_STRIDE $3, $4
        ldi $5, 17
        DESC_SET_SIZE $5, $5
        ldi $6, DMA_PUT
        MAKE_DESC_REGS $7, $6, $2, $4, $2, $4
        vstd $1, 0x200($31)
        vstd $3, 0x220($31)
        vstd $7, 0x240($31)
        halt
    """)
    m = Machine()
    m.run(program, cpes=[0], engine=engine)
    got = m.last_job.ldm[0, 0x200:0x260].view(np.uint32).reshape(3, 8).tolist()
    assert got == [dma_descriptor("get", 1000, 0x7ff0),
                   dma_descriptor("get_p", 96, 0x40, mode="brow", block=96, stride=4000,
                                  mask=0xa5),
                   dma_descriptor("put", 96, 4000, block=4000, stride=96)]


# ---- data placement -------------------------------------------------------------------------
def issue_program(words, second=None, fill_words=0):
    """CPE ISSUER issues the descriptor (LDM 0) from memory a0 to LDM BUFFER, then `second`
    (LDM 32) if given, and waits for the first reply; every CPE halts. With fill_words, every
    CPE first writes filled(cpe, fill_words) to its buffer, and all synchronise."""
    second_words = second or [0] * 8
    fill = f"""
        {fill_ldm_asm(BUFFER, fill_words)}
        synr 0xff
        sync 0xff
    """ if fill_words else ""
    return f"""
    .section .ldm
    desc: .word {", ".join(map(str, words + second_words))}
    .text
    .globl kernel
    kernel:
        {fill}
        rcid $1
        cmpeq $1, {ISSUER}, $1
        beq $1, done
        vldd $4, desc($31)
        ldi $5, {BUFFER}($31)
        dma $4, $16, $5
        {"vldd $6, desc + 32($31)" if second else ""}
        {"dma $6, $16, $5" if second else ""}
    wait:
        ldw $6, {REPLY}($31)
        beq $6, wait
    done:
        halt
    """


def run_request(engine, words, memory, second=None, fill_words=0):
    """(result, machine, memory address) of issue_program on all 64 CPEs."""
    m = Machine()
    address = m.mem.put(memory)
    program = swsim.assemble(issue_program(words, second, fill_words))
    result = m.run(program, args=[address], cpes=range(64), engine=engine, trace=True)
    return result, m, address


def filled(cpe, words):
    """The bytes issue_program's fill writes: 64-bit words (cpe << 16) + 1, + 2, ..."""
    return (np.arange(1, words + 1, dtype=np.uint64) + (cpe << 16)).view(np.uint8)


def buffers(m, size):
    return m.last_job.ldm[:, BUFFER:BUFFER + size]


DATA = np.arange(1, 2049, dtype=np.uint32).view(np.uint8)[:4096]   # 4 KiB, no zero word


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("op", ["get", "get_p"])
def test_bcast_writes_every_cpe_of_the_masked_rows_from_one_read(engine, op):
    result, m, _ = run_request(engine, dma_descriptor(op, 200, REPLY, mode="bcast",
                                                       mask=0b10000101), DATA)
    got = buffers(m, 208)
    for cpe in range(64):
        expected = DATA[:200] if cpe // 8 in (0, 2, 7) else np.zeros(200, np.uint8)
        np.testing.assert_array_equal(got[cpe, :200], expected)
        assert not got[cpe, 200:].any()
    assert result.counters["dma_transactions"] == 2     # the memory is read once
    assert result.counters["dma_bytes_requested"] == 200


@pytest.mark.parametrize("engine", ENGINES)
def test_brow_writes_the_masked_columns_of_the_issuers_row(engine):
    _, m, _ = run_request(engine, dma_descriptor("get", 64, REPLY, mode="brow",
                                                  mask=0b10010001), DATA)
    for cpe in range(64):
        chosen = cpe // 8 == ISSUER // 8 and cpe % 8 in (0, 4, 7)
        np.testing.assert_array_equal(buffers(m, 64)[cpe],
                                      DATA[:64] if chosen else np.zeros(64, np.uint8))


def dealt(size, block, stride, sharers):
    """Expected LDM buffers of ROW/RANK, written out: unit k of the memory stream (block bytes,
    or size / sharers if contiguous) goes to sharer k mod n at BUFFER + (k div n) * unit."""
    n = len(sharers)
    unit = block or size // n
    step = block + stride if block else unit
    out = {cpe: bytearray() for cpe in sharers}
    for k in range(-(-size // unit)):
        length = min(unit, size - k * unit)
        out[sharers[k % n]] += bytes(DATA[k * step:k * step + length])
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode, block, stride, size", [
    ("row", 0, 0, 256),          # eighths of 32 bytes
    ("row", 0, 0, 8),            # one byte each
    ("row", 24, 40, 24 * 11),    # 11 blocks: columns 0-2 get two, the rest one
    ("row", 100, 28, 250),       # blocks cross transactions; the last block is short
    ("rank", 0, 0, 1024),
    ("rank", 16, 0, 16 * 20),
])
def test_row_and_rank_deal_the_transfer_to_their_cpes(engine, mode, block, stride, size):
    result, m, _ = run_request(engine, dma_descriptor("get", size, REPLY, mode=mode,
                                                       block=block, stride=stride), DATA)
    row, col = divmod(ISSUER, 8)
    sharers = [row * 8 + j for j in range(8)] if mode == "row" else [i * 8 + col for i in range(8)]
    expected = dealt(size, block, stride, sharers)
    got = buffers(m, size)
    for cpe in range(64):
        want = np.frombuffer(bytes(expected.get(cpe, b"")), np.uint8)
        np.testing.assert_array_equal(got[cpe, :len(want)], want)
        assert not got[cpe, len(want):].any(), cpe
    # the reply word is the issuer's only
    assert [int(m.last_job.ldm[c, REPLY]) for c in sharers] == [c == ISSUER for c in sharers]
    assert result.counters["dma_bytes_requested"] == size


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("op, mode, block, stride, size", [
    ("put", "row", 0, 0, 256), ("put_p", "rank", 40, 24, 40 * 10), ("put", "pe", 0, 0, 96),
])
def test_puts_gather_what_gets_deal(engine, op, mode, block, stride, size):
    # each CPE's buffer holds its own bytes; the put writes memory exactly where the get of
    # the same descriptor would have read the bytes it puts
    _, m, address = run_request(engine, dma_descriptor(op, size, REPLY, mode=mode, block=block,
                                                       stride=stride),
                                np.zeros(4096, np.uint8), fill_words=size // 8)
    written = m.mem.get(address, (4096,), np.uint8)
    row, col = divmod(ISSUER, 8)
    sharers = {"row": [row * 8 + j for j in range(8)], "rank": [i * 8 + col for i in range(8)],
               "pe": [ISSUER]}[mode]
    n = len(sharers)
    unit = block or size // n
    step = block + stride if block else unit
    expected = np.zeros(4096, np.uint8)
    for k in range(-(-size // unit)):
        length = min(unit, size - k * unit)
        at = k // n * unit
        expected[k * step:k * step + length] = filled(sharers[k % n], size // 8)[at:at + length]
    np.testing.assert_array_equal(written, expected)


# ---- BARRIER --------------------------------------------------------------------------------
def dma_spans(result):
    return sorted((start, end) for cpe, kind, start, end in result.spans if kind == "dma")


@pytest.mark.parametrize("engine", ENGINES)
def test_barrier_replies_when_the_cpes_earlier_requests_are_done(engine):
    get = dma_descriptor("get", 1024, BARRIER_REPLY)          # 8 transactions
    barrier = dma_descriptor("barrier", 0, REPLY)
    result, m, _ = run_request(engine, get, DATA, second=barrier)
    (get_start, get_end), (barrier_start, barrier_end) = dma_spans(result)
    assert get_start < barrier_start < get_end == barrier_end
    assert get_end == get_start + 200 + 6 + 8 * 6    # latency, request, 8 transactions
    assert result.counters["dma_requests"] == 2 and result.counters["dma_transactions"] == 8
    assert int(m.last_job.ldm[ISSUER, REPLY]) == 1 == int(m.last_job.ldm[ISSUER, BARRIER_REPLY])


@pytest.mark.parametrize("engine", ENGINES)
def test_barrier_alone_replies_when_the_engine_takes_it(engine):
    # nothing earlier: it completes when it becomes active, the cycle after its issue
    result, m, _ = run_request(engine, dma_descriptor("barrier", 0, REPLY), DATA)
    [(start, end)] = dma_spans(result)
    assert end == start + 1
    assert result.counters["dma_bytes_requested"] == 0


# ---- faults ---------------------------------------------------------------------------------
BAD = [
    (dict(op="put", size=64, reply=REPLY), {"op": 4}, "bad op"),
    (dict(op="get", size=64, reply=REPLY), {"mode": 5}, "bad mode"),
    (dict(op="put", size=64, reply=REPLY, mode="bcast", mask=1), {}, "a put in BCAST/BROW"),
    (dict(op="put_p", size=64, reply=REPLY, mode="brow", mask=1), {}, "a put in BCAST/BROW"),
    (dict(op="get", size=0, reply=REPLY), {}, "size is 0"),
    (dict(op="get", size=64, reply=REPLY, mode="bcast"), {}, "names no CPE"),
    (dict(op="get", size=64, reply=REPLY, mode="brow"), {}, "names no CPE"),
    (dict(op="get", size=100, reply=REPLY, mode="row"), {}, "multiple of the sharing CPEs"),
    (dict(op="get", size=1 << 16, reply=REPLY), {}, "LDM range"),
    # 9 blocks of 32 KiB: the first sharer gets two, more than its LDM
    (dict(op="get", size=9 << 15, reply=REPLY, mode="rank", block=1 << 15), {}, "LDM range"),
    (dict(op="get", size=64, reply=REPLY + 2), {}, "reply word"),
    (dict(op="barrier", size=0, reply=0xFFFE), {}, "reply word"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fields, raw, problem", BAD)
def test_bad_requests_fault_with_the_reason(engine, fields, raw, problem):
    words = dma_descriptor(**fields)
    for name, value in raw.items():       # values the helper refuses to name
        low, _ = DMA_FIELDS[name]
        words[low // 32] |= value << (low % 32)
    with pytest.raises(VMFault, match=problem) as info:
        run_request(engine, words, DATA)
    assert info.value.cpe == ISSUER and "dma" in info.value.instruction


@pytest.mark.parametrize("engine", ENGINES)
def test_row_checks_each_cpes_share_against_ldm(engine):
    # 64 KiB dealt to 8 CPEs is 8 KiB each: no LDM fault (the memory check faults instead)
    words = dma_descriptor("get", 1 << 16, REPLY, mode="row")
    with pytest.raises(VMFault, match="memory range"):
        run_request(engine, words, DATA)


@pytest.mark.parametrize("engine", ENGINES)
def test_dma_outside_main_memory_faults(engine):
    with pytest.raises(VMFault, match="memory range outside main memory"):
        Machine().run(swsim.assemble(issue_program(dma_descriptor("get", 64, REPLY))),
                      args=[0], cpes=[ISSUER], engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_barrier_ignores_the_data_fields(engine):
    # a BARRIER reads only op and reply: a garbage mode, size and mask are no fault
    words = dma_descriptor("barrier", 12345, REPLY, mode="bcast", mask=0)
    words[1] |= 7 << 28
    result, _, _ = run_request(engine, words, DATA)
    assert result.counters["dma_requests"] == 1
