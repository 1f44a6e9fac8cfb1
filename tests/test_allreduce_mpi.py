"""The allreduce and data-parallel training under a real MPI (the `mpi` extra: the mpich wheel's
mpiexec and mpi4py, both in the test extra), each through an `mpiexec` subprocess. A missing
MPI is a failure, not a skip: CI must not pass by running none of these."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swsim.hostlib.train import allreduce as ar
from swsim.hostlib.train import Solver, example, parse_net
from swsim.hostlib.train.prototxt import SolverParameter

HERE = Path(__file__).parent
# The mpiexec installed beside this python (the venv's, from the mpich wheel), else the PATH's.
MPIEXEC = next((str(c) for c in (Path(sys.executable).parent / "mpiexec",) if c.exists()),
               shutil.which("mpiexec"))
import mpi4py  # noqa: F401,E402  (the ranks import it: fail here, at collection, if it is missing)
TIMEOUT = 300        # seconds: 5 busy-polling ranks on 2 shared cores are slow, not stuck


def mpiexec(ranks, *command):
    assert MPIEXEC, "no mpiexec: pip install -e '.[test]' installs the mpich wheel's"
    done = subprocess.run([MPIEXEC, "-n", str(ranks), *command], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_allreduce_is_the_sum_and_bit_identical_on_1_to_5_ranks():
    lines = mpiexec(5, sys.executable, str(HERE / "allreduce_ranks.py")).splitlines()
    cases = {(f"p={p}", a, f"n={n}") for p in range(1, 6) for a in ar.ALGORITHMS
             for n in (1, 4, 1003)}
    seen = {tuple(line.split()[:3]): line for line in lines}
    assert set(seen) == cases
    bad = [line for line in lines if "identical=True close=True" not in line]
    assert not bad, bad


def losses(tmp_path, ranks, *extra):
    log = tmp_path / f"log-{ranks}-{'-'.join(extra)}.jsonl"
    command = [sys.executable, "-m", "swsim.cli", "train", example("mlp"), "--steps", "3",
               "--log", str(log), *extra]
    mpiexec(ranks, *command)
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_two_ranks_train_as_one_rank_with_the_full_batch(tmp_path):
    solver = Solver(parse_net(example("mlp")), SolverParameter(base_lr=0.01))  # the CLI's
    single = [solver.step() for _ in range(3)]
    double = losses(tmp_path, 2, "--allreduce", "ring")
    assert [r["step"] for r in double] == [1, 2, 3]
    assert all(len(r["bytes_sent"]) == 2 and min(r["bytes_sent"]) > 0 for r in double)
    for one, two in zip(single, double):
        assert two["loss"] == pytest.approx(one.loss, rel=1e-5)
        assert two["sim_seconds"] < one.sim_seconds     # half the batch per node


def test_bench_real_run_traffic_is_the_closed_forms():
    from swsim.hostlib.tools.bench import allreduce as bench
    rows = bench.real_runs(nodes=(4,))
    assert {r["algorithm"] for r in rows} == set(ar.ALGORITHMS)
    for row in rows:
        for key, want in row["expected"].items():
            if want is not None:
                assert max(r[key] for r in row["ranks"]) == want, (row["algorithm"], key)
    across = {r["algorithm"]: max(x["bytes_across"] for x in r["ranks"]) for r in rows}
    assert across["topawa"] < across["rabenseifner"]


def test_a_bad_batch_split_stops_every_rank_with_the_layer_and_field():
    done = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-m", "swsim.cli", "train",
                           str(example("mlp")), "--steps", "1"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode != 0
    assert "data_param.batch_size: 64 does not divide among 3 core groups" in done.stderr
    assert "Traceback" not in done.stderr
