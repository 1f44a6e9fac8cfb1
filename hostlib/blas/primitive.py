"""Host driver for the LDM GEMM primitive (``kernels/gemm/gemm_prim.s``, docs/gemm.md).

``ldm_gemm(A, B, C)`` cuts the numpy matrices into the 8 x 8 blocks the primitive expects,
lays each block out as the chosen kernel variant wants it, runs ``kernels/gemm/gemm_prim_run.s``
(DMA the blocks into the 64 LDMs, barrier, the primitive between two ``rtc``, DMA C back) and
returns ``C + A @ B`` computed on the VM together with the primitive's cycles and GFLOPS.
numpy only prepares the inputs and reassembles C: every flop runs on the VM.

``sweep(...)`` measures GFLOPS over LDM-resident block sizes; ``format_table`` prints it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError
from ...vm import Machine
from ...vm.config import VMConfig
from ..runtime import Kernel

# The driver linked with the primitive; its job record is the J_* symbols of gemm_prim_run.s.
KERNEL = Kernel(("gemm/gemm_prim.s", "gemm/gemm_prim_run.s"), entry="gemm_prim_run",
                ldm_end="gemm_run_ldm_end", stack="gemm_prim_run_stack")
KERNEL_ARGS = 3               # the primitive's address, the job, the timing output
MESH = KERNEL.mesh_side      # the primitive's steps: a MESH x MESH grid of blocks (gemm_prim.inc)
# C block layout -> (kernel name stem, vectorised dimension). "mn": C block stored Mb x Nb
# (row-major), B is the vector operand; "nm": C block stored Nb x Mb, A is the vector operand.
LAYOUTS = {"mn": "gemm_prim_mn", "nm": "gemm_prim_nm"}
VECTOR_TILE, SPLAT_TILE = 16, 4
# Single precision: "convert" = strategy 2 (f32 -> f64 in LDM, double primitive, back),
# "put" = strategy 1 (vlds/ldse + putr/putc in the inner loop). docs/gemm.md has the numbers.
F32_STRATEGIES = {"convert": "_s2", "put": "_s1"}
DEFAULT_F32_STRATEGY = "convert"
DEFAULT_CONFIG = VMConfig.preset()


def check_shape(mb: int, nb: int, kb: int, layout: str = "mn") -> None:
    """Raise ValueError unless the block shape suits the layout's register tile."""
    if layout not in LAYOUTS:
        raise ArgumentError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    vector, splat = (nb, mb) if layout == "mn" else (mb, nb)
    names = ("Nb", "Mb") if layout == "mn" else ("Mb", "Nb")
    if kb < 1 or vector <= 0 or splat <= 0 or vector % VECTOR_TILE or splat % SPLAT_TILE:
        raise ArgumentError(f"layout {layout!r} needs {names[0]} a multiple of {VECTOR_TILE}, "
                         f"{names[1]} a multiple of {SPLAT_TILE} and Kb >= 1; got Mb={mb}, "
                         f"Nb={nb}, Kb={kb}")


def ldm_layout(mb: int, nb: int, kb: int, dtype=np.float64, f32_strategy=DEFAULT_F32_STRATEGY,
               config: VMConfig = DEFAULT_CONFIG) -> dict:
    """LDM addresses of the blocks (and the strategy-2 work area); raises ValueError if they
    do not fit next to the driver's data and the stack."""
    itemsize = np.dtype(dtype).itemsize
    sizes = {"a": kb * mb * itemsize, "b": kb * nb * itemsize, "c": mb * nb * itemsize}
    arena = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS)
    layout = {}
    for name in ("a", "b", "c"):
        layout[f"{name}_ldm"], layout[f"{name}_bytes"] = arena.take(sizes[name]), sizes[name]
    layout["work_ldm"] = arena.take(0)
    if itemsize == 4 and f32_strategy == "convert":
        arena.take(8 * (kb * mb + kb * nb + mb * nb))
    if not arena.fits:
        raise ArgumentError(f"blocks Mb={mb}, Nb={nb}, Kb={kb} ({np.dtype(dtype).name}) need "
                         f"{arena.address + KERNEL.stack_bytes(KERNEL_ARGS)} bytes "
                         f"of LDM, more than {config.ldm_bytes}")
    return layout


def fits(mb, nb, kb, dtype=np.float64, f32_strategy=DEFAULT_F32_STRATEGY,
         config: VMConfig = DEFAULT_CONFIG) -> bool:
    try:
        ldm_layout(mb, nb, kb, dtype, f32_strategy, config)
    except ValueError:
        return False
    return True


def _blocks(matrix, rows, cols, transpose):
    """The 64 blocks of `matrix` (rows x cols each), block (i, j) at index 8 i + j, each
    transposed if asked, flattened."""
    blocks = matrix.reshape(MESH, rows, MESH, cols).transpose(0, 2, 1, 3)
    if transpose:
        blocks = blocks.transpose(0, 1, 3, 2)
    return np.ascontiguousarray(blocks).reshape(MESH * MESH, rows * cols)


def _unblock(blocks, rows, cols, transposed):
    shape = (MESH, MESH, cols, rows) if transposed else (MESH, MESH, rows, cols)
    grid = blocks.reshape(shape)
    if transposed:
        grid = grid.transpose(0, 1, 3, 2)
    return grid.transpose(0, 2, 1, 3).reshape(MESH * rows, MESH * cols)


def kernel_name(layout: str, dtype, f32_strategy: str = DEFAULT_F32_STRATEGY) -> str:
    if np.dtype(dtype) == np.float64:
        return LAYOUTS[layout] + "_d"
    if f32_strategy not in F32_STRATEGIES:
        raise ArgumentError(f"f32_strategy must be one of {sorted(F32_STRATEGIES)}")
    return LAYOUTS[layout] + F32_STRATEGIES[f32_strategy]


def ldm_gemm(A, B, C=None, engine="c", layout="mn", f32_strategy=DEFAULT_F32_STRATEGY, *,
             machine=None, progress=None):
    """C + A @ B on the VM's LDM GEMM primitive; returns (C, Stats).

    A is M x K, B is K x N, C (default zeros) M x N, all float64 or all float32; M, N, K are
    multiples of 8 and the blocks (M/8, N/8, K/8) suit `layout` (see ``check_shape``) and fit
    in LDM. `layout` picks the kernel variant (the C block's storage order in LDM). The
    Stats' `cycles` are the primitive's (last CPE's return - the common start after the
    barrier; the distribution DMA excluded); details: mb, nb, kb, layout, dtype, engine.
    ``progress(cycle)``: ``Machine.run``'s.
    """
    machine = machine or Machine()
    KERNEL.check(machine.config)
    A, B = np.asarray(A), np.asarray(B)
    dtype = A.dtype
    if dtype not in (np.float64, np.float32) or B.dtype != dtype:
        raise ArgumentError("A and B must both be float64 or both float32")
    (m, k), (k2, n) = A.shape, B.shape
    C = np.zeros((m, n), dtype) if C is None else np.asarray(C, dtype)
    if k != k2 or C.shape != (m, n) or m % MESH or n % MESH or k % MESH:
        raise ArgumentError(f"shapes A {A.shape}, B {B.shape}, C {C.shape}: need M x K, K x N, "
                         f"M x N with M, N, K multiples of {MESH}")
    mb, nb, kb = m // MESH, n // MESH, k // MESH
    check_shape(mb, nb, kb, layout)
    job = ldm_layout(mb, nb, kb, dtype, f32_strategy, machine.config)
    c_transposed = layout == "nm"

    mem = machine.mem
    job["a_mem"] = mem.put(_blocks(A, mb, kb, transpose=True))
    job["b_mem"] = mem.put(_blocks(B, kb, nb, transpose=False))
    job["c_mem"] = c_mem = mem.put(_blocks(C, mb, nb, transpose=c_transposed))
    job_mem = mem.put(KERNEL.record("J_", "RUN_JOB_BYTES").new(mb=mb, nb=nb, kb=kb, **job))
    out = mem.put(np.zeros((MESH * MESH, 2), np.int64))
    primitive = KERNEL.symbol(kernel_name(layout, dtype, f32_strategy))

    def primitive_cycles(_):
        times = mem.get(out, (MESH * MESH, 2), np.int64)
        return times[:, 1].max() - times[:, 0].min()

    stats = KERNEL.launch(machine, [primitive, job_mem, out], flops=2 * m * n * k,
                          engine=engine, cycles=primitive_cycles, progress=progress,
                          details=dict(mb=mb, nb=nb, kb=kb, layout=layout, dtype=dtype.name,
                                       engine=engine))
    result = _unblock(mem.get(c_mem, (MESH * MESH, mb * nb), dtype), mb, nb, c_transposed)
    return result, stats


# ---- the sweep ----------------------------------------------------------------------------
SWEEP_MB = (16, 32, 48, 64, 96, 128)
SWEEP_NB = (16, 32, 48, 64, 96, 128)
SWEEP_KB = (1, 4, 8, 16, 32, 64, 96, 128, 192, 256)


@dataclass
class SweepResult:
    rows: list                # Stats of ldm_gemm, in sweep order
    threshold_gflops: float = 500.0

    @property
    def best(self):
        return max(self.rows, key=lambda s: s.gflops)

    @property
    def share_above_threshold(self) -> float:
        return sum(s.gflops > self.threshold_gflops for s in self.rows) / len(self.rows)


def sweep_shapes(mbs=SWEEP_MB, nbs=SWEEP_NB, kbs=SWEEP_KB, layout="mn", dtype=np.float64,
                 config: VMConfig = DEFAULT_CONFIG):
    """The (Mb, Nb, Kb) combinations of the grids that suit `layout` and fit in LDM."""
    shapes = []
    for mb, nb, kb in itertools.product(mbs, nbs, kbs):
        try:
            check_shape(mb, nb, kb, layout)
        except ValueError:
            continue
        if fits(mb, nb, kb, dtype, config=config):
            shapes.append((mb, nb, kb))
    return shapes


def sweep(shapes=None, layout="mn", dtype=np.float64, engine="c", seed=0, check=True,
          config: VMConfig = DEFAULT_CONFIG) -> SweepResult:
    """GFLOPS of the primitive for each block shape (default: ``sweep_shapes()``) on machines
    of `config`. With `check`, every result is compared with numpy."""
    rng = np.random.default_rng(seed)
    rows = []
    if shapes is None:
        shapes = sweep_shapes(layout=layout, dtype=dtype, config=config)
    for mb, nb, kb in shapes:
        A = rng.standard_normal((MESH * mb, MESH * kb)).astype(dtype)
        B = rng.standard_normal((MESH * kb, MESH * nb)).astype(dtype)
        C, stats = ldm_gemm(A, B, engine=engine, layout=layout, machine=Machine(config))
        if check:
            np.testing.assert_allclose(C, A.astype(np.float64) @ B, **tolerance(dtype, kb))
        rows.append(stats)
    return SweepResult(rows)


def tolerance(dtype, kb: int) -> dict:
    """assert_allclose tolerances for C + A @ B with standard normal inputs and K = 8 kb:
    a few rounding errors of the dtype per accumulated product."""
    return {"rtol": 0, "atol": 4 * np.finfo(dtype).eps * MESH * kb}


def format_table(result: SweepResult, limit: int = None) -> str:
    """Sweep rows sorted by GFLOPS (best first), then a summary line."""
    rows = sorted(result.rows, key=lambda s: -s.gflops)[:limit]
    lines = [f"{'Mb':>4} {'Nb':>4} {'Kb':>4} {'cycles':>9} {'GFLOPS':>8} {'% peak':>7} "
             f"{'EE min':>7}"]
    lines += [f"{s.mb:4d} {s.nb:4d} {s.kb:4d} {s.cycles:9d} {s.gflops:8.2f} "
              f"{100 * s.efficiency:6.1f}% {s.ee_min:7.3f}" for s in rows]
    best = result.best
    lines.append(f"{len(result.rows)} shapes; best {best.gflops:.2f} GFLOPS "
                 f"({100 * best.efficiency:.1f}% of {best.peak_gflops:.1f}) at Mb={best.mb} "
                 f"Nb={best.nb} Kb={best.kb}; "
                 f"{100 * result.share_above_threshold:.1f}% above "
                 f"{result.threshold_gflops:.0f} GFLOPS")
    return "\n".join(lines)
