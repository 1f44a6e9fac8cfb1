"""swAutoDNN (Fang 2019 ch. 6, docs/autodnn.md): a schedule language whose loop nests around
the LDM GEMM primitive compile to CPE assembly, with inferred DMAs, double buffering and a
model-based tuner.

    program = load(text)                      # the DSL (dsl.py) or dsl.Builder().program()
    gen = build(program, {"Sco": 32})         # strategies applied, DMAs placed, assembly out
    outputs, stats = run(gen, {"A": x, "B": w, "C": y})
"""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError
from ...vm import Machine
from .codegen import Generated, generate
from .dsl import Builder, Program, parse
from .ir import ScheduleError, format_seed
from .optimize import plan
from .schedule import apply, bindings

__all__ = ["Builder", "Program", "ScheduleError", "Generated", "load", "build", "run",
           "bindings", "format_seed", "reference"]


def load(text: str) -> Program:
    """The schedule program written in the DSL `text` (dsl.py)."""
    return parse(text)


def build(program: Program, binding: dict | None = None, *, accumulate: bool = False,
          ldm_bytes: int = 64 * 1024, dtype="float64") -> Generated:
    """The generated kernel of `program` with its parameter sets bound to `binding`, for
    float64 or float32 data."""
    scheduled = apply(program, binding)
    return generate(plan(scheduled), accumulate=accumulate, ldm_bytes=ldm_bytes,
                    dtype=np.dtype(dtype).name)


def _declared(program_or_gen, name):
    return program_or_gen.plan.seed.registry.tensors[name].dims


def run(gen: Generated, arrays: dict, *, declared: dict | None = None, machine=None,
        engine: str = "c"):
    """Run `gen` on `arrays` (tensor name -> array, converted to the kernel's dtype). An array is in the generated
    kernel's layout, or in `declared[name]`'s dimension order (transposed on the host). Returns
    ({tensor: array in the same order as given}, Stats); the output C is written (or
    accumulated into, if the kernel was generated with accumulate=True)."""
    machine = machine or Machine()
    if machine.config.num_cpes != 64:
        raise ArgumentError("a generated kernel needs an 8 x 8 CPE mesh")
    consts = gen.plan.seed.registry.const_values()
    declared = declared or {}
    addresses, orders = [], {}
    for name in gen.tensors:
        if name not in arrays:
            raise ArgumentError(f"arrays: missing tensor {name!r}")
        dims = gen.plan.seed.registry.tensors[name].dims
        given = declared.get(name, dims)
        order = [given.index(d) for d in dims]
        array = np.asarray(arrays[name], gen.dtype)
        expected = tuple(consts[d] for d in given)
        if array.shape != expected:
            raise ArgumentError(f"arrays[{name!r}] has shape {array.shape}, the kernel needs "
                                f"{expected} ({', '.join(given)})")
        orders[name] = (given, dims)
        addresses.append(machine.mem.put(np.ascontiguousarray(array.transpose(order))))
    stats = gen.kernel.launch(machine, addresses, flops=gen.plan.flops, engine=engine,
                              details=dict(engine=engine, ldm_bytes=gen.ldm_bytes))
    out_name = gen.plan.operands["c"].tensor
    given, dims = orders[out_name]
    result = machine.mem.get(addresses[gen.tensors.index(out_name)],
                             tuple(consts[d] for d in dims), gen.dtype)
    return {out_name: result.transpose([dims.index(d) for d in given])}, stats


def reference(program: Program, arrays: dict, binding: dict | None = None) -> np.ndarray:
    """The seed's gemm_op evaluated with numpy, loop by loop, on arrays in the declared
    layout (a test oracle: the seed before any strategy). Returns the output tensor."""
    from .schedule import bind
    from .ir import gemms, For
    seed = bind(program.seed, binding or {})
    consts = seed.registry.const_values()
    (gemm, loops), = gemms(seed)
    out = {k: np.array(v, np.float64) for k, v in arrays.items()}

    def matrix(acc, rows, cols, env):
        dims = seed.registry.tensors[acc.tensor].dims
        index = tuple(acc.index[d].value({**consts, **env}) if d in acc.index else slice(None)
                      for d in dims)
        free = [d for d in dims if d not in acc.index]
        view = out[acc.tensor][index]
        return view if free == [rows, cols] else view.T

    def nest(depth, env):
        if depth == len(loops):
            a = matrix(gemm.a, gemm.m[-1], gemm.k[-1], env)
            b = matrix(gemm.b, gemm.k[-1], gemm.n[-1], env)
            c = matrix(gemm.c, gemm.m[-1], gemm.n[-1], env)
            c += a @ b
            return
        loop: For = loops[depth]
        ctx = {**consts, **env}
        for value in range(loop.min.value(ctx), loop.max.value(ctx), loop.stride.value(ctx)):
            nest(depth + 1, {**env, loop.iter: value})

    nest(0, {})
    return out[gemm.c.tensor]
