"""`swsim bench fidelity`: measure every row of MACHINE.md §11 with the micro-benchmark kernels in
``kernels/bench/fidelity.s``, the DMA STREAM pattern (``stream.py``), the GEMM inner loop of
``kernels/gemm/gemm_kloop.s`` and the LDM GEMM primitive (``kernels/gemm/gemm_prim.s``), and
print each next to its published value (``vm.config.PUBLISHED``). tests/test_fidelity.py holds
the targets to tolerances.

Rates are measured as differences of two run lengths (n2 - n1 repetitions), so start-up costs
(spawn, the first DMA, pipeline fill) cancel out; bytes are counted from what each kernel is known
to move, not taken from the emulator's own counters.

Every row runs on the default preset, whose DMA and launch model is fitted to the hardware
recordings (issue 28: strided and broadcast DMA, launch, STREAM sizes held out of the table's
fit). Strided DMA against thesis eq. 3-2 is reported on it (the recordings' per-block costs
supersede the equation) and shown beside on ``sw26010-stream`` (``STREAM_PRESET``), the
pre-issue-28 calibration, which follows the equation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ....kernels import program
from ....vm import Machine
from ....vm.config import PUBLISHED
from ....vm.engine_defs import DMA_FIELDS, DMA_MODES, DMA_OPS
from ...blas.primitive import ldm_gemm
from . import stream


CTRL_LOW = 32                 # the descriptor's DESC_CTRL word holds bits 32..63
DEFAULT_PRESET, STREAM_PRESET = "sw26010", "sw26010-stream"


@dataclass
class Row:
    key: str                  # the PUBLISHED entry (or the model) it is compared with
    quantity: str
    published: Optional[float]
    measured: float
    unit: str
    note: str = ""
    preset: str = DEFAULT_PRESET  # the machine preset it was measured on

    @property
    def error_pct(self) -> Optional[float]:
        if not self.published:
            return None
        return 100.0 * (self.measured - self.published) / self.published


def _run(engine, name, entry, args, cpes, machine=None, progress=None):
    m = machine or Machine()
    res = m.run(program(name), entry=entry, args=args, cpes=range(cpes), engine=engine,
                progress=progress)
    return m, res


def rc_latency(engine, progress=None):
    m = Machine()
    out = m.mem.put(np.zeros(2, np.int64))
    _run(engine, "bench/fidelity.s", "rc_latency", [out], 2, machine=m, progress=progress)
    put_stamp, get_stamp = m.mem.get(out, (2,), np.int64)
    # putr issues one cycle after its rtc, getr one cycle before the rtc that follows it
    return [Row("rc_latency", "register communication latency (putr -> getr)",
                PUBLISHED["rc_latency"].value, float((get_stamp - 1) - (put_stamp + 1)),
                "cycles")]


def rc_bandwidth(engine, progress=None):
    clock = Machine().config.clock_hz
    rows = []
    for entry, key, transfers_per_iter, label in [
            ("rc_p2p", "rc_p2p_bandwidth", 64 * 16, "point-to-point (CPE pairs exchange, puts "
                                                    "and gets alternate)"),
            ("rc_bcast", "rc_bcast_bandwidth", 8 * 7 * 16, "broadcast (one row sender, 7 "
                                                           "receivers per row)")]:
        cycles = [_run(engine, "bench/fidelity.s", entry, [n], 64,
                       progress=progress)[1].kernel_cycles for n in (4, 12)]
        bytes_moved = transfers_per_iter * 32 * (12 - 4)
        per_cg = bytes_moved / ((cycles[1] - cycles[0]) / clock) / 1e9
        rows.append(Row(key, f"register communication bandwidth per CG, {label}",
                        PUBLISHED[key].value, per_cg, "GB/s",
                        f"reported, not a target; x4 CGs = {4 * per_cg:.0f} GB/s. Bytes "
                        "delivered into receive queues; every put and get needs the one P1 "
                        "slot of its CPE per cycle, which caps this below the published "
                        "aggregate"))
    return rows


def _dma_stream(engine, cpes, request_bytes, requests, block=0, stride=0, progress=None,
                op="get", mode="pe", mask=0, offset=0, preset=DEFAULT_PRESET):
    """Cycles (per CPE) of `requests` `op`s of `request_bytes` each in `mode` (broadcast
    `mask`), blocks/stride as given, from memory `offset` bytes past a line boundary, on
    machine `preset`."""
    m = Machine(preset)
    per_request = request_bytes if block == 0 else request_bytes // block * (block + stride)
    cpe_step = per_request * requests
    src = m.mem.put(np.zeros(cpe_step * cpes + offset, np.uint8)) + offset
    out = m.mem.put(np.zeros(cpes, np.int64))
    ctrl = (DMA_OPS[op] << DMA_FIELDS["op"][0] - CTRL_LOW
            | DMA_MODES[mode] << DMA_FIELDS["mode"][0] - CTRL_LOW)
    m.run(program("bench/fidelity.s"), entry="dma_stream",
          args=[src, cpe_step, request_bytes, requests, per_request, block, stride, out, ctrl,
                mask],
          cpes=range(cpes), engine=engine, progress=progress)
    return m.mem.get(out, (cpes,), np.int64), m.config


def dma_bandwidth(engine, progress=None):
    cycles, config = _dma_stream(engine, 64, 16384, 4, progress=progress)
    total = 64 * 16384 * 4
    return [Row("dma_bandwidth", "DMA bandwidth per CG, 64 CPEs, 16 KiB aligned contiguous gets",
                PUBLISHED["dma_bandwidth"].value, total / (cycles.max() / config.clock_hz) / 1e9,
                "GB/s")]


def dma_latency(engine, progress=None):
    sizes = np.array([128, 512, 1024, 2048, 4096])
    cycles = np.array([_dma_stream(engine, 1, int(s), 1, progress=progress)[0][0]
                       for s in sizes], float)
    slope, intercept = np.polyfit(sizes / 128, cycles, 1)
    return [Row("dma_latency", "DMA start-up latency (intercept of time vs size, incl. reply "
                "polling)", PUBLISHED["dma_latency"].value, float(intercept), "cycles",
                f"slope {slope:.2f} cycles per 128-B transaction")]


def strided_model_cycles(config, block, stride, total, cpes):
    """Thesis eq. 3-2: T = T_latency + sum(block + waste) / (PEAK_BW / #CPE), with the
    published PEAK_BW."""
    peak_bytes_per_cycle = PUBLISHED["dma_bandwidth"].value * 1e9 / config.clock_hz
    seg = config.dma_transaction_bytes
    moved, address = 0, 0
    for _ in range(total // block):
        first, last = address // seg, (address + block - 1) // seg
        moved += (last - first + 1) * seg
        address += block + stride
    return config.dma_latency + moved / (peak_bytes_per_cycle / cpes)


def dma_strided(engine, progress=None):
    """Strided gets against eq. 3-2: reported on the default, and on STREAM_PRESET beside it."""
    rows = []
    total = 8192
    for preset, key in ((DEFAULT_PRESET, "dma_strided"), (STREAM_PRESET, "dma_strided_eq")):
        for block in (32, 64, 128, 256, 512, 1024, 2048):
            cycles, config = _dma_stream(engine, 64, total, 1, block=block, stride=block,
                                         progress=progress, preset=preset)
            measured = 64 * total / (cycles.max() / config.clock_hz) / 1e9
            model = 64 * total / (strided_model_cycles(config, block, block, total, 64)
                                  / config.clock_hz) / 1e9
            rows.append(Row(key, f"strided DMA bandwidth, block {block} B, stride {block} B "
                            f"(vs eq. 3-2)", model, measured, "GB/s", preset=preset))
    return rows


STRIDED_BLOCKS = (4, 12)          # blocks per request of the two runs
STRIDES = (1, 3, 16)              # stride in blocks; every cell's blocks start 80 B into a line


def strided_block_cycles(engine, op, block, progress=None):
    """Engine cycles per block of strided PE-mode `op`s: 64 CPEs each issue one request of
    STRIDED_BLOCKS blocks; the engine never idles, so the difference of two run lengths over
    the blocks added is its time per block. Mean over STRIDES."""
    per_block = []
    for stride in STRIDES:
        short, long = (_dma_stream(engine, 64, block * n, 1, block=block,
                                   stride=block * stride, op=op, offset=80,
                                   progress=progress)[0].max() for n in STRIDED_BLOCKS)
        per_block.append((long - short) / (64 * (STRIDED_BLOCKS[1] - STRIDED_BLOCKS[0])))
    return float(np.mean(per_block))


def dma_strided_blocks(engine, progress=None):
    return [Row(f"dma_block_{op}_{block}", f"strided PE-mode {op}, engine cycles per "
                f"{block}-byte block (hardware recordings)", PUBLISHED[f"dma_block_{op}_{block}"]
                .value, strided_block_cycles(engine, op, block, progress), "cycles",
                f"64 CPEs, strides {'/'.join(map(str, STRIDES))} blocks, blocks 80 B into a line")
            for op in ("get", "put") for block in (8, 1024)]


def dma_broadcast(engine, progress=None):
    """One CPE's BCAST get (to row 0) alone: cycles vs lines, fitted to a + b * lines."""
    lines = np.array([4, 16, 32, 64])
    cycles = np.array([_dma_stream(engine, 1, int(n) * 128, 1, op="get", mode="bcast", mask=1,
                                   progress=progress)[0][0] for n in lines], float)
    slope, intercept = np.polyfit(lines, cycles, 1)
    with_blocks = _dma_stream(engine, 1, 64 * 128, 1, block=64, op="get", mode="bcast",
                              mask=1, progress=progress)[0][0]
    return [Row("dma_bcast_line", "broadcast get, engine cycles per 128-B line",
                PUBLISHED["dma_bcast_line"].value, float(slope), "cycles"),
            Row("dma_bcast_start", "broadcast get, start-up per request (incl. reply polling)",
                PUBLISHED["dma_bcast_start"].value, float(intercept), "cycles",
                f"the same 64-line get with 64-byte blocks and no stride takes "
                f"{with_blocks / cycles[-1]:.2f}x as long (hardware: no extra cost)")]


def launch(engine, progress=None):
    """Spawn to join of an empty 64-CPE kernel."""
    m = Machine()
    res = m.run(program("bench/fidelity.s"), entry="empty", cpes=range(64), engine=engine,
                progress=progress)
    return [Row("launch", "launch: spawn to join of an empty 64-CPE kernel",
                PUBLISHED["launch"].value, float(res.cycles), "cycles",
                f"spawn_cycles {m.config.spawn_cycles} + {res.kernel_cycles} kernel cycles")]


def cpe_printf(engine, progress=None):
    """One CPE's printf through the athread runtime: the whole hello example on one CPE."""
    m = Machine()
    res = m.run(program("examples/hello_athread.s"), entry="hello", args=[m.mem.alloc(8)],
                cpes=[0], engine=engine, progress=progress)
    return [Row("cpe_printf", "CPE printf: kernels/examples/hello_athread.s on one CPE",
                PUBLISHED["cpe_printf"].value, float(res.kernel_cycles), "cycles",
                f"console_call_cycles {m.config.console_call_cycles} + the runtime's "
                "instructions (a 47-character format, four values)")]


def dma_stream_held_out(engine, progress=None):
    """The STREAM sizes held out of the published table's fit (issue 28)."""
    rows = []
    for key, published in PUBLISHED.items():
        pattern, _, buf = key.removeprefix("dma_stream_").partition("_")
        if not key.startswith("dma_stream_") or int(buf) in stream.BUFS:
            continue
        measured = stream.rate(pattern, int(buf), stream.round_cycles(
            pattern, int(buf), engine, progress))
        rows.append(Row(key, f"DMA STREAM {pattern.capitalize()}, blocks of {buf} doubles "
                        f"(hardware, 64 CPEs, held out)", published.value, measured, "MB/s"))
    return rows


def dma_stream_pattern(engine, progress=None):
    return [Row(f"dma_stream_{c.pattern}_{c.buf}", f"DMA STREAM {c.pattern.capitalize()}, "
                f"blocks of {c.buf} doubles (hardware, 64 CPEs)", c.hardware, c.measured,
                "MB/s") for c in stream.table(engine, progress)]


def global_access(engine, progress=None):
    rows = []
    for with_store, key, label in [(0, "gld_latency", "gld latency"),
                                   (1, "gld_gst_latency", "gld + gst latency")]:
        spans = []
        for loads in (8, 40):
            m = Machine()
            cell = m.mem.put(np.zeros(4, np.int64))
            out = m.mem.put(np.zeros(1, np.int64))
            _run(engine, "bench/fidelity.s", "gld_chain", [cell, loads, with_store, out], 1,
                 machine=m, progress=progress)
            spans.append(int(m.mem.get(out, (1,), np.int64)[0]))
        rows.append(Row(key, label, PUBLISHED[key].value, (spans[1] - spans[0]) / 32,
                        "cycles"))
    m = Machine()
    cycles = []
    for loads in (20, 60):
        src = m.mem.put(np.zeros(64 * 4, np.float64))
        cycles.append(_run(engine, "bench/fidelity.s", "gld_stream", [src, loads], 64,
                           machine=m, progress=progress)[1].kernel_cycles)
    bandwidth = 64 * 32 * 40 / ((cycles[1] - cycles[0]) / m.config.clock_hz) / 1e9
    rows.append(Row("gld_bandwidth", "gld bandwidth per CG (64 CPEs, 32-byte loads)",
                    PUBLISHED["gld_bandwidth"].value, bandwidth, "GB/s",
                    "published: ~3 GB/s"))
    return rows


def barrier(engine, progress=None):
    cycles = [_run(engine, "bench/fidelity.s", "barriers", [n], 64,
                   progress=progress)[1].kernel_cycles for n in (4, 20)]
    return [Row("barrier", "barrier (synr / sync, all 64 CPEs)", PUBLISHED["barrier"].value,
                (cycles[1] - cycles[0]) / (32 * 16),
                "cycles", "published: at least 14")]


def gemm_inner_loop(engine, progress=None):
    per_iter = []
    for k in (16, 48):
        m = Machine()
        a = m.mem.put(np.zeros((8, k + 1, 16)))
        b = m.mem.put(np.zeros((8, k + 1, 4)))
        out = m.mem.put(np.zeros((64, 80)))
        _run(engine, "gemm/gemm_kloop.s", "gemm_kloop", [k, a, b, out], 64, machine=m,
             progress=progress)
        per_iter.append(m.mem.get(out, (64, 80), np.int64)[:, 64])
    slowest = float(np.max((per_iter[1] - per_iter[0]) / 32))
    return [Row("gemm_inner_loop", "GEMM inner loop, 16 vmad, all four roles (slowest CPE)",
                PUBLISHED["gemm_inner_loop"].value, slowest,
                "cycles/iteration", "EE = 16 / this")]


def gemm_primitive(engine, progress=None):
    # The best block shape of the primitive's sweep (docs/gemm.md): 16 x 4 x 384 per CPE.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8 * 16, 8 * 384)), rng.standard_normal((8 * 384, 8 * 4))
    _, stats = ldm_gemm(a, b, layout="nm", engine=engine, progress=progress)
    return [Row("gemm_primitive_best", "LDM GEMM primitive, best case (blocks 16 x 4 x 384 per "
                "CPE, double)", PUBLISHED["gemm_primitive_best"].value, stats.gflops, "GFLOPS",
                f"{100 * stats.efficiency:.1f}% of the "
                f"{stats.peak_gflops:.1f} GFLOPS CG peak; thesis 97.3%")]


MEASUREMENTS: list[Callable] = [rc_latency, rc_bandwidth, dma_bandwidth, dma_latency,
                                dma_strided, dma_strided_blocks, dma_broadcast, launch, cpe_printf,
                                dma_stream_pattern, dma_stream_held_out, global_access, barrier, gemm_inner_loop,
                                gemm_primitive]
# --quick skips these: each takes 0.3 s or more of the about 2.7 s of a whole run (C engine)
SLOW = (dma_strided_blocks, dma_stream_pattern, dma_stream_held_out, gemm_primitive)
QUICK_MEASUREMENTS: list[Callable] = [m for m in MEASUREMENTS if m not in SLOW]


def run(engine: str = "c", progress: Optional[Callable] = None,
        quick: bool = False) -> list[Row]:
    """Every measurement (QUICK_MEASUREMENTS if `quick`); ``progress(name)`` is told each one's
    name as it starts, and ``progress(cycle)`` the cycle its simulations reach
    (``Machine.run``'s callback)."""
    rows: list[Row] = []
    for measure in QUICK_MEASUREMENTS if quick else MEASUREMENTS:
        if progress is not None:
            progress(measure.__name__)
        rows.extend(measure(engine, progress))
    return rows


def format_table(rows: list[Row]) -> str:
    header = ("quantity", "published", "swsim", "unit", "error %")
    body = [(r.quantity + ("" if r.preset == DEFAULT_PRESET else f" [{r.preset}]"),
             "-" if r.published is None else f"{r.published:.6g}",
             f"{r.measured:.0f}" if abs(r.measured) >= 1000 else f"{r.measured:.4g}", r.unit,
             "-" if r.error_pct is None else f"{r.error_pct:+.1f}") for r in rows]
    widths = [max(len(str(x[i])) for x in [header, *body]) for i in range(5)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in body]
    notes = [f"- {r.quantity}: {r.note}" for r in rows if r.note]
    if any(r.preset == STREAM_PRESET for r in rows):
        notes.append(f"Rows marked [{STREAM_PRESET}] run on the pre-issue-28 calibration (DMA "
                     f"fitted to the contiguous STREAM table alone); the rest on the default "
                     f"{DEFAULT_PRESET} (DMA and launch fitted to the hardware recordings).")
    return "\n".join(lines + ([""] + notes if notes else []))
