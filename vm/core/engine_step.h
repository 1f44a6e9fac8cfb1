/* One CPE, one cycle: issue() decides and issues the words of a CPE in a cycle by the rules of
 * docs/timing.md. Static inline: the cycle loop (engine.c) inlines it into its clones. */
#ifndef SWSIM_ENGINE_STEP_H
#define SWSIM_ENGINE_STEP_H
#include "execute.h"

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

#endif
