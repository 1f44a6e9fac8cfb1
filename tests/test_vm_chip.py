"""The chip API: kernels spawned on several core groups of one Machine, simulated on host threads
and joined, the CGs sharing main memory (docs/vm.md "Chip")."""
import sys
import threading
import time

import numpy as np
import pytest

import swsim
from swsim.vm import Deadlock, HostError, Machine, VMFault
from vm_helpers import dma_descriptor_asm

# Each CPE gets its 256-byte block (32 doubles) of x by DMA, applies v = v * scale + offset
# `iterations` times to its 8 vectors, puts the block back and waits for the put's reply.
PART = r"""
    .text
    .globl part
part:                           # a0 x (main memory), a1 iterations, a2 scale, a3 offset
    rcid $1
    sll $1, 8, $1
    addl $16, $1, $16           # this CPE's block
    GET_DESCRIPTOR
    ldi $5, 0x100
    dma $4, $16, $5
1:  ldw $29, 0x10($31)
    beq $29, 1b
    .irp r, 8, 9, 10, 11, 12, 13, 14, 15
    vldd $\r, (\r - 8) * 32 + 0x100($31)
    .endr
    vcpyf $18, $6
    vcpyf $19, $7
2:
    .irp r, 8, 9, 10, 11, 12, 13, 14, 15
    vmad $\r, $6, $7, $\r
    .endr
    subl $17, 1, $17
    bgt $17, 2b
    .irp r, 8, 9, 10, 11, 12, 13, 14, 15
    vstd $\r, (\r - 8) * 32 + 0x100($31)
    .endr
    PUT_DESCRIPTOR
    dma $4, $16, $5
3:  ldw $29, 0x10($31)
    cmpeq $29, 2, $29
    beq $29, 3b
    halt
""".replace("GET_DESCRIPTOR", dma_descriptor_asm("$4", "$29", "get", 256, 0x10)).replace(
    "PUT_DESCRIPTOR", dma_descriptor_asm("$4", "$29", "put", 256, 0x10))   # reply word 0x10
BLOCK_DOUBLES = 32
SCALE, OFFSET = 0.5, 0.1
# engine -> (CPEs per CG, iterations of CG k = base + step * k)
SIZES = {"c": (64, 40, 7), "python": (4, 3, 1)}


@pytest.fixture(scope="module")
def program():
    return swsim.assemble(PART)


def problem(num_cgs=4):
    """One array split into a slice of 64 blocks per CG."""
    return np.arange(num_cgs * 64 * BLOCK_DOUBLES, dtype=np.float64) / 7.0


def iterations(engine, cg):
    _, base, step = SIZES[engine]
    return base + step * cg


def expected(x, engine, num_cgs=4):
    """The kernel's arithmetic: v * 0.5 is exact, so the fused v * scale + offset rounds once,
    as numpy's two operations do."""
    cpes = SIZES[engine][0]
    out = x.copy().reshape(num_cgs, 64, BLOCK_DOUBLES)
    for cg in range(num_cgs):
        for _ in range(iterations(engine, cg)):
            out[cg, :cpes] = out[cg, :cpes] * SCALE + OFFSET
    return out.reshape(-1)


def launch(machine, program, address, cg, engine, spawn=True):
    """Spawn (or run) the part of CG ``cg`` on its slice."""
    call = machine.spawn if spawn else machine.run
    return call(program, entry="part", cg=cg, engine=engine, cpes=range(SIZES[engine][0]),
                args=[address + cg * 64 * BLOCK_DOUBLES * 8, iterations(engine, cg), SCALE,
                      OFFSET])


def comparable(result):
    data = result.to_dict()
    del data["engine"]
    return data


@pytest.mark.parametrize("engine", ["c", "python"])
def test_four_cgs_at_once_give_what_four_runs_one_after_another_give(program, engine):
    x = problem()
    chip, alone = Machine(), Machine()
    address = chip.mem.put(x)
    assert alone.mem.put(x) == address
    handles = [launch(chip, program, address, cg, engine) for cg in range(4)]
    assert chip.running == [0, 1, 2, 3]
    together = chip.join_all()
    assert chip.running == [] and sorted(together) == [0, 1, 2, 3]
    for cg, handle in enumerate(handles):
        single = launch(alone, program, address, cg, engine, spawn=False)
        assert together[cg].to_dict() == single.to_dict()
        assert together[cg].cg == cg and single.cg == cg
        for name in ("regs", "ldm"):
            np.testing.assert_array_equal(getattr(chip.last_jobs[cg], name),
                                          getattr(alone.last_jobs[cg], name))
        assert handle.job is chip.last_jobs[cg]
    memory = chip.mem.get(address, x.shape, x.dtype)
    np.testing.assert_array_equal(memory, alone.mem.get(address, x.shape, x.dtype))
    np.testing.assert_array_equal(memory, expected(x, engine))
    assert alone.last_job is alone.last_jobs[3]   # the most recent join


def test_both_engines_give_the_same_chip_run(program):
    # the Python engine's sizes on both engines: same memory, counters, cycles per CG
    x = problem()
    outcomes = []
    for engine in ("python", "c"):
        m = Machine()
        address = m.mem.put(x)
        for cg in range(4):
            m.spawn(program, entry="part", cg=cg, engine=engine, cpes=range(4),
                    args=[address + cg * 64 * BLOCK_DOUBLES * 8, iterations("python", cg),
                          SCALE, OFFSET])
        results = m.join_all()
        outcomes.append(({cg: comparable(r) for cg, r in results.items()},
                         m.mem.get(address, x.shape, x.dtype)))
    assert outcomes[0][0] == outcomes[1][0]
    np.testing.assert_array_equal(outcomes[0][1], outcomes[1][1])
    # the cycles differ from CG to CG as their iteration counts do
    cycles = [outcomes[0][0][cg]["kernel_cycles"] for cg in range(4)]
    assert cycles == sorted(cycles) and len(set(cycles)) == 4


# ---- wrong calls ----------------------------------------------------------------------------
@pytest.mark.parametrize("cg", [4, -1, "0", 1.0])
def test_a_cg_outside_the_chip_is_refused(program, cg):
    with pytest.raises(HostError, match=r"cg must be a core group number 0\.\.3"):
        Machine().spawn(program, entry="part", cg=cg, cpes=[0], args=[0, 1, 0.0, 0.0])


def test_a_busy_cg_a_second_join_and_growing_memory_are_refused(program):
    m = Machine()
    address = m.mem.put(problem())
    handle = launch(m, program, address, 1, "python")
    with pytest.raises(HostError, match="CG 1 is busy: a kernel spawned on it has not been "
                                        "joined"):
        launch(m, program, address, 1, "c")
    with pytest.raises(HostError, match="CG 1 is busy"):
        launch(m, program, address, 1, "c", spawn=False)
    for grow in (lambda: m.mem.put(np.zeros(4)), lambda: m.mem.alloc(8)):   # no room reserved
        with pytest.raises(HostError, match=r"main memory would have to move to hold \d+ bytes "
                                            r"\(capacity \d+\) while kernels run on it \(CG 1\): "
                                            r"reserve room before spawning"):
            grow()
    assert m.mem.get(address, (2,), np.float64).shape == (2,)   # reading is allowed
    assert "CG 1" in repr(handle)
    handle.join()
    assert "joined" in repr(handle) and m.running == []
    with pytest.raises(HostError, match="the run on CG 1 was already joined"):
        handle.join()
    m.mem.put(np.zeros(4))                                       # free to grow again
    assert m.join_all() == {}


def test_program_data_that_would_grow_memory_is_refused_while_cgs_run(program):
    m = Machine()                   # nothing allocated: the static data region is not in use
    handle = m.spawn(program, entry="part", cg=0, cpes=[0], engine="python",
                     args=[0, 1, 0.0, 0.0])
    with_data = swsim.assemble(".text\n.globl k\nk: halt\n.data\n.quad 7\n")
    with pytest.raises(HostError, match=r"would have to move .* while kernels run on it "
                                        r"\(CG 0\)"):
        m.spawn(with_data, entry="k", cg=1, cpes=[0], engine="python")
    assert m.running == [0]         # the refused spawn left nothing behind
    with pytest.raises(VMFault):    # x = 0 is not main memory
        handle.join()


# ---- memory while CGs run, and one CG of the chip as a machine -------------------------------
def test_room_reserved_ahead_is_allocated_while_cgs_run_and_the_buffer_never_moves(program):
    m = Machine()
    x = problem()
    address = m.mem.put(x[:64 * BLOCK_DOUBLES])                  # CG 0's slice only
    m.mem.reserve(3 * 64 * BLOCK_DOUBLES * 8)
    buffer = m.mem.view().__array_interface__["data"][0]
    capacity = m.mem.capacity
    first = launch(m, program, address, 0, "c")
    # while CG 0 runs: the other slices are put, right after the first, and run on CGs 1..3
    rest = [m.mem.put(x[k * 64 * BLOCK_DOUBLES:(k + 1) * 64 * BLOCK_DOUBLES])
            for k in range(1, 4)]
    assert rest == [address + k * 64 * BLOCK_DOUBLES * 8 for k in range(1, 4)]
    handles = [first] + [launch(m, program, address, k, "c") for k in range(1, 4)]
    assert m.running == [0, 1, 2, 3]
    with pytest.raises(HostError, match=r"would have to move to hold \d+ bytes \(capacity "
                                        rf"{capacity}\) while kernels run on it \(CG 0, 1, 2, "
                                        r"3\): reserve room before spawning \(mem.reserve"):
        m.mem.alloc(8)                                           # the room is used up
    with pytest.raises(HostError, match=r"reserve room .* or join first"):
        m.mem.reserve(1)                                         # reserving would move it too
    m.mem.reserve(0)                                             # no move needed: fine
    results = m.join_all(handles)
    assert sorted(results) == [0, 1, 2, 3]
    assert m.mem.view().__array_interface__["data"][0] == buffer and m.mem.capacity == capacity
    np.testing.assert_array_equal(m.mem.get(address, x.shape, x.dtype), expected(x, "c"))


def test_host_threads_allocate_at_once_without_overlapping():
    m = Machine()
    m.mem.reserve(1 << 20)
    grow = m.mem._grow

    def slow_grow(*args, **kwargs):        # the other threads run while one allocates
        time.sleep(0.001)
        return grow(*args, **kwargs)
    m.mem._grow = slow_grow

    def put_many(thread):
        return [(m.mem.put(np.full(n, thread * 1000 + n, np.int64)), n) for n in range(1, 30)]
    threads = [ThreadResult(put_many, k) for k in range(4)]
    placed = [pair for thread in threads for pair in thread.result()]
    spans = sorted((address, address + 8 * n) for address, n in placed)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    assert all(address % 128 == 0 for address, _ in placed)
    for k, thread in enumerate(threads):
        for address, n in thread.result():
            assert (m.mem.get(address, (n,), np.int64) == k * 1000 + n).all()


class ThreadResult:
    """``function(*args)`` on a host thread of its own; ``result()`` joins it."""

    def __init__(self, function, *args):
        self._out = {}
        self._thread = threading.Thread(
            target=lambda: self._out.update(value=function(*args)))
        self._thread.start()

    def result(self):
        self._thread.join()
        return self._out["value"]


def test_release_gives_back_zeroed_memory_and_forgets_the_arrays_put_there():
    m = Machine()
    kept = np.arange(4.0)
    m.mem.put(kept)
    mark = m.mem.mark()
    scratch = np.full(1000, 7.0)
    first = m.mem.put(scratch)
    m.mem.alloc(24)
    end, capacity = m.mem.end, m.mem.capacity
    handle = m.spawn(".text\n.globl k\nk: halt\n", entry="k", cg=2, cpes=[0])
    with pytest.raises(HostError, match=r"cannot release main memory while kernels run "
                                        r"\(CG 2\): join first"):
        m.mem.release(mark)
    handle.join()
    for bad in (mark + 128 * 100, mark - 128 * 10**6, mark + 1, "0", True):
        with pytest.raises(HostError, match="release expects a mark from mem.mark()"):
            m.mem.release(bad)
    assert m.mem.end == end                                      # the refusals changed nothing
    m.mem.release(mark)
    assert m.mem.mark() == mark and m.mem.end <= m.mem.base + mark
    assert m.mem.capacity == capacity                            # the room stays
    with pytest.raises(HostError, match="array not in memory"):
        m.mem.address_of(scratch)
    assert m.mem.address_of(kept) < m.mem.base + mark            # what came before stays
    again = m.mem.alloc(scratch.nbytes + 24)
    assert again == first                                        # the space is reused ...
    assert not m.mem.get(again, (scratch.nbytes + 24,), np.uint8).any()   # ... zeroed
    with pytest.raises(HostError, match=r"outside allocated main memory"):
        m.mem.get(again, (scratch.nbytes + 25 + 128,), np.uint8)  # and ends where it ends


def test_reserve_checks_its_argument_and_the_limit():
    m = Machine(mem_limit=32 << 20)
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(HostError, match=r"reserve expects a number of bytes"):
            m.mem.reserve(bad)
    with pytest.raises(HostError, match=r"main memory limit of 33554432 bytes"):
        m.mem.reserve(m.mem.available + 1)
    m.mem.reserve(m.mem.available)                               # all of it: lazily committed
    assert m.mem.capacity == 32 << 20 and m.mem.end == m.mem.base


def test_a_core_group_view_runs_on_its_cg_of_the_chip_and_shares_its_memory(program):
    m = Machine()
    x = problem()
    address = m.mem.put(x)
    view = m.core_group(2)
    assert view.num_cgs == 1 and m.num_cgs == 4
    assert view.mem is m.mem and view.config is m.config and "CoreGroup 2" in repr(view)
    other = launch(m, program, address, 3, "c")                  # the chip's CG 3 runs meanwhile
    handle = view.spawn(program, entry="part", engine="c", args=[
        address + 2 * 64 * BLOCK_DOUBLES * 8, iterations("c", 2), SCALE, OFFSET])
    assert handle.cg == 2 and view.running == [0] and m.running == [2, 3]
    with pytest.raises(HostError, match="CG 2 is busy"):
        view.run(program, entry="part", args=[address, 1, 0.0, 0.0])
    with pytest.raises(HostError, match="core group 2's join_all joins its own runs only"):
        view.join_all([other])
    joined = view.join_all()                                     # its own run only
    assert list(joined) == [0] and joined[0].cg == 2 and m.running == [3]
    assert view.join_all() == {} and view.running == []
    other.join()
    np.testing.assert_array_equal(m.mem.get(address, x.shape, x.dtype)[2 * 64 * BLOCK_DOUBLES:],
                                  expected(x, "c")[2 * 64 * BLOCK_DOUBLES:])
    for cg in (1, -1, "0", True):
        with pytest.raises(HostError, match=r"cg must be 0: this is core group 2 of the chip"):
            view.spawn(program, entry="part", cg=cg, args=[address, 1, 0.0, 0.0])
    with pytest.raises(HostError, match=r"cg must be a core group number 0\.\.3"):
        m.core_group(4)
    result = m.core_group(1).run(program, entry="part", cpes=[0], engine="python",
                                 args=[address + 64 * BLOCK_DOUBLES * 8, 1, SCALE, OFFSET])
    assert result.cg == 1 and m.last_job is m.last_jobs[1]


# ---- stops ----------------------------------------------------------------------------------
def test_a_fault_in_one_cg_is_reported_with_its_number_after_all_are_joined(program):
    m = Machine()
    x = problem()
    address = m.mem.put(x)
    launch(m, program, address, 0, "c")
    deadlock = m.spawn(".text\n.globl k\nk: getr $1\nhalt\n", entry="k", cg=3, cpes=[0, 1])
    m.spawn(".text\n.globl k\nk: ldl $1, 4($31)\nhalt\n", entry="k", cg=2, cpes=[5])
    with pytest.raises(VMFault) as info:
        m.join_all()
    fault = info.value
    assert fault.cg == 2 and fault.cpe == 5 and fault.stop.name == "misaligned"
    assert str(fault).startswith("CG 2, CPE 5, pc 0x10000000, cycle 0: ldl $1, 4($31)")
    assert m.running == []          # CG 0 and CG 3 were joined too
    np.testing.assert_array_equal(m.mem.get(address, (64 * BLOCK_DOUBLES,), np.float64),
                                  expected(x, "c")[:64 * BLOCK_DOUBLES])
    with pytest.raises(HostError, match="already joined"):
        deadlock.join()
    assert m.last_jobs[3] is deadlock.job
    # alone, the deadlocked CG reports itself
    with pytest.raises(Deadlock, match="^CG 3: deadlock") as info:
        m.run(".text\n.globl k\nk: getr $1\nhalt\n", entry="k", cg=3, cpes=[0, 1])
    assert info.value.cg == 3 and [b[0] for b in info.value.blocked] == [0, 1]


def test_an_engine_error_reaches_join_and_frees_the_cg(program, monkeypatch):
    from swsim.vm import cengine

    def broken(job, progress=None):
        raise MemoryError("out of host memory")

    monkeypatch.setattr(cengine, "run", broken)
    m = Machine()
    handle = m.spawn(program, entry="part", cg=2, cpes=[0], args=[0, 1, 0.0, 0.0])
    with pytest.raises(MemoryError, match="out of host memory"):
        handle.join()
    assert m.running == [] and handle.done()


# ---- the C core releases the GIL ------------------------------------------------------------
class _StampedCore:
    """cengine's ``lib`` with swsim_run / swsim_advance wrapped in (thread, start, end) stamps."""

    def __init__(self, lib, stamps):
        self._lib, self._stamps = lib, stamps

    def __getattr__(self, name):
        attribute = getattr(self._lib, name)
        if name not in ("swsim_run", "swsim_advance"):
            return attribute

        def stamped(*args):
            start = time.perf_counter()
            try:
                return attribute(*args)
            finally:
                self._stamps.append((threading.current_thread().name, start,
                                     time.perf_counter()))
        return stamped


@pytest.mark.parametrize("progress", [False, True])
def test_c_runs_of_two_cgs_overlap_in_time(program, monkeypatch, progress):
    # With a switch interval of minutes, the Python threads of two CGs hand the GIL over only
    # when one lets it go: if swsim_run / swsim_advance kept it, their calls could not overlap.
    from swsim.vm import cengine
    stamps = []
    monkeypatch.setattr(cengine, "lib", _StampedCore(cengine.lib, stamps))
    monkeypatch.setattr(cengine, "PROGRESS_CYCLES", 4096)
    m = Machine()
    address = m.mem.put(problem())
    interval = sys.getswitchinterval()
    sys.setswitchinterval(600)
    try:
        for cg in (0, 1):
            m.spawn(program, entry="part", cg=cg, args=[address + cg * 64 * 256, 4000, 0.5, 0.1],
                    progress=(lambda cycle: None) if progress else None)
        m.join_all()
    finally:
        sys.setswitchinterval(interval)
    calls = {name: [(s, e) for n, s, e in stamps if n == name] for name, _, _ in stamps}
    assert sorted(calls) == ["swsim-cg0", "swsim-cg1"]
    assert all(len(spans) > 1 for spans in calls.values()) == progress
    assert any(s0 < e1 and s1 < e0 for s0, e0 in calls["swsim-cg0"]
               for s1, e1 in calls["swsim-cg1"])
