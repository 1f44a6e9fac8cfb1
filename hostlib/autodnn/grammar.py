"""The DSL's grammar and the lark transformer from its trees to the IR (dsl.py imports this
module on the first parse, so that importing the library does not build the parsers)."""
from __future__ import annotations

from lark import Lark, Transformer, v_args

from .dsl import Program, Strategy, _split_parameter
from .ir import Access, Expr, For, GemmOp, Registry, ScheduleError, Seed, Tensor

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

PARSER = Lark(GRAMMAR, parser="lalr", propagate_positions=True)
EXPR_PARSER = Lark(GRAMMAR, parser="lalr", start="expr")


@v_args(meta=True)
class Build(Transformer):
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
