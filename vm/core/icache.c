/* The CPE instruction caches (docs/timing.md "Instruction cache"; vm/icache.py is the
 * reference the Python engine runs, bit for bit the same model).
 *
 * A CPE about to issue the word at pc fetches its window: the line of pc and that of the word
 * after it (the follower it may pair with), if that word is in the code. Each line missing
 * from its private L1 is fetched from the core group's shared L2, or through it from memory,
 * one after the other; the CPE stalls (reason icache) until the last one is in, and only then
 * do the lines count as present. Replacement is FIFO in both levels, so hits change nothing:
 * a batch, an in-step cycle or a spin loop whose lines are all present needs no per-fetch
 * work, and the cycle loop asks for a fetch only when a line is missing. */
#include <stdlib.h>
#include <string.h>
#include "core.h"

int icache_init(Sim *s)
{
    Icache *ic = &s->icache;
    if (!s->cfg.icache)
        return 0;
    ic->shift = __builtin_ctzll((uint64_t)s->cfg.icache_line_bytes);
    const uint64_t first = s->cfg.code_base >> ic->shift;
    const uint64_t end = (s->cfg.code_base + 4 * (uint64_t)s->code_words) >> ic->shift;
    ic->base_line = (int64_t)first;
    ic->words = (int64_t)((end - first) / 64 + 1);
    ic->l1_ways = s->cfg.icache_l1_ways;
    ic->l1_sets = s->cfg.icache_l1_bytes / (s->cfg.icache_line_bytes * ic->l1_ways);
    ic->l2_ways = s->cfg.icache_l2_ways;
    ic->l2_sets = s->cfg.icache_l2_bytes / (s->cfg.icache_line_bytes * ic->l2_ways);
    if (ic->l1_sets < 1 || ic->l2_sets < 1)
        return SWSIM_ERROR_CONFIG;
    const size_t n = (size_t)s->num_cpes, l1 = (size_t)(ic->l1_sets * ic->l1_ways);
    const size_t l2 = (size_t)(ic->l2_sets * ic->l2_ways);
    ic->present = calloc(n * (size_t)ic->words, sizeof *ic->present);
    ic->l1_tag = malloc(n * l1 * sizeof *ic->l1_tag);
    ic->l1_next = calloc(n * (size_t)ic->l1_sets, sizeof *ic->l1_next);
    ic->l2_tag = malloc(l2 * sizeof *ic->l2_tag);
    ic->l2_ready = calloc(l2, sizeof *ic->l2_ready);
    ic->l2_next = calloc((size_t)ic->l2_sets, sizeof *ic->l2_next);
    if (!ic->present || !ic->l1_tag || !ic->l1_next || !ic->l2_tag || !ic->l2_ready
        || !ic->l2_next)
        return SWSIM_ERROR_MEMORY;
    memset(ic->l1_tag, 0xff, n * l1 * sizeof *ic->l1_tag);   /* -1: an empty way */
    for (int i = 0; i < s->num_cpes; i++)
        s->cpes[i].icache_lines = ic->present + i * ic->words;
    memset(ic->l2_tag, 0xff, l2 * sizeof *ic->l2_tag);
    return 0;
}

void icache_free(Sim *s)
{
    Icache *ic = &s->icache;
    free(ic->present);
    free(ic->l1_tag);
    free(ic->l1_next);
    free(ic->l2_tag);
    free(ic->l2_ready);
    free(ic->l2_next);
}

static inline void set_present(const Icache *ic, Cpe *c, int64_t line, int present)
{
    uint64_t *word = &c->icache_lines[(line - ic->base_line) >> 6];
    const uint64_t bit = UINT64_C(1) << ((line - ic->base_line) & 63);
    *word = present ? *word | bit : *word & ~bit;
}

/* The cycle the shared L2 has `line` for a request from cycle `start`; a miss (counted to c)
 * replaces its set's oldest line. A line still coming from memory is ready when it arrives. */
static int64_t l2_fetch(Sim *s, Cpe *c, int64_t line, int64_t start)
{
    Icache *ic = &s->icache;
    const int64_t set = line % ic->l2_sets;
    int64_t *tag = &ic->l2_tag[set * ic->l2_ways], *ready = &ic->l2_ready[set * ic->l2_ways];
    for (int64_t w = 0; w < ic->l2_ways; w++)
        if (tag[w] == line) {
            const int64_t hit = start + s->cfg.icache_l2_cycles;
            return ready[w] > hit ? ready[w] : hit;
        }
    const int32_t w = ic->l2_next[set];
    ic->l2_next[set] = (int32_t)((w + 1) % ic->l2_ways);
    tag[w] = line;
    ready[w] = start + s->cfg.icache_memory_cycles;
    c->counters[COUNTER_ICACHE_L2_MISSES]++;
    return ready[w];
}

int64_t icache_fetch(Sim *s, Cpe *c, const Instr *leader, int64_t t)
{
    Icache *ic = &s->icache;
    IcacheFill *fill = &c->icache_fill;
    if (fill->until > t)
        return fill->until;
    for (int k = 0; k < fill->count; k++)   /* the lines of the last fill are in now */
        set_present(ic, c, fill->line[k], 1);
    fill->count = 0;
    int64_t first, last;
    icache_window(s, leader, &first, &last);
    int64_t ready = t;
    for (int64_t line = first; line <= last; line++) {
        if (icache_present(s, c, line, line))
            continue;
        const int64_t set = line % ic->l1_sets;
        int64_t *way = &ic->l1_tag[(c->id * ic->l1_sets + set) * ic->l1_ways];
        int32_t *next = &ic->l1_next[c->id * ic->l1_sets + set];
        if (way[*next] >= 0)
            set_present(ic, c, way[*next], 0);
        way[*next] = line;
        *next = (int32_t)((*next + 1) % ic->l1_ways);
        fill->line[fill->count++] = line;
        c->counters[COUNTER_ICACHE_L1_MISSES]++;
        ready = l2_fetch(s, c, line, ready);
    }
    fill->until = ready;
    return ready;
}
