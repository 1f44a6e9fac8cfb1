"""The command line on runs that stop early, odd array files, bad dump specs, bad benchmark
options and a closed output pipe."""
import json
import subprocess
import sys

import numpy as np
import pytest

from swsim.cli import BROKEN_PIPE_STATUS, main

STOPS = {
    "fault": ("\tldl $1, 0($16)\n\tldl $2, 3($31)\n\thalt\n", [], "misaligned"),
    "deadlock": ("\tldl $1, 0($16)\n\tgetr $2\n\thalt\n", [], "deadlock"),
    "cycle_limit": ("\tldl $1, 0($16)\n1:\n\tbr 1b\n", ["--max-cycles", "500"], "cycle_limit"),
}


def kernel(tmp_path, body):
    path = tmp_path / "k.s"
    path.write_text(".text\n.globl kernel\nkernel:\n" + body)
    return str(path)


@pytest.mark.parametrize("engine", ["c", "python"])
@pytest.mark.parametrize("stop", sorted(STOPS))
def test_a_stopped_run_still_writes_json_trace_and_dump(tmp_path, capsys, stop, engine):
    body, options, kind = STOPS[stop]
    np.save(tmp_path / "in.npy", np.arange(4, dtype=np.int64))
    trace, out = tmp_path / "t.json", tmp_path / "out.npy"
    status = main(["run", kernel(tmp_path, body), "--cpes", "1", "--engine", engine,
                   "--arg", f"@{tmp_path / 'in.npy'}", "--json", "--trace", str(trace),
                   "--dump", f"arg0:4:int64:{out}", *options])
    captured = capsys.readouterr()
    assert status == 1
    report = json.loads(captured.out)
    assert report["stop"]["kind"] == kind
    assert json.loads(trace.read_text())["otherData"]["stopped"] == report["stop"]["message"]
    assert list(np.load(out)) == [0, 1, 2, 3]
    assert "state at the stop" in captured.err and "Traceback" not in captured.err


def test_a_big_endian_array_is_converted_and_said_so(tmp_path, capsys):
    np.save(tmp_path / "be.npy", np.array([40, 0], dtype=">i8"))
    out = tmp_path / "out.npy"
    status = main(["run", kernel(tmp_path, "\tldl $1, 0($16)\n\taddl $1, 2, $1\n"
                                           "\tstl $1, 0($16)\n\thalt\n"),
                   "--cpes", "1", "--arg", f"@{tmp_path / 'be.npy'}",
                   "--dump", f"arg0:2:int64:{out}"])
    assert status == 0
    assert list(np.load(out)) == [42, 0]
    assert "converted from >i8 (non-native byte order) to <i8" in capsys.readouterr().err


def test_a_non_numeric_array_is_refused(tmp_path, capsys):
    np.save(tmp_path / "s.npy", np.array(["a", "b"]))
    assert main(["run", kernel(tmp_path, "\thalt\n"), "--cpes", "1",
                 "--arg", f"@{tmp_path / 's.npy'}"]) == 1
    assert "expects a numeric array" in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("arg0:-1:int64:{out}", "must be positive sizes"),
    ("arg0:0:int64:{out}", "must be positive sizes"),
    ("arg0::int64:{out}", "must be positive sizes"),
    ("arg0:2:U4:{out}", "expects a numeric array"),
    ("arg3:2:int64:{out}", "expected ADDR:SHAPE:DTYPE:FILE"),
])
def test_a_bad_dump_is_refused_and_writes_nothing(tmp_path, capsys, spec, message):
    np.save(tmp_path / "in.npy", np.arange(2, dtype=np.int64))
    out = tmp_path / "out.npy"
    status = main(["run", kernel(tmp_path, "\thalt\n"), "--cpes", "1",
                   "--arg", f"@{tmp_path / 'in.npy'}", "--dump", spec.format(out=out)])
    assert status == 1 and message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("options, message", [
    (["--repeats", "0"], "--repeats: expected an integer >= 1, got 0"),
    (["--scale", "0"], "--scale: expected a factor"),
    (["--scale", "nan"], "--scale: expected a factor"),
])
def test_bench_speed_refuses_meaningless_options(capsys, options, message):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "speed", *options])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_closed_output_pipe_ends_quietly():
    """`swsim config | head -1`: the reader leaves early; no 'Broken pipe' message."""
    code = ("import sys; from swsim.cli import main; sys.stdout = open(sys.stdout.fileno(), 'w', "
            "buffering=1 << 16, closefd=False); sys.exit(main(['config']))")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.close()   # before anything is read: every write fails
    status = process.wait(timeout=60)
    assert status in (0, BROKEN_PIPE_STATUS)
    assert process.stderr.read() == b""
