"""Host API (Machine, memory, spawn ABI, results), faults, deadlock and the cycle limit."""
import json

import numpy as np
import pytest

import swsim
from swsim import isa
from swsim.errors import SwsimError
from swsim.vm import CycleLimit, Deadlock, HostError, Machine, VMFault
from vm_helpers import PROLOGUE, lanes, reg, run, run_on_both_engines


# ---- memory ---------------------------------------------------------------------------------
def test_put_get_round_trip_and_alignment():
    m = Machine()
    a = m.mem.put(np.arange(3, dtype=np.int8))
    b = m.mem.put(np.ones((2, 3), dtype=np.float32))
    assert a == m.config.mem_base + m.config.static_data_bytes
    assert b % 128 == 0 and b >= a + 3
    np.testing.assert_array_equal(m.mem.get(b, (2, 3), np.float32), np.ones((2, 3)))


def test_memory_outside_allocations_is_refused():
    m = Machine()
    a = m.mem.put(np.zeros(4, dtype=np.int64))
    with pytest.raises(HostError, match="outside allocated main memory"):
        m.mem.get(a, (5,), np.int64)
    with pytest.raises(HostError, match="mem_limit"):
        Machine(mem_limit=1 << 20).mem.alloc(2 << 20)


def test_kernel_reads_and_writes_main_memory():
    m = Machine()
    a = m.mem.put(np.array([5, 0], dtype=np.int64))
    run("""
        ldl $1, 0($16)
        addl $1, $1, $1
        stl $1, 8($16)
        halt
    """, args=[a], machine=m)
    assert list(m.mem.get(a, (2,), np.int64)) == [5, 10]


def test_program_static_data_is_placed_at_data_base():
    program = swsim.assemble(PROLOGUE + """
        ldi $1, table
        ldl $2, 8($1)
        halt
    .data
    table: .quad 11, 22
    """)
    m = Machine()
    m.mem.put(np.zeros(1))
    run_on_both_engines(m, program, cpes=[0])
    assert reg(m, 2) == 22


# ---- spawn ABI ------------------------------------------------------------------------------
def test_arguments_in_registers_and_on_the_stack():
    m = Machine()
    array = np.zeros(4)
    address = m.mem.put(array)
    res, m = run("""
        ldl $1, 0($30)          # 7th argument
        ldl $2, 8($30)          # 8th argument
        halt
    """, args=[array, -1, 2.5, 3, 4, 5, 6, 7], machine=m, cpes=[0, 9])
    for cpe in (0, 9):
        assert [reg(m, r, cpe) for r in range(16, 22)] == \
            [address, (1 << 64) - 1, 0x4004000000000000, 3, 4, 5]
        assert (reg(m, 1, cpe), reg(m, 2, cpe)) == (6, 7)
        assert reg(m, 30, cpe) == m.config.ldm_bytes - 32      # 2 slots, 32-byte aligned
        assert reg(m, 26, cpe) == m.config.code_base - 4


def test_ldm_image_is_copied_to_every_spawned_cpe():
    res, m = run("""
        ldl $1, value($31)
        halt
    .section .ldm
    value: .quad 42
    """, cpes=[3, 60])
    assert reg(m, 1, 3) == reg(m, 1, 60) == 42


def test_image_too_large_for_ldm_is_refused():
    with pytest.raises(HostError, match="does not fit in LDM"):
        run("halt\n.section .ldm\n.space 70000\n")
    with pytest.raises(HostError, match="does not fit in LDM"):
        run("halt\n.section .ldm\n.space 65500\n", args=range(20))


@pytest.mark.parametrize("call, message", [
    (dict(entry="kernl"), "did you mean kernel"),
    (dict(args=[np.zeros(3)]), "array not in memory; use m.mem.put"),
    (dict(args=["x"]), "expected an int"),
    (dict(cpes=[64]), "CPE ids 0..63"),
    (dict(cpes=[]), "at least one"),
    (dict(cpes=[1, 1]), "distinct"),
    (dict(cpes=8), "collection of CPE ids"),
    (dict(cg=4), "core group number 0..3"),
    (dict(engine="java"), "unknown engine"),
])
def test_wrong_host_calls_raise_clear_errors(call, message):
    program = swsim.assemble(PROLOGUE + "halt\n")
    options = {"cpes": [0], "engine": "python", **call}
    with pytest.raises(HostError, match=message) as info:
        Machine().run(program, **options)
    assert isinstance(info.value, SwsimError)


def test_configuration_overrides_and_presets():
    assert Machine(ldm_bytes=128 * 1024).config.ldm_bytes == 128 * 1024
    with pytest.raises(HostError, match="unknown configuration parameter"):
        Machine(ldm_size=1)
    pro = Machine("sw26010pro", vector_bytes=32)
    assert pro.config.num_cgs == 6 and pro.config.ldm_bytes == 256 * 1024
    res, _ = run("halt", machine=pro, cg=5)
    assert res.cg == 5


@pytest.mark.parametrize("config", [dict(config="sw26010pro"), dict(vector_bytes=16)])
def test_vector_widths_the_engines_do_not_emulate_are_refused(config):
    # both engines model 256-bit registers; the pro preset's 512-bit vectors are descriptive
    with pytest.raises(HostError, match="emulate 32-byte .256-bit, 4 x 64-bit lane. registers "
                                        "only; wider vectors .the sw26010pro's 512 bits. are "
                                        "not emulated.*pass vector_bytes=32"):
        Machine(**config)


# ---- results --------------------------------------------------------------------------------
def test_result_times_summary_and_json():
    res, _ = run("addl $1, 1, $1\n halt", cpes=range(64))      # one cycle: addl P0, halt P1
    assert res.cycles == res.kernel_cycles + 40600   # spawn_cycles
    assert res.seconds == pytest.approx(res.cycles / 1.45e9)
    assert res.cpe[63].ee == 1.0 and res.ee_mesh().shape == (8, 8)
    assert "EE per CPE" in res.summary() and "kernel" in res.summary()
    data = json.loads(json.dumps(res.to_dict()))
    assert data["cycles"] == res.cycles and len(data["cpes"]) == 64


def test_row_broadcast_results_are_exact():
    # rcid c0; mull c1 (ready c6); putr c6 broadcasts rcid^2 along row 0, arriving c17; getr
    # c17 takes the lowest other sender's value; halt (P1 like getr) c18
    res, m = run("""
        rcid $1
        mull $1, $1, $2
        putr $2, 8
        getr $3
        halt
    """, cpes=range(8))
    assert [reg(m, 3, cpe) for cpe in range(8)] == [1, 0, 0, 0, 0, 0, 0, 0]
    assert res.kernel_cycles == 19 and res.counters["rc_transfers"] == 8


# ---- faults ---------------------------------------------------------------------------------
@pytest.mark.parametrize("body, cpes, kind, text", [
    ("ldi $1, 3($31)\n ldl $2, 4($1)", [0], "misaligned", "ldl $2, 4($1)"),
    ("ldih $1, 0x2000($31)\n ldl $2, 0($1)", [0], "access", "ldl $2, 0($1)"),
    ("ldi $1, 0x100($31)\n vldr $2, 0($1)", [0], "put_unspawned", "vldr"),
    (".word 0", [0], "undecodable", ".word 0x00000000"),
    ("nop", [0], "pc", "outside the code image"),
    ("putr $1, 1", [0], "put_unspawned", "putr $1, 1"),
    ("putr $1, 0", [0], "put_self", "putr $1, 0"),
    (f".word {isa.encode(isa.BY_NAME['putc'], {'ra': 1, 'imm8': 9}, literal=True):#x}", [0], "put_outside",
     ".word"),                                      # n = 9 only from a hand-made word
    ("synr 2", [0, 1], "barrier", "synr 2"),
    ("synr 5", [0], "barrier", "synr 5"),
    ("ldi $1, 9\n putr $2, $1", [0], "put_outside", "putr $2, $1"),     # target in a register, beyond 8
    ("ldi $1, 0x101\n synr $1", [0], "barrier", "synr $1"),             # bit 8: no such CPE
    ("ldi $1, 2\n sync $1", [0], "barrier", "sync $1"),                 # not in the mask
    ("rcsr $1, 5", [0], "csr", "rcsr $1, 5"),
    ("dma $31, $31, $31", [0], "dma", "dma"),
])
def test_faults_stop_the_run_with_a_report(body, cpes, kind, text):
    with pytest.raises(VMFault) as info:
        run(body + "\n" + ("halt" if kind != "pc" else ""), cpes=cpes)
    fault = info.value
    assert fault.stop.name == kind
    assert text in fault.instruction
    assert f"CPE {fault.cpe}" in str(fault) and fault.reason in str(fault)
    assert fault.result is not None and fault.result.kernel_cycles == fault.cycle


def test_load_and_broadcast_from_main_memory_faults():
    m = Machine()
    a = m.mem.put(np.zeros(4))
    with pytest.raises(VMFault, match="LDM only"):
        run("vldr $2, 0($16)\n halt", args=[a], machine=m, cpes=range(8))


def test_deadlock_lists_every_blocked_cpe():
    with pytest.raises(Deadlock) as info:
        run("""
            rcid $1
            beq $1, wait
            synr 0xff
        wait:
            getr $2
            halt
        """, cpes=range(8))
    blocked = info.value.blocked
    assert [b[0] for b in blocked] == list(range(8))
    assert blocked[0][2] == "get_empty" and blocked[1][2] == "barrier"
    assert "getr $2" in str(info.value)
    assert info.value.result.kernel_cycles == info.value.cycle + 1


def test_cycle_limit():
    with pytest.raises(CycleLimit) as info:
        run("""
        loop:
            br $31, loop
        """, max_cycles=1000)
    assert info.value.cycle == 1000
    assert info.value.result.kernel_cycles == 1000
    assert info.value.blocked[0][:3] == (0, 0x1000_0000, "running")


def test_a_long_wait_is_skipped_but_counted():
    # c0 fdivd; c1..c33 raw, skipped in one step but charged; c34 faddd with halt
    res, _ = run("fdivd $1, $2, $3\n faddd $3, $3, $4\n halt", cpes=range(64))
    assert res.kernel_cycles == 35
    assert all(s.p0_idle["raw"] == 33 for s in res.cpe.values())


def test_trace_spans_and_lanes_api():
    res, m = run("vcpyf $31, $1\n halt", trace=True)
    assert res.spans == [(0, "issue", 0, 1)]
    assert lanes(m, 1) == [0, 0, 0, 0]
