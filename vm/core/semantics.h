/* Instruction semantics (docs/semantics.md), included by the engine (execute.h) so that the issue loop can
 * inline them. Every case computes its result from the decoded operand slots and writes it
 * with the ready time of docs/timing.md. */
#ifndef SWSIM_SEMANTICS_H
#define SWSIM_SEMANTICS_H
#include <math.h>
#include <string.h>
#include "core.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the core reads LDM and memory images as little-endian host integers"
#endif

#define CANONICAL_NAN64 UINT64_C(0x7FF8000000000000)
#define CANONICAL_NAN32 UINT32_C(0x7FC00000)
#define DOUBLE_TWO UINT64_C(0x4000000000000000)

enum ExecOutcome { EXEC_NEXT, EXEC_JUMP, EXEC_HALT, EXEC_FAULT };

/* The default arm of a helper's switch over instruction ids: execute() (execute.h) calls each
 * helper only for instructions that have a case in it, so the arm is never taken; every
 * instruction has its own case, none falls into a neighbour's behaviour. */
#define NOT_DISPATCHED_HERE(...) return __VA_ARGS__

/* ---- bits and floats -------------------------------------------------------------------- */

static inline double as_double(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static inline uint64_t double_bits(double d)   /* float results: NaN is canonical */
{
    uint64_t bits;
    if (d != d)
        return CANONICAL_NAN64;
    memcpy(&bits, &d, sizeof bits);
    return bits;
}

static inline float single_of_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t single_bits(float f)     /* NaN is canonical */
{
    uint32_t bits;
    if (f != f)
        return CANONICAL_NAN32;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static inline float to_single(uint64_t bits)    /* a lane rounded to binary32 */
{
    return (float)as_double(bits);
}

static inline uint64_t sext32(uint64_t v)
{
    return (uint64_t)(int64_t)(int32_t)(uint32_t)v;
}

static inline uint64_t shift_right_arithmetic(uint64_t v, unsigned count)
{
    return (int64_t)v < 0 ? ~(~v >> count) : v >> count;
}

enum FpOp { FP_ADD, FP_SUB, FP_MUL, FP_DIV, FP_SQRT, FP_MA, FP_MS, FP_NMA, FP_NMS };

/* ---- register writes -------------------------------------------------------------------- */

/* Sets the low `lanes` lanes of a slot (1: scalar, upper lanes preserved; 4: full); returns
 * the bits that changed. */
__attribute__((always_inline))
static inline uint64_t put_lanes(Cpe *c, int slot, const uint64_t *value, int lanes)
{
    uint64_t *reg = c->regs[slot], changed = 0;
#pragma GCC unroll 4
    for (int i = 0; i < lanes; i++) {
        changed |= reg[i] ^ value[i];
        reg[i] = value[i];
    }
    return changed;
}

/* Writes them, readable from cycle `ready`; a changed value marks the CPE dirty for spin-loop
 * detection. */
static inline void write_lanes(Cpe *c, int slot, const uint64_t *value, int lanes, int64_t ready)
{
    c->dirty |= put_lanes(c, slot, value, lanes) != 0;
    c->ready[slot] = ready;
}

__attribute__((always_inline))
static inline void write_scalar(Cpe *c, const Instr *in, uint64_t value, int64_t ready)
{
    write_lanes(c, in->dest, &value, 1, ready);
}

static inline uint64_t operand_b(const Cpe *c, const Instr *in)
{
    return in->literal ? in->imm : c->regs[in->rb][0];
}

/* ---- integer ---------------------------------------------------------------------------- */

static inline int select_condition(int id, int64_t v)
{
    switch (id) {
    case I_SELEQ: return v == 0;
    case I_SELGE: return v >= 0;
    case I_SELGT: return v > 0;
    case I_SELLE: return v <= 0;
    case I_SELLT: return v < 0;
    case I_SELNE: return v != 0;
    default: NOT_DISPATCHED_HERE(0);
    }
}

/* The 64-bit mask of the bytes selected by bits 0-7 of mask (zap / zapnot). */
static inline uint64_t byte_mask(uint64_t mask)
{
    uint64_t bytes = 0;
    for (int i = 0; i < 8; i++)
        if (mask >> i & 1)
            bytes |= UINT64_C(0xFF) << (8 * i);
    return bytes;
}

/* 1 if the exact signed result is outside int64, else 0. */
static inline uint64_t signed_overflow(__int128 exact)
{
    return exact < INT64_MIN || exact > INT64_MAX;
}

/* The dispatch lists, as X(name) for each I_name, from the ISA table's classes (generated in
 * isa_tables.h): the scalar integer instructions (integer_value), the loads and stores
 * (load_value, store_value) and the branches (branch_condition). */
#define INTEGER_IDS(X) CLS_ALU_IDS(X) CLS_IMUL_IDS(X)
#define LOAD_IDS(X) CLS_LOAD_IDS(X)
#define STORE_IDS(X) CLS_STORE_IDS(X)
#define BRANCH_IDS(X) CLS_BRANCH_IDS(X)

/* "case I_name:", for the lists above. */
#define CASE_OF(name) case I_##name:

/* Scalar integer results (classes alu and imul), inlined in the cycle loop: the most
 * frequent instructions after float arithmetic. The carry family and umulqa also read rc:
 * the incoming carry rc[0], umulqa's addend. `id` is in->id, or a constant that makes this
 * one case (the batches' micro-operations). */
__attribute__((always_inline))
static inline uint64_t integer_value(int id, const Cpe *c, const Instr *in)
{
    uint64_t a = c->regs[in->ra][0], b = operand_b(c, in), rc = c->regs[in->rc][0];
    switch (id) {
    case I_ADDW: return sext32(a + b);
    case I_SUBW: return sext32(a - b);
    case I_S4ADDW: return sext32(a * 4 + b);
    case I_S4SUBW: return sext32(a * 4 - b);
    case I_S8ADDW: return sext32(a * 8 + b);
    case I_S8SUBW: return sext32(a * 8 - b);
    case I_ADDL: return a + b;
    case I_SUBL: return a - b;
    case I_S4ADDL: return a * 4 + b;
    case I_S4SUBL: return a * 4 - b;
    case I_S8ADDL: return a * 8 + b;
    case I_S8SUBL: return a * 8 - b;
    case I_CMPEQ: return a == b;
    case I_CMPLT: return (int64_t)a < (int64_t)b;
    case I_CMPLE: return (int64_t)a <= (int64_t)b;
    case I_CMPULT: return a < b;
    case I_CMPULE: return a <= b;
    case I_AND: return a & b;
    case I_BIC: return a & ~b;
    case I_BIS: return a | b;
    case I_ORNOT: return a | ~b;
    case I_XOR: return a ^ b;
    case I_EQV: return ~(a ^ b);
    case I_SLL: return a << (b & 63);
    case I_SRL: return a >> (b & 63);
    case I_SRA: return shift_right_arithmetic(a, (unsigned)(b & 63));
    case I_MULW: return sext32(a * b);
    case I_MULL: return a * b;
    case I_UMULH: return (uint64_t)(((unsigned __int128)a * b) >> 64);
    case I_ZAP: return a & ~byte_mask(b);
    case I_ZAPNOT: return a & byte_mask(b);
    case I_SEXTB: return (uint64_t)(int64_t)(int8_t)(uint8_t)b;
    case I_SEXTH: return (uint64_t)(int64_t)(int16_t)(uint16_t)b;
    case I_SEXTW: return sext32(b);
    case I_ANDNOT: return a & ~b;
    case I_ADDO_CARRY: return signed_overflow((__int128)(int64_t)a + (int64_t)b);
    case I_UADDO_CARRY: return a + b < a;
    case I_SUBO_CARRY: return signed_overflow((__int128)(int64_t)a - (int64_t)b);
    case I_USUBO_CARRY: return a < b;
    case I_ADDO_TAKE_CARRY:
        return signed_overflow((__int128)(int64_t)a + (int64_t)b + (rc & 1));
    case I_UADDO_TAKE_CARRY:
        return (uint64_t)(((unsigned __int128)a + b + (rc & 1)) >> 64);
    case I_SUBO_TAKE_CARRY:
        return signed_overflow((__int128)(int64_t)a - (int64_t)b - (int64_t)(rc & 1));
    case I_USUBO_TAKE_CARRY: return (unsigned __int128)a < (unsigned __int128)b + (rc & 1);
    case I_UMULQA: return rc + a * b;
    case I_LDI: return b + in->imm;
    case I_LDIH: return b + (in->imm << 16);
    case I_SELEQ: case I_SELGE: case I_SELGT: case I_SELLE: case I_SELLT: case I_SELNE:
        return select_condition(id, (int64_t)a) ? b : c->regs[in->r3][0];
    default: NOT_DISPATCHED_HERE(0);
    }
}

__attribute__((always_inline))
static inline uint64_t integer_result(const Cpe *c, const Instr *in)
{
    return integer_value(in->id, c, in);
}

static inline uint32_t word_lane(const uint64_t *v, int i)
{
    return (uint32_t)(v[i / 2] >> (32 * (i % 2)));
}

static inline void set_word_lane(uint64_t *v, int i, uint32_t w)
{
    int shift = 32 * (i % 2);
    v[i / 2] = (v[i / 2] & ~(UINT64_C(0xFFFFFFFF) << shift)) | (uint64_t)w << shift;
}

static inline void vector_integer(Cpe *c, const Instr *in, int64_t t)
{
    const uint64_t *a = c->regs[in->ra], *b = c->regs[in->rb];
    uint64_t out[SWSIM_LANES];
    if (in->id == I_VADDL || in->id == I_VSUBL) {
        for (int i = 0; i < SWSIM_LANES; i++) {
            uint64_t y = in->literal ? in->imm : b[i];
            switch (in->id) {
            case I_VADDL: out[i] = a[i] + y; break;
            case I_VSUBL: out[i] = a[i] - y; break;
            default: NOT_DISPATCHED_HERE();
            }
        }
    } else {
        uint32_t count = (uint32_t)(in->literal ? in->imm : b[0]) & 31;
        for (int i = 0; i < 2 * SWSIM_LANES; i++) {
            uint32_t x = word_lane(a, i), y = in->literal ? (uint32_t)in->imm : word_lane(b, i);
            uint32_t r;
            switch (in->id) {
            case I_VADDW: r = x + y; break;
            case I_VSUBW: r = x - y; break;
            case I_VSLLW: r = x << count; break;
            case I_VSRLW: r = x >> count; break;
            case I_VSRAW: r = (uint32_t)shift_right_arithmetic(sext32(x), count); break;
            default: NOT_DISPATCHED_HERE();
            }
            set_word_lane(out, i, r);
        }
    }
    write_lanes(c, in->dest, out, SWSIM_LANES, t + in->latency);
}

/* Whole 256-bit register operations: sllow, srlow (shift by the count's low 8 bits) and vlog
 * (bit j of the result = bit 4a_j + 2b_j + c_j of the truth table). */
static inline void vector_whole(Cpe *c, const Instr *in, int64_t t)
{
    const uint64_t *a = c->regs[in->ra], *b = c->regs[in->rb], *r3 = c->regs[in->r3];
    uint64_t out[SWSIM_LANES] = {0};
    unsigned count = in->id == I_VLOG ? 0 : (unsigned)operand_b(c, in) & 255;
    unsigned lanes = count / 64, bits = count % 64;
    switch (in->id) {
    case I_SLLOW:
        for (unsigned i = lanes; i < SWSIM_LANES; i++)
            out[i] = a[i - lanes] << bits
                     | (bits && i > lanes ? a[i - lanes - 1] >> (64 - bits) : 0);
        break;
    case I_SRLOW:
        for (unsigned i = 0; i + lanes < SWSIM_LANES; i++)
            out[i] = a[i + lanes] >> bits
                     | (bits && i + lanes + 1 < SWSIM_LANES ? a[i + lanes + 1] << (64 - bits) : 0);
        break;
    case I_VLOG:
        for (int i = 0; i < SWSIM_LANES; i++)
            for (int index = 0; index < 8; index++)
                if (in->imm >> index & 1)
                    out[i] |= (index & 4 ? a[i] : ~a[i]) & (index & 2 ? b[i] : ~b[i])
                              & (index & 1 ? r3[i] : ~r3[i]);
        break;
    default: NOT_DISPATCHED_HERE();
    }
    write_lanes(c, in->dest, out, SWSIM_LANES, t + in->latency);
}

/* ---- floating point --------------------------------------------------------------------- */

/* One lane of a float operation, as the double it produces (not yet canonical): single
 * precision rounds the operands to binary32, does one binary32 operation and widens the
 * result exactly (a binary32 NaN widens to a NaN, canonical once double_bits applies). */
__attribute__((always_inline))
static inline double fp_lane(enum FpOp op, int single, uint64_t a_bits, uint64_t b_bits,
                             uint64_t c_bits)
{
    if (single) {
        float a = to_single(a_bits), b = to_single(b_bits), c = to_single(c_bits);
        switch (op) {
        case FP_ADD: return a + b;
        case FP_SUB: return a - b;
        case FP_MUL: return a * b;
        case FP_DIV: return a / b;
        case FP_SQRT: return sqrtf(b);
        case FP_MA: return fmaf(a, b, c);
        case FP_MS: return fmaf(a, b, -c);
        case FP_NMA: return fmaf(-a, b, c);
        case FP_NMS: return fmaf(-a, b, -c);
        }
    }
    double a = as_double(a_bits), b = as_double(b_bits), c = as_double(c_bits);
    switch (op) {
    case FP_ADD: return a + b;
    case FP_SUB: return a - b;
    case FP_MUL: return a * b;
    case FP_DIV: return a / b;
    case FP_SQRT: return sqrt(b);
    case FP_MA: return fma(a, b, c);
    case FP_MS: return fma(a, b, -c);
    case FP_NMA: return fma(-a, b, c);
    case FP_NMS: return fma(-a, b, -c);
    }
    return 0.0;   /* not reached: each FpOp has its case (-Wswitch) */
}

/* Four lanes as one vector value: the compiler keeps them in one (AVX) or two (SSE2)
 * registers, and the four fma() of a vector FMA become one vector instruction where the
 * host has FMA. Same per-lane results as fp_lane + double_bits. */
typedef double LanesD __attribute__((vector_size(32), aligned(8)));
typedef int64_t LanesI __attribute__((vector_size(32), aligned(8)));

/* Float arithmetic on 1 (scalar) or 4 lanes; single selects binary32. All lanes are computed
 * before any is written, as a source may be the destination. A divide or sqrt (class fdiv)
 * keeps P0 busy until its result is ready. */
__attribute__((always_inline))
static inline void float_arith(Cpe *c, const Instr *in, enum FpOp op, int single, int lanes,
                                int64_t t)
{
    const uint64_t *a = c->regs[in->ra], *b = c->regs[in->rb], *r3 = c->regs[in->r3];
    uint64_t *dest = c->regs[in->dest];
    c->counters[COUNTER_FLOAT_OPS] += in->flops;
    if (lanes == 1) {
        uint64_t r = double_bits(fp_lane(op, single, a[0], b[0], r3[0]));
        c->dirty |= dest[0] != r;
        dest[0] = r;
    } else {
        LanesD result = {0};   /* every lane is set below (GCC may not see it) */
        for (int i = 0; i < SWSIM_LANES; i++)
            result[i] = fp_lane(op, single, a[i], b[i], r3[i]);
        LanesI bits, old, nan = result != result;
        memcpy(&bits, &result, sizeof bits);
        bits = (bits & ~nan) | (nan & (int64_t)CANONICAL_NAN64);
        if (!c->dirty) {   /* in a loop doing work, an earlier write set it already */
            memcpy(&old, dest, sizeof old);
            LanesI changed = old ^ bits;
            c->dirty = (changed[0] | changed[1] | changed[2] | changed[3]) != 0;
        }
        memcpy(dest, &bits, sizeof bits);
    }
    c->ready[in->dest] = t + in->latency;
    if (op == FP_DIV || op == FP_SQRT)
        c->ready[BUSY_SLOT] = t + in->latency;
}

/* The float arithmetic instructions (classes fp and fdiv): X(id, operation, binary32, lanes)
 * for each, so that a switch on the id can take them with the case it needs. */
#define FLOAT_ARITH_LIST(X) \
    X(I_FADDS, FP_ADD, 1, 1) \
    X(I_FADDD, FP_ADD, 0, 1) \
    X(I_FSUBS, FP_SUB, 1, 1) \
    X(I_FSUBD, FP_SUB, 0, 1) \
    X(I_FMULS, FP_MUL, 1, 1) \
    X(I_FMULD, FP_MUL, 0, 1) \
    X(I_FDIVS, FP_DIV, 1, 1) \
    X(I_FDIVD, FP_DIV, 0, 1) \
    X(I_FSQRTS, FP_SQRT, 1, 1) \
    X(I_FSQRTD, FP_SQRT, 0, 1) \
    X(I_FMAS, FP_MA, 1, 1) \
    X(I_FMAD, FP_MA, 0, 1) \
    X(I_FMSS, FP_MS, 1, 1) \
    X(I_FMSD, FP_MS, 0, 1) \
    X(I_FNMAS, FP_NMA, 1, 1) \
    X(I_FNMAD, FP_NMA, 0, 1) \
    X(I_FNMSS, FP_NMS, 1, 1) \
    X(I_FNMSD, FP_NMS, 0, 1) \
    X(I_VADDS, FP_ADD, 1, SWSIM_LANES) \
    X(I_VADDD, FP_ADD, 0, SWSIM_LANES) \
    X(I_VSUBS, FP_SUB, 1, SWSIM_LANES) \
    X(I_VSUBD, FP_SUB, 0, SWSIM_LANES) \
    X(I_VMULS, FP_MUL, 1, SWSIM_LANES) \
    X(I_VMULD, FP_MUL, 0, SWSIM_LANES) \
    X(I_VDIVS, FP_DIV, 1, SWSIM_LANES) \
    X(I_VDIVD, FP_DIV, 0, SWSIM_LANES) \
    X(I_VSQRTS, FP_SQRT, 1, SWSIM_LANES) \
    X(I_VSQRTD, FP_SQRT, 0, SWSIM_LANES) \
    X(I_VMAS, FP_MA, 1, SWSIM_LANES) \
    X(I_VMAD, FP_MA, 0, SWSIM_LANES) \
    X(I_VMSS, FP_MS, 1, SWSIM_LANES) \
    X(I_VMSD, FP_MS, 0, SWSIM_LANES) \
    X(I_VNMAS, FP_NMA, 1, SWSIM_LANES) \
    X(I_VNMAD, FP_NMA, 0, SWSIM_LANES) \
    X(I_VNMSS, FP_NMS, 1, SWSIM_LANES) \
    X(I_VNMSD, FP_NMS, 0, SWSIM_LANES)

static inline uint64_t float_compare(int id, double a, double b)
{
    int result;
    switch (id) {
    case I_FCMPEQ: result = a == b; break;
    case I_FCMPLE: result = a <= b; break;
    case I_FCMPLT: result = a < b; break;
    case I_FCMPUN: result = a != a || b != b; break;
    default: NOT_DISPATCHED_HERE(0);
    }
    return result ? DOUBLE_TWO : 0;
}

static inline uint64_t double_to_long(double d)
{
    /* NaN or out of range: 2^63, as the integer indefinite */
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        return UINT64_C(1) << 63;
    return (uint64_t)(int64_t)d;
}

#define SIGN_BIT (UINT64_C(1) << 63)
#define SIGN_EXPONENT_BITS UINT64_C(0xFFF0000000000000)

/* Scalar float compare/convert/move (class fmisc). */
static inline uint64_t float_misc_result(const Cpe *c, const Instr *in)
{
    uint64_t a = c->regs[in->ra][0], b = c->regs[in->rb][0];
    switch (in->id) {
    case I_FCVTSD: return double_bits(as_double(b));
    case I_FCVTDS: return double_bits((double)to_single(b));
    case I_FCVTDL: return double_to_long(as_double(b));
    case I_FCVTLD: return double_bits((double)(int64_t)b);
    case I_FCPYS: return (a & SIGN_BIT) | (b & ~SIGN_BIT);
    case I_FCPYSE: return (a & SIGN_EXPONENT_BITS) | (b & ~SIGN_EXPONENT_BITS);
    case I_FCPYSN: return (~a & SIGN_BIT) | (b & ~SIGN_BIT);
    case I_FIMOVS: return sext32(single_bits(to_single(a)));
    case I_IFMOVS: return double_bits((double)single_of_bits((uint32_t)a));
    case I_FIMOVD: case I_IFMOVD: return a;
    case I_FCMPEQ: case I_FCMPLE: case I_FCMPLT: case I_FCMPUN:
        return float_compare(in->id, as_double(a), as_double(b));
    default: NOT_DISPATCHED_HERE(0);
    }
}

/* ---- lanes and shuffles ----------------------------------------------------------------- */

static inline void shuffle_instruction(Cpe *c, const Instr *in, int64_t t)
{
    const uint64_t *a = c->regs[in->ra], *b = c->regs[in->rb];
    uint64_t out[SWSIM_LANES], selector = c->regs[in->r3][0];
    int lanes = SWSIM_LANES;
    switch (in->id) {
    case I_VINSW:
        memcpy(out, b, sizeof out);
        set_word_lane(out, (int)(in->imm & 7), (uint32_t)a[0]);
        break;
    case I_VINSF:
        memcpy(out, b, sizeof out);
        out[in->imm & 3] = a[0];
        break;
    case I_VEXTW:
        out[0] = sext32(word_lane(a, (int)(in->imm & 7)));
        lanes = 1;
        break;
    case I_VEXTF:
        out[0] = a[in->imm & 3];
        lanes = 1;
        break;
    case I_VCPYW:
        for (int i = 0; i < 2 * SWSIM_LANES; i++)
            set_word_lane(out, i, (uint32_t)a[0]);
        break;
    case I_VCPYF:
        for (int i = 0; i < SWSIM_LANES; i++)
            out[i] = a[0];
        break;
    case I_VSHFF:
        for (int i = 0; i < SWSIM_LANES; i++) {
            if (in->literal) {   /* lanes 0-1 from ra, 2-3 from rb, 2 selector bits each */
                out[i] = (i < 2 ? a : b)[in->imm >> (2 * i) & 3];
                continue;
            }
            unsigned s = (unsigned)(selector >> (4 * i)) & 7;
            out[i] = s < 4 ? a[s] : b[s - 4];
        }
        break;
    case I_VFMOV:
        memcpy(out, a, sizeof out);
        break;
    case I_VSHFW:
        for (int i = 0; i < 2 * SWSIM_LANES; i++) {
            int s = (int)(selector >> (4 * i)) & 15;
            set_word_lane(out, i, s < 8 ? word_lane(a, s) : word_lane(b, s - 8));
        }
        break;
    default: NOT_DISPATCHED_HERE();
    }
    write_lanes(c, in->dest, out, lanes, t + in->latency);
}

/* ---- loads and stores ------------------------------------------------------------------- */

static inline uint64_t load_bits(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)bytes);
    return v;
}

static inline uint64_t widen_single(uint64_t bits)
{
    return double_bits((double)single_of_bits((uint32_t)bits));
}

/* The value a load (or load-and-broadcast) puts in its destination; returns the lanes it
 * writes (1: scalar). */
static inline int load_value(int id, const uint8_t *p, uint64_t *out)
{
    switch (id) {
    case I_LDBU: out[0] = load_bits(p, 1); return 1;
    case I_LDHU: out[0] = load_bits(p, 2); return 1;
    case I_LDW: out[0] = sext32(load_bits(p, 4)); return 1;
    case I_LDL: out[0] = load_bits(p, 8); return 1;
    case I_FLDS: out[0] = widen_single(load_bits(p, 4)); return 1;
    case I_FLDD: out[0] = double_bits(as_double(load_bits(p, 8))); return 1;
    case I_VLDS:
        for (int i = 0; i < SWSIM_LANES; i++)
            out[i] = widen_single(load_bits(p + 4 * i, 4));
        return SWSIM_LANES;
    case I_LDSE:
        out[0] = out[1] = out[2] = out[3] = widen_single(load_bits(p, 4));
        return SWSIM_LANES;
    case I_LDDE: case I_LDDER: case I_LDDEC:
        out[0] = out[1] = out[2] = out[3] = double_bits(as_double(load_bits(p, 8)));
        return SWSIM_LANES;
    case I_VLDD: case I_VLDR: case I_VLDC:
        memcpy(out, p, 32);
        return SWSIM_LANES;
    default: NOT_DISPATCHED_HERE(0);
    }
}

/* memcpy of an access's bytes, each size a fixed-size copy rather than a call: 1, 2, 4, 8, 16
 * or 32 (the sizes of isa/table.py's loads and stores; anything else copies 32). */
__attribute__((always_inline))
static inline void copy_access(void *to, const void *from, int size)
{
    switch (size) {
    case 1: memcpy(to, from, 1); break;
    case 2: memcpy(to, from, 2); break;
    case 4: memcpy(to, from, 4); break;
    case 8: memcpy(to, from, 8); break;
    case 16: memcpy(to, from, 16); break;
    default: memcpy(to, from, 32); break;
    }
}

static inline void store_value(int id, const uint64_t *v, uint8_t *p, int size)
{
    uint32_t singles[SWSIM_LANES];
    switch (id) {
    case I_FSTS: case I_VSTS:
        for (int i = 0; i < size / 4; i++)
            singles[i] = single_bits(to_single(v[i]));
        memcpy(p, singles, (size_t)size);
        break;
    case I_STB: case I_STH: case I_STW: case I_STL: case I_FSTD: case I_VSTD:
        copy_access(p, v, size);   /* the low bytes, unchanged */
        break;
    default: NOT_DISPATCHED_HERE();
    }
}

#endif
