"""`swsim bench redsync`'s scaling model (hostlib/tools/bench/redsync.py): eq. 8-1 against
eq. 8-2 per layer, with given selection times (no simulation here)."""
import pytest

from swsim.hostlib.tools.bench import redsync, train_nets
from swsim.hostlib.train import allreduce as ar

NET = ar.Network()
NO_REDUCTION = ar.ReductionCost(0.0, 0.0)
ALEXNET = train_nets.NETWORKS["alexnet"]


def _decompress(k):
    return 1e-9 * k


def _free(nbytes):
    return 0.0


def _slow(nbytes):
    return 1.0          # a second per layer: never worth it


def test_dense_has_no_communication_on_one_node():
    parts = redsync.iteration(ALEXNET, 1, "dense", {}, NET, NO_REDUCTION, _decompress)
    assert parts["communicate"] == 0 and parts["compute"] == pytest.approx(32 / 94.17)


def test_free_selection_sends_every_layer_sparse_and_asq_sends_fewer_bytes():
    select = {"trimmed": _free, "binary": _free}
    rgc = redsync.iteration(ALEXNET, 16, "rgc", select, NET, NO_REDUCTION, _free)
    asq = redsync.iteration(ALEXNET, 16, "rgc+asq", select, NET, NO_REDUCTION, _free)
    layers = len(redsync._layers(ALEXNET))
    assert rgc["sparse_layers"] == asq["sparse_layers"] == layers
    assert asq["communicate"] < rgc["communicate"]
    dense = redsync.iteration(ALEXNET, 16, "dense", select, NET, NO_REDUCTION, _free)
    assert rgc["communicate"] < dense["communicate"]


def test_decompression_grows_with_the_nodes():
    select = {"trimmed": _free, "binary": _free}
    few = redsync.iteration(ALEXNET, 2, "rgc", select, NET, NO_REDUCTION, _decompress)
    many = redsync.iteration(ALEXNET, 8, "rgc", select, NET, NO_REDUCTION, _decompress)
    assert few["sparse_layers"] == many["sparse_layers"] > 0
    assert many["decompress"] == pytest.approx(4 * few["decompress"])   # p sets of k


def test_slow_selection_falls_back_to_dense_per_layer():
    select = {"trimmed": _slow, "binary": _slow}
    rgc = redsync.iteration(ALEXNET, 16, "rgc", select, NET, NO_REDUCTION, _decompress)
    assert rgc["sparse_layers"] == 0 and rgc["select"] == 0


def test_selector_per_layer_follows_the_thesis():
    chosen = {name: selector for name, _, selector in redsync._layers(ALEXNET)}
    assert chosen["conv2"] == "trimmed" and chosen["fc6"] == "binary"


def test_the_thesis_lstm_is_204_mb_and_asq_never_quantises_its_decoder():
    assert 4 * sum(b.params for b in redsync.LSTM_LM.layers) == pytest.approx(204e6, rel=1e-3)
    small = redsync.LanguageModel(vocabulary=100, hidden=32, steps=2)
    select = {"binary": _free}
    rgc = redsync.iteration(small, 16, "rgc", select, NET, NO_REDUCTION, _free)
    asq = redsync.iteration(small, 16, "rgc+asq", select, NET, NO_REDUCTION, _free)
    assert rgc["sparse_layers"] == asq["sparse_layers"] == 4 and rgc["compute"] > 0
    # only the two LSTM blobs' values shrink to one mean: (k - 1) words each, to 15 nodes
    saved = sum(max(1, round(redsync.DENSITY * b.params)) - 1 for b in small.layers[:2])
    assert rgc["communicate"] - asq["communicate"] == pytest.approx(15 * 4 * saved * NET.beta1)
    longer = redsync.LanguageModel(vocabulary=100, hidden=32, steps=4)
    assert redsync._compute_seconds(longer) > rgc["compute"]


def test_every_accuracy_run_is_a_configuration_four_ranks_accept():
    from swsim.hostlib.tools.bench import redsync_accuracy as accuracy
    assert accuracy.compression("sgd") is None
    assert accuracy.compression("rgc-1", warmup=50).warmup_iter == 50
    for run in accuracy.RUNS:
        if run != "sgd":
            config = accuracy.compression(run).check(accuracy.RANKS)
            assert config.layers == "sparse" and config.warmup_iter == accuracy.WARMUP
    # LeNet at 0.1 % diverges after 10 dense steps: it warms up 5 epochs (1 437 images at 64)
    assert accuracy.default_warmup("lenet") == 113 == accuracy.warmup_steps("lenet", 5)
    assert accuracy.default_warmup("mlp") == accuracy.default_warmup("lstm") == accuracy.WARMUP
    assert accuracy.warmup_steps("lstm", 1) == 45               # 1 437 images at 32 per step
    row = dict(name="RGC 1%", accuracy={"150": 0.9}, final_loss=0.5, bytes_sent=[10, 30],
               replan="table")
    assert accuracy.format_row(row, 40.0).startswith(
        "RGC 1%                  90.00 % @150  loss 0.5000  bytes per rank 10..30 (50.00 % of")


def test_the_replay_shows_lenets_residual_growing_after_a_short_warm_up():
    """docs/redsync.md "Why LeNet diverged": at 0.1 % after 10 dense steps rank 0's residual
    and the weight steps grow step after step (the emulated runs then diverge)."""
    from swsim.hostlib.tools.bench.redsync_replay import replay
    rows = list(replay("lenet", steps=45, warmup=10, seed=2, test_every=15))
    norms = [row["residual_norm"] for row in rows]
    steps = [row["largest_step"] for row in rows]
    assert norms[0] > 0 and norms[1] > 2 * norms[0] and norms[2] > norms[1]
    assert steps[2] > steps[0]
