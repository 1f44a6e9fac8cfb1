"""Machine configuration: every size and timing constant of the emulated core group.

Each parameter is declared once in ``PARAMETERS`` with its default (the ``sw26010`` preset), its
meaning and its source: **pub** (a published measurement of the real chip, reproduced by the
fidelity benchmarks), **spec** (MACHINE.md fixes it), or **choice** (the sources are silent and
swsim chooses). ``docs/config.md`` is generated from this table (``swsim config --markdown``).
Presets are configurations of the same code: ``sw26010pro`` only overrides values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..isa.table import CODE_BASE, MEM_BASE


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    unit: str
    meaning: str
    source: str  # "pub", "spec" or "choice", with a note


PARAMETERS: tuple[Param, ...] = (
    # topology and sizes
    Param("clock_hz", 1.45e9, "Hz", "CPE clock", "pub: thesis §3.1"),
    Param("num_cgs", 4, "", "core groups per chip", "pub: thesis §3.1"),
    Param("mesh_rows", 8, "", "rows of the CPE mesh", "pub: thesis §3.1"),
    Param("mesh_cols", 8, "", "columns of the CPE mesh", "pub: thesis §3.1"),
    Param("ldm_bytes", 65536, "B", "LDM (scratchpad) per CPE", "pub: thesis §3.1"),
    Param("vector_bytes", 32, "B", "register / vector width; the engines emulate only 32 "
          "(4 x 64-bit lanes): Machine refuses other values", "pub: 256-bit registers"),
    Param("flops_per_cycle", 8, "flop", "peak flops per CPE per cycle (one 4-wide FMA)",
          "pub: 742.4 GFLOPS per CG"),
    Param("mem_base", MEM_BASE, "addr", "first main-memory address", "choice: MACHINE.md §3"),
    Param("code_base", CODE_BASE, "addr", "address of the first instruction", "choice: §3"),
    Param("mem_limit", 1 << 33, "B", "largest main memory a CG may allocate", "pub: 8 GiB/CG"),
    Param("static_data_bytes", 16 << 20, "B",
          "main memory reserved at mem_base for programs' .data/.rodata", "choice"),
    Param("mem_align", 128, "B", "alignment of host allocations (mem.put)", "spec: §9"),
    # instruction latencies (cycles until the result can be read)
    Param("lat_int", 1, "cycle", "integer add/sub/compare/logic/shift/ldi", "pub: table 3.2"),
    Param("lat_imul", 5, "cycle", "integer multiply", "pub: table 3.2"),
    Param("lat_vint", 1, "cycle", "vector integer", "pub: table 3.2"),
    Param("lat_fp", 7, "cycle", "float add/sub/mul/FMA, scalar and vector", "pub: table 3.2"),
    Param("lat_fdivs", 19, "cycle", "single divide/sqrt (P0 busy as long)", "choice"),
    Param("lat_fdivd", 34, "cycle", "double divide/sqrt (P0 busy as long)", "choice"),
    Param("lat_fcvt", 7, "cycle", "float compare/convert", "choice"),
    Param("lat_fmove", 1, "cycle", "float moves, copy-sign, int<->float moves", "choice"),
    Param("lat_shuffle", 1, "cycle", "vector insert/extract/shuffle", "pub: table 3.2"),
    Param("lat_ldm_scalar", 3, "cycle", "scalar load from LDM", "choice within pub 3-4"),
    Param("lat_ldm_vector", 4, "cycle", "vector load from LDM", "pub: §4.1.3"),
    Param("lat_store", 1, "cycle", "stores and puts (no register result)", "choice"),
    Param("lat_get", 1, "cycle", "getr/getc once the data is present", "pub: table 3.2"),
    Param("lat_bcast_load", 4, "cycle", "vldr/vldc/ldder/lddec local result", "spec: §4"),
    Param("lat_sync", 1, "cycle", "synr/sync (issue slot; the wait is barrier_cycles)", "spec"),
    Param("lat_dma", 1, "cycle", "dma issue", "spec: §4"),
    Param("lat_branch", 1, "cycle", "branch/jump link register", "choice"),
    Param("lat_misc", 1, "cycle", "rcid, rtc, memb, halt", "spec: §4"),
    # global (main-memory) loads and stores
    Param("gld_latency", 177, "cycle", "load from main memory (gld)", "pub: thesis §3.1"),
    Param("gst_latency", 101, "cycle", "store to main memory (gld+gst 278 minus gld)",
          "pub: thesis §3.1"),
    Param("gld_occupancy", 15, "cycle", "CG memory-interface occupancy per global access "
          "(gives ~3 GB/s per CG)", "choice: fits pub ~3 GB/s"),
    # DMA (thesis eq. 3-1/3-2)
    Param("dma_latency", 200, "cycle", "start-up latency of a DMA request", "pub: §3.2"),
    Param("dma_transaction_bytes", 128, "B", "memory transaction size", "pub: §3.1"),
    Param("dma_transaction_cycles", 6, "cycle", "engine time per 128-B transaction "
          "(30.94 GB/s at 1.45 GHz = 21.34 B/cycle)", "pub: PEAK_BW 30.94 GB/s"),
    Param("dma_active_requests", 4, "", "requests the CG engine interleaves at once "
          "(4 buses of 16 CPEs)", "pub: §3.1"),
    Param("dma_channel_depth", 3, "", "requests a CPE's channel holds before dma stalls",
          "pub: §3.1"),
    # register communication
    Param("rc_latency", 11, "cycle", "put -> data in the target receive queue", "pub: §3.1"),
    Param("rc_queue_depth", 4, "", "row / column receive queue depth per CPE", "choice"),
    Param("rc_send_depth", 4, "", "send buffer depth per CPE (blocked transfers)", "choice"),
    # synchronisation and host
    Param("barrier_cycles", 14, "cycle", "barrier completion after the last arrival",
          "pub: at least 14"),
    Param("spawn_cycles", 2000, "cycle", "simulated cost of spawn + join", "choice"),
)

_DEFAULTS = {p.name: p.default for p in PARAMETERS}

PRESETS: dict[str, dict[str, Any]] = {
    "sw26010": {},
    # SW26010pro as used by swFLOWpro (reference/parax-swflowpro-qinglong.md §2.3): 6 CGs,
    # 256 KiB LDM, 512-bit vectors, ~2.25 GHz, ~51.2 GB/s per CG (128 B / 5 cycles at 2.25 GHz).
    # The 512-bit vectors are not emulated: a Machine needs vector_bytes=32 to run it.
    "sw26010pro": {
        "clock_hz": 2.25e9, "num_cgs": 6, "ldm_bytes": 256 * 1024, "vector_bytes": 64,
        "flops_per_cycle": 16, "mem_limit": 16 << 30, "dma_transaction_cycles": 5,
    },
}


@dataclass(frozen=True)
class VMConfig:
    """An immutable machine configuration. Build with ``VMConfig.preset(name, **overrides)``."""
    values: tuple[tuple[str, Any], ...]

    @classmethod
    def preset(cls, name: str = "sw26010", **overrides: Any) -> "VMConfig":
        if name not in PRESETS:
            raise ValueError(f"unknown machine preset {name!r}; expected one of {sorted(PRESETS)}")
        values = dict(_DEFAULTS)
        values.update(PRESETS[name])
        for key, value in overrides.items():
            if key not in values:
                raise ValueError(f"unknown configuration parameter {key!r}")
            if not isinstance(value, type(values[key])) and not (
                    isinstance(values[key], float) and isinstance(value, int)):
                raise TypeError(f"configuration parameter {key!r} must be "
                                f"{type(values[key]).__name__}, got {value!r}")
            values[key] = value
        return cls(tuple(values.items()))

    def __getattr__(self, name: str) -> Any:
        for key, value in object.__getattribute__(self, "values"):
            if key == name:
                return value
        raise AttributeError(name)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

    def replace(self, **overrides: Any) -> "VMConfig":
        values = self.as_dict()
        values.update(overrides)
        return VMConfig(tuple(values.items()))

    @property
    def num_cpes(self) -> int:
        return self.mesh_rows * self.mesh_cols

    @property
    def peak_gflops_cg(self) -> float:
        return self.num_cpes * self.flops_per_cycle * self.clock_hz / 1e9

    def latency(self, latency_class: str) -> int:
        return getattr(self, f"lat_{latency_class}")


def markdown_table() -> str:
    """The parameter table for the docs."""
    rows = ["| parameter | default | unit | meaning | source |", "| --- | --- | --- | --- | --- |"]
    for p in PARAMETERS:
        value = hex(p.default) if p.unit == "addr" else p.default
        pro = PRESETS["sw26010pro"].get(p.name)
        if pro is not None:
            value = f"{value} (pro: {pro})"
        rows.append(f"| `{p.name}` | {value} | {p.unit} | {p.meaning} | {p.source} |")
    return "\n".join(rows)
