"""Convolution as swAutoDNN schedules: the seed of Fig. 6.3 (stride 1, no padding, the RCNB
layouts of the hand-written implicit convolution: x (R_i, C_i, N_i, B), w (K_r, K_c, N_i,
N_o), y (R_o, C_o, N_o, B)) written out as DSL text for a shape, in the variants the tuner
searches:
  * channel blocking: N_i and N_o declared as (outer, inner) pairs -- the same memory, a loop
    over the outer part (N_i's is a reduction inside the output tile);
  * the kernel columns either a loop or fused into the primitive's K (Table 4.2 row 4's
    K_c N_i, possible when N_i is not blocked);
  * the output columns split by Sco (a parameter set) and the inner part fused into M with
    the batch (Algorithm 4's image-size-aware blocking; Sco = 1 is Algorithm 3's).
"""
from __future__ import annotations

from .dsl import parse

SEED = """Schedule Seed
ConstVar Ro({r_o}), Co({c_o}), Kr({k_r}), Kc({k_c}), NiO({ni_o}), NiI({ni_i}), NoO({no_o}), NoI({no_i}), B({b});
ConstVar Ri(Ro+Kr-1), Ci(Co+Kc-1);
Tensor X(Ri, Ci, NiO, NiI, B), W(Kr, Kc, NiO, NiI, NoO, NoI), Y(Ro, Co, NoO, NoI, B);
For(cRo, 0, 1, Ro){{ For(cCo, 0, 1, Co){{ For(cNo, 0, 1, NoO){{
  For(cKr, 0, 1, Kr){{ For(cKc, 0, 1, Kc){{ For(cNi, 0, 1, NiO){{
    gemm_op("conv", B, NoI, NiI,
      X({{Ri, cRo+cKr}}, {{Ci, cCo+cKc}}, {{NiO, cNi}}),
      W({{Kr, cKr}}, {{Kc, cKc}}, {{NiO, cNi}}, {{NoO, cNo}}),
      Y({{Ro, cRo}}, {{Co, cCo}}, {{NoO, cNo}}));
}}}}}}}}}}}}
Schedule Strategies
ConstVar Sco({{{scos}}});
split(cCo, cCo_out, cCo_in, Sco);
reorder({{cRo, cCo_out, cNo, cKr, cKc, cNi, cCo_in}});
fuse(cCo_in, "conv", inM);
{taps}vectorization("conv", VecM);
"""
FUSE_TAPS = 'reorder({cRo, cCo_out, cNo, cKr, cNi, cKc});\nfuse(cKc, "conv", inK);\n'
MAX_SCO = 8
CHANNEL_BLOCKS = (32, 64, 128, 256)


def _divisors(n: int, options) -> list:
    return sorted({d for d in options if d < n and n % d == 0} | {n})


def programs(batch, n_i, n_o, r_o, c_o, k_r, k_c) -> list:
    """The schedule variants (Programs) of a forward convolution of this shape."""
    scos = [s for s in range(1, min(c_o, MAX_SCO) + 1) if c_o % s == 0]
    out = []
    for ni_i in _divisors(n_i, CHANNEL_BLOCKS):
        for no_i in _divisors(n_o, CHANNEL_BLOCKS):
            for taps in ("", FUSE_TAPS) if ni_i == n_i and k_c > 1 else ("",):
                text = SEED.format(r_o=r_o, c_o=c_o, k_r=k_r, k_c=k_c, ni_o=n_i // ni_i,
                                   ni_i=ni_i, no_o=n_o // no_i, no_i=no_i, b=batch,
                                   scos=", ".join(map(str, scos)), taps=taps)
                program = parse(text)
                program.name = f"conv[Ni/{ni_i}, No/{no_i}{', taps in K' if taps else ''}]"
                out.append(program)
    return out


SAMPLE_TILES = 4              # output-column tiles per sampled row


def estimate(candidate, machine, engine: str = "c") -> tuple:
    """(cycles, details) of a tuned convolution candidate from simulating a sample: its
    kernel on 1 and 2 output rows of at most SAMPLE_TILES column tiles (Sco columns each); the
    difference is a row's cycles, scaled to the layer's columns and counted for every row,
    plus the rest of the first run (start-up, the priming DMA, the last put)."""
    from . import build
    from .tuner import measure, with_consts
    consts = candidate.program.seed.registry.const_values()
    r_o, c_o = consts["Ro"], consts["Co"]
    sco = candidate.binding.get("Sco", 1)
    cols = min(c_o, SAMPLE_TILES * sco)
    def sample(**shape):
        program = with_consts(candidate.program, **shape)
        return type(candidate)(program, candidate.binding,
                               build(program, candidate.binding, dtype=candidate.generated.dtype))

    runs = [measure(sample(Ro=rows, Co=cols), machine, rows, engine)
            for rows in (1, 2)] if r_o > 1 else None
    if runs is None:
        one = measure(sample(Co=cols), machine, 1, engine)
        return one * c_o / cols, {"sampled": cols < c_o, "rows": 1, "cols": cols}
    row = (runs[1] - runs[0]) * c_o / cols
    return runs[0] - (runs[1] - runs[0]) + row * r_o, {"sampled": True, "rows": 2,
                                                       "cols": cols}
