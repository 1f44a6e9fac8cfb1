"""swGEMM's shared DMA (docs/gemm.md "Shared DMA"): when the 8 CPEs that share an operand's
memory rows cover them exactly, they move whole rows together in ROW / RANK mode. The results
are bit for bit those of the per-CPE (PE-mode) transfers, on both engines, and the run is
faster on the hardware-fitted DMA model."""
import numpy as np
import pytest

from swsim import Machine
from swsim.hostlib import gemm
from swsim.hostlib.blas import gemm_model
from swsim.hostlib.blas.gemm_model import DMA_PE, DMA_RANK, DMA_ROW, Blocking, Problem

CONFIG = Machine().config


def run(A, B, C=None, beta=0.0, trans_a=False, trans_b=False, shared=True, **kw):
    """gemm with the model's sharing, or with every operand in PE mode (placed row-major)."""
    if shared:
        return gemm(A, B, C, 1.5, beta, trans_a, trans_b, **kw)
    pe_only = pytest.MonkeyPatch()
    pe_only.setattr(gemm_model, "sharing", lambda *args: (DMA_PE,) * 3)
    pe_only.setattr(gemm_model, "panels", lambda *args: (None,) * 3)
    memoised = (gemm_model._predicted, gemm_model._best)   # they remember the real sharing
    try:
        for cache in memoised:
            cache.cache_clear()
        return gemm(A, B, C, 1.5, beta, trans_a, trans_b, **kw)
    finally:
        pe_only.undo()
        for cache in memoised:
            cache.cache_clear()


def test_ragged_rows_are_placed_padded_to_the_group():
    # 200 x 200 x 200 f32 with 28 x 32 x 4: A's rows (M = 200) padded to 8 x 28, B's and C's
    # (N = 200) to 8 x 32, so all three share; an operand given in memory keeps its ld.
    ragged = Problem(m=200, n=200, k=200, itemsize=4)
    blocking = Blocking(28, 32, 4)
    assert gemm_model.leading_dims(ragged, CONFIG, blocking) == (224, 256, 256)
    assert gemm_model.sharing(ragged, blocking, CONFIG) == (DMA_RANK, DMA_ROW, DMA_ROW)
    given = Problem(m=200, n=200, k=200, itemsize=4, lda=208, ldb=208, ldc=208)
    assert gemm_model.sharing(given, blocking, CONFIG) == (DMA_PE,) * 3


def test_modes_follow_the_memory_rows():
    # A natural (K x M) is shared by a column of CPEs (RANK), B (K x N) and C by a row (ROW);
    # a transposed operand the other way; a row wider than its 8 blocks shares when swGEMM
    # places it (in column panels), not when it is given in memory; C with beta is PE.
    square = Problem(m=256, n=256, k=256, itemsize=8)
    assert gemm_model.sharing(square, Blocking(32, 32, 8), CONFIG) == (DMA_RANK, DMA_ROW,
                                                                          DMA_ROW)
    transposed = Problem(m=256, n=256, k=64, itemsize=8, a_transposed=True, b_transposed=True)
    assert gemm_model.sharing(transposed, Blocking(32, 32, 8), CONFIG) == (DMA_ROW, DMA_RANK,
                                                                              DMA_ROW)
    assert gemm_model.sharing(square, Blocking(16, 32, 8), CONFIG) == (DMA_RANK, DMA_ROW,
                                                                          DMA_ROW)
    given = Problem(m=256, n=256, k=256, itemsize=8, lda=256)
    assert gemm_model.sharing(given, Blocking(16, 32, 8), CONFIG) == (DMA_PE, DMA_ROW,
                                                                         DMA_ROW)
    beta = Problem(m=256, n=256, k=256, itemsize=8, has_beta=True)
    assert gemm_model.sharing(beta, Blocking(32, 32, 8), CONFIG)[2] == DMA_PE


CASES = [
    # (M, N, K, dtype, trans_a, trans_b, with C and beta, blocking): every operand shared,
    # K rows split unevenly between the sharers (K = 20, 44), transposed operands, f32, beta
    (32, 128, 20, np.float64, True, False, False, (4, 16, 4)),
    (64, 128, 44, np.float32, True, False, False, (8, 16, 8)),
    (32, 128, 32, np.float64, False, True, False, (4, 16, 4)),
    (32, 128, 24, np.float64, True, False, True, (4, 16, 4)),
    # ragged: rows placed with zero padding to the 8 blocks' width (M 28 -> 32, N 100 -> 128;
    # K 28 -> 32 where K is the memory row)
    (28, 100, 20, np.float64, True, False, False, (4, 16, 4)),
    (28, 100, 28, np.float32, False, True, False, (4, 16, 4)),
    # rows wider than 8 blocks, placed in column panels: B and C (N = 256, 2 panels of 128),
    # A too (M = 72: 3 panels of 32, the last zero-padded), C of 3 panels (N = 300, f32)
    (32, 256, 20, np.float64, True, False, False, (4, 16, 4)),
    (72, 200, 20, np.float64, True, False, False, (4, 16, 4)),
    (40, 300, 28, np.float32, False, True, False, (4, 16, 4)),
    # transposed operands in panels: K = 72 is the memory row of both (3 panels of 32)
    (32, 128, 72, np.float64, False, True, False, (4, 16, 4)),
]


@pytest.mark.parametrize("m, n, k, dtype, trans_a, trans_b, beta, blocking", CASES)
def test_shared_dma_is_bit_identical_to_pe_mode(m, n, k, dtype, trans_a, trans_b, beta,
                                                 blocking):
    rng = np.random.default_rng(m + n + k)
    A = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    B = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    C = rng.standard_normal((m, n)).astype(dtype)
    problem = Problem(m=m, n=n, k=k, itemsize=np.dtype(dtype).itemsize,
                      a_transposed=not trans_a, b_transposed=trans_b, has_beta=beta)
    modes = gemm_model.sharing(problem, Blocking(*blocking), CONFIG)
    assert modes[:2] != (DMA_PE, DMA_PE), "the case must exercise sharing"
    shared, stats = run(A, B, C, 0.5 if beta else 0.0, trans_a, trans_b, blocking=blocking)
    alone, _ = run(A, B, C, 0.5 if beta else 0.0, trans_a, trans_b, shared=False,
                   blocking=blocking)
    assert shared.tobytes() == alone.tobytes()
    op_a = A.T if trans_a else A
    op_b = B.T if trans_b else B
    expected = 1.5 * op_a.astype(np.float64) @ op_b + (0.5 * C if beta else 0)
    assert np.allclose(shared, expected, rtol=0, atol=1e-4 * k)
    assert stats.run.counters["dma_requests"] > 0


def test_wide_rows_are_placed_in_column_panels():
    # K x N = 20 x 300 f64 with Nb = 16: panels of 8 x 16 = 128 columns, 3 of them (the last
    # 44 columns zero-padded), each 20 rows of 128 doubles; C likewise (M = 32 rows); A's 32
    # columns are one CG block (group-padded, no panels). Not with beta (C_in is PE mode),
    # for a result kept in memory, or for an operand given in memory.
    wide = Problem(m=32, n=300, k=20, itemsize=8)
    blocking = Blocking(4, 16, 4)
    assert gemm_model.panels(wide, CONFIG, blocking) == (
        None, gemm_model.Panels(3, 20 * 128), gemm_model.Panels(3, 32 * 128))
    assert gemm_model.leading_dims(wide, CONFIG, blocking) == (32, 128, 128)
    assert gemm_model.sharing(wide, blocking, CONFIG) == (DMA_RANK, DMA_ROW, DMA_ROW)
    for kept in (dict(has_beta=True), dict(row_major_result=True)):
        problem = Problem(m=32, n=300, k=20, itemsize=8, **kept)
        assert gemm_model.panels(problem, CONFIG, blocking)[2] is None
        assert gemm_model.sharing(problem, blocking, CONFIG)[2] == DMA_PE
    given = Problem(m=32, n=300, k=20, itemsize=8, ldb=304)
    assert gemm_model.panels(given, CONFIG, blocking)[1] is None
    assert gemm_model.sharing(given, blocking, CONFIG)[1] == DMA_PE


def test_both_engines_agree_on_a_shared_run():
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((12, 32)), rng.standard_normal((12, 128))
    c_result, c_stats = run(A, B, trans_a=True, blocking=(4, 16, 4), engine="c")
    py_result, py_stats = run(A, B, trans_a=True, blocking=(4, 16, 4), engine="python")
    assert c_result.tobytes() == py_result.tobytes()
    assert c_stats.kernel_cycles == py_stats.kernel_cycles


def test_shared_dma_is_faster_and_the_model_knows_it():
    # 256 x 256 x 256 double, the model's blocking: A (RANK), B and C (ROW) move whole lines
    # contiguously instead of one-line strided blocks that each pay the per-block cost.
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    shared, fast = run(A, B, trans_a=True, blocking=(32, 32, 8))
    alone, slow = run(A, B, trans_a=True, shared=False, blocking=(32, 32, 8))
    assert shared.tobytes() == alone.tobytes()
    assert fast.kernel_cycles < 0.7 * slow.kernel_cycles
    for stats in (fast, slow):   # the model prices each mode within 10 %
        assert abs(stats.predicted_cycles / stats.kernel_cycles - 1) < 0.10
