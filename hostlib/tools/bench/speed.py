"""`swsim bench speed`: simulated instructions per host second, one host thread.

Workloads: (a) 64 CPEs running a register-communicating vmad loop (``vmad_comm`` in
``kernels/bench/speed.s``: in step at 100% EE, as a GEMM inner loop), also in its unpipelined form
that waits for the communication latency every iteration (36% of the cycles stalled, which the
engine steps more cheaply than issuing ones), and (b) a DMA-bound streaming kernel whose CPEs spin on their reply word (``dma_stream`` in
``kernels/bench/fidelity.s``), on the C engine; then the Python reference engine and the C engine on
the same smaller case of (a), and their ratio. Each measurement is the median of `repeats`
runs; simulated instructions are the issued instructions of all CPEs (P0 + P1 valid).
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

    @property
    def mips(self) -> float:
        return self.instructions / self.host_seconds / 1e6


def _timed(engine, repeats, prepare):
    """Median host time of `repeats` runs; prepare() -> (machine, program, entry, args, cpes)."""
    times, res = [], None
    for _ in range(repeats):
        m, prog, entry, args, cpes = prepare()
        start = time.perf_counter()
        res = m.run(prog, entry=entry, args=args, cpes=range(cpes), engine=engine)
        times.append(time.perf_counter() - start)
    instructions = sum(res.cpe[i].p0_valid + res.cpe[i].p1_valid for i in range(cpes))
    return instructions, res.kernel_cycles, statistics.median(times)


def vmad_comm(iters, entry="vmad_comm"):
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
        ("(a) 64 CPEs, vmad + putr/getr loop", "c", vmad_comm(int(40000 * scale))),
        ("(a) unpipelined: stalls on rc latency", "c",
         vmad_comm(int(40000 * scale), "vmad_comm_unpipelined")),
        ("(b) 64 CPEs, DMA streaming + spin-wait", "c", dma_streaming(int(16 * scale))),
        ("(a) small: 64 CPEs, 200 iterations", "python", vmad_comm(200)),
        ("(a) small: 64 CPEs, 200 iterations", "c", vmad_comm(200)),
    ]
    rows = []
    for name, engine, prepare in cases:
        rows.append(SpeedRow(name, engine, *_timed(engine, 1 if engine == "python" else repeats,
                                                   prepare)))
    return rows


def format_table(rows: list[SpeedRow]) -> str:
    lines = [f"{'workload':40} {'engine':7} {'sim. instr':>12} {'sim. cycles':>12} "
             f"{'host s':>8} {'M instr/s':>10}"]
    for r in rows:
        lines.append(f"{r.workload:40} {r.engine:7} {r.instructions:12d} {r.cycles:12d} "
                     f"{r.host_seconds:8.3f} {r.mips:10.2f}")
    small = {r.engine: r.mips for r in rows if r.workload.startswith("(a) small")}
    if "python" in small and "c" in small:
        lines.append(f"C / Python speed ratio on the small case: {small['c'] / small['python']:.0f}x")
    return "\n".join(lines)
