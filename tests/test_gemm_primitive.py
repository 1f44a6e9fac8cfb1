"""The LDM GEMM primitive (kernels/gemm/gemm_prim.s) through its host driver: results equal numpy for
both C layouts, both single-precision strategies and Kb = 1; the inner loop issues one vmad per
cycle; runs are deterministic and both engines agree."""
import numpy as np
import pytest

from swsim.hostlib.blas.primitive import (MESH, fits, format_table, ldm_gemm, ldm_layout, sweep,
                                     tolerance)


def operands(mb, nb, kb, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    draw = lambda rows, cols: rng.standard_normal((MESH * rows, MESH * cols)).astype(dtype)
    return draw(mb, kb), draw(kb, nb), draw(mb, nb)


def check_product(mb, nb, kb, layout, dtype=np.float64, f32_strategy="convert",
                  engine="c"):
    A, B, C = operands(mb, nb, kb, dtype)
    result, stats = ldm_gemm(A, B, C, engine=engine, layout=layout, f32_strategy=f32_strategy)
    assert result.dtype == dtype
    expected = C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(result, expected, **tolerance(dtype, kb))
    return stats


# (vector-dimension block, splat-dimension block, Kb): one register tile, several tiles in
# both directions, Kb = 1 (no steady loop iteration) and Kb = 2 (one).
SHAPES = [(16, 4, 1), (16, 4, 2), (32, 8, 3), (48, 12, 5), (32, 16, 17)]


def block_shape(vector, splat, layout):
    """(Mb, Nb): "nm" vectorises M, "mn" vectorises N."""
    return (vector, splat) if layout == "nm" else (splat, vector)


@pytest.mark.parametrize("layout", ["mn", "nm"])
@pytest.mark.parametrize("vector, splat, kb", SHAPES)
def test_double_equals_numpy(layout, vector, splat, kb):
    check_product(*block_shape(vector, splat, layout), kb, layout)


@pytest.mark.parametrize("strategy", ["convert", "put"])
@pytest.mark.parametrize("layout", ["mn", "nm"])
@pytest.mark.parametrize("vector, splat, kb", [(16, 4, 1), (32, 8, 3), (32, 16, 9)])
def test_single_equals_numpy(strategy, layout, vector, splat, kb):
    check_product(*block_shape(vector, splat, layout), kb, layout, np.float32, strategy)


def test_python_engine_agrees_with_c_engine():
    A, B, C = operands(16, 4, 2)
    by_engine = {engine: ldm_gemm(A, B, C, engine=engine, layout="nm")
                 for engine in ("python", "c")}
    (c_py, s_py), (c_c, s_c) = by_engine["python"], by_engine["c"]
    np.testing.assert_array_equal(c_py, c_c)
    assert (s_py.cycles, s_py.kernel_cycles) == (s_c.cycles, s_c.kernel_cycles)
    np.testing.assert_allclose(c_py, C + A @ B, **tolerance(np.float64, 2))


def test_runs_are_deterministic():
    A, B, C = operands(32, 8, 4)
    (c1, s1), (c2, s2) = (ldm_gemm(A, B, C, layout="nm") for _ in range(2))
    np.testing.assert_array_equal(c1, c2)
    assert (s1.cycles, s1.kernel_cycles) == (s2.cycles, s2.kernel_cycles)


def cycles(mb, nb, kb, layout, dtype=np.float64, f32_strategy="convert"):
    A, B, _ = operands(mb, nb, kb, dtype)
    return ldm_gemm(A, B, layout=layout, f32_strategy=f32_strategy)[1].cycles


@pytest.mark.parametrize("layout", ["mn", "nm"])
def test_inner_loop_issues_one_vmad_per_cycle(layout):
    # 8 more k per block add 8 steps x 4 register tiles x 8 k x 16 cycles: every extra
    # iteration of every role costs exactly its 16 vmads (execution efficiency 100%).
    mb, nb = block_shape(32, 8, layout)
    tile_steps = MESH * 2 * 2
    assert [cycles(mb, nb, kb + 8, layout) - cycles(mb, nb, kb, layout)
            for kb in (8, 16)] == [tile_steps * 8 * 16] * 2


def test_single_precision_load_and_put_costs_four_more_cycles_per_k():
    # Strategy 1's senders issue 8 puts besides the loop's 12 P1 instructions: 20 cycles.
    tile_steps = MESH
    assert cycles(16, 4, 16, "nm", np.float32, "put") \
        - cycles(16, 4, 8, "nm", np.float32, "put") == tile_steps * 8 * 20


def test_large_blocks_run_near_peak():
    stats = check_product(16, 4, 384, "nm")
    assert stats.efficiency > 0.98, stats


def test_shapes_that_do_not_suit_or_fit_are_refused():
    A, B, _ = operands(8, 16, 1)              # Mb = 8 is not a multiple of 16 for "nm"
    with pytest.raises(ValueError, match="multiple of 16"):
        ldm_gemm(A, B, layout="nm")
    with pytest.raises(ValueError, match="more than 65536"):
        ldm_layout(64, 64, 64)
    assert fits(16, 4, 384) and not fits(16, 4, 384, np.float32, "convert")


def test_sweep_reports_best_and_share():
    result = sweep(shapes=[(4, 16, 1), (16, 16, 32)])
    assert result.best.kb == 32 and result.share_above_threshold == 0.5
    table = format_table(result)
    assert table.splitlines()[1].split()[:3] == ["16", "16", "32"]
    assert "best" in table.splitlines()[-1]
