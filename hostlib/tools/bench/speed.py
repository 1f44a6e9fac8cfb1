"""`swsim bench speed`: simulated instructions per host second, one host thread.

Workloads, all on 64 CPEs and the C engine (kernels in ``kernels/bench/speed.s`` unless named):
(a) the GEMM inner loop: ``vmad_comm``, 16 vmads + a row broadcast per iteration,
software-pipelined, in step at 100% EE; (a') the same loop unpipelined, waiting for the
register-communication latency every iteration; (b) ``int_chain``, an unpipelined integer loop
(load, multiply, add, store, each waiting on the one before: mostly raw stalls); (c) a DMA-bound
streaming kernel whose CPEs spin on their reply word (``dma_stream`` in ``kernels/bench/fidelity.s``);
(d) ``rc_exchange``, register communication only (a row broadcast and 7 gets per iteration).
Then the Python reference engine and the C engine on a smaller case of (a), and their ratio.

``kernels()``: the library's real kernels through their host functions, one core group, the C
engine — swGEMM (a cube and a skinny shape), implicit and Winograd convolution at a Listing 5.1
size, the tensorized LSTM, batch norm, softmax; every launch of the call counted (instructions
and kernel cycles summed over its launches), host time of the whole call. ``launch()``: the host
time of one ``Machine.run`` of a ~1 k-cycle kernel on 64 CPEs (launch to result, the machine
and program reused), and ``lenet_step()``: the host time of one LeNet training step (batch 64,
4 core groups, steps after the first).

Each measurement is the median of `repeats` runs; simulated instructions are the issued
instructions of all CPEs (P0 + P1 valid). Rates are per host second of wall time and per host
second of the process' CPU time (``time.process_time``): on a shared host the second varies
far less from run to run (docs/vm.md, fourth round), so compare builds by it.
"""
from __future__ import annotations

import itertools
import statistics
import threading
import time
from dataclasses import dataclass

import numpy as np

from ....kernels import program
from ....vm import Machine
from ....vm.engine_api import CPE_COUNTERS


@dataclass
class SpeedRow:
    workload: str
    engine: str
    instructions: int
    cycles: int
    host_seconds: float
    cpu_seconds: float
    table: str = "loops"

    @property
    def mips(self) -> float:
        return self.instructions / self.host_seconds / 1e6

    @property
    def cpu_mips(self) -> float:
        return self.instructions / self.cpu_seconds / 1e6


def _timed(engine, repeats, prepare):
    """Median host wall and CPU time of `repeats` runs; prepare() -> (machine, program, entry,
    args, cpes)."""
    times, cpu_times, res = [], [], None
    for _ in range(repeats):
        m, prog, entry, args, cpes = prepare()
        start, cpu_start = time.perf_counter(), time.process_time()
        res = m.run(prog, entry=entry, args=args, cpes=range(cpes), engine=engine)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    instructions = issued(res)
    return (instructions, res.kernel_cycles, statistics.median(times),
            statistics.median(cpu_times))


def issued(result) -> int:
    """P0 + P1 issued instructions of every CPE of a RunResult."""
    return sum(s.p0_valid + s.p1_valid for s in result.cpe.values())


def speed_kernel(entry, iters):
    """A kernel of kernels/bench/speed.s on 64 CPEs with a0 = iterations."""
    return lambda: (Machine(), program("bench/speed.s"), entry, [iters], 64)


def dma_streaming(requests_per_cpe, request_bytes=16384):
    def prepare():
        m = Machine()
        cpe_step = request_bytes * requests_per_cpe
        src = m.mem.put(np.zeros(64 * cpe_step, np.uint8))
        out = m.mem.put(np.zeros(64, np.int64))
        return (m, program("bench/fidelity.s"), "dma_stream",
                [src, cpe_step, request_bytes, requests_per_cpe, request_bytes, 0, 0, out], 64)
    return prepare


# --scale: below MIN_SCALE the DMA workload would have no request left; MAX_SCALE keeps the
# C runs to minutes.
MIN_SCALE, MAX_SCALE = 1 / 16, 100


TABLES = ("loops", "kernels")
QUICK_SCALE = 1 / 8        # the micro-loops' scale under --quick


def run(repeats: int = 3, scale: float = 1.0, quick: bool = False,
        tables=TABLES) -> list[SpeedRow]:
    """The rows of `tables`: "loops" (the micro-loops at `scale`, or QUICK_SCALE if `quick`),
    "kernels" (the real kernels, one launch, a LeNet step: smaller cases if `quick`)."""
    if repeats < 1 or not MIN_SCALE <= scale <= MAX_SCALE:
        raise ValueError(f"bench speed needs repeats >= 1 and a scale {MIN_SCALE}..{MAX_SCALE}, "
                         f"got repeats={repeats} scale={scale}")
    unknown = set(tables) - set(TABLES)
    if unknown or not tables:
        raise ValueError(f"bench speed tables are {', '.join(TABLES)}, got {list(tables)}")
    rows = loops(repeats, QUICK_SCALE if quick else scale) if "loops" in tables else []
    if "kernels" in tables:
        rows += kernels(repeats, quick) + [launch(repeats), lenet_step(repeats)]
    return rows


def loops(repeats: int, scale: float) -> list[SpeedRow]:
    cases = [
        ("(a) GEMM inner loop: vmad + putr/getr", "c",
         speed_kernel("vmad_comm", int(40000 * scale))),
        ("(a') the same, unpipelined (rc waits)", "c",
         speed_kernel("vmad_comm_unpipelined", int(40000 * scale))),
        ("(b) unpipelined integer loop", "c", speed_kernel("int_chain", int(30000 * scale))),
        ("(c) DMA streaming + spin-wait", "c", dma_streaming(max(1, int(16 * scale)))),
        ("(d) rc-heavy: putr + 7 getr", "c", speed_kernel("rc_exchange", int(20000 * scale))),
        ("(a) small: 200 iterations", "python", speed_kernel("vmad_comm", 200)),
        ("(a) small: 200 iterations", "c", speed_kernel("vmad_comm", 200)),
    ]
    rows = []
    for name, engine, prepare in cases:
        rows.append(SpeedRow(name, engine, *_timed(engine, 1 if engine == "python" else repeats,
                                                   prepare)))
    return rows


def format_table(rows: list[SpeedRow]) -> str:
    lines = []
    for table, group in itertools.groupby(rows, key=lambda r: r.table):
        lines += [""] if lines else []
        lines.append(f"{table + ': workload':40} {'engine':7} {'sim. instr':>12} "
                     f"{'sim. cycles':>12} {'host s':>8} {'M instr/s':>10} {'M/CPU s':>10}")
        for r in group:
            lines.append(f"{r.workload:40} {r.engine:7} {r.instructions:12d} {r.cycles:12d} "
                         f"{r.host_seconds:8.4f} {r.mips:10.2f} {r.cpu_mips:10.2f}")
    small = {r.engine: r.mips for r in rows if r.workload.startswith("(a) small")}
    if "python" in small and "c" in small:
        lines.append(f"C / Python speed ratio on the small case: {small['c'] / small['python']:.0f}x")
    return "\n".join(lines)


class RecordedRuns:
    """Every later run or spawn on a machine (or its core groups: both go through
    ``Machine._spawn``), to count what a host function launched: ``results()`` are the
    RunResults of those joined so far. A joined run is kept as its RunResult only (its CgRun
    would keep the job's LDM from being reused, vm/ldm_pool.py, and slow the launches timed)."""

    def __init__(self, machine):
        self._results, self._pending = [], []
        self._lock = threading.Lock()   # the core groups' host threads spawn at once
        spawn = machine._spawn

        def recording(*args, **kwargs):
            handle = spawn(*args, **kwargs)
            with self._lock:
                self._settle()
                self._pending.append(handle)
            return handle
        machine._spawn = recording

    def _settle(self) -> None:
        joined = [handle for handle in self._pending if handle.result is not None]
        self._results += [handle.result for handle in joined]
        self._pending = [handle for handle in self._pending if handle.result is None]

    def results(self) -> list:
        with self._lock:
            self._settle()
            return list(self._results)

    def clear(self) -> None:
        with self._lock:
            self._results, self._pending = [], []


def _totals(runs: RecordedRuns) -> tuple:
    """(instructions, kernel cycles) summed over the joined runs."""
    results = runs.results()
    return sum(issued(r) for r in results), sum(r.kernel_cycles for r in results)


def _kernel_cases(quick: bool):
    """(name, call(machine)) of the kernels table; `quick` shrinks each case."""
    from ...blas.swgemm import gemm
    from ...dnn import batchnorm_forward, conv2d_forward, lstm_forward, softmax_cross_entropy
    rng = np.random.default_rng(0)

    def normal(*shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    cube = 256 if quick else 512
    skinny = (1024, 64, 256) if quick else (4096, 64, 512)         # M, N, K
    conv_batch = 1 if quick else 32                     # Listing 5.1: 64 -> 64 channels, 16 x 16
    lstm_shape = (4, 32, 64) if quick else (8, 64, 128)           # T, B, H
    bn_shape = (8, 32, 16, 16) if quick else (32, 64, 16, 16)
    softmax_shape = (64, 1000) if quick else (256, 1000)
    t, b, h = lstm_shape
    channels = bn_shape[1]
    cases = [
        (f"swGEMM {cube}^3 f64", lambda m, a=normal(cube, cube, dtype=np.float64),
         c=normal(cube, cube, dtype=np.float64): gemm(a, c, machine=m)),
        ("swGEMM skinny %dx%dx%d f32" % skinny,
         lambda m, a=normal(skinny[0], skinny[2]), c=normal(skinny[2], skinny[1]):
         gemm(a, c, machine=m)),
    ]
    x, w = normal(conv_batch, 64, 18, 18), normal(64, 64, 3, 3)
    for algo in ("implicit", "winograd"):
        cases.append((f"{algo} conv B={conv_batch} 64->64 16x16",
                      lambda m, algo=algo: conv2d_forward(x, w, algo=algo, machine=m)))
    cases += [
        ("tensorized LSTM T=%d B=%d H=%d" % lstm_shape,
         lambda m, x=normal(t, b, h), s=normal(b, h), W=normal(4 * h, h), R=normal(4 * h, h),
         bias=normal(4 * h): lstm_forward(x, s, s, W, R, bias, machine=m)),
        ("batch norm %dx%dx%dx%d training" % bn_shape,
         lambda m, x=normal(*bn_shape), g=normal(channels):
         batchnorm_forward(x, g, g, np.zeros(channels, np.float32),
                           np.ones(channels, np.float32), machine=m)),
        ("softmax + cross-entropy %dx%d" % softmax_shape,
         lambda m, x=normal(*softmax_shape),
         labels=rng.integers(0, softmax_shape[1], softmax_shape[0]):
         softmax_cross_entropy(x, labels, machine=m)),
    ]
    return cases


def kernels(repeats: int = 3, quick: bool = False) -> list[SpeedRow]:
    """The kernels table: per case, the median host and CPU time of the whole host call and
    the instructions and kernel cycles of all its launches."""
    rows = []
    for name, call in _kernel_cases(quick):
        times, cpu_times = [], []
        for _ in range(repeats):
            m = Machine()
            runs = RecordedRuns(m)
            start, cpu_start = time.perf_counter(), time.process_time()
            call(m)
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
        rows.append(SpeedRow(name, "c", *_totals(runs), statistics.median(times),
                             statistics.median(cpu_times), "kernels"))
    return rows


# The per-launch case: `vmad_comm` iterations giving a kernel of about 1 k cycles, and launches
# timed per repeat (the median of their per-launch times is reported).
LAUNCH_ITERATIONS, LAUNCHES = 60, 50


def launch(repeats: int = 3) -> SpeedRow:
    """Host time of one Machine.run of a ~1 k-cycle kernel on 64 CPEs, machine and program
    reused: median over `repeats` x LAUNCHES launches."""
    m, prog = Machine(), program("bench/speed.s")
    times, cpu_times = [], []
    for _ in range(repeats * LAUNCHES):
        start, cpu_start = time.perf_counter(), time.process_time()
        res = m.run(prog, entry="vmad_comm", args=[LAUNCH_ITERATIONS], engine="c")
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return SpeedRow(f"one launch: vmad_comm x{LAUNCH_ITERATIONS}, 64 CPEs", "c", issued(res),
                    res.kernel_cycles, statistics.median(times), statistics.median(cpu_times),
                    "kernels")


def lenet_step(repeats: int = 3) -> SpeedRow:
    """Host time of a LeNet training step (the shipped example, batch 64, 4 core groups):
    median of `repeats` steps after a first one (which sets the solver up)."""
    from ... import train
    solver = train.Solver(train.example("lenet"), train.example("lenet_solver"), cgs=4)
    runs = RecordedRuns(solver.chip)
    solver.step()
    times, cpu_times = [], []
    for _ in range(repeats):
        runs.clear()
        start, cpu_start = time.perf_counter(), time.process_time()
        solver.step()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return SpeedRow("LeNet training step, batch 64, 4 CGs", "c", *_totals(runs),
                    statistics.median(times), statistics.median(cpu_times), "kernels")
