"""Communication-set selection on the CPEs (kernels/dnn/select.s, hostlib/dnn/select.py)
against numpy: the selected set is exactly the elements above the threshold found, never
fewer than k (unless fewer are nonzero), at most 2k for the binary search, exactly the top k
for the radix selectors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swsim.errors import ArgumentError
from swsim.hostlib.dnn.select import SIGNS, scatter_add, select, sum_of_squares
from swsim.vm import Machine

KEYS = {"abs": np.abs, "positive": lambda x: x, "negative": lambda x: -x}


def _check(x, k, method, sign, sel):
    key = KEYS[sign](x)
    above = np.flatnonzero(key > sel.threshold)
    assert sel.threshold >= 0
    assert np.array_equal(sel.indices, above)
    assert np.array_equal(sel.values.view(np.int32), x[above].view(np.int32))
    assert sel.nnz == len(above)
    nonzero = int(np.count_nonzero(key > 0))
    assert sel.nnz >= min(k, nonzero)
    if method in ("trimmed", "radix"):
        kth = np.sort(key)[::-1][k - 1]          # ties at the k-th key are all taken
        assert sel.nnz == (np.count_nonzero(key >= kth) if kth > 0 else nonzero)
    assert sel.selected_sum == pytest.approx(float(x[above].astype(np.float64).sum()),
                                              rel=1e-12, abs=1e-30)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 2500),
       method=st.sampled_from(("trimmed", "binary", "radix")),
       sign=st.sampled_from(tuple(SIGNS)), zeros=st.booleans(), scale=st.sampled_from(
           (1e-6, 1.0, 1e4)))
def test_selection_matches_numpy(seed, n, method, sign, zeros, scale):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * scale).astype(np.float32)
    if zeros:
        x[rng.random(n) < 0.5] = 0
    k = int(rng.integers(1, max(2, n // 50) + 1)) if n > 1 else 1
    sel = select(x, k, method=method, sign=sign)
    _check(x, k, method, sign, sel)


def test_binary_search_stays_within_2k_on_distinct_values():
    x = np.random.default_rng(5).permutation(np.arange(1, 20_001, dtype=np.float32))
    for k in (20, 200):
        sel = select(x, k, method="binary")
        assert k <= sel.nnz <= 2 * k
        _check(x, k, "binary", "abs", sel)


def test_sampled_reuses_the_threshold_in_one_pass():
    x = np.random.default_rng(2).standard_normal(3000).astype(np.float32)
    first = select(x, 10, method="binary")
    again = select(x * np.float32(1.01), 10, method="sampled", threshold=first.threshold)
    assert again.passes == 1 and again.threshold == first.threshold
    _check(x * np.float32(1.01), 1, "sampled", "abs", again)


def test_ties_and_all_zero():
    x = np.zeros(300, np.float32)
    for method in ("trimmed", "binary", "radix"):
        sel = select(x, 3, method=method)
        assert sel.nnz == 0 and sel.threshold == 0
    x[::3] = 1.5
    sel = select(x, 3, method="radix")
    assert sel.nnz == 100                      # every tie of the k-th key


def test_engines_agree_bit_for_bit():
    # one count pass, its reduction and the compaction: the Python engine runs 64 CPEs slowly
    x = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    c = select(x, 3, method="sampled", threshold=1.0, sign="negative")
    p = select(x, 3, method="sampled", threshold=1.0, sign="negative", engine="python")
    assert c.nnz > 3
    assert np.array_equal(c.indices, p.indices) and c.threshold == p.threshold
    assert c.selected_sum == p.selected_sum
    assert [s.cycles for s in c.stats.parts] == [s.cycles for s in p.stats.parts]


@pytest.mark.parametrize("method", ("trimmed", "binary", "radix"))
def test_equal_keys_and_keys_below_the_mean_terminate(method):
    ones = np.full(100, 2.0, np.float32)
    assert select(ones, 3, method=method).nnz == 100
    negative = -np.abs(np.random.default_rng(0).standard_normal(300)).astype(np.float32)
    sel = select(negative, 3, method=method, sign="positive")
    assert sel.nnz == 0 and sel.threshold == 0


def test_deterministic_and_leaves_memory_as_it_was():
    m = Machine()
    x = np.random.default_rng(4).standard_normal(2000).astype(np.float32)
    mark = m.mem.mark()
    a = select(x, 5, method="trimmed", machine=m)
    b = select(x, 5, method="trimmed", machine=m)
    assert m.mem.mark() == mark
    assert np.array_equal(a.indices, b.indices) and a.stats.cycles == b.stats.cycles


@pytest.mark.parametrize("kwargs, needle", [
    (dict(x=np.ones(4, np.float64), k=1), "float32"),
    (dict(x=np.array([1, np.nan], np.float32), k=1), "finite"),
    (dict(x=np.ones(4, np.float32), k=0), "k must"),
    (dict(x=np.ones(4, np.float32), k=5), "at most"),
    (dict(x=np.ones(4, np.float32), k=1, method="quick"), "method"),
    (dict(x=np.ones(4, np.float32), k=1, sign="up"), "sign"),
    (dict(x=np.ones(4, np.float32), k=1, method="sampled"), "threshold="),
    (dict(x=np.ones(4, np.float32), k=1, method="sampled", threshold=-1.0), "threshold"),
    (dict(x=np.ones(4, np.float32), k=2, high=1), "high"),
])
def test_bad_arguments_name_the_argument(kwargs, needle):
    with pytest.raises(ArgumentError, match=needle):
        select(**kwargs)


def test_scatter_add_matches_numpy_in_binary32():
    rng = np.random.default_rng(6)
    dense = rng.standard_normal(3000).astype(np.float32)
    sets = [(np.sort(rng.choice(3000, 200, replace=False)),
             rng.standard_normal(200).astype(np.float32)) for _ in range(3)]
    out, stats = scatter_add(dense, sets, -0.01)
    expected, alpha = dense.copy(), np.float32(-0.01)
    for indices, values in sets:                 # overlapping sets add in order
        expected[indices] = expected[indices] + alpha * values
    assert np.array_equal(out.view(np.int32), expected.view(np.int32))
    assert stats.launches == 3


@pytest.mark.parametrize("sets, needle", [
    ([(np.array([0, 0]), np.ones(2, np.float32))], "distinct"),
    ([(np.array([5]), np.ones(1, np.float32))], "distinct and in"),
    ([(np.array([0.0]), np.ones(1, np.float32))], "integers"),
    ([], "at least one"),
])
def test_scatter_add_refuses_bad_sets(sets, needle):
    with pytest.raises(ArgumentError, match=needle):
        scatter_add(np.zeros(5, np.float32), sets, 1.0)


def test_trimmed_top_k_is_one_launch():
    x = np.random.default_rng(7).uniform(-1, 1, 6000).astype(np.float32)
    sel = select(x, 6, method="trimmed")
    assert sel.stats.launches == 1
    assert sel.passes > 4                      # the threshold's counts and radix's 4 passes
    _check(x, 6, "trimmed", "abs", sel)


@pytest.mark.parametrize("method", ("trimmed", "binary", "radix"))
def test_core_groups_select_part_by_part(method):
    x = np.random.default_rng(8).standard_normal(4001).astype(np.float32)
    k, cgs = 9, 4
    sel = select(x, k, method=method, cgs=cgs)
    assert sel.nnz >= k and len(sel.cg_thresholds) == cgs
    ends = sel.cg_starts[1:] + (x.size,)
    assert all(start % 8 == 0 for start in sel.cg_starts)
    for start, end, threshold in zip(sel.cg_starts, ends, sel.cg_thresholds):
        part = x[start:end]
        share = -(-k * part.size // x.size)
        mine = sel.indices[(sel.indices >= start) & (sel.indices < end)]
        assert np.array_equal(mine, start + np.flatnonzero(np.abs(part) > threshold))
        if method == "binary":
            assert share <= len(mine) <= 2 * share
        else:
            assert len(mine) == share           # distinct keys: exactly each part's top
    assert np.array_equal(sel.values, x[sel.indices])
    assert sel.threshold == min(sel.cg_thresholds)


def test_core_groups_divide_the_time():
    x = np.random.default_rng(9).uniform(-1, 1, 1 << 15).astype(np.float32)
    one = select(x, 33, method="radix")
    four = select(x, 33, method="radix", cgs=4)
    assert one.stats.cycles / four.stats.cycles > 1.8     # 128 KB: fixed costs weigh
    reuse = select(x, 33, method="sampled", threshold=float(one.threshold), cgs=4)
    assert np.array_equal(reuse.indices, one.indices)   # one threshold: the same set


@pytest.mark.parametrize("cgs, needle", [(0, "cgs must be an integer"), (5, "at most")])
def test_core_groups_bad_count(cgs, needle):
    with pytest.raises(ArgumentError, match=needle):
        select(np.ones(64, np.float32), 1, cgs=cgs)


def test_sum_of_squares_in_double():
    x = np.random.default_rng(10).standard_normal(3001).astype(np.float32) * np.float32(1e3)
    total, stats = sum_of_squares(x)
    assert total == pytest.approx(float(np.sum(x.astype(np.float64) ** 2)), rel=1e-14)
    assert stats.cycles > 0 and sum_of_squares(x)[0] == total
