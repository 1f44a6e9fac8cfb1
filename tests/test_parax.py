"""ParaX on the CPE array (hostlib/parax, kernels/parax/block.s): the single-CPE f32 operators
against numpy, both engines, every execution mode bit-identical, delayed start, bad input."""
import numpy as np
import pytest

from swsim.errors import ArgumentError, ArgumentTypeError
from swsim.hostlib.parax import block_ops, run_block, start_delays
from swsim.hostlib.tools.bench.parax import reference     # numpy oracle of the block


def params(layers, rows=8, samples=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, rows, 8, 16)).astype(np.float32)
    w = (rng.standard_normal((layers, 3, 3, 16, 16)) / 12).astype(np.float32)
    scale = rng.standard_normal((layers, 16)).astype(np.float32)
    shift = rng.standard_normal((layers, 16)).astype(np.float32)
    return x, w, scale, shift


@pytest.mark.parametrize("ops", [[("conv", 1)], [("bn", 1)], [("relu", 0)], block_ops(2)])
def test_operators_match_numpy(ops):
    x, w, scale, shift = params(2, samples=8)
    run = run_block(x, w, scale, shift, ops=ops, instances=8)
    expected = reference(x, w, scale, shift, ops)
    if ops == [("relu", 0)]:
        np.testing.assert_array_equal(run.y.view(np.int32), expected.view(np.int32))
    else:   # the kernel rounds every fused multiply-add to f32, the oracle once per operator
        np.testing.assert_allclose(run.y, expected, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(run.y, x)
    for kind, _ in ops:
        assert run.per_op[kind][1] == 8 * sum(k == kind for k, _ in ops)


def test_relu_clears_negative_zero_and_keeps_positive_bits():
    x = np.array([-0.0, 0.0, -1.5, 2.5, np.float32(1e-45), -np.float32(1e-45), np.inf, -np.inf]
                 * 16, np.float32).reshape(1, 1, 8, 16)
    w, scale, shift = params(1, rows=1, samples=1)[1:]
    y = run_block(x, w, scale, shift, ops=[("relu", 0)], instances=1).y
    np.testing.assert_array_equal(y.view(np.int32), np.where(x > 0, x, 0).view(np.int32))


def test_engines_agree_bit_for_bit_and_cycle_for_cycle():
    x, w, scale, shift = params(1, rows=1, samples=1)
    c = run_block(x, w, scale, shift, instances=1, engine="c")
    py = run_block(x, w, scale, shift, instances=1, engine="python")
    np.testing.assert_array_equal(c.y.view(np.int32), py.y.view(np.int32))
    assert c.cycles == py.cycles and c.per_op == py.per_op
    np.testing.assert_allclose(c.y, reference(x, w, scale, shift, block_ops(1)),
                               rtol=1e-5, atol=1e-5)


def test_every_mode_gives_the_same_bits():
    x, w, scale, shift = params(1, rows=2)
    runs = [run_block(x, w, scale, shift, mode="per_cg"),
            run_block(x, w, scale, shift, mode="per_cpe"),
            run_block(x, w, scale, shift, mode="per_cpe", launch_groups=4, interval=3000),
            run_block(x, w, scale, shift, mode="per_cpe", jitter=5000, jitter_seed=7),
            run_block(x, w, scale, shift, mode="per_cpe", instances=16),
            run_block(x, w, scale, shift, mode="per_group", group=8),
            run_block(x, w, scale, shift, mode="per_group", group=16, launch_groups=2,
                      interval=2000),
            run_block(x, w, scale, shift, mode="per_group", group=4)]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.y.view(np.int32), runs[0].y.view(np.int32))
    assert len({run.cycles for run in runs}) > 4      # the timing does differ
    barriers = [run.run.counters["barriers"] for run in runs]
    assert barriers[0] > barriers[1] and barriers[5] > barriers[1]


def test_per_group_instances_meet_on_their_own():
    x, w, scale, shift = params(1, rows=1)
    late = run_block(x, w, scale, shift, mode="per_group", group=8, launch_groups=8,
                     interval=20000)
    # instance k (mesh row k) starts 20000 k cycles late and is not held back by the others
    starts = late.begin.reshape(8, 8)
    assert (starts.max(axis=1) - starts.min(axis=1) <= 4).all()
    assert (np.diff(starts[:, 0]) >= 20000 - 4).all()
    assert late.cycles > 7 * 20000


def test_delayed_start_delays_each_instance():
    x, w, scale, shift = params(1, rows=1, samples=8)
    delays = start_delays(8, launch_groups=4, interval=1000, jitter=50, jitter_seed=3)
    assert np.array_equal(delays, start_delays(8, 4, 1000, 50, 3))           # seeded
    assert not np.array_equal(delays, start_delays(8, 4, 1000, 50, 4))
    assert np.array_equal(delays // 1000, np.arange(8) % 4)
    run = run_block(x, w, scale, shift, instances=8, launch_groups=4, interval=1000, jitter=50,
                    jitter_seed=3)
    late = run.begin - delays                      # the meeting's release + the spin's cycles
    assert late.max() - late.min() <= 4            # the spin's granularity


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode="per_row"), "mode must be one of"),
    (dict(instances=48), "64 samples do not split evenly over the 48 CPEs of 48 instance"),
    (dict(instances=4, launch_groups=5), "launch_groups must be 1..4"),
    (dict(mode="per_cg", interval=100, launch_groups=2), r"launch_groups must be 1..1 "),
    (dict(mode="per_group", group=3), "group .* must divide 64 .* got 3"),
    (dict(mode="per_group", group=24), "got 24"),
    (dict(mode="per_group", group=64), "got 64"),
    (dict(mode="per_group", group=12), "must divide 64 .* got 12"),
    (dict(mode="per_group", group=16, launch_groups=5), r"launch_groups must be 1..4 \(the "
                                                         r"instances\), got 5"),
    (dict(instances=65), "instances must be 1..64, got 65"),
    (dict(ops=[("pool", 0)]), "unknown operator 'pool'"),
    (dict(ops=[("bn", 3)]), "bn layer 3 has no parameters"),
])
def test_bad_configurations_are_refused(kwargs, message):
    x, w, scale, shift = params(1, rows=1)
    with pytest.raises(ArgumentError, match=message):
        run_block(x, w, scale, shift, **kwargs)


def test_an_instance_that_does_not_fit_its_ldm_is_refused_with_numbers():
    x, w, scale, shift = params(5, rows=1)
    with pytest.raises(ArgumentError, match=r"5 conv layers need 46080 bytes .* holds 4 "
                                            r"\(36864 bytes"):
        run_block(x, w, scale, shift)


def test_bad_arrays_are_refused():
    x, w, scale, shift = params(1, rows=1)
    with pytest.raises(ArgumentTypeError, match="instances must be an int, got str"):
        run_block(x, w, scale, shift, instances="8")
    with pytest.raises(ArgumentTypeError, match="x must be a numpy array"):
        run_block(x.tolist(), w, scale, shift)
    with pytest.raises(ArgumentError, match="x must be float32"):
        run_block(x.astype(np.float64), w, scale, shift)
    with pytest.raises(ArgumentError, match="H 1..8"):
        run_block(np.zeros((64, 9, 8, 16), np.float32), w, scale, shift)


def test_intensity_formulas_and_tags():
    from swsim.hostlib.parax.model import conv_intensity, elementwise_intensity, machine_balance
    from swsim.vm import Machine
    conv = conv_intensity(64, 16, 16, 3, 8)
    assert conv.macs == 64 * 16 * 16 * 9 * 64
    assert conv.elements == 2 * 64 * 16 * 64 + 16 * 16 * 9          # corrected weight term
    assert conv.density == pytest.approx(1 / 144 + 1 / 144 + 1 / (64 * 64))
    balance = machine_balance(Machine().config)
    assert balance == pytest.approx(512 / (128 / 6))
    assert conv.tag(balance) == "COMPUTE"
    assert conv_intensity(1, 16, 16, 3, 8).tag(balance) == "ACCESS"   # weights read per sample
    assert elementwise_intensity("bn", 1024).tag(balance) == "ACCESS"
    from swsim.hostlib.parax.model import conv_terms
    assert sum(conv_terms(64, 16, 16, 3, 8).values()) == pytest.approx(conv.density)


def test_overlap_bound_and_the_floor_hold_on_the_block():
    """Measured speed-ups over per_cg lie between 1 and per_cg / floor, the floor being the
    first conv's vmas and then the DMA engine's remaining work (bench parax)."""
    from swsim.hostlib.parax.model import dma_engine_cycles, makespan_floor, overlap_bound
    from swsim.vm import Machine
    config = Machine().config
    x, w, scale, shift = params(1)
    ops = block_ops(1)
    barrier = run_block(x, w, scale, shift, mode="per_cg")
    single = run_block(x[:1], w, scale, shift, instances=1)
    compute = [single.cycles_per_call(kind) for kind, _ in ops]
    conv_get = dma_engine_cycles(4096, 0, 0, config, gets=8)       # a request per row
    put = dma_engine_cycles(0, 4096, 1, config)
    engine = conv_get + 2 * dma_engine_cycles(4096, 0, 0, config, gets=1) + 3 * put
    assert conv_get == 32 * 6 + 8 * 6 and put == 32 * 11 + 29
    floor = makespan_floor(64 * engine, 64 * conv_get, 36864, sum(compute))
    assert floor == 36864 + 64 * (engine - conv_get)
    jittered = run_block(x, w, scale, shift, jitter=int(sum(compute)), jitter_seed=0)
    assert floor <= jittered.cycles < barrier.cycles
    assert 1 < barrier.cycles / jittered.cycles <= barrier.cycles / floor
    bound = overlap_bound(compute, [engine / 3] * len(ops), 64)
    assert bound["bound"] >= 1 and bound["ideal"] == pytest.approx(64 * engine)
    with pytest.raises(ArgumentError, match="equal-length"):
        overlap_bound([1.0], [], 64)


def test_the_signature_appears_only_on_a_bytes_only_dma_engine():
    """ParaX's signature (BN/ReLU per call far cheaper with delayed instances, conv about
    flat) needs free bandwidth while BN runs: on a DMA engine costing bytes only it appears;
    with the hardware-fitted per-request and put costs, BN and ReLU fall no more than the
    conv does (docs/parax.md "The per-operator signature")."""
    from swsim.hostlib.parax.model import bandwidth_only, dma_engine_cycles
    from swsim.vm import Machine
    x, w, scale, shift = params(1, rows=2)
    fitted = Machine().config
    assert dma_engine_cycles(4096, 4096, 1, bandwidth_only(fitted), gets=1) == 2 * 32 * 6
    ratios = {}
    for name, config in (("fitted", fitted), ("bytes", bandwidth_only(fitted))):
        barrier = run_block(x, w, scale, shift, mode="per_cg", machine=Machine(config))
        delayed = run_block(x, w, scale, shift, launch_groups=4, interval=4500,
                            machine=Machine(config))
        ratios[name] = {k: delayed.cycles_per_call(k) / barrier.cycles_per_call(k)
                        for k in ("conv", "bn", "relu")}
    bytes_only, hw = ratios["bytes"], ratios["fitted"]
    assert max(bytes_only["bn"], bytes_only["relu"]) < 0.5 * bytes_only["conv"]
    assert bytes_only["conv"] > 0.75
    assert hw["bn"] > 0.9 * hw["conv"] and hw["relu"] > 0.9 * hw["conv"]


def sync_case(instances, n=2500, seed=1):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((instances, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    acc = g[0].copy()
    for k in range(1, instances):          # float32 sums, instance 0 first
        acc = acc + g[k]
    s = np.float64(np.float32(0.25 / instances))
    return g, w, (w.astype(np.float64) - acc.astype(np.float64) * s).astype(np.float32)


@pytest.mark.parametrize("instances", [1, 5, 16])
def test_ps_and_gs_update_w_with_the_same_bits(instances):
    from swsim.hostlib.parax.sync import synchronise
    g, w, expected = sync_case(instances)
    ps = synchronise(g, w, 0.25, strategy="PS")
    gs = synchronise(g, w, 0.25, strategy="GS")
    np.testing.assert_array_equal(gs.w.view(np.int32), ps.w.view(np.int32))
    np.testing.assert_allclose(gs.w, expected, rtol=1e-6, atol=1e-7)
    assert (ps.copies == ps.w).all()                      # every worker pulled the new W
    assert ps.idle_cpes == gs.idle_cpes == 64 - instances
    # GS partitions the reduction over every instance's CPE; PS's server does it all
    assert all(gs.run.cpe[k].float_ops > 0 for k in range(instances))
    assert [k for k in range(instances + 1) if ps.run.cpe[k].float_ops] == [0]
    if instances > 1:          # PS moves the gradients, the copies and the pulls: ~3x GS
        assert ps.dma_bytes > 2 * gs.dma_bytes and ps.cycles > gs.cycles


@pytest.mark.parametrize("instances", [1, 2, 8, 16])
def test_rar_rings_to_the_same_update_in_ring_order(instances):
    """RAR adds the gradients in ring order, starting after the segment's owner: the same
    sum in another order, within float32 rounding of the GS (instance-order) result."""
    from swsim.hostlib.parax.sync import synchronise
    g, w, expected = sync_case(instances)
    rar = synchronise(g, w, 0.25, strategy="RAR")
    gs = synchronise(g, w, 0.25, strategy="GS")
    assert (rar.copies == rar.w).all()                    # every instance has the same W
    np.testing.assert_allclose(rar.w, expected, rtol=1e-6, atol=2e-7)
    np.testing.assert_allclose(rar.w, gs.w, rtol=1e-6, atol=2e-7)
    if instances > 2:
        assert rar.dma_bytes > gs.dma_bytes
    # a block of G in, W out, the owned segment of W: no DMA per ring step (at most 3 blocks
    # of n = 2500 f32 here, and the job record)
    assert rar.run.counters["dma_requests"] <= instances * (1 + 3 * 3)


def test_sync_engines_agree():
    from swsim.hostlib.parax.sync import synchronise
    g, w, _ = sync_case(3, n=1024)
    for strategy in ("PS", "RAR", "GS"):
        c = synchronise(g, w, 0.25, strategy=strategy)
        py = synchronise(g, w, 0.25, strategy=strategy, engine="python")
        np.testing.assert_array_equal(c.w.view(np.int32), py.w.view(np.int32))
        assert c.cycles == py.cycles and c.dma_bytes == py.dma_bytes


def test_sync_refuses_what_does_not_fit():
    from swsim.hostlib.parax.sync import synchronise
    g, w, _ = sync_case(64, n=8)
    with pytest.raises(ArgumentError, match="PS with 64 instances needs 65 CPEs, the core "
                                            "group has 64"):
        synchronise(g, w, 0.1, strategy="PS")
    with pytest.raises(ArgumentError, match="strategy must be one of PS, RAR, GS"):
        synchronise(g, w, 0.1, strategy="ring")
    with pytest.raises(ArgumentError, match="RAR needs at most 8 instances .* got 24"):
        synchronise(g[:24], w, 0.1, strategy="RAR")
    with pytest.raises(ArgumentError, match=r"gradients \(P, n\) and w \(n,\) float32"):
        synchronise(g, w[:4], 0.1)


def test_instances_train_like_the_solver():
    """Two instances synchronised by GS take the same SGD steps as the Solver on the whole
    minibatch (the mean of the slices' gradients; float32 sums in another order)."""
    from swsim.hostlib import train
    from swsim.hostlib.train.instances import train_instances
    spec = train.parse_net(train.example("mlp"))
    ours = train_instances(spec, instances=2, strategy="GS", steps=2, lr=0.1, test=False)
    solver = train.Solver(spec, train.SolverSpec(base_lr=0.1, momentum=0.0, random_seed=1))
    losses = [solver.step().loss for _ in range(2)]
    np.testing.assert_allclose(ours.losses, losses, rtol=1e-5)
    assert ours.losses[-1] < ours.losses[0]
    assert len(set(ours.sync_cycles)) == 1 and ours.sync_bytes[0] > 0


def test_overtakes_finds_where_rar_stays_ahead_of_ps():
    from swsim.hostlib.tools.bench.parax import overtakes

    def rows(ps, rar):
        return [dict(strategy=s, instances=n, cycles=c)
                for s, series in (("PS", ps), ("RAR", rar)) for n, c in series]
    cycles = lambda r: r["cycles"]           # noqa: E731
    assert overtakes(rows([(1, 10), (4, 30), (63, 90)], [(1, 12), (4, 20), (64, 25)]),
                     cycles) == 4
    # ahead at 1, behind at 4, ahead again from 63/64: the last crossing counts
    assert overtakes(rows([(1, 10), (4, 30), (63, 90)], [(1, 9), (4, 31), (64, 25)]),
                     cycles) == 64
    assert overtakes(rows([(1, 10), (4, 30)], [(1, 12), (4, 31)]), cycles) is None


def test_a_short_vector_is_not_padded_to_a_whole_chunk():
    from swsim.hostlib.parax.sync import synchronise
    g, w, expected = sync_case(4, n=40)
    for strategy in ("PS", "GS"):
        run = synchronise(g, w, 0.25, strategy=strategy)
        np.testing.assert_allclose(run.w, expected, rtol=1e-6, atol=1e-7)
        assert run.dma_bytes < 40 * 4 * 4 * 8      # lines, not 4 KiB chunks, per transfer
