/* Spin loops: their fixed points, and CPEs that run ahead through them. */
#include <string.h>
#include "engine_step.h"

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

void mark_unchanged_loop_head(Sim *s, Cpe *c, int64_t t)
{
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

/* Advances a CPE at a fixed point after cycle t by `cycles`, a multiple of its period (or takes
 * it back, if negative, from an advance after cycle t - cycles: the times it moved are those
 * after t). */
void repeat_period(CpeCold *cold, Cpe *c, int64_t t, int64_t cycles)
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

void run_ahead(Sim *s, Cpe *c, int64_t t)
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
