"""``swsim run`` / ``swsim config``, the generated docs/config.md, and the trace file."""
import json
import os

import numpy as np

from swsim.cli import main
from swsim.vm.vm_commands import config_doc

KERNEL = """
.text
.globl kernel
kernel:
    ldl $1, 0($16)
    addl $1, $17, $1
    stl $1, 0($16)
    halt
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_kernel(tmp_path):
    path = tmp_path / "k.s"
    path.write_text(KERNEL)
    np.save(tmp_path / "in.npy", np.array([40, 0], dtype=np.int64))
    return str(path)


def test_run_with_array_argument_dump_json_and_trace(tmp_path, capsys):
    kernel = write_kernel(tmp_path)
    out, trace = tmp_path / "out.npy", tmp_path / "trace.json"
    status = main(["run", kernel, "--cpes", "1", "--arg", f"@{tmp_path / 'in.npy'}",
                   "--arg", "2", "--dump", f"arg0:2:int64:{out}", "--engine", "python",
                   "--json", "--trace", str(trace), "--set", "gld_latency=100"])
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kernel_cycles"] == 103     # ldl c0 (ready c100), addl c100, stl c101, halt c102
    assert list(np.load(out)) == [42, 0]
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "X"}


def test_stats_print_the_summary_and_mesh(tmp_path, capsys):
    kernel = write_kernel(tmp_path)
    assert main(["run", kernel, "--cpes", "8", "--arg", f"@{tmp_path / 'in.npy'}",
                 "--engine", "python", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "EE per CPE" in out and "global        8 loads" in out


def test_fault_prints_the_report_and_exits_1(tmp_path, capsys):
    kernel = write_kernel(tmp_path)
    assert main(["run", kernel, "--cpes", "1", "--arg", "3", "--engine", "python"]) == 1
    err = capsys.readouterr().err
    assert "CPE 0, pc 0x10000000, cycle 0: ldl $1, 0($16)" in err and "aligned" in err
    assert "Traceback" not in err


def test_bad_options_are_errors_not_tracebacks(tmp_path, capsys):
    kernel = write_kernel(tmp_path)
    assert main(["run", kernel, "--set", "nosuch=1", "--engine", "python"]) == 1
    assert main(["run", kernel, "--dump", "bad", "--cpes", "1", "--engine", "python"]) == 1
    assert "--dump" in capsys.readouterr().err


def test_config_command(capsys):
    assert main(["config", "--preset", "sw26010pro"]) == 0
    assert "262144" in capsys.readouterr().out
    assert main(["config", "--markdown"]) == 0
    assert capsys.readouterr().out == config_doc()


def test_config_doc_is_up_to_date():
    with open(os.path.join(ROOT, "docs", "config.md"), encoding="utf-8") as f:
        assert f.read() == config_doc(), "regenerate: swsim config --markdown > docs/config.md"
