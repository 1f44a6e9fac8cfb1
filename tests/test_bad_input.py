"""The bad-input corpus of the configuration, the command line and the host API (the assembler's
and the loader's are in test_asm_bad_input.py). The rule (docs/testing.md): exit status 1 or 2,
a message naming the input and what was expected, no traceback, bounded time and memory — each
command-line case runs in its own process under CPU-time, wall-time and address-space limits,
forked from one server that has imported the command once (a fresh interpreter per case cost
~2.5 s of the suite's time each)."""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import swsim
from swsim.errors import SwsimError
from swsim.hostlib import dnn
from swsim.hostlib.blas.swgemm import gemm
from swsim.vm import Machine, VMFault

BROADCAST = np.broadcast_to(np.ones(1), (50_000, 50_000))   # 20 GB from one element

CPU_SECONDS = 60
ADDRESS_SPACE = 3 << 30   # bytes
HALT = ".text\n.globl kernel\nkernel:\n\thalt\n"


def net(source, batch, outputs):
    """A net on the .npz data set `source`: batches of `batch`, one layer of `outputs`."""
    return (f'layer {{ name: "d" type: "Data" top: "data" top: "label" data_param {{ source: '
            f'"{source}" batch_size: {batch} }} }}\n'
            f'layer {{ name: "ip" type: "InnerProduct" bottom: "data" top: "ip" '
            f'inner_product_param {{ num_output: {outputs} }} }}\n'
            'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" '
            'top: "loss" }\n')


# CPE 0 waits at the barrier for CPE 1, which waits for a put that never comes.
DEADLOCK = (".text\n.globl kernel\nkernel:\n\trcid $2\n\tbne $2, 1f\n\tsynr 0x3\n\thalt\n"
            "1:\n\tgetr $1\n\tsynr 0x3\n\thalt\n")


# Reads one JSON line [argv, cwd] per case, forks, runs `swsim.cli.main(argv)` in the child as
# `python -m swsim.cli` would (an uncaught exception prints its traceback, exit status 1), and
# answers one JSON line {"status", "stderr"}; a signal's death is a negative status.
CLI_SERVER = r"""
import json, os, resource, signal, sys, tempfile, traceback
import swsim, swsim.vm.cengine
from swsim.cli import build_parser, main
build_parser()   # import every layer's commands, the C core and the assembler's grammar once
swsim.assemble(".text\nhalt\n")
cpu_seconds, address_space = int(sys.argv[1]), int(sys.argv[2])
for line in sys.stdin:
    argv, cwd = json.loads(line)
    with tempfile.TemporaryFile() as err:
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                os.chdir(cwd)
                resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
                signal.alarm(2 * cpu_seconds)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                os.dup2(err.fileno(), 2)
                status = main(argv)
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else exc.code is not None
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush(); sys.stderr.flush()
                finally:
                    os._exit(status)
        _, wait_status = os.waitpid(pid, 0)
        err.seek(0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(wait_status),
                          "stderr": err.read().decode(errors="replace")}), flush=True)
"""


@pytest.fixture(scope="module")
def cli():
    """run(argv, cwd) -> (exit status, stderr) of `swsim ARGV` in its own limited process."""
    server = subprocess.Popen([sys.executable, "-c", CLI_SERVER, str(CPU_SECONDS),
                               str(ADDRESS_SPACE)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONWARNINGS": "ignore",
                                   "OPENBLAS_NUM_THREADS": "1"})

    def run(argv, cwd):
        server.stdin.write(json.dumps([[str(a) for a in argv], str(cwd)]) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        assert answer, f"the command server died at {argv}"
        done = json.loads(answer)
        return done["status"], done["stderr"]
    yield run
    server.stdin.close()
    server.wait(timeout=60)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    path = tmp_path_factory.mktemp("bad")
    (path / "halt.s").write_text(HALT)
    (path / "deadlock.s").write_text(DEADLOCK)
    np.save(path / "strings.npy", np.array(["a", "b"]))
    np.save(path / "ints.npy", np.arange(4, dtype=np.int64))
    (path / "not_a_repro.json").write_text('{"text": 5}')
    (path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    np.savez(path / "ten.npz", data=np.zeros((10, 4), np.float32), label=np.arange(10) % 2)
    (path / "garbage.npz").write_bytes(bytes(range(256)) * 4)
    (path / "wide.prototxt").write_text(net(path / "ten.npz", 2, 10**9))
    (path / "batch.prototxt").write_text(net(path / "ten.npz", 11, 2))
    (path / "garbage.prototxt").write_text(net(path / "garbage.npz", 2, 2))
    with open(path / "huge.npy", "wb") as f:            # a header claiming 10**11 elements
        np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False,
                                                 "shape": (10**11,)})
        f.write(bytes(64))
    return path


CLI_CASES = [
    # (arguments, exit status, what the message must name)
    (["run", "{d}/halt.s", "--set", "clock_hz=0"], 1, "clock_hz=0.0: must be at least 1 Hz"),
    (["run", "{d}/halt.s", "--set", "clock_hz=-5"], 1, "clock_hz=-5.0: must be at least 1 Hz"),
    (["run", "{d}/halt.s", "--set", "spawn_cycles=-100"], 1, "spawn_cycles=-100: must be 0.."),
    (["run", "{d}/halt.s", "--set", "lat_fp=-3"], 1, "lat_fp=-3: must be 1..1048576 cycles"),
    (["run", "{d}/halt.s", "--set", "ldm_bytes=3"], 1, "ldm_bytes=3: must be 64..1048576 B"),
    (["run", "{d}/halt.s", "--set", "num_cgs=0"], 1, "num_cgs=0: must be 1..64"),
    (["run", "{d}/halt.s", "--set", "mesh_cols=9"], 1, "mesh_cols=9: must be 1..8"),
    (["run", "{d}/halt.s", "--set", "barrier_cycles=0"], 1, "barrier_cycles=0: must be 1.."),
    (["run", "{d}/halt.s", "--set", "nosuch=1"], 1, "--set expects NAME=VALUE"),
    (["run", "{d}/halt.s", "--set", "rc_latency=abc"], 1, "--set rc_latency: 'abc' is not"),
    (["run", "{d}/halt.s", "--max-cycles", "-5"], 2, "--max-cycles: expected an integer >= 0"),
    (["run", "{d}/halt.s", "--cg", "7"], 1, "cg must be a core group number 0..3, got 7"),
    (["run", "{d}/halt.s", "--cpes", "0"], 2, "--cpes: expected an integer >= 1, got 0"),
    (["run", "{d}/halt.s", "--entry", "nope"], 1, "unknown entry 'nope'"),
    (["run", "{d}/halt.s", "--engine", "gpu"], 2, "argument --engine: invalid choice"),
    (["run", "{d}/missing.s"], 1, "missing.s"),
    (["run", "{d}/halt.s", "--arg", "@{d}/strings.npy"], 1, "expects a numeric array"),
    (["run", "{d}/halt.s", "--arg", "@{d}/missing.npy"], 1, "--arg '@"),
    (["run", "{d}/halt.s", "--arg", "x1"], 1, "expected an int, a float or @file.npy"),
    (["run", "{d}/halt.s", "--arg", "@{d}/ints.npy", "--dump", "arg0:-1:int64:{d}/o.npy"], 1,
     "SHAPE '-1' must be positive sizes"),
    (["run", "{d}/halt.s", "--arg", "@{d}/ints.npy", "--dump", "arg0:99:int64:{d}/o.npy"], 1,
     "outside allocated main memory"),
    (["run", "{d}/halt.s", "--arg", "@{d}/ints.npy", "--dump", "arg-1:4:int64:{d}/o.npy"], 1,
     "arg-1: the arguments are arg0..arg0"),
    (["run", "{d}/deadlock.s", "--cpes", "2", "--json"], 1, "waits: barrier    synr 3"),
    (["bench", "speed", "--repeats", "0"], 2, "--repeats: expected an integer >= 1"),
    (["bench", "speed", "--scale", "0"], 2, "--scale: expected a factor"),
    (["bench", "speed", "--only", "micro"], 2, "--only: invalid choice: 'micro'"),
    (["fuzz", "--programs", "0"], 2, "--programs: expected an integer >= 1"),
    (["fuzz", "--replay", "{d}/not_a_repro.json"], 1, "not a fuzz reproducer"),
    (["fuzz", "--replay", "{d}/deep.json"], 1, "not a fuzz reproducer (maximum recursion"),
    (["fuzz", "--replay", "/dev/zero"], 1, "/dev/zero: not a regular file"),
    (["asm", "/dev/zero"], 1, "/dev/zero: not a regular file"),
    (["disasm", "/dev/zero"], 1, "/dev/zero: not a regular file"),
    (["run", "{d}"], 1, "a directory (a device, pipe or directory cannot be read"),
    (["run", "{d}/halt.s", "--arg", "@/dev/zero"], 1, "/dev/zero: not a regular file"),
    (["run", "{d}/halt.s", "--arg", "@{d}/huge.npy"], 1, "not a .npy file (mmap length"),
    (["config", "--preset", "sw99"], 2, "invalid choice: 'sw99'"),
    (["asm", "{d}/halt.s", "-o", "{d}/halt.s"], 1, "output {d}/halt.s is the source"),
    (["run", "{d}/halt.s", "--cpes", str(10**20)], 2, "--cpes: expected an integer <= 64"),
    (["run", "{d}/halt.s", "--cpes", "1e20"], 2, "--cpes: expected an integer, got '1e20'"),
    (["run", "{d}/halt.s", "--max-cycles", str(10**30)], 2, "--max-cycles: expected an integer <="),
    (["analyze", "{d}/halt.s", "--loop", "kernel", "--instance", "0"], 2,
     "--instance: expected an integer >= 1, got 0"),
    (["analyze", "{d}/halt.s", "--loop", "kernel", "--instance", "-1"], 2, "--instance: expected"),
    (["analyze", "{d}/halt.s", "--loop", "kernel", "--iterations", "1000000000"], 2,
     "--iterations: expected an integer <= 10000"),
    (["report", "{d}/halt.s", "--flops", "nan"], 2, "--flops: expected a finite number >= 0"),
    (["report", "{d}/halt.s", "--flops", "inf"], 2, "--flops: expected a finite number >= 0"),
    (["train", "{d}/net.prototxt", "--steps", "0"], 2, "--steps: expected an integer >= 1, got 0"),
    (["train", "{d}/net.prototxt", "--steps", "-3"], 2, "--steps: expected an integer >= 1"),
    (["train", "{d}/net.prototxt", "--checkpoint-every", "-1"], 2,
     "--checkpoint-every: expected an integer >= 1, got -1"),
    (["report", "{d}/halt.s", "--roofline", "{d}"], 1, "--roofline {d}: is a directory"),
    (["report", "{d}/halt.s", "--roofline", "{d}/plot"], 1, "give a path ending in .png"),
    (["run", "{d}/halt.s", "--set", "code_base=4096"], 1,
     "the machine runs code at config.code_base=0x1000"),
    (["train", "{d}/wide.prototxt", "--steps", "1"], 1, "more than the 8589934592 bytes of a "
     "core group's main memory"),
    (["train", "{d}/batch.prototxt", "--steps", "1"], 1,
     "data_param.batch_size: 11 is more than the 10 samples"),
    (["train", "{d}/garbage.prototxt", "--steps", "1"], 1,
     "garbage.npz is not a .npz archive of arrays"),
]


@pytest.mark.parametrize("arguments, status, message", CLI_CASES,
                         ids=[" ".join(c[0][:4]) for c in CLI_CASES])
def test_cli_bad_input(cli, files, arguments, status, message):
    returned, stderr = cli([a.format(d=files) for a in arguments], files)
    assert returned == status, stderr
    assert message.format(d=files) in stderr
    assert "Traceback" not in stderr


def test_asm_never_writes_the_object_over_a_source(cli, tmp_path):
    source = tmp_path / "prog.s"
    source.write_text(HALT)
    (tmp_path / "link.s").symlink_to(source)
    for output in (source, tmp_path / "link.s", tmp_path / "." / "prog.s"):
        status, stderr = cli(["asm", source, "-o", output], tmp_path)
        assert status == 1 and "refusing to overwrite" in stderr
        assert source.read_text() == HALT
    status, stderr = cli(["asm", source], tmp_path)
    assert status == 0 and (tmp_path / "prog.swo").read_bytes()[:4] != b".tex"


def test_version():
    done = subprocess.run([sys.executable, "-m", "swsim.cli", "--version"], capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"swsim {swsim.__version__}"


# ---- the host API ---------------------------------------------------------------------------
def _fresh():
    return Machine()


API_CASES = [
    (lambda m: swsim.assemble(None), "expected assembly source text (a str), got NoneType"),
    (lambda m: swsim.assemble(b"halt"), "got bytes (decode bytes first"),
    (lambda m: m.run(None), "program must be a Program"),
    (lambda m: m.run(42), "program must be a Program"),
    (lambda m: m.run("kernels/nosuch.s"), "looks like a path to a .s/.swo file"),
    (lambda m: m.run(HALT, max_cycles=-5), "max_cycles must be None or an int 0..2**62, got -5"),
    (lambda m: m.run(HALT, max_cycles=2**70), "max_cycles must be None or an int 0..2**62, got"),
    (lambda m: m.run(HALT, trace="yes"), "trace must be True or False"),
    (lambda m: m.run(HALT, progress=5), "progress must be None or a function"),
    (lambda m: m.run(HALT, cpes=[0, 64]), "cpes must be distinct CPE ids"),
    (lambda m: m.run(HALT, args=[object()]), "argument 0: expected an int, a float"),
    (lambda m: m.mem.put(None), "put expects a numeric array"),
    (lambda m: m.mem.put(np.array([object()])), "put expects a numeric array"),
    (lambda m: m.mem.alloc("10"), "alloc expects a number of bytes (an int >= 0), got '10'"),
    (lambda m: m.mem.alloc(1.5), "got 1.5"),
    (lambda m: m.mem.alloc(-1), "got -1"),
    (lambda m: m.mem.get(m.mem.put(np.zeros(2)), (-1,), np.float64), "negative size"),
    (lambda m: m.mem.get(m.mem.put(np.zeros(2)), 2, "U4"), "get expects a numeric array"),
    (lambda m: m.mem.get(m.mem.put(np.zeros(2)), 3.5, np.float64), "shape must be ints"),
    (lambda m: m.mem.get(m.mem.put(np.zeros(2)), (2, 1.0), np.float64), "shape must be ints"),
    (lambda m: m.mem.get(m.mem.put(np.zeros(2)), (2**40, 2**40), np.float64),
     "outside allocated main memory"),
    (lambda m: m.run(HALT, cg=True), "cg must be a core group number 0..3, got True"),
    (lambda m: m.run(HALT, entry=None), "entry must be the name of a code label (a str), got None"),
    (lambda m: swsim.disassemble(None), "disassemble expects a Program"),
    (lambda m: m.mem.get("0x40000000", 2, np.int8), "expected a main-memory address"),
    (lambda m: Machine(clock_hz=0), "clock_hz=0: must be at least 1 Hz"),
    (lambda m: Machine("nosuch"), "unknown machine preset 'nosuch'"),
    (lambda m: gemm(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), alpha=1j),
     "alpha must be a finite real number, got 1j"),
    (lambda m: gemm(np.ones((4, 4)), np.ones((4, 4)), beta=float("nan")), "beta must be"),
    (lambda m: gemm(None, np.ones((4, 4))), "A must be an array of numbers, got NoneType"),
    (lambda m: gemm(np.ones((8, 8)), np.ones((8, 8)), blocking="foo"),
     "blocking must be (Mb, Nb, Kb), three ints, got 'foo'"),
    (lambda m: gemm(np.ones((8, 8)), np.ones((8, 8)), machine="x"),
     "machine must be a swsim.Machine"),
    (lambda m: gemm(BROADCAST, np.ones((1, 1)), machine=m), "A: 20000000000 bytes"),
    (lambda m: dnn.conv2d_forward(np.broadcast_to(np.ones(1), (5, 2000, 2, 10**6)),
                                  np.ones((1, 2000, 1, 1))), "x: 160000000000 bytes"),
    (lambda m: dnn.activation_forward(BROADCAST, machine=m), "x: 20000000000 bytes"),
    (lambda m: dnn.conv2d_forward(np.ones((1, 1, 3, 3)), np.ones((1, 1, 1, 1)), m),
     "bias must be an array of numbers, got Machine"),
    (lambda m: swsim.link([None]), "objects must be ObjectFiles"),
    (lambda m: m.run(dataclasses.replace(swsim.assemble(HALT), code=None)),
     "Program.code must be a 1-D uint32 numpy array"),
    (lambda m: gemm(np.ones((4, 4)), np.ones((4, 4)), trans_a="no"), "trans_a must be"),
]


@pytest.mark.parametrize("call, message", API_CASES, ids=[c[1][:40] for c in API_CASES])
def test_api_bad_input_raises_swsim_errors_and_leaves_the_machine_usable(call, message):
    machine = _fresh()
    with pytest.raises(SwsimError) as error:
        call(machine)
    assert message in str(error.value)
    data = np.arange(5, dtype=np.int64)   # still usable: allocate, run, read back
    address = machine.mem.put(data)
    machine.run(".text\n.globl kernel\nkernel:\n\tldl $1, 32($16)\n\taddl $1, 1, $1\n"
                "\tstl $1, 32($16)\n\thalt\n", args=[data], cpes=[0])
    assert list(machine.mem.get(address, 5, np.int64)) == [0, 1, 2, 3, 5]


def test_a_path_runs_the_file(tmp_path):
    path = tmp_path / "count.s"
    path.write_text(".text\n.globl kernel\nkernel:\n\tldl $1, 0($16)\n\taddl $1, 1, $1\n"
                    "\tstl $1, 0($16)\n\thalt\n")
    machine = Machine()
    data = np.zeros(1, np.int64)
    address = machine.mem.put(data)
    for program in (str(path), path):   # a path string or a PathLike
        machine.run(program, args=[data], cpes=[0])
    assert machine.mem.get(address, 1, np.int64)[0] == 2


def test_an_empty_array_is_never_next_to_another_allocation():
    """A kernel reading a 0-byte array faults instead of reading the next allocation."""
    machine = Machine()
    empty = np.zeros(0, np.int64)
    machine.mem.put(empty)
    machine.mem.put(np.arange(4, dtype=np.int64))
    for engine in ("c", "python"):
        with pytest.raises(VMFault) as fault:
            machine.run(".text\n.globl kernel\nkernel:\n\tldl $1, 0($16)\n\thalt\n",
                        args=[empty], cpes=[0], engine=engine)
        assert fault.value.stop.name == "access"
    assert machine.mem.get(machine.mem.address_of(empty), (0,), np.int64).size == 0
