/* What the engine's strategies share to issue words (engine_step.h, engine_instep.h,
 * engine_batch.c, engine_blocks.c): addresses, the execution of a word, the issue rules of
 * docs/timing.md, charging a cycle and recording a fault. Static, so that each strategy's
 * file inlines them into its loops (into run_cycles' clones, engine.c). */
#ifndef SWSIM_EXECUTE_H
#define SWSIM_EXECUTE_H
#include "engine.h"
/* a file that includes this header uses some of these functions, not all */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

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

#pragma GCC diagnostic pop
#endif
