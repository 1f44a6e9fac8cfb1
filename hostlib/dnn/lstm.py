"""LSTM forward (tensorized, thesis Algorithm 6, and the cuDNN/Appleyard-style baseline) and
backward through time on the VM. docs/dnn.md ("LSTM") describes both algorithms.

PyTorch's conventions: x (T, B, I), h0 and c0 (B, H), W (4H, I), R (4H, H), bias b (4H,),
gate order i, f, g, o; i = σ(·), f = σ(·), g = tanh(·), o = σ(·) of W x_t + R h_{t−1} + b,
c_t = f c_{t−1} + i g, h_t = o tanh(c_t); y (T, B, H) stacks h_1 .. h_T.

Every product and every element-wise operation runs on the CPEs: the GEMMs through swGEMM
(``hostlib.blas.gemm``) or the LDM primitive inside ``kernels/dnn/lstm.s``, the gates and the
cell in ``kernels/dnn/lstm.s`` (tensorized) or ``kernels/dnn/lstm_cell.s`` (baseline and
backward). The host pads, permutes and blocks arrays (copies, no arithmetic) and reads the
results back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..blas import gemm
from ..blas.primitive import MESH     # the mesh side: CPE (i, j) = id MESH i + j
from ..runtime import Kernel, host_operator
from .common import DnnError, chip, combined, float_arrays, machine_and_cgs, split

ALGOS = ("tensorized", "baseline")
PAD = 4 * MESH                # B and H are padded to multiples of 32: Mb, Hb multiples of 4
WIDEN_GROUP = 16              # kernels widen float32 to double 16 elements at a time
# The reserve staged beside R^T chunks down to 1/4 of the chunk it leaves in place (measured
# per step on 9 cases, docs/dnn.md "The reserve for training").
STAGED_CHUNK_FLOOR = 4

KERNEL = Kernel(("dnn/lstm.s", "gemm/gemm_prim.s"), entry="lstm", ldm_end="lstm_ldm_end",
                stack="lstm_stack")
# a reserve record per step and CPE, in parts of Mb x Hb elements: 4 gates, c_t, h_t
RECORD, RECORD_C, RECORD_H = (KERNEL.symbol(name)
                              for name in ("RECORD_PARTS", "RECORD_C", "RECORD_H"))
CELL_KERNEL = Kernel(("dnn/lstm_cell.s",), entry="lstm_cell", ldm_end="lstm_cell_ldm_end")


def _ceil(n: int, to: int) -> int:
    return -(-n // to) * to


# ---- arguments ----------------------------------------------------------------------------------

def _check_forward(x, h0, c0, W, R, bias):
    x, h0, c0, W, R, b = float_arrays(x=x, h0=h0, c0=c0, W=W, R=R, bias=bias)
    if x.ndim != 3:
        raise DnnError(f"x must be (T, B, I), got shape {x.shape}")
    steps, batch, inputs = x.shape
    if R.ndim != 2 or R.shape[0] != 4 * R.shape[1]:
        raise DnnError(f"R must be (4H, H), got shape {R.shape}")
    hidden = R.shape[1]
    expected = {"h0": (h0, (batch, hidden)), "c0": (c0, (batch, hidden)),
                "W": (W, (4 * hidden, inputs)), "bias": (b, (4 * hidden,))}
    for name, (array, shape) in expected.items():
        if array.shape != shape:
            raise DnnError(f"{name} must be {shape} for x {x.shape} and R {R.shape}, "
                           f"got {array.shape}")
    return [np.ascontiguousarray(a) for a in (x, h0, c0, W, R, b)]


# ---- tensorized ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """The tensorized kernel's LDM plan: padded sizes, R^T resident or streamed in chunks of
    `kc` rows per step, I_{t+1} prefetched or not, the reserve written or not (staged in its
    own buffer, its put overlapping the next step, or narrowed in C, the next step waiting for
    its put), and the buffers' LDM addresses."""
    bp: int
    hp: int
    kc: int
    resident: bool
    prefetch: bool
    ldm: dict
    reserve: bool = False
    reserve_staged: bool = False

    @property
    def mb(self):
        return self.bp // MESH

    @property
    def hb(self):
        return self.hp // MESH

    @property
    def reserve_deferred(self) -> bool:
        """A staged record's put waits for the next step's element-wise phase when the GEMM
        phase streams R^T (its synchronous gets would share the DMA engine with the put)."""
        return self.reserve_staged and not self.resident


def plan(batch: int, hidden: int, itemsize: int, config, *, kc=None, prefetch=None,
         reserve=False, reserve_staged=None) -> Optional[Plan]:
    """The tensorized kernel's plan for (B, H) in this precision, or None when even one row of
    R^T per chunk does not fit in LDM (then the baseline runs). Largest chunk first (resident
    R^T when the whole block fits), with the prefetch of I when it still fits. With `reserve`
    the reserve's staging buffer when it fits beside a resident R^T with the prefetch, else
    beside a chunk at least 1/STAGED_CHUNK_FLOOR of the one the reserve in place allows; else
    the record is narrowed in C (measured, docs/dnn.md: a record put in place exposes the
    whole put unless an exposed get of I hides it, a smaller chunk costs more gets and
    primitive calls). `kc` (a divisor of Hb),
    `prefetch` and `reserve_staged` restrict the choice (tests use them to run every path)."""
    bp, hp = _ceil(batch, PAD), _ceil(hidden, PAD)
    mb, hb = bp // MESH, hp // MESH
    nb = 4 * hb
    divisors = sorted((d for d in range(1, hb + 1) if hb % d == 0), reverse=True)
    if kc is not None and kc not in divisors:
        raise DnnError(f"kc must divide Hb = {hb}, got {kc}")
    if reserve and reserve_staged is None:
        fixed = dict(prefetch=prefetch, reserve=True)
        in_place = plan(batch, hidden, itemsize, config, kc=kc, reserve_staged=False, **fixed)
        if in_place is None:
            return None
        keep = in_place.resident and in_place.prefetch
        floor = in_place.kc if keep else in_place.kc / STAGED_CHUNK_FLOOR
        for chunk in (c for c in divisors if c >= floor and kc in (None, c)):
            staged = plan(batch, hidden, itemsize, config, kc=chunk, reserve_staged=True,
                          **fixed)
            if staged is not None:
                return staged
        return in_place
    rstaged = bool(reserve and reserve_staged)
    for chunk in ([kc] if kc is not None else divisors):
        for staged in ((True, False) if prefetch is None else (prefetch,)):
            arena = KERNEL.arena(config.ldm_bytes, nargs=1)
            ldm = {"a": arena.take(hb * mb * 8), "c": arena.take(mb * nb * 8),
                   "cst": arena.take(mb * hb * 8), "g": arena.take(mb * hb * 8),
                   "stage": arena.take(mb * nb * itemsize) if staged else 0,
                   "ybuf": 0 if reserve else arena.take(mb * hb * itemsize),  # (h: record)
                   "bbuf": arena.take(nb * 8),
                   "rbuf": arena.take(chunk * nb * 8),
                   "sbuf": arena.take(RECORD * mb * hb * itemsize) if rstaged else 0}
            if arena.fits:
                return Plan(bp, hp, chunk, chunk == hb, staged, ldm, bool(reserve), rstaged)
    return None


def _gate_columns(hidden: int, hp: int) -> np.ndarray:
    """For each of the 4 Hp fused columns (block j, gate g, unit u at j 4Hb + g Hb + u), the row
    of W / R / b it takes (g H + j Hb + u), or -1 for a padding unit."""
    hb = hp // MESH
    j, g, u = np.meshgrid(np.arange(MESH), np.arange(4), np.arange(hb), indexing="ij")
    unit = j * hb + u
    return np.where(unit < hidden, g * hidden + unit, -1).reshape(-1)


def _take_rows(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """matrix[rows] with zero rows where rows == -1 (a copy, no arithmetic)."""
    out = np.zeros((rows.size,) + matrix.shape[1:], matrix.dtype)
    out[rows >= 0] = matrix[rows[rows >= 0]]
    return out


def _pad(array: np.ndarray, shape) -> np.ndarray:
    out = np.zeros(shape, array.dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


def _blocks(matrix: np.ndarray, rows: int, cols: int, transpose: bool) -> np.ndarray:
    """The 64 (rows x cols) blocks of an (8 rows) x (8 cols) matrix, block (i, j) at 8 i + j,
    each transposed when asked."""
    grid = matrix.reshape(MESH, rows, MESH, cols).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(grid.transpose(0, 1, 3, 2) if transpose else grid)


def _unblock(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """(..., 64, rows, cols) blocks, block (i, j) at 8 i + j -> (..., 8 rows, 8 cols)."""
    lead = blocks.shape[:-3]
    return blocks.reshape(*lead, MESH, MESH, rows, cols).swapaxes(-3, -2).reshape(
        *lead, MESH * rows, MESH * cols)


def hoist(x, W, hidden: int, p: Plan, machine, engine):
    """The hoisted input projection of every step as one swGEMM: I = x_padded W_fused^T,
    (T Bp) x 4Hp, gate columns in the kernel's order; returns (I, Stats)."""
    steps, _, inputs = x.shape
    w_fused = _take_rows(W, _gate_columns(hidden, p.hp))
    x_padded = _pad(x, (steps, p.bp, inputs)).reshape(steps * p.bp, inputs)
    return gemm(x_padded, w_fused, trans_b=True, machine=machine, engine=engine)


def time_loop(projection, h0, c0, R, b, p: Plan, machine, engine):
    """The one launch of kernels/dnn/lstm.s over the T = rows(projection) / Bp steps;
    returns ((y, c_T, gates, cs), Stats with the kernel's per-CPE cycle split ``times``):
    with ``p.reserve`` the activated gates (T, B, 4H) in PyTorch's order and the cells cs
    (T, B, H) (y and c_T come from the same records), else None."""
    batch, hidden = h0.shape
    steps = projection.shape[0] // p.bp
    mb, hb, nb = p.mb, p.hb, 4 * p.hb
    dtype = projection.dtype
    es = dtype.itemsize
    columns = _gate_columns(hidden, p.hp)
    r_fused_t = _pad(_take_rows(R, columns).T, (p.hp, 4 * p.hp))  # R^T: (Hp, 4Hp)
    b_fused = _take_rows(b.reshape(-1, 1), columns).reshape(-1)
    mem = machine.mem
    record = KERNEL.record("J_", "JOB_BYTES")
    block = mb * hb
    y_addr, ct_addr, rsv_addr = ((0, 0, mem.alloc(steps * MESH * MESH * RECORD * block * es))
                                 if p.reserve else (mem.alloc(steps * MESH * MESH * block * es),
                                                    mem.alloc(MESH * MESH * block * es), 0))
    times_bytes = KERNEL.symbol("TIMES_BYTES")
    times_addr = mem.alloc(MESH * MESH * times_bytes)
    job = record.new(
        t=steps, es=es, mb=mb, hb=hb, kc=p.kc, res=int(p.resident), pre=int(p.prefetch),
        i=mem.put(np.ascontiguousarray(projection)), ipitch=4 * p.hp * es,
        r=mem.put(_blocks(r_fused_t, hb, nb, False)), bias=mem.put(b_fused),
        h0=mem.put(_blocks(_pad(h0, (p.bp, p.hp)), mb, hb, True)),
        c0=mem.put(_blocks(_pad(c0, (p.bp, p.hp)), mb, hb, False)),
        y=y_addr, ct=ct_addr, times=times_addr, rsv=rsv_addr,
        defer=int(p.reserve_deferred),
        **{name: address for name, address in p.ldm.items()})
    flops = 2 * steps * p.bp * p.hp * 4 * p.hp
    times = {}
    stats = KERNEL.launch(machine, [mem.put(job)], flops=flops, engine=engine,
                          details=dict(plan=p, times=times))
    cpe_times = mem.get(times_addr, (MESH * MESH, times_bytes // 8), np.int64)
    for name in ("init", "gemm", "elem", "total"):
        times[name] = cpe_times[:, KERNEL.symbol(f"TM_{name.upper()}") // 8]
    def unblocked(blocks):
        return np.ascontiguousarray(_unblock(blocks, mb, hb)[..., :batch, :hidden])
    if not p.reserve:
        y = unblocked(mem.get(y_addr, (steps, MESH * MESH, mb, hb), dtype))
        c_t = unblocked(mem.get(ct_addr, (MESH * MESH, mb, hb), dtype))
        return (y, c_t, None, None), stats
    records = mem.get(rsv_addr, (steps, MESH * MESH, RECORD * block), dtype)
    # gates: (t, i, j, r, gate, u) -> (t, i r = batch row, gate, j u = unit)
    gates = records[..., :RECORD_C * block].reshape(steps, MESH, MESH, mb, 4, hb).transpose(
        0, 1, 3, 4, 2, 5).reshape(steps, p.bp, 4, p.hp)
    gates = np.ascontiguousarray(gates[:, :batch, :, :hidden]).reshape(steps, batch, -1)
    cs, y = (unblocked(records[..., k * block:(k + 1) * block].reshape(
        steps, MESH * MESH, mb, hb)) for k in (RECORD_C, RECORD_H))
    return (y, cs[-1].copy(), gates, cs), stats


def _tensorized(x, h0, c0, W, R, b, p: Plan, machine, engine):
    projection, gemm_stats = hoist(x, W, R.shape[1], p, machine, engine)
    (y, c_t, gates, cs), loop_stats = time_loop(projection, h0, c0, R, b, p, machine, engine)
    # the split of Figs. 5.15/5.16 on CPE 0 (the CPEs meet at every primitive call): the
    # recurrent product with its I and R DMA counts as GEMM
    split = {"gemm": gemm_stats.cycles + int(loop_stats.times["gemm"][0]),
             "elementwise": int(loop_stats.times["elem"][0])}
    extra = dict(reserve=Reserve(y, gates, cs)) if p.reserve else {}
    stats = combined([gemm_stats, loop_stats], op="lstm_forward", algo="tensorized",
                     plan=p, split=split, launches=2, **extra)
    return (y, y[-1].copy(), c_t), stats


# ---- the cell kernel (baseline forward, backward) --------------------------------------------------

# The cell kernel's gate slots are i, f, o, g (the three sigmoids adjacent): PyTorch gate index
# of each slot.
CELL_GATES = (0, 1, 3, 2)


@dataclass
class Reserve:
    """What the backward pass needs from a forward pass (cuDNN's reserve space): y (T, B, H),
    the activated gates (T, B, 4H) in PyTorch's order (i, f, g, o) and the cells c_1..c_T
    (T, B, H)."""
    y: np.ndarray
    gates: np.ndarray
    c: np.ndarray


def _cell(op: str, planes, rows: int, cols: int, dtype, machine, engine):
    """One launch of kernels/dnn/lstm_cell.s over the planes [(address, row pitch in bytes)]:
    the op's inputs then its outputs, each rows x cols elements."""
    arena = CELL_KERNEL.arena(machine.config.ldm_bytes, nargs=1)
    group = WIDEN_GROUP
    widest = arena.free // (len(planes) * 8) // group * group
    if widest < group:
        raise DnnError("the LSTM cell kernel's slots do not fit in LDM")
    width = min(_ceil(cols, group), widest)
    width = cols if width >= cols else width
    slot = _ceil(width, group) * 8
    record = CELL_KERNEL.record("J_", "JOB_BYTES")
    plane_record = CELL_KERNEL.record("P_", "PLANE_BYTES")
    job = record.new(op=CELL_KERNEL.symbol(f"OP_{op}"), rows=rows, cols=cols,
                     es=np.dtype(dtype).itemsize, hc=width, chunks=-(-cols // width),
                     slot=slot, buf=arena.take(slot * len(planes)))
    for k, (address, pitch) in enumerate(planes):
        plane_record.write(job, record.offset("planes") + k * plane_record.nbytes,
                           addr=address, pitch=pitch)
    return CELL_KERNEL.launch(machine, [machine.mem.put(job)], flops=0, engine=engine,
                              details=dict(op=f"lstm_cell_{op.lower()}", width=width))


def _gate_planes(address: int, hidden: int, es: int, pitch: int):
    """The four gate planes of a (B, 4H) array at `address` in the cell's slot order."""
    return [(address + g * hidden * es, pitch) for g in CELL_GATES]


def _split(parts):
    gemm_cycles = sum(p.cycles for p in parts if "blocking" in p.details)
    return {"gemm": gemm_cycles, "elementwise": sum(p.cycles for p in parts) - gemm_cycles}


def _baseline(x, h0, c0, W, R, b, machine, engine):
    """cuDNN/Appleyard-style: per step eight swGEMMs (W_g x_t, then + R_g h_{t-1} for each
    gate) and one launch of the element-wise cell kernel; nothing stays in LDM."""
    steps, batch, _ = x.shape
    hidden = R.shape[1]
    es = x.itemsize
    mem = machine.mem
    row = hidden * es
    b_planes = _gate_planes(mem.put(b), hidden, es, 0)
    h, c = h0, c0
    parts, ys, cs, gates = [], [], [], []
    for t in range(steps):
        pre = []
        for g in range(4):
            rows = slice(g * hidden, (g + 1) * hidden)
            projected, s_in = gemm(x[t], W[rows], trans_b=True, machine=machine, engine=engine)
            pre_g, s_rec = gemm(h, R[rows], projected, beta=1.0, trans_b=True,
                                machine=machine, engine=engine)
            pre.append(pre_g)
            parts += [s_in, s_rec]
        act_addr = mem.alloc(batch * 4 * row)
        c_addr, h_addr = mem.alloc(batch * row), mem.alloc(batch * row)
        planes = ([(mem.put(pre[g]), row) for g in CELL_GATES] + b_planes + [(mem.put(c), row)]
                  + _gate_planes(act_addr, hidden, es, 4 * row) + [(c_addr, row), (h_addr, row)])
        parts.append(_cell("FORWARD", planes, batch, hidden, x.dtype, machine, engine))
        h = mem.get(h_addr, (batch, hidden), x.dtype)
        c = mem.get(c_addr, (batch, hidden), x.dtype)
        ys.append(h)
        cs.append(c)
        gates.append(mem.get(act_addr, (batch, 4 * hidden), x.dtype))
    y = np.stack(ys)
    stats = combined(parts, op="lstm_forward", algo="baseline", split=_split(parts),
                     launches=len(parts), reserve=Reserve(y, np.stack(gates), np.stack(cs)))
    return (y, h, c), stats


# ---- public ------------------------------------------------------------------------------------

def _batch_slices(machine, cgs, batch: int):
    """The machine and the batch's rows per core group: the sequences of a batch are
    independent, so each CG runs the whole recurrence over its slice (fewer CGs than asked
    when B < cgs)."""
    machine, cgs = machine_and_cgs(machine, cgs)
    return machine, split(batch, cgs)


def _forward_slice(x, h0, c0, W, R, b, algo, reserve, machine, engine):
    if algo == "tensorized":
        p = plan(x.shape[1], R.shape[1], x.itemsize, machine.config, reserve=reserve)
        if p is not None:
            return _tensorized(x, h0, c0, W, R, b, p, machine, engine)
    result, stats = _baseline(x, h0, c0, W, R, b, machine, engine)
    if algo == "tensorized":
        stats.details.update(algo="baseline", fallback="the tensorized kernel's state does "
                             "not fit in LDM for this B and H")
    return result, stats


@host_operator
def lstm_forward(x, h0, c0, W, R, bias, *, algo: str = "tensorized", reserve: bool = False,
                 machine=None, cgs=1, engine: str = "c"):
    """One LSTM layer over T steps on the VM; returns ((y, h_T, c_T), Stats).

    PyTorch's shapes and gate order (module docstring); float32 or float64, any sizes >= 1.
    ``algo="tensorized"``: thesis Algorithm 6 (the hoisted swGEMM, then one kernel for the
    time loop); when its LDM plan does not fit (``plan`` returns None) the baseline runs and
    ``stats.fallback`` says why. ``algo="baseline"``: per step eight swGEMMs and the cell
    kernel; its ``stats.reserve`` (a ``Reserve``) is what ``lstm_backward`` needs.
    ``reserve=True``: the tensorized kernel writes the reserve too (per step its CPEs put the
    activated gates and c_t to memory, overlapped with the next step where LDM has room for a
    staging buffer: ``stats.plan.reserve_staged``), so ``stats.reserve`` is there whatever the
    algorithm; the baseline always writes it.
    ``cgs`` core groups each run the whole recurrence over a slice of the batch (min(B, cgs)
    of them); the chip's cycles are the slowest slice's (``stats.per_cg`` has each).
    Stats: ``cycles`` (the launches one after another, spawn excluded), ``launches``,
    ``split`` = {"gemm": ..., "elementwise": ...} cycles (the slowest CG's), ``algo``;
    tensorized also ``plan``.
    """
    if algo not in ALGOS:
        raise DnnError(f"algo must be one of {', '.join(map(repr, ALGOS))}, got {algo!r}")
    x, h0, c0, W, R, b = _check_forward(x, h0, c0, W, R, bias)
    machine, slices = _batch_slices(machine, cgs, x.shape[1])
    if len(slices) == 1:
        return _forward_slice(x, h0, c0, W, R, b, algo, reserve, machine, engine)
    runs = [_forward_slice(np.ascontiguousarray(x[:, lo:hi]), h0[lo:hi], c0[lo:hi], W, R, b,
                           algo, reserve, machine, engine) for lo, hi in slices]
    per_cg = [stats for _, stats in runs]
    y, h, c = (np.concatenate([result[k] for result, _ in runs], axis=int(k == 0))
               for k in range(3))
    slowest = max(per_cg, key=lambda s: s.cycles)
    details = dict(op="lstm_forward", algo="+".join(sorted({s.algo for s in per_cg})),
                   split=slowest.split, launches=slowest.launches, rows=slices)
    for key in ("plan", "fallback"):    # the slowest slice's, else any slice's
        found = [s.details[key] for s in [slowest] + per_cg if key in s.details]
        if found:
            details[key] = found[0]
    reserves = [s.details.get("reserve") for s in per_cg]
    if all(reserves):
        details["reserve"] = Reserve(*(np.concatenate([getattr(r, f) for r in reserves], axis=1)
                                       for f in ("y", "gates", "c")))
    return (y, h, c), chip(per_cg, **details)


def backward_steps(dy, x, h0, c0, W, R, b, dh, dc, reserve, machine, engine):
    """The recurrence of the backward pass over one slice of the batch: per step (t = T-1 ..
    0) the cell kernel gives the gates' pre-activation gradients dG_t and dc_{t-1}, and one
    swGEMM dh_{t-1} = dG_t R. Returns (dG (T, B, 4H), dh0, dc0, the forward's y, the
    launches' Stats)."""
    steps, batch, _ = x.shape
    hidden = R.shape[1]
    parts = []
    if reserve is None:     # the tensorized forward with its reserve (or its fallback)
        _, forward = _forward_slice(x, h0, c0, W, R, b, "tensorized", True, machine, engine)
        reserve, parts = forward.reserve, forward.parts
    es = x.itemsize
    row = hidden * es
    mem = machine.mem
    d_pre = np.empty((steps, batch, 4 * hidden), x.dtype)
    for t in reversed(range(steps)):
        c_prev = c0 if t == 0 else reserve.c[t - 1]
        dg_addr, dc_addr = mem.alloc(batch * 4 * row), mem.alloc(batch * row)
        planes = (_gate_planes(mem.put(np.ascontiguousarray(reserve.gates[t])), hidden, es,
                               4 * row)
                  + [(mem.put(np.ascontiguousarray(a)), row)
                     for a in (c_prev, reserve.c[t], dy[t], dh, dc)]
                  + _gate_planes(dg_addr, hidden, es, 4 * row) + [(dc_addr, row)])
        parts.append(_cell("BACKWARD", planes, batch, hidden, x.dtype, machine, engine))
        d_pre[t] = mem.get(dg_addr, (batch, 4 * hidden), x.dtype)
        dc = mem.get(dc_addr, (batch, hidden), x.dtype)
        dh, s_dh = gemm(d_pre[t], R, machine=machine, engine=engine)
        parts.append(s_dh)
    return d_pre, dh, dc, reserve.y, parts


@host_operator
def lstm_backward(dy, x, h0, c0, W, R, bias, *, dh_n=None, dc_n=None, reserve=None,
                  machine=None, cgs=1, engine: str = "c"):
    """Backward through time of ``lstm_forward``; returns ((dx, dh0, dc0, dW, dR, db), Stats).

    ``dy`` (T, B, H) is the loss gradient of y; ``dh_n``, ``dc_n`` (B, H) those of h_T and c_T
    (default zero). ``reserve``: a forward's ``stats.reserve`` for these inputs (the baseline's,
    or the tensorized one's with ``reserve=True``); when None the tensorized forward runs
    again with ``reserve=True`` and its launches are part of the stats. Per step
    (t = T-1 .. 0) the cell kernel gives the gates' pre-activation gradients dG_t and dc_{t-1},
    and one swGEMM dh_{t-1} = dG_t R; then four swGEMMs over all steps at once: dW = dGᵀ x,
    dR = dGᵀ [h_0 .. h_{T-1}], db = 1ᵀ dG, dx = dG W.
    ``cgs`` core groups: the recurrence split by the batch's rows (as the forward), then the
    four products split where no sum crosses CGs (as ``linear_backward``): dW, dR and db by
    their rows (the 4H gate outputs), dx by rows of dG; the chip's cycles are the slowest
    CG's recurrence plus the slowest CG's share of the products.
    """
    x, h0, c0, W, R, b = _check_forward(x, h0, c0, W, R, bias)
    steps, batch, inputs = x.shape
    hidden = R.shape[1]
    machine, slices = _batch_slices(machine, cgs, batch)
    (dy,) = float_arrays(x.dtype, dy=dy)
    grads = {"dh_n": dh_n, "dc_n": dc_n}
    for name, value in grads.items():
        grads[name] = (np.zeros((batch, hidden), x.dtype) if value is None
                       else float_arrays(x.dtype, **{name: value})[0])
        if grads[name].shape != (batch, hidden):
            raise DnnError(f"{name} must be {(batch, hidden)}, got {grads[name].shape}")
    if dy.shape != (steps, batch, hidden):
        raise DnnError(f"dy must be {(steps, batch, hidden)}, got {dy.shape}")
    if reserve is not None and (not isinstance(reserve, Reserve)
                                or reserve.gates.shape != (steps, batch, 4 * hidden)):
        raise DnnError("reserve must be the Reserve of an lstm_forward of these shapes (the "
                       "baseline's, or the tensorized one's with reserve=True)")
    d_pre = np.empty((steps, batch, 4 * hidden), x.dtype)
    dh, dc = np.empty((batch, hidden), x.dtype), np.empty((batch, hidden), x.dtype)
    y = np.empty((steps, batch, hidden), x.dtype)
    loops = []
    for lo, hi in slices:
        part = None if reserve is None else Reserve(
            *(getattr(reserve, f)[:, lo:hi] for f in ("y", "gates", "c")))
        d_pre[:, lo:hi], dh[lo:hi], dc[lo:hi], y[:, lo:hi], parts = backward_steps(
            np.ascontiguousarray(dy[:, lo:hi]), np.ascontiguousarray(x[:, lo:hi]), h0[lo:hi],
            c0[lo:hi], W, R, b, np.ascontiguousarray(grads["dh_n"][lo:hi]),
            np.ascontiguousarray(grads["dc_n"][lo:hi]), part, machine, engine)
        loops.append(parts)
    flat = d_pre.reshape(steps * batch, 4 * hidden)
    h_prev = np.concatenate([h0[None], y[:-1]]).reshape(steps * batch, hidden)
    x_flat = x.reshape(steps * batch, inputs)
    dW, dR = np.empty(W.shape, x.dtype), np.empty(R.shape, x.dtype)
    db, dx = np.empty(4 * hidden, x.dtype), np.empty((steps * batch, inputs), x.dtype)
    products = []
    for (o_lo, o_hi), (r_lo, r_hi) in zip(split(4 * hidden, len(slices)),
                                           split(steps * batch, len(slices))):
        dG = np.ascontiguousarray(flat[:, o_lo:o_hi])
        dW[o_lo:o_hi], s_w = gemm(dG, x_flat, trans_a=True, machine=machine, engine=engine)
        dR[o_lo:o_hi], s_r = gemm(dG, h_prev, trans_a=True, machine=machine, engine=engine)
        sums, s_b = gemm(np.ones((1, steps * batch), x.dtype), dG, machine=machine,
                         engine=engine)
        db[o_lo:o_hi] = sums.reshape(-1)
        dx[r_lo:r_hi], s_x = gemm(flat[r_lo:r_hi], W, machine=machine, engine=engine)
        products.append([s_w, s_r, s_b, s_x])
    phases = [max(group, key=lambda parts: sum(p.cycles for p in parts))
              for group in (loops, products)]
    critical = phases[0] + phases[1]
    if len(slices) == 1:
        stats = combined(critical, op="lstm_backward", split=_split(critical),
                         launches=len(critical))
    else:
        stats = combined([chip([combined(parts) for parts in group], rows=slices)
                          for group in (loops, products)],
                         op="lstm_backward", split=_split(critical), launches=len(critical))
    return (dx.reshape(steps, batch, inputs), dh, dc, dW, dR, db), stats
