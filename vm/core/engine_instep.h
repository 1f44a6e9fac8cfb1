/* In step: the CPEs of an SPMD kernel that have the same issue state issue a cycle's words
 * once for all of them. Included by the cycle loop only (engine.c), which inlines it into its
 * clones. */
#ifndef SWSIM_ENGINE_INSTEP_H
#define SWSIM_ENGINE_INSTEP_H
#include "engine_step.h"

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

#endif
