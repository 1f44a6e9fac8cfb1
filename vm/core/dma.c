/* The CG's DMA engine (docs/timing.md "DMA"): a waiting FIFO, at most dma_active_requests
 * active requests served round robin, one 128-byte transaction in progress at a time. */
#include <stdlib.h>
#include <string.h>
#include "core.h"

int dma_init(Sim *s)
{
    DmaEngine *e = &s->dma;
    e->pool_size = (int64_t)s->num_cpes * s->cfg.dma_channel_depth + s->cfg.dma_active_requests;
    e->pool = calloc((size_t)e->pool_size + 1, sizeof *e->pool);
    e->waiting = calloc((size_t)e->pool_size + 1, sizeof *e->waiting);
    e->active = calloc((size_t)s->cfg.dma_active_requests + 1, sizeof *e->active);
    e->put_buffer = malloc((size_t)s->cfg.dma_transaction_bytes);
    if (!e->pool || !e->waiting || !e->active || !e->put_buffer)
        return SWSIM_ERROR_MEMORY;
    for (int64_t i = 0; i < e->pool_size; i++)
        e->pool[i].cpe = -1;
    e->current = -1;
    return 0;
}

/* Bytes of a block in memory: the whole request unless it is strided (DmaRequest.strided). */
static uint64_t block_length(const DmaRequest *r)
{
    return r->strided ? r->block : r->size;
}

/* Number of transactions: each block is cut at transaction-size aligned boundaries. */
static uint64_t count_transactions(const Sim *s, const DmaRequest *r)
{
    uint64_t block = block_length(r), segment = (uint64_t)s->cfg.dma_transaction_bytes;
    uint64_t count = 0;
    for (uint64_t done = 0; done < r->size; done += block) {
        uint64_t start = s->cfg.mem_base + r->mem_offset + done / block * (block + r->stride);
        uint64_t length = r->size - done < block ? r->size - done : block;
        count += (start % segment + length + segment - 1) / segment;
    }
    return count;
}

/* ---- the descriptor and where its bytes go (docs/timing.md "DMA descriptor and modes") ---- */

/* A field of the 256-bit descriptor; no field crosses a 64-bit lane. */
static uint64_t descriptor_field(const uint64_t *descriptor, int low, int width)
{
    return (descriptor[low / 64] >> (low % 64)) & ((UINT64_C(1) << width) - 1);
}
#define FIELD(descriptor, NAME) descriptor_field(descriptor, DESC_##NAME##_LOW, DESC_##NAME##_WIDTH)

/* The LDM run where the request's bytes [offset, offset + bytes) begin: the CPEs holding it
 * (a mask), its LDM address, and its length (at most bytes). ROW and RANK deal `unit` bytes at
 * a time to their sharers in turn; the other modes place byte k at ldm_addr + k. */
static uint64_t ldm_run(const DmaRequest *r, uint64_t offset, uint64_t bytes, uint64_t *cpes,
                        uint64_t *ldm)
{
    if (!r->sharers) {
        *cpes = r->targets;
        *ldm = r->ldm_addr + offset;
        return bytes;
    }
    uint64_t unit = offset / r->unit, within = offset % r->unit;
    *cpes = UINT64_C(1) << r->sharer[unit % (uint64_t)r->sharers];
    *ldm = r->ldm_addr + unit / (uint64_t)r->sharers * r->unit + within;
    return bytes < r->unit - within ? bytes : r->unit - within;
}

/* Bytes from the LDM address that the request covers in a CPE it reaches. */
static uint64_t ldm_extent(const DmaRequest *r)
{
    if (!r->sharers)
        return r->size;
    uint64_t last = (r->size - 1) / r->unit, sharers = (uint64_t)r->sharers;
    /* the last round of dealing is widest at its first sharer: a full unit unless alone */
    return last / sharers * r->unit + (last % sharers ? r->unit : r->size - last * r->unit);
}

/* The CPEs a transfer in `mode` reaches, from the issuer and the descriptor's mask. */
static int place(const Sim *s, const Cpe *c, uint64_t mode, uint64_t mask, DmaRequest *r)
{
    int rows = (int)s->cfg.mesh_rows, cols = (int)s->cfg.mesh_cols;
    r->targets = 0;
    r->sharers = 0;
    if (mode == DMA_MODE_PE) {
        r->targets = UINT64_C(1) << c->id;
    } else if (mode == DMA_MODE_BCAST) {      /* mask bit i: row i */
        for (int i = 0; i < rows; i++)
            if (mask >> i & 1)
                r->targets |= ((UINT64_C(1) << cols) - 1) << (i * cols);
    } else if (mode == DMA_MODE_BROW) {       /* mask bit j: column j of the issuer's row */
        for (int j = 0; j < cols; j++)
            if (mask >> j & 1)
                r->targets |= UINT64_C(1) << (c->row * cols + j);
    } else {                                  /* ROW: the issuer's row; RANK: its column */
        r->sharers = mode == DMA_MODE_ROW ? cols : rows;
        for (int k = 0; k < r->sharers; k++)
            r->sharer[k] = mode == DMA_MODE_ROW ? c->row * cols + k : k * cols + c->col;
        if (!r->block && r->size % (uint64_t)r->sharers)
            return DMA_UNEVEN_SPLIT;
        r->unit = r->block ? r->block : r->size / (uint64_t)r->sharers;
    }
    return r->sharers || r->targets ? -1 : DMA_EMPTY_MASK;
}

/* Decodes and checks a dma instruction's request (MACHINE.md section 6); -1 if it is valid,
 * else the DMA_PROBLEMS index. */
static int decode_request(const Sim *s, const Cpe *c, const uint64_t *descriptor,
                          uint64_t mem_addr, uint64_t ldm_addr, DmaRequest *r)
{
    uint64_t op = FIELD(descriptor, OP), mode = FIELD(descriptor, MODE);
    r->size = FIELD(descriptor, SIZE);
    r->block = FIELD(descriptor, BLOCK);
    r->stride = FIELD(descriptor, STRIDE);
    r->reply = FIELD(descriptor, REPLY);
    r->ldm_addr = ldm_addr;
    r->put = op == DMA_OP_PUT || op == DMA_OP_PUT_P;
    r->barrier = op == DMA_OP_BARRIER;
    r->broadcast = mode == DMA_MODE_BCAST || mode == DMA_MODE_BROW;
    if (!r->put && !r->barrier && op != DMA_OP_GET && op != DMA_OP_GET_P)
        return DMA_BAD_OP;
    if (r->barrier) {   /* reads only the reply field */
        r->size = r->block = r->stride = 0;
        return r->reply % 4 != 0 || r->reply > s->ldm_bytes - 4 ? DMA_BAD_REPLY : -1;
    }
    if (mode > DMA_MODE_RANK)
        return DMA_BAD_MODE;
    if (r->put && (mode == DMA_MODE_BCAST || mode == DMA_MODE_BROW))
        return DMA_PUT_BROADCAST;
    if (r->size == 0)
        return DMA_SIZE_ZERO;
    r->strided = r->block && r->size > r->block
                 && (r->stride || !s->cfg.dma_merge_unstrided_blocks);
    int problem = place(s, c, mode, FIELD(descriptor, MASK), r);
    if (problem >= 0)
        return problem;
    uint64_t extent = ldm_extent(r);
    if (ldm_addr > s->ldm_bytes || extent > s->ldm_bytes - ldm_addr)
        return DMA_LDM_RANGE;
    /* size < 2^24, so the footprint below cannot overflow */
    uint64_t block = block_length(r);
    uint64_t blocks = (r->size + block - 1) / block;
    uint64_t footprint = (blocks - 1) * (block + r->stride) + (r->size - (blocks - 1) * block);
    if (mem_addr < s->cfg.mem_base || mem_addr - s->cfg.mem_base > s->cfg.mem_bytes
        || footprint > s->cfg.mem_bytes - (mem_addr - s->cfg.mem_base))
        return DMA_MEM_RANGE;
    r->mem_offset = mem_addr - s->cfg.mem_base;
    return r->reply % 4 != 0 || r->reply > s->ldm_bytes - 4 ? DMA_BAD_REPLY : -1;
}

/* Issue of a dma instruction: check it and append it to the waiting FIFO. */
int dma_request(Sim *s, Cpe *c, const uint64_t *descriptor, uint64_t mem_addr,
                uint64_t ldm_addr, int64_t t, Fault *fault)
{
    DmaEngine *e = &s->dma;
    DmaRequest request = {0};
    int problem = decode_request(s, c, descriptor, mem_addr, ldm_addr, &request);
    if (problem >= 0) {
        fault->kind = STOP_DMA;
        fault->a = 0;
        fault->b = problem;
        return fault->kind;
    }
    int64_t slot = 0;
    while (slot < e->pool_size && e->pool[slot].cpe >= 0)
        slot++;
    if (slot == e->pool_size) {   /* impossible by the channel-depth stall; never corrupt */
        s->error = SWSIM_ERROR_INTERNAL;
        return 0;
    }
    request.cpe = c->id;
    request.issue = t;
    e->pool[slot] = request;
    e->waiting[(e->waiting_head + e->waiting_count++) % e->pool_size] = slot;
    c->dma_waiting++;
    uint64_t transactions = count_transactions(s, &request);
    s->cg[CG_DMA_REQUESTS]++;
    s->cg[CG_DMA_BYTES_REQUESTED] += request.size;
    s->cg[CG_DMA_TRANSACTIONS] += transactions;
    s->cg[CG_DMA_BYTES_MOVED] += transactions * (uint64_t)s->cfg.dma_transaction_bytes;
    return 0;
}

static int is_ready(const Sim *s, const DmaRequest *r, int64_t t)
{
    return r->handed < r->size && r->issue + s->cfg.dma_latency <= t;
}

/* The request's reply word gets 1 added, and the request leaves the engine. */
static void complete_request(Sim *s, int64_t index, int64_t t)
{
    DmaEngine *e = &s->dma;
    DmaRequest *r = &e->pool[index];
    Cpe *issuer = &s->cpes[r->cpe];
    before_ldm_write(s, issuer, r->reply, 4, t);
    uint8_t *reply = issuer->ldm + r->reply;   /* little-endian 32-bit add, mod 2^32 */
    uint32_t value = (uint32_t)reply[0] | (uint32_t)reply[1] << 8 | (uint32_t)reply[2] << 16
                     | (uint32_t)reply[3] << 24;
    value++;
    for (int k = 0; k < 4; k++)
        reply[k] = (uint8_t)(value >> (8 * k));
    note_ldm_write(issuer, r->reply, 4, t);
    if (s->cfg.trace)
        emit_span(s, r->cpe, SWSIM_SPAN_DMA, r->issue, t);
    int64_t k = 0;
    while (e->active[k] != index)
        k++;
    memmove(&e->active[k], &e->active[k + 1], (size_t)(e->active_count - k - 1) * sizeof *e->active);
    e->active_count--;
    r->cpe = -1;
}

/* Engine time of the transaction of `bytes` at `mem` that starts the request's byte
 * r->handed (docs/timing.md "DMA"): a read costs dma_transaction_cycles
 * (dma_bcast_transaction_cycles, if set, in BCAST/BROW mode), plus dma_get_request_cycles if it
 * is the request's first. A write is one write command for a whole line, else one per
 * dma_put_write_bytes piece it touches (at most dma_put_partial_writes, if set); with
 * dma_put_strided_pro_rata a strided put's writes cost dma_put_write_cycles per line pro rata
 * instead. The first transaction of each block of a strided request adds dma_block_put_cycles
 * (a put), or dma_block_get_cycles but at least what brings the block's reads to
 * dma_block_get_min_cycles (a get); a put's last transaction waits for the acknowledgement. */
static int64_t transaction_cycles(const Sim *s, const DmaRequest *r, uint64_t mem,
                                  uint64_t bytes)
{
    int64_t block_cost = r->strided && r->handed % r->block == 0;
    uint64_t line = (uint64_t)s->cfg.dma_transaction_bytes;
    if (!r->put) {
        int64_t read = r->broadcast && s->cfg.dma_bcast_transaction_cycles
                       ? s->cfg.dma_bcast_transaction_cycles : s->cfg.dma_transaction_cycles;
        int64_t cycles = read + (r->handed == 0) * s->cfg.dma_get_request_cycles;
        if (block_cost) {   /* the block holds the engine at least dma_block_get_min_cycles */
            uint64_t length = r->size - r->handed < r->block ? r->size - r->handed : r->block;
            uint64_t reads = ((s->cfg.mem_base + mem) % line + length + line - 1) / line;
            int64_t rest = s->cfg.dma_block_get_min_cycles - read * (int64_t)reads;
            cycles += rest > s->cfg.dma_block_get_cycles ? rest : s->cfg.dma_block_get_cycles;
        }
        return cycles;
    }
    int64_t cycles;
    if (r->strided && s->cfg.dma_put_strided_pro_rata) {
        uint64_t scaled = (uint64_t)s->cfg.dma_put_write_cycles * bytes;
        cycles = (int64_t)((scaled + line - 1) / line);
    } else {
        uint64_t first = s->cfg.mem_base + mem, piece = (uint64_t)s->cfg.dma_put_write_bytes;
        uint64_t writes = bytes == line ? 1 : (first + bytes - 1) / piece - first / piece + 1;
        uint64_t cap = (uint64_t)s->cfg.dma_put_partial_writes;
        if (bytes != line && cap && writes > cap)
            writes = cap;
        cycles = (int64_t)writes * s->cfg.dma_put_write_cycles;
    }
    int64_t last = r->handed + bytes == r->size;
    return cycles + block_cost * s->cfg.dma_block_put_cycles + last * s->cfg.dma_put_ack_cycles;
}

/* Completes the first active BARRIER with no earlier request of its CPE still active (they
 * were activated before it); returns whether there was one. */
static int complete_barrier(Sim *s, int64_t t)
{
    DmaEngine *e = &s->dma;
    for (int64_t k = 0; k < e->active_count; k++) {
        const DmaRequest *r = &e->pool[e->active[k]];
        if (!r->barrier)
            continue;
        int64_t j = 0;
        while (j < k && e->pool[e->active[j]].cpe != r->cpe)
            j++;
        if (j == k) {
            complete_request(s, e->active[k], t);
            return 1;
        }
    }
    return 0;
}

static void finish_transaction(Sim *s, int64_t t)
{
    DmaEngine *e = &s->dma;
    DmaRequest *r = &e->pool[e->current];
    if (r->put) {
        memcpy(s->job->mem + e->current_mem, e->put_buffer, e->current_bytes);
    } else {
        for (uint64_t done = 0, bytes, cpes, ldm; done < e->current_bytes; done += bytes) {
            bytes = ldm_run(r, e->current_offset + done, e->current_bytes - done, &cpes, &ldm);
            for (uint64_t m = cpes; m; m &= m - 1) {
                Cpe *target = &s->cpes[__builtin_ctzll(m)];
                before_ldm_write(s, target, ldm, bytes, t);
                memcpy(target->ldm + ldm, s->job->mem + e->current_mem + done, bytes);
                note_ldm_write(target, ldm, bytes, t);
            }
        }
    }
    int64_t index = e->current;
    e->current = -1;
    if (r->handed == r->size)
        complete_request(s, index, t);
}

static void start_transaction(Sim *s, int64_t index, int64_t t, int dry)
{
    DmaEngine *e = &s->dma;
    DmaRequest *r = &e->pool[index];
    uint64_t block = block_length(r), segment = (uint64_t)s->cfg.dma_transaction_bytes;
    uint64_t offset_in_block = r->handed % block;
    uint64_t mem = r->mem_offset + r->handed / block * (block + r->stride) + offset_in_block;
    uint64_t bytes = block - offset_in_block;
    uint64_t to_boundary = segment - (s->cfg.mem_base + mem) % segment;
    if (to_boundary < bytes)
        bytes = to_boundary;
    if (r->size - r->handed < bytes)
        bytes = r->size - r->handed;
    e->current = index;
    e->current_mem = mem;
    e->current_offset = r->handed;
    e->current_bytes = bytes;
    e->current_done = t + transaction_cycles(s, r, mem, bytes);
    if (r->put && !dry)   /* a put's LDM runs are each in one CPE */
        for (uint64_t done = 0, length, cpes, ldm; done < bytes; done += length) {
            length = ldm_run(r, r->handed + done, bytes - done, &cpes, &ldm);
            memcpy(e->put_buffer + done, s->cpes[__builtin_ctzll(cpes)].ldm + ldm, length);
        }
    r->handed += bytes;
    e->last_served = r->number;
    e->served_any = 1;
}

/* Phase 1(a) of cycle t. A dry step (run-ahead planning, see dma_quiet_until) moves no bytes
 * and never completes a request. */
static void step(Sim *s, int64_t t, int dry)
{
    DmaEngine *e = &s->dma;
    if (e->current >= 0 && e->current_done <= t) {
        if (dry)
            e->current = -1;
        else
            finish_transaction(s, t);
    }
    do {
        while (e->active_count < s->cfg.dma_active_requests && e->waiting_count > 0) {
            int64_t index = e->waiting[e->waiting_head];
            e->waiting_head = (e->waiting_head + 1) % e->pool_size;
            e->waiting_count--;
            e->pool[index].number = e->next_number++;
            e->active[e->active_count++] = index;
            Cpe *issuer = &s->cpes[e->pool[index].cpe];
            issuer->dma_waiting--;
            issuer->sleep_until = t;   /* a dma may find room in the channel now */
            s->woke = 1;
        }
    } while (!dry && complete_barrier(s, t));
    if (e->current >= 0)
        return;
    /* round robin: the first ready request numbered after the last served, else the first */
    int64_t chosen = -1;
    for (int64_t k = 0; k < e->active_count; k++) {
        const DmaRequest *r = &e->pool[e->active[k]];
        if (!is_ready(s, r, t))
            continue;
        if (chosen < 0)
            chosen = e->active[k];
        if (e->served_any && r->number > e->last_served) {
            chosen = e->active[k];
            break;
        }
    }
    if (chosen >= 0)
        start_transaction(s, chosen, t, dry);
}

void dma_step(Sim *s, int64_t t)
{
    step(s, t, 0);
}

/* The next cycle > t at which dma_step may change something. */
int64_t dma_next_event(const Sim *s, int64_t t)
{
    const DmaEngine *e = &s->dma;
    if (e->current >= 0)
        return e->current_done > t ? e->current_done : t + 1;
    if (e->waiting_count > 0 && e->active_count < s->cfg.dma_active_requests)
        return t + 1;
    int64_t next = TIME_NEVER;
    for (int64_t k = 0; k < e->active_count; k++) {
        const DmaRequest *r = &e->pool[e->active[k]];
        int64_t start = r->issue + s->cfg.dma_latency;
        if (r->handed < r->size)
            next = start > t ? (start < next ? start : next) : t + 1;
    }
    return next;
}

/* After the last CPE halted in cycle t, the engine completes every request it holds, as the
 * hardware's does (a put still in flight reaches memory). Returns the cycle after its last
 * step, or TIME_NEVER if it would step at or after `limit` (the cycle limit). */
int64_t dma_drain(Sim *s, int64_t t, int64_t limit)
{
    while (s->dma.current >= 0 || s->dma.active_count || s->dma.waiting_count) {
        t = dma_next_event(s, t);
        if (t >= limit)
            return TIME_NEVER;
        dma_step(s, t);
    }
    return t + 1;
}

/* Trace spans of requests that never completed end with the run. */
void dma_close_spans(Sim *s, int64_t end)
{
    for (int64_t i = 0; i < s->dma.pool_size; i++)
        if (s->dma.pool[i].cpe >= 0)
            emit_span(s, s->dma.pool[i].cpe, SWSIM_SPAN_DMA, s->dma.pool[i].issue, end);
}

/* ---- running ahead while every CPE waits --------------------------------------------------
 * While skipping (engine_skip.c), the CPEs are stalled until a known time or an event, or repeat a
 * spin loop at a fixed point, which has no side effects and depends only on its registers and
 * on the LDM bytes it loads. dma_step at a cycle x is then invisible to them unless it
 *   - completes a request: the reply word changes and an active slot frees (which activates
 *     a waiting request and may end a dma_full stall; a trace span ends),
 *   - activates a waiting request,
 *   - completes a get transaction that writes LDM bytes a running CPE's loop has loaded.
 * Everything else it does (start a transaction, read the LDM bytes of a put, write main memory
 * or LDM bytes no loop reads) changes nothing the CPEs see before the skip ends, and it only
 * depends on the engine's own state and on x. So the engine can take all those steps within
 * the skip, at the same cycles and in the same order as stepping would: the same bytes land at
 * the same places, and the counters of the CPEs are unaffected. */

static int observable_at(const Sim *s, int64_t x)
{
    const DmaEngine *e = &s->dma;
    if (e->waiting_count > 0 && e->active_count < s->cfg.dma_active_requests)
        return 1;
    if (e->current < 0 || e->current_done > x)
        return 0;   /* only a transaction start */
    const DmaRequest *r = &e->pool[e->current];
    if (r->handed >= r->size)
        return 1;
    if (r->put)
        return 0;
    for (uint64_t done = 0, bytes, cpes, ldm; done < e->current_bytes; done += bytes) {
        bytes = ldm_run(r, e->current_offset + done, e->current_bytes - done, &cpes, &ldm);
        for (uint64_t m = cpes; m; m &= m - 1) {
            const Cpe *c = &s->cpes[__builtin_ctzll(m)];
            if (c->running && ldm_write_is_watched(c, ldm, bytes))
                return 1;
        }
    }
    return 0;
}

/* The first cycle in (t, limit) at which the engine does something observable (above), or
 * `limit`. Plans with dry steps and leaves the engine as it was. */
int64_t dma_quiet_until(Sim *s, int64_t t, int64_t limit)
{
    DmaEngine *e = &s->dma, saved = *e;
    uint64_t handed[SWSIM_MAX_CPES];
    for (int64_t k = 0; k < e->active_count; k++)
        handed[k] = e->pool[e->active[k]].handed;
    int64_t horizon = limit;
    for (int64_t x = dma_next_event(s, t); x < limit; x = dma_next_event(s, x)) {
        if (observable_at(s, x)) {
            horizon = x;
            break;
        }
        step(s, x, 1);
    }
    for (int64_t k = 0; k < e->active_count; k++)
        e->pool[e->active[k]].handed = handed[k];
    *e = saved;
    return horizon;
}

/* Takes the engine's steps at the cycles in (t, end], all unobservable (end is before
 * dma_quiet_until's horizon). */
void dma_advance(Sim *s, int64_t t, int64_t end)
{
    for (int64_t x = dma_next_event(s, t); x <= end; x = dma_next_event(s, x))
        step(s, x, 0);
}
