/* Row/column barriers (docs/timing.md "Barriers"). A barrier is identified by its direction,
 * its line (row or column index) and its mask; it records which participants arrived. */
#include <stdlib.h>
#include "core.h"

int barrier_init(Sim *s)
{
    s->barrier_arrived = calloc(2 * SWSIM_MAX_MESH_SIDE * 256, 1);
    return s->barrier_arrived ? 0 : SWSIM_ERROR_MEMORY;
}

/* synr (column = 0: participants along the row) or sync (column = 1). */
int barrier_arrive(Sim *s, Cpe *c, int column, uint64_t mask, int64_t t, Fault *fault)
{
    int64_t line_length = column ? s->cfg.mesh_rows : s->cfg.mesh_cols;
    int line = column ? c->col : c->row;
    int position = column ? c->row : c->col;
    uint64_t participants = 0;   /* CPE ids */
    int any_unspawned = 0;
    for (int k = 0; k < line_length; k++) {
        if (!(mask >> k & 1))
            continue;
        int64_t id = column ? (int64_t)k * s->cfg.mesh_cols + c->col
                            : (int64_t)c->row * s->cfg.mesh_cols + k;
        if (!(s->spawned_mask >> id & 1))
            any_unspawned = 1;
        else
            participants |= UINT64_C(1) << id;
    }
    fault->a = mask;
    if (!(mask >> position & 1)) {
        fault->kind = STOP_BARRIER;
        fault->b = BARRIER_NOT_IN_MASK;
        return fault->kind;
    }
    if (mask >> line_length) {
        fault->kind = STOP_BARRIER;
        fault->b = BARRIER_OUTSIDE_MESH;
        return fault->kind;
    }
    if (any_unspawned) {
        fault->kind = STOP_BARRIER;
        fault->b = BARRIER_PARTICIPANT_UNSPAWNED;
        return fault->kind;
    }
    if (s->num_releases == SWSIM_MAX_CPES) {   /* impossible: each pending release holds a
                                                   waiting CPE; never overflow */
        s->error = SWSIM_ERROR_INTERNAL;
        return 0;
    }
    uint8_t *arrived = &s->barrier_arrived[(column * SWSIM_MAX_MESH_SIDE + line) * 256 + mask];
    *arrived |= (uint8_t)(1u << position);
    c->wait_until = TIME_NEVER;
    c->dirty = 1;
    if (*arrived != mask)
        return 0;
    *arrived = 0;
    int64_t release = t + s->cfg.barrier_cycles;
    for (uint64_t m = participants; m; m &= m - 1)
        s->cpes[__builtin_ctzll(m)].wait_until = release;
    s->woke = 1;
    s->releases[s->num_releases++] = release;
    return 0;
}

/* Phase 1(c): count the barriers released at t. */
void barrier_release(Sim *s, int64_t t)
{
    for (int k = 0; k < s->num_releases;) {
        if (s->releases[k] <= t) {
            s->cg[CG_BARRIERS]++;
            s->releases[k] = s->releases[--s->num_releases];
            s->step_retry = 1;   /* the CPEs it releases may be in step again (engine.c) */
        } else {
            k++;
        }
    }
}

int64_t barrier_next_event(const Sim *s, int64_t t)
{
    int64_t next = TIME_NEVER;
    for (int k = 0; k < s->num_releases; k++)
        if (s->releases[k] > t && s->releases[k] < next)
            next = s->releases[k];
    return next;
}
