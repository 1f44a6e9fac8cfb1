/* Private blocks (core.h): found before the run, each with the issue schedule a batch
 * replays (engine_batch.c). */
#include <stdlib.h>
#include <string.h>
#include "execute.h"

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
int find_blocks(Sim *s)
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
