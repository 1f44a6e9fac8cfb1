/* Trace spans: each CPE's runs of cycles in one state, and the DMA requests' lifetimes. */
#include <stdlib.h>
#include "engine.h"

void emit_span(Sim *s, int cpe, int kind, int64_t start, int64_t end)
{
    SwResult *r = s->result;
    if (end <= start || s->error)
        return;
    if (r->num_spans == s->spans_capacity) {
        int64_t capacity = s->spans_capacity ? 2 * s->spans_capacity : 1024;
        SwSpan *grown = realloc(r->spans, (size_t)capacity * sizeof *grown);
        if (!grown) {
            s->error = SWSIM_ERROR_MEMORY;
            return;
        }
        r->spans = grown;
        s->spans_capacity = capacity;
    }
    r->spans[r->num_spans++] = (SwSpan){cpe, kind, start, end};
}

/* Extends the CPE's open span with cycle t's state, or closes it and opens a new one. */
void trace_cycle(Sim *s, const Cpe *c, int kind, int64_t t)
{
    CpeCold *cold = &s->cold[c->id];
    if (kind == cold->span_kind)
        return;
    if (cold->span_kind >= 0)
        emit_span(s, c->id, cold->span_kind, cold->span_start, t);
    cold->span_kind = kind;
    cold->span_start = t;
}

void trace_close(Sim *s, const Cpe *c, int64_t end)
{
    CpeCold *cold = &s->cold[c->id];
    if (cold->span_kind >= 0)
        emit_span(s, c->id, cold->span_kind, cold->span_start, end);
    cold->span_kind = -1;
}
