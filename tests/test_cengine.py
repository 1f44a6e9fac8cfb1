"""The C core on its own: generated decoder, semantics, hand-counted timing, DMA and register
communication timing, memory safety, skipping and determinism (docs/timing.md,
docs/semantics.md). Jobs are built directly as EngineJobs."""
import functools
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import swsim
from swsim import isa
from swsim.vm import VMConfig, floats
from swsim.vm import cengine, pyengine   # the C core must be built: a missing one fails here
from swsim.vm._core import ffi, lib
from swsim.vm.engine_api import CG_COUNTER_INDEX, CPE_COUNTER_INDEX, EngineJob
from vm_helpers import dma_descriptor_asm

CONFIG = VMConfig.preset("sw26010")
MEM_BYTES = 1 << 16


def make_job(code, cpes=1, config=CONFIG, entry="entry", regs=None, max_cycles=100_000,
             trace=False, mem_bytes=MEM_BYTES):
    """An EngineJob for assembly text (entry at label `entry`) or a list of code words."""
    if isinstance(code, str):
        program = swsim.assemble(".text\n.globl entry\nentry:\n" + code)
        words, entry_pc = program.code, program.address_of(entry)
    else:
        words, entry_pc = np.array(code, np.uint32), config.code_base
    n = config.num_cpes
    spawned = np.zeros(n, bool)
    spawned[list(range(cpes)) if isinstance(cpes, int) else list(cpes)] = True
    return EngineJob(config=config, code=words, spawned=spawned, entry_pc=entry_pc,
                     regs=np.zeros((n, 32, 4), np.uint64) if regs is None else regs,
                     ldm=np.zeros((n, config.ldm_bytes), np.uint8),
                     mem=np.zeros(mem_bytes, np.uint8), max_cycles=max_cycles, trace=trace)


def counter(result, name, cpe=0):
    return int(result.cpe_counters[cpe, CPE_COUNTER_INDEX[name]])


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def double(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


# ---- decoder -----------------------------------------------------------------------------

def decoded(word):
    out = ffi.new("SwDecoded *")
    lib.swsim_decode_word(word, out)
    return out


def _sample_values(instr, literal):
    values = {}
    for i, op in enumerate(instr.operands):
        for f in isa.operand_fields(op, literal):
            lo, hi = isa.field_range(f)
            is_register = f in ("ra", "rb", "rc", "r3")
            values[f] = (3 + 5 * i) % 31 if is_register else (-3 if lo < 0 else min(hi, 5))
    return values


FORMS = [(i, False) for i in isa.INSTRUCTIONS] + [(i, True) for i in isa.INSTRUCTIONS
                                                   if i.has_literal_form]


@pytest.mark.parametrize("instr,literal", FORMS,
                         ids=[f"{i.name}{'-lit' if lit else ''}" for i, lit in FORMS])
def test_decoder_tables_match_the_isa_table(instr, literal):
    values = _sample_values(instr, literal)
    word = isa.encode(instr, values, literal=literal)
    d = decoded(word)
    assert ffi.string(lib.swsim_instruction_name(d.id)).decode() == instr.name
    assert d.literal == literal
    assert d.pipes == sum(1 << p for p in instr.pipes)
    assert isa.LATENCY_CLASSES[d.latency_class] == instr.latency
    assert list(isa.CLASSES)[d.cls] == instr.cls
    assert d.size == instr.size
    assert d.ends_group == instr.ends_group
    fields = isa.immediate_fields(instr, literal)
    assert d.immediate == isa.immediate_value(fields, {f: isa.get_field(word, f) for f in fields})
    dest = isa.dest_field(instr)
    assert d.dest == (isa.get_field(word, dest) if dest else -1)
    sources = [isa.get_field(word, f) for f in isa.source_fields(instr, literal)]
    assert list(d.sources)[:d.num_sources] == sources


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_words_decode_as_in_python(word):
    hit = isa.lookup(word)
    name = ffi.string(lib.swsim_instruction_name(decoded(word).id)).decode()
    assert name == (hit[0].name if hit else "(invalid)")


# ---- semantics ---------------------------------------------------------------------------

def run_ops(body, regs_init=None, cpes=1, **kw):
    regs = np.zeros((CONFIG.num_cpes, 32, 4), np.uint64)
    for (reg, lane), value in (regs_init or {}).items():
        regs[0, reg, lane] = value
    job = make_job(body + "\nhalt\n", cpes=cpes, regs=regs, **kw)
    result = cengine.run(job)
    assert result.stop is None, result.stop
    return job, result


def test_integer_semantics():
    init = {(1, 0): 0xFFFF_FFFF, (2, 0): 1, (3, 0): 2**63 + 5, (4, 0): 7, (5, 2): 99}
    job, _ = run_ops("""
        addw $1, $2, $5
        addl $1, $2, $6
        sra $3, 4, $7
        umulh $3, $3, $8
        s8subl $4, $2, $9
        cmplt $3, $2, $10
        cmpult $3, $2, $11
        sellt $3, 42, $4, $12
        ldih $13, -1($2)
        mulw $1, $1, $14
    """, init)
    r = job.regs[0]
    assert r[5, 0] == 0 and r[5, 2] == 99          # sext32(0x1_0000_0000); upper lanes kept
    assert r[6, 0] == 0x1_0000_0000
    assert r[7, 0] == ((2**63 + 5) >> 4) | (0xF << 60)
    assert r[8, 0] == ((2**63 + 5) ** 2) >> 64
    assert r[9, 0] == 55 and r[10, 0] == 1 and r[11, 0] == 0 and r[12, 0] == 42
    assert r[13, 0] == (1 - 65536) % 2**64
    assert r[14, 0] == 1                           # (-1 * -1) as 32 bits


def test_vector_integer_and_shuffles():
    a = [0x0000_0001_FFFF_FFFF, 2, 3, 4]
    init = {(1, i): v for i, v in enumerate(a)}
    init[(2, 0)] = 0x76543210   # vshfw selector: identity
    job, _ = run_ops("""
        vaddw $1, 1, $3
        vsraw $1, 1, $4
        vextw $1, 1, $5
        vinsf $2, $1, 3, $6
        vshfw $1, $1, $2, $7
        vcpyf $1, $8
    """, init)
    r = job.regs[0]
    assert list(r[3]) == [0x0000_0002_0000_0000, 0x1_0000_0003, 0x1_0000_0004, 0x1_0000_0005]
    assert r[4, 0] == 0x0000_0000_FFFF_FFFF
    assert r[5, 0] == 1
    assert list(r[6]) == a[:3] + [0x76543210]
    assert list(r[7]) == a
    assert list(r[8]) == [a[0]] * 4


def test_float_rounding_and_nan_canonicalisation():
    nan_payload = 0x7FF0_0000_0000_0001        # signalling NaN with a payload
    third = bits(1.0 / 3.0)
    init = {(1, 0): third, (2, 0): bits(3.0), (3, 0): bits(-1.0), (4, 0): nan_payload,
            (5, 0): bits(-0.0), (6, 0): bits(1e300), (7, 0): bits(2.5e9),
            (8, 0): bits(5e-324)}
    job, _ = run_ops("""
        fmad $1, $2, $3, $10
        fmas $1, $2, $3, $11
        faddd $4, $2, $12
        fcvtdl $4, $13
        fcvtdl $6, $14
        fcmpun $4, $2, $15
        fcvtds $7, $16
        fsqrtd $3, $17
        fcpys $5, $2, $18
        fmuld $8, $8, $19
        fimovd $4, $20
    """, init)
    r = job.regs[0]
    assert r[10, 0] == bits(-2.0**-54)                        # fused: (1/3)*3 - 1 exactly
    assert double(r[11, 0]) == floats.fma_single(1.0 / 3.0, 3.0, -1.0)
    assert r[12, 0] == 0x7FF8_0000_0000_0000
    assert r[13, 0] == 2**63 and r[14, 0] == 2**63
    assert r[15, 0] == bits(2.0)
    assert double(r[16, 0]) == float(np.float32(2.5e9))
    assert r[17, 0] == 0x7FF8_0000_0000_0000
    assert r[18, 0] == bits(-3.0)
    assert r[19, 0] == 0                                      # subnormal squared underflows
    assert r[20, 0] == nan_payload                            # integer move keeps the bits


def test_single_fma_is_fused_in_binary32():
    a = float(np.float32(1 + 2**-12))
    init = {(1, 0): bits(a), (2, 0): bits(a), (3, 0): bits(-1.0)}
    job, _ = run_ops("fmas $1, $2, $3, $4\nfmuls $1, $2, $5\nfsubs $5, $3, $6\n", init)
    r = job.regs[0]
    assert double(r[4, 0]) == float(np.float32(a * a - 1.0))  # exact in double, one rounding
    assert double(r[6, 0]) == float(np.float32(np.float32(a * a) + np.float32(1.0)))


def test_loads_stores_and_memory():
    job = make_job("""
        ldi $1, 0x100
        ldi $2, -1
        stl $2, 0($1)
        ldw $3, 0($1)
        ldbu $4, 1($1)
        ldih $5, 0x4000($31)
        stw $2, 8($5)
        ldl $6, 8($5)
        vldd $7, 0($1)
        halt
    """)
    result = cengine.run(job)
    assert result.stop is None
    r = job.regs[0]
    assert r[3, 0] == 2**64 - 1 and r[4, 0] == 0xFF and r[6, 0] == 0xFFFF_FFFF
    assert list(r[7]) == [2**64 - 1, 0, 0, 0]
    assert job.mem[8:12].tolist() == [0xFF] * 4
    cg = result.cg_counters
    assert cg[CG_COUNTER_INDEX["gld_count"]] == 1 and cg[CG_COUNTER_INDEX["gst_count"]] == 1


# ---- timing ------------------------------------------------------------------------------

def test_dependent_chain_waits_for_latencies():
    # ldi (lat 1) -> vmad chain (lat 7 each) -> halt: issue at 0, 1, 8, 15
    job = make_job("ldi $1, 1\nvmad $1, $1, $2, $2\nvmad $2, $2, $2, $3\nfaddd $3, $3, $4\nhalt\n")
    result = cengine.run(job)
    # faddd issues at 15; halt pairs with it (P1, independent) -> last cycle 15
    assert result.kernel_cycles == 16
    assert counter(result, "p0_idle_raw") == 6 + 6
    assert counter(result, "p0_valid") == 3


def test_pairing_rules():
    # vmad (P0 only) pairs with ldi (either pipe) -> both in cycle 0; a follower reading the
    # leader's destination does not pair.
    job = make_job("vmad $1, $1, $1, $2\nldi $3, 1\naddl $3, $3, $4\nsubl $4, 1, $5\nhalt\n")
    result = cengine.run(job)
    # cycle 0: vmad P0 + ldi P1; cycle 1: addl alone on P1 (subl reads its destination: P0
    # idle "pairing"); cycle 2: subl (either pipe) takes P0 so that halt (P1 only) pairs.
    assert result.kernel_cycles == 3
    assert counter(result, "p0_valid") == 2 and counter(result, "p1_valid") == 3
    assert counter(result, "p0_idle_pairing") == 1


def test_divide_keeps_p0_busy():
    job = make_job("fdivd $1, $2, $3\nfaddd $4, $5, $6\nhalt\n")
    result = cengine.run(job)
    # fdivd at 0, faddd waits for P0 until lat_fdivd (34), halt pairs with it
    assert result.kernel_cycles == CONFIG.lat_fdivd + 1
    assert counter(result, "p0_idle_divide") == CONFIG.lat_fdivd - 1


def test_register_communication_latency():
    # CPE 0 puts at cycle 0; CPE 1's getr issues when the data arrived (11) and rtc reads it.
    job = make_job("""
        rcid $1
        bne $1, 1f
        putr $2, 1
        halt
    1:  getr $3
        rtc $4
        halt
    """, cpes=2)
    result = cengine.run(job)
    assert result.stop is None
    # rcid at 0, bne at 1 (RAW), putr at 2 -> arrives at 13; getr at 13, rtc pairs? rtc P1 ->
    # no, both P1: rtc at 14.
    assert job.regs[1, 4, 0] == 2 + CONFIG.rc_latency + 1
    assert result.cg_counters[CG_COUNTER_INDEX["rc_deliveries"]] == 1


# engine cycles: a get's request costs 6 and its transactions 6 each; a put's writes (a whole
# line, or an 8-byte piece of a partial line, at most 3 per partial line) 11 each, plus 29 for
# the acknowledgement
@pytest.mark.parametrize("op,size,transactions,engine_cycles", [
    ("get", 128, 1, 6 + 6), ("get", 1024, 8, 6 + 8 * 6), ("get", 200, 2, 6 + 2 * 6),
    ("put", 128, 1, 11 + 29), ("put", 1024, 8, 8 * 11 + 29),
    ("put", 200, 2, (1 + 3) * 11 + 29),    # 128..199 touches 9 pieces: 3 writes
])
def test_single_dma_request_timing(op, size, transactions, engine_cycles):
    # descriptor: `op` of `size` bytes, reply at 0x10; issue at cycle t0, then spin.
    job = make_job(f"""
        {dma_descriptor_asm("$2", "$1", op, size, 0x10)}
        ldih $4, 0x4000($31)
        ldi $5, 0x100
        rtc $8
        dma $2, $4, $5
    1:  ldw $6, 0x10($31)
        beq $6, 1b
        rtc $9
        halt
    """)
    result = cengine.run(job)
    assert result.stop is None
    t0 = int(job.regs[0, 8, 0]) + 1
    done = t0 + CONFIG.dma_latency + engine_cycles
    # the reply is written at `done`; the spin loop's ldw sees it at `done` at the earliest
    assert done <= job.regs[0, 9, 0] <= done + 8
    assert result.cg_counters[CG_COUNTER_INDEX["dma_transactions"]] == transactions


def test_barrier_releases_after_barrier_cycles():
    job = make_job("""
        rcid $1
        beq $1, 1f
        ldi $2, 50
    2:  subl $2, 1, $2
        bgt $2, 2b
    1:  synr 0x3
        rtc $3
        halt
    """, cpes=2)
    result = cengine.run(job)
    assert result.stop is None
    # CPE 1: rcid c0, beq c1, ldi c2, 50 x (subl, bgt) c3..c102, synr c103 (the last
    # arrival), released barrier_cycles later: rtc c117. CPE 0 arrives at c2 and waits c3..c116.
    release = 103 + CONFIG.barrier_cycles
    assert job.regs[0, 3, 0] == job.regs[1, 3, 0] == release
    assert counter(result, "p0_idle_barrier", 0) == release - 3
    assert counter(result, "p0_idle_barrier", 1) == CONFIG.barrier_cycles - 1
    assert result.cg_counters[CG_COUNTER_INDEX["barriers"]] == 1


# ---- stops and safety --------------------------------------------------------------------

def test_deadlock_and_cycle_limit_reports():
    job = make_job("getr $1\nhalt\n", cpes=2)
    result = cengine.run(job)
    assert result.stop.name == "deadlock"
    assert result.stop.blocked == [(0, CONFIG.code_base, "get_empty"),
                                   (1, CONFIG.code_base, "get_empty")]
    assert result.kernel_cycles == result.stop.cycle + 1
    spin = make_job("1: br 1b\n", max_cycles=1000)
    result = cengine.run(spin)
    assert result.stop.name == "cycle_limit" and result.kernel_cycles == 1000
    assert counter(result, "p1_valid") == 1000


@pytest.mark.parametrize("body,kind", [
    ("ldl $1, 4($31)", "misaligned"), ("ldih $1, 1($31)\nldl $2, 0($1)", "access"),
    ("putr $1, 0", "put_self"), ("putr $1, 1", "put_unspawned"), ("synr 0x2", "barrier"),
    ("br 1f\n.word 0\n1: .word 0", "undecodable"), ("dma $1, $2, $3", "dma"),
    ("ldi $1, 4\njmp $31, ($1)", "pc"),
])
def test_faults_stop_cleanly(body, kind):
    result = cengine.run(make_job(body + "\nhalt\n"))
    assert result.stop.name == kind
    assert result.kernel_cycles == result.stop.cycle


random_words = st.lists(st.one_of(
    st.integers(0, 2**32 - 1),
    st.sampled_from(isa.INSTRUCTIONS).map(lambda i: isa.encode(i, {}))), min_size=1, max_size=40)


def _random_job(words, seed, cpes, max_cycles):
    rng = np.random.default_rng(seed)
    regs = rng.integers(0, 2**64, size=(64, 32, 4), dtype=np.uint64)
    small = rng.random((64, 32, 4)) < 0.5   # many small values: valid LDM/memory addresses
    regs[small] = rng.choice([0, 8, 32, 0x4000_0000, 0x4000_0100, 0xFFE0], int(small.sum()))
    regs[:, isa.ZERO_REG] = 0   # as Machine spawns (the C core ignores it, Python reads it)
    return make_job(words, cpes=cpes, regs=regs, max_cycles=max_cycles, trace=bool(seed & 1),
                    mem_bytes=int(rng.integers(0, 4096)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=random_words, seed=st.integers(0, 2**32 - 1), cpes=st.integers(1, 64),
       skip=st.booleans())
def test_random_words_run_as_on_the_python_engine(words, seed, cpes, skip):
    # any word, any register contents: the C core stays memory-safe and agrees with the oracle
    jobs = [_random_job(words, seed, cpes, 300) for _ in range(2)]
    _same(cengine.run(jobs[0], skip=skip), pyengine.run(jobs[1]))
    _same_arrays(*jobs)


# ---- skipping and determinism ------------------------------------------------------------

def dma_spin(size_log2=12, op="get", size=None, offset=0):
    """Each CPE moves `size` (default 2 ** size_log2) bytes twice with `op` at `offset` in its
    own region of 2 ** size_log2 bytes and waits; then register communication from CPE 0 that
    ends in a deadlock (the getc of CPEs outside column 0)."""
    return f"""
    rcid $10
    {dma_descriptor_asm("$2", "$1", op, size or 1 << size_log2, 0x10)}
    ldih $4, 0x4000($31)
    sll $10, {size_log2}, $11
    addl $4, $11, $4
    ldi $4, {offset}($4)
    ldi $5, 0x100
    dma $2, $4, $5
    dma $2, $4, $5
1:  ldw $6, 0x10($31)
    cmpeq $6, 2, $7
    beq $7, 1b
    synr 0xff
    sync 0xff
    rcid $12
    bne $12, 2f
    putr $6, 8
    putc $6, 8
    halt
2:  and $10, 7, $13
    beq $13, 3f
    getr $14
3:  getc $15
    halt
"""


DMA_SPIN = dma_spin()
# DMA_SPIN on rows 0 and 1 (16 CPEs, small enough for the Python engine)
DMA_SPIN_16 = DMA_SPIN.replace("sync 0xff", "sync 0x3")


def _same(a, b):
    np.testing.assert_array_equal(a.cpe_counters, b.cpe_counters)
    np.testing.assert_array_equal(a.cg_counters, b.cg_counters)
    np.testing.assert_array_equal(a.pcs, b.pcs)
    assert a.kernel_cycles == b.kernel_cycles and a.stop == b.stop and a.spans == b.spans


def _same_arrays(a, b):
    for name in ("regs", "ldm", "mem"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), name)


@functools.lru_cache(maxsize=None)
def python_reference(body, cpes, trace=False, mem_bytes=64 * 4096):
    """The Python engine's run of a job (the oracle; cached, as it takes up to a second)."""
    job = make_job(body, cpes=cpes, trace=trace, mem_bytes=mem_bytes)
    return pyengine.run(job), job


def run_like_python(body, cpes, trace=False, mem_bytes=64 * 4096, **options):
    """Run a job on the C core and check it against the Python engine's run."""
    job = make_job(body, cpes=cpes, trace=trace, mem_bytes=mem_bytes)
    result = cengine.run(job, **options)
    reference, reference_job = python_reference(body, cpes, trace, mem_bytes)
    _same(result, reference)
    _same_arrays(job, reference_job)
    return result


@pytest.mark.parametrize("trace", [False, True])
@pytest.mark.parametrize("skip", [False, True])
def test_skipping_or_stepping_gives_the_python_engines_run(trace, skip):
    result = run_like_python(DMA_SPIN_16, 16, trace, skip=skip)
    # after the DMAs, spins and barriers, CPE 0's column broadcast reaches unspawned rows
    assert (result.stop.name, result.stop.cpe) == ("put_unspawned", 0)


@pytest.mark.parametrize("skip", [False, True])
def test_spin_loop_is_fast_forwarded_exactly(skip):
    # one CPE waits ~10k cycles for 80 DMA transactions while spinning
    run_like_python(dma_spin(10), 1, skip=skip)


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("step", [1, 100])
def test_runs_in_steps_give_the_python_engines_run(monkeypatch, skip, step):
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", step)
    cycles = []
    result = run_like_python(DMA_SPIN_16, 16, True, skip=skip, progress=cycles.append)
    assert cycles and cycles == sorted(cycles) and cycles[-1] <= result.kernel_cycles
    if not skip:
        assert cycles == list(range(step, step * (len(cycles) + 1), step))


def test_a_failing_progress_callback_stops_the_run(monkeypatch):
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", 10)

    def interrupt(cycle):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cengine.run(make_job(DMA_SPIN, cpes=4, mem_bytes=64 * 4096), progress=interrupt)


def test_machine_reports_progress_of_c_runs(monkeypatch):
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", 50)
    machine = swsim.Machine()
    program = swsim.assemble(".text\n.globl k\nk:\nldi $1, 300\n1: subl $1, 1, $1\n"
                             "bgt $1, 1b\nhalt\n")
    cycles = []
    result = machine.run(program, entry="k", cpes=range(1), engine="c", progress=cycles.append)
    assert result.kernel_cycles == 602      # ldi c0, 300 x (subl, bgt) c1..c600, halt c601
    assert cycles == list(range(50, 601, 50))


# Each CPE streams `requests` gets of 2 KiB into LDM 0x1000 (reply word 0x10), then spins
# until a word inside the buffer (0x1000 + WATCH) is non-zero, then on the reply count.
DMA_STREAM = f"""
    rcid $10
    {dma_descriptor_asm("$2", "$1", "get", 2048, 0x10)}
    ldih $4, 0x4000($31)
    sll $10, 13, $11
    addl $4, $11, $4
    ldi $5, 0x1000
    ldi $8, REQUESTS
1:  dma $2, $4, $5
    ldi $9, 2048($4)
    bis $9, $9, $4
    ldi $9, 2048($5)
    bis $9, $9, $5
    subl $8, 1, $8
    bgt $8, 1b
2:  ldw $6, WATCH($31)
    beq $6, 2b
3:  ldw $6, 0x10($31)
    cmpeq $6, REQUESTS, $7
    beq $7, 3b
    halt
"""


@pytest.mark.parametrize("watch", [0x1000, 0x1000 + 2048 + 700, 0x1000 + 4 * 2048 - 4])
def test_dma_runs_ahead_exactly(watch):
    body = DMA_STREAM.replace("REQUESTS", "4").replace("WATCH", str(watch))
    jobs = [make_job(body, cpes=16, mem_bytes=64 * 8192) for _ in range(3)]
    for job in jobs:
        job.mem[:] = np.arange(job.mem.size) % 251 + 1   # every word of the buffer non-zero
    reference = pyengine.run(jobs[2])
    assert reference.stop is None
    for job, skip in zip(jobs, (False, True)):
        _same(cengine.run(job, skip=skip), reference)
        _same_arrays(job, jobs[2])


def test_put_parameters_reach_the_core():
    # every CPE puts 200 B twice, 40 bytes past a line; non-default put costs on both engines
    config = CONFIG.replace(dma_put_write_bytes=32, dma_put_write_cycles=7, dma_put_ack_cycles=3,
                            dma_put_partial_writes=4)
    body = dma_spin(op="put", size=200, offset=40)
    jobs = [make_job(body, cpes=64, config=config, mem_bytes=64 * 4096, trace=True)
            for _ in range(3)]
    reference = pyengine.run(jobs[2])
    stepped, skipped = cengine.run(jobs[0], skip=False), cengine.run(jobs[1], skip=True)
    _same(stepped, reference)
    _same(skipped, reference)
    # CPE 0's first put: 40..127 (pieces 1..3), then 128..239 (pieces 4..7). CPEs 0-3 issue in
    # the same cycle and their requests alternate: CPE 0's first transaction (3 writes of 7),
    # those of CPEs 1-3 (3 each), CPE 0's second (4) and its acknowledgement (3).
    issue, first = min((start, end) for cpe, kind, start, end in skipped.spans
                       if cpe == 0 and kind == "dma")
    assert first == issue + CONFIG.dma_latency + 4 * 3 * 7 + 4 * 7 + 3


def test_pro_preset_has_256k_ldm():
    config = VMConfig.preset("sw26010pro", vector_bytes=32)   # 512-bit vectors: not emulated
    job = make_job("ldih $1, 3($31)\nstl $1, -8($1)\nldl $2, -8($1)\nhalt\n", config=config)
    result = cengine.run(job)
    assert result.stop is None and job.regs[0, 2, 0] == 3 << 16
    assert job.ldm.shape == (64, 256 * 1024)


def test_measure_speed_reports_the_run():
    job = make_job(DMA_SPIN, cpes=4, mem_bytes=64 * 4096)
    reference, _ = python_reference(DMA_SPIN, 4)
    speed = cengine.measure_speed(job, repeat=1)
    valid = reference.cpe_counters[:, [CPE_COUNTER_INDEX["p0_valid"],
                                       CPE_COUNTER_INDEX["p1_valid"]]]
    assert speed["instructions"] == int(valid.sum())
    assert speed["kernel_cycles"] == reference.kernel_cycles
    assert speed["instructions_per_second"] == speed["instructions"] / speed["seconds"]
    assert speed["cycles_per_second"] == speed["kernel_cycles"] / speed["seconds"]
    assert not job.regs.any() and not job.mem.any()   # measured on copies of the job


def test_the_c_core_is_built_and_is_the_default_engine():
    # CI must fail, not skip, without the C core: the imports at the top of this module and
    # this test need it
    assert lib.swsim_num_latency_classes() == len(isa.LATENCY_CLASSES)
    result = swsim.Machine().run(swsim.assemble(".text\n.globl kernel\nkernel: halt\n"),
                                 cpes=[0])
    assert result.engine == "c" and result.kernel_cycles == 1
