"""swAutoDNN (hostlib/autodnn, docs/autodnn.md): the DSL and its builder, the schedule
rewrites, the errors naming line and rule, and generated kernels against numpy."""
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from swsim.hostlib import autodnn as ad
from swsim.hostlib.autodnn import ir

EXAMPLES = Path(ad.__file__).parent / "examples"
FIG63 = (EXAMPLES / "fig63.sched").read_text()
CONV = (EXAMPLES / "conv.sched").read_text()


def shrink(text, **values):
    """The schedule text with ConstVars (or a parameter set) replaced."""
    for name, value in values.items():
        text, count = re.subn(rf"\b{name}\(([^()]|\{{[^}}]*\}})+\)", f"{name}({value})", text,
                              count=1)
        assert count == 1, name
    return text


def operands(program, seed=0):
    rng = np.random.default_rng(seed)
    consts = program.seed.registry.const_values()
    shape = {t: [consts[d] for d in tensor.dims]
             for t, tensor in program.seed.registry.tensors.items()}
    (gemm, _), = ir.gemms(program.seed)
    arrays = {acc.tensor: rng.standard_normal(shape[acc.tensor]) for acc in (gemm.a, gemm.b)}
    arrays[gemm.c.tensor] = np.zeros(shape[gemm.c.tensor])
    return arrays


def declared(program):
    return {t: tensor.dims for t, tensor in program.seed.registry.tensors.items()}


def test_fig63_listing_parses_verbatim_and_its_out_of_bounds_read_is_refused():
    program = ad.load(FIG63)
    assert [s.op for s in program.strategies] == ["split", "reorder", "fuse", "layout",
                                                 "vectorization"]
    assert "cRo" not in program.seed.registry.vars          # declared by its For
    with pytest.raises(ad.ScheduleError, match=r"line 12: .*\{Ci, 32\*cCo_out\+cCo_in\+Kc\} spans 3\.\.130"
                       r".*\[rule: index in bounds\]"):
        ad.build(program)


def test_fig63_strategies_as_rewrites():
    seed = ad.schedule.apply(ad.load(FIG63.replace("cCo+Kc", "cCo+cKc")))
    text = ir.format_seed(seed)
    # split + reorder + fuse of cCo_out into M: the loop is gone, M = (cCo_out, B); the
    # inner loop's extent is the split factor (Sco = 32)
    assert "For(cCo_in, 0, 1, Sco){\n      For(cKr" not in text
    assert re.search(r"For\(cRo, 0, 1, Ro\)\{\n  For\(cKr.*\n    For\(cKc.*\n      "
                     r"For\(cCo_in, 0, 1, Sco\)", text)
    assert 'gemm_op("op1", (cCo_out,B), No, Ni' in text
    assert "{Ci, 32*cCo_out+cCo_in+cKc}" in text


def test_builder_makes_the_dsl_seed():
    b = ad.Builder().var("cRo", "cCo").const(Ro=4, Co=8, Ni=16, No=32, B=128)
    b.const(Ri="Ro", Ci="Co")
    b.tensor("A", "Ri", "Ci", "Ni", "B").tensor("W", "Ni", "No").tensor("C", "Ro", "Co", "No", "B")
    with b.loop("cRo", "Ro"):
        with b.loop("cCo", "Co"):
            b.gemm("op1", "B", "No", "Ni", b.at("A", Ri="cRo", Ci="cCo"), b.at("W"),
                   b.at("C", Ro="cRo", Co="cCo"))
    b.strategy("split", "cCo", "cCo_out", "cCo_in", [2, 4]).strategy("fuse", "cCo_in", "op1", "inM")
    built = b.program()
    text = """Schedule Seed
        Var cRo, cCo; ConstVar Ro(4), Co(8), Ni(16), No(32), B(128), Ri(Ro), Ci(Co);
        Tensor A(Ri, Ci, Ni, B), W(Ni, No), C(Ro, Co, No, B);
        For(cRo, 0, 1, Ro){ For(cCo, 0, 1, Co){
          gemm_op("op1", B, No, Ni, A({Ri, cRo}, {Ci, cCo}), W(), C({Ro, cRo}, {Co, cCo})); }}
        Schedule Strategies split(cCo, cCo_out, cCo_in, {2, 4}); fuse(cCo_in, "op1", inM);"""
    parsed = ad.load(text)
    assert ir.format_seed(built.seed) == ir.format_seed(parsed.seed)
    assert ad.bindings(built) == ad.bindings(parsed) == [{"_split1": 2}, {"_split1": 4}]
    arrays = operands(built)
    for binding in ad.bindings(built):
        out, _ = ad.run(ad.build(built, binding), arrays)
        np.testing.assert_allclose(out["C"], ad.reference(built, arrays), rtol=1e-12, atol=1e-12)


@settings(max_examples=6, deadline=None)
@given(ro=st.integers(1, 2), co=st.sampled_from([1, 2, 3, 4]), kr=st.integers(1, 3),
       kc=st.integers(1, 3), ni=st.sampled_from([8, 24]), no=st.sampled_from([32, 96]),
       data=st.data())
def test_generated_convolution_equals_numpy_on_odd_shapes(ro, co, kr, kc, ni, no, data):
    sco = data.draw(st.sampled_from([d for d in (1, 2, 4) if co % d == 0]))   # 16 sco | 128
    program = ad.load(shrink(CONV, Ro=ro, Co=co, Kr=kr, Kc=kc, Ni=ni, No=no, B=128, Sco=sco))
    arrays = operands(program, seed=ro + co)
    out, stats = ad.run(ad.build(program), arrays)
    np.testing.assert_allclose(out["C"], ad.reference(program, arrays), rtol=1e-12, atol=1e-12)
    assert stats.flops == 2 * ro * co * kr * kc * ni * no * 128


VECTOR_N = """Schedule Seed
ConstVar Ro(2), Co(4), K(2), Ni(16), No(128), B(32), Ri(Ro), Ci(Co+K-1);
Tensor X(Ri, Ci, Ni, B), W(K, Ni, No), Y(Ro, Co, No, B);
For(r, 0, 1, Ro){ For(c, 0, 1, Co){ For(k, 0, 1, K){
  gemm_op("op", B, No, Ni, X({Ri, r}, {Ci, c+k}), W({K, k}), Y({Ro, r}, {Co, c})); }}}
Schedule Strategies
layout("op", notrans, trans, trans);
vectorization("op", VecN);
"""


def test_vector_n_variant_writes_the_other_c_layout():
    program = ad.load(VECTOR_N)
    gen = ad.build(program)
    assert "gemm_prim_mn_d" in gen.text and "Y(Ro, Co, B, No)" in gen.text
    arrays = operands(program, 3)
    out, _ = ad.run(gen, arrays, declared=declared(program))
    np.testing.assert_allclose(out["Y"], ad.reference(program, arrays), rtol=1e-12, atol=1e-12)


def test_generation_and_runs_are_deterministic_and_engines_agree():
    program = ad.load(shrink(CONV, Ro=1, Co=1, Kr=1, Kc=2, Ni=8, No=32, B=128, Sco=1))
    assert ad.build(program).text == ad.build(program).text
    arrays = operands(program, 1)
    gen = ad.build(program)
    (out_c, run_c), (out_py, run_py) = (ad.run(gen, arrays, engine=e) for e in ("c", "python"))
    assert out_c["C"].tobytes() == out_py["C"].tobytes() and run_c.cycles == run_py.cycles
    np.testing.assert_allclose(out_c["C"], ad.reference(program, arrays), rtol=1e-12)


def test_generated_code_is_commented_with_its_ir():
    text = ad.build(ad.load(shrink(CONV, Ro=2, Co=4, Ni=16, No=32, Sco=2))).text
    for node in ('# IR For(cRo, 0, 1, Ro)', '# IR dma get "op1".a -> A_buf',
                 '# IR prime dma get "op1".a',
                 '# IR dma get "op1".b -> B_buf (deps cKr,cKc) resident over cKr,cKc;',
                 '# IR gemm_op("op1", (cCo_in,B), No, Ni',
                 "bsr\t$26, gemm_prim_nm_d"):
        assert node in text


@pytest.mark.parametrize("change, message", [
    (("B({Kr, cKr}, {Kc, cKc})", "B({Kr, cKr}, {Kc, cQ})"),
     r"line 16: unknown variable cQ .*\[rule: unknown variable\]"),
    (("ConstVar Sco({1, 2, 4});", "ConstVar Sco(3);"),
     r"line 23: split factor 3 does not divide the extent 4 .*\[rule: split divides\]"),
    (("No(32)", "No(16)"), r"line 13: .*N/8 of 4.*\[rule: primitive constraint\]"),
    (("fuse(cCo_in, \"op1\", inM);", "fuse(cCo_in, \"op1\", inN);"),
     r"line 25: loop cCo_in fused inN must index exactly .*\[rule: fuse\]"),
    (("reorder({cRo, cCo_out, cKr, cKc, cCo_in});", "reorder({cRo, cKr, cCo_out, cKc, cCo_in});"),
     r"line 13: C's block is revisited over loop\(s\) \['cKr'\].*\[rule: output written once\]"),
    (("Ni(16)", "Ni(1024)"), r"line 13: the kernel needs \d+ bytes of LDM.*\[rule: LDM budget\]"),
    (("For(cKr, 0, 1, Kr){", "For(cKr, 0, 1 Kr){"), r"line 11: .*\[rule: syntax\]"),
])
def test_malformed_schedules_name_line_and_rule(change, message):
    text = shrink(CONV, Ro=2, Co=4, Kr=2, Kc=2, Ni=16, No=32, B=128).replace(*change)
    with pytest.raises(ad.ScheduleError, match=message):
        ad.build(ad.load(text), {"Sco": 2} if "{1, 2, 4}" in text else None)


def test_ldm_plan_matches_the_linked_kernel():
    gen = ad.build(ad.load(shrink(CONV, Ro=2, Co=4, Ni=16, No=32, Sco=2)))
    kernel = gen.kernel
    assert gen.ldm_bytes == kernel.symbol("autodnn_ldm_end") + kernel.stack_bytes(3)


def test_tuner_model_ranks_the_space_and_measured_mode_runs_it():
    from swsim.hostlib.autodnn import conv, tuner
    programs = conv.programs(128, 8, 64, 2, 2, 1, 2)
    model = tuner.tune(programs, "model")
    refused = [c for c in model.candidates if c.refused]
    assert model.feasible and all("[rule: " in c.refused for c in refused)
    assert model.best.predicted == min(c.predicted for c in model.feasible)
    measured = tuner.tune(programs, "measured", sample=1)
    assert measured.best.measured == min(c.measured for c in measured.feasible)
    for m, p in zip(measured.feasible, model.feasible):     # tiny, latency-bound: within 35%
        assert abs(p.predicted / m.measured - 1) < 0.35, (p.label, p.predicted, m.measured)
    chosen = next(c for c in measured.feasible if c.label == model.best.label)
    assert chosen.measured <= 1.1 * measured.best.measured


def _conv_reference(x, w, bias, padding=(0, 0)):
    """y (R_o, C_o, N_o, B) of x (R_i, C_i, N_i, B) zero-padded by `padding` and w (N_o, N_i,
    K_r, K_c), numpy."""
    k_r, k_c = w.shape[2:]
    x = np.pad(x, [(padding[0],) * 2, (padding[1],) * 2, (0, 0), (0, 0)])
    r_o, c_o = x.shape[0] - k_r + 1, x.shape[1] - k_c + 1
    y = np.zeros((r_o, c_o, w.shape[0], x.shape[3]))
    for kr in range(k_r):
        for kc in range(k_c):
            y += np.einsum("rcib,oi->rcob", x[kr:kr + r_o, kc:kc + c_o], w[:, :, kr, kc])
    return y + (0 if bias is None else bias[:, None])


@pytest.mark.parametrize("with_bias, dtype", [(False, np.float64), (True, np.float64),
                                              (True, np.float32)])
def test_dnn_conv_runs_the_generated_algorithm(with_bias, dtype):
    from swsim.hostlib.dnn import conv
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 8, 128)).astype(dtype)             # RCNB
    w = rng.standard_normal((32, 8, 1, 3)).astype(dtype)
    bias = rng.standard_normal(32).astype(dtype) if with_bias else None
    y, stats = conv.conv2d_forward(x, w, bias, algo="generated", layout="RCNB")
    assert stats.algo == "generated" and set(stats.phases) == {"layout", "weights", "operands",
                                                               "conv"}
    assert y.dtype == dtype
    tolerance = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(y, _conv_reference(x.astype(np.float64), w.astype(np.float64),
                                                  None if bias is None else
                                                  bias.astype(np.float64)),
                               rtol=tolerance, atol=tolerance)


def test_dnn_conv_generated_refuses_what_it_does_not_do():
    from swsim.hostlib.dnn.conv import generated as conv_generated
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    config = Machine().config
    geo = make_geometry((128, 16, 4, 4), (32, 16, 3, 3), 1, 0, "w")
    assert conv_generated.supports(geo, "forward", np.float64, config) is None
    assert conv_generated.supports(geo, "backward_filter", np.float64, config) is None
    assert "unknown direction" in conv_generated.supports(geo, "sideways", np.float64, config)
    assert conv_generated.supports(geo, "forward", np.float32, config) is None
    assert "float32 or float64" in conv_generated.supports(geo, "forward", np.float16, config)
    strided = make_geometry((128, 16, 4, 4), (32, 16, 3, 3), 2, 1, "w")
    assert conv_generated.supports(strided, "forward", np.float64, config) is None
    assert conv_generated.supports(strided, "backward_data", np.float64, config) is None
    assert "padding < kernel size" in conv_generated.supports(
        make_geometry((128, 16, 4, 4), (32, 16, 1, 1), 1, 1, "w"), "backward_data",
        np.float64, config)


@settings(max_examples=5, deadline=None)
@given(batch=st.sampled_from([1, 3, 32]), n_i=st.sampled_from([3, 8, 12]),
       n_o=st.sampled_from([5, 32, 40]), r_i=st.integers(1, 3), c_i=st.integers(1, 6),
       k=st.sampled_from([(1, 1), (3, 3), (2, 3)]), pr=st.integers(0, 1), pc=st.integers(0, 1),
       stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]),
       dtype=st.sampled_from([np.float64, np.float32]))
def test_generated_conv_zero_pads_odd_shapes_and_padding(batch, n_i, n_o, r_i, c_i, k, pr, pc,
                                                          stride, dtype):
    """Batches, channels and output columns that fit no primitive variant, and the
    convolution's own padding, run through the zero-padded schedules (thesis 4.2.4); strides
    are the seed's index coefficients."""
    from swsim.hostlib.dnn import conv
    assume(r_i + 2 * pr >= k[0] and c_i + 2 * pc >= k[1])
    rng = np.random.default_rng(batch + n_i + n_o)
    x = rng.standard_normal((r_i, c_i, n_i, batch)).astype(dtype)          # RCNB
    w = rng.standard_normal((n_o, n_i, *k)).astype(dtype)
    bias = rng.standard_normal(n_o).astype(dtype)
    y, stats = conv.conv2d_forward(x, w, bias, stride=stride, padding=(pr, pc),
                                   algo="generated", layout="RCNB")
    assert stats.algo == "generated" and y.dtype == dtype
    tolerance = 1e-10 if dtype == np.float64 else 1e-4
    whole = _conv_reference(x.astype(np.float64), w.astype(np.float64),
                            bias.astype(np.float64), (pr, pc))          # stride 1, subsampled
    np.testing.assert_allclose(y, whole[::stride[0], ::stride[1]], rtol=tolerance,
                               atol=tolerance)


@settings(max_examples=4, deadline=None)
@given(batch=st.sampled_from([1, 32]), n_i=st.sampled_from([3, 16]), n_o=st.sampled_from([5, 32]),
       r_i=st.integers(2, 5), c_i=st.integers(2, 6), k=st.sampled_from([(1, 1), (3, 3), (2, 3)]),
       stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]), pad=st.data())
def test_generated_backward_data_is_the_flipped_forward(batch, n_i, n_o, r_i, c_i, k, stride,
                                                        pad):
    """dx against numpy's scatter of dy through every tap (the forward's adjoint); a stride
    > 1 runs on dy dilated."""
    from swsim.hostlib.dnn import conv
    pr, pc = pad.draw(st.integers(0, k[0] - 1)), pad.draw(st.integers(0, k[1] - 1))
    assume(r_i + 2 * pr >= k[0] and c_i + 2 * pc >= k[1])
    rng = np.random.default_rng(batch + n_i + n_o + r_i)
    w = rng.standard_normal((n_o, n_i, *k))
    (sr, sc) = stride
    r_o, c_o = (r_i + 2 * pr - k[0]) // sr + 1, (c_i + 2 * pc - k[1]) // sc + 1
    dy = rng.standard_normal((r_o, c_o, n_o, batch))                      # RCNB
    dx, stats = conv.conv2d_backward_data(dy, w, (r_i, c_i, n_i, batch), stride=stride,
                                          padding=(pr, pc), algo="generated", layout="RCNB")
    assert stats.algo == "generated" and dx.shape == (r_i, c_i, n_i, batch)
    padded = np.zeros((r_i + 2 * pr, c_i + 2 * pc, n_i, batch))     # scatter dy back
    for kr in range(k[0]):
        for kc in range(k[1]):
            padded[kr:kr + sr * (r_o - 1) + 1:sr, kc:kc + sc * (c_o - 1) + 1:sc] += \
                np.einsum("rcob,oi->rcib", dy, w[:, :, kr, kc])
    np.testing.assert_allclose(dx, padded[pr:pr + r_i, pc:pc + c_i], rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_zero_padded_generated_conv_is_bit_identical_on_both_engines():
    from swsim.hostlib.dnn import conv
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 2, 3, 1)), rng.standard_normal((5, 3, 1, 2))
    (yc, sc), (yp, sp) = (conv.conv2d_forward(x, w, None, padding=(0, 1), algo="generated",
                                              layout="RCNB", engine=engine)
                          for engine in ("c", "python"))
    assert np.array_equal(yc, yp) and sc.cycles == sp.cycles


def test_zero_padded_schedules_are_offered_only_where_needed_and_charged():
    from swsim.hostlib.autodnn import conv as ad_conv
    from swsim.hostlib.dnn.conv import generated as conv_generated
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    assert [s[:4] for s in ad_conv.padded_shapes(128, 64, 64, 13)] == [(128, 64, 64, 13)]
    shapes = ad_conv.padded_shapes(1, 3, 40, 13)
    assert shapes[0][:4] == (1, 3, 40, 13) and not shapes[0][5]
    assert {s[:4] for s in shapes[1:]} == {(128, 8, 64, 13), (64, 8, 64, 14), (32, 8, 64, 16),
                                           (16, 8, 64, 16)}
    config = Machine().config
    geo = make_geometry((1, 16, 13, 13), (32, 16, 3, 3), 1, 1, "w")     # YOLO-like, B = 1
    best = conv_generated.tuned(geo, config, "float64").best
    assert "padded to" in best.label
    assert conv_generated.predict(geo, "forward", np.float64, config) > best.predicted + \
        conv_generated._weights_cycles(geo, "forward", 8, config)


def test_cli_tunes_reports_and_writes_the_kernel(tmp_path, capsys):
    from swsim.cli import main
    out = tmp_path / "k.s"
    args = ["autodnn", str(EXAMPLES / "conv.sched"), "--shape", "Ro=1", "--shape", "Co=2",
            "--shape", "Ni=16", "--shape", "No=32", "--shape", "Kr=1", "-o", str(out),
            "--explain", "--sample", "0"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert re.search(r"chosen: conv.sched\(Sco=\d\) of 2 feasible / 3 candidates", text)
    assert "refused: line 23: split factor 4 does not divide" in text
    assert re.search(r"predicted [\d,]+ cycles, simulated [\d,]+ cycles;", text)
    assert out.read_text().startswith("# Generated by swsim.hostlib.autodnn")
    assert main(["autodnn", str(EXAMPLES / "fig63.sched")]) == 1
    assert "[rule: index in bounds]" in capsys.readouterr().err
    assert main(["autodnn", str(EXAMPLES / "conv.sched"), "--shape", "Nope=3"]) == 1
    assert "no ConstVar Nope" in capsys.readouterr().err


def test_fc_is_another_operator_family_in_the_same_machinery():
    program = ad.load((EXAMPLES / "fc.sched").read_text())
    arrays = operands(program, 7)
    out, stats = ad.run(ad.build(program), arrays)
    x = arrays["X"].reshape(128, 256)           # (N_i, B) in memory
    w = arrays["W"].reshape(128, 128)          # (N_i, N_o)
    np.testing.assert_allclose(out["Y"].reshape(128, 256), w.T @ x, rtol=1e-12, atol=1e-12)
    assert stats.flops == 2 * 256 * 128 * 128


def test_bench_compares_generated_with_implicit_on_a_small_layer():
    from swsim.hostlib.tools.bench import autodnn as bench
    row = bench.measure(("net", "tiny", 16, 32, 2, 1), 128)
    assert row.generated and row.implicit and row.schedule.startswith("conv[")
    assert 0.01 < row.efficiency(row.generated) < 1 and 0.01 < row.efficiency(row.implicit) < 1
    padded = bench.measure(("listing5.1", "B=1", 16, 32, 2, 3), 1)     # B = 1: zero padding
    assert padded.generated and "padded to B=" in padded.schedule
    results = {"batch": 128, "rows": [row, padded], "tuning": []}
    assert "tiny" in bench.format_report(results, 1.0)
    assert "Listing 5.1, B = 1: 1 of 1 cases" in bench.format_report(results, 1.0)
    summary = bench.to_json(results)["summary"]
    assert summary["both"] == 1 and summary["listing"][1]["both"] == 1
    assert len(bench.LAYERS) == 30 and len(bench.listing(False)) == 225
    assert len(bench.listing(True)) == 3 * len(bench.QUICK_LISTING)


def test_bench_samples_listing_6_1_and_extrapolates_implicit_over_the_taps():
    from swsim.hostlib.tools.bench import autodnn as bench
    assert len(bench.LISTING_61) == 120
    sampled = bench.large_kernels(False)
    assert {(b, layer[5]) for layer, b in sampled} == \
        {(b, k) for b in bench.LARGE_BATCHES for k in bench.LARGE_KERNELS}
    assert len(bench.large_kernels(True)) == 2
    # implicit's blocking of a 5 x 5 kernel run at 2 x 2 and 4 x 4, extrapolated: its whole
    # estimate with that blocking
    geo = bench.geometry(("listing6.1", "B=32", 16, 32, 2, 5), 32)
    blocking = bench.conv_implicit.choose(geo, 8, bench.CONFIG)
    whole = bench._implicit(geo, "c", blocking)
    assert bench.implicit_taps(geo, "c") == pytest.approx(whole, rel=1e-3)
    row = bench.Row("listing6.1", "B=32", (32, 16, 32, 2, 5), geo.flops, 2.0 * whole, None,
                    "conv[...]", whole)
    report = bench.format_report({"batch": 128, "rows": [row], "tuning": []}, 1.0)
    assert "Listing 6.1 (large kernels, sampled): 1 of 1 cases" in report


def test_accumulating_kernel_revisits_c_correctly():
    text = shrink(CONV, Ro=2, Co=4, Kr=2, Kc=2, Ni=16, No=32, B=128).replace(
        "reorder({cRo, cCo_out, cKr, cKc, cCo_in});", "reorder({cRo, cKr, cCo_out, cKc, cCo_in});")
    program = ad.load(text)
    arrays = operands(program, 9)
    arrays["C"] = np.random.default_rng(1).standard_normal(arrays["C"].shape)   # C += ...
    out, _ = ad.run(ad.build(program, {"Sco": 2}, accumulate=True), arrays)
    np.testing.assert_allclose(out["C"], ad.reference(program, arrays), rtol=1e-12, atol=1e-12)


def test_bad_host_api_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="a schedule must be DSL text"):
        ad.load(None)
    program = ad.load(shrink(CONV, Ro=1, Co=2, Kr=1, Kc=1, Ni=8, No=32))
    with pytest.raises(TypeError, match="binding must be a dict"):
        ad.build(program, [1])
    with pytest.raises(ValueError, match="Nope is not a parameter"):
        ad.build(program, {"Nope": 1})
    gen = ad.build(program, {"Sco": 1})
    with pytest.raises(ValueError, match="missing tensor 'B'"):
        ad.run(gen, {"A": np.zeros((1, 2, 8, 128)), "C": np.zeros((1, 2, 32, 128))})
    with pytest.raises(ValueError, match=r"arrays\['A'\] has shape \(2,\)"):
        ad.run(gen, {"A": np.zeros(2), "B": np.zeros((1, 1, 8, 32)),
                     "C": np.zeros((1, 2, 32, 128))})


def test_buffers_above_32_kib_of_ldm():
    program = ad.load(shrink(CONV, Ro=1, Co=4, Kr=1, Kc=1, Ni=256, No=32, B=128, Sco=4))
    gen = ad.build(program)
    assert gen.kernel.symbol("B_BUF") > 32768
    arrays = operands(program, 2)
    out, _ = ad.run(gen, arrays)
    np.testing.assert_allclose(out["C"], ad.reference(program, arrays), rtol=1e-12, atol=1e-12)


def test_float32_kernels_call_the_strategy_2_primitive():
    program = ad.load(shrink(CONV, Ro=2, Co=4, Kr=2, Kc=2, Ni=16, No=32, B=128, Sco=2))
    gen = ad.build(program, dtype=np.float32)
    assert "gemm_prim_nm_s2" in gen.text and gen.ldm_bytes == \
        gen.kernel.symbol("autodnn_ldm_end") + gen.kernel.stack_bytes(3)
    arrays = {k: v.astype(np.float32) for k, v in operands(program, 4).items()}
    out, _ = ad.run(gen, arrays)
    assert out["C"].dtype == np.float32
    np.testing.assert_allclose(out["C"], ad.reference(program, arrays), rtol=1e-4, atol=1e-4)


def test_batch_one_vectorises_the_image_in_nchw_forward_and_backward_data():
    """B = 1: the tuner switches to the NCHW programs (M = output rows x columns); dnn.conv
    places RCNB data in that layout and back."""
    from swsim.hostlib.autodnn import conv as ad_conv
    from swsim.hostlib.dnn import conv
    from swsim.hostlib.dnn.conv import generated as conv_generated
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    config = Machine().config
    geo = make_geometry((1, 16, 18, 18), (32, 16, 3, 3), 1, 0, "w")
    assert ad_conv.layout(conv_generated.tuned(geo, config).best.program) == "NCHW"
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((18, 18, 16, 1)), rng.standard_normal((32, 16, 3, 3))
    y, stats = conv.conv2d_forward(x, w, None, algo="generated", layout="RCNB")
    assert stats.algo == "generated"
    np.testing.assert_allclose(y, _conv_reference(x, w, None), rtol=1e-10, atol=1e-10)
    dy = rng.standard_normal((16, 16, 32, 1))
    dx, _ = conv.conv2d_backward_data(dy, w, (18, 18, 16, 1), algo="generated", layout="RCNB")
    padded = np.zeros((18, 18, 16, 1))
    for kr in range(3):
        for kc in range(3):
            padded[kr:kr + 16, kc:kc + 16] += np.einsum("rcob,oi->rcib", dy, w[:, :, kr, kc])
    np.testing.assert_allclose(dx, padded, rtol=1e-10, atol=1e-10)


def test_resident_input_is_fetched_once_and_engines_agree():
    """An input whose block does not change over a loop is kept resident (every block of the
    loops it depends on fetched once, outside it): W over the output rows here."""
    program = ad.load(shrink(CONV, Ro=2, Co=1, Kr=1, Kc=2, Ni=8, No=32, B=128, Sco=1))
    gen = ad.build(program)
    assert gen.plan.operands["b"].spans == ("cKr", "cKc") and gen.plan.operands["b"].depth == -1
    assert "resident over cKr,cKc" in gen.text
    arrays = operands(program, 7)
    (out_c, run_c), (out_py, run_py) = (ad.run(gen, arrays, engine=e) for e in ("c", "python"))
    assert out_c["C"].tobytes() == out_py["C"].tobytes() and run_c.cycles == run_py.cycles
    np.testing.assert_allclose(out_c["C"], ad.reference(program, arrays), rtol=1e-12,
                               atol=1e-12)


@settings(max_examples=4, deadline=None)
@given(batch=st.sampled_from([1, 3, 8]), n_i=st.sampled_from([3, 32]), n_o=st.sampled_from([5, 128]),
       r_i=st.integers(2, 5), c_i=st.integers(2, 6), k=st.sampled_from([(1, 1), (3, 3), (2, 3)]),
       stride=st.sampled_from([1, 2]), pad=st.integers(0, 1))
def test_generated_backward_filter_against_numpy(batch, n_i, n_o, r_i, c_i, k, stride, pad):
    """dW of odd shapes (zero-padded channels and batch, padding, strides) against numpy."""
    from swsim.hostlib.dnn import conv
    assume(r_i + 2 * pad >= k[0] and c_i + 2 * pad >= k[1])
    rng = np.random.default_rng(batch + n_i + n_o + r_i + c_i)
    r_o, c_o = ((size + 2 * pad - kk) // stride + 1 for size, kk in zip((r_i, c_i), k))
    x, dy = rng.standard_normal((r_i, c_i, n_i, batch)), rng.standard_normal((r_o, c_o, n_o,
                                                                             batch))
    dw, stats = conv.conv2d_backward_filter(dy, x, (n_o, n_i, *k), stride=stride, padding=pad,
                                            algo="generated", layout="RCNB")
    assert stats.algo == "generated" and dw.shape == (n_o, n_i, *k)
    xp = np.pad(x, ((pad, pad), (pad, pad), (0, 0), (0, 0)))
    want = np.zeros(dw.shape)
    for kr in range(k[0]):
        for kc in range(k[1]):
            taps = xp[kr:kr + stride * (r_o - 1) + 1:stride, kc:kc + stride * (c_o - 1) + 1:stride]
            want[:, :, kr, kc] = np.einsum("rcib,rcob->oi", taps, dy)
    np.testing.assert_allclose(dw, want, rtol=1e-10, atol=1e-10)


def test_input_window_slides_over_the_output_rows():
    """With the output rows right outside the kernel rows (and the taps in K), X's block of
    input row cRo + cKr is kept in a ring over cRo: one new row per output row, not K_r. The
    kernel equals numpy on both engines, beats the same schedule without the window (rows
    outermost: the column tiles between cRo and cKr), and ``estimate`` extrapolates it."""
    from swsim.hostlib.autodnn import conv, tuner
    from swsim.vm import Machine
    shape = (16, 8, 32, 5, 16, 2, 3)           # B, N_i, N_o, R_o, C_o, K_r, K_c
    variants = {p.name: p for p in conv.programs(*shape)}
    windowed = tuner.Candidate(variants["conv[Ni/8, No/32, rows inside, taps in K]"],
                               {"Sco": 8})
    plain = tuner.Candidate(variants["conv[Ni/8, No/32, taps in K]"], {"Sco": 8})
    for cand in (windowed, plain):
        cand.generated = ad.build(cand.program, cand.binding)
    assert windowed.generated.plan.operands["a"].window == ("cRo", "cKr")
    assert plain.generated.plan.operands["a"].window == ()
    assert "window over cRo+cKr" in windowed.generated.text
    arrays = operands(windowed.program, 5)
    out_c, run_c = ad.run(windowed.generated, arrays)
    np.testing.assert_allclose(out_c["Y"], ad.reference(windowed.program, arrays),
                               rtol=1e-12, atol=1e-12)
    _, run_plain = ad.run(plain.generated, arrays)
    assert run_c.cycles < 0.9 * run_plain.cycles
    cycles, details = conv.estimate(windowed, Machine())
    assert details["sampled"] and abs(cycles / run_c.cycles - 1) < 0.01


@pytest.mark.slow                # the Python engine: minutes on a loaded host
def test_input_window_runs_bit_identically_on_both_engines():
    """Fig. 6.3's nest with one column tile: X's rows slide over cRo (4 primitive calls)."""
    program = ad.load(shrink(CONV, Ro=2, Co=8, Kr=2, Kc=1, Ni=8, No=32, B=16, Sco=8))
    gen = ad.build(program)
    assert gen.plan.operands["a"].window == ("cRo", "cKr")
    arrays = operands(program, 2)
    (out_c, run_c), (out_py, run_py) = (ad.run(gen, arrays, engine=e) for e in ("c", "python"))
    assert out_c["C"].tobytes() == out_py["C"].tobytes() and run_c.cycles == run_py.cycles
    np.testing.assert_allclose(out_c["C"], ad.reference(program, arrays), rtol=1e-12,
                               atol=1e-12)


def _filter_reference(x, dy, k, stride):
    """dW (N_o, N_i, K_r, K_c) of x (R_i, C_i, N_i, B) and dy (R_o, C_o, N_o, B), numpy."""
    r_o, c_o = dy.shape[:2]
    want = np.zeros((dy.shape[2], x.shape[2], *k))
    for kr in range(k[0]):
        for kc in range(k[1]):
            taps = x[kr:kr + stride * (r_o - 1) + 1:stride, kc:kc + stride * (c_o - 1) + 1:stride]
            want[:, :, kr, kc] = np.einsum("rcib,rcob->oi", taps, dy)
    return want


@pytest.mark.parametrize("stride, size", [(1, (4, 4)), (2, (5, 6))])
def test_generated_backward_filter_as_the_swapped_convolution(stride, size):
    """64 -> 32 channels: SEED_FILTER would pad N_o to 128; the tuner picks the swapped
    convolution (x as N_i images of B channels, dy its kernel, dilated by the stride), which
    equals numpy."""
    from swsim.hostlib.autodnn import conv as ad_conv
    from swsim.hostlib.dnn import conv
    from swsim.hostlib.dnn.conv import generated as conv_generated
    from swsim.hostlib.dnn.conv.common import make_geometry
    from swsim.vm import Machine
    batch, n_i, n_o, k = 8, 64, 32, (3, 3)
    geo = make_geometry((batch, n_i, *size), (n_o, n_i, *k), stride, 0, "w")
    best = conv_generated._tuned_pass(geo, "backward_filter", np.float64,
                                      Machine().config).best
    assert ad_conv.swapped_filter(best.program)
    rng = np.random.default_rng(stride)
    x = rng.standard_normal((*size, n_i, batch))
    dy = rng.standard_normal((geo.r_o, geo.c_o, n_o, batch))
    dw, stats = conv.conv2d_backward_filter(dy, x, (n_o, n_i, *k), stride=stride,
                                            algo="generated", layout="RCNB")
    np.testing.assert_allclose(dw, _filter_reference(x, dy, k, stride), rtol=1e-10, atol=1e-10)


def test_model_charges_the_blocks_of_strided_gets():
    """The swapped backward-filter's pick on 64 -> 64, B = 32, 4 x 4 is DMA-bound with short
    strided rows (dy's 64-byte N chunks): the model charges each block as the engine does;
    counting only 128-byte lines it predicted 212 544 cycles against 371 279 run."""
    from swsim.hostlib.autodnn import conv, tuner
    from swsim.vm import Machine
    machine = Machine()
    best = tuner.tune(conv.filter_programs(32, 64, 64, 4, 4, 3, 3), "model",
                      config=machine.config).best
    assert conv.swapped_filter(best.program)
    assert abs(tuner.measure(best, machine, None) / best.predicted - 1) < 0.05


def test_swapped_filter_kernel_runs_bit_identically_on_both_engines():
    """The swapped convolution's smallest kernel (one primitive call per tap row)."""
    from swsim.hostlib.autodnn import conv as ad_conv
    program = next(p for p in ad_conv.filter_programs(8, 64, 32, 1, 1, 2, 2)
                   if p.name == "filter as conv[Ni/8, No/32]")
    assert ad_conv.swapped_filter(program)
    gen = ad.build(program, {"Sco": 2})
    arrays = operands(program, 3)
    (out_c, run_c), (out_py, run_py) = (ad.run(gen, arrays, engine=e) for e in ("c", "python"))
    assert out_c["Y"].tobytes() == out_py["Y"].tobytes() and run_c.cycles == run_py.cycles
    np.testing.assert_allclose(out_c["Y"], ad.reference(program, arrays), rtol=1e-12,
                               atol=1e-12)


def test_estimate_runs_whole_when_a_sample_would_keep_an_input_resident():
    """dy's blocks of 1 or 2 output rows fit the resident budget, those of 10 rows do not:
    extrapolating from such samples would time another kernel, so the layer runs whole."""
    from swsim.hostlib.autodnn import conv, tuner
    from swsim.vm import Machine
    machine = Machine()
    program = conv.filter_programs(32, 32, 128, 10, 8, 1, 2)[0]
    cand = tuner.Candidate(program, {"Sco": 8}, ad.build(program, {"Sco": 8}))
    sample = ad.build(tuner.with_consts(program, Ro=2), {"Sco": 8})
    assert sample.plan.operands["b"].spans and not cand.generated.plan.operands["b"].spans
    cycles, details = conv.estimate(cand, machine)
    assert not details["sampled"] and cycles == tuner.measure(cand, machine, None)


def test_tuner_prechecks_refuse_as_building_does():
    # the space checks most candidates' primitive constraints on a gemm_op scheduled once
    # per loop nest (other bindings, other shapes); its verdicts are the full build's
    from swsim.hostlib.autodnn import conv, tuner
    programs = conv.programs(1, 64, 64, 4, 4, 3, 3)
    candidates = tuner.space(programs)
    assert sum(c.refused is not None for c in candidates) > 50
    for cand in candidates:
        try:
            built, refused = ad.build(cand.program, cand.binding), None
        except ad.ScheduleError as exc:
            built, refused = None, str(exc)
        assert cand.refused == refused, cand.label
        if built is not None:
            assert cand.generated.ldm_bytes == built.ldm_bytes
            assert cand.generated.text == built.text


def test_tuning_shares_dma_costs_without_changing_predictions():
    # the model remembers the engine cycles of block geometries across a tuning's candidates;
    # each candidate's prediction is the one it gets alone
    from swsim.hostlib.autodnn import conv, tuner
    from swsim.vm.config import VMConfig
    config = VMConfig.preset()
    tuning = tuner.tune(conv.programs(32, 64, 64, 4, 4, 3, 3), "model", config=config)
    assert len(tuning.feasible) > 5
    for cand in tuning.feasible:
        assert cand.predicted == tuner.predict(cand.generated, config)


def test_large_kernels_are_estimated_from_two_smaller_ones():
    # more than MAX_TAPS taps: the same schedule at kernel sizes 2 and 4, extrapolated
    # linearly in the taps' count, against the whole run
    from swsim.hostlib.autodnn import conv, tuner
    from swsim.vm import Machine
    best = tuner.tune(conv.programs(128, 8, 32, 2, 2, 5, 5), "model").best
    cycles, details = conv.estimate(best, Machine())
    assert details["taps"] == (4, 16)
    whole = tuner.measure(best, Machine(), None)
    assert abs(cycles / whole - 1) < 0.01, (cycles, whole)


def test_a_large_kernel_without_two_like_samples_simulates_every_tap(monkeypatch):
    # (ResNet-50's conv1 backward-filter: its "kernel" is dy, 112 x 112, and every size up to
    # 24 keeps the weights resident where the layer cannot) estimated, not refused
    from swsim.hostlib.autodnn import conv, tuner
    from swsim.vm import Machine
    best = tuner.tune(conv.programs(128, 8, 32, 2, 2, 5, 5), "model").best
    monkeypatch.setattr(conv, "TAP_SAMPLE_SIZES", (2,))
    cycles, details = conv.estimate(best, Machine())
    assert "taps" not in details
    assert (cycles, details) == conv._estimate_pixels(best, Machine(), "c")
