"""`swsim bench train`: the machinery on a tiny network, and its sampled per-layer estimates
against full simulations of the same layers."""
import pickle

import numpy as np
import pytest

from swsim.errors import ArgumentError
from swsim.hostlib.dnn import conv
from swsim.hostlib.dnn.conv.common import ConvStats
from swsim.hostlib.tools.bench import ops
from swsim.hostlib.tools.bench import train_nets as tn
from swsim.vm import Machine
from swsim.vm.config import VMConfig

BATCH = 32      # 8 images per CG
TINY = tn.Network("tiny", BATCH, 1.0, "-", (
    tn.Conv("conv1", 3, 80, 10, 3, pad=1, first=True), tn.Stream("relu1", "relu", 80, 10),
    tn.Pool("pool1", 80, 10, 2, 2), tn.Conv("conv2", 80, 64, 5, 3, pad=1),
    tn.BN("bn2", 64, 5), tn.Stream("relu2", "relu", 64, 5), tn.FC("fc", 64 * 25, 10),
    tn.Softmax("loss", 10)))


@pytest.fixture(scope="module")
def estimated():
    est = tn.Estimator()
    return est, tn.estimate(TINY, est)


def test_tiny_network_runs_and_reports(estimated):
    est, result = estimated
    assert result.batch == BATCH // tn.CGS
    layers = {c.layer for c in result.costs}
    assert {layer.name for layer in TINY.layers} | {"(chip)"} <= layers
    assert all(c.seconds > 0 and c.source in ("sampled", "model") for c in result.costs)
    assert sum(result.share(k) for k in tn.CLASSES) == pytest.approx(1)
    # conv2 takes the first conv's output through ReLU and pooling: no backward-data on conv1
    assert [c.what for c in result.costs if c.layer == "conv1" and c.klass == "conv"] == [
        "forward", "backward_filter"]
    assert result.img_s == pytest.approx(BATCH / result.seconds)
    report = tn.format_report([result], detail=True)
    assert "tiny: batch 32 = 4 CGs x 8" in report and "img/s" in report
    assert "not counted" in report


def test_sampled_layer_matches_a_full_simulation(estimated):
    """The pooling layer (640 planes: 10 rounds, sampled on 2 and 6) and conv2's forward pass
    against whole runs of the same shapes."""
    est, result = estimated
    pool = next(c for c in result.costs if c.layer == "pool1" and c.what == "forward")
    case = ops.PoolCase("pool1", 8 * 80, 10, 10, 2, 2, 0, "max")
    assert case.full > ops.SAMPLE_ROUNDS[1] * case.round_size(est.config)     # extrapolated
    full = case.run(case.full, "c", np.random.default_rng(1)).cycles / est.config.clock_hz
    assert pool.seconds == pytest.approx(full, rel=0.03)

    conv2 = next(layer for layer in TINY.layers if layer.name == "conv2")
    geo = conv2.geometry(8)
    seconds, algo, _, source = est.conv(geo, "forward")
    assert source == "sampled"
    module = next(m for m in tn.conv_modules() if m.NAME == algo)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(geo.x_shape).astype(np.float32)
    w = rng.standard_normal(geo.w_shape).astype(np.float32)
    config = est.config
    stats = ConvStats(algo, "forward", geo.flops, config.clock_hz, config.peak_gflops_cg,
                      {phase: [] for phase in module.PHASES})
    module.forward(geo, x, w, None, est.machine, stats, "c")
    # every phase (implicit's weight rearrangement too) is in the estimate
    assert seconds == pytest.approx(stats.cycles / config.clock_hz, rel=0.03)


def test_quick_samples_only_the_auto_pick(estimated):
    """--quick: every conv pass samples the algorithm algo="auto" runs, so it costs at least
    what the full mode's fastest sampled algorithm does, and the same where that is the pick;
    the FC layers, the reduction and the update are the full mode's."""
    est, full = estimated
    quick = tn.estimate(TINY, tn.Estimator(machine=est.machine, cache=est.cache, quick=True))
    assert quick.quick and not full.quick
    conv_passes = {(c.layer, c.what): c for c in full.costs if c.klass == "conv"}
    for c in quick.costs:
        if c.klass != "conv":
            continue
        layer = next(layer for layer in TINY.layers if layer.name == c.layer)
        pick = conv.choose(layer.geometry(quick.batch), c.what, np.float32, est.config).NAME
        assert c.note == pick and c.source == "sampled"
        best = conv_passes[c.layer, c.what]
        assert c.seconds >= best.seconds
        if best.note == pick:       # (on this network every pass: the models pick right)
            assert c.seconds == best.seconds
    for klass in ("FC", "reduce + update"):
        assert [c.seconds for c in quick.costs if c.klass == klass] == [
            c.seconds for c in full.costs if c.klass == klass]
    assert tn.QUICK_NOTE in tn.format_report([quick])


class LayoutsOnly(tn.Estimator):
    """Every cost 1 s, the conv algorithms' layouts given per (n_i, n_o): the layout chain
    alone, nothing simulated."""

    def __init__(self, layouts):
        super().__init__()
        self.layouts, self.cases = layouts, []

    def stream(self, case):
        self.cases.append(case)
        return 1.0

    def gemm(self, m, n, k, **layout):
        return 1.0

    def conv(self, geo, direction):
        return 1.0, "fake", self.layouts[geo.n_i, geo.n_o], "sampled"


def test_bn_and_pooling_take_their_bottoms_layout_where_their_operators_do():
    """BN in the convs' CNHW or RCNB (the batchnorm kernels' NATIVE_LAYOUTS) and pooling in
    CNHW: no transform between them and the convs around; a conv in NHWC gets its y
    transformed (BN takes NCHW there); an NCHW layer (FC) ends the chain."""
    net = tn.Network("chain", BATCH, 1.0, "-", (
        tn.Conv("c1", 3, 8, 8, 3, pad=1, first=True), tn.BN("b1", 8, 8),
        tn.Stream("r1", "relu", 8, 8), tn.Conv("c2", 8, 16, 8, 3, pad=1), tn.BN("b2", 16, 8),
        tn.Pool("p2", 16, 8, 2, 2), tn.Conv("c3", 16, 24, 4, 1), tn.BN("b3", 24, 4),
        tn.Conv("c4", 24, 32, 4, 1), tn.BN("b4", 32, 4), tn.FC("fc", 32 * 16, 10)))
    est = LayoutsOnly({(3, 8): "CNHW", (8, 16): "CNHW", (16, 24): "RCNB", (24, 32): "NHWC"})
    costs = tn.layer_costs(net, 8, est)
    transforms = {(c.layer, c.what.split(" NCHW")[0]) for c in costs
                  if c.klass == "layout transforms"}
    assert transforms == {
        ("c1", "transform forward x"),                                          # the data
        ("p2", "transform forward y"), ("p2", "transform backward_data dy"),    # CNHW | RCNB
        ("c3", "transform forward x"), ("c3", "transform backward_data dx"),
        ("b3", "transform forward y"), ("b3", "transform backward_data dy"),    # RCNB | NHWC
        ("c4", "transform forward x"), ("c4", "transform backward_data dx"),
        ("c4", "transform forward y"), ("c4", "transform backward_data dy")}    # NHWC | NCHW
    layouts = {case.name: case.layout for case in est.cases if isinstance(case, ops.BatchNormCase)}
    assert layouts == {"b1": "CNHW", "b2": "CNHW", "b3": "RCNB", "b4": "NCHW"}


@pytest.fixture(scope="module")
def tiny_gap(estimated):
    return tn.gap(TINY, cache=estimated[0].cache)     # swsim's step: the fixture's costs, reused


def test_the_gap_to_table_7_2_switches_one_factor_per_step(estimated, tiny_gap):
    est, full = estimated
    gap = tiny_gap
    assert gap.steps[0].img_s == full.img_s
    names = [s.step for s in gap.steps]
    assert names == ["swsim's kernels", "the thesis' convolutions",
                     "+ the hardware's launch cost", "+ the hardware's DMA model"]
    assert gap.preset == tn.preset_name(Machine().config) != "custom"
    assert gap.steps[0].factor == 1
    for before, after in zip(gap.steps, gap.steps[1:]):
        assert after.factor == pytest.approx(before.img_s / after.img_s)
    # the thesis' convolutions: conv1 (3 channels) explicit at 30 %, forward and
    # backward-filter; conv2 (80 -> 64, 3 x 3, stride 1) Winograd at 60 %, three passes
    config = Machine().config
    peak = config.flops_per_cycle * config.num_cpes * config.clock_hz
    conv1, conv2 = (layer.geometry(BATCH // tn.CGS) for layer in TINY.layers
                    if isinstance(layer, tn.Conv))
    assert [tn.thesis_conv(conv1), tn.thesis_conv(conv2)] == [("explicit", 0.3),
                                                              ("winograd", 0.6)]
    seconds = 2 * conv1.flops / (0.3 * peak) + 3 * conv2.flops / (0.6 * peak)
    assert gap.steps[1].ms_by_class["conv"] == pytest.approx(1e3 * seconds)
    # FC, the reduction and the update are as with swsim's kernels (BN and pooling run in
    # the layout of the convolutions beside them, which the algorithms change)
    for klass in ("FC", "reduce + update"):
        assert gap.steps[1].ms_by_class[klass] == gap.steps[0].ms_by_class[klass]
    # the launch cost: one hardware spawn per cost of the thesis' step
    hw = VMConfig.preset(tn.HW_PRESET)
    launches = gap.steps[2].ms_by_class[tn.LAUNCH] / (1e3 * hw.spawn_cycles / hw.clock_hz)
    costs = len(tn.estimate(TINY, LayoutsOnly({(3, 80): "CNHW", (80, 64): "NHWC"})).costs)
    assert launches == pytest.approx(costs) and gap.steps[2].factor > 1
    # the hardware's DMA: a change where the default preset is not it
    assert (gap.steps[3].factor == 1) == (config == hw)
    text = tn.format_gap([gap])
    assert f"the default preset {gap.preset}" in text and "remaining" in text


def test_the_gap_rows_are_the_steps_passes_and_table_7_2_is_split_by_fig_7_6(tiny_gap):
    """Per pass, swsim's and the last step's ms (launch included) add up to the steps'
    classes; Table 7.2's iteration splits by the conv share into parts the last step misses."""
    first, last = tiny_gap.steps[0], tiny_gap.steps[-1]
    assert sum(r.swsim_ms for r in tiny_gap.rows) == pytest.approx(sum(first.ms_by_class.values()))
    assert sum(r.last_ms for r in tiny_gap.rows) == pytest.approx(sum(last.ms_by_class.values()))
    for klass in tn.CLASSES:
        assert sum(r.last_ms for r in tiny_gap.rows if r.klass == klass) > last.ms_by_class[klass]
    conv2 = {r.what: r for r in tiny_gap.rows if r.layer == "conv2" and r.klass == "conv"}
    assert set(conv2) == set(tn.PASSES) and all(r.swsim_ms > 0 for r in conv2.values())
    assert tiny_gap.attribution() is None and tiny_gap.table_ms == 1e3 * BATCH / 1.0
    shared = tn.replace(tiny_gap, thesis_conv_fraction=0.75)
    split = shared.attribution()
    assert split["conv"][0] == pytest.approx(0.75 * shared.table_ms)
    assert split["conv"][1] == last.ms_by_class["conv"]
    assert split["conv"][1] + split["other"][1] == pytest.approx(sum(last.ms_by_class.values()))
    text = tn.format_gap([shared], detail=True)
    assert "Table 7.2: 32000.0 ms per iteration" in text and "% of the" in text
    assert f"{len(tiny_gap.rows) - tn.DETAIL_ROWS} other passes" in text


def test_memory_bound_cases_of_one_shape_are_simulated_once():
    """ResNet-50's repeated blocks: a case's name labels it, its shape decides its time."""
    est = tn.Estimator()
    first = est.stream(ops.Case("relu_a", "relu", 4096))
    assert est.stream(ops.Case("relu_b", "relu", 4096)) == first and len(est.cache) == 1
    assert est.stream(ops.Case("relu_c", "relu", 8192)) != first and len(est.cache) == 2


def test_a_cache_file_resumes_an_estimate_and_is_not_read_for_other_sources(tmp_path,
                                                                           monkeypatch):
    path = tmp_path / "estimates.pkl"
    case = ops.Case("relu", "relu", 4096)
    first = tn.Estimator(cache=tn.EstimateCache(path)).stream(case)

    def simulate(*args, **kwargs):
        raise AssertionError("simulated again")
    monkeypatch.setattr(ops.Case, "run", simulate)
    monkeypatch.setattr(ops, "sampled", simulate)
    assert tn.Estimator(cache=tn.EstimateCache(path)).stream(case) == first
    monkeypatch.setattr(tn, "fingerprint", lambda: "other sources")
    assert len(tn.EstimateCache(path)) == 0


@pytest.mark.parametrize("content", [b"", b"not a pickle", pickle.dumps([1, 2]),
                                     pickle.dumps({"fingerprint": "x"}), None])
def test_a_file_that_is_not_an_estimate_cache_is_refused_and_left_alone(tmp_path, content):
    path = tmp_path / "notes.txt"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(ArgumentError, match="not an estimate cache"):
        tn.EstimateCache(path)
    assert content is None or path.read_bytes() == content
