/* Skipping: idle cycles and spin loops at a fixed point, jumped over up to the next event. */
#include "engine.h"

int64_t next_unit_event(const Sim *s, int64_t t)
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
int64_t skip_ahead(Sim *s, Cpe *const *cpe, int num_running, int issued_any, int64_t t)
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
