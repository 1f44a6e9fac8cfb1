"""The swAutoDNN text DSL (Fang 2019 Fig. 6.3), parsed with lark (grammar.py, imported on the first
parse) into the IR of ir.py, and the embedded Python builder for the same IR.

A program is ``Schedule Seed`` (declarations ``Var``, ``ConstVar``, ``Tensor``, then ``For``
nests around ``gemm_op``) and optionally ``Schedule Strategies`` (more declarations, then
``split``, ``reorder``, ``fuse``, ``layout``, ``vectorization``). A ``ConstVar`` or a split
factor may be a parameter set ``{2, 4, 8}``: the schedule space is the Cartesian product.

Fig. 6.3's listing is accepted as printed: a ``For`` declares its iterator (the listing loops
over an undeclared ``cRo``), ``gemm_op(...)`` may be followed by a stray ``)``, and tensors and
variables have separate namespaces (``B`` is both there).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ArgumentTypeError
from .ir import Access, Expr, For, GemmOp, Registry, ScheduleError, Seed, Tensor, walk



@dataclass
class Strategy:
    """One schedule strategy: `op` and its arguments (names, ints or parameter names)."""
    op: str
    args: tuple
    line: int | None = None


@dataclass
class Program:
    """A seed (the computation) and the strategies that schedule it."""
    seed: Seed
    strategies: list = field(default_factory=list)
    name: str | None = None


def _split_parameter(registry: Registry, values) -> Expr:
    """A split factor given as a set: a parameter _split<n> of the schedule space."""
    name = f"_split{sum(p.startswith('_split') for p in registry.params) + 1}"
    registry.params[name] = list(values)
    registry.consts[name] = Expr(const=values[0])
    return Expr({name: 1})


def parse(text: str) -> Program:
    """The Program of a DSL text; a syntax error or a semantic one raises ScheduleError naming
    the line."""
    if not isinstance(text, str):
        raise ArgumentTypeError(f"a schedule must be DSL text (a str), got {type(text).__name__}")
    from lark.exceptions import UnexpectedInput, VisitError
    from .grammar import PARSER, Build      # lark only when a text is parsed
    try:
        tree = PARSER.parse(text)
    except UnexpectedInput as exc:
        raise ScheduleError("syntax", f"column {exc.column}: unexpected input "
                            f"{exc.get_context(text).strip()!r}", exc.line) from None
    try:
        program = Build().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, ScheduleError):
            raise exc.orig_exc from None
        raise
    check(program.seed)
    return program


def check(seed: Seed) -> None:
    """Every symbol of the seed is declared or a loop iterator in scope, every access names a
    tensor and its dimensions, and the gemm_op's dimensions match its operands' free ones."""
    reg = seed.registry
    for node, loops in walk(seed.body):
        scope = set(reg.consts) | {loop.iter for loop in loops}
        if isinstance(node, For):
            for expr in (node.min, node.stride, node.max):
                _check_names(expr, set(reg.consts) | {loop.iter for loop in loops}, node.line)
            if node.iter in reg.consts or node.iter in reg.tensors:
                raise ScheduleError("loop iterator", f"For iterator {node.iter} is also a "
                                    "ConstVar or Tensor", node.line)
        if not isinstance(node, GemmOp):
            continue
        for dims in (node.m, node.n, node.k):
            if dims[-1] not in reg.consts:
                raise ScheduleError("unknown variable", f"gemm_op dimension {dims[-1]} is not "
                                    "a ConstVar", node.line)
        wanted = {"a": (node.m, node.k), "b": (node.k, node.n), "c": (node.m, node.n)}
        for key, acc in (("a", node.a), ("b", node.b), ("c", node.c)):
            tensor = reg.tensors.get(acc.tensor)
            if tensor is None:
                raise ScheduleError("unknown variable", f"unknown tensor {acc.tensor}", acc.line)
            for dim, expr in acc.index.items():
                if dim not in tensor.dims:
                    raise ScheduleError("unknown variable", f"tensor {acc.tensor} has no "
                                        f"dimension {dim}", acc.line)
                _check_names(expr, scope, acc.line)
            free = {d for d in tensor.dims if d not in acc.index}
            expected = {dims[-1] for dims in wanted[key]}
            if free != expected:
                raise ScheduleError("operand dimensions", f"operand {acc.tensor} leaves "
                                    f"{sorted(free)} free, the gemm_op needs {sorted(expected)}",
                                    acc.line)


def _check_names(expr: Expr, scope: set, line) -> None:
    unknown = expr.names - scope
    if unknown:
        raise ScheduleError("unknown variable", f"unknown variable {sorted(unknown)[0]} in "
                            f"{expr}", line)


class Builder:
    """The embedded Python face of the DSL: the same seed, built by calls.

        b = Builder()
        b.const(Ro=8, Co=8, B=128)
        b.tensor("A", "Ri", "Ci", "Ni", "B")
        with b.loop("cRo", "Ro"):
            b.gemm("op1", "B", "No", "Ni", b.at("A", Ri="cRo+cKr"), ...)
    """

    def __init__(self):
        self.registry = Registry()
        self._stack = [[]]
        self.strategies = []

    @staticmethod
    def expr(value) -> Expr:
        if isinstance(value, str) and not value.isidentifier():
            return _parse_expr(value)
        return Expr.of(value)

    def var(self, *names):
        for name in names:
            self.registry.vars[name] = None
        return self

    def const(self, **values):
        for name, value in values.items():
            if isinstance(value, (list, tuple, set)):
                self.registry.params[name] = sorted(value)
                value = sorted(value)[0]
            self.registry.consts[name] = self.expr(value)
        return self

    def tensor(self, name, *dims):
        self.registry.tensors[name] = Tensor(name, list(dims))
        return self

    def loop(self, it, hi, lo=0, stride=1):
        builder = self

        class _Loop:
            def __enter__(self):
                builder._stack.append([])

            def __exit__(self, *exc):
                body = builder._stack.pop()
                builder._stack[-1].append(For(it, builder.expr(lo), builder.expr(stride),
                                              builder.expr(hi), body))
        return _Loop()

    def at(self, tensor, **pins):
        return Access(tensor, {dim: self.expr(e) for dim, e in pins.items()})

    def gemm(self, name, m, n, k, a, b, c):
        self._stack[-1].append(GemmOp(name, [m], [n], [k], a, b, c))
        return self

    def strategy(self, op, *args):
        if op == "split" and isinstance(args[3], (list, tuple)):
            args = args[:3] + (_split_parameter(self.registry, args[3]),)
        elif op == "split":
            args = args[:3] + (self.expr(args[3]),)
        elif op == "fuse":
            kind = "op" if args[1] in {g.name for g in self._gemms()} else "loop"
            args = (args[0], (kind, args[1]), args[2])
        self.strategies.append(Strategy(op, tuple(args)))
        return self

    def _gemms(self):
        return [n for n, _ in walk(self._stack[0]) if isinstance(n, GemmOp)]

    def program(self) -> Program:
        seed = Seed(self.registry, list(self._stack[0]))
        check(seed)
        return Program(seed, list(self.strategies))




def _parse_expr(text: str) -> Expr:
    from lark.exceptions import UnexpectedInput
    from .grammar import EXPR_PARSER, Build
    try:
        return Build().transform(EXPR_PARSER.parse(text))
    except UnexpectedInput as exc:
        raise ScheduleError("syntax", f"bad expression {text!r}", None) from exc
