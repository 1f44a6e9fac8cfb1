/* The interface between the files of the engine: the cycle loop (engine.c) and its
 * strategies, each in its own file. Per-CPE issue (engine_step.h) and in-step issue
 * (engine_instep.h) are headers of static inline functions, inlined into the cycle loop's
 * clones; batches (engine_batch.c), private blocks' schedules (engine_blocks.c), spin loops
 * (engine_ahead.c), skipping (engine_skip.c) and trace spans (trace.c) are called. */
#ifndef SWSIM_ENGINE_H
#define SWSIM_ENGINE_H
#include "core.h"
#include "semantics.h"

enum { ISSUED_NOTHING = 0, ISSUED = 1, FAULTED = -1 };

/* trace.c (emit_span: core.h) */
void trace_cycle(Sim *s, const Cpe *c, int kind, int64_t t);
void trace_close(Sim *s, const Cpe *c, int64_t end);

/* engine_ahead.c: spin-loop fixed points and running ahead */
void mark_unchanged_loop_head(Sim *s, Cpe *c, int64_t t);

/* At a taken backward branch (after cycle t): marks the CPE's loop head; the snapshot of a
 * loop that changed nothing since the last mark is engine_ahead.c's. */
static inline void mark_loop_head(Sim *s, Cpe *c, int64_t t)
{
    if (c->dirty || c->mark_pc != c->pc) {
        c->mark_pc = c->pc;
        c->armed = c->confirmed = c->dirty = 0;
        c->mark_cycle = t;
        c->num_reads = c->reads_overflow = 0;
        return;
    }
    mark_unchanged_loop_head(s, c, t);
}

static inline int at_fixed_point(const Cpe *c)
{
    return c->confirmed && !c->dirty && c->ldm_changed <= c->window_start;
}

void repeat_period(CpeCold *cold, Cpe *c, int64_t t, int64_t cycles);
void run_ahead(Sim *s, Cpe *c, int64_t t);
void return_from_ahead(Sim *s, Cpe *c, int64_t keep);

/* engine_batch.c */
int run_batch(Sim *s, Cpe *c, const Instr *head, int64_t t, int64_t start);
void rewind_batches(Sim *s, Cpe *const *cpe, int num_running, int faulted, int64_t t);

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


/* engine_blocks.c */
int find_blocks(Sim *s);

/* engine_skip.c */
int64_t next_unit_event(const Sim *s, int64_t t);
int64_t skip_ahead(Sim *s, Cpe *const *cpe, int num_running, int issued_any, int64_t t);

/* The same for a CPE that did not issue at t, as found when it stalled: its sleep_until is
 * the wake time computed then, which nothing but its own issue can change (phase 1 events
 * that wake it set sleep_until before it issues again), or it waits at a barrier. */
static inline int64_t stalled_until(const Cpe *c, int64_t t)
{
    return c->wait_until > t ? c->wait_until : c->sleep_until;
}

#endif
