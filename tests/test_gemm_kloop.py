"""The thesis' 16-vmad GEMM inner loop (listing 4.1) on the emulator: all four register-
communication roles compute the right block products and issue at 16 cycles per iteration."""
import numpy as np
import pytest

from swsim import Machine
from swsim.kernels import program

# Accumulator registers $8..$23 in store order -> (m, n): C[m][n] = A_m * B_n (see the kernel).
REGISTER_TILES = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3),
                  (2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2), (2, 3), (3, 3)]


def run_kloop(k, engine="c", seed=0):
    rng = np.random.default_rng(seed)
    a_all = rng.standard_normal((8, k + 1, 16))
    b_all = rng.standard_normal((8, k + 1, 4))
    m = Machine()
    a, b = m.mem.put(a_all), m.mem.put(b_all)
    out = m.mem.put(np.zeros((64, 80)))
    res = m.run(program("gemm/gemm_kloop.s"), entry="gemm_kloop", args=[k, a, b, out],
                cpes=range(64), engine=engine)
    raw = m.mem.get(out, (64, 80), np.float64)
    return a_all, b_all, raw, raw.view(np.int64)[:, 64], res


def unpack(raw_cpe):
    c = np.zeros((16, 4))
    for r, (mv, n) in enumerate(REGISTER_TILES):
        c[4 * mv:4 * mv + 4, n] = raw_cpe[4 * r:4 * r + 4]
    return c


@pytest.mark.parametrize("engine", ["c", "python"])
def test_every_role_computes_its_block_product(engine):
    k = 5 if engine == "python" else 24
    a_all, b_all, raw, _, _ = run_kloop(k, engine)
    for cpe in range(64):
        i, j = divmod(cpe, 8)
        expected = a_all[i, :k].T @ b_all[j, :k]
        np.testing.assert_allclose(unpack(raw[cpe]), expected, rtol=1e-12, atol=1e-12)


def test_inner_loop_issues_at_16_cycles_per_iteration():
    # Going from 8 to 24 iterations adds exactly 16 x 16 cycles to every CPE's loop, whatever
    # its role: one vmad issues on P0 every cycle.
    *_, short, short_run = run_kloop(8)
    *_, long, long_run = run_kloop(24)
    assert np.all(long - short == 16 * 16), (long - short)
    # ... and each of those cycles issued a vmad on P0 on every CPE.
    assert [long_run.cpe[i].p0_valid - short_run.cpe[i].p0_valid for i in range(64)] == \
        [16 * 16] * 64
