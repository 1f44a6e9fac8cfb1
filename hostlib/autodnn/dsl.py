"""The swAutoDNN text DSL (Fang 2019 Fig. 6.3), parsed with lark into the IR of ir.py, and the
embedded Python builder for the same IR.

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

from lark import Lark, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

from ...errors import ArgumentTypeError
from .ir import Access, Expr, For, GemmOp, Registry, ScheduleError, Seed, Tensor, walk

GRAMMAR = r"""
start: "Schedule" "Seed" decl* stmt* strategies?
strategies: "Schedule" "Strategies" decl* strategy*

?decl: "Var" NAME ("," NAME)* ";"                     -> var_decl
     | "ConstVar" const_item ("," const_item)* ";"    -> const_decl
     | "Tensor" tensor_item ("," tensor_item)* ";"    -> tensor_decl
const_item: NAME "(" param ")"
tensor_item: NAME "(" NAME ("," NAME)* ")"

?stmt: for_stmt | gemm_stmt
for_stmt: "For" "(" NAME "," expr "," expr "," expr ")" "{" stmt* "}" ";"?
gemm_stmt: "gemm_op" "(" STRING "," dim "," dim "," dim "," access "," access "," access ")" ")"? ";"
dim: NAME
access: NAME "(" (pin ("," pin)*)? ")"
pin: "{" NAME "," expr "}"

?strategy: "split" "(" NAME "," NAME "," NAME "," param ")" ";"        -> split
         | "reorder" "(" "{" NAME ("," NAME)* "}" ")" ";"              -> reorder
         | "fuse" "(" NAME "," target "," NAME ")" ";"                 -> fuse
         | "layout" "(" STRING "," NAME "," NAME "," NAME ")" ";"      -> layout
         | "vectorization" "(" STRING "," NAME ")" ";"                 -> vectorization
?target: STRING -> op_target
       | NAME   -> loop_target

?param: expr | "{" expr ("," expr)* "}" -> param_set

?expr: term | expr "+" term -> add | expr "-" term -> sub
?term: atom | term "*" atom -> mul
?atom: INT -> number | NAME -> symbol | "(" expr ")" | "-" atom -> neg

NAME: /[A-Za-z_][A-Za-z0-9_]*/
COMMENT: "//" /[^\n]*/ | "#" /[^\n]*/
%import common.INT
%import common.ESCAPED_STRING -> STRING
%import common.WS
%ignore WS
%ignore COMMENT
"""

_PARSER = Lark(GRAMMAR, parser="lalr", propagate_positions=True)


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


@v_args(meta=True)
class _Build(Transformer):
    def __init__(self):
        super().__init__()
        self.registry = Registry()

    # expressions
    def number(self, meta, children):
        return Expr(const=int(children[0]))

    def symbol(self, meta, children):
        return Expr({str(children[0]): 1})

    def add(self, meta, children):
        return children[0] + children[1]

    def sub(self, meta, children):
        return children[0] - children[1]

    def mul(self, meta, children):
        try:
            return children[0] * children[1]
        except ValueError:
            raise ScheduleError("affine", f"{children[0]} * {children[1]} is not affine",
                                meta.line) from None

    def neg(self, meta, children):
        return -children[0]

    def param_set(self, meta, children):
        values = []
        for expr in children:
            if expr.constant() is None:
                raise ScheduleError("parameter set", f"set element {expr} is not a constant",
                                    meta.line)
            values.append(expr.const)
        return tuple(values)

    # declarations
    def var_decl(self, meta, children):
        for name in children:
            self.registry.vars[str(name)] = meta.line
        return None

    def const_item(self, meta, children):
        name, value = str(children[0]), children[1]
        if isinstance(value, tuple):
            self.registry.params[name] = list(value)
            value = Expr(const=value[0])
        unknown = value.names - set(self.registry.consts)
        if unknown:
            raise ScheduleError("declared before use", f"ConstVar {name} uses unknown "
                                f"{sorted(unknown)}", meta.line)
        self.registry.consts[name] = value
        return None

    def const_decl(self, meta, children):
        return None

    def tensor_item(self, meta, children):
        name, dims = str(children[0]), [str(d) for d in children[1:]]
        unknown = [d for d in dims if d not in self.registry.consts]
        if unknown:
            raise ScheduleError("tensor dimensions are ConstVars", f"Tensor {name} has "
                                f"undeclared dimensions {unknown}", meta.line)
        self.registry.tensors[name] = Tensor(name, dims, meta.line)
        return None

    def tensor_decl(self, meta, children):
        return None

    # statements
    def for_stmt(self, meta, children):
        it, lo, step, hi, *body = children
        return For(str(it), lo, step, hi, [b for b in body if b is not None], line=meta.line)

    def dim(self, meta, children):
        return [str(children[0])]

    def pin(self, meta, children):
        return str(children[0]), children[1]

    def access(self, meta, children):
        return Access(str(children[0]), dict(children[1:]), meta.line)

    def gemm_stmt(self, meta, children):
        name, m, n, k, a, b, c = children
        return GemmOp(name[1:-1], m, n, k, a, b, c, line=meta.line)

    # strategies
    def _strategy(self, op, meta, children):
        return Strategy(op, tuple(children), meta.line)

    def split(self, meta, children):
        it, out, inner, factor = children
        if isinstance(factor, tuple):
            factor = _split_parameter(self.registry, factor)
        return Strategy("split", (str(it), str(out), str(inner), factor), meta.line)

    def reorder(self, meta, children):
        return Strategy("reorder", tuple(str(c) for c in children), meta.line)

    def op_target(self, meta, children):
        return ("op", str(children[0])[1:-1])

    def loop_target(self, meta, children):
        return ("loop", str(children[0]))

    def fuse(self, meta, children):
        return Strategy("fuse", (str(children[0]), children[1], str(children[2])), meta.line)

    def layout(self, meta, children):
        return Strategy("layout", (str(children[0])[1:-1],) + tuple(str(c) for c in children[1:]),
                        meta.line)

    def vectorization(self, meta, children):
        return Strategy("vectorization", (str(children[0])[1:-1], str(children[1])), meta.line)

    def strategies(self, meta, children):
        return [c for c in children if isinstance(c, Strategy)]

    def start(self, meta, children):
        body = [c for c in children if isinstance(c, (For, GemmOp))]
        strategies = next((c for c in children if isinstance(c, list)), [])
        return Program(Seed(self.registry, body), strategies)


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
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as exc:
        raise ScheduleError("syntax", f"column {exc.column}: unexpected input "
                            f"{exc.get_context(text).strip()!r}", exc.line) from None
    try:
        program = _Build().transform(tree)
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


_EXPR_PARSER = Lark(GRAMMAR, parser="lalr", start="expr")


def _parse_expr(text: str) -> Expr:
    try:
        return _Build().transform(_EXPR_PARSER.parse(text))
    except UnexpectedInput as exc:
        raise ScheduleError("syntax", f"bad expression {text!r}", None) from exc
