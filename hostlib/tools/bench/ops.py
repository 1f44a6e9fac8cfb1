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


@dataclass(frozen=True)
class Case:
    name: str             # operator and where the size comes from
    body: str             # the streaming body it runs
    elements: int         # full size
    dtype: type = np.float32

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
        tol = 1e-6 if self.dtype == np.float32 else 1e-14
        if not np.allclose(out, want, rtol=tol, atol=tol * 10):
            raise RuntimeError(f"{self.name}: wrong values on the VM")
        return stats


RESNET_RESIDUAL = 32 * 256 * 56 * 56     # ResNet-50 conv2_x output, B = 32
VGG_CONV1 = 32 * 64 * 224 * 224          # VGG-16 conv1 feature map, B = 32
CASES = (
    Case("add: ResNet-50 residual, 32x256x56x56", "axpby", RESNET_RESIDUAL),
    Case("add: ResNet-50 residual, 32x256x56x56, f64", "axpby", RESNET_RESIDUAL, np.float64),
    Case("scale: VGG-16 conv1 map, 32x64x224x224", "scale", VGG_CONV1),
    Case("sgd_update: ResNet-50 weights, 25.6 M", "sgd", 25_557_032),
    Case("sgd_update: VGG-16 weights, 138.4 M", "sgd", 138_357_544),
)


@dataclass
class Result:
    case: Case
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


def measure(case: Case, engine: str, get_gbps: float) -> Result:
    start = time.perf_counter()
    config = Machine().config
    nin, nout = stream.BODIES[case.body]
    es = np.dtype(case.dtype).itemsize
    chunk = stream.chunk_elements(config, es, case.elements, nin + nout, config.num_cpes)
    per_round = chunk * config.num_cpes
    rng = np.random.default_rng(0)
    rounds = np.array(SAMPLE_ROUNDS, float)
    cycles = np.array([case.run(int(r * per_round), engine, rng).cycles for r in rounds], float)
    slope = (cycles[1] - cycles[0]) / (rounds[1] - rounds[0])

    def predict(n):
        return cycles[0] + slope * (n / per_round - rounds[0])

    n_valid = int(VALIDATION_ROUNDS * per_round)
    simulated = case.run(n_valid, engine, rng).cycles
    error = predict(n_valid) / simulated - 1
    full = predict(case.elements)
    moved = (nin + nout) * case.elements * es
    gbps = moved / (full / config.clock_hz) / 1e9
    return Result(case, chunk * es, full, gbps, stream.stream_bound_gbps(config, nin, nout),
                  get_gbps, error, time.perf_counter() - start)


def run(engine="c", cases=CASES):
    (get_row,) = fidelity.dma_bandwidth(engine)
    return [measure(case, engine, get_row.measured) for case in cases]


def format_table(results) -> str:
    header = ("operator, size", "elements", "chunk B", "Mcycles", "GB/s", "ceiling",
              "of ceiling", "of get BW", "extrap. err", "host s")
    body = [(r.case.name, f"{r.case.elements:,}", str(r.chunk_bytes), f"{r.cycles / 1e6:.2f}",
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
