"""The host side of a launch, made cheap (issue 29): Machine.run simulates on the calling
thread (and Kernel.launch_cgs its last CG), a RunResult makes each CPE's statistics when first read, VMConfig reads by name."""
import pickle
import threading

import numpy as np
import pytest

from swsim.kernels import program
from swsim.vm import Machine
from swsim.vm.config import VMConfig
from swsim.vm.results import CpeStats


def test_run_simulates_on_the_calling_thread_and_spawn_on_its_own():
    """Also a core group's view: its run on the caller's thread."""
    m, prog = Machine(), program("bench/speed.s")
    threads = []
    progress = lambda cycle: threads.append(threading.current_thread())   # noqa: E731
    m.run(prog, entry="int_chain", args=[20000], cpes=range(2), progress=progress)
    assert threads and set(threads) == {threading.current_thread()}
    threads.clear()
    m.core_group(2).run(prog, entry="int_chain", args=[20000], cpes=range(2), progress=progress)
    assert threads and set(threads) == {threading.current_thread()}
    threads.clear()
    m.spawn(prog, entry="int_chain", args=[20000], cpes=range(2), progress=progress).join()
    assert threads and threading.current_thread() not in threads
    threads.clear()
    handle = m.spawn(prog, entry="int_chain", args=[20000], cpes=range(2), progress=progress,
                     here=True)
    assert handle.done() and set(threads) == {threading.current_thread()}
    assert handle.join().kernel_cycles == m.run(prog, entry="int_chain", args=[20000],
                                                cpes=range(2)).kernel_cycles


def test_launch_cgs_runs_its_last_cg_on_the_calling_thread(monkeypatch):
    """Several CGs (an element-wise add on 3): the others on threads of their own, all
    joined, the result numpy's; one CG: no thread at all."""
    from swsim.hostlib import dnn
    m = Machine()
    x, y = np.arange(4096, dtype=np.float32), np.ones(4096, dtype=np.float32)
    started = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start",
                        lambda self: (started.append(self.name), start(self))[1])
    out, stats = dnn.add(x, y, alpha=2.0, beta=1.0, machine=m, cgs=3)
    assert started == ["swsim-cg0", "swsim-cg1"] and m.running == []
    np.testing.assert_array_equal(out, 2 * x + y)
    assert len(stats.details["runs"]) == 3
    started.clear()
    out, _ = dnn.add(x, y, alpha=2.0, beta=1.0, machine=m.core_group(3))
    assert started == [] and m.running == []
    np.testing.assert_array_equal(out, 2 * x + y)


def test_an_error_of_the_engine_on_the_calling_thread_leaves_the_cg_free(monkeypatch):
    from swsim.vm import cengine
    m, prog = Machine(), program("bench/speed.s")

    def broken(job, progress=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(cengine, "run", broken)
    with pytest.raises(KeyboardInterrupt):
        m.run(prog, entry="vmad_comm", args=[1])
    assert m.running == []


def test_cpe_statistics_are_those_of_the_counters():
    m, prog = Machine(), program("bench/speed.s")
    spawned = [3, 0, 17, 63]
    res = m.run(prog, entry="int_chain", args=[5], cpes=spawned)
    eager = {i: CpeStats.from_counters(i, m.config.mesh_cols, int(res.cpe._pcs[i]),
                                       [int(v) for v in res.cpe._counters[i]])
             for i in sorted(spawned)}
    assert list(res.cpe) == sorted(spawned) and len(res.cpe) == 4
    assert res.cpe == eager and dict(res.cpe.items()) == eager
    assert res.cpe[17] is res.cpe[17] and res.cpe[17].p0_valid > 0
    assert 5 not in res.cpe
    with pytest.raises(KeyError):
        res.cpe[5]
    assert pickle.loads(pickle.dumps(res)).cpe == eager


def test_config_reads_by_name_after_replace_and_pickling():
    config = VMConfig.preset()
    assert config.ldm_bytes == 64 * 1024
    changed = config.replace(ldm_bytes=32 * 1024)
    assert changed.ldm_bytes == 32 * 1024 and config.ldm_bytes == 64 * 1024
    again = pickle.loads(pickle.dumps(changed))
    assert again == changed and hash(again) == hash(changed) and again.ldm_bytes == 32 * 1024
    with pytest.raises(AttributeError):
        config.no_such_parameter
    assert np.isfinite(config.peak_gflops_cg)
