"""Schedule strategies as IR rewrites (Fang 2019 §6.2): split, reorder, fuse (a loop into a
primitive dimension), layout, vectorization; and the schedule space, the Cartesian product of
the parameter sets.
"""
from __future__ import annotations

import itertools

from ...errors import ArgumentTypeError
from .dsl import Program, Strategy
from .ir import Expr, For, GemmOp, ScheduleError, Seed, walk

LAYOUT_FLAGS = ("notrans", "trans")
VECTOR_DIMS = {"VecM": "M", "VecN": "N"}
FUSE_TARGETS = {"inM": "m", "inN": "n", "inK": "k"}


def bindings(program: Program) -> list:
    """Every assignment of the parameter sets (name -> value), in a fixed order."""
    params = program.seed.registry.params
    names = list(params)
    return [dict(zip(names, values)) for values in itertools.product(*params.values())]


def bind(seed: Seed, binding: dict) -> Seed:
    """A copy of `seed` with the parameters set to `binding`'s values."""
    seed = seed.copy()
    if not isinstance(binding, dict):
        raise ArgumentTypeError(f"binding must be a dict of parameter values, got "
                                f"{type(binding).__name__}")
    for name, value in binding.items():
        if name not in seed.registry.params:
            raise ScheduleError("unknown variable", f"{name} is not a parameter of the schedule")
        seed.registry.consts[name] = Expr(const=int(value))
    return seed


def bound_values(registry, binding: dict) -> dict:
    """The ConstVars' values with the parameters set to `binding` (``bind``'s, without
    copying the seed)."""
    values = {}
    for name, expr in registry.consts.items():
        values[name] = int(binding[name]) if name in binding else expr.value(values)
    return values


def apply(program: Program, binding: dict | None = None) -> Seed:
    """The seed with the parameters bound and every strategy applied, in order."""
    seed = bind(program.seed, binding or {})
    for strategy in program.strategies:
        RULES[strategy.op](seed, strategy)
    return seed


def _constant(seed: Seed, expr: Expr, what: str, line) -> int:
    try:
        return expr.value(seed.registry.const_values())
    except ValueError:
        raise ScheduleError("constant bounds", f"{what} {expr} is not a constant", line) from None


def _find_loop(nodes, it, line):
    """(list holding the For over `it`, its index)."""
    for node, loops in walk(nodes):
        if isinstance(node, For) and node.iter == it:
            parent = loops[-1].body if loops else nodes
            return parent, _index(parent, node)
    raise ScheduleError("unknown variable", f"no loop over {it}", line)


def _substitute(nodes, values: dict) -> None:
    for node, _ in walk(nodes):
        if isinstance(node, For):
            node.min, node.stride, node.max = (e.subs(values) for e in
                                               (node.min, node.stride, node.max))
        elif isinstance(node, GemmOp):
            for acc in (node.a, node.b, node.c):
                acc.index = {dim: e.subs(values) for dim, e in acc.index.items()}


def _index(nodes, node) -> int:
    """The position of `node` itself in `nodes` (list.index compares whole subtrees)."""
    return next(n for n, each in enumerate(nodes) if each is node)


def _unit_loop(seed, loop, line):
    if loop.min != Expr() or loop.stride != Expr(const=1):
        raise ScheduleError("unit loop", f"loop {loop.iter} must run from 0 by 1", line)
    return _constant(seed, loop.max, f"the extent of {loop.iter}", line)


def split(seed: Seed, s: Strategy) -> None:
    it, outer, inner, factor = s.args
    parent, index = _find_loop(seed.body, it, s.line)
    loop = parent[index]
    extent = _unit_loop(seed, loop, s.line)
    f = _constant(seed, factor, "the split factor", s.line)
    if f < 1 or extent % f:
        raise ScheduleError("split divides", f"split factor {f} does not divide the "
                            f"extent {extent} of {it} (no boundary rule applies to a split)",
                            s.line)
    _substitute(loop.body, {it: Expr({outer: f, inner: 1})})
    # the inner extent stays the factor's expression (a parameter's name): the tuner checks
    # the primitive's constraints of other parameter values on it (tuner.space)
    inner_loop = For(inner, Expr(), Expr(const=1), Expr.of(factor), loop.body, line=s.line)
    parent[index] = For(outer, Expr(), Expr(const=1), Expr(const=extent // f), [inner_loop],
                        line=s.line)


def _perfect_nest(seed: Seed, first: str, line) -> tuple:
    """(parent list, index, the loops of the perfect nest from `first` down)."""
    parent, index = _find_loop(seed.body, first, line)
    chain = [parent[index]]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], For):
        chain.append(chain[-1].body[0])
    return parent, index, chain


def reorder(seed: Seed, s: Strategy) -> None:
    order = list(s.args)
    if len(set(order)) != len(order):
        raise ScheduleError("reorder", "reorder names a loop twice", s.line)
    # the outermost of the named loops starts the nest
    positions = {}
    for node, loops in walk(seed.body):
        if isinstance(node, For) and node.iter in order:
            positions[node.iter] = len(loops)
    missing = [it for it in order if it not in positions]
    if missing:
        raise ScheduleError("unknown variable", f"no loop over {missing[0]}", s.line)
    first = min(order, key=lambda it: positions[it])
    parent, index, chain = _perfect_nest(seed, first, s.line)
    chain = chain[:len(order)]
    if {loop.iter for loop in chain} != set(order):
        raise ScheduleError("reorder", f"loops {order} are not one perfect nest", s.line)
    by_iter = {loop.iter: loop for loop in chain}
    for loop in chain:
        for expr in (loop.min, loop.stride, loop.max):
            if expr.names & set(order):
                raise ScheduleError("reorder", f"the bounds of {loop.iter} depend on a "
                                    "reordered loop", s.line)
    body = chain[-1].body
    for it in reversed(order):
        old = by_iter[it]
        body = [For(it, old.min, old.stride, old.max, body, line=old.line)]
    parent[index] = body[0]


def _gemm(seed: Seed, name: str, line) -> tuple:
    for node, loops in walk(seed.body):
        if isinstance(node, GemmOp) and node.name == name:
            return node, loops
    raise ScheduleError("unknown variable", f"no gemm_op {name!r}", line)


def fuse(seed: Seed, s: Strategy) -> None:
    it, (kind, target), dim = s.args
    if kind == "loop":
        raise ScheduleError("fuse", f"fusing two loops ({it}, {target}) is not implemented; "
                            "fuse a loop into a primitive dimension (inM, inN, inK)", s.line)
    if dim not in FUSE_TARGETS:
        raise ScheduleError("fuse", f"fuse target must be one of {sorted(FUSE_TARGETS)}, got "
                            f"{dim}", s.line)
    gemm, loops = _gemm(seed, target, s.line)
    chain = [loop.iter for loop in loops]
    if it not in chain:
        raise ScheduleError("fuse", f"loop {it} does not enclose gemm_op {target!r}", s.line)
    start = chain.index(it)
    for loop in loops[start:]:
        if len(loop.body) != 1:
            raise ScheduleError("fuse", f"loop {it} is not in a perfect nest around "
                                f"{target!r}", s.line)
    operands = {"m": ("a", "c"), "n": ("b", "c"), "k": ("a", "b")}[FUSE_TARGETS[dim]]
    for key in ("a", "b", "c"):
        uses = any(it in e.names for e in getattr(gemm, key).index.values())
        if uses != (key in operands):
            raise ScheduleError("fuse", f"loop {it} fused {dim} must index exactly operands "
                                f"{' and '.join(operands)} (operand {key} "
                                f"{'does' if uses else 'does not'})", s.line)
    loop = loops[start]
    _unit_loop(seed, loop, s.line)
    parent = loops[start - 1].body if start else seed.body
    parent[_index(parent, loop)] = loop.body[0]
    parts = getattr(gemm, FUSE_TARGETS[dim])
    parts.insert(0, it)
    gemm.fused[it] = loop.max
    gemm.line = gemm.line or s.line


def layout(seed: Seed, s: Strategy) -> None:
    name, *flags = s.args
    if any(f not in LAYOUT_FLAGS for f in flags):
        raise ScheduleError("layout", f"layout flags must be {LAYOUT_FLAGS}, got {flags}",
                            s.line)
    gemm, _ = _gemm(seed, name, s.line)
    gemm.layout = tuple(flags)
    # the thesis' column-major convention: the first dimension listed is the contiguous one.
    # The operand's free dimensions go innermost in that order; the pinned ones stay outer,
    # in their declared order (their place decides whether a fused chunk is contiguous).
    orders = {"a": {"notrans": ("m", "k"), "trans": ("k", "m")},
              "b": {"notrans": ("k", "n"), "trans": ("n", "k")},
              "c": {"notrans": ("m", "n"), "trans": ("n", "m")}}
    for key, flag in zip("abc", flags):
        acc = getattr(gemm, key)
        tensor = seed.registry.tensors[acc.tensor]
        fast, slow = (getattr(gemm, d)[-1] for d in orders[key][flag])
        pinned = [d for d in tensor.dims if d in acc.index]
        tensor.dims = pinned + [slow, fast]


def vectorization(seed: Seed, s: Strategy) -> None:
    name, which = s.args
    if which not in VECTOR_DIMS:
        raise ScheduleError("vectorization", f"vectorization must be one of "
                            f"{sorted(VECTOR_DIMS)}, got {which}", s.line)
    gemm, _ = _gemm(seed, name, s.line)
    gemm.vector = VECTOR_DIMS[which]


RULES = {"split": split, "reorder": reorder, "fuse": fuse, "layout": layout,
         "vectorization": vectorization}
