"""Layout transforms (hostlib/dnn/layout_transform.py, kernels/dnn/transform.inc): every pair of
registered layouts against numpy's transpose, bit exact, with tiles cut at odd sizes."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from swsim.hostlib import dnn
from swsim.hostlib.dnn.layout_transform import group_swaps, moves_nothing, swap_passes

PAIRS = list(itertools.product(dnn.LAYOUTS, repeat=2))


def numpy_transform(x, src, dst):
    src, dst = dnn.LAYOUTS[src], dnn.LAYOUTS[dst]
    return x.transpose([src.index(axis) for axis in dst])


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(PAIRS), st.sampled_from([np.float32, np.float64]),
       st.tuples(*[st.integers(1, 9)] * 3), st.integers(1, 140), st.integers(0, 2 ** 32 - 1))
def test_every_pair_matches_numpy(pair, dtype, dims, last, seed):
    src, dst = pair
    x = np.random.default_rng(seed).standard_normal(dims + (last,)).astype(dtype)
    y, stats = dnn.transform(x, src, dst)
    want = numpy_transform(x, src, dst)
    assert y.dtype == dtype and y.shape == want.shape
    assert y.tobytes() == np.ascontiguousarray(want).tobytes()
    passes = max(1, len(group_swaps(dnn.LAYOUTS[src], dnn.LAYOUTS[dst])))
    # axes of length 1 move nothing: they may save passes, never add one
    assert stats.passes == passes if 1 not in x.shape else 1 <= stats.passes <= passes


def test_bits_are_kept():
    # NaN payloads, signed zeros, infinities and denormals move as raw words
    words = np.array([0x7FF0000000000123, 0x8000000000000000, 0x7FF0000000000000, 1,
                      0xFFF8000000000000, 0x3FF0000000000000], np.uint64)
    x = np.resize(words, 2 * 3 * 4 * 5).view(np.float64).reshape(2, 3, 4, 5)
    y, _ = dnn.transform(x, "NCHW", "RCNB")
    assert y.view(np.uint64).tobytes() == \
        np.ascontiguousarray(numpy_transform(x, "NCHW", "RCNB")).view(np.uint64).tobytes()


def test_large_planes_are_cut_along_their_rows():
    # a plane of 300 x 301 doubles does not fit a tile: the D axis is cut
    x = np.random.default_rng(8).standard_normal((2, 3, 300, 301))
    y, stats = dnn.transform(x, "NCHW", "CNHW")
    assert stats.parts[0].tile[2] < 300 * 301
    np.testing.assert_array_equal(y, numpy_transform(x, "NCHW", "CNHW"))
    back, _ = dnn.transform(y, "CNHW", "NCHW")
    np.testing.assert_array_equal(back, x)


def test_core_groups_give_the_same_bits():
    x = np.random.default_rng(4).standard_normal((3, 70, 5, 9)).astype(np.float32)
    first, _ = dnn.transform(x, "NCHW", "RCNB")
    for cgs in (2, 4):
        y, stats = dnn.transform(x, "NCHW", "RCNB", cgs=cgs)
        assert y.tobytes() == first.tobytes() and stats.parts[0].cgs == cgs
    np.testing.assert_array_equal(first, x.transpose(2, 3, 1, 0))


def test_fewest_group_swaps():
    assert group_swaps("NCHW", "NHWC") == [(1, 2, 4)]      # one pass: (N, C, HW) -> (N, HW, C)
    assert len(group_swaps("NCHW", "HWCN")) == 2
    assert group_swaps("NCHW", "NCHW") == []


def test_axes_of_length_one_are_not_swapped():
    # NCHW -> HWCN is two passes, but one (C, HW) -> (HW, C) at batch 1
    assert swap_passes((1, 64, 56, 56), "NCHW", "RCNB") == [(1, 64, 3136, 1)]
    assert len(swap_passes((2, 64, 56, 56), "NCHW", "RCNB")) == 2
    assert moves_nothing((1, 8, 4, 4), "NCHW", "CNHW") and moves_nothing((3, 1, 4, 4), "NCHW",
                                                                           "CNHW")
    assert not moves_nothing((2, 8, 4, 4), "NCHW", "CNHW")
    assert not moves_nothing((1, 8, 4, 4), "NCHW", "NCHW")     # a copy asked for
    x = np.random.default_rng(5).standard_normal((1, 9, 5, 7)).astype(np.float32)
    for dst in ("CNHW", "RCNB"):       # a relabelling still copies: one pass, the same bytes
        y, stats = dnn.transform(x, "NCHW", dst)
        assert stats.passes == 1 and y.tobytes() == \
            np.ascontiguousarray(numpy_transform(x, "NCHW", dst)).tobytes()


@pytest.mark.parametrize("call, message", [
    (lambda: dnn.transform(np.ones((2, 2, 2, 2)), "NCHW", "XYZW"), "unknown layout 'XYZW'"),
    (lambda: dnn.transform(np.ones((2, 2, 2)), "NCHW", "NHWC"), "must be 4-D"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(dnn.DnnError, match=message):
        call()
