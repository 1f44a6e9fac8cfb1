"""A report on a finished run: issue efficiency, idle cycles by reason, DMA traffic and waste,
the thesis' RBW/MBW for memory -> LDM (eq. 3-5), achieved GFLOPS and a roofline plot
(docs/analysis.md).

The flops are the floating-point operations the VM counted (``CpeStats.float_ops``,
docs/semantics.md ``rcsr``) unless the caller passes ``flops`` (the work it means, e.g. 2MNK
for a GEMM whose padding the VM also computes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ...vm.engine_api import STALL_REASONS
from ...vm.results import RunResult


@dataclass
class Report:
    result: RunResult
    flops: Optional[float] = None       # given by the caller (default: counted)

    # -- time ----------------------------------------------------------------------------------
    @property
    def config(self):
        return self.result.config

    @property
    def kernel_seconds(self) -> float:
        """Kernel time, spawn/join not included (it is the same for every kernel)."""
        return self.result.kernel_cycles / self.config.clock_hz

    # -- issue ---------------------------------------------------------------------------------
    def idle_cycles(self, pipe: int) -> dict:
        """Reason -> idle cycles of one pipe, summed over the CPEs."""
        return {reason: sum((s.p0_idle if pipe == 0 else s.p1_idle)[reason]
                            for s in self.result.cpe.values()) for reason in STALL_REASONS}

    def valid_cycles(self, pipe: int) -> int:
        return sum(s.p1_valid if pipe else s.p0_valid for s in self.result.cpe.values())

    @property
    def pipe_cycles(self) -> int:
        """Cycles charged to each pipe, over the CPEs (every one is valid or idle)."""
        return self.result.kernel_cycles * len(self.result.cpe)

    # -- memory -> LDM (eq. 3-5) ---------------------------------------------------------------
    @property
    def dma_bytes_per_second(self) -> float:
        """The CG's DMA bandwidth: one transaction per ``dma_transaction_cycles``."""
        config = self.config
        return config.dma_transaction_bytes / config.dma_transaction_cycles * config.clock_hz

    @property
    def dma_waste_bytes(self) -> int:
        """Bytes moved beyond those asked: the unused part of 128-byte transactions."""
        counters = self.result.counters
        return counters["dma_bytes_moved"] - counters["dma_bytes_requested"]

    @property
    def t_dma_seconds(self) -> float:
        """T_DMA: the bytes moved at the DMA bandwidth (the engine is shared by the CG)."""
        return self.result.counters["dma_bytes_moved"] / self.dma_bytes_per_second

    @property
    def compute_cycles(self) -> int:
        """#P0_cycle of the busiest CPE (= its #P1_cycle: both pipes are charged every cycle
        up to its halt). Waits for DMA are inside: spinning on a reply word issues."""
        return max((s.active_cycles for s in self.result.cpe.values()), default=0)

    @property
    def rbw_mbw_memory(self) -> float:
        """Thesis eq. 3-5: RBW/MBW for memory -> LDM = T_DMA / T_compute."""
        t_compute = self.compute_cycles / self.config.clock_hz
        return self.t_dma_seconds / t_compute if t_compute else 0.0

    # -- flops ---------------------------------------------------------------------------------
    @property
    def counted_flops(self) -> int:
        """The floating-point operations the CPEs issued (the VM's float_ops counters)."""
        return sum(s.float_ops for s in self.result.cpe.values())

    @property
    def effective_flops(self) -> float:
        return self.flops if self.flops is not None else self.counted_flops

    @property
    def gflops(self) -> float:
        return self.effective_flops / self.kernel_seconds / 1e9 if self.kernel_seconds else 0.0

    @property
    def peak_gflops(self) -> float:
        return self.config.peak_gflops_cg

    @property
    def spawned_peak_gflops(self) -> float:
        return self.peak_gflops * len(self.result.cpe) / self.config.num_cpes

    @property
    def dram_bytes(self) -> int:
        """Bytes the memory moved: DMA transactions, and one transaction per global load or
        store (each costs a whole 128-byte transaction however few bytes it uses, §3)."""
        counters = self.result.counters
        global_accesses = counters["gld_count"] + counters["gst_count"]
        return counters["dma_bytes_moved"] + global_accesses * self.config.dma_transaction_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: flops per DRAM byte moved (inf without DRAM traffic)."""
        return self.effective_flops / self.dram_bytes if self.dram_bytes else math.inf

    @property
    def ridge_intensity(self) -> float:
        """Where the bandwidth roof meets the compute peak."""
        return self.peak_gflops * 1e9 / self.dma_bytes_per_second

    def to_dict(self) -> dict:
        r, counters = self.result, self.result.counters
        return {
            "cg": r.cg, "cpes": len(r.cpe), "engine": r.engine,
            "kernel_cycles": r.kernel_cycles, "kernel_seconds": self.kernel_seconds,
            "ee": {"mean": r.ee, "min": min(s.ee for s in r.cpe.values()),
                   "max": max(s.ee for s in r.cpe.values())},
            "pipe_cycles": self.pipe_cycles,
            "p0_valid": self.valid_cycles(0), "p1_valid": self.valid_cycles(1),
            "p0_idle": self.idle_cycles(0), "p1_idle": self.idle_cycles(1),
            "dma": {"requests": counters["dma_requests"],
                    "bytes_requested": counters["dma_bytes_requested"],
                    "bytes_moved": counters["dma_bytes_moved"],
                    "transactions": counters["dma_transactions"],
                    "waste_bytes": self.dma_waste_bytes,
                    "bandwidth_bytes_per_second": self.dma_bytes_per_second,
                    "t_dma_seconds": self.t_dma_seconds},
            "compute_cycles": self.compute_cycles,
            "rbw_mbw_memory_to_ldm": self.rbw_mbw_memory,
            "flops": self.flops, "counted_flops": self.counted_flops,
            "gflops": self.gflops,
            "peak_gflops_cg": self.peak_gflops,
            "intensity": None if math.isinf(self.intensity) else self.intensity,
            "ridge_intensity": self.ridge_intensity,
        }

    def __str__(self) -> str:
        r, counters, clock = self.result, self.result.counters, self.config.clock_hz
        ee = [s.ee for s in r.cpe.values()]
        lines = [
            f"Run report: CG {r.cg}, {len(r.cpe)} CPEs, engine {r.engine}, "
            f"{r.kernel_cycles} kernel cycles = {self.kernel_seconds * 1e6:.3f} us "
            f"(spawn/join not counted)",
            f"Issue: EE mean {r.ee:.1%}, min {min(ee):.1%}, max {max(ee):.1%}",
            f"  {'cycles':<10} {'P0':>12} {'P1':>12}   (summed over CPEs)",
            f"  {'valid':<10} {self.valid_cycles(0):>12} {self.valid_cycles(1):>12}",
        ]
        p0_idle, p1_idle = self.idle_cycles(0), self.idle_cycles(1)
        for reason in STALL_REASONS:
            if p0_idle[reason] or p1_idle[reason]:
                lines.append(f"  {reason:<10} {p0_idle[reason]:>12} {p1_idle[reason]:>12}")
        moved = counters["dma_bytes_moved"]
        waste = f" ({self.dma_waste_bytes / moved:.1%})" if moved else ""
        lines += [
            f"DMA: {counters['dma_requests']} requests, {counters['dma_bytes_requested']} B asked,"
            f" {moved} B moved in {counters['dma_transactions']} transactions; waste "
            f"{self.dma_waste_bytes} B{waste}",
            f"  T_DMA = bytes moved / {self.dma_bytes_per_second / 1e9:.2f} GB/s = "
            f"{self.t_dma_seconds * clock:.0f} cycles; T_compute = busiest CPE's #P0_cycle = "
            f"{self.compute_cycles} cycles",
            f"  RBW/MBW memory->LDM (eq. 3-5) = T_DMA / T_compute = {self.rbw_mbw_memory:.2f}",
            f"Global accesses: {counters['gld_count']} loads, {counters['gst_count']} stores "
            f"({self.config.dma_transaction_bytes} B of memory traffic each)",
        ]
        source = ("counted by the VM" if self.flops is None
                  else f"given (the VM counted {self.counted_flops})")
        lines.append(f"Flops: {self.effective_flops:g} {source} -> {self.gflops:.1f} GFLOPS = "
                     f"{self.gflops / self.peak_gflops:.1%} of the CG peak "
                     f"{self.peak_gflops:.1f} ({self.gflops / self.spawned_peak_gflops:.1%}"
                     f" of the {len(r.cpe)} CPEs' peak)")
        if math.isinf(self.intensity):
            lines.append("  arithmetic intensity: no DRAM traffic")
        else:
            side = "memory" if self.intensity < self.ridge_intensity else "compute"
            lines.append(f"  arithmetic intensity = flops / {self.dram_bytes} DRAM bytes moved = "
                         f"{self.intensity:.2f} flop/B (ridge {self.ridge_intensity:.1f}: "
                         f"{side}-bound side)")
        return "\n".join(lines)

    def roofline_png(self, path: str) -> None:
        """Write the roofline plot (``roofline_figure``) as a PNG."""
        self.roofline_figure().savefig(path)

    def roofline_figure(self):
        """The roofline plot: the CG's compute peak, the DMA bandwidth roof and the run."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        ridge, peak = self.ridge_intensity, self.peak_gflops
        bandwidth = self.dma_bytes_per_second / 1e9
        plotted = not math.isinf(self.intensity) and self.gflops > 0
        low = min(ridge / 100, self.intensity / 4 if plotted else math.inf)
        high = max(ridge * 20, self.intensity * 4 if plotted else 0)
        figure = Figure(figsize=(7, 4.5), dpi=120)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        axes.loglog([low, ridge, high], [bandwidth * low, peak, peak], color="black",
                    label=f"roof: {peak:.1f} GFLOPS peak, {bandwidth:.2f} GB/s DMA")
        if len(self.result.cpe) < self.config.num_cpes:
            axes.axhline(self.spawned_peak_gflops, color="gray", linestyle="--",
                         label=f"peak of the {len(self.result.cpe)} spawned CPEs")
        if plotted:
            axes.loglog([self.intensity], [self.gflops], "o", color="tab:red", markersize=8,
                        label=f"run: {self.gflops:.1f} GFLOPS at {self.intensity:.2f} flop/B")
        else:
            axes.set_title("no DRAM traffic or no flops: the run is not placed", fontsize=9)
        axes.set_xlabel("arithmetic intensity (flop / DRAM byte moved)")
        axes.set_ylabel("GFLOPS")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(loc="lower right", fontsize=8)
        figure.suptitle(f"Roofline, one core group ({len(self.result.cpe)} CPEs, "
                        f"{self.result.kernel_cycles} kernel cycles)")
        figure.tight_layout()
        return figure


def run_report(result: RunResult, flops: Optional[float] = None) -> Report:
    """The report on ``result``; ``flops`` is the work the run did, if not the operations the
    VM counted."""
    if flops is not None and flops < 0:
        raise ValueError(f"flops must be >= 0, got {flops}")
    return Report(result, flops)
