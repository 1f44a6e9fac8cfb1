"""The baseline GEMM of `swsim bench gemm` experiment 4 (kernels/gemm/gemm_baseline.s)."""
import numpy as np
import pytest

from swsim import Machine
from swsim.hostlib.blas.baseline import KERNEL, KERNEL_ARGS, baseline_gemm, choose_tile


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
    config = Machine().config
    free = KERNEL.arena(config.ldm_bytes, KERNEL_ARGS).free
    assert stats.tile == (tile or choose_tile(m, n, k, free, config))
    assert stats.flops == 2 * m * n * k and stats.cycles == stats.run.kernel_cycles
    assert stats.gflops == pytest.approx(2 * m * n * k / (stats.run.kernel_cycles
                                                          / config.clock_hz) / 1e9)


def test_python_engine_agrees_with_c_engine():
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((8, 3)), rng.standard_normal((3, 16))
    (c_py, s_py), (c_c, s_c) = (baseline_gemm(A, B, engine=e) for e in ("python", "c"))
    np.testing.assert_array_equal(c_py, c_c)
    assert s_py.kernel_cycles == s_c.kernel_cycles


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
