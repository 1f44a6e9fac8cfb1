"""What a run returns: simulated time, per-CPE pipe counters and per-CG traffic counters."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .engine_api import CG_COUNTERS, CPE_COUNTER_INDEX, STALL_REASONS, EngineResult, Stop


@dataclass
class CpeStats:
    """Counters of one CPE (timing.md "Counters"); every cycle of the run is, per pipe, valid or
    idle for exactly one reason. ``float_ops``: the floating-point operations it issued."""
    cpe: int
    row: int
    col: int
    pc: int
    p0_valid: int
    p1_valid: int
    active_cycles: int
    p0_idle: dict = field(default_factory=dict)   # reason -> cycles
    p1_idle: dict = field(default_factory=dict)
    float_ops: int = 0
    icache_l1_misses: int = 0   # lines fetched into its L1 instruction cache (config icache)
    icache_l2_misses: int = 0   # ... of which the shared L2 did not hold either

    @classmethod
    def from_counters(cls, cpe: int, mesh_cols: int, pc: int, row) -> "CpeStats":
        """`row`: the CPE's counters (engine_api.CPE_COUNTERS order), a sequence of ints."""
        value = {name: int(row[i]) for name, i in CPE_COUNTER_INDEX.items()}
        return cls(cpe, cpe // mesh_cols, cpe % mesh_cols, pc, value["p0_valid"],
                   value["p1_valid"], value["active_cycles"],
                   {r: value[f"p0_idle_{r}"] for r in STALL_REASONS},
                   {r: value[f"p1_idle_{r}"] for r in STALL_REASONS}, value["float_ops"],
                   value["icache_l1_misses"], value["icache_l2_misses"])

    @property
    def ee(self) -> float:
        """Execution efficiency: P0 valid / P0 cycles of the CPE's own run (thesis §3.1.4)."""
        return self.p0_valid / self.active_cycles if self.active_cycles else 0.0

    @property
    def p0_idle_cycles(self) -> int:
        return sum(self.p0_idle.values())

    @property
    def p1_idle_cycles(self) -> int:
        return sum(self.p1_idle.values())

    def to_dict(self) -> dict:
        return {"cpe": self.cpe, "row": self.row, "col": self.col, "pc": self.pc,
                "p0_valid": self.p0_valid, "p1_valid": self.p1_valid,
                "active_cycles": self.active_cycles, "ee": self.ee,
                "p0_idle": dict(self.p0_idle), "p1_idle": dict(self.p1_idle),
                "float_ops": self.float_ops, "icache_l1_misses": self.icache_l1_misses,
                "icache_l2_misses": self.icache_l2_misses}


class CpeStatsMap(Mapping):
    """CPE id -> CpeStats of a run, each made from the engine's counters when first read (a
    launch's result is often read for a few CPEs, or none: making all 64 took longer than
    a short kernel's simulation)."""

    def __init__(self, cpes, mesh_cols: int, counters: np.ndarray, pcs: np.ndarray):
        self._ids = sorted(np.asarray(cpes).tolist())
        self._known = set(self._ids)
        self._mesh_cols, self._counters, self._pcs = mesh_cols, counters, pcs
        self._made: dict[int, CpeStats] = {}

    def __getitem__(self, cpe: int) -> CpeStats:
        stats = self._made.get(cpe)
        if stats is None:
            if cpe not in self._known:
                raise KeyError(cpe)
            stats = self._made[cpe] = CpeStats.from_counters(
                cpe, self._mesh_cols, int(self._pcs[cpe]), self._counters[cpe].tolist())
        return stats

    def __iter__(self):
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass
class RunResult:
    cg: int
    engine: str
    config: object
    kernel_cycles: int          # cycles from spawn to the cycle after the last halt
    cpe: Mapping                # CPE id -> CpeStats, for the spawned CPEs (CpeStatsMap)
    counters: dict              # per-CG counters (engine_api.CG_COUNTERS)
    stop: Optional[Stop] = None
    spans: Optional[list] = None

    @classmethod
    def from_engine(cls, result: EngineResult, cg: int, engine: str, config,
                    cpes) -> "RunResult":
        stats = CpeStatsMap(cpes, config.mesh_cols, result.cpe_counters, result.pcs)
        counters = {name: int(v) for name, v in zip(CG_COUNTERS, result.cg_counters)}
        return cls(cg, engine, config, int(result.kernel_cycles), stats, counters, result.stop,
                   result.spans)

    @property
    def cycles(self) -> int:
        """Simulated cycles including spawn and join (``config.spawn_cycles``)."""
        return self.kernel_cycles + self.config.spawn_cycles

    @property
    def seconds(self) -> float:
        return self.cycles / self.config.clock_hz

    @property
    def ee(self) -> float:
        """Mean execution efficiency over the spawned CPEs."""
        return sum(s.ee for s in self.cpe.values()) / len(self.cpe) if self.cpe else 0.0

    @property
    def dma_gbytes_per_second(self) -> float:
        """Requested DMA bytes per second of kernel time."""
        kernel_seconds = self.kernel_cycles / self.config.clock_hz
        return self.counters["dma_bytes_requested"] / kernel_seconds / 1e9 \
            if self.kernel_cycles else 0.0

    def ee_mesh(self) -> np.ndarray:
        """EE of each CPE laid out as the mesh (rows × columns); NaN where not spawned."""
        mesh = np.full((self.config.mesh_rows, self.config.mesh_cols), np.nan)
        for s in self.cpe.values():
            mesh[s.row, s.col] = s.ee
        return mesh

    def to_dict(self) -> dict:
        """Everything as JSON-able values."""
        return {
            "cg": self.cg, "engine": self.engine, "cycles": self.cycles,
            "kernel_cycles": self.kernel_cycles, "seconds": self.seconds,
            "spawn_cycles": self.config.spawn_cycles, "ee": self.ee,
            "dma_gbytes_per_second": self.dma_gbytes_per_second,
            "counters": dict(self.counters),
            "stop": None if self.stop is None else {
                "kind": self.stop.name, "cpe": self.stop.cpe, "pc": self.stop.pc,
                "cycle": self.stop.cycle, "message": self.stop.message(),
                "blocked": [list(b) for b in self.stop.blocked]},
            "cpes": [s.to_dict() for s in self.cpe.values()],
        }

    def summary(self) -> str:
        """A readable report: time, traffic, pipe use and the EE mesh."""
        c = self.counters
        valid = sum(s.p0_valid + s.p1_valid for s in self.cpe.values())
        lines = [
            f"CG {self.cg}: {len(self.cpe)} CPEs, engine {self.engine}",
            f"  cycles        {self.cycles} ({self.kernel_cycles} kernel + "
            f"{self.config.spawn_cycles} spawn/join) = {self.seconds * 1e6:.3f} us",
            f"  instructions  {valid} issued, mean EE {self.ee:.1%}",
            f"  DMA           {c['dma_requests']} requests, {c['dma_bytes_requested']} B asked, "
            f"{c['dma_bytes_moved']} B moved in {c['dma_transactions']} transactions, "
            f"{self.dma_gbytes_per_second:.2f} GB/s",
            f"  reg. comm.    {c['rc_transfers']} transfers, {c['rc_deliveries']} deliveries",
            f"  global        {c['gld_count']} loads, {c['gst_count']} stores; "
            f"barriers {c['barriers']}",
            "  idle cycles by reason (P0 / P1, summed over CPEs):",
        ]
        for reason in STALL_REASONS:
            p0 = sum(s.p0_idle[reason] for s in self.cpe.values())
            p1 = sum(s.p1_idle[reason] for s in self.cpe.values())
            if p0 or p1:
                lines.append(f"    {reason:<10} {p0:>10} / {p1}")
        lines.append("  EE per CPE (rows 0-7, columns 0-7; '.' not spawned):")
        for row in self.ee_mesh():
            lines.append("    " + " ".join("   ." if np.isnan(v) else f"{v:4.0%}" for v in row))
        if self.stop is not None:
            lines.append(f"  stopped: {self.stop.message()}")
        return "\n".join(lines)
