"""hostlib.qinglong: a compiled net computes bit-identically to the DNN operators it plans,
its constants go to the device once, and compute only writes the I/O table, which the kernels
read their I/O addresses through (moving the I/O blocks never re-plans nor patches: property
test); device memory and its copy model; the errors."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from swsim.errors import ArgumentError
from swsim.hostlib.dnn import (activation_forward, batchnorm_forward, conv2d_forward,
                               linear_forward, scale)
from swsim.hostlib.qinglong import (BN, FC, Block, Conv, Device, DeviceError, Net, QingLongError,
                                    ReLU, Scale, copy_cycles)
from swsim.hostlib.qinglong.net import Ref
from swsim.hostlib.qinglong.persistent import PersistentScale, transfer_cycles
from swsim.vm import Machine

RNG = np.random.default_rng(25)
X = RNG.standard_normal((4, 256)).astype(np.float32)
W1 = RNG.standard_normal((64, 256)).astype(np.float32)
B1 = RNG.standard_normal(64).astype(np.float32)
W2 = RNG.standard_normal((32, 64)).astype(np.float32)


def reference(x, machine):
    """The same layers through the DNN library's operators, one launch after another."""
    y, _ = linear_forward(x, W1, B1, machine=machine)
    y, _ = activation_forward(y, "relu", machine=machine)
    y, _ = linear_forward(y, W2, machine=machine)
    y, _ = scale(y, 0.5, machine=machine)
    return y


@pytest.fixture(scope="module")
def net():
    net = Net([FC(W1, B1), ReLU(), FC(W2), Scale(0.5)], X.shape, np.float32)
    net.compile()
    net.copy_constant()
    return net


def test_compute_is_bit_identical_to_the_operators(net):
    machine = Machine()
    for x in (X, -2 * X):
        y, stats = net.run(x)
        assert y.shape == (4, 32)
        assert np.array_equal(y, reference(x, machine))
        assert stats.cycles > 0 and stats.details["io_words"] == 2


def test_constants_are_copied_once(net):
    copies = net.device.copies
    net.run(X)
    assert net.device.copies == copies + 3          # x in, the I/O table, y out
    with pytest.raises(QingLongError, match="already"):
        net.copy_constant()


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pad_in=st.integers(1, 4096), pad_out=st.integers(1, 4096))
def test_moving_the_io_blocks_writes_only_the_io_table(net, pad_in, pad_out, monkeypatch):
    """Wherever the blocks lie, compute writes nothing of the constants (the job records' I/O
    words stay 0: every CPE reads them through the I/O table), assembles nothing, and the
    result does not move."""
    from swsim.asm.assembler import Assembler
    device, mem = net.device, net.machine.mem
    constants = net.segments["constants"]
    before = mem.get(constants.address, constants.nbytes // 8, np.int64)
    io_words = [at // 8 for at, ref in net.package.relocations if ref.segment == "io"]
    assert len(io_words) == 2 and not before[io_words].any()
    pads = [device.malloc(pad_in)]
    x_block = device.malloc(X.nbytes)
    pads.append(device.malloc(pad_out))
    y_block = device.malloc(4 * 32 * 4)
    device.copy_in(x_block, X)
    monkeypatch.setattr(Assembler, "run", lambda *a, **k: pytest.fail("assembled again"))
    net.compute([x_block], [y_block])
    after = mem.get(constants.address, constants.nbytes // 8, np.int64)
    assert np.array_equal(before, after)
    table = mem.get(net.segments["io"].address, 2, np.int64)
    assert table.tolist() == [x_block.address, y_block.address]
    expected = net.run(X)[0]
    assert np.array_equal(device.copy_out(y_block, (4, 32), np.float32), expected)
    for block in pads + [x_block, y_block]:
        device.free(block)


def test_python_engine_and_float64():
    x = RNG.standard_normal((3, 50))
    net = Net([Scale(-1.5), ReLU()], x.shape, np.float64, engine="python")
    net.compile()
    net.copy_constant()
    y, _ = net.run(x)
    expected, _ = activation_forward(scale(x, -1.5)[0], "relu")
    assert np.array_equal(y, expected)


def test_batchnorm_inference_net():
    x = RNG.standard_normal((2, 8, 8, 8)).astype(np.float32)
    gamma, beta, mean = (RNG.standard_normal(8).astype(np.float32) for _ in range(3))
    var = (RNG.random(8) + 0.5).astype(np.float32)
    net = Net([BN(gamma, beta, mean, var), ReLU()], x.shape)
    net.compile()
    net.copy_constant()
    (expected, *_), _ = batchnorm_forward(x, gamma, beta, mean, var, training=False)
    expected, _ = activation_forward(expected, "relu")
    for _ in range(2):         # the finish rewrites its scratch each compute, to the same bits
        assert np.array_equal(net.run(x)[0], expected)
    with pytest.raises(QingLongError, match="BN: the input"):
        Net([BN(gamma, beta, mean, var)], (2, 4, 8, 8))


def test_conv_net_is_bit_identical_to_the_operators():
    """A small AlexNet-like net (Conv, ReLU, Conv, FC on the flattened maps): the implicit-GEMM
    kernel and the layout passes planned once; the same bits as ``conv2d_forward(algo=
    "implicit")`` and ``linear_forward``, and a Conv's compute costs what the operator's
    launches but the weights' rearrangement (done once, at compile) cost."""
    x = RNG.standard_normal((1, 8, 8, 8)).astype(np.float32)
    w1 = RNG.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b1 = RNG.standard_normal(16).astype(np.float32)
    w2 = RNG.standard_normal((16, 16, 3, 3)).astype(np.float32)
    fc = RNG.standard_normal((32, 16 * 6 * 6)).astype(np.float32)
    net = Net([Conv(w1, b1, padding=1), ReLU(), Conv(w2), FC(fc)], x.shape)
    assert net.shapes[1:] == [(1, 16, 8, 8), (1, 16, 8, 8), (1, 16, 6, 6), (1, 32)]
    net.compile()
    net.copy_constant()
    machine = Machine()
    y, first = conv2d_forward(x, w1, b1, padding=1, algo="implicit", machine=machine)
    y, _ = activation_forward(y, "relu", machine=machine)
    y, _ = conv2d_forward(y, w2, algo="implicit", machine=machine)
    expected, _ = linear_forward(y.reshape(1, -1), fc, machine=machine)
    assert np.array_equal(net.run(x)[0], expected)
    alone = Net([Conv(w1, b1, padding=1)], x.shape)
    alone.compile()
    alone.copy_constant()
    y, stats = alone.run(x)
    assert np.array_equal(y, conv2d_forward(x, w1, b1, padding=1, algo="implicit")[0])
    operator = first.cycles - first.phase_cycles["weights"]   # minus the binding (a few cycles)
    assert abs(stats.cycles - operator) <= 0.01 * operator
    with pytest.raises(QingLongError, match="Conv: the input must be NCHW"):
        Net([Conv(w1)], (8, 8, 8))
    with pytest.raises(QingLongError, match="Conv: w has 8 input channels but x has 4"):
        Net([Conv(w1)], (1, 4, 8, 8))
    with pytest.raises(QingLongError, match="Conv: implicit GEMM needs padding"):
        Net([Conv(w1, padding=3)], x.shape).compile()


def _tampered(net, relocation=None, **sizes):
    """A copy of `net`'s package with one relocation added and sizes overridden."""
    package = net.package
    added = [relocation] if relocation else []
    net.package = type(package)(package.code_bytes, package.constants,
                                {**package.sizes, **sizes}, package.launches,
                                package.relocations + added)
    net.segments = None


def test_malformed_packages_are_refused():
    net = Net([Scale(2.0)], (1024,))
    net.compile()
    image = net.package.sizes["constants"]
    for relocation, sizes, message in [
            ((0, Ref("constants", image)), {}, "overflows segment 'constants': offset"),
            ((0, Ref("hidden", 0)), {}, "overflows segment 'hidden': offset 0 of its 0"),
            ((0, Ref("io", 2)), {}, "overflows segment 'io': slot 2 of its 2"),
            ((image, Ref("io", 0)), {}, f"byte {image} is not an aligned word"),
            ((4, Ref("io", 0)), {}, "byte 4 is not an aligned word"),
            ((0, Ref("weights", 0)), {}, "names segment 'weights'"),
            (None, {"constants": image + 8}, f"{image + 8} bytes but the image {image}")]:
        net.compile()
        _tampered(net, relocation, **sizes)
        with pytest.raises(QingLongError, match=message):
            net.copy_constant()
    net.compile()
    _tampered(net, (0, Ref("io", 2)), io=24)     # a third slot the package names
    net.copy_constant()
    block = net.device.malloc(4096)
    with pytest.raises(QingLongError, match=r"I/O slot\(s\) \[2\] of the package are unbound"):
        net.compute([block], [block])


def test_device_memory_and_copy_model():
    machine = Machine()
    device = Device(machine=machine)
    a = device.malloc(1000)
    assert device.copy_in(a, np.arange(250, dtype=np.int32)) == copy_cycles(machine.config, 1000)
    config = machine.config
    assert copy_cycles(config, 1000) == (config.host_copy_latency_cycles
                                         + int(np.ceil(1000 / config.host_copy_bytes_per_cycle)))
    assert np.array_equal(device.copy_out(a, (250,), np.int32), np.arange(250))
    device.free(a)
    assert device.malloc(600) == a                     # a freed block is reused whole
    device.free(a)
    with pytest.raises(DeviceError, match="not a live block"):
        device.free(a)
    with pytest.raises(DeviceError, match="do not fit"):
        device.copy_in(device.malloc(8), np.zeros(1000))   # gets the 1000-byte block
    with pytest.raises(DeviceError, match="nbytes"):
        device.malloc(0)


class _FiveSlotWords(Scale):
    """A node whose one launch would read five words through the I/O slots."""

    def jobs(self, machine, dtype, shape, x, y, constants):
        kernel, words, refs, flops = super().jobs(machine, dtype, shape, x, y, constants)[0]
        return [(kernel, words, {**refs, **{word: x for word in range(3)}}, flops)]


def test_a_launch_binds_at_most_four_io_words():
    with pytest.raises(QingLongError, match="reads 5 I/O slots; a launch binds at most 4"):
        Net([_FiveSlotWords(2.0)], (1024,)).compile()


# A kernel that fetches its job record (FETCH_JOB, so BIND_IO binds it) and CPE 0 puts the
# bound record back; the binding's encoding redefined after dma.inc's, as a kernel might.
BINDING_PROBE = """
	QIO_BIND = 1
	.include "../include/dma.inc"
	QIO_SLOT_SHIFT = {shift}
	QIO_SLOT_BIAS = {bias}
	JOB_BYTES = 64
	.ldm
	.align	5
JOB:	.skip	JOB_BYTES
REPLY:	.skip	4
	.text
	.globl	probe
probe:	FETCH_JOB $1, $2, REPLY
	rcid	$3
	bne	$3, 1f
	MAKE_DESC $1, DMA_PUT, JOB_BYTES, REPLY
	ldi	$2, JOB
	DMA_WAIT $1, $16, $2, REPLY
1:	ret
"""


@pytest.mark.parametrize("shift, bias", [(16, 8), (24, 16)])
def test_the_host_encodes_bindings_with_the_kernels_symbols(shift, bias):
    """binding_word reads QIO_SLOT_SHIFT/QIO_SLOT_BIAS from the program, so a kernel that
    changes them still gets each slot's address into the record word the host names."""
    from swsim.asm import assemble
    from swsim.hostlib.qinglong.net import binding_word
    from swsim.hostlib.runtime.kernel import timed_run
    from swsim.kernels import source_path
    program = assemble(BINDING_PROBE.format(shift=shift, bias=bias),
                       str(source_path("qinglong/bias_add.s").with_name("probe.s")))
    device = Device(machine=Machine())
    record, table = device.malloc(64), device.malloc(3 * 8)
    addresses = np.array([0x1000, 0x2000, 0x3000], np.int64)
    device.copy_in(table, addresses)
    device.copy_in(record, np.arange(8, dtype=np.int64))
    bindings = [binding_word(program, 2, 8), binding_word(program, 0, 40),
                binding_word(program, 1, 56), 0]
    timed_run(program, "probe", [record.address, bindings[0], table.address, *bindings[1:]],
              machine=device.machine, flops=0)
    assert list(device.copy_out(record, (8,), np.int64)) == [0, 0x3000, 2, 3, 4, 0x1000, 6,
                                                              0x2000]
    with pytest.raises(QingLongError, match="past the"):
        binding_word(program, 0, 1 << shift)


def test_bind_io_reads_as_many_registers_as_it_exports():
    from swsim.asm import AsmError, assemble
    from swsim.kernels import source_path
    text = BINDING_PROBE.format(shift=16, bias=8).replace("JOB_BYTES = 64",
                                                          "JOB_BYTES = 64\n\tQIO_BINDINGS = 3")
    with pytest.raises(AsmError, match="QIO_BINDINGS"):
        assemble(text, str(source_path("qinglong/bias_add.s").with_name("probe.s")))


def test_bench_whole_flag():
    from swsim.cli import build_parser
    assert build_parser().parse_args(["bench", "qinglong", "--whole", "100"]).whole == 100
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "qinglong", "--whole", "0"])


def test_errors(net):
    with pytest.raises(QingLongError, match="input must be"):
        Net([FC(W1)], (4, 100))
    with pytest.raises(QingLongError, match="DMA line"):
        Net([FC(np.ones((3, 8), np.float32))], (2, 8)).compile()
    fresh = Net([Scale(2.0)], (1024,))
    with pytest.raises(QingLongError, match="compile"):
        fresh.copy_constant()
    fresh.compile()
    with pytest.raises(QingLongError, match="copy_constant first"):
        fresh.compute([], [])
    fresh.copy_constant()
    small = fresh.device.malloc(16)
    with pytest.raises(DeviceError, match="inputs.*4096 bytes do not fit"):
        fresh.compute([small], [small])
    with pytest.raises(QingLongError, match="list of one Block"):
        fresh.compute(small, [small])
    with pytest.raises(ArgumentError, match="must be a Block"):
        fresh.compute([16], [small])
    with pytest.raises(DeviceError, match="not a live block"):
        fresh.compute([Block(small.address, 4096)], [small])


def test_bench_quick_json(tmp_path, capsys):
    from swsim.cli import main
    out = tmp_path / "ql.json"
    assert main(["bench", "qinglong", "--quick", "--json", str(out)]) == 0
    assert "constants" in capsys.readouterr().out
    import json
    result = json.loads(out.read_text())
    fc = result["layers"][0]
    assert abs(result["persistent"]["bound_ratio"] - 1) < 0.05
    assert result["persistent"]["check_error"] < 0.01
    resident = result["persistent_fc"]          # weights in the LDMs: the bound, and a gain
    assert abs(resident["bound_ratio"] - 1) < 0.05 and resident["check_error"] < 0.01
    assert set(resident["whole_errors"]) == {"100"}        # a whole stream of 100 samples
    big = resident["totals"]["1000"]
    assert big["persistent"] < big["launch_per_sample"]
    conv = result["persistent_conv"]           # Conv's weights in the LDMs
    assert abs(conv["bound_ratio"] - 1) < 0.05 and max(conv["whole_errors"].values()) < 0.01
    gains = [total["kernel_per_sample"] / total["persistent"]
             for total in conv["totals"].values()]
    assert gains == sorted(gains) and gains[-1] > 1
    assert fc["layer"].startswith("FC") and fc["whole_error"] < 1e-9
    big = fc["totals"]["1000"]
    assert big["constants_once"] < big["compile_once"]     # FC: constants dominate
    # the operator stores x and w as column panels (rows wider than a CG block: docs/gemm.md
    # "Wide rows"); the Net's launch reads them row-major from its segments, as placed
    assert fc["t_op"] < fc["t_c"] < 1.15 * fc["t_op"]
    rows = {row["layer"].split()[0]: row for row in result["layers"]}
    assert set(rows) == {"FC", "Scale", "BN", "Conv", "AlexNet-like"}
    for row in rows.values():       # the paper's shape: the gain grows with N
        assert row["whole_error"] < 1e-9 and set(row["whole_errors"]) == {"1", "2"}
        gains = [t["per_sample"] / t["pipelined"] for t in row["totals"].values()]
        assert gains == sorted(gains)
        big = row["totals"]["1000"]
        assert big["pipelined"] <= big["constants_once"] <= big["compile_once"]
    assert rows["Conv"]["t_c"] < rows["Conv"]["t_op"]         # the weights rearranged once


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_persistent_kernel_streams_samples_at_the_dma_bound(dtype):
    """One launch serves K samples through the 3-slot ring: bit-identical to ``scale`` (float64:
    and to the one IEEE multiply numpy does; float32: widened, multiplied, rounded once), and a
    sample costs T_in + T_out (the engine's time for its lines and acknowledgements) within
    5% once the ring is full (the compute, 64 vectors per CPE, is far below it)."""
    device = Device(machine=Machine())
    n = 64 * 4 * 64 * 8 // np.dtype(dtype).itemsize        # 2 KiB per CPE per sample
    kernel = PersistentScale(0.75, n, device, dtype)
    cycles = {}
    for count in (4, 8):
        xs = [RNG.standard_normal(n).astype(dtype) for _ in range(count)]
        ins = [device.malloc(x.nbytes) for x in xs]
        outs = [device.malloc(x.nbytes) for x in xs]
        for block, x in zip(ins, xs):
            device.copy_in(block, x)
        cycles[count] = kernel.compute(ins, outs).cycles
        ys = [device.copy_out(block, (n,), dtype) for block in outs]
        if dtype == np.float64:
            assert all(np.array_equal(y, x * 0.75) for x, y in zip(xs, ys))
        assert all(np.array_equal(y, scale(x, 0.75)[0]) for x, y in zip(xs[-2:], ys[-2:]))
        for block in ins + outs:
            device.free(block)
    per_sample = (cycles[8] - cycles[4]) / 4
    bound = transfer_cycles(device.machine.config, n * np.dtype(dtype).itemsize, requests=64)
    assert abs(per_sample / bound - 1) < 0.05


def test_persistent_kernel_streams_past_its_tables_chunks():
    """100 samples in one launch: the table reaches the LDMs 32 pairs at a time."""
    device = Device(machine=Machine())
    kernel = PersistentScale(0.5, 256, device)
    xs = RNG.standard_normal((100, 256))
    ins, outs = [device.malloc(2048) for _ in xs], [device.malloc(2048) for _ in xs]
    for block, x in zip(ins, xs):
        device.copy_in(block, x)
    assert kernel.compute(ins, outs).details["samples"] == 100
    assert np.array_equal([device.copy_out(b, (256,), np.float64) for b in outs], xs * 0.5)


def test_persistent_kernel_refuses_what_does_not_fit():
    device = Device(machine=Machine())
    with pytest.raises(QingLongError, match="multiple of 256"):
        PersistentScale(1.0, 100, device)
    with pytest.raises(QingLongError, match="dtype must be float64 or float32"):
        PersistentScale(1.0, 256, device, np.int32)
    with pytest.raises(QingLongError, match=r"ring of 3 x 32768 bytes per CPE \(98304 B"):
        PersistentScale(1.0, 64 * 4096, device)
    kernel = PersistentScale(1.0, 256, device)
    with pytest.raises(QingLongError, match="one each per sample"):
        kernel.compute([device.malloc(2048)], [])
    with pytest.raises(QingLongError, match="non-empty lists"):
        kernel.compute([], [])


def test_persistent_kernel_engines_agree():
    """The C core and the Python reference: the same bits and the same cycles (3 samples: the
    Python engine takes minutes over a second chunk of the table)."""
    results = []
    for engine in ("c", "python"):
        device = Device(machine=Machine())
        kernel = PersistentScale(-3.0, 256, device)
        xs = [np.arange(256, dtype=np.float64) * (k + 1) for k in range(3)]
        ins = [device.malloc(2048) for _ in xs]
        outs = [device.malloc(2048) for _ in xs]
        for block, x in zip(ins, xs):
            device.copy_in(block, x)
        stats = kernel.compute(ins, outs, engine=engine)
        results.append((stats.cycles, [device.copy_out(b, (256,), np.float64) for b in outs]))
    (c_cycles, c_ys), (py_cycles, py_ys) = results
    assert c_cycles == py_cycles
    assert all(np.array_equal(a, b) and np.array_equal(a, -3.0 * x)
               for a, b, x in zip(c_ys, py_ys, xs))


def test_a_warm_persistent_kernel_does_not_fetch_its_code_again():
    """With the instruction caches on (config icache), each launch starts cold and fills them;
    within the persistent kernel's one launch, more samples fetch no more lines."""
    device = Device(machine=Machine(icache=1))
    kernel = PersistentScale(0.5, 256, device)
    misses = {}
    for count in (2, 4):
        ins = [device.malloc(2048) for _ in range(count)]
        outs = [device.malloc(2048) for _ in range(count)]
        for block in ins:
            device.copy_in(block, np.ones(256))
        stats = kernel.compute(ins, outs)
        misses[count] = sum(s.icache_l1_misses for s in stats.run.cpe.values())
        assert all(np.array_equal(device.copy_out(b, (256,), np.float64), np.full(256, 0.5))
                   for b in outs)
        for block in ins + outs:
            device.free(block)
    assert misses[2] == misses[4] > 0
