"""The DMA STREAM pattern of the hardware check (docs/timing.md "DMA"): Copy and Triad through
PE-mode DMA on one CG, 64 CPEs, at the block sizes of the published hardware table, measured
on the emulator with ``kernels/bench/stream.s``.

Rate = STREAM bytes / time (Copy 16 bytes per element, Triad 24; MB = 10^6 bytes as STREAM
prints them). The time of a *round* (one block of every CPE) is the difference of two whole
runs of ``BLOCKS_SHORT`` and ``BLOCKS_LONG`` blocks per CPE divided by their difference, so
spawn and the first requests' start-up cancel out. What remains is the steady state, reached
after the first block: from then on the CG's DMA engine always has a ready request (a CPE's
next request is issued long before the engine has served the other 63 CPEs), so every round
costs exactly the engine time of its requests, however many rounds run (tests/test_stream.py
checks this against the engine time counted by hand).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....kernels import program
from ....vm import Machine
from ....vm.config import PUBLISHED

KERNEL = "bench/stream.s"
BUFS = (1, 16, 128, 1024)                      # doubles per DMA request: the published table
# Published hardware figures, MB/s (vm.config.PUBLISHED, MACHINE.md §6), by pattern and buf:
# the table's cells and the sizes held out of its fit (issue 28).
HARDWARE = {pattern: dict(sorted((int(key.rsplit("_", 1)[1]), published.value)
                                 for key, published in PUBLISHED.items()
                                 if key.startswith(f"dma_stream_{pattern}_")))
            for pattern in ("copy", "triad")}
STREAM_BYTES = {"copy": 16, "triad": 24}       # bytes STREAM counts per element
OFFSET_ELEMENTS = 10                           # arrays start 80 bytes past a 128-byte boundary
CPES = 64
MAX_BUF = 1024                                 # doubles per LDM block of the kernel
BLOCKS_SHORT, BLOCKS_LONG = 1, 3               # blocks per CPE of the two runs
SCALAR = 3.0                                   # Triad's scalar (b + 3 c is exact for small ints)


@dataclass
class Cell:
    pattern: str
    buf: int
    hardware: float    # MB/s
    measured: float    # MB/s

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.measured - self.hardware) / self.hardware


def run_blocks(pattern: str, buf: int, blocks: int, engine: str = "c", progress=None,
               preset: str = "sw26010") -> int:
    """Kernel cycles of `blocks` blocks per CPE of `pattern` on machine `preset`; checks the
    arrays it computed. ``progress(cycle)``: ``Machine.run``'s."""
    if pattern not in STREAM_BYTES:
        raise ValueError(f"unknown STREAM pattern {pattern!r}; expected 'copy' or 'triad'")
    if not (1 <= buf <= MAX_BUF and blocks >= 1):
        raise ValueError(f"need 1 <= buf <= {MAX_BUF} doubles and blocks >= 1, got buf={buf}, "
                         f"blocks={blocks}")
    m = Machine(preset)
    n = blocks * CPES * buf
    rng = np.random.default_rng(buf)
    values = [rng.integers(-1000, 1000, n).astype(np.float64) for _ in range(3)]
    arrays = [np.zeros(n + OFFSET_ELEMENTS) for _ in range(3)]
    for array, initial in zip(arrays, values):
        array[OFFSET_ELEMENTS:] = initial
    a, b, c = (m.mem.put(array) + 8 * OFFSET_ELEMENTS for array in arrays)
    block_step = CPES * buf * 8
    if pattern == "copy":
        args = [a, c, blocks, buf, block_step]
        expected, result_at = values[0], c
    else:
        args = [a, b, c, blocks, buf, block_step, SCALAR]
        expected, result_at = values[1] + SCALAR * values[2], a
    res = m.run(program(KERNEL), entry=f"stream_{pattern}", args=args, cpes=range(CPES),
                engine=engine, progress=progress)
    result = m.mem.get(result_at, (n,), np.float64)
    if not np.array_equal(result, expected):
        raise RuntimeError(f"STREAM {pattern} with buf={buf} computed wrong values on the "
                           f"{engine!r} engine")
    return res.kernel_cycles


def round_cycles(pattern: str, buf: int, engine: str = "c", progress=None,
                 preset: str = "sw26010") -> float:
    """Steady-state cycles of one round (a block of `buf` doubles on every CPE)."""
    short, long = (run_blocks(pattern, buf, blocks, engine, progress, preset)
                   for blocks in (BLOCKS_SHORT, BLOCKS_LONG))
    return (long - short) / (BLOCKS_LONG - BLOCKS_SHORT)


def rate(pattern: str, buf: int, cycles_per_round: float) -> float:
    """STREAM rate in MB/s of rounds of `buf`-double blocks taking `cycles_per_round`."""
    stream_bytes = CPES * buf * STREAM_BYTES[pattern]
    return stream_bytes / (cycles_per_round / Machine().config.clock_hz) / 1e6


def table(engine: str = "c", progress=None) -> list[Cell]:
    """The published table's cells (BUFS; bench fidelity measures the held-out sizes apart)."""
    return [Cell(pattern, buf, hardware,
                 rate(pattern, buf, round_cycles(pattern, buf, engine, progress)))
            for pattern, figures in HARDWARE.items() for buf, hardware in figures.items()
            if buf in BUFS]
