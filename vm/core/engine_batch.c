/* Batches: a CPE runs a private block's precomputed schedule (engine_blocks.c) in one visit. */
#include <string.h>
#include "execute.h"

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
int run_batch(Sim *s, Cpe *c, const Instr *head, int64_t t, int64_t start)
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
void rewind_batches(Sim *s, Cpe *const *cpe, int num_running, int faulted, int64_t t)
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
