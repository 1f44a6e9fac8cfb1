"""`swsim bench redsync`: the selection experiment of thesis Fig. 8.3 on the CPEs, and the
scaling model of Figs. 8.7-8.10 (eq. 8-1 against eq. 8-2) built on the measured selection
times (docs/redsync.md).

Selection: one selection of the top 0.1 % of uniform random float32 data in [-1, 1) (as Fig.
8.3) by each selector of hostlib/dnn/select.py on one core group, at layer sizes of
SIMULATED_BYTES, simulated whole; time = every launch's cycles, spawn included. "sampled" is
the mean of one binary search and SAMPLED_REUSES reuses of its threshold (search every 5
iterations). Sizes above those simulated are extrapolated with the straight line through the
two largest simulated sizes (every pass streams the data, so the time is linear in the size
for a fixed number of passes); the line through the two smallest is checked against the
largest simulated size first (`validation`). Each selector also runs on the chip's CHIP_CGS
core groups at once (`select(..., cgs=4)`: each CG a contiguous quarter and its share of k),
and its passes over the data give a DMA bound: passes x bytes / (CGs x 30.94 GB/s).

Scaling: per iteration = compute + communication (+ selection and decompression for RGC) at
1..128 nodes, layer by layer: each layer is sent sparse (eq. 8-1) or dense (eq. 8-2, its own
Rabenseifner allreduce), whichever the model predicts faster, with the selector the thesis
uses for it (trimmed top-k for conv layers over 128 KB, binary search for FC layers). Compute
per iteration: the selection on CHIP_CGS core groups; the thesis' Table 7.2 single-node img/s at 32 images per node (a thesis figure,
not simulated here). Network: hostlib/train/allreduce.py's Sunway α-β model and the VM's
reduction γ. Decompression γ1: the CPEs' scatter_add of one received set, simulated at
DECOMPRESS_ELEMENTS and fitted with a line (one launch per set: p launches per layer).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ....vm import Machine
from ...blas import gemm_model
from ...dnn.select import scatter_add, select
from ...train import allreduce as ar
from . import train_nets

DENSITY = 0.001
SELECTORS = ("radix", "trimmed", "binary", "sampled")
SIMULATED_BYTES = (256 << 10, 1 << 20, 4 << 20)
QUICK_SIMULATED_BYTES = (256 << 10, 512 << 10, 1 << 20)
REPORTED_BYTES = (256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20)
SAMPLED_REUSES = 4            # the search runs every 5 iterations (thesis §8.2.1)
THESIS_NETWORK_BYTES_PER_SECOND = 3.5e9   # Fig. 8.3's communication line
SCALING_NODES = (1, 2, 4, 8, 16, 32, 64, 128)
IMAGES_PER_NODE = 32
TRIMMED_ABOVE_BYTES = 128 << 10           # thesis §8.3: trimmed top-k for conv layers > 128 KB
DECOMPRESS_ELEMENTS = (1 << 10, 1 << 13)  # one received set, into a layer 1000x larger
THESIS_ASQ_GAIN_128 = {"AlexNet": 1.24, "ResNet-50": 1.10, "VGG-16": 1.21}
CHIP_CGS = 4
DMA_BYTES_PER_SECOND = 30.94e9            # per CG (MACHINE.md: the measured DMA peak)


def selection_seconds(nbytes: int, engine: str = "c", seed: int = 0, cgs: int = 1) -> dict:
    """{selector: simulated seconds of one selection on `cgs` core groups} at `nbytes` of
    float32, and {selector: its passes over the data} under "passes"."""
    n = nbytes // 4
    x = np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)
    k = max(1, round(DENSITY * n))
    machine = Machine()
    clock = machine.config.clock_hz
    seconds, passes = {}, {}
    for method in ("radix", "trimmed", "binary"):
        sel = select(x, k, method=method, machine=machine, engine=engine, cgs=cgs)
        seconds[method] = _cycles(sel) / clock
        passes[method] = _full_passes(method, sel.passes)
        if method == "binary":
            reuse = select(x, k, method="sampled", threshold=float(sel.threshold),
                           machine=machine, engine=engine, cgs=cgs)
            seconds["sampled"] = (_cycles(sel) + SAMPLED_REUSES * _cycles(reuse)) / clock / (
                SAMPLED_REUSES + 1)
            passes["sampled"] = (passes[method] + SAMPLED_REUSES * _full_passes(
                "sampled", reuse.passes)) / (SAMPLED_REUSES + 1)
    return dict(seconds, passes=passes)


def _full_passes(method: str, counted: int) -> int:
    """Passes over the whole layer: the kernels' counted ones (counts, histograms), the
    statistics pass of the threshold searches and the compaction; trimmed's 4 radix passes
    over the survivors and their compaction are not counted (~10 % of the layer each)."""
    if method == "radix":
        return counted + 1
    if method == "trimmed":
        return counted - 4 + 2 + 1          # counts, statistics, survivors' compaction
    return counted + (1 if method == "sampled" else 2)


def _cycles(sel) -> int:
    """Every launch's cycles, spawn included; launches on several CGs: the slowest's."""
    return sum(max(run.cycles for run in part.details.get("runs", [part.run]))
               for part in sel.stats.parts)


def _line(points):
    (x0, y0), (x1, y1) = points
    slope = (y1 - y0) / (x1 - x0)
    return lambda x: y0 + slope * (x - x0)


def selection_table(quick: bool = False, engine: str = "c", cgs: int = 1) -> dict:
    sizes = QUICK_SIMULATED_BYTES if quick else SIMULATED_BYTES
    simulated = {size: selection_seconds(size, engine, cgs=cgs) for size in sizes}
    table, validation, fits = {}, {}, {}
    for method in SELECTORS:
        check = _line([(s, simulated[s][method]) for s in sizes[:2]])
        validation[method] = check(sizes[-1]) / simulated[sizes[-1]][method] - 1
        fits[method] = _line([(s, simulated[s][method]) for s in sizes[-2:]])
        table[method] = {size: (simulated[size][method] if size in simulated
                                else fits[method](size)) for size in REPORTED_BYTES}
    return {"simulated_bytes": list(sizes), "seconds": table, "validation": validation,
            "fits": fits, "cgs": cgs, "passes": simulated[sizes[-1]]["passes"]}


# ---- the scaling model ----------------------------------------------------------------------

class Blob(NamedTuple):
    """A parameter blob of the language model (not a convolution: binary search, §8.3)."""
    name: str
    params: int


@dataclass(frozen=True)
class LanguageModel:
    """The thesis' LSTM (§8.3: a two-layer LSTM LM, 1500 hidden units, tied encoder/decoder;
    PTB's 10 000 words; Table 8.1: 204 MB, batch 4 per node). Its compute per iteration is
    not a thesis figure: ``compute_seconds`` predicts it from swGEMM's model."""
    name: str = "LSTM"
    vocabulary: int = 10_000
    hidden: int = 1500
    lstm_layers: int = 2
    batch: int = 4            # Table 8.1's LSTM runs: 4 nodes x 4
    steps: int = 35           # the BPTT length (PyTorch's word-language-model default; the
                              # thesis gives none)

    @property
    def layers(self):
        """The LSTMs' (W, R, both biases) in one blob each, then the tied embedding/decoder
        and the decoder's bias: the output layer, last."""
        h = self.hidden
        return tuple([Blob(f"lstm{i + 1}", 4 * h * (h + h) + 2 * 4 * h)
                      for i in range(self.lstm_layers)]
                     + [Blob("decoder", self.vocabulary * h),
                        Blob("decoder_bias", self.vocabulary)])

    def compute_seconds(self, config) -> float:
        """One iteration's GEMMs (forward, then both gradients of each product) on the
        chip's CHIP_CGS core groups, split evenly, from ``gemm_model.predict`` (swGEMM's
        validated model); the element-wise cell work (O(B H) per step against the products'
        O(B H^2)) and the embedding lookup are not counted."""
        h, rows = self.hidden, self.steps * self.batch
        products = []
        for _ in range(self.lstm_layers):
            products += [(rows, 4 * h, h), (4 * h, h, rows), (rows, h, 4 * h)]  # input W
            products += [(4 * h, h, rows)]                                       # dR
            products += self.steps * [(self.batch, 4 * h, h), (self.batch, h, 4 * h)]
        products += [(rows, self.vocabulary, h), (self.vocabulary, h, rows),
                     (rows, h, self.vocabulary)]
        cycles = 0.0
        for m, n, k in products:
            problem = gemm_model.Problem(m=m, n=n, k=k, itemsize=4)
            cycles += gemm_model.predict(problem, gemm_model.choose(problem, config), config) \
                + config.spawn_cycles
        return cycles / config.clock_hz / CHIP_CGS


LSTM_LM = LanguageModel()


@functools.lru_cache(maxsize=None)
def _language_model_seconds(model: LanguageModel) -> float:
    return model.compute_seconds(Machine().config)      # seconds of swGEMM's model: once


def _compute_seconds(network) -> float:
    """Per iteration on one node: the CNNs' from Table 7.2's img/s at IMAGES_PER_NODE, the
    language model's predicted."""
    if isinstance(network, LanguageModel):
        return _language_model_seconds(network)
    return IMAGES_PER_NODE / network.thesis_img_s


def _layers(network):
    """(name, elements, selector) of every layer with parameters."""
    out = []
    for layer in network.layers:
        params = getattr(layer, "params", 0) or (2 * layer.channels
                                                 if isinstance(layer, train_nets.BN) else 0)
        if params:
            conv = isinstance(layer, train_nets.Conv)
            selector = "trimmed" if conv and 4 * params > TRIMMED_ABOVE_BYTES else "binary"
            out.append((layer.name, params, selector))
    return out


def _output_layer(network) -> tuple:
    """The output layer's blobs (never quantised with ASQ): the language model's decoder
    and its bias, a CNN's last layer with parameters."""
    if isinstance(network, LanguageModel):
        return ("decoder", "decoder_bias")
    return (_layers(network)[-1][0],)


def decompress_fit(engine: str = "c"):
    """Seconds of scatter_add of one set of k elements on one CG: a line through
    DECOMPRESS_ELEMENTS simulated (random distinct indices into 1000 k elements)."""
    rng = np.random.default_rng(1)
    points = []
    for k in DECOMPRESS_ELEMENTS:
        indices = np.sort(rng.choice(1000 * k, k, replace=False))
        values = rng.uniform(-1, 1, k).astype(np.float32)
        machine = Machine()
        _, stats = scatter_add(np.zeros(1000 * k, np.float32), [(indices, values)], 0.1,
                               machine=machine, engine=engine)
        points.append((k, sum(p.run.cycles for p in stats.parts) / machine.config.clock_hz))
    return _line(points)


def iteration(network, p: int, scheme: str, select_seconds, net: ar.Network,
              reduction: ar.ReductionCost, decompress) -> dict:
    """Seconds per iteration by part for `scheme` "dense", "rgc" or "rgc+asq";
    `decompress(k)` the seconds of adding one received set of k elements."""
    parts = {"compute": _compute_seconds(network), "select": 0.0, "communicate": 0.0, "decompress": 0.0}
    layers = _layers(network)
    output = _output_layer(network)
    if scheme == "dense":
        total = 4 * sum(elements for _, elements, _ in layers)
        parts["communicate"] = ar.closed_form("rabenseifner", p, total, net, reduction).total \
            if p > 1 else 0.0
        return parts
    sparse_layers = 0
    for name, elements, selector in layers:
        k = max(1, round(DENSITY * elements))
        asq = scheme == "rgc+asq" and name not in output        # never the output layer
        message = 4 + 4 * k + (4 if asq else 4 * k)      # length, indices, values or one mean
        select_s = select_seconds[selector](4 * elements)
        log_p = math.log2(p) if p > 1 else 0.0
        sparse = (select_s + log_p * net.alpha + (p - 1) * message * net.beta1
                  + p * decompress(k))                                              # eq. 8-1
        dense = ar.closed_form("rabenseifner", p, 4 * elements, net, reduction).total \
            if p > 1 else 0.0                                                       # eq. 8-2
        if sparse < dense or p == 1:
            sparse_layers += 1
            parts["select"] += select_s
            parts["communicate"] += log_p * net.alpha + (p - 1) * message * net.beta1
            parts["decompress"] += p * decompress(k)
        else:
            parts["communicate"] += dense
    parts["sparse_layers"] = sparse_layers
    return parts


def scaling_table(select_seconds, engine: str = "c") -> dict:
    net = ar.Network()
    reduction = ar.reduction_cost(cgs=1)
    decompress = decompress_fit(engine)
    table = {}
    for network in [train_nets.NETWORKS[key] for key in ("alexnet", "vgg16", "resnet50")] + [
            LSTM_LM]:
        table[network.name] = {p: {scheme: iteration(network, p, scheme, select_seconds, net,
                                                       reduction, decompress)
                                   for scheme in ("dense", "rgc", "rgc+asq")}
                               for p in SCALING_NODES}
    return table


def _total(parts) -> float:
    return sum(v for k, v in parts.items() if k != "sparse_layers")


def run(quick: bool = False, engine: str = "c") -> dict:
    selection = selection_table(quick, engine)
    chip = selection_table(quick, engine, cgs=CHIP_CGS)
    scaling = scaling_table(chip["fits"], engine)
    return {"quick": quick, "density": DENSITY, "selection": selection, "chip": chip,
            "scaling": scaling}


def to_json(result) -> dict:
    return {
        "density": result["density"], "quick": result["quick"],
        **{key: {"cgs": sel["cgs"], "simulated_bytes": sel["simulated_bytes"],
                 "validation_error": sel["validation"], "passes": sel["passes"],
                 "seconds_per_100": {m: {str(b): 100 * t for b, t in row.items()}
                                     for m, row in sel["seconds"].items()}}
           for key, sel in (("selection", result["selection"]), ("chip", result["chip"]))},
        "scaling": {name: {str(p): {s: dict(parts, total=_total(parts))
                                    for s, parts in row.items()} for p, row in rows.items()}
                    for name, rows in result["scaling"].items()},
    }


def format_report(result) -> str:
    lines = []
    for sel in (result["selection"], result["chip"]):
        lines += _selection_report(sel)
    lines.append(f"Scaling model (Figs. 8.7-8.10): ms per iteration, {IMAGES_PER_NODE} images "
                 f"per node, compute from Table 7.2 (the LSTM's: {LSTM_LM.batch} sequences of "
                 f"{LSTM_LM.steps} words per node, swGEMM's model), selection on {CHIP_CGS} "
                 f"CGs; density {100 * DENSITY:g} %")
    for name, rows in result["scaling"].items():
        lines.append(f"{name}: {'nodes':>5} {'dense':>9} {'RGC':>9} {'RGC+ASQ':>9} "
                     f"{'ASQ/RGC':>8} {'dense/ASQ':>9}  RGC+ASQ: select comm decomp (sparse "
                     f"layers)")
        for p, row in rows.items():
            d, r, a = (_total(row[s]) * 1e3 for s in ("dense", "rgc", "rgc+asq"))
            q = row["rgc+asq"]
            lines.append(f"{'':{len(name) + 1}} {p:5d} {d:9.2f} {r:9.2f} {a:9.2f} {r / a:8.2f}"
                         f" {d / a:9.2f}  {q['select'] * 1e3:.2f} {q['communicate'] * 1e3:.2f}"
                         f" {q['decompress'] * 1e3:.2f} ({q['sparse_layers']})")
        if name in THESIS_ASQ_GAIN_128:
            lines.append(f"{'':{len(name) + 1}} thesis ASQ/RGC at 128 nodes: "
                         f"{THESIS_ASQ_GAIN_128[name]:.2f}")
    return "\n".join(lines)


def _selection_report(sel) -> list:
    cgs = sel["cgs"]
    lines = [f"Selection of the top {100 * DENSITY:g} % (Fig. 8.3): ms for 100 selections, "
             f"{cgs} CG{'s' if cgs > 1 else ''}, uniform data; simulated at "
             f"{', '.join(_size(b) for b in sel['simulated_bytes'])}, larger sizes "
             f"extrapolated (*)",
             f"{'size':>8} " + " ".join(f"{m:>9}" for m in SELECTORS) +
             f" {'radix/best':>10} {'send@3.5GB/s':>12}"]
    for size in REPORTED_BYTES:
        row = {m: 100 * sel["seconds"][m][size] * 1e3 for m in SELECTORS}
        mark = " " if size in sel["simulated_bytes"] else "*"
        best = min(row[m] for m in SELECTORS if m != "radix")
        lines.append(f"{_size(size):>7}{mark} " + " ".join(f"{row[m]:9.2f}" for m in SELECTORS)
                     + f" {row['radix'] / best:10.2f}"
                     f" {100 * size / THESIS_NETWORK_BYTES_PER_SECOND * 1e3:12.2f}")
    lines.append("validation (line through the two smallest sizes at the largest): " + ", ".join(
        f"{m} {100 * e:+.1f} %" for m, e in sel["validation"].items()))
    largest = REPORTED_BYTES[-1]
    lines.append(f"DMA bound at {_size(largest)}: passes over the data x bytes / ({cgs} x "
                 f"{DMA_BYTES_PER_SECOND / 1e9:g} GB/s), ms for 100 (passes at "
                 f"{_size(sel['simulated_bytes'][-1])}): " + ", ".join(
                     f"{m} {100 * p * largest / (cgs * DMA_BYTES_PER_SECOND) * 1e3:.1f} "
                     f"({p:g})" for m, p in sel["passes"].items()))
    lines.append("")
    return lines


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"


def write_json(result, path) -> None:
    with open(path, "w") as f:
        json.dump(to_json(result), f, indent=1)
