"""The code generator (Fang 2019 §6.5): CPE assembly for the project's assembler from a Plan.

The kernel is the optimised IR translated node by node (each block's comment names its node):
loops keep their iterators in the frame; a DMA node computes its operand's address from the
iterators (the block's base plus this CPE's chunk offsets, chosen once at entry from the CPE's
mesh row i and column j) and issues one strided get or put; a double-buffered input waits for
the block prefetched into the current buffer and issues the next iteration's block
(Algorithm 8: the loop nest's successor, carrying from inner to outer loops) into the other one;
the gemm_op calls the primitive's entry (gemm_prim_nm_d / gemm_prim_mn_d, linked from
kernels/gemm/gemm_prim.s). LDM buffers are laid out from the DMA nodes and the kernel's LDM
(buffers, reply words, stack) is checked against the budget. float64 data calls the double
primitive; float32 data the strategy-2 entries (widened in an LDM work area per call).

Output semantics: by default C is *written* (C = sum of the products): each C tile is zeroed
in LDM and put once, which needs every loop around C's placement to index C. With
``accumulate=True`` C is read, accumulated and written back (C += ...), at any placement.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from ...asm import assemble_object
from ...kernels import KERNEL_DIR, object_file
from ...kernels.athread import link_with_runtime
from ..runtime import Kernel
from ..runtime.kernel import align
from .ir import Dma, For, GemmOp, ScheduleError, format_nodes
from .optimize import Plan

ITEMSIZE = {"float64": 8, "float32": 4}
ENTRY = "autodnn_kernel"
LDM_END = "autodnn_ldm_end"
STACK = "autodnn_stack"
# the primitive's entry per vectorised dimension and precision (float32: strategy 2, the
# blocks widened in an LDM work area around the double primitive; docs/gemm.md)
PRIMITIVES = {("M", "float64"): "gemm_prim_nm_d", ("N", "float64"): "gemm_prim_mn_d",
              ("M", "float32"): "gemm_prim_nm_s2", ("N", "float32"): "gemm_prim_mn_s2"}
OUTGOING = 32                   # the frame's bottom: the primitive's stack argument (work area)
INCLUDE_DIRS = (str(KERNEL_DIR / "gemm"), str(KERNEL_DIR / "include"))
DMA_OP = {"get": "DMA_GET", "put": "DMA_PUT"}
DESC = "$20"                    # the descriptor register


@dataclass(frozen=True)
class GeneratedKernel(Kernel):
    """A generated kernel: `text` is its assembly, linked with the GEMM primitive."""
    text: str = field(default="", repr=False)

    @property
    def program(self):
        return _link(self.text)


@functools.lru_cache(maxsize=64)
def _link(text: str):
    generated = assemble_object(text, str(KERNEL_DIR / "gemm" / "autodnn_generated.s"),
                                INCLUDE_DIRS)
    return link_with_runtime([generated, object_file("gemm/gemm_prim.s")])


@functools.lru_cache(maxsize=None)
def _include_constant(name: str) -> int:
    """A constant of the primitive's interface header (gemm_prim.inc)."""
    text = (KERNEL_DIR / "gemm" / "gemm_prim.inc").read_text(encoding="utf-8")
    return int(re.search(rf"^\s*{name}\s*=\s*(\d+)", text, re.M).group(1))


@dataclass
class Generated:
    """What ``build`` made: its plan, the tensors its arguments point to, its LDM, and the
    kernel -- its assembly written on first use (the model tuner ranks hundreds of
    candidates from their plans and LDM and runs one)."""
    plan: Plan
    tensors: list               # argument order: a0, a1, ... = these tensors' addresses
    ldm_bytes: int              # LDM the kernel uses (data, buffers, stack)
    accumulate: bool
    dtype: str
    emitter: "_Emitter" = field(repr=False, compare=False)

    @functools.cached_property
    def kernel(self) -> GeneratedKernel:
        return GeneratedKernel(sources=(), entry=ENTRY, ldm_end=LDM_END, stack=STACK,
                               text=self.emitter.kernel())

    @property
    def es(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def text(self) -> str:
        return self.kernel.text


class _Emitter:
    def __init__(self, plan: Plan, accumulate: bool, ldm_limit: int, dtype: str):
        self.plan, self.accumulate, self.dtype = plan, accumulate, dtype
        self.es = ITEMSIZE[dtype]
        self.lines, self.labels = [], 0
        self.tensors = list(dict.fromkeys(op.tensor for op in plan.operands.values()))
        self.slots = {}
        for name in (["ra"] + [f"base_{t}" for t in self.tensors]
                     + [f"block_{k}" for k in "abc"] + [f"it_{l.iter}" for l in plan.loops]
                     + [f"next_{l.iter}" for l in plan.loops] + [f"parity_{k}" for k in "abc"]
                     + ["put_pending", "put_address", "put_ldm", "put_reply", "resident_a",
                        "resident_b", "window_a", "window_b"]):
            self.slots[name] = OUTGOING + 8 * len(self.slots)
        self.frame = align(OUTGOING + 8 * len(self.slots))
        # LDM: reply words (two per operand), then each operand's buffers
        self.ldm = {"reply": 0}
        address = 32
        self.buffers = {}
        for key, op in plan.operands.items():
            self.buffers[key] = (address, align(op.elements * self.es))
            address += self._copies(key) * align(op.elements * self.es)
        self.work = address     # float32: the primitive's double work area
        if dtype == "float32":
            b = plan.blocks
            address += align(8 * (b["k"] * b["m"] + b["k"] * b["n"] + b["m"] * b["n"]))
        self.ldm_end = address
        self.ldm_limit = ldm_limit
        # A tile's C put, issued as the tile ends, would queue ahead of the next tile's
        # second prefetch, which then arrives late; it is deferred past the next tile's first
        # prefetch (as the hand-written implicit convolution does) when an input is
        # prefetched inside C's tile. Not when accumulating: the next tile's get of C must
        # not pass a put that has not left.
        c_depth = plan.operands["c"].depth
        self.defer_put = not accumulate and c_depth >= 0 and any(
            self._double(k) and plan.operands[k].depth > c_depth for k in "ab")

    def _double(self, key) -> bool:
        op = self.plan.operands[key]
        return op.depth >= 0 and not op.spans and not op.window

    def _trips(self, iters) -> list:
        consts = self.plan.seed.registry.const_values()
        return [next(l for l in self.plan.loops if l.iter == it).max.value(consts)
                for it in iters]

    def _copies(self, key) -> int:
        """Blocks of `key` in LDM: 2 double-buffered, one per spanned iteration resident,
        trips(q) + 1 in a sliding window over (p, q)."""
        window = self.plan.operands[key].window
        if window:
            return self._trips(window[1:])[0] + 1
        count = 1
        for trips in self._trips(self.plan.operands[key].spans):
            count *= trips
        return 2 if self._double(key) else count

    def emit(self, line: str = "", indent: bool = True):
        self.lines.append(("\t" + line) if indent and line else line)

    def label(self) -> str:
        self.labels += 1
        return f".La{self.labels}"

    def slot(self, name) -> str:
        return f"S_{name}($sp)"

    # ---- pieces -------------------------------------------------------------------------
    def address(self, key: str, prefix: str, reg: str = "$1") -> None:
        """reg = the memory address of operand `key`'s block at the iterators in the frame
        slots `prefix`_<iter> ("it" current, "next" the successor)."""
        op = self.plan.operands[key]
        self.emit(f"ldl\t{reg}, {self.slot('block_' + key)}")
        for name, coef in op.base.terms.items():
            self.emit(f"ldl\t$2, {self.slot(f'{prefix}_{name}')}")
            self.emit(f"ldi\t$3, {coef * self.es}")
            self.emit("mull\t$2, $3, $2")
            self.emit(f"addl\t{reg}, $2, {reg}")
        if op.base.const:
            self.emit(f"ldi\t$2, {op.base.const * self.es}")
            self.emit(f"addl\t{reg}, $2, {reg}")

    def buffer(self, key: str, reg: str, other: bool = False) -> None:
        """reg = the LDM address of `key`'s current (or other) buffer; $7 = its reply word."""
        reply = 8 * "abc".index(key)
        if not self._double(key):
            self.emit(f"ldi\t{reg}, {key.upper()}_BUF")
            self.emit(f"ldi\t$7, REPLY + {reply}")
            return
        self.emit(f"ldl\t$5, {self.slot('parity_' + key)}")
        if other:
            self.emit("xor\t$5, 1, $5")
        self.emit(f"ldi\t$6, {self.buffers[key][1]}")
        self.emit("mull\t$5, $6, $6")
        self.emit(f"ldi\t{reg}, {key.upper()}_BUF")
        self.emit(f"addl\t{reg}, $6, {reg}")
        self.emit("s4addl\t$5, $31, $5")
        self.emit(f"ldi\t$7, REPLY + {reply}($5)")

    def issue(self, key: str, direction: str, counting: bool = False) -> None:
        """dma the block: memory address in $1, LDM address in $4, reply word in $7 (zeroed
        first unless `counting`: it counts several requests' replies)."""
        op = self.plan.operands[key]
        contiguous = op.pitch == op.vec
        if not counting:
            self.emit("stw\t$31, 0($7)")
        self.emit(f"ldi\t$2, {op.elements * self.es}")
        self.emit(f"ldi\t$3, {0 if contiguous else op.vec * self.es}")
        self.emit(f"ldi\t$5, {0 if contiguous else (op.pitch - op.vec) * self.es}")
        self.emit(f"ldi\t$6, {DMA_OP[direction]}")
        self.emit(f"MAKE_DESC_REGS {DESC}, $6, $2, $3, $5, $7")
        self.emit(f"dma\t{DESC}, $1, $4")

    def wait(self) -> None:
        """Spin until the reply word at $7 is non-zero."""
        top = self.label()
        self.emit(f"{top}:", indent=False)
        self.emit("ldw\t$2, 0($7)")
        self.emit(f"beq\t$2, {top}")

    def successor(self, depth: int, none_label: str) -> None:
        """Algorithm 8: next_<iter> = the iteration after the current one of the loops
        0..depth (inner loops carry into outer ones); branch to none_label after the last."""
        loops = self.plan.loops[:depth + 1]
        for loop in loops:
            self.emit(f"ldl\t$1, {self.slot('it_' + loop.iter)}")
            self.emit(f"stl\t$1, {self.slot('next_' + loop.iter)}")
        done = self.label()
        consts = self.plan.seed.registry.const_values()
        for loop in reversed(loops):
            step, hi, lo = (e.value(consts) for e in (loop.stride, loop.max, loop.min))
            self.emit(f"ldl\t$1, {self.slot('next_' + loop.iter)}")
            self.emit(f"ldi\t$1, {step}($1)")
            self.emit(f"ldi\t$2, {hi}")
            self.emit("cmplt\t$1, $2, $2")
            self.emit(f"stl\t$1, {self.slot('next_' + loop.iter)}")
            self.emit(f"bne\t$2, {done}")
            self.emit(f"ldi\t$1, {lo}")
            self.emit(f"stl\t$1, {self.slot('next_' + loop.iter)}   # carry")
        self.emit(f"br\t{none_label}")
        self.emit(f"{done}:", indent=False)

    def zero(self, reg: str, nbytes: int) -> None:
        top = self.label()
        self.emit(f"ldi\t$2, {nbytes}({reg})")
        self.emit(f"{top}:", indent=False)
        self.emit(f"vstd\t$31, 0({reg})")
        self.emit(f"ldi\t{reg}, 32({reg})")
        self.emit(f"cmplt\t{reg}, $2, $3")
        self.emit(f"bne\t$3, {top}")

    # ---- nodes ---------------------------------------------------------------------------
    def node(self, node, depth: int) -> None:
        self.emit(f"# IR {format_nodes([node])[0].strip()}")
        if isinstance(node, For):
            self.loop(node, depth)
        elif isinstance(node, Dma):
            self.dma(node, depth)
        elif isinstance(node, GemmOp):
            self.gemm(node)

    def loop(self, node: For, depth: int) -> None:
        consts = self.plan.seed.registry.const_values()
        lo, step, hi = (e.value(consts) for e in (node.min, node.stride, node.max))
        top = self.label()
        self.emit(f"ldi\t$1, {lo}")
        self.emit(f"stl\t$1, {self.slot('it_' + node.iter)}")
        self.emit(f"{top}:", indent=False)
        for child in node.body:
            self.node(child, depth + 1)
        for key in "abc":
            if self._double(key) and self.plan.operands[key].depth == depth:
                self.emit(f"ldl\t$1, {self.slot('parity_' + key)}   # swap {key}'s buffers")
                self.emit("xor\t$1, 1, $1")
                self.emit(f"stl\t$1, {self.slot('parity_' + key)}")
        self.emit(f"# end For({node.iter})")
        self.emit(f"ldl\t$1, {self.slot('it_' + node.iter)}")
        self.emit(f"ldi\t$1, {step}($1)")
        self.emit(f"stl\t$1, {self.slot('it_' + node.iter)}")
        self.emit(f"ldi\t$2, {hi}")
        self.emit("cmplt\t$1, $2, $2")
        self.emit(f"bne\t$2, {top}")

    def dma(self, node: Dma, depth: int) -> None:
        key = node.operand
        if node.prime:
            for loop in self.plan.loops:
                value = loop.min.value(self.plan.seed.registry.const_values())
                self.emit(f"ldi\t$1, {value}")
                self.emit(f"stl\t$1, {self.slot('next_' + loop.iter)}")
            self.address(key, "next")
            self.buffer(key, "$4")
            self.issue(key, "get")
            return
        if key == "c":
            self.output(node)
            return
        if node.spans:
            self.resident(key, node.spans)
            return
        if node.window:
            self.window(key, *node.window)
            return
        self.buffer(key, "$4")
        if not node.double:       # under the root: fetched once
            self.address(key, "it")
            self.issue(key, "get")
            self.wait()
            return
        self.wait()
        none = self.label()
        self.successor(self.plan.operands[key].depth, none)
        self.address(key, "next")
        self.buffer(key, "$4", other=True)
        self.issue(key, "get")
        self.emit(f"{none}:", indent=False)

    def resident(self, key: str, spans) -> None:
        """Fetch every block of `key` over the loops `spans` into consecutive LDM blocks (the
        spans' iterator slots serve as the walk's counters), then wait for all of them on a
        counting reply word."""
        reply = f"REPLY + {24 + 4 * 'ab'.index(key)}"
        nbytes = self.buffers[key][1]
        self.emit(f"stw\t$31, {reply}($31)")
        self.emit(f"ldi\t$1, {key.upper()}_BUF")
        self.emit(f"stl\t$1, {self.slot('resident_' + key)}")
        tops = []
        for it in spans:
            tops.append(self.label())
            self.emit(f"stl\t$31, {self.slot('it_' + it)}")
            self.emit(f"{tops[-1]}:", indent=False)
        self.address(key, "it")
        self.emit(f"ldl\t$4, {self.slot('resident_' + key)}")
        self.emit(f"ldi\t$7, {reply}")
        self.issue(key, "get", counting=True)
        self.emit(f"ldi\t$4, {nbytes}($4)")
        self.emit(f"stl\t$4, {self.slot('resident_' + key)}")
        for it, top, trips in reversed(list(zip(spans, tops, self._trips(spans)))):
            self.emit(f"ldl\t$1, {self.slot('it_' + it)}")
            self.emit("ldi\t$1, 1($1)")
            self.emit(f"stl\t$1, {self.slot('it_' + it)}")
            self.emit(f"ldi\t$2, {trips}")
            self.emit("cmplt\t$1, $2, $2")
            self.emit(f"bne\t$2, {top}")
        self.emit(f"ldi\t$3, {self._copies(key)}")
        self.emit(f"WAIT_COUNT {reply}, $3")

    def window(self, key: str, p: str, q: str) -> None:
        """The sliding window's DMA at the top of p's body: the blocks p + q (q < trips(q))
        live in a ring of trips(q) + 1 LDM blocks, block p + q in slot (window_<key> + q) mod
        ring, window_<key> = p mod ring. p's first iteration fetches all trips(q) of them and
        waits for them (a counting reply word); a later one waits for its one new block,
        prefetched by the iteration before. Then, unless p is at its last iteration, block
        p + trips(q) (the next iteration's new one) is fetched into the slot block p - 1
        left."""
        op = self.plan.operands[key]
        fill, prefetched = (f"REPLY + {8 * 'ab'.index(key) + n}" for n in (0, 4))
        ring = self._copies(key)
        nbytes = self.buffers[key][1]
        position = self.slot("window_" + key)
        later, fetch, done = self.label(), self.label(), self.label()
        inner = [l for l in self.plan.loops[self.plan.operands[key].depth + 1:]
                 if l.iter in op.deps and l.iter != q]
        for loop in inner:      # one iteration: set before its loop starts
            self.emit(f"ldi\t$1, {loop.min.value(self.plan.seed.registry.const_values())}")
            self.emit(f"stl\t$1, {self.slot('it_' + loop.iter)}   # {loop.iter}: one iteration")
        self.emit(f"ldl\t$1, {self.slot('it_' + p)}")
        self.emit(f"bne\t$1, {later}")
        self.emit(f"stl\t$31, {position}")
        self.emit(f"stw\t$31, {fill}($31)")
        top = self.label()
        self.emit(f"stl\t$31, {self.slot('it_' + q)}   # the walk over q's blocks")
        self.emit(f"{top}:", indent=False)
        self.address(key, "it")
        self.emit(f"ldl\t$4, {self.slot('it_' + q)}")
        self.emit(f"ldi\t$3, {nbytes}")
        self.emit("mull\t$4, $3, $4")
        self.emit(f"ldi\t$4, {key.upper()}_BUF($4)")
        self.emit(f"ldi\t$7, {fill}")
        self.issue(key, "get", counting=True)
        self.emit(f"ldl\t$1, {self.slot('it_' + q)}")
        self.emit("ldi\t$1, 1($1)")
        self.emit(f"stl\t$1, {self.slot('it_' + q)}")
        self.emit(f"ldi\t$2, {ring - 1}")
        self.emit("cmplt\t$1, $2, $2")
        self.emit(f"bne\t$2, {top}")
        self.emit(f"ldi\t$3, {ring - 1}")
        self.emit(f"WAIT_COUNT {fill}, $3")
        self.emit(f"br\t{fetch}")
        self.emit(f"{later}:", indent=False)
        self.emit(f"ldl\t$1, {position}")
        self.ring_step("$1", 1, ring)
        self.emit(f"stl\t$1, {position}")
        self.emit(f"ldi\t$7, {prefetched}")
        self.wait()
        self.emit(f"{fetch}:", indent=False)
        self.emit(f"ldl\t$1, {self.slot('it_' + p)}")
        self.emit("ldi\t$1, 1($1)")
        self.emit(f"ldi\t$2, {self._trips([p])[0]}")
        self.emit("cmplt\t$1, $2, $2")
        self.emit(f"beq\t$2, {done}")
        for name in op.deps:
            self.emit(f"ldl\t$1, {self.slot('it_' + name)}")
            self.emit(f"stl\t$1, {self.slot('next_' + name)}")
        self.emit(f"ldi\t$1, {ring - 1}")
        self.emit(f"stl\t$1, {self.slot('next_' + q)}   # block p + trips(q)")
        self.address(key, "next")
        self.window_block(key, "$4", offset=ring - 1)
        self.emit(f"ldi\t$7, {prefetched}")
        self.issue(key, "get")
        self.emit(f"{done}:", indent=False)

    def ring_step(self, reg: str, step: int, ring: int) -> None:
        """reg = (reg + step) mod ring, for reg < ring and step < ring."""
        wrapped = self.label()
        self.emit(f"ldi\t{reg}, {step}({reg})")
        self.emit(f"ldi\t$2, {ring}")
        self.emit(f"cmplt\t{reg}, $2, $3")
        self.emit(f"bne\t$3, {wrapped}")
        self.emit(f"subl\t{reg}, $2, {reg}")
        self.emit(f"{wrapped}:", indent=False)

    def window_block(self, key: str, reg: str, offset: int | None = None) -> None:
        """reg = the LDM address of the window's block p + q (q from its frame slot, or
        `offset`)."""
        q = self.plan.operands[key].window[1]
        self.emit(f"ldl\t{reg}, {self.slot('window_' + key)}")
        if offset is None:
            self.emit(f"ldl\t$5, {self.slot('it_' + q)}")
            self.emit(f"addl\t{reg}, $5, {reg}")
            self.ring_step(reg, 0, self._copies(key))
        else:
            self.ring_step(reg, offset, self._copies(key))
        self.emit(f"ldi\t$3, {self.buffers[key][1]}")
        self.emit(f"mull\t{reg}, $3, {reg}")
        self.emit(f"ldi\t{reg}, {key.upper()}_BUF({reg})")

    def resident_block(self, key: str, reg: str) -> None:
        """reg = the LDM address of `key`'s resident block at the spans' current iterators."""
        spans = self.plan.operands[key].spans
        self.emit(f"mov\t$31, {reg}")
        for it, trips in zip(spans, self._trips(spans)):
            self.emit(f"ldi\t$3, {trips}")
            self.emit(f"mull\t{reg}, $3, {reg}")
            self.emit(f"ldl\t$2, {self.slot('it_' + it)}")
            self.emit(f"addl\t{reg}, $2, {reg}")
        self.emit(f"ldi\t$3, {self.buffers[key][1]}")
        self.emit(f"mull\t{reg}, $3, {reg}")
        self.emit(f"ldi\t{reg}, {key.upper()}_BUF({reg})")

    def output(self, node: Dma) -> None:
        op = self.plan.operands["c"]
        self.buffer("c", "$4")
        if node.direction == "get":
            self.wait()           # the put of this buffer two tiles ago
            if self.accumulate:   # and the last tile's, which may be this same block
                self.emit("ldi\t$7, REPLY + 16")
                self.wait()
                self.emit("ldi\t$7, REPLY + 20")
                self.wait()
                self.buffer("c", "$4")
                self.address("c", "it")
                self.issue("c", "get")
                self.wait()
            else:
                self.zero("$4", op.elements * self.es)
            return
        self.address("c", "it")
        if not self.defer_put:
            self.issue("c", "put")
            return
        self.emit("# the put waits for the next tile's first prefetch (issued before it)")
        for name, reg in (("address", "$1"), ("ldm", "$4"), ("reply", "$7")):
            self.emit(f"stl\t{reg}, {self.slot('put_' + name)}")
        self.emit("ldi\t$1, 1")
        self.emit(f"stl\t$1, {self.slot('put_pending')}")

    def flush_put(self) -> None:
        """Issue the deferred put of the last tile's C, if one is pending."""
        skip = self.label()
        self.emit(f"ldl\t$1, {self.slot('put_pending')}")
        self.emit(f"beq\t$1, {skip}")
        for name, reg in (("address", "$1"), ("ldm", "$4"), ("reply", "$7")):
            self.emit(f"ldl\t{reg}, {self.slot('put_' + name)}")
        self.issue("c", "put")
        self.emit(f"stl\t$31, {self.slot('put_pending')}")
        self.emit(f"{skip}:", indent=False)

    def gemm(self, node: GemmOp) -> None:
        blocks = self.plan.blocks
        if self.defer_put:
            self.flush_put()
        for key, reg in zip("abc", ("$16", "$17", "$18")):
            if self.plan.operands[key].spans:
                self.resident_block(key, reg)
                continue
            if self.plan.operands[key].window:
                self.window_block(key, reg)
                continue
            self.buffer(key, "$4")
            self.emit(f"mov\t$4, {reg}")
        self.emit(f"ldi\t$19, {blocks['m']}")
        self.emit(f"ldi\t$20, {blocks['n']}")
        self.emit(f"ldi\t$21, {blocks['k']}")
        if self.dtype == "float32":
            self.emit("ldi\t$1, WORK_BUF")
            self.emit("stl\t$1, 0($sp)")
        self.emit(f"bsr\t$26, {PRIMITIVES[node.vector, self.dtype]}")

    # ---- the whole kernel ------------------------------------------------------------------
    def chunk_offset(self, key: str) -> None:
        """block_<key> = its tensor's base + this CPE's chunk offsets (bytes)."""
        op = self.plan.operands[key]
        self.emit(f"ldl\t$1, {self.slot('base_' + op.tensor)}")
        for coord, reg in (("i", "$9"), ("j", "$10")):
            offsets = op.offsets[coord]
            step = offsets[1] - offsets[0]
            if offsets == [c * step for c in range(len(offsets))]:
                self.emit(f"ldi\t$3, {step * self.es}              # chunk {coord}: {step} "
                          "elements apart")
                self.emit(f"mull\t{reg}, $3, $3")
                self.emit("addl\t$1, $3, $1")
                continue
            for c, value in enumerate(offsets):
                if value:
                    skip = self.label()
                    self.emit(f"cmpeq\t{reg}, {c}, $2")
                    self.emit(f"beq\t$2, {skip}")
                    self.emit(f"ldi\t$3, {value * self.es}")
                    self.emit(f"addl\t$1, $3, $1")
                    self.emit(f"{skip}:", indent=False)
        self.emit(f"stl\t$1, {self.slot('block_' + key)}")

    def kernel(self) -> str:
        plan = self.plan
        g = plan.gemm
        header = [f"# Generated by swsim.hostlib.autodnn: gemm_op {g.name!r}, M={plan.extents['m']} "
                  f"N={plan.extents['n']} K={plan.extents['k']}, blocks Mb={plan.blocks['m']} "
                  f"Nb={plan.blocks['n']} Kb={plan.blocks['k']}, vector {g.vector}",
                  "# Arguments: " + ", ".join(f"a{n} = {t}" for n, t in enumerate(self.tensors)),
                  "# Tensor layouts (outermost first): " + "; ".join(
                      f"{t}({', '.join(plan.seed.registry.tensors[t].dims)})"
                      for t in self.tensors),
                  "# The optimised IR:"] + [f"#   {line}" for line in format_nodes(plan.body)]
        self.lines += header
        self.emit("")
        self.emit(".set\tnoreorder")
        self.emit('.include "gemm_prim.inc"')
        self.emit('.include "dma.inc"')
        self.emit(".ldm")
        self.emit(".align\t5")
        self.emit("REPLY:\t.skip\t32", indent=False)
        for key, (start, nbytes) in self.buffers.items():
            count = self._copies(key)
            self.emit(f"{key.upper()}_BUF:\t.skip\t{count * nbytes}   # operand {key} "
                      f"({plan.operands[key].tensor}): {plan.operands[key].rows} x "
                      f"{plan.operands[key].vec} doubles x {count}", indent=False)
        if self.ldm_end > self.work:
            self.emit(f"WORK_BUF:\t.skip\t{self.ldm_end - self.work}   # the float32 "
                      "primitive's double work area", indent=False)
        self.emit(f".globl\t{LDM_END}")
        self.emit(f"{LDM_END}:", indent=False)
        self.emit("# the frame: one 8-byte slot per variable")
        for name, offset in self.slots.items():
            self.emit(f"S_{name} = {offset}")
        self.emit(f"FRAME = {self.frame}", indent=True)
        self.emit(f".globl\t{STACK}")
        self.emit(f"{STACK} = FRAME + "
                  f"{'GEMM_PRIM_STACK' if self.dtype == 'float32' else 'GEMM_PRIM_FRAME'}")
        self.emit(".text")
        self.emit(f".globl\t{ENTRY}")
        self.emit(f".ent\t{ENTRY}")
        self.emit(f"{ENTRY}:", indent=False)
        self.emit("ldi\t$sp, -FRAME($sp)")
        self.emit(".frame\t$30, FRAME, $26, 0")
        self.emit(f"stl\t$26, {self.slot('ra')}")
        for n, tensor in enumerate(self.tensors):
            self.emit(f"stl\t${16 + n}, {self.slot('base_' + tensor)}")
        self.emit("rcid\t$1")
        self.emit("srl\t$1, 3, $9              # mesh row i")
        self.emit("and\t$1, 7, $10             # mesh column j")
        for key in "abc":
            self.emit(f"stl\t$31, {self.slot('parity_' + key)}")
            self.chunk_offset(key)
        self.emit("ldi\t$1, 1                  # C's buffers start free")
        self.emit("stw\t$1, REPLY + 16($31)")
        self.emit("stw\t$1, REPLY + 20($31)")
        self.emit(f"stl\t$31, {self.slot('put_pending')}")
        for child in plan.body:
            self.node(child, 0)
        self.emit("# the last puts")
        if self.defer_put:
            self.flush_put()
        for offset in (16, 20):
            self.emit(f"ldi\t$7, REPLY + {offset}")
            self.wait()
        self.emit(f"ldl\t$26, {self.slot('ra')}")
        self.emit("ldi\t$sp, FRAME($sp)")
        self.emit("ret")
        self.emit(f".end\t{ENTRY}")
        return "\n".join(self.lines) + "\n"


def generate(plan: Plan, *, accumulate: bool = False, ldm_bytes: int = 64 * 1024,
             dtype: str = "float64") -> Generated:
    """The kernel of `plan` for `dtype` ("float64" or "float32") data; raises ScheduleError if
    it cannot be generated or its LDM does not fit `ldm_bytes`."""
    if dtype not in ITEMSIZE:
        raise ScheduleError("dtype", f"dtype must be one of {sorted(ITEMSIZE)}, got {dtype!r}")
    c = plan.operands["c"]
    depth = c.depth
    if not accumulate:
        outside = [l.iter for l in plan.loops[:depth + 1] if l.iter not in c.deps]
        if outside:
            raise ScheduleError("output written once", f"C's block is revisited over loop(s) "
                                f"{outside}: write C once per tile (move them inside) or "
                                "generate with accumulate=True", plan.gemm.line)
    emitter = _Emitter(plan, accumulate, ldm_bytes, dtype)
    if len(emitter.tensors) > 6:
        raise ScheduleError("arguments", "a generated kernel takes at most 6 tensors")
    # the kernel's .ldm data is the only one of its program (the primitive has none): it
    # starts at LDM 0; the stack is the frame and the primitive's (tests check the symbols)
    primitive_stack = _include_constant("GEMM_PRIM_FRAME") + (
        _include_constant("GEMM_PRIM_S2_FRAME") if dtype == "float32" else 0)
    used = emitter.ldm_end + emitter.frame + primitive_stack
    if used > ldm_bytes:
        raise ScheduleError("LDM budget", f"the kernel needs {used} bytes of LDM (buffers "
                            f"{emitter.ldm_end}, frame and primitive stack), more than "
                            f"{ldm_bytes}", plan.gemm.line)
    return Generated(plan, emitter.tensors, used, accumulate, dtype, emitter)
