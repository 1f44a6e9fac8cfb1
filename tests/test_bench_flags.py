"""Every `swsim bench X` takes --quick and --json FILE (the project standard), a bad --json path
is refused before the run, and `bench fidelity --quick --json FILE` writes its rows."""
import argparse
import json

import numpy as np
import pytest

from swsim.cli import build_parser
from swsim.hostlib.tools.bench import as_json, fidelity


def _bench_parsers() -> dict:
    bench = build_parser()._subparsers._group_actions[0].choices["bench"]
    return bench._subparsers._group_actions[0].choices


def test_there_are_benches():
    assert {"fidelity", "ops", "gemm", "speed", "conv", "train"} <= set(_bench_parsers())


@pytest.mark.parametrize("name", sorted(_bench_parsers()))
def test_bench_takes_quick_and_json_file(name, tmp_path):
    target = str(tmp_path / "out.json")
    args = _bench_parsers()[name].parse_args(["--quick", "--json", target])
    assert args.quick is True
    assert args.json == target


@pytest.mark.parametrize("name", sorted(_bench_parsers()))
def test_bench_refuses_json_in_a_missing_directory(name, tmp_path, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", name, "--json", str(tmp_path / "no" / "x.json")])
    assert "--json" in capsys.readouterr().err


def test_jsonable_expands_dataclasses_with_properties_and_keys():
    row = fidelity.Row("k", "q", 2.0, 3.0, "cycles")
    data = as_json.jsonable({(1, 2): [row], "dtype": np.float32, "x": np.arange(2.0)})
    assert data["(1, 2)"][0]["measured"] == 3.0
    assert data["dtype"] == "float32" and data["x"] == [0.0, 1.0]
    assert data["(1, 2)"][0]["error_pct"] == row.error_pct
    assert json.loads(json.dumps(data)) == data


def test_fidelity_quick_writes_its_rows(tmp_path, capsys):
    out = tmp_path / "fidelity.json"
    args = build_parser().parse_args(["bench", "fidelity", "--quick", "--json", str(out)])
    assert args.func(args) == 0
    rows = json.loads(out.read_text())
    keys = {row["key"] for row in rows}
    assert "rc_latency" in keys and "gemm_primitive_best" not in keys
    assert all(isinstance(row["measured"], float) for row in rows)
    assert "error %" in capsys.readouterr().out          # the table is printed too


def test_fidelity_json_without_a_file_prints_only_json(capsys):
    args = build_parser().parse_args(["bench", "fidelity", "--quick", "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)[0]["unit"]
