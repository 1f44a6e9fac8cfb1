"""Convolution as swAutoDNN schedules: the seed of Fig. 6.3 (any stride, no padding, the RCNB
layouts of the hand-written implicit convolution: x (R_i, C_i, N_i, B), w (K_r, K_c, N_i,
N_o), y (R_o, C_o, N_o, B)) written out as DSL text for a shape, in the variants the tuner
searches:
  * channel blocking: N_i and N_o declared as (outer, inner) pairs -- the same memory, a loop
    over the outer part (N_i's is a reduction inside the output tile);
  * the kernel columns either a loop or fused into the primitive's K (Table 4.2 row 4's
    K_c N_i, possible when N_i is not blocked);
  * the output columns split by Sco (a parameter set) and the inner part fused into M with
    the batch (Algorithm 4's image-size-aware blocking; Sco = 1 is Algorithm 3's);
  * boundaries by the lightweight zero padding of thesis section 4.2.4: a shape whose batch,
    output columns or channels fit no primitive variant is also offered padded -- B and C_o
    up to what makes an M chunk of Sco columns x B a whole vector chunk, N_i to the
    primitive's K multiple, N_o to its N multiple -- the caller zero-fills the pad and drops
    the pad's outputs (``padded_shape``), and the model counts the pad's wasted work.
"""
from __future__ import annotations

import itertools

from .dsl import parse

SEED = """Schedule Seed
ConstVar Ro({r_o}), Co({c_o}), Kr({k_r}), Kc({k_c}), NiO({ni_o}), NiI({ni_i}), NoO({no_o}), NoI({no_i}), BO({b_o}), BI({b_i});
ConstVar Ri({sr}*Ro-{sr}+{dr}*Kr-{dr}+1), Ci({sc}*Co-{sc}+{dc}*Kc-{dc}+1);
Tensor X(Ri, Ci, NiO, NiI, BO, BI), W(Kr, Kc, NiO, NiI, NoO, NoI), Y(Ro, Co, NoO, NoI, BO, BI);
For(cRo, 0, 1, Ro){{ For(cB, 0, 1, BO){{ For(cCo, 0, 1, Co){{ For(cNo, 0, 1, NoO){{
  For(cKr, 0, 1, Kr){{ For(cKc, 0, 1, Kc){{ For(cNi, 0, 1, NiO){{
    gemm_op("conv", BI, NoI, NiI,
      X({{Ri, {sr}*cRo+{dr}*cKr}}, {{Ci, {sc}*cCo+{dc}*cKc}}, {{NiO, cNi}}, {{BO, cB}}),
      W({{Kr, {kr_tap}}}, {{Kc, {kc_tap}}}, {{NiO, cNi}}, {{NoO, cNo}}),
      Y({{Ro, cRo}}, {{Co, cCo}}, {{NoO, cNo}}, {{BO, cB}}));
}}}}}}}}}}}}}}
Schedule Strategies
ConstVar Sco({{{scos}}});
split(cCo, cCo_out, cCo_in, Sco);
reorder({{{outer}cKr, cKc, cNi, cCo_in}});
fuse(cCo_in, "conv", inM);
{taps}vectorization("conv", VecM);
"""
FUSE_TAPS = 'reorder({{{outer}cKr, cNi, cKc}});\nfuse(cKc, "conv", inK);\n'
# B = 1 (primitive switching: the batch cannot be the vector dimension): the image is. The
# kernel reads and writes NCHW (at B = 1: channels, rows, columns), M = Sro output rows x the
# output columns (both fused into M; a CPE's M chunk lies in one row), K = input channels.
SEED_IMAGE = """Schedule Seed
ConstVar Ro({r_o}), Co({c_o}), Kr({k_r}), Kc({k_c}), NiO({ni_o}), NiI({ni_i}), NoO({no_o}), NoI({no_i}), B(1);
ConstVar Ri({sr}*Ro-{sr}+Kr), Ci({sc}*Co-{sc}+Kc);
Tensor X(NiO, NiI, Ri, Ci, B), W(Kr, Kc, NiO, NiI, NoO, NoI), Y(NoO, NoI, Ro, Co, B);
For(cRo, 0, 1, Ro){{ For(cCo, 0, 1, Co){{ For(cNo, 0, 1, NoO){{
  For(cKr, 0, 1, Kr){{ For(cKc, 0, 1, Kc){{ For(cNi, 0, 1, NiO){{
    gemm_op("conv", B, NoI, NiI,
      X({{NiO, cNi}}, {{Ri, {sr}*cRo+cKr}}, {{Ci, {sc}*cCo+cKc}}),
      W({{Kr, {kr_tap}}}, {{Kc, {kc_tap}}}, {{NiO, cNi}}, {{NoO, cNo}}),
      Y({{NoO, cNo}}, {{Ro, cRo}}, {{Co, cCo}}));
}}}}}}}}}}}}
Schedule Strategies
ConstVar Sro({{{sros}}});
split(cRo, cRo_out, cRo_in, Sro);
reorder({{cRo_out, cNo, cKr, cKc, cNi, cRo_in, cCo}});
fuse(cCo, "conv", inM);
fuse(cRo_in, "conv", inM);
vectorization("conv", VecM);
"""
# Backward-filter: dW(K_r, K_c, N_i, N_o) = sum over rows, columns and the batch of x's taps
# times dy, one primitive call per (tap, output row, column tile): M = N_i, N = N_o
# (vectorised: dW's rows are N_o-contiguous), K = Sco output columns x the batch. x and dy
# are read with the batch outside the channels: x (R_i, C_i, B, N_i), dy (R_o, C_o, B, N_o)
# (dnn.conv rearranges them on the VM), declared in the order the layout strategy gives them
# (so it moves nothing). The reduction loops stay inside dW's tile. The channels are not
# blocked: a blocked N_i or N_o would be a blocked layout of x, dy and dW.
SEED_FILTER = """Schedule Seed
ConstVar Ro({r_o}), Co({c_o}), Kr({k_r}), Kc({k_c}), Ni({n_i}), No({n_o}), B({b});
ConstVar Ri({sr}*Ro-{sr}+Kr), Ci({sc}*Co-{sc}+Kc);
Tensor X(Ri, Ci, B, Ni), D(Ro, Co, B, No), W(Kr, Kc, Ni, No);
For(cKr, 0, 1, Kr){{ For(cKc, 0, 1, Kc){{ For(cRo, 0, 1, Ro){{ For(cCo, 0, 1, Co){{
  gemm_op("dw", Ni, No, B,
    X({{Ri, {sr}*cRo+cKr}}, {{Ci, {sc}*cCo+cKc}}),
    D({{Ro, cRo}}, {{Co, cCo}}),
    W({{Kr, cKr}}, {{Kc, cKc}}));
}}}}}}}}
Schedule Strategies
ConstVar Sco({{{scos}}});
split(cCo, cCo_out, cCo_in, Sco);
reorder({{cKr, cKc, cRo, cCo_out, cCo_in}});
fuse(cCo_in, "dw", inK);
layout("dw", notrans, trans, trans);
vectorization("dw", VecN);
"""
# its primitive shape: N (N_o) a multiple of 8 CPEs x a 16-element vector chunk, M (N_i) of
# 8 x a 4-element splat chunk, K of 8
FILTER_N_MULTIPLE, FILTER_M_MULTIPLE = 128, 32

# the tile loops outside the taps: N_o blocks innermost (the input block of a tile stays for
# them), or outermost (the weights of an N_o block stay resident over the whole image)
ORDERS = ("cRo, cB, cCo_out, cNo, ", "cNo, cRo, cB, cCo_out, ")
# the output rows inside a column tile, right outside the kernel rows: X's block of input row
# cRo + cKr is then the same at (cRo, cKr) as at (cRo + 1, cKr - 1), and the optimiser keeps
# X in a sliding window over the rows (optimize._window: one new input row a row, not K_r)
WINDOW_ORDER = "cB, cCo_out, cRo, cNo, "
MAX_SCO = 8
CHANNEL_BLOCKS = (32, 64, 128, 256)
# batch blocks: a loop over the outer part, so that Sco columns x the inner part make a
# smaller M (the hand-written implicit convolution's BB x CB tiles)
BATCH_BLOCKS = (16, 32, 64)
# The primitive's shape constraints on the whole 8 x 8 mesh (optimize.check_primitive): M
# (here Sco x B, VecM) a multiple of 8 CPEs x a 16-element vector chunk, N (N_o) of 8 x a
# 4-element splat chunk, K (N_i) of 8.
M_MULTIPLE, N_MULTIPLE, K_MULTIPLE = 128, 32, 8


def _divisors(n: int, options) -> list:
    return sorted({d for d in options if d < n and n % d == 0} | {n})


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def padded_shapes(batch, n_i, n_o, c_o) -> list:
    """(B, N_i, N_o, C_o, Sco options, padded) the programs are written for: the exact shape
    with every Sco dividing C_o, and -- when some dimension fits no primitive variant -- for each Sco
    that could hold a whole vector chunk, the shape zero-padded to fit it (the M chunk of a
    CPE, Sco x B / 8, must be a multiple of 16 and lie inside one output column's batch, so
    B pads to a multiple of 128 / Sco and C_o to a multiple of Sco)."""
    n_i_p, n_o_p = _round_up(n_i, K_MULTIPLE), _round_up(n_o, N_MULTIPLE)
    exact = [s for s in range(1, min(c_o, MAX_SCO) + 1) if c_o % s == 0]
    shapes = [(batch, n_i, n_o, c_o, exact, False)]
    fits = any(batch % (M_MULTIPLE // s) == 0 for s in exact if M_MULTIPLE % s == 0)
    if fits and (n_i_p, n_o_p) == (n_i, n_o):
        return shapes
    for sco in (1, 2, 4, 8):
        shape = (_round_up(batch, M_MULTIPLE // sco), n_i_p, n_o_p, _round_up(c_o, sco), [sco],
                 True)
        if shape[:4] != (batch, n_i, n_o, c_o) and shape not in shapes:
            shapes.append(shape)
    return shapes


def layout(program) -> str:
    """The activations' layout a program of ``programs`` reads and writes: "RCNB" or, for
    the B = 1 variants, "NCHW"."""
    return "NCHW" if program.seed.registry.tensors["X"].dims[0] == "NiO" else "RCNB"


def padded_shape(program) -> dict:
    """The padded sizes a program of ``programs`` or ``filter_programs`` was written for:
    {"B", "Ni", "No", "Co"}."""
    c = program.seed.registry.const_values()
    def whole(name):          # a dimension declared whole or as (outer, inner) parts
        return c[name] if name in c else c[name + "O"] * c[name + "I"]
    return {name: whole(name) for name in ("B", "Ni", "No", "Co")}


def programs(batch, n_i, n_o, r_o, c_o, k_r, k_c, flip: bool = False,
             stride: tuple = (1, 1), dilation: tuple = (1, 1)) -> list:
    """The schedule variants (Programs) of a forward convolution of this shape, the zero-padded
    ones (``padded_shapes``) included; `flip`: the kernel's taps read rotated by 180 degrees
    (backward-data's convolution), so the taps stay loops (a fused K cannot run backwards);
    `stride`: (rows, columns) of the input between output pixels; `dilation`: between taps."""
    image = _image_variants(n_i, n_o, r_o, c_o, k_r, k_c, flip, stride) if batch == 1 else []
    return image + [program for shape in padded_shapes(batch, n_i, n_o, c_o)
                    for program in _variants(*shape, r_o, k_r, k_c, flip, stride, dilation)]


def filter_programs(batch, n_i, n_o, r_o, c_o, k_r, k_c, stride: tuple = (1, 1)) -> list:
    """The backward-filter programs of this convolution: SEED_FILTER's (N_i zero-padded to a
    multiple of 32, N_o to 128 and the batch to 8 where they do not fit: zeros add nothing to
    dW), and the swapped convolution's (``swapped_filter``). ``filter_shape`` gives a
    program's padded sizes."""
    n_i_p, n_o_p = _round_up(n_i, FILTER_M_MULTIPLE), _round_up(n_o, FILTER_N_MULTIPLE)
    b_p = _round_up(batch, K_MULTIPLE)
    scos = [s for s in range(1, min(c_o, MAX_SCO) + 1) if c_o % s == 0]
    program = parse(SEED_FILTER.format(r_o=r_o, c_o=c_o, k_r=k_r, k_c=k_c, n_i=n_i_p,
                                       n_o=n_o_p, b=b_p, scos=", ".join(map(str, scos)),
                                       sr=stride[0], sc=stride[1]))
    padded = (b_p, n_i_p, n_o_p) != (batch, n_i, n_o)
    program.name = "filter" + (f"[padded to B={b_p} Ni={n_i_p} No={n_o_p}]" if padded else "")
    swapped = programs(n_i, batch, n_o, k_r, k_c, r_o, c_o, dilation=stride)
    for each in swapped:
        each.name = "filter as " + each.name
    return [program] + swapped


def swapped_filter(program) -> bool:
    """Whether a program of ``filter_programs`` is the swapped convolution (the hand-written
    implicit backward-filter's, here generated with every forward variant: x (R_i, C_i, B,
    N_i) read as N_i images of B channels, dy (R_o, C_o, B, N_o) as an R_o x C_o kernel of
    B -> N_o channels, dilated by the stride, dW written as a K_r x K_c output (K_r, K_c, N_o,
    N_i)) rather than SEED_FILTER's (dW (K_r, K_c, N_i, N_o))."""
    return "Y" in program.seed.registry.tensors


def filter_shape(program) -> dict:
    """The padded sizes {"B", "Ni", "No", "Kc"} a program of ``filter_programs`` runs on."""
    if not swapped_filter(program):
        return dict(padded_shape(program), Kc=program.seed.registry.const_values()["Kc"])
    sizes = padded_shape(program)
    return {"B": sizes["Ni"], "Ni": sizes["B"], "No": sizes["No"], "Kc": sizes["Co"]}


def _image_variants(n_i, n_o, r_o, c_o, k_r, k_c, flip, stride) -> list:
    """B = 1's NCHW programs (SEED_IMAGE), every channel blocking; Sro the parameter set."""
    sros = [s for s in (1, 2, 4, 8) if r_o % s == 0]
    out = []
    for ni_i, no_i in itertools.product(_divisors(n_i, CHANNEL_BLOCKS),
                                        _divisors(n_o, CHANNEL_BLOCKS)):
        program = parse(SEED_IMAGE.format(
            r_o=r_o, c_o=c_o, k_r=k_r, k_c=k_c, ni_o=n_i // ni_i, ni_i=ni_i, no_o=n_o // no_i,
            no_i=no_i, sros=", ".join(map(str, sros)), sr=stride[0], sc=stride[1],
            kr_tap="Kr-1-cKr" if flip else "cKr", kc_tap="Kc-1-cKc" if flip else "cKc"))
        program.name = f"conv[NCHW, Ni/{ni_i}, No/{no_i}]"
        out.append(program)
    return out


def _variants(batch, n_i, n_o, c_o, scos, padded, r_o, k_r, k_c, flip, stride,
              dilation) -> list:
    out = []
    taps_in_k = ("", FUSE_TAPS) if k_c > 1 and not flip else ("",)
    for b_i, ni_i, no_i in itertools.product(_divisors(batch, BATCH_BLOCKS),
                                             _divisors(n_i, CHANNEL_BLOCKS),
                                             _divisors(n_o, CHANNEL_BLOCKS)):
        orders = ORDERS if n_o > no_i else ORDERS[:1]
        windowed = (WINDOW_ORDER,) if k_r > 1 and stride[0] == dilation[0] == 1 else ()
        for taps, outer in [(taps, outer) for taps in (taps_in_k if ni_i == n_i else ("",))
                            for outer in orders + (windowed if taps else ())]:
            text = SEED.format(outer=outer, r_o=r_o, c_o=c_o, k_r=k_r, k_c=k_c, ni_o=n_i // ni_i,
                               ni_i=ni_i, no_o=n_o // no_i, no_i=no_i, b_o=batch // b_i,
                               b_i=b_i, scos=", ".join(map(str, scos)),
                               taps=taps.format(outer=outer),
                               sr=stride[0], sc=stride[1], dr=dilation[0], dc=dilation[1],
                               kr_tap="Kr-1-cKr" if flip else "cKr",
                               kc_tap="Kc-1-cKc" if flip else "cKc")
            program = parse(text)
            pad = f", padded to B={batch} Ni={n_i} No={n_o} Co={c_o}" if padded else ""
            blocked = f"B/{b_i}, " if b_i < batch else ""
            no_first = {ORDERS[1]: ", No outermost", WINDOW_ORDER: ", rows inside"}.get(outer, "")
            program.name = (f"conv[{blocked}Ni/{ni_i}, No/{no_i}{no_first}"
                            f"{', taps in K' if taps else ''}{pad}]")
            out.append(program)
    return out


SAMPLE_TILES = 4              # output-column tiles per sampled row


def estimate(candidate, machine, engine: str = "c") -> tuple:
    """(cycles, details) of a tuned convolution candidate from simulating a sample: its
    kernel on 1 and 2 row tiles (Sro output rows each; 1 in RCNB) of at most SAMPLE_TILES
    column tiles (Sco columns each; the whole row in NCHW, whose M holds it); the
    difference is a row tile's cycles, scaled to the layer's columns and counted for every
    row tile, plus the rest of the first run (start-up, the priming DMA, the last put).
    A layer whose samples would fetch an operand otherwise (resident or windowed in a few
    rows, not in the whole layer) runs whole. A kernel of more than MAX_TAPS taps is
    estimated from two smaller ones (``_estimate_taps``)."""
    consts = candidate.program.seed.registry.const_values()
    if consts.get("Kr", 1) * consts.get("Kc", 1) > MAX_TAPS:
        return _estimate_taps(candidate, machine, engine)
    return _estimate_pixels(candidate, machine, engine)


def _estimate_pixels(candidate, machine, engine) -> tuple:
    """``estimate`` sampling output rows and columns (every tap simulated)."""
    from . import build
    from .tuner import measure, with_consts
    consts = candidate.program.seed.registry.const_values()
    r_o, c_o = consts["Ro"], consts["Co"]
    sro = candidate.binding.get("Sro", 1)
    cols = c_o if layout(candidate.program) == "NCHW" else \
        min(c_o, SAMPLE_TILES * candidate.binding.get("Sco", 1))
    whole = _structure(candidate.generated)

    def sample(**shape):
        program = with_consts(candidate.program, **shape)
        gen = build(program, candidate.binding, dtype=candidate.generated.dtype)
        if _structure(gen) != whole:
            raise _Unlike
        return type(candidate)(program, candidate.binding, gen)

    try:
        return _estimate_sampled(candidate, sample, machine, engine, r_o, c_o, sro, cols)
    except _Unlike:       # a sample would keep resident what the layer cannot: run it whole
        return measure(candidate, machine, None, engine), {"sampled": False, "rows": r_o,
                                                           "cols": c_o}


# A kernel of more taps than this (Listing 6.1's K = 32..256: up to 65 536 a pixel) is
# estimated from two smaller kernels of the same schedule (``_estimate_taps``)
MAX_TAPS = 16
# (a swapped backward-filter's "kernel" is dy: a small one can keep the weights resident where
# the layer's cannot, so larger sizes are tried too before every tap is simulated)
TAP_SAMPLE_SIZES = (2, 4, 8, 12, 16, 24, 32, 48, 64)


def _estimate_taps(candidate, machine, engine) -> tuple:
    """``estimate`` of a large kernel: the same schedule on two smaller kernels (the first
    two of TAP_SAMPLE_SIZES, smaller than the kernel, that keep every operand fetched as in
    the whole layer: resident or not), each sampled over rows and columns, extrapolated
    linearly in the taps' count (the taps are a reduction inside each output tile: a tap
    costs the same primitive calls and DMAs at any kernel size). When no two sizes keep the
    structure, every tap is simulated (``_estimate_pixels``)."""
    from . import build
    from .ir import ScheduleError
    from .tuner import with_consts
    consts = candidate.program.seed.registry.const_values()
    k_r, k_c = consts["Kr"], consts["Kc"]
    whole = _structure(candidate.generated)
    runs = []
    for size in TAP_SAMPLE_SIZES:
        shape = {"Kr": min(size, k_r), "Kc": min(size, k_c)}
        if shape["Kr"] * shape["Kc"] in (k_r * k_c, *(taps for taps, _ in runs)):
            continue
        program = with_consts(candidate.program, **shape)
        try:
            gen = build(program, candidate.binding, dtype=candidate.generated.dtype)
        except ScheduleError:
            continue
        if _structure(gen) != whole:
            continue
        cycles, _ = _estimate_pixels(type(candidate)(program, candidate.binding, gen), machine,
                                     engine)
        runs.append((shape["Kr"] * shape["Kc"], cycles))
        if len(runs) == 2:
            break
    if len(runs) < 2:
        return _estimate_pixels(candidate, machine, engine)
    (taps1, cycles1), (taps2, cycles2) = runs
    per_tap = (cycles2 - cycles1) / (taps2 - taps1)
    return cycles1 + (k_r * k_c - taps1) * per_tap, {"sampled": True, "taps": (taps1, taps2)}


class _Unlike(Exception):
    """A sample's kernel is not the layer's (another input is resident or windowed)."""


def _structure(gen) -> tuple:
    """Where a kernel's operands are fetched: (depth, resident loops, window) of each."""
    return tuple((op.depth, op.spans, op.window) for op in gen.plan.operands.values())


def _estimate_sampled(candidate, sample, machine, engine, r_o, c_o, sro, cols) -> tuple:
    from .tuner import measure
    if candidate.generated.plan.operands["a"].window[:1] == ("cRo",):
        return _estimate_window(candidate, sample, machine, engine)
    if r_o == sro:
        one = measure(sample(Co=cols), machine, None, engine)
        return one * c_o / cols, {"sampled": cols < c_o, "rows": r_o, "cols": cols}
    runs = [measure(sample(Ro=rows, Co=cols), machine, None, engine) for rows in (sro, 2 * sro)]
    row = (runs[1] - runs[0]) * c_o / cols
    return runs[0] - (runs[1] - runs[0]) + row * r_o // sro, {"sampled": True, "rows": 2 * sro,
                                                              "cols": cols}


# output rows of the windowed estimate's samples (the first fills the window)
WINDOW_ROWS = (2, 4)


def _estimate_window(candidate, sample, machine, engine) -> tuple:
    """``estimate`` of a kernel whose X window slides over the output rows (inside a column
    tile): a tile costs its window's fill plus a share per row, so the samples are a column
    tile of WINDOW_ROWS[0] rows, the same with a second tile (a tile's cost and the start-up)
    and one tile of WINDOW_ROWS[1] rows (a row's cost)."""
    from .tuner import measure
    consts = candidate.program.seed.registry.const_values()
    r_o, c_o, sco = consts["Ro"], consts["Co"], candidate.binding.get("Sco", 1)
    rows = WINDOW_ROWS[0] if r_o > WINDOW_ROWS[1] else r_o
    tiles = c_o // sco
    one = measure(sample(Ro=rows, Co=sco), machine, None, engine)
    tile = measure(sample(Ro=rows, Co=2 * sco), machine, None, engine) - one if tiles > 1 else 0
    row = 0
    if rows < r_o:
        more = measure(sample(Ro=WINDOW_ROWS[1], Co=sco), machine, None, engine)
        row = (more - one) / (WINDOW_ROWS[1] - rows)
    return one + (tiles - 1) * tile + tiles * (r_o - rows) * row, {
        "sampled": rows < r_o or tiles > 1, "rows": r_o if rows == r_o else WINDOW_ROWS[1],
        "cols": min(2, tiles) * sco}
