"""`swsim bench speed`'s kernels table: what it counts (every launch of a host call), the
per-launch row, the grouping of the table and the CLI's --quick/--only/--json FILE."""
import argparse
import json

import pytest

from swsim.hostlib.tools.bench import speed
from swsim.hostlib.tools.tool_commands import register
from swsim.kernels import program
from swsim.vm import Machine


def test_recorded_runs_count_every_launch_of_a_call():
    m = Machine()
    runs = speed.RecordedRuns(m)
    prog = program("bench/speed.s")
    first = m.run(prog, entry="vmad_comm", args=[10])
    second = m.core_group(1).run(prog, entry="int_chain", args=[5])   # a core group's view too
    assert runs.results() == [first, second]
    instructions, cycles = speed._totals(runs)
    assert instructions == speed.issued(first) + speed.issued(second) > 0
    assert cycles == first.kernel_cycles + second.kernel_cycles


def test_one_launch_row_is_a_short_kernel_on_64_cpes():
    row = speed.launch(repeats=1)
    assert row.table == "kernels" and 500 <= row.cycles <= 2000
    assert row.instructions > 64 * speed.LAUNCH_ITERATIONS * 16   # 16 vmads per iteration
    assert 0 < row.cpu_seconds and 0 < row.host_seconds


def test_table_groups_rows_by_table():
    rows = [speed.SpeedRow("x", "c", 10, 5, 1.0, 0.5),
            speed.SpeedRow("y", "c", 20, 5, 2.0, 1.0, "kernels")]
    text = speed.format_table(rows)
    assert text.index("loops: workload") < text.index("x ") < text.index("kernels: workload") \
        < text.index("y ")


def test_run_refuses_unknown_tables():
    with pytest.raises(ValueError, match="tables are loops, kernels"):
        speed.run(tables=("micro",))


def _command(*argv):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["bench", "speed", *argv])


def test_cli_json_file_and_options(monkeypatch, tmp_path, capsys):
    seen = {}

    def fake_run(**options):
        seen.update(options)
        return [speed.SpeedRow("x", "c", 10, 5, 1.0, 0.5, "kernels")]
    monkeypatch.setattr(speed, "run", fake_run)
    out = tmp_path / "speed.json"
    args = _command("--quick", "--only", "kernels", "--json", str(out))
    assert args.func(args) == 0
    assert seen == dict(repeats=3, scale=1.0, quick=True, tables=["kernels"])
    assert json.loads(out.read_text())[0]["cpu_mips"] == 10 / 0.5 / 1e6
    assert "kernels: workload" in capsys.readouterr().out


@pytest.mark.slow
def test_quick_kernels_table_runs_every_case():
    rows = speed.kernels(repeats=1, quick=True)
    assert len(rows) == len(speed._kernel_cases(True))
    assert all(r.instructions > 0 and r.cycles > 0 for r in rows)


def test_cli_json_without_a_file_prints_only_json(monkeypatch, capsys):
    monkeypatch.setattr(speed, "run", lambda **options: [speed.SpeedRow("x", "c", 10, 5, 1.0,
                                                                        0.5)])
    args = _command("--json")
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)[0]["workload"] == "x"
