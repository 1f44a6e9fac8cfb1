"""The swAutoDNN IR (Fang 2019 §6, Fig. 6.4): statement nodes ``For``, ``If``, ``Dma`` and
``GemmOp`` whose attributes are affine expressions over symbols (loop iterators, ``ConstVar``s)
and integer constants, a ``Registry`` of the variables and tensors, and a printer.

Children execute left to right. A ``Seed`` is the registry plus the root's children.
"""
from __future__ import annotations

from dataclasses import dataclass, field, is_dataclass
from types import MappingProxyType
from typing import Mapping, Optional

from ...errors import ArgumentError


class ScheduleError(ArgumentError):
    """A seed or strategy the system refuses; the message names the line and the rule."""

    def __init__(self, rule: str, message: str, line: Optional[int] = None):
        where = f"line {line}: " if line else ""
        super().__init__(f"{where}{message} [rule: {rule}]")
        self.rule, self.line = rule, line


class Expr:
    """An affine expression: sum of coefficient x symbol plus a constant (immutable)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const: int = 0):
        self.terms = {name: coef for name, coef in (terms or {}).items() if coef}
        self.const = int(const)

    @staticmethod
    def of(value) -> "Expr":
        if isinstance(value, Expr):
            return value
        if isinstance(value, str):
            return Expr({value: 1})
        if isinstance(value, int) and not isinstance(value, bool):
            return Expr(const=value)
        raise ArgumentError(f"an expression must be an int, a symbol name or an Expr, got "
                            f"{value!r}")

    def __add__(self, other):
        other = Expr.of(other)
        terms = dict(self.terms)
        for name, coef in other.terms.items():
            terms[name] = terms.get(name, 0) + coef
        return Expr(terms, self.const + other.const)

    __radd__ = __add__

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-Expr.of(other))

    def __rsub__(self, other):
        return Expr.of(other) - self

    def __mul__(self, other):
        other = Expr.of(other)
        if other.terms and self.terms:
            raise ArgumentError(f"({self}) * ({other}) is not affine")
        scalar, expr = (other.const, self) if not other.terms else (self.const, other)
        return Expr({n: c * scalar for n, c in expr.terms.items()}, expr.const * scalar)

    __rmul__ = __mul__

    def __eq__(self, other):
        return isinstance(other, Expr) and (self.terms, self.const) == (other.terms, other.const)

    def __hash__(self):
        return hash((tuple(sorted(self.terms.items())), self.const))

    @property
    def names(self) -> set:
        return set(self.terms)

    def subs(self, values: dict) -> "Expr":
        """Replace symbols by expressions (or ints)."""
        if values.keys().isdisjoint(self.terms):
            return self       # immutable: nothing to replace
        terms, const = {}, self.const
        for name, coef in self.terms.items():
            if name not in values:
                terms[name] = terms.get(name, 0) + coef
                continue
            value = Expr.of(values[name])
            for inner, inner_coef in value.terms.items():
                terms[inner] = terms.get(inner, 0) + coef * inner_coef
            const += coef * value.const
        return Expr(terms, const)

    def value(self, env: dict) -> int:
        value = self.const
        try:
            for name, coef in self.terms.items():      # a loop: sum() of a generator costs more
                value += coef * env[name]
            return value
        except KeyError:
            missing = sorted(self.names - set(env))
            raise ArgumentError(f"expression {self} has unbound symbols {missing}") from None

    def constant(self) -> Optional[int]:
        return None if self.terms else self.const

    def __str__(self):
        parts = []
        for name, coef in self.terms.items():
            parts.append(name if coef == 1 else f"-{name}" if coef == -1 else f"{coef}*{name}")
        if self.const or not parts:
            parts.append(str(self.const))
        return "+".join(parts).replace("+-", "-")

    __repr__ = __str__


@dataclass
class Tensor:
    """A tensor: its dimensions (ConstVar names), outermost first = its memory order."""
    name: str
    dims: list
    line: Optional[int] = None


@dataclass
class Access:
    """A gemm_op operand: `tensor` with some dimensions pinned to index expressions; the free
    dimensions are the operand's matrix dimensions."""
    tensor: str
    index: dict                 # dim -> Expr
    line: Optional[int] = None


@dataclass
class Node:
    line: Optional[int] = field(default=None, kw_only=True)


@dataclass
class For(Node):
    iter: str
    min: Expr
    stride: Expr
    max: Expr
    body: list


@dataclass
class If(Node):
    """if lhs < rhs then `then` else `orelse`."""
    lhs: Expr
    rhs: Expr
    then: list
    orelse: list = field(default_factory=list)


@dataclass
class GemmOp(Node):
    """C += A B with M x N x K. A primitive dimension is a list of parts (outermost first):
    the operand's own dimension (a ConstVar name) and loops fused into it (iterator names).
    `layout`: per operand "notrans"/"trans" (the thesis' column-major convention: A notrans
    has M contiguous, B trans has N contiguous, C notrans has M contiguous); `vector`: "M"
    (the primitive's nm variant, A is the vector operand) or "N" (mn)."""
    name: str
    m: list
    n: list
    k: list
    a: Access
    b: Access
    c: Access
    layout: tuple = ("notrans", "trans", "notrans")
    vector: str = "M"
    fused: dict = field(default_factory=dict)   # fused loop iterator -> its extent (Expr)


@dataclass
class Dma(Node):
    """One operand's block moved between memory and LDM by every CPE: `direction` "get" or
    "put", buffer name; `double` buffered with a prefetch of the next iteration's block
    (Algorithm 8). Address, size, block and stride are inferred by optimize.infer_dma."""
    operand: str                # "a", "b" or "c" of the gemm_op
    gemm: str
    direction: str
    buffer: str
    double: bool = False
    deps: tuple = ()            # the loop iterators its address uses
    prime: bool = False         # the priming DMA under the root
    spans: tuple = ()           # resident: one block per iteration of these loops, all fetched
    window: tuple = ()          # sliding window (p, q): the blocks of p + q kept over p


@dataclass
class Registry:
    vars: dict = field(default_factory=dict)      # name -> line of declaration
    consts: dict = field(default_factory=dict)    # name -> Expr (over other consts)
    params: dict = field(default_factory=dict)    # name -> list of candidate values
    tensors: dict = field(default_factory=dict)   # name -> Tensor

    def const_values(self) -> Mapping:
        """Every ConstVar's integer value (in declaration order, each over the earlier), read
        only. Remembered while the consts hold the same (immutable) Exprs: the optimiser and
        the tuner ask thousands of times per space (a copy per call was a tenth of tuning)."""
        items = tuple(self.consts.items())
        cached = self.__dict__.get("_values")
        if cached is not None and cached[0] == items:     # identical Exprs compare at C speed
            return cached[1]
        values = {}
        for name, expr in items:
            values[name] = expr.value(values)
        self._values = (items, MappingProxyType(values))
        return self._values[1]


@dataclass
class Seed:
    registry: Registry
    body: list

    def copy(self) -> "Seed":
        return _clone(self)


def _clone(value):
    """A deep copy of IR values: nodes (dataclasses), lists and dicts copied; Exprs (immutable),
    strings, numbers and tuples of them shared. The tuner copies a seed per candidate, and
    copy.deepcopy's generic walk was most of its time."""
    kind = type(value)
    if kind is list:      # shared leaves tested inline: a call per leaf was half the copy
        return [v if type(v) in _SHARED else _clone(v) for v in value]
    if kind is dict:
        return {k: v if type(v) in _SHARED else _clone(v) for k, v in value.items()}
    if kind in _SHARED or not is_dataclass(value):
        return value
    out = kind.__new__(kind)
    out.__dict__.update({k: v if type(v) in _SHARED else _clone(v)
                         for k, v in value.__dict__.items()})
    return out


_SHARED = {Expr, str, int, bool, tuple, type(None)}


def walk(nodes, loops=()):
    """Yield (node, enclosing For nodes outermost first) for every node, depth first. (A stack
    of iterators: nested generators passed every node up through each level.)"""
    stack = [(iter(nodes), loops)]
    while stack:
        children, loops = stack[-1]
        node = next(children, None)
        if node is None:
            stack.pop()
            continue
        yield node, loops
        if isinstance(node, For):
            stack.append((iter(node.body), loops + (node,)))
        elif isinstance(node, If):
            stack += [(iter(node.orelse), loops), (iter(node.then), loops)]


def gemms(seed: Seed) -> list:
    return [(node, loops) for node, loops in walk(seed.body) if isinstance(node, GemmOp)]


def _access(acc: Access) -> str:
    pins = ", ".join(f"{{{dim}, {expr}}}" for dim, expr in acc.index.items())
    return f"{acc.tensor}({pins})"


def _dim(parts) -> str:
    return "*".join(str(p) for p in parts) if len(parts) == 1 else "(" + ",".join(parts) + ")"


def format_nodes(nodes, indent: int = 0) -> list:
    pad = "  " * indent
    lines = []
    for node in nodes:
        if isinstance(node, For):
            lines.append(f"{pad}For({node.iter}, {node.min}, {node.stride}, {node.max}){{")
            lines += format_nodes(node.body, indent + 1)
            lines.append(f"{pad}}}")
        elif isinstance(node, If):
            lines.append(f"{pad}if ({node.lhs} < {node.rhs}) {{")
            lines += format_nodes(node.then, indent + 1)
            if node.orelse:
                lines.append(f"{pad}}} else {{")
                lines += format_nodes(node.orelse, indent + 1)
            lines.append(f"{pad}}}")
        elif isinstance(node, GemmOp):
            lines.append(f'{pad}gemm_op("{node.name}", {_dim(node.m)}, {_dim(node.n)}, '
                         f'{_dim(node.k)}, {_access(node.a)}, {_access(node.b)}, '
                         f'{_access(node.c)}) layout={",".join(node.layout)} '
                         f'vector={node.vector};')
        elif isinstance(node, Dma):
            kind = "prime " if node.prime else ""
            extra = " double-buffered" if node.double else ""
            if node.spans:
                extra = f" resident over {','.join(node.spans)}"
            if node.window:
                extra = f" window over {'+'.join(node.window)}"
            lines.append(f'{pad}{kind}dma {node.direction} "{node.gemm}".{node.operand} '
                         f'-> {node.buffer} (deps {",".join(node.deps) or "-"}){extra};')
    return lines


def format_seed(seed: Seed) -> str:
    """`seed` written back in the DSL."""
    reg = seed.registry
    lines = []
    if reg.vars:
        lines.append(f"Var {', '.join(reg.vars)};")
    if reg.consts:
        lines.append("ConstVar " + ", ".join(f"{n}({e})" for n, e in reg.consts.items()) + ";")
    if reg.tensors:
        lines.append("Tensor " + ", ".join(f"{t.name}({', '.join(t.dims)})"
                                           for t in reg.tensors.values()) + ";")
    return "\n".join(lines + format_nodes(seed.body))
