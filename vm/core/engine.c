/* The cycle loop of a core group (docs/timing.md): events, issue, counters, stops, trace
 * spans, and skipping of idle time and of spin loops at a fixed point. */
#include <stdlib.h>
#include <string.h>
#include "core.h"
#include "semantics.h"

const char *swsim_reason_name(int32_t reason)
{
    return reason >= 0 && reason < SWSIM_NUM_REASONS ? REASON_NAMES[reason] : "";
}

/* ---- trace spans -------------------------------------------------------------------------- */

void emit_span(Sim *s, int cpe, int kind, int64_t start, int64_t end)
{
    SwResult *r = s->result;
    if (end <= start || s->error)
        return;
    if (r->num_spans == s->spans_capacity) {
        int64_t capacity = s->spans_capacity ? 2 * s->spans_capacity : 1024;
        SwSpan *grown = realloc(r->spans, (size_t)capacity * sizeof *grown);
        if (!grown) {
            s->error = SWSIM_ERROR_MEMORY;
            return;
        }
        r->spans = grown;
        s->spans_capacity = capacity;
    }
    r->spans[r->num_spans++] = (SwSpan){cpe, kind, start, end};
}

/* Extends the CPE's open span with cycle t's state, or closes it and opens a new one. */
static void trace_cycle(Sim *s, const Cpe *c, int kind, int64_t t)
{
    CpeCold *cold = &s->cold[c->id];
    if (kind == cold->span_kind)
        return;
    if (cold->span_kind >= 0)
        emit_span(s, c->id, cold->span_kind, cold->span_start, t);
    cold->span_kind = kind;
    cold->span_start = t;
}

static void trace_close(Sim *s, const Cpe *c, int64_t end)
{
    CpeCold *cold = &s->cold[c->id];
    if (cold->span_kind >= 0)
        emit_span(s, c->id, cold->span_kind, cold->span_start, end);
    cold->span_kind = -1;
}

/* ---- addresses ---------------------------------------------------------------------------- */

static inline int in_main_memory(const Sim *s, uint64_t addr)
{
    return addr >= s->cfg.mem_base && addr - s->cfg.mem_base < s->cfg.mem_bytes;
}

/* The decoded word at pc, or the F_BAD_PC word if pc is outside the code or misaligned (the
 * low bits of the offset rotate to the top, making a huge index). */
static inline const Instr *word_at(const Sim *s, uint64_t pc)
{
    uint64_t offset = pc - s->cfg.code_base, index = offset >> 2 | offset << 62;
    return &s->code[index < (uint64_t)s->code_words ? index : (uint64_t)s->code_words];
}

static inline uint64_t effective_address(const Cpe *c, const Instr *in)
{
    return c->regs[in->rb][0] + in->imm;
}

/* Host pointer of an access of `size` bytes at addr, after the checks of docs/timing.md
 * (alignment, then for load-and-broadcast main memory, then range); NULL on a fault. */
static uint8_t *resolve(const Sim *s, const Cpe *c, uint64_t addr, int size, int ldm_only,
                        Fault *fault)
{
    fault->a = addr;
    if (addr & (uint64_t)(size - 1)) {
        fault->kind = STOP_MISALIGNED;
        fault->b = size;
        return NULL;
    }
    int global = in_main_memory(s, addr);
    if (global && ldm_only) {
        fault->kind = STOP_BCAST_MEMORY;
        return NULL;
    }
    if (addr < s->ldm_bytes && (uint64_t)size <= s->ldm_bytes - addr)
        return c->ldm + addr;
    if (global && (uint64_t)size <= s->cfg.mem_bytes - (addr - s->cfg.mem_base))
        return s->job->mem + (addr - s->cfg.mem_base);
    fault->kind = STOP_ACCESS;
    return NULL;
}

/* A main-memory access through the CG's memory interface; returns its start cycle. */
static int64_t start_global_access(Sim *s, Cpe *c, int is_load, int64_t t)
{
    int64_t start = t > s->interface_free ? t : s->interface_free;
    s->interface_free = start + s->cfg.gld_occupancy;
    c->global_free = start + (is_load ? s->cfg.gld_latency : s->cfg.gst_latency);
    s->cg[is_load ? CG_GLD_COUNT : CG_GST_COUNT]++;
    c->dirty = 1;
    return start;
}

/* ---- execution ---------------------------------------------------------------------------- */

/* Notes an LDM range a load read, for the spin-loop fixed points (note_ldm_write). */
static inline void record_read(Cpe *c, uint64_t addr, uint64_t size)
{
    for (int k = 0; k < c->num_reads; k++)
        if (c->read_start[k] == addr && c->read_end[k] == addr + size)
            return;
    if (c->num_reads == MAX_WATCHED_READS) {
        c->reads_overflow = 1;
        return;
    }
    c->read_start[c->num_reads] = addr;
    c->read_end[c->num_reads++] = addr + size;
}

/* The host pointer of an aligned access inside LDM, the common case, else NULL (then resolve
 * decides: main memory or a fault). LDM never overlaps main memory (mem_base >= the largest
 * LDM, vm/config.py), so this is resolve's answer for these addresses. */
static inline uint8_t *ldm_access(const Sim *s, const Cpe *c, uint64_t addr, int size)
{
    /* an aligned access that starts in LDM ends in it: accesses are of 1-32 bytes, a power of
     * two, and ldm_bytes is a multiple of 32 (vm/config.py; SWSIM_CONFIG_IN_RANGE checks it) */
    if ((addr & (uint64_t)(size - 1)) | (addr >= s->ldm_bytes))
        return NULL;
    return c->ldm + addr;
}

/* The load `in` (its id, or the constant `id`) of the bytes at p into its destination,
 * readable from cycle `ready`; returns the bits that changed (put_lanes). */
__attribute__((always_inline))
static inline uint64_t load_changes(Cpe *c, int id, const Instr *in, const uint8_t *p,
                                    int64_t ready)
{
    uint64_t value[SWSIM_LANES];
    int lanes = load_value(id, p, value);
    uint64_t changed = put_lanes(c, in->dest, value, lanes);
    c->ready[in->dest] = ready;
    return changed;
}

static inline void load_into(Cpe *c, const Instr *in, const uint8_t *p, int64_t ready)
{
    uint64_t value[SWSIM_LANES];
    int lanes = load_value(in->id, p, value);
    write_lanes(c, in->dest, value, lanes, ready);
}

static inline void store_from(Cpe *c, const Instr *in, uint8_t *p)
{
    store_value(in->id, c->regs[in->ra], p, in->size);
    c->dirty = 1;
}

__attribute__((always_inline))
static inline int execute_load(Sim *s, Cpe *c, const Instr *in, int64_t t, Fault *fault)
{
    uint64_t addr = effective_address(c, in);
    int64_t ready = t + in->latency;
    const uint8_t *p = ldm_access(s, c, addr, in->size);
    if (p) {
        record_read(c, addr, in->size);
    } else {
        p = resolve(s, c, addr, in->size, 0, fault);
        if (!p)
            return EXEC_FAULT;
        ready = start_global_access(s, c, 1, t) + s->cfg.gld_latency;
    }
    load_into(c, in, p, ready);
    return EXEC_NEXT;
}

__attribute__((always_inline))
static inline int execute_store(Sim *s, Cpe *c, const Instr *in, int64_t t, Fault *fault)
{
    uint64_t addr = effective_address(c, in);
    uint8_t *p = ldm_access(s, c, addr, in->size);
    if (!p) {
        p = resolve(s, c, addr, in->size, 0, fault);
        if (!p)
            return EXEC_FAULT;
        start_global_access(s, c, 0, t);
    }
    store_from(c, in, p);
    return EXEC_NEXT;
}

static int execute_bcast_load(Sim *s, Cpe *c, const Instr *in, int64_t t, Fault *fault)
{
    const uint8_t *p = resolve(s, c, effective_address(c, in), in->size, 1, fault);
    if (!p)
        return EXEC_FAULT;
    int column = in->id == I_VLDC || in->id == I_LDDEC;
    uint64_t targets, value[SWSIM_LANES];
    if (c->put_fault[column][8]) {
        put_targets(s, c, column, 8, &targets, fault);
        return EXEC_FAULT;
    }
    targets = c->put_mask[column][8];
    load_value(in->id, p, value);
    write_lanes(c, in->dest, value, SWSIM_LANES, t + in->latency);
    comm_send(s, c, column, targets, value, t);
    c->dirty = 1;
    return EXEC_NEXT;
}

/* A put whose target n (immediate or rb's lane 0) the caller checked: n <= 8, no fault. */
static inline void send_put(Sim *s, Cpe *c, const Instr *in, int64_t t)
{
    const int column = in->id == I_PUTC;
    comm_send(s, c, column, c->put_mask[column][operand_b(c, in)], c->regs[in->ra], t);
}

static int execute_communication(Sim *s, Cpe *c, const Instr *in, int64_t t, Fault *fault)
{
    int column = in->id == I_PUTC || in->id == I_GETC || in->id == I_SYNC;
    uint64_t targets;
    c->dirty = 1;
    switch (in->id) {
    case I_PUTR: case I_PUTC: {
        uint64_t n = operand_b(c, in);   /* the immediate or rb's lane 0 */
        if (n > 8 || c->put_fault[column][n]) {
            put_targets(s, c, column, n, &targets, fault);
            return EXEC_FAULT;
        }
        send_put(s, c, in, t);
        return EXEC_NEXT;
    }
    case I_SYNR: case I_SYNC:
        return barrier_arrive(s, c, column, operand_b(c, in), t, fault) ? EXEC_FAULT
                                                                         : EXEC_NEXT;
    case I_DMA:
        return dma_request(s, c, c->regs[in->ra], c->regs[in->rb][0], c->regs[in->rc][0], t,
                           fault) ? EXEC_FAULT : EXEC_NEXT;
    default: NOT_DISPATCHED_HERE(EXEC_NEXT);
    }
}

/* Whether branch `id` is taken on ra's lane 0 `v` (`id` a constant: one case). */
__attribute__((always_inline))
static inline int branch_condition(int id, uint64_t v)
{
    double d = as_double(v);
    switch (id) {
    case I_BR: case I_BSR: return 1;
    case I_BEQ: return v == 0;
    case I_BNE: return v != 0;
    case I_BLT: return (int64_t)v < 0;
    case I_BLE: return (int64_t)v <= 0;
    case I_BGT: return (int64_t)v > 0;
    case I_BGE: return (int64_t)v >= 0;
    case I_BLBC: return !(v & 1);
    case I_BLBS: return (int)(v & 1);
    case I_FBEQ: return d == 0.0;
    case I_FBNE: return !(d == 0.0);
    case I_FBLT: return d < 0.0;
    case I_FBLE: return d <= 0.0;
    case I_FBGT: return d > 0.0;
    case I_FBGE: return d >= 0.0;
    default: NOT_DISPATCHED_HERE(0);
    }
}

static int branch_taken(const Cpe *c, const Instr *in)
{
    return branch_condition(in->id, c->regs[in->ra][0]);
}

static int execute_control(Sim *s, Cpe *c, const Instr *in, int64_t t)
{
    uint64_t target;
    if (in->cls == CLS_JUMP) {
        target = c->regs[in->rb][0] & ~UINT64_C(3);   /* read before the link is written */
    } else {
        if (!branch_taken(c, in))
            return EXEC_NEXT;
        target = c->pc + 4 + in->imm * 4;
    }
    write_scalar(c, in, c->pc + 4, t + in->latency);
    c->pc = target;
    c->at = word_at(s, target);
    return target == s->cfg.code_base - 4 ? EXEC_HALT : EXEC_JUMP;
}

static int execute_misc(Sim *s, Cpe *c, const Instr *in, int64_t t, Fault *fault)
{
    switch (in->id) {
    case I_RCSR:
        if (in->imm == ISA_CSR_FLOAT_OPS) {   /* marks dirty only if it changed */
            write_scalar(c, in, c->counters[COUNTER_FLOAT_OPS], t + in->latency);
            return EXEC_NEXT;
        }
        if (in->imm == ISA_CSR_CONSOLE) {   /* the host serves a console call */
            write_scalar(c, in, 0, t + s->cfg.console_call_cycles);
            return EXEC_NEXT;
        }
        if (in->imm != ISA_CSR_CYCLE_COUNTER) {   /* the other modelled register */
            *fault = (Fault){STOP_CSR, in->imm, 0};
            return EXEC_FAULT;
        }
        __attribute__((fallthrough));   /* the cycle counter, as rtc */
    case I_RTC:
        c->dirty = 1;
        write_scalar(c, in, (uint64_t)t, t + in->latency);
        return EXEC_NEXT;
    case I_RCID:
        write_scalar(c, in, (uint64_t)c->id, t + in->latency);
        return EXEC_NEXT;
    case I_HALT:
        c->pc += 4;
        return EXEC_HALT;
    case I_MEMB:   /* memory is sequentially consistent here */
        return EXEC_NEXT;
    default: NOT_DISPATCHED_HERE(EXEC_NEXT);
    }
}

/* Applies an instruction at issue. EXEC_NEXT leaves the pc to the caller; the others set it.
 * Every instruction has its case here: the switch is over enum InstrId without a default, so
 * the build (-Werror=switch) fails if an instruction of the ISA table has none. */
__attribute__((always_inline))
static inline int execute(Sim *s, Cpe *c, const Instr *in, int64_t t, Fault *fault)
{
    switch ((enum InstrId)in->id) {
#define FLOAT_ARITH_CASE(id, op, single, lanes) \
    case id: float_arith(c, in, op, single, lanes, t); return EXEC_NEXT;
    FLOAT_ARITH_LIST(FLOAT_ARITH_CASE)   /* classes fp and fdiv, the most frequent */
#undef FLOAT_ARITH_CASE
    INTEGER_IDS(CASE_OF)
        write_scalar(c, in, integer_result(c, in), t + in->latency);
        return EXEC_NEXT;
    case I_VADDW: case I_VSUBW: case I_VSLLW: case I_VSRLW: case I_VSRAW: case I_VADDL:
    case I_VSUBL:
        vector_integer(c, in, t);
        return EXEC_NEXT;
    case I_SLLOW: case I_SRLOW: case I_VLOG:
        vector_whole(c, in, t);
        return EXEC_NEXT;
    case I_FIMOVS: case I_FIMOVD: case I_FCMPEQ: case I_FCMPLE: case I_FCMPLT: case I_FCMPUN:
    case I_FCVTSD: case I_FCVTDS: case I_FCVTDL: case I_FCVTLD: case I_FCPYS: case I_FCPYSE:
    case I_FCPYSN: case I_IFMOVS: case I_IFMOVD:
        write_scalar(c, in, float_misc_result(c, in), t + in->latency);
        return EXEC_NEXT;
    case I_VINSW: case I_VINSF: case I_VEXTW: case I_VEXTF: case I_VCPYW: case I_VCPYF:
    case I_VSHFF: case I_VSHFW: case I_VFMOV:
        shuffle_instruction(c, in, t);
        return EXEC_NEXT;
    LOAD_IDS(CASE_OF)
        return execute_load(s, c, in, t, fault);
    STORE_IDS(CASE_OF)
        return execute_store(s, c, in, t, fault);
    case I_VLDR: case I_VLDC: case I_LDDER: case I_LDDEC:
        return execute_bcast_load(s, c, in, t, fault);
    case I_GETR: case I_GETC:
        comm_receive(s, &c, 1, in->id == I_GETC, in->dest, t + in->latency);
        return EXEC_NEXT;
    case I_PUTR: case I_PUTC: case I_SYNR: case I_SYNC: case I_DMA:
        return execute_communication(s, c, in, t, fault);
    BRANCH_IDS(CASE_OF)
    case I_CALL: case I_RET: case I_JMP:
        return execute_control(s, c, in, t);
    case I_MEMB: case I_RTC: case I_RCID: case I_HALT: case I_RCSR:
        return execute_misc(s, c, in, t, fault);
    case I_INVALID:   /* never issued: the fetch of an undecodable word faults first */
        break;
    }
    *fault = (Fault){STOP_UNDECODABLE, in->word, 0};
    return EXEC_FAULT;
}

/* ---- issue rules -------------------------------------------------------------------------- */

/* The structural check (rule 4 of docs/timing.md "Issue rules"), or NO_STALL. */
static inline int structural_reason(const Sim *s, const Cpe *c, const Instr *in, int64_t t)
{
    if (in->cls == CLS_GET)   /* the most frequent: a test rather than the jump */
        return comm_queue_empty(s, c, in->id == I_GETC) ? REASON_GET_EMPTY : NO_STALL;
    switch (in->cls) {
    case CLS_PUT: case CLS_BCAST_LOAD:
        /* no transfer is blocked while the FIFO's head is not due (TIME_NEVER: empty) */
        return s->head_due[c->id] > t || comm_send_blocked(s, c, t) < s->cfg.rc_send_depth
               ? NO_STALL : REASON_PUT_FULL;
    case CLS_DMA:
        return c->dma_waiting >= s->cfg.dma_channel_depth ? REASON_DMA_FULL : NO_STALL;
    case CLS_LOAD: case CLS_STORE:
        return c->global_free > t && in_main_memory(s, effective_address(c, in))
               ? REASON_GLOBAL : NO_STALL;
    default:
        return NO_STALL;
    }
}

/* The first failing ready-time check (raw, waw, divide) at t, or NO_STALL. */
static inline int timing_reason(const int64_t *ready, const Instr *in, int64_t t)
{
    for (int k = 0; k < in->num_sources; k++)
        if (ready[in->sources[k]] > t)
            return REASON_RAW;
    if (ready[in->waw_slot] > t)
        return REASON_WAW;
    if (in->pipes == PIPE_P0 && ready[BUSY_SLOT] > t)
        return REASON_DIVIDE;
    return NO_STALL;
}

/* The first failing readiness check of docs/timing.md "Issue rules", or NO_STALL. */
static int stall_reason_in_full(const Sim *s, const Cpe *c, const Instr *in, int64_t t)
{
    int reason = timing_reason(c->ready, in, t);
    return reason != NO_STALL ? reason : structural_reason(s, c, in, t);
}

/* The same, with a branch-free test of the ready times first: in the common case every
 * checked slot is ready (ready <= t, so every t - ready is >= 0) and there is no class
 * check. Ready times are in [0, TIME_NEVER], so t - ready cannot overflow. */
__attribute__((always_inline))
static inline int class_reason(const Sim *s, const Cpe *c, const Instr *in, int64_t t)
{
    return in->flags & F_STRUCTURAL ? structural_reason(s, c, in, t) : NO_STALL;
}

__attribute__((always_inline))
static inline int stall_reason(const Sim *s, const Cpe *c, const Instr *in, int64_t t)
{
    const int64_t *ready = c->ready;
    const uint8_t *k = in->checks;
    int64_t late = (t - ready[k[0]]) | (t - ready[k[1]]) | (t - ready[k[2]]);
    if (in->flags & F_MORE_CHECKS)   /* most instructions check at most 3 slots */
        late |= (t - ready[k[3]]) | (t - ready[k[4]]);
    if (__builtin_expect(late < 0, 0))
        return stall_reason_in_full(s, c, in, t);
    return class_reason(s, c, in, t);
}

/* Whether the leader and the word after it both pass their ready-time checks, tested at once
 * on the union of their slots (F_GROUP_CHECKS). */
__attribute__((always_inline))
static inline int group_ready(const Cpe *c, const Instr *leader, int64_t t)
{
    const int64_t *ready = c->ready;
    const uint8_t *k = leader->group_checks;
    return ((t - ready[k[0]]) | (t - ready[k[1]]) | (t - ready[k[2]]) | (t - ready[k[3]])) >= 0;
}

/* The cycle > t at which the timed stall (raw, waw, divide, global, barrier release) of a
 * leader `in` that is not ready at t may end, or TIME_NEVER if only another unit's event can
 * end it. The checked slots are those of the raw, waw and divide checks. */
__attribute__((always_inline))
static inline int64_t wake_time(const Sim *s, const Cpe *c, const Instr *in, int64_t t)
{
    if (c->wait_until > t)
        return c->wait_until;
    int64_t next = TIME_NEVER;
    const int checks = in->flags & F_MORE_CHECKS ? NUM_CHECKS : 3;
#pragma GCC unroll 5
    for (int k = 0; k < checks; k++) {   /* branch-free: the slots' order is arbitrary */
        int64_t ready = c->ready[in->checks[k]];
        int64_t later = ready > t ? ready : TIME_NEVER;
        next = later < next ? later : next;
    }
    if ((in->cls == CLS_LOAD || in->cls == CLS_STORE) && c->global_free > t
        && c->global_free < next && in_main_memory(s, effective_address(c, in)))
        next = c->global_free;
    return next;
}

/* The same for a CPE that did not issue at t, as found when it stalled: its sleep_until is
 * the wake time computed then, which nothing but its own issue can change (phase 1 events
 * that wake it set sleep_until before it issues again), or it waits at a barrier. */
static inline int64_t stalled_until(const Cpe *c, int64_t t)
{
    return c->wait_until > t ? c->wait_until : c->sleep_until;
}

static inline int can_pair(const Instr *leader, const Instr *follower)
{
    if ((follower->reads_mask | follower->dest_mask) & leader->dest_mask)
        return 0;
    if (leader->pipes == PIPE_P0)
        return (follower->pipes & PIPE_P1) != 0;
    if (leader->pipes == PIPE_P1)
        return (follower->pipes & PIPE_P0) != 0;
    return 1;
}

static inline int leader_pipe(const Instr *leader, const Instr *follower)
{
    if (leader->pipes == PIPE_P0)
        return 0;
    if (leader->pipes == PIPE_P1)
        return 1;
    return follower && follower->pipes == PIPE_P1 ? 0 : 1;
}

/* Charges a cycle: one counter for each pipe, in either order. active_cycles is not counted
 * here: it is the CPE's halt cycle + 1, or the kernel cycles if it never halted (finish_run). */
static inline void charge(Cpe *c, int counter, int other_counter, int state)
{
    c->counters[counter]++;
    c->counters[other_counter]++;
    c->charged[0] = counter;
    c->charged[1] = other_counter;
    c->last_state = state;
}

static void record_fault(Sim *s, const Cpe *c, const Fault *fault, int64_t t)
{
    SwResult *r = s->result;
    r->stop_kind = fault->kind;
    r->stop_cpe = c->id;
    r->stop_pc = c->pc;
    r->stop_cycle = t;
    r->stop_a = fault->a;
    r->stop_b = fault->b;
}

/* ---- spin-loop fixed points ----------------------------------------------------------------
 * At a taken backward branch the CPE marks its loop head. If two consecutive iterations ran
 * without a side effect or a changed register value, and the timing state relative to the
 * mark is the same, the CPE is at a fixed point: until an event changes its LDM, every
 * further iteration repeats the same counters (period_delta) in `period` cycles. */

static void relative_timing(const Cpe *c, int64_t t, int64_t *out)
{
    int64_t now = t + 1;   /* the next issue is at t + 1: earlier times are all equivalent */
    for (int r = 0; r < ISA_ZERO_REG; r++)
        out[r] = c->ready[r] > now ? c->ready[r] - now : 0;
    out[ISA_ZERO_REG] = c->ready[BUSY_SLOT] > now ? c->ready[BUSY_SLOT] - now : 0;
    out[ISA_ZERO_REG + 1] = c->global_free > now ? c->global_free - now : 0;
}

static void mark_loop_head(Sim *s, Cpe *c, int64_t t)
{
    if (c->dirty || c->mark_pc != c->pc) {
        c->mark_pc = c->pc;
        c->armed = c->confirmed = c->dirty = 0;
        c->mark_cycle = t;
        c->num_reads = c->reads_overflow = 0;
        return;
    }
    CpeCold *cold = &s->cold[c->id];
    int64_t timing[NUM_SLOTS + 2];
    relative_timing(c, t, timing);
    c->confirmed = c->armed
                   && memcmp(timing, cold->snap_ready, (ISA_ZERO_REG + 2) * sizeof *timing) == 0;
    if (c->confirmed) {
        c->window_start = c->mark_cycle;
        c->period = t - c->mark_cycle;
        for (int k = 0; k < SWSIM_NUM_CPE_COUNTERS; k++)
            cold->period_delta[k] = c->counters[k] - cold->snap_counters[k];
    }
    memcpy(cold->snap_ready, timing, sizeof timing);
    memcpy(cold->snap_counters, c->counters, sizeof c->counters);
    c->armed = 1;
    c->mark_cycle = t;
}

static inline int at_fixed_point(const Cpe *c)
{
    return c->confirmed && !c->dirty && c->ldm_changed <= c->window_start;
}

/* Advances a CPE at a fixed point after cycle t by `cycles`, a multiple of its period (or takes
 * it back, if negative, from an advance after cycle t - cycles: the times it moved are those
 * after t). */
static void repeat_period(CpeCold *cold, Cpe *c, int64_t t, int64_t cycles)
{
    uint64_t periods = (uint64_t)(cycles / c->period);   /* mod 2^64: also a step back */
    for (int k = 0; k < SWSIM_NUM_CPE_COUNTERS; k++) {
        c->counters[k] += periods * cold->period_delta[k];
        cold->snap_counters[k] += periods * cold->period_delta[k];
    }
    for (int r = 0; r < NUM_SLOTS; r++)   /* BUSY_SLOT included */
        if (c->ready[r] > t)
            c->ready[r] += cycles;
    if (c->global_free > t)
        c->global_free += cycles;
    c->mark_cycle += cycles;
    c->window_start += cycles;
}

/* ---- running ahead -------------------------------------------------------------------------
 * A CPE at a spin fixed point (a loop that waits for a DMA reply, say) repeats its loop until
 * an event writes LDM bytes the loop loads: nothing else changes what it does (its words touch
 * only its own registers and LDM, without side effects), and nothing outside it reads what it
 * changes (a spin loop stores nothing). So at its loop head it runs ahead by whole periods
 * (repeat_period) up to the pause horizon or the cycle limit while the other CPEs are stepped;
 * it is then `ahead` like a batch, and the cycle loop passes over it. An event that writes
 * bytes its loop loads (dma.c, before_ldm_write) or a fault of another CPE in a cycle it ran
 * ahead takes it back (return_from_ahead): by whole periods, then issue() steps it through the
 * rest up to that cycle, with the LDM bytes its loop saw. */

static void run_ahead(Sim *s, Cpe *c, int64_t t)
{
    int64_t bound = s->horizon < s->cfg.max_cycles ? s->horizon : s->cfg.max_cycles;
    int64_t cycles = (bound - 1 - t) / c->period * c->period;
    if (cycles <= 0)
        return;
    CpeCold *cold = &s->cold[c->id];
    cold->ahead_from = t;
    cold->ahead_cycles = cycles;
    cold->saved_wait = c->wait_until;
    cold->saved_ahead = c->ahead_until;
    repeat_period(cold, c, t, cycles);
    c->ahead_until = c->wait_until = t + cycles + 1;
    s->result->ahead_cycles += cycles;
}

/* ---- batches -------------------------------------------------------------------------------
 * A CPE whose leader starts a private block (core.h) and whose registers are ready when the
 * block's schedule needs them runs the schedule's cycles in one visit, and the further
 * iterations of a block that loops: every check of those cycles would find what the schedule
 * assumed (the ready times it reads are either the block's own writes or inputs ready in
 * time; its loads and stores are checked to stay in LDM as they come), and nothing outside
 * the CPE reads or writes what it touches before the batch bound: no other unit reads its
 * registers, and the DMA engine cannot reach its LDM before the bound (batch_bound). The CPE
 * is then `ahead` (ahead_until > t) and the cycle loop passes over it until ahead_until. The
 * only thing that can make it wrong is a fault of another CPE at a cycle the batch already
 * simulated: the run then stops in that cycle, so the batch is taken back to it (rewind_batch)
 * from what it saved (BatchUndo) and run again up to there. */

/* The first cycle a batch started in cycle t (from t + 1) may not simulate: the pause horizon,
 * the cycle limit, the next step of the DMA engine that may change something, and the first
 * cycle a request issued at t or later can reach an LDM (its start-up latency, at least one
 * cycle after it), if the code has a dma instruction at all. */
static int64_t batch_bound(Sim *s, int64_t t)
{
    if (s->bound_cycle != t) {
        int64_t bound = s->horizon < s->cfg.max_cycles ? s->horizon : s->cfg.max_cycles;
        int64_t dma = dma_next_event(s, t);
        int64_t new_request = !s->code_has_dma ? TIME_NEVER
                              : t + (s->cfg.dma_latency > 1 ? s->cfg.dma_latency : 1);
        bound = dma < bound ? dma : bound;
        s->batch_bound = new_request < bound ? new_request : bound;
        s->bound_cycle = t;
    }
    return s->batch_bound;
}

/* Whether the schedule of block b holds for an entry at cycle t. */
static inline int block_inputs_ready(const Cpe *c, const Block *b, int64_t t)
{
    for (int k = 0; k < b->num_needs; k++) {
        int64_t ready = c->ready[b->need_slot[k]] - t;
        if (b->need_ready[k] <= b->need_offset[k] ? ready > b->need_offset[k]
                                                   : ready != b->need_ready[k])
            return 0;
    }
    return 1;
}

/* A batch's load `in` (its id, or the constant `id`) at p in LDM, as execute_load; returns the
 * bits of its destination that changed. */
__attribute__((always_inline))
static inline uint64_t batch_load(Cpe *c, int id, const Instr *in, const uint8_t *p, int64_t t)
{
    record_read(c, (uint64_t)(p - c->ldm), in->size);
    return load_changes(c, id, in, p, t + in->latency);
}

/* A batch's store at p in LDM, as execute_store, noting the bytes before for rewind_batch. */
__attribute__((always_inline))
static inline void batch_store(Sim *s, Cpe *c, int id, const Instr *in, uint8_t *p)
{
    BatchUndo *u = &s->undo[c->id];
    u->store_addr[u->num_stores] = (uint64_t)(p - c->ldm);
    u->store_size[u->num_stores] = in->size;
    copy_access(u->store_old[u->num_stores++], p, in->size);
    store_value(id, c->regs[in->ra], p, in->size);
    c->dirty = 1;
}

/* Executes a word of a batch as execute() would, but for the pc (the caller advances it);
 * `p`: where its access is in LDM, if it is a load or store (the batch checked that it is). */
__attribute__((always_inline))
static inline void batch_execute(Sim *s, Cpe *c, const Instr *in, uint8_t *p, int64_t t)
{
    if (!p)
        execute(s, c, in, t, &s->fault);   /* EXEC_NEXT: a private word */
    else if (in->cls == CLS_STORE)
        batch_store(s, c, in->id, in, p);
    else
        c->dirty |= batch_load(c, in->id, in, p, t) != 0;
}

/* How a whole iteration of a batch ended (batch_iteration), else the index of the step before
 * which it stopped (a check of that step failed; nothing of the step was done). */
enum { ITERATION_LOOPED = -1, ITERATION_EXITED = -2, ITERATION_STOPPED = -3 };

/* Micro-operation kinds (Uop.kind) besides the ids of the words: a load or store that leads
 * its step and is the step's only access has its check too (U_CHECKED_name, for I_name). */
enum {
    U_ADDRESS = NUM_INSTRUCTIONS,   /* a load's or store's access (issued or only examined)
                                       must be in LDM, else the iteration stops before the step */
    U_DIRTY,       /* before the step of a branch that follows its leader: the iteration must
                      have changed something (a branch alone in its step tests this itself) */
#define CHECKED_KIND(name) U_CHECKED_##name,
    LOAD_IDS(CHECKED_KIND) STORE_IDS(CHECKED_KIND)
#undef CHECKED_KIND
    U_END
};
_Static_assert(U_END <= 256, "Uop.kind is a byte");

/* The kind of load or store `id` with its check. */
static uint8_t checked_kind(int id)
{
    switch (id) {
#define CHECKED_OF(name) case I_##name: return U_CHECKED_##name;
    LOAD_IDS(CHECKED_OF) STORE_IDS(CHECKED_OF)
#undef CHECKED_OF
    default: NOT_DISPATCHED_HERE(U_END);   /* schedule_uops asks only for loads and stores */
    }
}

/* The branch back at the end of an iteration (its id `id`): the iteration must have changed
 * something, else it stops before the branch's step `step`. */
__attribute__((always_inline))
static inline int batch_loop_branch(Cpe *c, int id, const Instr *in, uint64_t changed,
                                    int64_t t, int step)
{
    if (!c->dirty && !changed)
        return step;
    c->dirty = 1;
    if (!branch_condition(id, c->regs[in->ra][0]))
        return ITERATION_EXITED;
    write_scalar(c, in, c->pc + 4 * (uint64_t)(in - c->at) + 4, t + in->latency);
    return ITERATION_LOOPED;
}

/* Runs one whole iteration of loop b entered at cycle `entry` by its micro-operations (core.h
 * Uop), as the steps would but for the counters of its cycles (the caller adds the block's
 * deltas) and the pc, which stays at the block's first word (the caller sets it if the iteration
 * stopped or exited the loop). A word's micro-operation is its id: each case of the switch is
 * the semantics of one instruction (integer_value, load_value, store_value, branch_condition
 * with a constant id); the other private words take execute(). */
__attribute__((always_inline))
static inline int batch_iteration(Sim *s, Cpe *c, const Block *b, const Uop *uops,
                                  int64_t entry)
{
    uint8_t *at[2] = {NULL, NULL};   /* the accesses of the step's words, checked */
    uint64_t changed = 0;            /* bits of registers the words changed (c->dirty) */
    uint8_t *p;
    for (const Uop *op = uops;; op++) {
        const Instr *in = op->in;
        const int64_t t = entry + op->offset;
        switch (op->kind) {
#define INTEGER_UOP(name) \
        case I_##name: { \
            uint64_t value = integer_value(I_##name, c, in); \
            changed |= put_lanes(c, in->dest, &value, 1); \
            c->ready[in->dest] = t + in->latency; \
            break; \
        }
        INTEGER_IDS(INTEGER_UOP)
#undef INTEGER_UOP
/* the access of the word, checked */
#define CHECKED(access) \
            if (!((access) = ldm_access(s, c, effective_address(c, in), in->size))) \
                goto stop;
#define LOAD_UOP(name) \
        case U_CHECKED_##name: CHECKED(p) changed |= batch_load(c, I_##name, in, p, t); break; \
        case I_##name: changed |= batch_load(c, I_##name, in, at[op->word], t); break;
        LOAD_IDS(LOAD_UOP)
#undef LOAD_UOP
#define STORE_UOP(name) \
        case U_CHECKED_##name: CHECKED(p) batch_store(s, c, I_##name, in, p); break; \
        case I_##name: batch_store(s, c, I_##name, in, at[op->word]); break;
        STORE_IDS(STORE_UOP)
#undef STORE_UOP
#define BRANCH_UOP(name) \
        case I_##name: return batch_loop_branch(c, I_##name, in, changed, t, op->step);
        BRANCH_IDS(BRANCH_UOP)
#undef BRANCH_UOP
        case U_ADDRESS:
            CHECKED(at[op->word])
            break;
#undef CHECKED
        case U_DIRTY:
            if (!c->dirty && !changed)
                goto stop;
            break;
        default:
            execute(s, c, in, t, &s->fault);   /* EXEC_NEXT: a private word */
            break;
        }
        continue;
    stop:
        c->dirty |= changed != 0;
        return op->step;
    }
}

/* The last cycle a batch charged: the issue cycle of step `last` if `issued`, else one of its
 * stall cycles (none if `last` is NULL). */
static void batch_charged(Cpe *c, const Step *last, int issued)
{
    if (last) {
        const uint8_t *counters = issued ? last->counter : last->stall_counter;
        c->charged[0] = counters[0];
        c->charged[1] = counters[1];
        c->last_state = issued ? SWSIM_STATE_RUNNING : last->stall_reason;
    }
}

/* Runs the steps of block b entered at cycle `entry` from step `first_step` on, up to cycle
 * `end` at most, stopping before a step whose check fails; `last`, `issued`: the last cycle
 * charged before (batch_charged). Returns the first cycle it did not simulate. It never issues a
 * loop's branch: replay_batch runs every whole iteration, so an iteration left to the steps
 * ends at `end` or stops at a failing check before its branch (the step of the branch stops
 * here). */
static int64_t replay_steps(Sim *s, Cpe *c, const Block *b, int64_t entry, int first_step,
                            int64_t end, const Step *last, int issued)
{
    const Step *steps = &s->steps[b->first_step];
    int64_t reached = entry + b->cycles;   /* a block that does not loop, run through */
    for (int j = first_step; j < b->num_steps; j++) {
        const Step *st = &steps[j];
        int64_t issue_cycle = entry + st->issue_offset, first = issue_cycle - st->stall;
        if (issue_cycle >= end) {   /* the end is in this step's cycles */
            if (first < end) {
                c->counters[st->stall_counter[0]] += (uint64_t)(end - first);
                c->counters[st->stall_counter[1]] += (uint64_t)(end - first);
                last = st;
                issued = 0;
            }
            reached = end;
            break;
        }
        if (st->stall) {
            c->counters[st->stall_counter[0]] += st->stall;
            c->counters[st->stall_counter[1]] += st->stall;
            last = st;
            issued = 0;
        }
        if (!st->words)
            continue;
        const Instr *leader = st->leader, *next = leader + 1;
        uint8_t *leader_at = NULL, *next_at = NULL;   /* LDM accesses (checked) */
        if (st->flags
            && ((st->flags & STEP_BRANCH)
                || ((st->flags & STEP_CHECK_LEADER)
                    && !(leader_at = ldm_access(s, c, effective_address(c, leader), leader->size)))
                || ((st->flags & STEP_CHECK_NEXT)
                    && !(next_at = ldm_access(s, c, effective_address(c, next), next->size))))) {
            reached = issue_cycle;
            break;
        }
        batch_execute(s, c, leader, leader_at, issue_cycle);
        if (st->words == 2)
            batch_execute(s, c, next, next_at, issue_cycle);
        c->pc += 4 * (uint64_t)st->words;
        c->at += st->words;
        c->counters[st->counter[0]]++;
        c->counters[st->counter[1]]++;
        last = st;
        issued = 1;
    }
    batch_charged(c, last, issued);
    return reached;
}

/* Runs a batch of CPE c at the entry of block b at cycle `start`, up to cycle `end` at most,
 * and if `whole`, only iterations after the first that end by then; returns the first cycle
 * it did not simulate (the next cycle issue() decides). It stops before an issue cycle whose
 * access would leave LDM, and before the branch of an iteration that changed nothing (its
 * loop-head mark would then be a spin-loop snapshot, in CpeCold). A loop's whole iterations
 * run by micro-operations (batch_iteration); the rest step by step (replay_steps). */
static int64_t replay_batch(Sim *s, Cpe *c, const Block *b, int64_t start, int64_t end,
                            int whole)
{
    if (!b->loops)
        return replay_steps(s, c, b, start, 0, end, NULL, 0);
    const Step *steps = &s->steps[b->first_step];
    const Uop *uops = &s->uops[b->first_uop];
    const BatchUndo *u = &s->undo[c->id];
    const Instr *head = c->at;
    int64_t entry = start;
    /* the iterations that end by `end` and whose stores the undo record holds (the first
     * one's always: run_batch, rewind_batch) */
    int64_t room = (end - entry) / b->cycles;
    if (b->stores && (MAX_BATCH_STORES - u->num_stores) / b->stores < room)
        room = (MAX_BATCH_STORES - u->num_stores) / b->stores;
    uint64_t whole_iterations = 0;
    int outcome = ITERATION_LOOPED;
    for (; room > 0; room--) {
        outcome = batch_iteration(s, c, b, uops, entry);
        if (outcome != ITERATION_LOOPED)
            break;
        whole_iterations++;
        entry += b->cycles;
        mark_loop_head(s, c, entry - 1);   /* as issue() after a backward jump: dirty, so cheap */
        if (!b->steady && !block_inputs_ready(c, b, entry)) {
            outcome = ITERATION_STOPPED;   /* at the loop's entry */
            break;
        }
    }
    if (outcome == ITERATION_LOOPED && whole_iterations) {
        /* the next iteration: if `whole`, only if it ends by `end`, else if it starts before */
        int64_t reach = whole ? entry + b->cycles : entry + 1;
        if (reach > end || u->num_stores + b->stores > MAX_BATCH_STORES)
            outcome = ITERATION_STOPPED;
    }
    whole_iterations += outcome == ITERATION_EXITED;
    for (int k = 0; k < b->num_deltas; k++)
        c->counters[b->delta_counter[k]] += whole_iterations * b->delta[k];
    const Step *last = whole_iterations ? &steps[b->num_steps - 1] : NULL;
    if (outcome == ITERATION_EXITED) {   /* the branch fell through */
        const Instr *after = uops[b->num_uops - 1].in + 1;
        c->pc += 4 * (uint64_t)(after - head);
        c->at = after;
        batch_charged(c, last, 1);
        return entry + b->cycles;
    }
    if (outcome == ITERATION_STOPPED) {
        batch_charged(c, last, 1);
        return entry;
    }
    int first_step = 0;   /* the iteration at `entry`: the end cuts it (ITERATION_LOOPED), */
    int issued = 1;
    if (outcome >= 0) {   /* ... or it stopped before step `outcome`: the steps before ran */
        for (int j = 0; j < outcome; j++) {
            const Step *st = &steps[j];
            c->counters[st->stall_counter[0]] += st->stall;
            c->counters[st->stall_counter[1]] += st->stall;
            c->counters[st->counter[0]] += st->words != 0;
            c->counters[st->counter[1]] += st->words != 0;
            if (st->stall || st->words) {
                last = st;
                issued = st->words != 0;
            }
        }
        c->pc += 4 * (uint64_t)(steps[outcome].leader - head);
        c->at = steps[outcome].leader;
        first_step = outcome;   /* the steps take it from there, and stop again */
    }
    return replay_steps(s, c, b, entry, first_step, end, last, issued);
}

/* Whether every fetch of the block's words hits in c's L1 (always, without the cache model):
 * then a batch of it fetches nothing, as issue() would not (hits change no cache state). */
static int block_lines_present(const Sim *s, const Cpe *c, const Instr *head, const Block *b)
{
    if (!s->cfg.icache)
        return 1;
    const Step *last = &s->steps[b->first_step + b->num_steps - 1];
    int64_t first, unused, last_line;
    icache_window(s, head, &first, &unused);
    icache_window(s, last->leader, &unused, &last_line);
    return icache_present(s, c, first, last_line);
}

/* In cycle t, CPE c at `head`, a block's first word: a batch from cycle `start` (t + 1 after a
 * jump to head in cycle t, or t when a batch of the block's loop stopped at its entry) if the
 * block's inputs are ready for it; returns whether it ran. A later CPE's fault in cycle t
 * takes it back to cycle t + 1 (rewind_batch). A batch that stops at its loop's entry leaves
 * wait_until one cycle later, so that issue() resumes it there. */
__attribute__((noinline))
static int run_batch(Sim *s, Cpe *c, const Instr *head, int64_t t, int64_t start)
{
    const Block *b = &s->blocks[head->block];
    const int64_t end = batch_bound(s, t);
    if (end - start < 2 || !block_inputs_ready(c, b, start) || !block_lines_present(s, c, head, b))
        return 0;
    BatchUndo *u = &s->undo[c->id];
    u->block = b;
#define SAVE(field) memcpy(&u->field, &c->field, sizeof u->field);
    BATCH_CHANGES(SAVE)
#undef SAVE
    for (int k = 0; k < b->num_writes; k++) {
        memcpy(u->regs[k], c->regs[b->write_slot[k]], sizeof u->regs[k]);
        u->ready[k] = c->ready[b->write_slot[k]];
    }
    u->num_stores = 0;
    c->batch_start = start;
    c->ahead_until = c->wait_until = replay_batch(s, c, b, start, end, 1);
    s->result->batch_cycles += c->ahead_until - start;
    if (c->ahead_until > start && c->at == head && c->last_state == SWSIM_STATE_RUNNING)
        c->wait_until++;   /* after a whole iteration (not in the stall of a partial one) */
    return c->ahead_until > start;
}

#define SAME_SIZE(field) \
    _Static_assert(sizeof ((Cpe *)0)->field == sizeof ((BatchUndo *)0)->field, #field);
BATCH_CHANGES(SAME_SIZE)
#undef SAME_SIZE

/* Takes a CPE's batch back to its state before cycle `keep` (the batch ran past it). */
static void rewind_batch(Sim *s, Cpe *c, int64_t keep)
{
    BatchUndo *u = &s->undo[c->id];
    const Block *b = u->block;
    for (int k = u->num_stores; k-- > 0;)
        memcpy(c->ldm + u->store_addr[k], u->store_old[k], u->store_size[k]);
    for (int k = 0; k < b->num_writes; k++) {
        memcpy(c->regs[b->write_slot[k]], u->regs[k], sizeof u->regs[k]);
        c->ready[b->write_slot[k]] = u->ready[k];
    }
#define RESTORE(field) memcpy(&c->field, &u->field, sizeof c->field);
    BATCH_CHANGES(RESTORE)
#undef RESTORE
    u->num_stores = 0;
    s->result->batch_cycles -= c->ahead_until - keep;
    c->ahead_until = c->wait_until = replay_batch(s, c, b, c->batch_start, keep, 0);
}

/* A fault of the CPE at position `faulted` of the run order stops the run in cycle t: the CPEs
 * before it have simulated cycle t, those after it only the cycles before. */
static void rewind_batches(Sim *s, Cpe *const *cpe, int num_running, int faulted, int64_t t)
{
    for (int k = 0; k < num_running; k++) {
        int64_t keep = k < faulted ? t + 1 : t;
        if (cpe[k]->ahead_until <= keep)
            continue;
        if (s->cold[cpe[k]->id].ahead_cycles)
            return_from_ahead(s, cpe[k], keep);
        else
            rewind_batch(s, cpe[k], keep);
    }
}

/* ---- one CPE, one cycle ------------------------------------------------------------------- */

enum { ISSUED_NOTHING = 0, ISSUED = 1, FAULTED = -1 };

/* Issues the leader and the follower the checks chose (or none: the other pipe idles for
 * follower_reason) and charges the cycle. */
__attribute__((always_inline))
static inline int perform(Sim *s, Cpe *c, const Instr *leader, const Instr *follower,
                          int follower_reason, int64_t t)
{
    Fault *fault = &s->fault;
    uint64_t pc = c->pc;
    int outcome = execute(s, c, leader, t, fault);
    if (outcome == EXEC_NEXT) {
        c->pc += 4;
        c->at++;   /* after the last word: the F_BAD_PC word */
        if (follower) {
            outcome = execute(s, c, follower, t, fault);
            if (outcome == EXEC_NEXT) {
                c->pc += 4;
                c->at++;
            }
        }
    }
    if (outcome == EXEC_FAULT) {
        record_fault(s, c, fault, t);
        return FAULTED;
    }
    if (follower) {
        charge(c, COUNTER_VALID(0), COUNTER_VALID(1), SWSIM_STATE_RUNNING);
    } else {
        int pipe = leader->pipe_alone;   /* the other pipe idles for the follower's reason */
        charge(c, COUNTER_VALID(pipe), COUNTER_IDLE(pipe ^ 1, follower_reason),
               SWSIM_STATE_RUNNING);
    }
    if (outcome == EXEC_HALT) {
        c->running = 0;
        s->cold[c->id].halt_cycle = t;
        s->halted_this_cycle = 1;
    } else if (outcome == EXEC_JUMP && c->pc <= pc + 4) {
        mark_loop_head(s, c, t);
        /* a batch of the loop from the next cycle, unless the loop changed nothing last time
         * (a spin loop: skip_ahead's case) */
        if (__builtin_expect((c->at->flags & F_BLOCK) && !c->armed, 0))
            run_batch(s, c, c->at, t, t + 1);
        else if (s->may_run_ahead && at_fixed_point(c))
            run_ahead(s, c, t);
    }
    return ISSUED;
}

/* The word issued beside a leader that issues, given the reason of the word after it (if
 * considered), or NULL with the other pipe's idle reason in *idle_reason. */
static inline const Instr *choose_follower(const Instr *leader, int next_reason, int *idle_reason)
{
    *idle_reason = REASON_PAIRING;
    if (!(leader->flags & F_CONSIDER_NEXT))
        return NULL;
    if (next_reason != NO_STALL) {
        *idle_reason = next_reason;
        return NULL;
    }
    return leader->flags & F_PAIRS_NEXT ? leader + 1 : NULL;
}

__attribute__((always_inline))
static inline int issue(Sim *s, Cpe *c, int64_t t)
{
    if (c->wait_until > t) {
        if (c->ahead_until > t)   /* a batch simulated cycle t (and charged it) */
            return ISSUED_NOTHING;
        if (c->ahead_until < t) {
            charge(c, COUNTER_IDLE(0, REASON_BARRIER), COUNTER_IDLE(1, REASON_BARRIER),
                   REASON_BARRIER);
            return ISSUED_NOTHING;
        }
        c->wait_until = t;   /* a batch stopped at its loop's entry: the next one from here */
        if (run_batch(s, c, c->at, t, t))
            return ISSUED_NOTHING;
    }
    if (c->sleep_until > t) {
        charge(c, COUNTER_IDLE(0, c->last_state), COUNTER_IDLE(1, c->last_state), c->last_state);
        return ISSUED_NOTHING;
    }
    Fault *fault = &s->fault;
    const Instr *leader = c->at;
    if (__builtin_expect(s->cfg.icache, 0) && !(leader->flags & (F_BAD_PC | F_INVALID))
        && !icache_hits(s, c, leader)) {
        const int64_t ready = icache_fetch(s, c, leader, t);
        if (ready > t) {   /* the fetch stalls (a miss is a change: no spin fixed point) */
            charge(c, COUNTER_IDLE(0, REASON_ICACHE), COUNTER_IDLE(1, REASON_ICACHE),
                   REASON_ICACHE);
            c->sleep_until = ready;
            c->dirty = 1;
            return ISSUED_NOTHING;
        }
    }
    /* the leader's reason, then that of the word after it (docs/timing.md "Issue rules");
     * pairing and pipes precomputed per word. A word with F_GROUP_CHECKS is a valid one. */
    const Instr *next = leader + 1;
    int reason, next_reason = NO_STALL;
    if ((leader->flags & F_GROUP_CHECKS) && group_ready(c, leader, t)) {
        reason = class_reason(s, c, leader, t);
        if (reason == NO_STALL)
            next_reason = class_reason(s, c, next, t);
    } else {
        if (leader->flags & (F_BAD_PC | F_INVALID)) {
            *fault = leader->flags & F_BAD_PC ? (Fault){STOP_PC, c->pc, 0}
                                              : (Fault){STOP_UNDECODABLE, leader->word, 0};
            record_fault(s, c, fault, t);
            return FAULTED;
        }
        reason = stall_reason(s, c, leader, t);
        if (reason == NO_STALL && (leader->flags & F_CONSIDER_NEXT))
            next_reason = stall_reason(s, c, next, t);
    }
    if (reason != NO_STALL) {
        charge(c, COUNTER_IDLE(0, reason), COUNTER_IDLE(1, reason), reason);
        c->sleep_until = wake_time(s, c, leader, t);
        return ISSUED_NOTHING;
    }
    int follower_reason;
    const Instr *follower = choose_follower(leader, next_reason, &follower_reason);
    return perform(s, c, leader, follower, follower_reason, t);
}

void return_from_ahead(Sim *s, Cpe *c, int64_t keep)
{
    CpeCold *cold = &s->cold[c->id];
    const int64_t from = cold->ahead_from, kept = (keep - 1 - from) / c->period * c->period;
    const int64_t back = cold->ahead_cycles - kept;
    repeat_period(cold, c, from + cold->ahead_cycles, -back);
    c->wait_until = cold->saved_wait;
    c->ahead_until = cold->saved_ahead;
    cold->ahead_cycles = 0;
    s->result->ahead_cycles -= back;
    const int may_run_ahead = s->may_run_ahead;
    s->may_run_ahead = 0;   /* the last cycles of its loop, stepped: it stays there */
    for (int64_t t = from + kept + 1; t < keep; t++)
        if (issue(s, c, t) == FAULTED)   /* its loop ran these words before without a fault */
            s->error = SWSIM_ERROR_INTERNAL;
    s->may_run_ahead = may_run_ahead;
}

/* ---- in step ----------------------------------------------------------------------------- */

/* The CPEs of an SPMD kernel often run the same code in the same cycles: their issue state
 * (same_issue_state: pc, ready times, waits) is the same and only their data differ. While
 * every running CPE has the same issue state ("in step"), a cycle's decision is made once,
 * from the first CPE's ready times, and each CPE's class checks (a get finds data, a put finds
 * room) and data-dependent checks (an access stays in LDM, a put reaches CPEs it may) must come
 * out alike; the words then issue for all of them, each instruction dispatched once. That is
 * what issue() gives each CPE in run order: the words issued this way (not barriers, DMA,
 * load-and-broadcast, halt or rcsr, nor accesses to main memory) change only their CPE's
 * registers, LDM, transfer FIFO and receive queues, and shared counters by addition or
 * minimum, so their order among the CPEs does not matter. Checks that differ or another word
 * hand the cycle to issue() for each CPE, with nothing changed; a cycle that leaves the CPEs
 * apart (a branch or jump that differs, a loop head's marks or batches, a stall whose wake
 * time depends on an address, a halt) ends the step after it. They are in step again once a
 * test at a loop head of the first CPE finds them so (with a back-off while it does not). */

enum { NOT_ALIKE = -2, MAX_STEP_BACKOFF = 64 };

/* Whether two times look the same to every decision from cycle `now` on: the issue rules
 * only ask whether a ready time, wait or slot is later than the cycle, so all times up to
 * `now` are alike. */
static inline int alike_from(int64_t a, int64_t b, int64_t now)
{
    return a == b || (a <= now && b <= now);
}

/* What issue() reads of a CPE besides its data and its units, as its decisions from cycle
 * `now` on see it. (A batch's end is compared one cycle earlier: ahead_until == now is a
 * batch that stopped at its loop's entry.) */
static int same_issue_state(const Cpe *a, const Cpe *b, int64_t now)
{
    if (a->at != b->at || a->pc != b->pc || a->last_state != b->last_state
        || a->armed != b->armed || !alike_from(a->sleep_until, b->sleep_until, now)
        || !alike_from(a->wait_until, b->wait_until, now)
        || !alike_from(a->ahead_until, b->ahead_until, now - 1)
        || !alike_from(a->global_free, b->global_free, now))
        return 0;
    for (int r = 0; r < NUM_SLOTS; r++)
        if (!alike_from(a->ready[r], b->ready[r], now))
            return 0;
    return 1;
}

/* Before cycle `now`, at a loop head of the first running CPE (or at the start): whether
 * every running CPE is in step, or else at least MIN_GROUP of them (a group: the others issue
 * one by one). DMA replies reach an SPMD kernel's CPEs in different cycles, and those that
 * came back together stay alike while the others trail them. */
enum { MIN_GROUP = 8, MAX_CLASSES = 8 };

static void test_in_step(Sim *s, Cpe *const *cpe, int n, int64_t now)
{
    if (!s->cfg.skip)   /* stepping every CPE in every cycle: the reference the tests use */
        return;
    /* the classes of equal issue state among the first MAX_CLASSES found */
    const Cpe *first[MAX_CLASSES];
    int size[MAX_CLASSES] = {0}, classes = 0, largest = 0;
    int8_t class_of[SWSIM_MAX_CPES];
    for (int k = 0; k < n; k++) {
        int c = 0;
        while (c < classes && !same_issue_state(cpe[k], first[c], now))
            c++;
        if (c == classes) {
            if (classes == MAX_CLASSES) {
                class_of[k] = -1;
                continue;
            }
            first[classes] = cpe[k];
            size[classes++] = 0;
        }
        class_of[k] = (int8_t)c;
        if (++size[c] > size[largest])
            largest = c;
    }
    if (size[largest] == n || size[largest] >= MIN_GROUP) {
        s->in_step = 1;
        s->grouped = size[largest] < n;
        s->woke = 0;
        s->step_mask = 0;
        s->group_size = 0;
        for (int k = 0; k < n; k++)
            if (class_of[k] == largest) {
                s->step_mask |= UINT64_C(1) << cpe[k]->id;
                s->group[s->group_size] = cpe[k];
                s->group_position[s->group_size++] = k;
            }
        s->step_backoff = 1;
    } else if (s->step_backoff < MAX_STEP_BACKOFF) {
        s->step_backoff *= 2;
    }
    s->step_retry = s->step_backoff;
}

static inline int issues_in_step(const Instr *in)
{
    return in->cls != CLS_SYNC && in->cls != CLS_DMA && in->cls != CLS_BCAST_LOAD
           && in->id != I_HALT && in->id != I_RCSR;
}

static inline int is_control(const Instr *in)
{
    return in->cls == CLS_BRANCH || in->cls == CLS_JUMP;
}

/* The class check of `in` (F_STRUCTURAL) for every CPE in step, or NOT_ALIKE if it differs. */
static inline int alike_class_reason(const Sim *s, Cpe *const *cpe, int n, const Instr *in,
                                     int64_t t)
{
    if (!(in->flags & F_STRUCTURAL))
        return NO_STALL;
    if (in->cls == CLS_GET) {
        uint64_t nonempty = s->nonempty_queues[in->id == I_GETC] & s->step_mask;
        return nonempty == s->step_mask ? NO_STALL : nonempty ? NOT_ALIKE : REASON_GET_EMPTY;
    }
    int reason = class_reason(s, cpe[0], in, t);
    for (int k = 1; k < n; k++)
        if (class_reason(s, cpe[k], in, t) != reason)
            return NOT_ALIKE;
    return reason;
}

/* Whether the checks of execute() that depend on each CPE's data pass for `in`: a load or
 * store stays in LDM (main memory goes through the shared interface, in run order), a put
 * reaches CPEs it may. */
static inline int accesses_alike(const Sim *s, Cpe *const *cpe, int n, const Instr *in)
{
    if (in->cls == CLS_LOAD || in->cls == CLS_STORE) {
        for (int k = 0; k < n; k++)
            if (!ldm_access(s, cpe[k], effective_address(cpe[k], in), in->size))
                return 0;
    } else if (in->cls == CLS_PUT) {
        for (int k = 0; k < n; k++) {
            uint64_t target = operand_b(cpe[k], in);
            if (target > 8 || cpe[k]->put_fault[in->id == I_PUTC][target])
                return 0;
        }
    }
    return 1;
}

/* Executes a word that cannot fault or change the pc for each CPE in step: one dispatch for
 * the float and integer instructions (classes fp, fdiv, alu and imul: FLOAT_ARITH_LIST and
 * INTEGER_IDS, checked by tests/test_core_generated.py), gets and puts; execute() for each
 * CPE for the others. */
__attribute__((always_inline))
static inline void execute_for_all(Sim *s, Cpe *const *cpe, int n, const Instr *word, int64_t t)
{
    /* a copy the CPEs' stores cannot alias: its fields stay in registers across the loops */
    const Instr copy = *word, *in = &copy;
    switch (in->cls) {
    case CLS_FP: case CLS_FDIV:
        switch (in->id) {
#define FOR_ALL_FLOAT_CASE(id, op, single, lanes) \
        case id: \
            for (int k = 0; k < n; k++) \
                float_arith(cpe[k], in, op, single, lanes, t); \
            return;
        FLOAT_ARITH_LIST(FOR_ALL_FLOAT_CASE)
#undef FOR_ALL_FLOAT_CASE
        default: NOT_DISPATCHED_HERE();
        }
    case CLS_ALU: case CLS_IMUL:
        switch (in->id) {
#define FOR_ALL_INTEGER_CASE(name) \
        case I_##name: \
            for (int k = 0; k < n; k++) \
                write_scalar(cpe[k], in, integer_value(I_##name, cpe[k], in), t + in->latency); \
            return;
        INTEGER_IDS(FOR_ALL_INTEGER_CASE)
#undef FOR_ALL_INTEGER_CASE
        default: NOT_DISPATCHED_HERE();
        }
    case CLS_GET:
        comm_receive(s, cpe, n, in->id == I_GETC, in->dest, t + in->latency);
        return;
    case CLS_PUT:   /* accesses_alike checked the targets */
        for (int k = 0; k < n; k++) {
            cpe[k]->dirty = 1;
            send_put(s, cpe[k], in, t);
        }
        return;
    default:
        for (int k = 0; k < n; k++)
            execute(s, cpe[k], in, t, &s->fault);
        return;
    }
}

/* Whether a branch (class branch) goes the same way on every CPE in step; *taken: which. */
static inline int branches_alike(const Sim *s, Cpe *const *cpe, int n, const Instr *in,
                                 int *taken)
{
    *taken = branch_taken(cpe[0], in);
    for (int k = 1; k < n; k++)
        if (branch_taken(cpe[k], in) != *taken)
            return 0;
    return 1;
}

/* After cycle t, whose words may have left the CPEs apart (a jump, a loop head's marks, a
 * batch, a halt): they stay in step only if they came to the same state. */
static void leave_step_unless_alike(Sim *s, Cpe *const *cpe, int n, int64_t t)
{
    const Cpe *first = cpe[0];
    for (int k = 0; k < n; k++) {
        const Cpe *c = cpe[k];
        if (!c->running || c->at != first->at || c->armed != first->armed
            || !alike_from(c->wait_until, first->wait_until, t + 1)
            || !alike_from(c->ahead_until, first->ahead_until, t)) {
            s->in_step = 0;
            return;
        }
    }
}

/* Cycle t for the n running CPEs in step: ISSUED or ISSUED_NOTHING, FAULTED (with the CPE's
 * position of the run order in *faulted), or NOT_ALIKE with nothing changed. `dry`: only
 * whether it would be NOT_ALIKE (else IN_STEP_ALIKE), nothing changed; a cycle that is not
 * NOT_ALIKE issues no word that can fault. */
enum { IN_STEP_ALIKE = 3 };

__attribute__((always_inline))
static inline int issue_in_step(Sim *s, Cpe *const *cpe, int n, int64_t t, int *faulted,
                                const int dry)
{
    Cpe *first = cpe[0];
    if (s->woke) {   /* a unit's event set some sleep_until or wait_until */
        s->woke = 0;
        for (int k = 1; k < n; k++)
            if (!alike_from(cpe[k]->sleep_until, first->sleep_until, t)
                || !alike_from(cpe[k]->wait_until, first->wait_until, t))
                return NOT_ALIKE;
    }
    if (first->wait_until > t)
        return NOT_ALIKE;
    if (first->sleep_until > t) {
        if (dry)
            return IN_STEP_ALIKE;
        int state = first->last_state;
        for (int k = 0; k < n; k++)
            charge(cpe[k], COUNTER_IDLE(0, state), COUNTER_IDLE(1, state), state);
        return ISSUED_NOTHING;
    }
    const Instr *leader = first->at, *next = leader + 1;
    if (leader->flags & (F_BAD_PC | F_INVALID))
        return NOT_ALIKE;
    if (s->cfg.icache)   /* a fetch that misses is issue()'s */
        for (int k = 0; k < n; k++)
            if (!icache_hits(s, cpe[k], leader))
                return NOT_ALIKE;
    int grouped = (leader->flags & F_GROUP_CHECKS) && group_ready(first, leader, t);
    int reason = grouped ? NO_STALL : timing_reason(first->ready, leader, t);
    if (reason == NO_STALL)
        reason = alike_class_reason(s, cpe, n, leader, t);
    if (reason == NOT_ALIKE)
        return NOT_ALIKE;
    if (reason != NO_STALL) {
        if (dry)
            return IN_STEP_ALIKE;
        for (int k = 0; k < n; k++) {
            charge(cpe[k], COUNTER_IDLE(0, reason), COUNTER_IDLE(1, reason), reason);
            cpe[k]->sleep_until = wake_time(s, cpe[k], leader, t);
            /* a load's or store's wake time depends on its address (main memory or LDM) */
            if (!alike_from(cpe[k]->sleep_until, first->sleep_until, t + 1))
                s->in_step = 0;
        }
        return ISSUED_NOTHING;
    }
    int next_reason = NO_STALL;
    if (leader->flags & F_CONSIDER_NEXT) {
        next_reason = grouped ? NO_STALL : timing_reason(first->ready, next, t);
        if (next_reason == NO_STALL)
            next_reason = alike_class_reason(s, cpe, n, next, t);
        if (next_reason == NOT_ALIKE)
            return NOT_ALIKE;
    }
    int follower_reason;
    const Instr *follower = choose_follower(leader, next_reason, &follower_reason);
    if (!issues_in_step(leader) || !accesses_alike(s, cpe, n, leader)
        || (follower && (!issues_in_step(follower) || !accesses_alike(s, cpe, n, follower))))
        return NOT_ALIKE;
    if (dry)
        return IN_STEP_ALIKE;
    const Instr *branch = is_control(leader) ? leader
                          : follower && is_control(follower) ? follower : NULL;
    const uint64_t pc = first->pc, from = pc + (branch == follower ? 4 : 0);
    const uint64_t target = branch ? from + 4 + branch->imm * 4 : 0;
    int taken = 0;
    if (branch && (branch->cls != CLS_BRANCH || !branches_alike(s, cpe, n, branch, &taken)
                   || (taken && target == s->cfg.code_base - 4))) {
        /* a jump, a branch taken by some only, or a halt: each CPE as issue() would; they
         * stay in step if they come to the same state */
        for (int k = 0; k < n; k++) {
            if (perform(s, cpe[k], leader, follower, follower_reason, t) == FAULTED) {
                *faulted = k;
                return FAULTED;
            }
        }
        leave_step_unless_alike(s, cpe, n, t);
        return ISSUED;
    }
    if (branch != leader)
        execute_for_all(s, cpe, n, leader, t);
    if (follower && follower != branch)
        execute_for_all(s, cpe, n, follower, t);
    const int words = follower ? 2 : 1, pipe = leader->pipe_alone;
    const int counter = follower ? COUNTER_VALID(0) : COUNTER_VALID(pipe);
    const int other = follower ? COUNTER_VALID(1) : COUNTER_IDLE(pipe ^ 1, follower_reason);
    if (!taken) {
        for (int k = 0; k < n; k++) {
            Cpe *c = cpe[k];
            c->pc += 4 * (uint64_t)words;
            c->at += words;
            charge(c, counter, other, SWSIM_STATE_RUNNING);
        }
        return ISSUED;
    }
    /* a branch taken by every CPE: as execute_control() and perform() for each */
    const Instr *to = word_at(s, target);
    for (int k = 0; k < n; k++) {
        Cpe *c = cpe[k];
        write_scalar(c, branch, from + 4, t + branch->latency);
        c->pc = target;
        c->at = to;
        charge(c, counter, other, SWSIM_STATE_RUNNING);
    }
    if (target <= pc + 4) {   /* a loop head */
        for (int k = 0; k < n; k++) {
            Cpe *c = cpe[k];
            mark_loop_head(s, c, t);
            if (__builtin_expect((to->flags & F_BLOCK) && !c->armed, 0))
                run_batch(s, c, to, t, t + 1);
        }
        leave_step_unless_alike(s, cpe, n, t);
    }
    return ISSUED;
}

/* Cycle t for the n running CPEs with a group in step (s->group): the others one by one by
 * issue(), then the group at once, which gives what issue() in run order gives, since the
 * words issued in step touch only their own CPE and what adds up (above). The group is first
 * checked dry: if its cycle is NOT_ALIKE, nothing has changed and the caller issues every CPE
 * (returned NOT_ALIKE); else none of its words can fault, so when another CPE faults the
 * group's CPEs before it in run order issue (by issue(): the stop's state), the later ones
 * not. Returns ISSUED or ISSUED_NOTHING, or FAULTED with the position in *faulted. */
__attribute__((always_inline))   /* into run_cycles' clones: the semantics need their ISA */
static inline int issue_group(Sim *s, Cpe *const *cpe, int n, int64_t t, int *faulted)
{
    Cpe *const *group = s->group;
    const int size = s->group_size;
    if (issue_in_step(s, group, size, t, faulted, 1) == NOT_ALIKE)
        return NOT_ALIKE;
    int issued_any = 0;
    for (int k = 0, next = 0; k < n; k++) {
        if (next < size && s->group_position[next] == k) {
            next++;
            continue;
        }
        int issued = issue(s, cpe[k], t);
        if (issued == FAULTED) {
            for (int g = 0; g < next; g++)
                if (issue(s, group[g], t) == FAULTED)
                    s->error = SWSIM_ERROR_INTERNAL;   /* the dry check said none can */
            *faulted = k;
            return FAULTED;
        }
        issued_any |= issued;
    }
    int issued = issue_in_step(s, group, size, t, faulted, 0);
    if (issued == FAULTED || issued == NOT_ALIKE)   /* neither can follow the dry check */
        s->error = SWSIM_ERROR_INTERNAL;
    s->result->group_cycles += size;
    return issued_any | issued;
}

/* ---- skipping ----------------------------------------------------------------------------- */

static int64_t next_unit_event(const Sim *s, int64_t t)
{
    int64_t next = dma_next_event(s, t);
    int64_t comm = comm_next_event(s, t), barrier = barrier_next_event(s, t);
    if (comm < next)
        next = comm;
    return barrier < next ? barrier : next;
}

/* Charges `cycles` more cycles like the CPE's last one (a stall with last_state). */
static void repeat_stall(Cpe *c, int64_t cycles)
{
    c->counters[COUNTER_IDLE(0, c->last_state)] += (uint64_t)cycles;
    c->counters[COUNTER_IDLE(1, c->last_state)] += (uint64_t)cycles;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* A skip that a batch's end limits to this many cycles costs more than stepping them. */
enum { SHORT_SKIP = 16 };

/* After cycle t: if every running CPE either stalls on something only an event or a known
 * time can end, or spins at a fixed point, jump ahead by a whole number of the spin periods
 * to just before the next event. Returns the cycles skipped. */
static int64_t skip_ahead(Sim *s, Cpe *const *cpe, int num_running, int issued_any, int64_t t)
{
    /* a delivery or barrier release in the next cycle: nothing to skip (the common case
     * of a cycle in which every CPE waits for a delivery) */
    int64_t horizon = comm_next_event(s, t), barrier = barrier_next_event(s, t);
    if (barrier < horizon)
        horizon = barrier;
    if (horizon <= t + 1)
        return 0;
    int64_t common_period = 1;
    int spinning = 0;
    for (int k = 0; k < num_running; k++) {
        const Cpe *c = cpe[k];
        if (c->ahead_until > t + 1) {   /* in a batch: visited again at ahead_until */
            if (c->ahead_until - t <= SHORT_SKIP)
                return 0;
            if (c->ahead_until < horizon)
                horizon = c->ahead_until;
        } else if (issued_any && at_fixed_point(c)) {
            common_period = common_period / gcd(common_period, c->period) * c->period;
            if (common_period > s->cfg.max_cycles)
                return 0;
            spinning = 1;
        } else if (c->last_state == SWSIM_STATE_RUNNING) {
            return 0;
        } else {
            int64_t wake = stalled_until(c, t);
            if (wake <= t + 1)   /* the later steps only lower the horizon */
                return 0;
            if (wake < horizon)
                horizon = wake;
        }
    }
    /* the DMA engine runs ahead through the transactions no CPE can observe (dma.c) */
    horizon = dma_quiet_until(s, t, horizon);
    if (horizon == TIME_NEVER && !spinning)
        return 0;   /* nothing will ever change: cycle t + 1 reports the deadlock */
    if (s->cfg.max_cycles < horizon)
        horizon = s->cfg.max_cycles;
    int64_t cycles = (horizon - 1 - t) / common_period * common_period;
    if (cycles <= 0)
        return 0;
    dma_advance(s, t, t + cycles);
    for (int k = 0; k < num_running; k++) {
        Cpe *c = cpe[k];
        if (c->ahead_until > t + 1)   /* the batch charged these cycles */
            continue;
        if (issued_any && at_fixed_point(c)) {
            repeat_period(&s->cold[c->id], c, t, cycles);
            s->in_step = 0;   /* its ready times moved */
        } else {
            repeat_stall(c, cycles);
        }
    }
    return cycles;
}

/* ---- the run ------------------------------------------------------------------------------ */

static void stop_with_report(Sim *s, int kind, int64_t cycle)
{
    SwResult *r = s->result;
    r->stop_kind = kind;
    r->stop_cpe = -1;
    r->stop_pc = 0;
    r->stop_cycle = cycle;
    r->stop_a = kind == STOP_CYCLE_LIMIT ? (uint64_t)s->cfg.max_cycles : 0;
}

/* Takes back cycle t's charges of the CPEs that issued before a fault in that cycle. */
static void uncharge_cycle(Sim *s, const int *running, int count)
{
    for (int k = 0; k < count; k++) {
        Cpe *c = &s->cpes[running[k]];
        c->counters[c->charged[0]]--;
        c->counters[c->charged[1]]--;
    }
}

/* Whether a CPE that is not at a confirmed spin fixed point issued in cycle t (which then
 * cannot start a skip), apart from CPEs in a batch beyond t + 1 (skip_ahead stops at their
 * end); asked after the cycle, stopping at the first such CPE. */
static int issued_unconfirmed(Cpe *const *cpe, int num_running, int64_t t)
{
    for (int k = 0; k < num_running; k++)
        if (cpe[k]->last_state == SWSIM_STATE_RUNNING && !cpe[k]->confirmed
            && cpe[k]->ahead_until <= t + 1)
            return 1;
    return 0;
}

/* Simulates the cycles from s->next_cycle on. Returns the kernel cycles once the run ended,
 * or RUN_PAUSED before the first cycle >= horizon (to be resumed by another call: the loop
 * keeps no state of its own between cycles, so pausing changes nothing). */
enum { RUN_PAUSED = -1 };

HOT_LOOP_CLONES
static int64_t run_cycles(Sim *s, int64_t horizon)
{
    int running[SWSIM_MAX_CPES], num_running = s->num_running;
    memcpy(running, s->running, sizeof running);
    Cpe *cpe[SWSIM_MAX_CPES];   /* &s->cpes[running[k]], without the multiply */
    for (int k = 0; k < num_running; k++)
        cpe[k] = &s->cpes[running[k]];
    if (num_running == 0)
        return 0;
    s->horizon = horizon;
    s->bound_cycle = -1;
    if (s->next_cycle == 0)   /* spawned CPEs start alike but for their data */
        test_in_step(s, cpe, num_running, 0);
    for (int64_t t = s->next_cycle;; t++) {
        if (t >= horizon) {
            memcpy(s->running, running, sizeof running);
            s->num_running = num_running;
            s->next_cycle = t;
            return RUN_PAUSED;
        }
        if (t >= s->cfg.max_cycles) {
            stop_with_report(s, STOP_CYCLE_LIMIT, s->cfg.max_cycles);
            return s->cfg.max_cycles;
        }
        if (s->dma.current >= 0 || s->dma.active_count || s->dma.waiting_count)
            dma_step(s, t);
        if (s->senders && t >= s->deliver_at)
            comm_deliver(s, t);
        if (s->num_releases)
            barrier_release(s, t);
        int issued_any = 0, faulted = 0;
        int in_step = !s->in_step ? NOT_ALIKE
                      : s->grouped ? issue_group(s, cpe, num_running, t, &faulted)
                      : issue_in_step(s, cpe, num_running, t, &faulted, 0);
        if (in_step == NOT_ALIKE) {
            s->in_step = 0;
            const Instr *first_at = cpe[0]->at;
            for (int k = 0; k < num_running && in_step != FAULTED; k++) {
                int issued = issue(s, cpe[k], t);
                if (issued == FAULTED) {
                    in_step = FAULTED;
                    faulted = k;
                }
                issued_any |= issued;
            }
            if (in_step != FAULTED && cpe[0]->at < first_at && --s->step_retry <= 0)
                test_in_step(s, cpe, num_running, t + 1);
        } else {
            issued_any = in_step;
            s->result->step_cycles += !s->grouped;
        }
        if (in_step == FAULTED) {
            rewind_batches(s, cpe, num_running, faulted, t);
            uncharge_cycle(s, running, faulted);
            return t;
        }
        int may_skip = s->cfg.skip
                       && !(issued_any
                            && (s->cfg.trace || issued_unconfirmed(cpe, num_running, t)));
        if (s->error)
            return t;
        if (s->cfg.trace)
            for (int k = 0; k < num_running; k++) {
                Cpe *c = &s->cpes[running[k]];
                trace_cycle(s, c, c->last_state == SWSIM_STATE_RUNNING
                                  ? SWSIM_SPAN_ISSUE : 1 + c->last_state, t);
                if (!c->running)
                    trace_close(s, c, t + 1);
            }
        if (s->halted_this_cycle) {
            int still_running = 0;
            for (int k = 0; k < num_running; k++)
                if (cpe[k]->running) {
                    cpe[still_running] = cpe[k];
                    running[still_running++] = running[k];
                }
            num_running = still_running;
            s->halted_this_cycle = 0;
            s->in_step = 0;
            if (num_running == 0) {
                int64_t end = dma_drain(s, t, s->cfg.max_cycles);
                if (end != TIME_NEVER)
                    return end;
                stop_with_report(s, STOP_CYCLE_LIMIT, s->cfg.max_cycles);
                return s->cfg.max_cycles;
            }
        }
        if (!issued_any && next_unit_event(s, t) == TIME_NEVER) {
            int64_t wake = TIME_NEVER;
            for (int k = 0; k < num_running && wake == TIME_NEVER; k++)
                wake = stalled_until(cpe[k], t);
            if (wake == TIME_NEVER) {
                stop_with_report(s, STOP_DEADLOCK, t);
                return t + 1;
            }
        }
        if (may_skip)
            t += skip_ahead(s, cpe, num_running, issued_any, t);
    }
}

/* Fills leader->group_checks with the union of the ready-time slots of the leader and the
 * word after it, if it has at most NUM_GROUP_CHECKS slots (padded with ZERO_SLOT). */
static int group_checks(Instr *leader, const Instr *next)
{
    uint8_t *group = leader->group_checks;
    int n = 0;
    const Instr *pair[2] = {leader, next};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < NUM_CHECKS && pair[i]->checks[k] != ZERO_SLOT; k++) {
            uint8_t slot = pair[i]->checks[k];
            if (memchr(group, slot, (size_t)n))
                continue;
            if (n == NUM_GROUP_CHECKS)
                return 0;
            group[n++] = slot;
        }
    while (n < NUM_GROUP_CHECKS)
        group[n++] = ZERO_SLOT;
    return 1;
}

/* ---- private blocks ------------------------------------------------------------------------ */

/* Whether a word touches only its CPE's registers and LDM (or faults: a load or store whose
 * access is not in LDM, which a batch checks before the cycle it would issue). */
static int is_private(const Instr *in)
{
    if (in->flags & (F_INVALID | F_BAD_PC))
        return 0;
    switch (in->cls) {
    case CLS_ALU: case CLS_IMUL: case CLS_VALU: case CLS_FP: case CLS_FDIV: case CLS_FMISC:
    case CLS_SHUFFLE: case CLS_LOAD: case CLS_STORE:
        return 1;
    default:
        return 0;
    }
}

/* Notes the slots issue() reads to decide about `in` at cycle offset o: those the block has
 * not written yet are inputs (block_inputs_ready). */
static void note_needs(Block *b, const uint8_t *written, const int64_t *ready, const Instr *in,
                       int o)
{
    uint8_t slots[5];
    int n = 0;
    for (int k = 0; k < in->num_sources; k++)
        slots[n++] = in->sources[k];
    slots[n++] = in->waw_slot;
    if (in->pipes == PIPE_P0)
        slots[n++] = BUSY_SLOT;
    for (int k = 0; k < n; k++) {
        uint8_t slot = slots[k];
        if (slot == ZERO_SLOT || written[slot] || memchr(b->need_slot, slot, (size_t)b->num_needs))
            continue;
        b->need_slot[b->num_needs] = slot;
        b->need_ready[b->num_needs] = (int32_t)ready[slot];
        b->need_offset[b->num_needs++] = (int16_t)o;
    }
}

/* Notes the slots an issued private word writes (its semantics in semantics.h) and their
 * ready times, relative; 0 if the block would write more than MAX_BLOCK_WRITES slots. */
static int schedule_writes(Block *b, uint8_t *written, int64_t *ready, const Instr *in, int o)
{
    uint8_t slots[2];
    int n = 0;
    if (in->dest != DISCARD_SLOT)
        slots[n++] = in->dest;
    if (in->cls == CLS_FDIV)   /* P0 busy until the result is ready */
        slots[n++] = BUSY_SLOT;
    for (int k = 0; k < n; k++) {
        if (!written[slots[k]]) {
            if (b->num_writes == MAX_BLOCK_WRITES)
                return 0;
            written[slots[k]] = 1;
            b->write_slot[b->num_writes++] = slots[k];
        }
        ready[slots[k]] = o + in->latency;
    }
    return 1;
}

/* Whether `in` is a branch back to `head`, the first word of its block. */
static int branches_to(const Instr *in, const Instr *head)
{
    return in->cls == CLS_BRANCH && !(in->flags & F_INVALID)
           && (in - head) + 1 + (int64_t)in->imm == 0;
}

enum { CYCLE_REJECTED = -1, CYCLE_STALLS = 0, CYCLE_ISSUES = 1 };

/* One cycle of a schedule, by the rules of issue(): the leader `leader` at cycle offset o, for
 * the relative ready times `ready`, into `st` (a stall: its reason and counters; an issue: the
 * words, flags and counters). CYCLE_REJECTED if the cycle cannot be part of the block: it
 * would issue or examine a word that is neither private nor the branch back to `head`, or
 * exceed a limit of core.h. */
static int schedule_cycle(Block *b, uint8_t *written, int64_t *ready, const Instr *head,
                          const Instr *leader, int o, Step *st)
{
    *st = (Step){.leader = leader};
    note_needs(b, written, ready, leader, o);
    int reason = timing_reason(ready, leader, o);
    if (reason != NO_STALL) {
        st->stall_counter[0] = COUNTER_IDLE(0, reason);
        st->stall_counter[1] = COUNTER_IDLE(1, reason);
        st->stall_reason = (int8_t)reason;
        return CYCLE_STALLS;
    }
    const Instr *next = leader + 1, *follower = NULL;
    int follower_reason = REASON_PAIRING;
    if (leader->flags & F_STRUCTURAL)
        st->flags |= STEP_CHECK_LEADER;
    if (leader->flags & F_CONSIDER_NEXT) {
        if ((next->flags & F_STRUCTURAL) && !is_private(next))
            return CYCLE_REJECTED;   /* its structural check reads another unit's state */
        note_needs(b, written, ready, next, o);
        int next_reason = timing_reason(ready, next, o);
        if (next_reason != NO_STALL) {
            follower_reason = next_reason;
        } else {
            if (next->flags & F_STRUCTURAL)
                st->flags |= STEP_CHECK_NEXT;
            if (leader->flags & F_PAIRS_NEXT)
                follower = next;
        }
    }
    const Instr *last = follower ? follower : leader;
    if (branches_to(last, head))
        st->flags |= STEP_BRANCH;
    else if (!is_private(last))
        return CYCLE_REJECTED;
    b->stores += (leader->cls == CLS_STORE) + (follower && follower->cls == CLS_STORE);
    if (b->stores > MAX_BATCH_STORES || !schedule_writes(b, written, ready, leader, o)
        || (follower && !schedule_writes(b, written, ready, follower, o)))
        return CYCLE_REJECTED;
    if (follower) {
        st->words = 2;
        st->counter[0] = COUNTER_VALID(0);
        st->counter[1] = COUNTER_VALID(1);
    } else {
        st->words = 1;
        st->counter[0] = (uint8_t)COUNTER_VALID(leader->pipe_alone);
        st->counter[1] = (uint8_t)COUNTER_IDLE(leader->pipe_alone ^ 1, follower_reason);
    }
    return CYCLE_ISSUES;
}

/* The schedule of the private block starting at `head`, for the ready times `entry` (relative
 * to its entry), in cycle offsets from its entry, as steps (a run of stall cycles of one
 * reason, then an issue cycle or none); it ends after the branch back to `head`, or before the
 * first cycle that cannot be part of it (a get, another branch, ...). `exit`: the ready times
 * it leaves, relative to the cycle after it (at least 0). Returns its number of steps. */
static int schedule_block(const Instr *head, Block *b, Step *steps, const int64_t *entry,
                          int64_t *exit)
{
    int64_t ready[NUM_SLOTS];
    uint8_t written[NUM_SLOTS] = {0};
    memcpy(ready, entry, sizeof ready);
    const Instr *leader = head;
    Step stall = {0};   /* the stall cycles since the last issue cycle */
    int n = 0;
    *b = (Block){0};
    for (int o = 0; o < MAX_BLOCK_CYCLES && (is_private(leader) || branches_to(leader, head));
         o++) {
        Block before = *b;
        Step st;
        int outcome = schedule_cycle(b, written, ready, head, leader, o, &st);
        if (outcome == CYCLE_REJECTED) {
            *b = before;   /* what the rejected cycle noted is not part of the block */
            break;
        }
        if (outcome == CYCLE_STALLS) {
            if (stall.stall && stall.stall_reason != st.stall_reason) {
                steps[n++] = stall;   /* a run of another reason before this one */
                stall.stall = 0;
            }
            if (!stall.stall)
                stall = st;
            stall.stall++;
            stall.issue_offset = (int16_t)(o + 1);   /* (a run alone issues nothing) */
            continue;
        }
        st.issue_offset = (int16_t)o;
        st.stall = stall.stall;
        memcpy(st.stall_counter, stall.stall_counter, sizeof st.stall_counter);
        st.stall_reason = stall.stall_reason;
        stall.stall = 0;
        steps[n++] = st;
        b->num_steps = n;
        b->cycles = o + 1;
        leader += st.words;
        if (st.flags & STEP_BRANCH) {
            b->loops = 1;
            break;
        }
    }
    for (int r = 0; r < NUM_SLOTS; r++)
        exit[r] = ready[r] > b->cycles ? ready[r] - b->cycles : 0;
    return b->num_steps;
}

/* The schedule of a block for its inputs ready at entry, or, for a loop whose iterations
 * reach a steady state (each leaves the ready times it was entered with), for that state. */
static int schedule_loop(const Instr *head, Block *b, Step *steps)
{
    enum { ROUNDS = 4 };
    int64_t entry[NUM_SLOTS] = {0}, exit[NUM_SLOTS];
    for (int round = 0;; round++) {
        int n = schedule_block(head, b, steps, entry, exit);
        if (!b->loops)
            return n;
        if (memcmp(entry, exit, sizeof entry) == 0) {
            /* an iteration leaves what its schedule assumed: the next one needs no check */
            b->steady = 1;
            return n;
        }
        if (round == ROUNDS) {
            memset(entry, 0, sizeof entry);
            return schedule_block(head, b, steps, entry, exit);
        }
        memcpy(entry, exit, sizeof entry);
    }
}

/* The counters a whole iteration of the steps charges, as the block's deltas; 0 if more
 * columns than a block holds (not reached: it holds one of each). */
static void schedule_deltas(Block *b, const Step *steps)
{
    b->num_deltas = 0;
    for (int j = 0; j < b->num_steps; j++) {
        const Step *st = &steps[j];
        const uint8_t counters[4] = {st->stall_counter[0], st->stall_counter[1], st->counter[0],
                                     st->counter[1]};
        for (int k = 0; k < 4; k++) {
            int cycles = k < 2 ? st->stall : st->words != 0;
            if (!cycles)
                continue;
            uint8_t *known = memchr(b->delta_counter, counters[k], (size_t)b->num_deltas);
            if (known) {
                b->delta[known - b->delta_counter] += (uint16_t)cycles;
            } else {
                b->delta_counter[b->num_deltas] = counters[k];
                b->delta[b->num_deltas++] = (uint16_t)cycles;
            }
        }
    }
}

/* The micro-operations of a whole iteration of loop b (core.h Uop) into `uops`, and the
 * counters it charges; returns their number, 0 if b is not a loop. */
static int schedule_uops(Block *b, const Step *steps, Uop *uops)
{
    int n = 0;
    if (!b->loops)
        return 0;
    schedule_deltas(b, steps);
    for (int j = 0; j < b->num_steps; j++) {
        const Step *st = &steps[j];
        if (!st->words)
            continue;
        Uop op = {.offset = st->issue_offset, .step = (uint8_t)j};
        if ((st->flags & STEP_BRANCH) && st->words == 2) {
            op.in = st->leader;
            op.kind = U_DIRTY;
            uops[n++] = op;
        }
        /* the checks, before anything of the step issues: the leader's own if it is the only
         * one, else separate */
        int checks = (st->flags & STEP_CHECK_LEADER) && (st->flags & STEP_CHECK_NEXT);
        for (int w = 0; w < 2; w++) {
            op.in = st->leader + w;
            op.kind = U_ADDRESS;
            op.word = (uint8_t)w;
            if ((st->flags & (w ? STEP_CHECK_NEXT : STEP_CHECK_LEADER)) && (w || checks))
                uops[n++] = op;
        }
        for (int w = 0; w < st->words; w++) {
            op.in = st->leader + w;
            op.word = (uint8_t)w;
            op.kind = !w && (st->flags & STEP_CHECK_LEADER) && !checks ? checked_kind(op.in->id)
                                                                         : op.in->id;
            uops[n++] = op;
        }
    }
    return n;
}

/* Finds the private blocks of at least two cycles at the targets of backward branches (where
 * issue() tries batches), and their schedules; none when the run steps every cycle (skip off)
 * or records trace spans. */
static int find_blocks(Sim *s)
{
    uint8_t *head = calloc((size_t)s->code_words + 1, 1);
    if (!head)
        return SWSIM_ERROR_MEMORY;
    int64_t heads = 0;
    for (int64_t i = 0; i < s->code_words; i++) {
        const Instr *in = &s->code[i];
        s->code[i].block = -1;
        if (in->cls == CLS_BRANCH) {
            int64_t target = i + 1 + (int64_t)in->imm;
            if (target >= 0 && target <= i)
                head[target] = 1;
        }
    }
    s->code[s->code_words].block = -1;
    for (int64_t i = 0; i < s->code_words; i++) {
        heads += head[i] && is_private(&s->code[i]);
        s->code_has_dma |= s->code[i].cls == CLS_DMA;
    }
    s->blocks = calloc((size_t)heads + 1, sizeof *s->blocks);
    s->steps = calloc((size_t)heads * MAX_BLOCK_CYCLES + 1, sizeof *s->steps);
    s->uops = calloc((size_t)heads * MAX_BLOCK_UOPS + 1, sizeof *s->uops);
    s->undo = calloc((size_t)s->num_cpes, sizeof *s->undo);
    if (!s->blocks || !s->steps || !s->uops || !s->undo) {
        free(head);
        return SWSIM_ERROR_MEMORY;
    }
    for (int64_t i = 0; i < s->code_words && s->cfg.skip && !s->cfg.trace; i++) {
        if (!head[i] || !is_private(&s->code[i]))
            continue;
        Block *b = &s->blocks[s->num_blocks];
        if (schedule_loop(&s->code[i], b, &s->steps[s->num_steps]) == 0 || b->cycles < 2)
            continue;
        b->first_step = (int32_t)s->num_steps;
        b->first_uop = (int32_t)s->num_uops;
        b->num_uops = schedule_uops(b, &s->steps[s->num_steps], &s->uops[s->num_uops]);
        s->num_steps += b->num_steps;
        s->num_uops += b->num_uops;
        s->code[i].block = (int32_t)s->num_blocks++;
        s->code[i].flags |= F_BLOCK;
    }
    free(head);
    return 0;
}

static int config_is_valid(const SwConfig *cfg, const SwJob *job)
{
    return SWSIM_CONFIG_IN_RANGE(cfg)
           && cfg->mem_base + cfg->mem_bytes >= cfg->mem_base
           && job->code_words >= 0 && cfg->max_cycles >= 0;
}

static void init_cpe(Sim *s, Cpe *c, int id)
{
    const SwJob *job = s->job;
    c->id = id;
    c->row = id / (int)s->cfg.mesh_cols;
    c->col = id % (int)s->cfg.mesh_cols;
    c->ldm = job->ldm + (size_t)id * s->ldm_bytes;
    c->running = job->spawned[id] != 0;
    c->pc = job->entry_pc;
    memcpy(c->regs, job->regs + (size_t)id * SWSIM_NUM_REGS * SWSIM_LANES,
           ISA_ZERO_REG * sizeof c->regs[0]);
    c->last_state = SWSIM_STATE_RUNNING;
    c->at = word_at(s, c->pc);
    s->cold[id].halt_cycle = -1;
    s->cold[id].span_kind = -1;
    c->mark_pc = UINT64_MAX;
    c->ldm_changed = -1;
}

static int init_sim(Sim *s)
{
    s->num_cpes = (int)(s->cfg.mesh_rows * s->cfg.mesh_cols);
    s->ldm_bytes = (uint64_t)s->cfg.ldm_bytes;
    s->cg = s->result->cg_counters;
    const int64_t latency[NUM_LATENCY_CLASSES] = SWSIM_CONFIG_LATENCIES(&s->cfg);
    memcpy(s->latency, latency, sizeof s->latency);
    s->cpes = aligned_alloc(_Alignof(Cpe), (size_t)s->num_cpes * sizeof *s->cpes);
    if (s->cpes)
        memset(s->cpes, 0, (size_t)s->num_cpes * sizeof *s->cpes);
    s->cold = calloc((size_t)s->num_cpes, sizeof *s->cold);
    s->code_words = s->job->code_words;
    s->code = calloc((size_t)s->code_words + 1, sizeof *s->code);
    if (!s->cpes || !s->cold || !s->code)
        return SWSIM_ERROR_MEMORY;
    for (int64_t i = 0; i < s->code_words; i++)
        decode_word(s->job->code[i], s->latency, &s->code[i]);
    s->code[s->code_words].flags = F_BAD_PC;
    s->step_backoff = s->step_retry = 1;
    s->may_run_ahead = s->cfg.skip && !s->cfg.trace;   /* stepping, or spans per cycle */
    /* Without a divide or sqrt in the code, P0 is never busy: the divide check can go. */
    int has_divide = 0;
    for (int64_t i = 0; i < s->code_words; i++)
        has_divide |= s->code[i].cls == CLS_FDIV;
    for (int64_t i = 0; i < s->code_words; i++) {
        Instr *in = &s->code[i];
        int n = 0;
        for (int k = 0; k < NUM_CHECKS; k++)
            if (in->checks[k] != ZERO_SLOT && (has_divide || in->checks[k] != BUSY_SLOT))
                in->checks[n++] = in->checks[k];
        while (n < NUM_CHECKS)
            in->checks[n++] = ZERO_SLOT;
        if (in->checks[3] != ZERO_SLOT)
            in->flags |= F_MORE_CHECKS;
    }
    for (int64_t i = 0; i < s->code_words; i++) {
        Instr *in = &s->code[i], *next = &s->code[i + 1];
        in->pipe_alone = (uint8_t)leader_pipe(in, NULL);
        if (in->id == I_INVALID || in->ends_group || i + 1 == s->code_words
            || next->id == I_INVALID)
            continue;
        in->flags |= F_CONSIDER_NEXT;
        if (can_pair(in, next))
            in->flags |= F_PAIRS_NEXT;
        if (group_checks(in, next))
            in->flags |= F_GROUP_CHECKS;
    }
    int status = find_blocks(s);
    if (status)
        return status;
    for (int i = 0; i < s->num_cpes; i++) {
        init_cpe(s, &s->cpes[i], i);
        if (s->cpes[i].running) {
            s->spawned_mask |= UINT64_C(1) << i;
            s->running[s->num_running++] = i;
        }
    }
    status = comm_init(s);
    if (!status)
        status = dma_init(s);
    if (!status)
        status = barrier_init(s);
    if (!status)
        status = icache_init(s);
    return status;
}

static void free_sim(Sim *s)
{
    comm_free(s);
    free(s->cpes);
    free(s->cold);
    free(s->code);
    free(s->blocks);
    free(s->steps);
    free(s->uops);
    free(s->undo);
    free(s->dma.pool);
    free(s->dma.waiting);
    free(s->dma.active);
    free(s->dma.put_buffer);
    free(s->barrier_arrived);
    icache_free(s);
}

/* Results: counters (finished cycles of halted CPEs), pcs, registers, open trace spans. */
static void finish_run(Sim *s, int64_t kernel_cycles)
{
    SwResult *r = s->result;
    r->kernel_cycles = kernel_cycles;
    for (int i = 0; i < s->num_cpes; i++) {
        Cpe *c = &s->cpes[i];
        if (!s->job->spawned[i])
            continue;
        /* a halt in the cycle of a fault was taken back (uncharge_cycle) */
        const int64_t halt_cycle = s->cold[i].halt_cycle;
        int64_t active = c->running || halt_cycle >= kernel_cycles ? kernel_cycles
                                                                    : halt_cycle + 1;
        c->counters[COUNTER_ACTIVE] = (uint64_t)active;
        if (!c->running) {
            int64_t finished = kernel_cycles - (halt_cycle + 1);
            if (finished > 0) {
                c->counters[COUNTER_IDLE(0, REASON_FINISHED)] += (uint64_t)finished;
                c->counters[COUNTER_IDLE(1, REASON_FINISHED)] += (uint64_t)finished;
            }
            c->last_state = REASON_FINISHED;
        }
        if (s->cfg.trace)
            trace_close(s, c, kernel_cycles);
        memcpy(&r->cpe_counters[i * SWSIM_NUM_CPE_COUNTERS], c->counters, sizeof c->counters);
        r->last_state[i] = c->last_state;
        r->pcs[i] = c->pc;
        memcpy(s->job->regs + (size_t)i * SWSIM_NUM_REGS * SWSIM_LANES, c->regs,
               ISA_ZERO_REG * sizeof c->regs[0]);
    }
    if (s->cfg.trace)
        dma_close_spans(s, kernel_cycles);
}

/* ---- the public interface: a run in one call, or in steps up to cycle horizons ---------- */

struct SwSim {
    Sim sim;
    int ended;
};

SwSim *swsim_start(const SwConfig *config, const SwJob *job, SwResult *result)
{
    memset(result, 0, sizeof *result);
    if (!config_is_valid(config, job)) {
        result->status = SWSIM_ERROR_CONFIG;
        return NULL;
    }
    SwSim *handle = calloc(1, sizeof *handle);
    if (!handle) {
        result->status = SWSIM_ERROR_MEMORY;
        return NULL;
    }
    Sim *s = &handle->sim;
    s->cfg = *config;
    s->job = job;
    s->result = result;
    s->dma.current = -1;
    s->deliver_at = TIME_NEVER;
    int status = init_sim(s);
    if (status) {
        free_sim(s);
        free(handle);
        result->status = status;
        return NULL;
    }
    return handle;
}

int32_t swsim_advance(SwSim *handle, int64_t horizon)
{
    if (!handle->ended) {
        int64_t kernel_cycles = run_cycles(&handle->sim, horizon);
        if (kernel_cycles != RUN_PAUSED) {
            finish_run(&handle->sim, kernel_cycles);
            handle->ended = 1;
        }
    }
    return handle->ended;
}

int64_t swsim_cycle(const SwSim *handle)
{
    return handle->ended ? handle->sim.result->kernel_cycles : handle->sim.next_cycle;
}

int32_t swsim_finish(SwSim *handle)
{
    SwResult *result = handle->sim.result;
    int status = handle->ended ? handle->sim.error : SWSIM_ERROR_UNFINISHED;
    free_sim(&handle->sim);
    free(handle);
    if (status) {
        free(result->spans);
        result->spans = NULL;
        result->num_spans = 0;
    }
    return result->status = status;
}

int swsim_run(const SwConfig *config, const SwJob *job, SwResult *result)
{
    SwSim *handle = swsim_start(config, job, result);
    if (!handle)
        return result->status;
    swsim_advance(handle, TIME_NEVER);
    return swsim_finish(handle);
}

void swsim_free_result(SwResult *result)
{
    free(result->spans);
    result->spans = NULL;
    result->num_spans = 0;
}
