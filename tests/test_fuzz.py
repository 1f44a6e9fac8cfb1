"""`swsim fuzz`: a bounded slice of the differential campaign (deterministic seed), and the
minimisation of a mismatch into a reproducer that `--replay` runs again."""
import json

from swsim.cli import main
from swsim.vm import fuzz


CI_PROGRAMS = 150   # about 10 s on one core (docs/testing.md gives the measured throughput)


def test_a_slice_of_the_campaign_finds_no_mismatch(tmp_path):
    report = fuzz.campaign(CI_PROGRAMS, seed_value=2026, out_dir=str(tmp_path))
    assert report.programs == CI_PROGRAMS
    assert (report.mismatches, report.crashes) == (0, 0), report.summary()
    assert report.programs_per_second > 0


def test_a_mismatch_is_minimised_into_a_reproducer(tmp_path, monkeypatch, capsys):
    """A stand-in disagreement (any program with a put) is shrunk to a small program. The
    stand-in check runs no engine (the slice above runs them): shrinking tries hundreds of
    candidates, and only the reproducer's replay below needs the real engines."""
    def check_with_a_planted_mismatch(case):
        if "putr" in case.text:
            raise fuzz.Mismatch("planted: the program puts")

    monkeypatch.setattr(fuzz, "check_case", check_with_a_planted_mismatch)
    report = fuzz.campaign(60, seed_value=5, out_dir=str(tmp_path))
    assert report.mismatches >= 1 and report.crashes == 0
    data = json.loads(open(report.reproducers[0]).read())
    assert data["problem"] == "Mismatch: planted: the program puts"
    code = [line for line in data["text"].splitlines() if line.startswith("\t")]
    assert "putr" in data["text"] and len(code) < 30   # minimised
    monkeypatch.undo()
    assert main(["fuzz", "--replay", report.reproducers[0]]) == 0   # the real engines agree
    assert "the engines agree" in capsys.readouterr().out


def test_replay_refuses_a_file_that_is_not_a_reproducer(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    assert main(["fuzz", "--replay", str(path)]) == 1
    assert "not a fuzz reproducer" in capsys.readouterr().err


def test_the_campaign_needs_no_source_tree(tmp_path):
    # the generator is part of the package: a run from elsewhere imports nothing of tests/
    import subprocess
    import sys
    script = ("import sys\nfrom swsim.vm import fuzz\nreport = fuzz.campaign(5, 1, out_dir='.')\n"
              "print(report.programs, report.mismatches, "
              "any(m in sys.modules for m in ('vm_helpers', 'vmgen')))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.stdout.split() == ["5", "0", "False"], done.stderr


def test_without_hypothesis_fuzz_says_what_to_install(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "hypothesis", None)   # import hypothesis fails
    assert main(["fuzz", "--programs", "1"]) == 1
    err = capsys.readouterr().err
    assert "swsim fuzz needs Hypothesis, which is not installed: pip install 'swsim[fuzz]'" \
        in err and "Traceback" not in err
