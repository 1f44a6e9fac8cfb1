"""swHMAE (swFLOWpro §2.5, Algorithm 1): every node goes through ``run_node``, which runs the
CPE implementation (``cpe.CPE``) when the node is suitable, else the MPE path (``ops.OPS``'s
numpy function on the host) timed by the MPE cost model (``mpe_cycles``: the ``mpe_*``
parameters of vm/config.py). Each call returns its outputs and a ``Record``: where it ran, the
algorithm, simulated cycles, DMA bytes and, on the MPE, why. ``check=True`` (debug mode) also
runs the MPE path for CPE nodes and raises GraphError naming the node if they disagree."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .cpe import CPE, NotSuitable, dma_bytes, layout_transforms
from .ir import GraphError, Node, TensorInfo
from .ops import flops, infer_node, moves_no_data, operator, output_size

CHECK_RTOL = 1e-3          # debug mode: CPE vs MPE, relative to the result's largest value


@dataclass
class Record:
    node: str
    op_type: str
    device: str              # "CPE", "MPE" or "view" (a reshape: no data moves)
    algorithm: str
    cycles: int              # simulated, CPE clock
    dma_bytes: int
    reason: str = ""         # why the MPE ran it
    host_seconds: float = 0.0
    check_error: Optional[float] = None    # debug mode: max |CPE - MPE| / max |MPE|
    cg: Optional[int] = None       # the dataflow runtime: the core group that ran it
    start: Optional[int] = None    # and when (simulated cycles from the run's start)
    layout_transforms: int = 0     # layout transforms it ran (cpe.layout_transforms)


def mpe_cycles(node: Node, inputs, outputs, config) -> int:
    """Simulated cycles (CPE clock) of a node on the MPE: conv and GEMM flops at
    ``mpe_conv_gflops`` / ``mpe_gemm_gflops``, memory-bound operators ``mpe_element_ns`` per
    element of their largest operand, views nothing."""
    cost = operator(node.op_type).cost
    if cost == "view":
        return 0
    if cost in ("conv", "gemm"):
        rate = config.mpe_conv_gflops if cost == "conv" else config.mpe_gemm_gflops
        seconds = flops(node, inputs, outputs) / (rate * 1e9)
    else:
        seconds = output_size(node, list(inputs) + list(outputs)) * config.mpe_element_ns * 1e-9
    return int(round(seconds * config.clock_hz))


def _mpe(node: Node, inputs):
    with np.errstate(all="ignore"):
        return tuple(np.asarray(o) for o in operator(node.op_type).mpe(node, *inputs))


def run_node(node: Node, inputs: list, *, machine, cgs=1, engine="c", check=False,
             minimum_work=True, release=True):
    """Run one node (inputs: numpy arrays, None for omitted optional ones); returns (outputs,
    Record). ``minimum_work``: nodes whose MPE time is below a CPE launch's spawn cost stay on
    the MPE (swHMAE's minimum-work rule). ``release``: give the operands' main memory back
    after the node (False: the caller does, when no other core group is running)."""
    start = time.perf_counter()
    config = machine.config
    while inputs and inputs[-1] is None:
        inputs = inputs[:-1]
    implementation = CPE.get(node.op_type)
    reason = "no CPE operator" if implementation is None else ""
    if moves_no_data(node, [x.shape for x in inputs if x is not None]):
        outputs = _mpe(node, inputs)
        return outputs, Record(node.name, node.op_type, "view", "view", 0, 0,
                               host_seconds=time.perf_counter() - start)
    if implementation is not None and minimum_work:
        estimate = mpe_cycles(node, inputs, _mpe_shapes(node, inputs), config)
        if estimate < config.spawn_cycles:
            reason = (f"less work than a CPE launch (MPE {estimate} cycles < spawn "
                      f"{config.spawn_cycles})")
    if implementation is not None and not reason:
        mark = machine.mem.mark() if release else None
        try:
            outputs, stats, algorithm = implementation(node, inputs, dict(
                machine=machine, cgs=cgs, engine=engine))
        except NotSuitable as refusal:
            reason = str(refusal)
        else:
            record = Record(node.name, node.op_type, "CPE", algorithm,
                            int(sum(s.cycles for s in stats)), dma_bytes(stats),
                            layout_transforms=layout_transforms(node, stats))
            if check:
                record.check_error = _compare(node, outputs, _mpe(node, inputs))
            record.host_seconds = time.perf_counter() - start
            return outputs, record
        finally:
            if release:
                machine.mem.release(mark)
    outputs = _mpe(node, inputs)
    return outputs, Record(node.name, node.op_type, "MPE", "numpy",
                           mpe_cycles(node, inputs, outputs, config), 0, reason,
                           host_seconds=time.perf_counter() - start,
                           layout_transforms=layout_transforms(node, []))


def _mpe_shapes(node: Node, inputs):
    """Stand-ins of the outputs' sizes for the minimum-work estimate (shape inference)."""
    names = [f"in{i}" for i in range(len(inputs))]
    info = {n: TensorInfo(a.dtype, a.shape) for n, a in zip(names, inputs) if a is not None}
    probe = Node(node.name, node.op_type, [n if a is not None else "" for n, a in
                                           zip(names, inputs)], node.outputs, node.attrs,
                 node.opset)
    constants = {n: a for n, a in zip(names, inputs) if a is not None and a.size <= 64}
    return [np.broadcast_to(np.zeros((), t.dtype), t.shape)
            for t in infer_node(probe, info, constants)]


def _compare(node: Node, got, want) -> float:
    worst = 0.0
    for index, (g, w) in enumerate(zip(got, want)):
        if g is None:          # an output nobody reads (a gradient not needed)
            continue
        if g.shape != w.shape:
            raise GraphError(f"{node}: debug check: CPE output {index} has shape "
                             f"{list(g.shape)}, the MPE path's {list(w.shape)}")
        if w.dtype.kind in "iub":        # indices (MaxPool's argmax), masks: exactly
            if not np.array_equal(g, w):
                raise GraphError(f"{node}: debug check: CPE output {index} differs from the "
                                 "MPE path's")
            continue
        scale = max(float(np.max(np.abs(w), initial=0.0)), np.finfo(w.dtype).tiny)
        error = float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0)) / scale
        if not error <= CHECK_RTOL:
            raise GraphError(f"{node}: debug check: the CPE result differs from the MPE "
                             f"path's by {error:.3g} of its largest value (limit "
                             f"{CHECK_RTOL:g})")
        worst = max(worst, error)
    return worst
