"""Register communication, barriers and DMA (docs/timing.md), with hand-counted cycles."""
import numpy as np
import pytest

from swsim.vm import Machine
from vm_helpers import dma_descriptor, freg, idle, ldm, reg, run, run_on_both_engines

# Every CPE: c0 rcid; c1 bne taken by CPEs other than 0 (a branch ends its group).
SPLIT = """
        rcid $1
        bne $1, others
"""


def dma_spans(res):
    return sorted((cpe, start, end) for cpe, kind, start, end in res.spans if kind == "dma")


def test_put_to_get_latency_is_11_cycles():
    res, m = run(SPLIT + """
        ldi $4, 77($31)         # CPE 0: c2 (P1; F putr reads $4)
        putr $4, 1              # c3, arrives at CPE 1 at c14
        halt                    # c4
    others:
        getr $2                 # CPE 1: c2..c13 "get_empty", c14 issue, $2 ready c15
        addl $2, 0, $3          # c15 with halt
        halt
    """, cpes=[0, 1])
    assert reg(m, 3, cpe=1) == 77
    assert res.kernel_cycles == 16
    # P0 "pairing" at c0 (bne reads $1), c1 (taken branch), c14 (addl reads $2)
    assert idle(res, cpe=1, pipe=0) == {"get_empty": 12, "pairing": 3}
    assert res.counters["rc_transfers"] == 1 and res.counters["rc_deliveries"] == 1


def test_row_broadcast_reaches_the_other_seven():
    res, m = run(SPLIT + """
        ldi $4, 5($31)
        putr $4, 8              # c3 to CPEs 1..7 of row 0
        halt
    others:
        getr $2
        halt
    """, cpes=range(8))
    assert [reg(m, 2, cpe=i) for i in range(1, 8)] == [5] * 7
    assert res.counters["rc_deliveries"] == 7


def test_column_put():
    res, m = run(SPLIT + """
        ldi $4, 9($31)
        putc $4, 3              # CPE 0 (row 0, column 0) -> CPE 24 (row 3, column 0)
        halt
    others:
        getc $2
        halt
    """, cpes=[0, 24])
    assert reg(m, 2, cpe=24) == 9


def test_load_and_broadcast():
    res, m = run(SPLIT + """
        ldder $2, value($31)    # c2: local result c6, arrival at CPEs 1..7 at c13
        addl $2, 0, $3          # c6 with halt
        halt
    others:
        getr $2
        halt
    .section .ldm
    value: .double 2.5
    """, cpes=range(8))
    assert freg(m, 2, cpe=0) == freg(m, 2, cpe=7) == freg(m, 2, cpe=0, lane=3) == 2.5
    assert res.cpe[0].active_cycles == 7
    assert res.cpe[1].active_cycles == 15   # getr at c13, halt at c14


def test_receive_queue_and_send_buffer_back_pressure():
    res, m = run(SPLIT + """
        .rept 8
        putr $4, 1              # CPE 0: c2..c9, due c13..c20; CPE 1's row queue (depth 4)
        .endr                   # fills at c16, then 17..20 stay blocked in the send buffer
        fdivd $5, $6, $7        # c9 (pairs with the last putr), $7 ready c43
        addl $7, 0, $8          # c43 on P1; F putr: 4 blocked -> P0 idle "put_full"
        putr $4, 1              # c44..c70 "put_full"; c71 issue (CPE 1 popped at c70)
        halt                    # c72
    others:
        fdivd $5, $6, $7        # CPE 1: c2, $7 ready c36
        fdivd $7, $6, $7        # c36, $7 ready c70
        addl $7, 0, $8          # c70 with the first getr
        .rept 9
        getr $2                 # c70..c77 (deliveries c71..c74 refill), 9th arrives c82
        .endr
        halt                    # c83
    """, cpes=[0, 1])
    assert idle(res, cpe=0, pipe=0)["put_full"] == 28
    assert idle(res, cpe=0, pipe=1)["put_full"] == 27
    assert res.cpe[0].active_cycles == 73
    assert idle(res, cpe=1, pipe=1)["get_empty"] == 4    # c78..c81
    assert res.kernel_cycles == 84


def test_barrier_releases_14_cycles_after_the_last_arrival():
    res, m = run("""
        rcid $1                 # c0
        beq $1, arrive          # c1: CPE 0 taken
        mull $1, $1, $2         # CPE 1: c2, $2 ready c7
        addl $2, 0, $3          # c7 L on P1, F synr pairs on P0: last arrival c7
    arrive:
        synr 3                  # CPE 0 arrives at c2
        rtc $5                  # both: c21 = 7 + 14
        halt                    # c22
    """, cpes=[0, 1])
    assert reg(m, 5, cpe=0) == reg(m, 5, cpe=1) == 21
    assert res.kernel_cycles == 23
    assert idle(res, cpe=0)["barrier"] == 18      # c3..c20
    assert idle(res, cpe=1)["barrier"] == 13      # c8..c20
    assert res.counters["barriers"] == 1


def test_column_barrier_of_the_whole_column():
    res, m = run("""
        sync 0xff               # c0 every CPE of column 0 arrives; release c14
        rtc $5
        halt
    """, cpes=[0, 8, 16, 24, 32, 40, 48, 56])
    assert {reg(m, 5, cpe=i) for i in range(0, 64, 8)} == {14}


# ---- DMA ------------------------------------------------------------------------------------
def dma_program(op, size, block=0, stride=0, wait_for=1, issue="dma $4, $16, $5"):
    """Descriptor at LDM 0, reply word at 32, LDM buffer at 128 (a0: memory address).

    c0 vldd $4 (P1) with ldi $5 (P0); c4 the dma (raw on $4 until c4)."""
    words = dma_descriptor(op, size, 32, block=block, stride=stride)
    return f"""
    .section .ldm
    desc: .word {", ".join(map(str, words))}
    .text
    .globl kernel
    kernel:
        vldd $4, desc($31)
        ldi $5, 128($31)
        {issue}
    wait:
        ldw $6, 32($31)
        subl $6, {wait_for}, $6
        bne $6, wait
        halt
    """


def run_dma(text, data, cpes=(0,), **options):
    import swsim
    m = Machine()
    address = m.mem.put(data)
    res = run_on_both_engines(m, swsim.assemble(text), args=[address], cpes=list(cpes),
                              trace=True, **options)
    return res, m, address


def test_single_get_takes_latency_plus_transactions():
    data = np.arange(32, dtype=np.float64)               # 256 B, aligned: 2 transactions
    res, m, _ = run_dma(dma_program("get", 256), data)
    assert dma_spans(res) == [(0, 4, 4 + 200 + 6 + 2 * 6)]   # the request's 6, then 6 a line
    np.testing.assert_array_equal(ldm(m, 0, 128, 32, np.float64), data)
    assert res.counters["dma_transactions"] == 2 and res.counters["dma_bytes_moved"] == 256


# engine cycles: 6 for the request, 6 per transaction; a strided block costs 7 more but at
# least 24 in all (dma_block_get_cycles, dma_block_get_min_cycles)
@pytest.mark.parametrize("offset, size, block, stride, transactions, engine", [
    (0, 256, 0, 0, 2, 6 + 2 * 6),           # aligned contiguous
    (64, 128, 0, 0, 2, 6 + 2 * 6),          # unaligned: crosses one 128-byte boundary
    (0, 64, 16, 112, 4, 6 + 4 * 24),        # 4 blocks of 16 B, one per 128-byte segment
    (8, 64, 32, 96, 2, 6 + 2 * 24),         # blocks 8..40 and 136..168
    (96, 128, 64, 64, 4, 6 + 2 * 24),       # blocks 96..160 and 224..288 cross a boundary
])
def test_strided_and_unaligned_transactions(offset, size, block, stride, transactions, engine):
    data = np.arange(1024, dtype=np.uint8)
    text = dma_program("get", size, block, stride).replace("dma $4, $16, $5",
                                                       f"ldi $16, {offset}($16)\n dma $4, $16, $5")
    res, m, _ = run_dma(text, data)
    # ldi $16 pairs with nothing new: c0 vldd+ldi $5, c1 ldi $16, c4 dma
    assert dma_spans(res) == [(0, 4, 4 + 200 + engine)]
    assert res.counters["dma_transactions"] == transactions
    assert res.counters["dma_bytes_moved"] == 128 * transactions
    step = block + stride if block else size
    block = block or size
    expected = np.concatenate([data[offset + i * step:offset + i * step + block]
                               for i in range(size // block)])
    np.testing.assert_array_equal(ldm(m, 0, 128, size), expected)


def test_64_contending_requests_share_the_engine_round_robin():
    # All 64 CPEs issue a 2-transaction get at c4. 4 requests are active at a time; their
    # transactions interleave from c204, a first one 6 + 6 (the request's cost), a second 6:
    # request 4g+j replies at 4 + 200 + 72g + 54 + 6j.
    res, _, _ = run_dma(dma_program("get", 256), np.zeros(32), cpes=range(64))
    expected = [(4 * g + j, 4, 4 + 200 + 72 * g + 54 + 6 * j) for g in range(16) for j in range(4)]
    assert dma_spans(res) == expected
    # the last one matches eq. 3-1 with 64 sharers, each request's 6 cycles added
    assert expected[-1][2] - 4 == 200 + 64 * (6 + 2 * 6)


@pytest.mark.parametrize("offset, size, block, stride, engine", [
    (0, 256, 0, 0, 2 * 11),     # two whole lines: one write each
    (0, 8, 0, 0, 11),           # 8 bytes: one 8-byte piece
    (8, 16, 0, 0, 2 * 11),      # bytes 8..23 touch pieces 1 and 2
    (80, 128, 0, 0, 6 * 11),    # 80..127: pieces 10..15, 128..207: 16..25; 3 writes each (cap)
    (64, 256, 0, 0, 7 * 11),    # 64..127: 8 pieces (3), 128..255 whole, 256..319: 8 (3)
    (0, 64, 32, 96, 2 * (40 + 3)),   # strided: per block 40 + 11 * 32 / 128 rounded up
])
def test_put_costs_its_writes_and_the_acknowledgement(offset, size, block, stride, engine):
    # c4 the dma; the engine starts at 4 + 200 and spends `engine` cycles on the writes (11
    # per whole line or 8-byte piece of a partial line, at most 3 per partial line; strided:
    # per block and per line pro rata), then 29 for the write acknowledgement.
    data = np.zeros(512, dtype=np.uint8)
    text = dma_program("put", size, block, stride).replace(
        "dma $4, $16, $5", f"ldi $16, {offset}($16)\n dma $4, $16, $5")
    res, m, address = run_dma(text, data)
    assert dma_spans(res) == [(0, 4, 4 + 200 + engine + 29)]
    step = block + stride if block else size
    block = block or size
    written = m.mem.get(address, (512,), np.uint8)
    expected = np.zeros(512, dtype=np.uint8)
    ldm_bytes = m.last_job.ldm[0, 128:128 + size]
    for i in range(size // block):
        start = offset + i * step
        expected[start:start + block] = ldm_bytes[i * block:(i + 1) * block]
    np.testing.assert_array_equal(written, expected)


def test_gets_and_puts_share_the_engine():
    # CPE 0 puts 128 B (one line) at c5, CPE 1 gets 256 B (two lines) at c8 (after three more
    # instructions). The put's only transaction runs c205-c245 (11 + 29: it is its last), the
    # get, ready since c208, waits for it: its lines run c245-c257 (6 + 6 for the request)
    # and c257-c263.
    text = dma_program("put", 128).replace("vldd $4, desc($31)", """
        rcid $9
        vldd $4, desc($31)
        beq $9, 1f
        ldi $10, 256
        vinsw $10, $4, 0, $4
        ldih $10, 256($31)
        vinsw $10, $4, 1, $4
        ldi $16, 256($16)
    1:""")
    res, _, _ = run_dma(text, np.zeros(512, dtype=np.uint8), cpes=[0, 1])
    assert dma_spans(res) == [(0, 5, 205 + 11 + 29), (1, 8, 245 + 6 + 2 * 6)]


def test_dma_put_writes_memory():
    text = dma_program("put", 64).replace("ldi $5, 128($31)", "ldi $5, 0($31)")
    res, m, address = run_dma(text, np.zeros(8, dtype=np.int64))
    written = m.mem.get(address, (8,), np.uint8)
    assert written.tobytes() == bytes(m.last_job.ldm[0, :8])   # the descriptor's first bytes


def test_fourth_waiting_request_stalls_issue():
    # 8 gets of 128 B at c4..c10, c11...: #1-#4 become active one cycle after issue, #5-#7
    # wait; #8 stalls "dma_full" from c11 until #1 completes at 4 + 200 + 6 + 6 = c216.
    issue = "\n".join(["dma $4, $16, $5"] * 8)
    res, _, _ = run_dma(dma_program("get", 128, wait_for=8, issue=issue), np.zeros(16))
    assert idle(res)["dma_full"] == 205
    assert idle(res, pipe=1)["dma_full"] == 205
