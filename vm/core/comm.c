/* Register communication (docs/timing.md "Register communication"): per-sender transfer
 * FIFOs, row/column receive queues, deliveries in phase 1(b). */
#include <stdlib.h>
#include <string.h>
#include "core.h"

int comm_init(Sim *s)
{
    /* A put issues only while fewer than rc_send_depth transfers are blocked, and at most one
     * put issues per cycle (P1 only), so a FIFO never holds more than the blocked transfers
     * plus those still travelling (one per cycle of rc_latency). */
    s->fifo_capacity = s->cfg.rc_send_depth + s->cfg.rc_latency + 2;
    s->fifos = calloc((size_t)(s->num_cpes * s->fifo_capacity), sizeof *s->fifos);
    s->queue_entries = calloc((size_t)(2 * s->num_cpes * s->cfg.rc_queue_depth),
                              sizeof *s->queue_entries);
    if (!s->fifos || !s->queue_entries)
        return SWSIM_ERROR_MEMORY;
    s->next_due = TIME_NEVER;
    for (int i = 0; i < s->num_cpes; i++) {
        Cpe *c = &s->cpes[i];
        s->head_due[i] = TIME_NEVER;
        for (int column = 0; column < 2; column++)
            s->queue_ring[column][i] = s->queue_entries
                                       + (column * s->num_cpes + i) * s->cfg.rc_queue_depth;
        for (int column = 0; column < 2; column++)
            for (uint64_t n = 0; n <= 8; n++) {
                Fault fault = {0};
                c->put_fault[column][n] = (int8_t)put_targets(s, c, column, n,
                                                              &c->put_mask[column][n], &fault);
            }
    }
    return 0;
}

void comm_free(Sim *s)
{
    free(s->fifos);
    free(s->queue_entries);
}

/* The CPEs a put (or load-and-broadcast) along the row (column = 0) or column reaches;
 * n = 8 means every other CPE of the line. Returns 0 or a fault. */
int put_targets(const Sim *s, const Cpe *c, int column, uint64_t n, uint64_t *targets,
                Fault *fault)
{
    int64_t line_length = column ? s->cfg.mesh_rows : s->cfg.mesh_cols;
    int64_t own_position = column ? c->row : c->col;
    uint64_t mask = 0;
    for (int64_t k = 0; k < line_length; k++) {
        if (n == 8 ? k != own_position : (uint64_t)k == n) {
            int64_t id = column ? k * s->cfg.mesh_cols + c->col : c->row * s->cfg.mesh_cols + k;
            mask |= UINT64_C(1) << id;
        }
    }
    if (n > 8 || (n < 8 && (int64_t)n >= line_length)) {
        fault->kind = STOP_PUT_OUTSIDE;
        fault->a = n;
        fault->b = (uint64_t)line_length;
        return fault->kind;
    }
    if (n < 8 && (int64_t)n == own_position) {
        fault->kind = STOP_PUT_SELF;
        fault->a = n;
        return fault->kind;
    }
    uint64_t unspawned = mask & ~s->spawned_mask;
    if (unspawned) {
        fault->kind = STOP_PUT_UNSPAWNED;
        fault->a = (uint64_t)__builtin_ctzll(unspawned);
        return fault->kind;
    }
    *targets = mask;
    return 0;
}

/* Position `k` of a ring of `capacity` entries starting at `head` (k < capacity); avoids a
 * division in the per-cycle paths. */
static inline int64_t ring_index(int64_t head, int64_t k, int64_t capacity)
{
    int64_t i = head + k;
    return i >= capacity ? i - capacity : i;
}

static Transfer *fifo_at(const Sim *s, int id, int64_t k)
{
    return &s->fifos[id * s->fifo_capacity + ring_index(s->fifo_head[id], k, s->fifo_capacity)];
}

/* Transfers that are due but still waiting for room: they occupy the send buffer. */
int comm_send_blocked(const Sim *s, const Cpe *c, int64_t t)
{
    if (s->head_due[c->id] > t)   /* TIME_NEVER if the FIFO is empty */
        return 0;
    int blocked = 1;
    while (blocked < s->fifo_count[c->id] && fifo_at(s, c->id, blocked)->due <= t)
        blocked++;
    return blocked;
}

static void load_head(Sim *s, int id)
{
    const Transfer *head = fifo_at(s, id, 0);
    s->head_due[id] = head->due;
    s->head_targets[id] = head->targets;
    s->head_column[id] = (uint8_t)head->column;
}

void comm_send(Sim *s, Cpe *c, int column, uint64_t targets, const uint64_t *value, int64_t t)
{
    /* The capacity bound of comm_init makes an overflow impossible; refuse rather than
     * corrupt memory if that reasoning were ever wrong. */
    if (s->fifo_count[c->id] >= s->fifo_capacity) {
        s->error = SWSIM_ERROR_INTERNAL;
        return;
    }
    Transfer *tr = fifo_at(s, c->id, s->fifo_count[c->id]++);
    tr->due = t + s->cfg.rc_latency;
    tr->targets = targets;
    tr->column = column;
    memcpy(tr->value, value, sizeof tr->value);
    if (s->fifo_count[c->id] == 1) {   /* a new head (the others wait for their head) */
        load_head(s, c->id);
        if (tr->due < s->next_due)
            s->next_due = tr->due;
        if (tr->due < s->deliver_at)
            s->deliver_at = tr->due;
    }
    s->senders |= UINT64_C(1) << c->id;
    s->cg[CG_RC_TRANSFERS]++;
}

static inline int queues_have_room(const Sim *s, uint64_t targets, int column)
{
    return !(targets & s->full_queues[column]);
}

/* Adds the senders whose head is due by t to due_senders; next_due becomes the earliest due
 * of the others. */
static void collect_due_heads(Sim *s, int64_t t)
{
    int64_t next = TIME_NEVER;
    for (uint64_t m = s->senders & ~s->due_senders; m; m &= m - 1) {
        const int64_t due = s->head_due[__builtin_ctzll(m)];
        if (due <= t)
            s->due_senders |= m & -m;
        else if (due < next)
            next = due;
    }
    s->next_due = next;
}

/* Phase 1(b): in CPE id order each sender delivers at most the head of its FIFO. */
HOT_LOOP_CLONES
void comm_deliver(Sim *s, int64_t t)
{
    if (t >= s->next_due)
        collect_due_heads(s, t);
    const int64_t depth = s->cfg.rc_queue_depth;
    uint64_t deliveries = 0, due_behind = 0;
    for (uint64_t due = s->due_senders; due; due &= due - 1) {
        const int id = __builtin_ctzll(due);   /* ascending ids */
        const uint64_t sender = due & -due;
        const int column = s->head_column[id];
        const uint64_t targets = s->head_targets[id];
        if (!queues_have_room(s, targets, column))
            continue;
        uint64_t became_full = 0;
        Entry value;
        memcpy(&value, fifo_at(s, id, 0)->value, sizeof value);
        int32_t *queue_head = s->queue_head[column], *queue_count = s->queue_count[column];
        uint64_t (**ring)[SWSIM_LANES] = s->queue_ring[column];
        for (uint64_t m = targets; m; m &= m - 1) {
            const int target = __builtin_ctzll(m);
            const int32_t count = queue_count[target];
            memcpy(ring[target][ring_index(queue_head[target], count, depth)], &value,
                   sizeof value);
            if (count + 1 == depth)
                became_full |= m & -m;
            queue_count[target] = count + 1;
        }
        /* a get stalls on an empty queue only: later appends find the CPE awake */
        for (uint64_t m = targets & ~s->nonempty_queues[column]; m; m &= m - 1) {
            s->cpes[__builtin_ctzll(m)].sleep_until = t;
            s->woke = 1;
        }
        deliveries += (uint64_t)__builtin_popcountll(targets);
        s->nonempty_queues[column] |= targets;
        s->full_queues[column] |= became_full;
        /* a put stalls only while rc_send_depth transfers are blocked */
        if (s->fifo_count[id] >= s->cfg.rc_send_depth) {
            s->cpes[id].sleep_until = t;
            s->woke = 1;
        }
        s->fifo_head[id] = (int32_t)ring_index(s->fifo_head[id], 1, s->fifo_capacity);
        if (--s->fifo_count[id] == 0) {
            s->senders &= ~sender;
            s->due_senders &= ~sender;
            s->head_due[id] = TIME_NEVER;
            continue;
        }
        load_head(s, id);
        if (s->head_due[id] <= t) {
            due_behind = 1;
        } else {
            s->due_senders &= ~sender;
            if (s->head_due[id] < s->next_due)
                s->next_due = s->head_due[id];
        }
    }
    s->cg[CG_RC_DELIVERIES] += deliveries;
    /* A due head that found no room waits for a get to pop one of its full target queues
     * (comm_receive); otherwise the next delivery is the next cycle for a due transfer that
     * was behind a delivered one, else when the next head becomes due. */
    s->deliver_at = due_behind ? t + 1 : s->next_due;
}

/* The next cycle > t at which a delivery may happen: t + 1 if a sender's head is due and has
 * room now (each sender delivers one transfer per cycle), else the next due time. */
int64_t comm_next_event(const Sim *s, int64_t t)
{
    int64_t next = TIME_NEVER;
    for (uint64_t senders = s->senders; senders; senders &= senders - 1) {
        const int id = __builtin_ctzll(senders);
        if (s->head_due[id] > t) {
            if (s->head_due[id] < next)
                next = s->head_due[id];
            continue;
        }
        if (queues_have_room(s, s->head_targets[id], s->head_column[id]))
            return t + 1;
        for (int64_t k = 1; k < s->fifo_count[id]; k++) {
            int64_t due = fifo_at(s, id, k)->due;
            if (due > t) {
                if (due < next)
                    next = due;
                break;
            }
        }
    }
    return next;
}
