/* The cycle loop of a core group (docs/timing.md): events, issue, counters, stops, trace
 * spans, and skipping of idle time and of spin loops at a fixed point. */
#include <stdlib.h>
#include <string.h>
#include "engine_instep.h"

const char *swsim_reason_name(int32_t reason)
{
    return reason >= 0 && reason < SWSIM_NUM_REASONS ? REASON_NAMES[reason] : "";
}

/* ---- the run ------------------------------------------------------------------------------ */

static void stop_with_report(Sim *s, int kind, int64_t cycle)
{
    SwResult *r = s->result;
    r->stop_kind = kind;
    r->stop_cpe = -1;
    r->stop_pc = 0;
    r->stop_cycle = cycle;
    r->stop_a = kind == STOP_CYCLE_LIMIT ? (uint64_t)s->cfg.max_cycles : 0;
}

/* Takes back cycle t's charges of the CPEs that issued before a fault in that cycle. */
static void uncharge_cycle(Sim *s, const int *running, int count)
{
    for (int k = 0; k < count; k++) {
        Cpe *c = &s->cpes[running[k]];
        c->counters[c->charged[0]]--;
        c->counters[c->charged[1]]--;
    }
}

/* Whether a CPE that is not at a confirmed spin fixed point issued in cycle t (which then
 * cannot start a skip), apart from CPEs in a batch beyond t + 1 (skip_ahead stops at their
 * end); asked after the cycle, stopping at the first such CPE. */
static int issued_unconfirmed(Cpe *const *cpe, int num_running, int64_t t)
{
    for (int k = 0; k < num_running; k++)
        if (cpe[k]->last_state == SWSIM_STATE_RUNNING && !cpe[k]->confirmed
            && cpe[k]->ahead_until <= t + 1)
            return 1;
    return 0;
}

/* Simulates the cycles from s->next_cycle on. Returns the kernel cycles once the run ended,
 * or RUN_PAUSED before the first cycle >= horizon (to be resumed by another call: the loop
 * keeps no state of its own between cycles, so pausing changes nothing). */
enum { RUN_PAUSED = -1 };

HOT_LOOP_CLONES
static int64_t run_cycles(Sim *s, int64_t horizon)
{
    int running[SWSIM_MAX_CPES], num_running = s->num_running;
    memcpy(running, s->running, sizeof running);
    Cpe *cpe[SWSIM_MAX_CPES];   /* &s->cpes[running[k]], without the multiply */
    for (int k = 0; k < num_running; k++)
        cpe[k] = &s->cpes[running[k]];
    if (num_running == 0)
        return 0;
    s->horizon = horizon;
    s->bound_cycle = -1;
    if (s->next_cycle == 0)   /* spawned CPEs start alike but for their data */
        test_in_step(s, cpe, num_running, 0);
    for (int64_t t = s->next_cycle;; t++) {
        if (t >= horizon) {
            memcpy(s->running, running, sizeof running);
            s->num_running = num_running;
            s->next_cycle = t;
            return RUN_PAUSED;
        }
        if (t >= s->cfg.max_cycles) {
            stop_with_report(s, STOP_CYCLE_LIMIT, s->cfg.max_cycles);
            return s->cfg.max_cycles;
        }
        if (s->dma.current >= 0 || s->dma.active_count || s->dma.waiting_count)
            dma_step(s, t);
        if (s->senders && t >= s->deliver_at)
            comm_deliver(s, t);
        if (s->num_releases)
            barrier_release(s, t);
        int issued_any = 0, faulted = 0;
        int in_step = !s->in_step ? NOT_ALIKE
                      : s->grouped ? issue_group(s, cpe, num_running, t, &faulted)
                      : issue_in_step(s, cpe, num_running, t, &faulted, 0);
        if (in_step == NOT_ALIKE) {
            s->in_step = 0;
            const Instr *first_at = cpe[0]->at;
            for (int k = 0; k < num_running && in_step != FAULTED; k++) {
                int issued = issue(s, cpe[k], t);
                if (issued == FAULTED) {
                    in_step = FAULTED;
                    faulted = k;
                }
                issued_any |= issued;
            }
            if (in_step != FAULTED && cpe[0]->at < first_at && --s->step_retry <= 0)
                test_in_step(s, cpe, num_running, t + 1);
        } else {
            issued_any = in_step;
            s->result->step_cycles += !s->grouped;
        }
        if (in_step == FAULTED) {
            rewind_batches(s, cpe, num_running, faulted, t);
            uncharge_cycle(s, running, faulted);
            return t;
        }
        int may_skip = s->cfg.skip
                       && !(issued_any
                            && (s->cfg.trace || issued_unconfirmed(cpe, num_running, t)));
        if (s->error)
            return t;
        if (s->cfg.trace)
            for (int k = 0; k < num_running; k++) {
                Cpe *c = &s->cpes[running[k]];
                trace_cycle(s, c, c->last_state == SWSIM_STATE_RUNNING
                                  ? SWSIM_SPAN_ISSUE : 1 + c->last_state, t);
                if (!c->running)
                    trace_close(s, c, t + 1);
            }
        if (s->halted_this_cycle) {
            int still_running = 0;
            for (int k = 0; k < num_running; k++)
                if (cpe[k]->running) {
                    cpe[still_running] = cpe[k];
                    running[still_running++] = running[k];
                }
            num_running = still_running;
            s->halted_this_cycle = 0;
            s->in_step = 0;
            if (num_running == 0) {
                int64_t end = dma_drain(s, t, s->cfg.max_cycles);
                if (end != TIME_NEVER)
                    return end;
                stop_with_report(s, STOP_CYCLE_LIMIT, s->cfg.max_cycles);
                return s->cfg.max_cycles;
            }
        }
        if (!issued_any && next_unit_event(s, t) == TIME_NEVER) {
            int64_t wake = TIME_NEVER;
            for (int k = 0; k < num_running && wake == TIME_NEVER; k++)
                wake = stalled_until(cpe[k], t);
            if (wake == TIME_NEVER) {
                stop_with_report(s, STOP_DEADLOCK, t);
                return t + 1;
            }
        }
        if (may_skip)
            t += skip_ahead(s, cpe, num_running, issued_any, t);
    }
}

/* Fills leader->group_checks with the union of the ready-time slots of the leader and the
 * word after it, if it has at most NUM_GROUP_CHECKS slots (padded with ZERO_SLOT). */
static int group_checks(Instr *leader, const Instr *next)
{
    uint8_t *group = leader->group_checks;
    int n = 0;
    const Instr *pair[2] = {leader, next};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < NUM_CHECKS && pair[i]->checks[k] != ZERO_SLOT; k++) {
            uint8_t slot = pair[i]->checks[k];
            if (memchr(group, slot, (size_t)n))
                continue;
            if (n == NUM_GROUP_CHECKS)
                return 0;
            group[n++] = slot;
        }
    while (n < NUM_GROUP_CHECKS)
        group[n++] = ZERO_SLOT;
    return 1;
}


static int config_is_valid(const SwConfig *cfg, const SwJob *job)
{
    return SWSIM_CONFIG_IN_RANGE(cfg)
           && cfg->mem_base + cfg->mem_bytes >= cfg->mem_base
           && job->code_words >= 0 && cfg->max_cycles >= 0;
}

static void init_cpe(Sim *s, Cpe *c, int id)
{
    const SwJob *job = s->job;
    c->id = id;
    c->row = id / (int)s->cfg.mesh_cols;
    c->col = id % (int)s->cfg.mesh_cols;
    c->ldm = job->ldm + (size_t)id * s->ldm_bytes;
    c->running = job->spawned[id] != 0;
    c->pc = job->entry_pc;
    memcpy(c->regs, job->regs + (size_t)id * SWSIM_NUM_REGS * SWSIM_LANES,
           ISA_ZERO_REG * sizeof c->regs[0]);
    c->last_state = SWSIM_STATE_RUNNING;
    c->at = word_at(s, c->pc);
    s->cold[id].halt_cycle = -1;
    s->cold[id].span_kind = -1;
    c->mark_pc = UINT64_MAX;
    c->ldm_changed = -1;
}

static int init_sim(Sim *s)
{
    s->num_cpes = (int)(s->cfg.mesh_rows * s->cfg.mesh_cols);
    s->ldm_bytes = (uint64_t)s->cfg.ldm_bytes;
    s->cg = s->result->cg_counters;
    const int64_t latency[NUM_LATENCY_CLASSES] = SWSIM_CONFIG_LATENCIES(&s->cfg);
    memcpy(s->latency, latency, sizeof s->latency);
    s->cpes = aligned_alloc(_Alignof(Cpe), (size_t)s->num_cpes * sizeof *s->cpes);
    if (s->cpes)
        memset(s->cpes, 0, (size_t)s->num_cpes * sizeof *s->cpes);
    s->cold = calloc((size_t)s->num_cpes, sizeof *s->cold);
    s->code_words = s->job->code_words;
    s->code = calloc((size_t)s->code_words + 1, sizeof *s->code);
    if (!s->cpes || !s->cold || !s->code)
        return SWSIM_ERROR_MEMORY;
    for (int64_t i = 0; i < s->code_words; i++)
        decode_word(s->job->code[i], s->latency, &s->code[i]);
    s->code[s->code_words].flags = F_BAD_PC;
    s->step_backoff = s->step_retry = 1;
    s->may_run_ahead = s->cfg.skip && !s->cfg.trace;   /* stepping, or spans per cycle */
    s->return_from_ahead = return_from_ahead;
    /* Without a divide or sqrt in the code, P0 is never busy: the divide check can go. */
    int has_divide = 0;
    for (int64_t i = 0; i < s->code_words; i++)
        has_divide |= s->code[i].cls == CLS_FDIV;
    for (int64_t i = 0; i < s->code_words; i++) {
        Instr *in = &s->code[i];
        int n = 0;
        for (int k = 0; k < NUM_CHECKS; k++)
            if (in->checks[k] != ZERO_SLOT && (has_divide || in->checks[k] != BUSY_SLOT))
                in->checks[n++] = in->checks[k];
        while (n < NUM_CHECKS)
            in->checks[n++] = ZERO_SLOT;
        if (in->checks[3] != ZERO_SLOT)
            in->flags |= F_MORE_CHECKS;
    }
    for (int64_t i = 0; i < s->code_words; i++) {
        Instr *in = &s->code[i], *next = &s->code[i + 1];
        in->pipe_alone = (uint8_t)leader_pipe(in, NULL);
        if (in->id == I_INVALID || in->ends_group || i + 1 == s->code_words
            || next->id == I_INVALID)
            continue;
        in->flags |= F_CONSIDER_NEXT;
        if (can_pair(in, next))
            in->flags |= F_PAIRS_NEXT;
        if (group_checks(in, next))
            in->flags |= F_GROUP_CHECKS;
    }
    int status = find_blocks(s);
    if (status)
        return status;
    for (int i = 0; i < s->num_cpes; i++) {
        init_cpe(s, &s->cpes[i], i);
        if (s->cpes[i].running) {
            s->spawned_mask |= UINT64_C(1) << i;
            s->running[s->num_running++] = i;
        }
    }
    status = comm_init(s);
    if (!status)
        status = dma_init(s);
    if (!status)
        status = barrier_init(s);
    if (!status)
        status = icache_init(s);
    return status;
}

static void free_sim(Sim *s)
{
    comm_free(s);
    free(s->cpes);
    free(s->cold);
    free(s->code);
    free(s->blocks);
    free(s->steps);
    free(s->uops);
    free(s->undo);
    free(s->dma.pool);
    free(s->dma.waiting);
    free(s->dma.active);
    free(s->dma.put_buffer);
    free(s->barrier_arrived);
    icache_free(s);
}

/* Results: counters (finished cycles of halted CPEs), pcs, registers, open trace spans. */
static void finish_run(Sim *s, int64_t kernel_cycles)
{
    SwResult *r = s->result;
    r->kernel_cycles = kernel_cycles;
    for (int i = 0; i < s->num_cpes; i++) {
        Cpe *c = &s->cpes[i];
        if (!s->job->spawned[i])
            continue;
        /* a halt in the cycle of a fault was taken back (uncharge_cycle) */
        const int64_t halt_cycle = s->cold[i].halt_cycle;
        int64_t active = c->running || halt_cycle >= kernel_cycles ? kernel_cycles
                                                                    : halt_cycle + 1;
        c->counters[COUNTER_ACTIVE] = (uint64_t)active;
        if (!c->running) {
            int64_t finished = kernel_cycles - (halt_cycle + 1);
            if (finished > 0) {
                c->counters[COUNTER_IDLE(0, REASON_FINISHED)] += (uint64_t)finished;
                c->counters[COUNTER_IDLE(1, REASON_FINISHED)] += (uint64_t)finished;
            }
            c->last_state = REASON_FINISHED;
        }
        if (s->cfg.trace)
            trace_close(s, c, kernel_cycles);
        memcpy(&r->cpe_counters[i * SWSIM_NUM_CPE_COUNTERS], c->counters, sizeof c->counters);
        r->last_state[i] = c->last_state;
        r->pcs[i] = c->pc;
        memcpy(s->job->regs + (size_t)i * SWSIM_NUM_REGS * SWSIM_LANES, c->regs,
               ISA_ZERO_REG * sizeof c->regs[0]);
    }
    if (s->cfg.trace)
        dma_close_spans(s, kernel_cycles);
}

/* ---- the public interface: a run in one call, or in steps up to cycle horizons ---------- */

struct SwSim {
    Sim sim;
    int ended;
};

SwSim *swsim_start(const SwConfig *config, const SwJob *job, SwResult *result)
{
    memset(result, 0, sizeof *result);
    if (!config_is_valid(config, job)) {
        result->status = SWSIM_ERROR_CONFIG;
        return NULL;
    }
    SwSim *handle = calloc(1, sizeof *handle);
    if (!handle) {
        result->status = SWSIM_ERROR_MEMORY;
        return NULL;
    }
    Sim *s = &handle->sim;
    s->cfg = *config;
    s->job = job;
    s->result = result;
    s->dma.current = -1;
    s->deliver_at = TIME_NEVER;
    int status = init_sim(s);
    if (status) {
        free_sim(s);
        free(handle);
        result->status = status;
        return NULL;
    }
    return handle;
}

int32_t swsim_advance(SwSim *handle, int64_t horizon)
{
    if (!handle->ended) {
        int64_t kernel_cycles = run_cycles(&handle->sim, horizon);
        if (kernel_cycles != RUN_PAUSED) {
            finish_run(&handle->sim, kernel_cycles);
            handle->ended = 1;
        }
    }
    return handle->ended;
}

int64_t swsim_cycle(const SwSim *handle)
{
    return handle->ended ? handle->sim.result->kernel_cycles : handle->sim.next_cycle;
}

int32_t swsim_finish(SwSim *handle)
{
    SwResult *result = handle->sim.result;
    int status = handle->ended ? handle->sim.error : SWSIM_ERROR_UNFINISHED;
    free_sim(&handle->sim);
    free(handle);
    if (status) {
        free(result->spans);
        result->spans = NULL;
        result->num_spans = 0;
    }
    return result->status = status;
}

int swsim_run(const SwConfig *config, const SwJob *job, SwResult *result)
{
    SwSim *handle = swsim_start(config, job, result);
    if (!handle)
        return result->status;
    swsim_advance(handle, TIME_NEVER);
    return swsim_finish(handle);
}

void swsim_free_result(SwResult *result)
{
    free(result->spans);
    result->spans = NULL;
    result->num_spans = 0;
}

