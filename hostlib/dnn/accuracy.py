"""ULP error of the VM's exp, sigmoid and tanh (kernels/dnn/vmath.inc) against references.

``sample(dtype, per_binade)`` is a dense deterministic sample of the whole float range: the
special values, every binade of both signs (``per_binade`` mantissas each, the ends of the
binade included), the neighbourhood of every threshold where the result or the algorithm
changes, and uniform sweeps of [-L, L] (L = 1.02 |ln(smallest subnormal)|: every input whose
exp is neither 0 nor inf), [-40, 40] (sigmoid and tanh not saturated) and [-2, 2].
``reference`` evaluates the function in x87 extended precision (64-bit significand, 11 more
bits than float64); ``ulp_error`` measures |result - reference| in units in the last place of
the result's format at the reference (subnormal results: the subnormal ulp). numpy only
prepares the inputs and checks; the results come from the VM.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .activation import activation_forward, exp
from .common import DnnError

FUNCTIONS = ("exp", "sigmoid", "tanh")
_EXTENDED = np.longdouble
_BITS = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}


def _thresholds(dtype) -> list:
    """Points where a function's result or the algorithm's path changes."""
    info = np.finfo(dtype)
    ln_max = float(np.log(_EXTENDED(info.max)))
    ln_tiny = float(np.log(_EXTENDED(info.smallest_normal)))
    ln_sub = float(np.log(_EXTENDED(info.smallest_subnormal)))
    half_ln2 = float(np.log(_EXTENDED(2)) / 2)
    points = [ln_max, ln_tiny, ln_sub, ln_sub + float(np.log(_EXTENDED(2))) / 2,
              1024.0, 32.0, half_ln2, 0.55, 19.0, 36.7, 18.7]
    return [sign * p for p in points for sign in (1.0, -1.0)]


def sample(dtype, per_binade: int = 64, uniform: int = 100_000, seed: int = 0) -> np.ndarray:
    """The inputs of an accuracy run (see the module docstring); deterministic."""
    dtype = np.dtype(dtype)
    info = np.finfo(dtype)
    uint = _BITS[dtype]
    mant_bits, exp_bits = info.nmant, info.nexp
    rng = np.random.default_rng(seed)
    # every binade (subnormals are biased exponent 0) and sign, both ends of each binade
    exponents = np.arange(0, (1 << exp_bits) - 1, dtype=np.uint64)
    mantissas = rng.integers(0, 1 << mant_bits, size=(len(exponents), per_binade),
                             dtype=np.uint64)
    mantissas[:, 0] = 0
    mantissas[:, 1] = (1 << mant_bits) - 1
    bits = (exponents[:, None] << np.uint64(mant_bits)) | mantissas
    magnitudes = bits.reshape(-1).astype(uint).view(dtype)
    # +-k ulps around the thresholds
    near = []
    for t in _thresholds(dtype):
        centre = np.array(t, dtype)
        steps = np.arange(-32, 33)
        near.append((centre.view(uint).astype(np.int64) + steps).astype(uint).view(dtype))
    limit = -float(np.log(_EXTENDED(info.smallest_subnormal))) * 1.02
    specials = np.array([0.0, np.inf, np.nan, info.max, info.smallest_normal,
                         info.smallest_subnormal], dtype)
    parts = [magnitudes, -magnitudes, *near, specials, -specials,
             rng.uniform(-limit, limit, uniform).astype(dtype),
             rng.uniform(-40, 40, uniform).astype(dtype),
             rng.uniform(-2, 2, uniform).astype(dtype)]
    return np.concatenate(parts).astype(dtype)


def reference(function: str, x: np.ndarray) -> np.ndarray:
    """The function in extended precision."""
    xe = x.astype(_EXTENDED)
    with np.errstate(all="ignore"):
        if function == "exp":
            return np.exp(xe)
        if function == "tanh":
            return np.tanh(xe)
        if function == "sigmoid":
            e = np.exp(-np.abs(xe))
            return np.where(xe >= 0, 1 / (1 + e), e / (1 + e))
    raise DnnError(f"function must be one of {FUNCTIONS}, got {function!r}")


def ulp_error(result: np.ndarray, ref: np.ndarray, dtype) -> np.ndarray:
    """|result - ref| in ulps of dtype at ref; 0 where both are the same NaN / infinity, inf
    where only one of them is NaN or infinite (a result that overflows counts as correct when
    ref rounds to infinity in dtype)."""
    info = np.finfo(dtype)
    precision = info.nmant + 1
    out = result.astype(_EXTENDED)
    with np.errstate(all="ignore"):
        _, exponent = np.frexp(np.abs(ref))
        exponent = np.maximum(exponent.astype(np.int64) - 1, info.minexp)
        ulp = np.ldexp(_EXTENDED(1), exponent - (precision - 1))
        error = np.abs(out - ref) / ulp
        rounded = ref.astype(dtype)
    nan_out, nan_ref = np.isnan(out), np.isnan(ref)
    inf_out = np.isinf(out)
    error = np.where(inf_out | nan_out | nan_ref, np.inf, error)
    same = (nan_out & nan_ref) | (out == ref) | (inf_out & (rounded == out))
    return np.where(same, 0.0, error).astype(np.float64)


@dataclass
class Accuracy:
    function: str
    dtype: str
    points: int
    max_ulp: float
    worst_input: float
    cycles: int


def measure(function: str, dtype, per_binade: int = 64, uniform: int = 100_000,
            machine=None) -> Accuracy:
    """Run ``function`` on the VM over ``sample(dtype, ...)`` and return the largest error."""
    x = sample(dtype, per_binade, uniform)
    if function == "exp":
        y, stats = exp(x, machine=machine)
    else:
        y, stats = activation_forward(x, function, machine=machine)
    error = ulp_error(y, reference(function, x), dtype)
    worst = int(np.argmax(error))
    return Accuracy(function, np.dtype(dtype).name, x.size, float(error[worst]),
                    float(x[worst]), stats.kernel_cycles)
