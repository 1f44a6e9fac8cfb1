"""The baseline GEMM of `swsim bench gemm` experiment 4 (kernels/gemm_baseline.s)."""
import numpy as np
import pytest

from swsim.hostlib.blas.baseline import baseline_gemm


@pytest.mark.parametrize("m, n, k, tile", [
    (4, 16, 1, None),              # one micro-tile, one k
    (128, 48, 100, None),          # skinny, several tiles and K chunks
    (64, 64, 37, (32, 32, 16)),    # a last K chunk shorter than the others
    (256, 32, 16, (16, 32, 16)),   # more tiles than CPEs
])
def test_equals_numpy(m, n, k, tile):
    rng = np.random.default_rng(m + n + k)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    C, stats = baseline_gemm(A, B, tile=tile)
    assert np.allclose(C, A @ B, rtol=0, atol=1e-13 * k)
    assert stats.kernel_cycles > 0 and stats.gflops > 0


def test_bad_shapes_are_refused():
    A, B = np.ones((8, 4)), np.ones((4, 16))
    with pytest.raises(ValueError, match="multiple of 4"):
        baseline_gemm(np.ones((6, 4)), B)
    with pytest.raises(ValueError, match="multiple of 4, N of 16"):
        baseline_gemm(A, np.ones((4, 24)))
    with pytest.raises(ValueError, match="8 x 4 but B is 5 x 16"):
        baseline_gemm(A, np.ones((5, 16)))
    with pytest.raises(ValueError, match="float64"):
        baseline_gemm(A.astype(np.float32), B.astype(np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        baseline_gemm(A, B, tile=(8, 16, 10_000))
