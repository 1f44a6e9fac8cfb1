"""Operators give back the main memory they allocate (issue 30): on one shared Machine, calls
after the first leave its allocation point where it was, so any number of calls runs in
bounded memory; the 1 000-call loops of every main operator are marked slow."""
import numpy as np
import pytest

import swsim
from swsim.hostlib import dnn, gemm

RNG = np.random.default_rng(0)
A = RNG.standard_normal((8, 8))
X = RNG.standard_normal((2, 1, 4, 4))
W = RNG.standard_normal((2, 1, 3, 3))
DY = RNG.standard_normal((2, 2, 4, 4))
LABELS = np.arange(8) % 8

OPERATORS = {
    "gemm": lambda m: gemm(A, A, machine=m),
    "conv2d_forward": lambda m: dnn.conv2d_forward(X, W, padding=1, machine=m),
    "conv2d_backward_filter": lambda m: dnn.conv2d_backward_filter(DY, X, W.shape, padding=1,
                                                                   machine=m),
    "pool2d_forward": lambda m: dnn.pool2d_forward(X, 2, machine=m),
    "softmax_cross_entropy": lambda m: dnn.softmax_cross_entropy(A, LABELS, machine=m),
    "linear_forward": lambda m: dnn.linear_forward(A, A, bias=A[0], machine=m),
    "add": lambda m: dnn.add(A, A, machine=m),
}


def allocated(machine) -> int:
    return machine.mem.mark() - machine.config.static_data_bytes


@pytest.mark.parametrize("name", OPERATORS)
def test_calls_leave_the_allocation_point_where_it_was(name):
    m = swsim.Machine()
    kept = m.mem.put(np.arange(16.0))          # the caller's own data stays
    start = allocated(m)
    for _ in range(5):
        OPERATORS[name](m)
        assert allocated(m) == start
    assert np.array_equal(m.mem.get(kept, (16,), np.float64), np.arange(16.0))


def test_a_core_groups_view_keeps_its_allocations_for_the_chips_driver_to_scope():
    """Other host threads may allocate in the chip's memory meanwhile (the Solver's CGs):
    the view's caller scopes it, with mem.mark() / mem.release()."""
    chip = swsim.Machine()
    mark = chip.mem.mark()
    dnn.add(A, A, machine=chip.core_group(0))
    assert chip.mem.mark() > mark
    chip.mem.release(mark)
    assert chip.mem.mark() == mark


def test_a_thousand_calls_run_in_bounded_memory():
    """The cheapest operator 1 000 times; each one's slow loop below."""
    m = swsim.Machine()
    dnn.pool2d_forward(X, 2, machine=m)
    start = allocated(m)
    for _ in range(1000):
        dnn.pool2d_forward(X, 2, machine=m)
    assert allocated(m) == start


@pytest.mark.slow
@pytest.mark.parametrize("name", OPERATORS)
def test_a_thousand_calls_of_each_operator(name):
    m = swsim.Machine()
    OPERATORS[name](m)
    start = allocated(m)
    for _ in range(1000):
        OPERATORS[name](m)
    assert allocated(m) == start
