"""`swsim bench ops`: achieved memory bandwidth of the DNN library's memory-bound operators at
realistic sizes, against the DMA engine's ceiling and the DMA figure of `swsim bench fidelity`.

The streaming driver (hostlib/dnn/stream.py) runs in rounds: one chunk on each of the 64 CPEs.
Rounds are identical work, so the cycles of a size are linear in its rounds once the pipeline
is full. Each case simulates two samples (SAMPLE_ROUNDS), extrapolates to the full size from
their difference, and checks the extrapolation against a full run of VALIDATION_ROUNDS (plus
a partial round): the error is printed. Every sample's values are checked against numpy.

Columns: GB/s = bytes the operator must move (each input read once, each output written
once) / time; "ceiling" = ``stream_bound_gbps`` for its mix of gets and puts (docs/timing.md
"DMA": a put line costs the engine more than a get line); "of get BW" = against the measured
`swsim bench fidelity` row ``dma_bandwidth`` (large aligned gets only). Target: >= 80 % of the
ceiling for every operator.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ....vm import Machine
from ... import dnn
from ...dnn import stream
from . import fidelity

SAMPLE_ROUNDS = (2, 6)
VALIDATION_ROUNDS = 20.5
TARGET = 0.8


def _check(name, got, want, dtype):
    tol = 1e-5 if dtype == np.float32 else 1e-13
    if not np.allclose(got, want, rtol=tol, atol=tol * 10):
        raise RuntimeError(f"{name}: wrong values on the VM")


@dataclass(frozen=True)
class Case:
    """An element-wise operator (its streaming body) on `elements` elements. A round is one
    chunk on each CPE."""
    name: str
    body: str
    elements: int
    dtype: type = np.float32

    def round_size(self, config):
        nin, nout = stream.BODIES[self.body]
        es = np.dtype(self.dtype).itemsize
        return stream.chunk_elements(config, es, self.elements, nin + nout,
                                     config.num_cpes) * config.num_cpes

    @property
    def full(self):
        return self.elements

    def bytes_moved(self, n):
        nin, nout = stream.BODIES[self.body]
        return (nin + nout) * n * np.dtype(self.dtype).itemsize

    def run(self, n, engine, rng):
        """Run the operator on n random elements; check it; return its Stats."""
        nin, _ = stream.BODIES[self.body]
        xs = [rng.standard_normal(n).astype(self.dtype) for _ in range(nin)]
        x64 = [x.astype(np.float64) for x in xs]
        if self.body == "axpby":
            out, stats = dnn.add(xs[0], xs[1], 1.0, 0.5, engine=engine)
            want = x64[0] + 0.5 * x64[1]
        elif self.body == "scale":
            out, stats = dnn.scale(xs[0], 0.5, engine=engine)
            want = 0.5 * x64[0]
        else:
            (out, _), stats = dnn.sgd_update(*xs, 0.01, 0.9, 5e-4, engine=engine)
            want = x64[0] - (0.01 * (x64[1] + 5e-4 * x64[0]) + 0.9 * x64[2])
        _check(self.name, out, want, self.dtype)
        return stats


@dataclass(frozen=True)
class PoolCase:
    """Pooling of `planes` planes of h x w (N x C of a feature map); a round is one plane per
    CPE (the planes are independent units of work)."""
    name: str
    planes: int
    h: int
    w: int
    kernel: int
    stride: int
    padding: int
    mode: str
    backward: bool = False
    dtype: type = np.float32

    def round_size(self, config):
        return config.num_cpes

    @property
    def full(self):
        return self.planes

    def bytes_moved(self, planes):
        es = np.dtype(self.dtype).itemsize
        oh = (self.h + 2 * self.padding - self.kernel) // self.stride + 1
        ow = (self.w + 2 * self.padding - self.kernel) // self.stride + 1
        return planes * (self.h * self.w * es +
                         oh * ow * (es + (4 if self.mode == "max" else 0)))  # x, y, argmax

    def run(self, planes, engine, rng):
        x = rng.standard_normal((planes, self.h, self.w)).astype(self.dtype)
        args = (self.kernel, self.stride, self.padding)
        y, stats = dnn.pool2d_forward(x, *args, mode=self.mode, engine=engine)
        argmax = None
        if self.mode == "max":
            y, argmax = y
            # each window's maximum, read back through the argmax
            flat = x.reshape(planes, -1)
            _check(self.name, y, np.take_along_axis(flat, argmax.reshape(planes, -1),
                                                    1).reshape(y.shape), self.dtype)
        if not self.backward:
            return stats
        dy = np.ones_like(y)
        dx, stats = dnn.pool2d_backward(dy, x.shape, *args, mode=self.mode, argmax=argmax,
                                        engine=engine)
        if self.mode == "max":     # every dy lands once
            _check(self.name, dx.sum(dtype=np.float64), dy.sum(dtype=np.float64), np.float64)
        return stats


RESNET_RESIDUAL = 32 * 256 * 56 * 56     # ResNet-50 conv2_x output, B = 32
VGG_CONV1 = 32 * 64 * 224 * 224          # VGG-16 conv1 feature map, B = 32
CASES = (
    Case("add: ResNet-50 residual, 32x256x56x56", "axpby", RESNET_RESIDUAL),
    Case("add: ResNet-50 residual, 32x256x56x56, f64", "axpby", RESNET_RESIDUAL, np.float64),
    Case("scale: VGG-16 conv1 map, 32x64x224x224", "scale", VGG_CONV1),
    Case("sgd_update: ResNet-50 weights, 25.6 M", "sgd", 25_557_032),
    Case("sgd_update: VGG-16 weights, 138.4 M", "sgd", 138_357_544),
    PoolCase("max pool 3/2/1: ResNet-50 stem, 32x64x112x112", 32 * 64, 112, 112, 3, 2, 1,
             "max"),
    PoolCase("max pool 2/2: VGG-16 pool1, 32x64x224x224", 32 * 64, 224, 224, 2, 2, 0, "max"),
    PoolCase("avg pool 2/2: VGG-16 pool1 size, 32x64x224x224", 32 * 64, 224, 224, 2, 2, 0,
             "avg"),
    PoolCase("max pool backward 3/2/1: ResNet-50 stem", 32 * 64, 112, 112, 3, 2, 1, "max",
             backward=True),
)


@dataclass
class Result:
    case: object
    chunk_bytes: int
    cycles: float          # extrapolated, full size
    gbps: float
    ceiling_gbps: float
    get_gbps: float        # bench fidelity's dma_bandwidth, measured
    validation_error: float   # extrapolated vs simulated cycles at VALIDATION_ROUNDS
    host_seconds: float

    @property
    def ratio(self):
        return self.gbps / self.ceiling_gbps


def measure(case, engine: str, get_gbps: float) -> Result:
    start = time.perf_counter()
    config = Machine().config
    per_round = case.round_size(config)
    rng = np.random.default_rng(0)
    rounds = np.array(SAMPLE_ROUNDS, float)
    samples = [case.run(int(r * per_round), engine, rng) for r in rounds]
    cycles = np.array([s.cycles for s in samples], float)
    slope = (cycles[1] - cycles[0]) / (rounds[1] - rounds[0])

    def predict(n):
        return cycles[0] + slope * (n / per_round - rounds[0])

    n_valid = int(VALIDATION_ROUNDS * per_round)
    simulated = case.run(n_valid, engine, rng).cycles
    error = predict(n_valid) / simulated - 1
    full = predict(case.full)
    gbps = case.bytes_moved(case.full) / (full / config.clock_hz) / 1e9
    stats = samples[-1]
    unit = stats.details.get("chunk_bytes", 0)
    return Result(case, unit, full, gbps, stats.stream_gbps, get_gbps, error,
                  time.perf_counter() - start)


def run(engine="c", cases=CASES):
    (get_row,) = fidelity.dma_bandwidth(engine)
    return [measure(case, engine, get_row.measured) for case in cases]


def format_table(results) -> str:
    header = ("operator, size", "elements/planes", "chunk B", "Mcycles", "GB/s", "ceiling",
              "of ceiling", "of get BW", "extrap. err", "host s")
    body = [(r.case.name, f"{r.case.full:,}", str(r.chunk_bytes or "-"), f"{r.cycles / 1e6:.2f}",
             f"{r.gbps:.2f}", f"{r.ceiling_gbps:.2f}", f"{100 * r.ratio:.1f} %",
             f"{100 * r.gbps / r.get_gbps:.1f} %", f"{100 * r.validation_error:+.3f} %",
             f"{r.host_seconds:.1f}") for r in results]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    below = [r.case.name for r in results if r.ratio < TARGET]
    get = results[0].get_gbps if results else 0
    lines += ["", f"ceiling: the DMA engine's rate for the operator's gets and puts in whole "
              f"lines; get BW: bench fidelity's dma_bandwidth, measured {get:.2f} GB/s.",
              f"extrap. err: cycles extrapolated from {SAMPLE_ROUNDS[0]} and "
              f"{SAMPLE_ROUNDS[1]} rounds vs a full run of {VALIDATION_ROUNDS} rounds.",
              f"target >= {100 * TARGET:.0f} % of the ceiling: " +
              ("met by every operator" if not below else "missed by " + ", ".join(below))]
    return "\n".join(lines)
