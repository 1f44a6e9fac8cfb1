"""`swsim bench speed`: simulated instructions per host second, one host thread.

Workloads, all on 64 CPEs and the C engine (kernels in ``kernels/bench/speed.s`` unless named):
(a) the GEMM inner loop: ``vmad_comm``, 16 vmads + a row broadcast per iteration,
software-pipelined, in step at 100% EE; (a') the same loop unpipelined, waiting for the
register-communication latency every iteration; (b) ``int_chain``, an unpipelined integer loop
(load, multiply, add, store, each waiting on the one before: mostly raw stalls); (c) a DMA-bound
streaming kernel whose CPEs spin on their reply word (``dma_stream`` in ``kernels/bench/fidelity.s``);
(d) ``rc_exchange``, register communication only (a row broadcast and 7 gets per iteration).
Then the Python reference engine and the C engine on a smaller case of (a), and their ratio.
Each measurement is the median of `repeats` runs; simulated instructions are the issued
instructions of all CPEs (P0 + P1 valid). Rates are per host second of wall time and per host
second of the process' CPU time (``time.process_time``): on a shared host the second varies
far less from run to run (docs/vm.md, fourth round), so compare builds by it.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from ....kernels import program
from ....vm import Machine


@dataclass
class SpeedRow:
    workload: str
    engine: str
    instructions: int
    cycles: int
    host_seconds: float
    cpu_seconds: float

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
    instructions = sum(res.cpe[i].p0_valid + res.cpe[i].p1_valid for i in range(cpes))
    return (instructions, res.kernel_cycles, statistics.median(times),
            statistics.median(cpu_times))


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


def run(repeats: int = 3, scale: float = 1.0) -> list[SpeedRow]:
    if repeats < 1 or not MIN_SCALE <= scale <= MAX_SCALE:
        raise ValueError(f"bench speed needs repeats >= 1 and a scale {MIN_SCALE}..{MAX_SCALE}, "
                         f"got repeats={repeats} scale={scale}")
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
    lines = [f"{'workload':40} {'engine':7} {'sim. instr':>12} {'sim. cycles':>12} "
             f"{'host s':>8} {'M instr/s':>10} {'M/CPU s':>10}"]
    for r in rows:
        lines.append(f"{r.workload:40} {r.engine:7} {r.instructions:12d} {r.cycles:12d} "
                     f"{r.host_seconds:8.3f} {r.mips:10.2f} {r.cpu_mips:10.2f}")
    small = {r.engine: r.mips for r in rows if r.workload.startswith("(a) small")}
    if "python" in small and "c" in small:
        lines.append(f"C / Python speed ratio on the small case: {small['c'] / small['python']:.0f}x")
    return "\n".join(lines)
