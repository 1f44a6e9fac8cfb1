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
