"""The auto-tuner (Fang 2019 §6.4): enumerate the schedule space (every program variant x every
assignment of its parameter sets), prune what the primitive or the LDM refuses, and rank the
rest by the model T = max(T_DMA, T_compute) per primitive call (the generated code overlaps
the two), built from the project's models: the primitive's fitted eq. 4-2
(``gemm_model.primitive_cycles``) and the DMA engine's transactions (eq. 3-1/3-2,
``gemm_model.transactions`` / ``put_engine_cycles``). The measured mode runs every candidate
on the VM instead -- sampled: the outermost loop cut to a few iterations and the cycles
scaled -- the black-box baseline the model is judged against.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ...vm import Machine
from ...vm.config import VMConfig
from ..blas import gemm_model
from .codegen import Generated
from .dsl import Program
from .ir import Expr, ScheduleError
from .optimize import MESH

# CPE cycles of the generated code around a primitive call (waits, the successor and
# address arithmetic, descriptor building; counted from the listing: about 40 instructions
# per DMA and 30 around the call) and per C element zeroed (a vstd per 4 doubles).
STEP_CYCLES = 120.0
ZERO_CYCLES_PER_ELEMENT = 0.25
# float32 (the primitive's strategy 2): a widened or narrowed element (a vector load and store
# per 4; gemm_model.PACK_CYCLES["natural_s"])
WIDEN_CYCLES_PER_ELEMENT = gemm_model.PACK_CYCLES["natural_s"]


@dataclass
class Candidate:
    program: Program
    binding: dict
    generated: Generated | None = None
    refused: str | None = None
    error: ScheduleError | None = None
    predicted: float | None = None
    measured: float | None = None

    @property
    def label(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.binding.items())
        return f"{self.program.name or 'schedule'}({params})"


@dataclass
class Tuning:
    best: Candidate
    candidates: list
    mode: str
    seconds: float
    feasible: list = field(default_factory=list)


def with_consts(program: Program, **values) -> Program:
    """A copy of `program` with ConstVars set (a shape: the CLI's --shape NAME=VALUE)."""
    from .dsl import Program as P
    seed = program.seed.copy()
    for name, value in values.items():
        if name not in seed.registry.consts:
            raise ScheduleError("unknown variable", f"--shape {name}: no ConstVar {name}")
        seed.registry.consts[name] = Expr(const=int(value))
        seed.registry.params.pop(name, None)
    return P(seed, list(program.strategies), program.name)


def _block_rows(op, es, base) -> tuple:
    """(starts, ends, valid) byte ranges of the 64 CPEs' rows of an operand's block at element
    `base`."""
    cpe = (np.add.outer(op.offsets["i"], op.offsets["j"]).ravel() + base) * es
    starts = cpe[:, None] + np.arange(op.rows)[None, :] * (op.pitch * es)
    ends = starts + (op.vec * es - 1)
    return starts, ends, np.ones(starts.shape, bool)


def _engine_cycles(direction, op, es, at_env, config, costs: dict) -> int:
    """The DMA engine's cycles for the 64 CPEs' `direction` ("get" or "put") requests of an
    operand's block at the iteration `at_env`, remembered in `costs` by the block's geometry
    (a tuning's candidates share most: 11 of 33 blocks differ at B = 32, 36 of 198 at 128)."""
    base = op.base.value(at_env)
    key = (direction, op.rows, op.vec, op.pitch, es, base, tuple(op.offsets["i"]),
           tuple(op.offsets["j"]))
    if key not in costs:
        cycles = gemm_model.get_engine_cycles if direction == "get" else \
            gemm_model.put_engine_cycles
        costs[key] = cycles(*_block_rows(op, es, base), config)
    return costs[key]


def predict(gen: Generated, config: VMConfig, costs: dict | None = None) -> float:
    """Predicted cycles of a generated kernel: per primitive call max(T_DMA, T_compute), the
    C tiles' zeroing, and the first call's exposed DMA. `costs`: DMA engine cycles of block
    geometries already met (on the same `config`), shared by the candidates of a tuning."""
    costs = {} if costs is None else costs
    plan = gen.plan
    consts = plan.seed.registry.const_values()
    trips = list(plan.trips.values())
    calls = math.prod(trips)
    first = {**consts, **{l.iter: l.min.value(consts) for l in plan.loops}}
    engine = 0.0
    exposed = 0.0             # resident blocks: fetched and waited for before their calls
    for key in "ab":
        op = plan.operands[key]
        fetches = math.prod(trips[:op.depth + 1])
        # the engine's time for the 64 CPEs' requests: lines, and a strided block's own cost
        block = _engine_cycles("get", op, gen.es, first, config, costs)
        if op.spans:
            blocks = math.prod(trips[n] for n, l in enumerate(plan.loops)
                               if l.iter in op.spans)
            exposed += block * fetches * blocks
            continue
        if op.window:         # p's first iteration fills the ring, each later one adds a block
            fills = math.prod(trips[:op.depth])
            q_trips = trips[[l.iter for l in plan.loops].index(op.window[1])]
            exposed += fills * gemm_model.dma_cycles(
                block * q_trips, config)
            engine += block * (fetches - fills) / calls
            continue
        engine += block * fetches / calls
    c = plan.operands["c"]
    depth = c.depth
    tiles = math.prod(trips[:depth + 1])
    engine += _engine_cycles("put", c, gen.es, first, config, costs) * tiles / calls
    dma = gemm_model.dma_cycles(engine, config)
    b = plan.blocks
    compute = gemm_model.primitive_cycles(b["m"], b["n"], b["k"]) + STEP_CYCLES
    if gen.dtype == "float32":    # strategy 2 widens A, B, C and narrows C on every call
        compute += WIDEN_CYCLES_PER_ELEMENT * (b["k"] * (b["m"] + b["n"]) + 2 * b["m"] * b["n"])
    zero = tiles * c.elements * ZERO_CYCLES_PER_ELEMENT
    return calls * max(dma, compute) + zero + dma + exposed


def space(programs, dtype: str = "float64") -> list:
    """Every candidate of the programs' schedule spaces, built for `dtype` (or refused, with
    the reason: the pruning). The strategies give a seed's gemm_op the same parts at any
    constant values, so once one program of a loop nest and strategies is scheduled, the
    primitive constraints of the others (other bindings, other shapes of the same text) are
    checked on its gemm_op before anything is built: most refusals, the same error, no build."""
    from .codegen import generate
    from .ir import gemms
    from .optimize import plan, primitive_extents
    from .schedule import apply, bindings, bound_values
    scheduled_gemms = {}      # structure -> the gemm_op of one scheduled seed
    structures = {}           # structure -> its number (hashed once per program)
    out = []
    for program in programs:
        structure = structures.setdefault(_structure(program), len(structures))
        for binding in bindings(program):
            cand = Candidate(program, binding)
            try:
                if structure in scheduled_gemms:
                    primitive_extents(scheduled_gemms[structure],
                                      bound_values(program.seed.registry, binding))
                seed = apply(program, binding)
                found = gemms(seed)
                if len(found) == 1:
                    scheduled_gemms[structure] = found[0][0]
                cand.generated = generate(plan(seed), dtype=np.dtype(dtype).name)
            except ScheduleError as exc:
                cand.refused, cand.error = str(exc), exc
            out.append(cand)
    return out


def _structure(program: Program) -> tuple:
    """What scheduling a program does, constants aside: its loop nest and strategies (a key
    of the nodes' fields, the Exprs themselves: printing the nest was a tenth of tuning)."""
    return (_nest(program.seed.body),
            tuple((s.op, tuple(map(str, s.args))) for s in program.strategies))


def _nest(nodes) -> tuple:
    """A loop nest's key: Exprs as their terms in order (equal nests written alike compare
    equal; a differently ordered Expr only makes another structure) -- no sorting hash."""
    from .ir import For, GemmOp

    def expr(e):
        return tuple(e.terms.items()), e.const
    key = []
    for node in nodes:
        if isinstance(node, For):
            key.append((node.iter, expr(node.min), expr(node.stride), expr(node.max),
                        _nest(node.body)))
        elif isinstance(node, GemmOp):
            key.append((node.name, tuple(node.m), tuple(node.n), tuple(node.k), node.layout,
                        node.vector, *((acc.tensor, tuple((dim, expr(e))
                                                          for dim, e in acc.index.items()))
                                       for acc in (node.a, node.b, node.c))))
        else:
            raise ScheduleError("one gemm_op", f"a seed's nest holds loops and a gemm_op, "
                                f"not {type(node).__name__}", node.line)
    return tuple(key)


def _sampled(program: Program, sample: int) -> tuple:
    """(program with its outermost loop cut to `sample` iterations, full / sampled calls),
    or (program, 1) when the outermost loop's extent is not a plain ConstVar."""
    from .ir import For
    outer = next((n for n in program.seed.body if isinstance(n, For)), None)
    if outer is None or len(outer.max.terms) != 1 or outer.max.const or \
            list(outer.max.terms.values()) != [1]:
        return program, 1.0
    name = next(iter(outer.max.terms))
    extent = program.seed.registry.const_values()[name]
    if extent <= sample:
        return program, 1.0
    return with_consts(program, **{name: sample}), extent / sample


def measure(cand: Candidate, machine: Machine, sample: int | None = 2,
            engine: str = "c") -> float:
    """The candidate's cycles on the VM, sampled over `sample` outermost iterations and scaled
    (None: run whole); inputs are random (timing does not depend on values)."""
    from . import build, run
    program, scale = _sampled(cand.program, sample) if sample else (cand.program, 1.0)
    gen = build(program, cand.binding, dtype=cand.generated.dtype if cand.generated else
                "float64")
    consts = gen.plan.seed.registry.const_values()
    rng = np.random.default_rng(0)
    arrays = {t: rng.standard_normal([consts[d] for d in gen.plan.seed.registry.tensors[t].dims])
              .astype(gen.dtype) for t in gen.tensors}
    _, stats = run(gen, arrays, machine=machine, engine=engine)
    return stats.cycles * scale


def tune(programs, mode: str = "model", *, machine: Machine | None = None,
         config: VMConfig | None = None, sample: int = 2, dtype: str = "float64",
         progress=None) -> Tuning:
    """The best candidate of the programs' space by `mode` ("model": on `config`, default the
    machine's; or "measured": runs on `machine`)."""
    if mode not in ("model", "measured"):
        raise ScheduleError("tune", f"tune mode must be 'model' or 'measured', got {mode!r}")
    if mode == "measured" or config is None:
        machine = machine or Machine(config) if config else machine or Machine()
        config = machine.config
    start = time.perf_counter()
    candidates = space(programs, dtype)
    feasible = [c for c in candidates if c.generated is not None]
    if len(candidates) == 1 and not feasible:
        raise candidates[0].error
    if not feasible:
        reasons = "; ".join(sorted({c.refused for c in candidates}))
        raise ScheduleError("no feasible schedule", f"every candidate is refused: {reasons}")
    costs = {}                # DMA engine cycles by block geometry, shared by the candidates
    for n, cand in enumerate(feasible):
        if mode == "model":
            cand.predicted = predict(cand.generated, config, costs)
        else:
            cand.measured = measure(cand, machine, sample)
        if progress:
            progress(n + 1, len(feasible))
    key = (lambda c: c.predicted) if mode == "model" else (lambda c: c.measured)
    best = min(feasible, key=key)
    return Tuning(best, candidates, mode, time.perf_counter() - start, feasible)
