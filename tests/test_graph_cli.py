"""``swsim onnx``: outputs' summary, the per-node table, --explain, --check, --json, errors."""
import json

import numpy as np
import onnxruntime

from swsim.cli import main

from graph_models import convnet, two_branch_net


def test_onnx_command(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    model.write_bytes(convnet().SerializeToString())
    x = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    records = tmp_path / "nodes.json"
    assert main(["onnx", str(model), "--input", f"x={tmp_path / 'x.npy'}", "--check",
                 "--json", str(records)]) == 0
    out = capsys.readouterr().out
    want = onnxruntime.InferenceSession(str(model)).run(None, {"x": x})[0]
    assert f"output y: float32 [2, 10] mean {want.mean():.6g}"[:30] in out
    assert f"argmax {int(want.argmax())}" in out
    # with the hardware's 40.6 k-cycle launch, swHMAE keeps the small nodes on the MPE
    assert "less work than a CPE launch (MPE 35185 cycles < spawn 40600)" in out
    assert "explicit" in out and "ms simulated" in out
    # the layout pass's transforms (into the conv's CNHW, back before the reshape) on the CPEs
    assert [(r["node"], r["device"]) for r in json.loads(records.read_text())] == [
        ("layout x NCHW>CNHW", "CPE"), ("conv", "CPE"), ("relu", "MPE"), ("pool", "MPE"),
        ("layout p CNHW>NCHW", "CPE"), ("flat", "view"), ("fc", "MPE"), ("softmax", "MPE")]
    assert main(["onnx", str(model), "--explain"]) == 0
    assert "fc  Gemm  -> 2x10" in capsys.readouterr().out


def test_onnx_command_errors(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    model.write_bytes(convnet().SerializeToString()[:50])
    assert main(["onnx", str(model)]) == 1
    assert "not a valid ONNX model" in capsys.readouterr().err
    model.write_bytes(convnet().SerializeToString())
    assert main(["onnx", str(model), "--input", "x"]) == 1
    assert "--input must be NAME=FILE.npy" in capsys.readouterr().err
    np.save(tmp_path / "bad.npy", np.zeros((1, 3, 8, 8), np.float32))
    assert main(["onnx", str(model), "--input", f"x={tmp_path / 'bad.npy'}"]) == 1
    assert "'x' must be float32 of shape [2, 3, 8, 8]" in capsys.readouterr().err


def test_onnx_command_on_core_groups_with_split(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    model.write_bytes(convnet(batch=4).SerializeToString())
    x = np.random.default_rng(6).standard_normal((4, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    records = tmp_path / "nodes.json"
    assert main(["onnx", str(model), "--input", f"x={tmp_path / 'x.npy'}", "--cgs", "4",
                 "--split", "4", "--json", str(records)]) == 0
    out = capsys.readouterr().out
    want = onnxruntime.InferenceSession(str(model)).run(None, {"x": x})[0]
    assert f"argmax {int(want.argmax())}" in out and "4 CGs: makespan" in out
    placed = json.loads(records.read_text())
    assert {r["cg"] for r in placed} == {0, 1, 2, 3}
    assert placed[-1]["node"] == "merge y"
    assert main(["onnx", str(model), "--split", "5"]) == 1
    assert "5 slices of a batch of 4" in capsys.readouterr().err
    assert main(["onnx", str(model), "--cgs", "9"]) == 1
    assert "cgs must be an integer in 1..4" in capsys.readouterr().err


def test_onnx_estimate_places_without_running(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    model.write_bytes(two_branch_net(batch=8).SerializeToString())
    records = tmp_path / "nodes.json"
    assert main(["onnx", str(model), "--cgs", "2", "--split", "2", "--estimate", "model",
                 "--json", str(records)]) == 0
    out = capsys.readouterr().out
    assert "estimate (model)" in out and "2 CGs: makespan" in out and "output" not in out
    placed = json.loads(records.read_text())
    assert {r["cg"] for r in placed} == {0, 1} and placed[-1]["node"] == "merge y"
    assert all(r["cycles"] > 0 for r in placed)
