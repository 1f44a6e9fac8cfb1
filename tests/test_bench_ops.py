"""`swsim bench ops`: the extrapolation from sampled rounds against a full run, the table."""
import numpy as np

from swsim.hostlib.tools.bench import ops


def test_extrapolation_matches_a_full_run_and_meets_the_target():
    case = ops.Case("add, small", "axpby", 3_000_000, np.float64)
    result = ops.measure(case, "c", get_gbps=30.9)
    assert abs(result.validation_error) < 0.03
    assert result.ratio >= ops.TARGET
    table = ops.format_table([result])
    assert "add, small" in table and "met by every operator" in table
