/* Decoding of instruction words with the tables generated from isa/table.py. */
#include <string.h>
#include "core.h"

static uint64_t field_value(uint32_t word, int field)
{
    const FieldSpec *f = &FIELD_SPECS[field];
    uint64_t value = ((uint64_t)word >> f->low) & ((UINT64_C(1) << f->width) - 1);
    if (f->is_signed && (value >> (f->width - 1)))
        value |= ~UINT64_C(0) << f->width;   /* sign-extend, as two's complement bits */
    return value;
}

/* The immediate operand: its field, or two fields concatenated (low part first). */
static uint64_t immediate_value(uint32_t word, const DecodeEntry *e)
{
    if (e->imm_fields[0] < 0)
        return 0;
    uint64_t value = field_value(word, e->imm_fields[0]);
    if (e->imm_fields[1] >= 0)
        value |= field_value(word, e->imm_fields[1]) << FIELD_SPECS[e->imm_fields[0]].width;
    return value;
}

static const DecodeEntry *lookup_entry(uint32_t word)
{
    unsigned opcode = (unsigned)field_value(word, FIELD_OPCODE);
    int func_field = OPCODE_FUNC_FIELD[opcode];
    uint64_t func = func_field >= 0 ? field_value(word, func_field) : 0;
    for (int i = 0; i < NUM_DECODE_ENTRIES; i++) {
        const DecodeEntry *e = &DECODE_ENTRIES[i];
        if (e->opcode == opcode && e->func == func)
            return e;
    }
    return NULL;
}

static uint8_t source_slot(unsigned reg)
{
    return reg == ISA_ZERO_REG ? ZERO_SLOT : (uint8_t)reg;
}

void decode_word(uint32_t word, const int64_t *latency, Instr *out)
{
    memset(out, 0, sizeof *out);
    out->word = word;
    const DecodeEntry *e = lookup_entry(word);
    if (!e) {
        out->flags = F_INVALID;   /* id stays I_INVALID */
        return;
    }
    out->id = e->id;
    out->cls = e->cls;
    out->pipes = e->pipes;
    out->ra = source_slot((unsigned)field_value(word, FIELD_RA));
    out->rb = source_slot((unsigned)field_value(word, FIELD_RB));
    out->rc = source_slot((unsigned)field_value(word, FIELD_RC));
    out->r3 = source_slot((unsigned)field_value(word, FIELD_R3));
    out->literal = e->literal;
    out->size = e->size;
    out->latency = latency[e->latency_class];
    out->imm = immediate_value(word, e);
    out->ends_group = e->ends_group;
    out->flops = e->flops;
    out->dest = DISCARD_SLOT;
    out->waw_slot = ZERO_SLOT;
    if (e->dest_field >= 0) {
        unsigned reg = (unsigned)field_value(word, e->dest_field);
        if (reg != ISA_ZERO_REG) {
            out->dest = out->waw_slot = (uint8_t)reg;
            out->dest_mask = UINT32_C(1) << reg;
        }
    }
    for (int k = 0; k < e->num_sources; k++) {
        unsigned reg = (unsigned)field_value(word, e->source_fields[k]);
        if (reg == ISA_ZERO_REG)
            continue;
        out->sources[out->num_sources++] = (uint8_t)reg;
        out->reads_mask |= UINT32_C(1) << reg;
    }
    /* the slots of the raw, waw and divide checks, each once */
    int n = 0;
    for (int k = 0; k < out->num_sources; k++)
        out->checks[n++] = out->sources[k];
    if (out->waw_slot != ZERO_SLOT && !(out->reads_mask & out->dest_mask))
        out->checks[n++] = out->waw_slot;
    if (out->pipes == PIPE_P0)
        out->checks[n++] = BUSY_SLOT;
    while (n < NUM_CHECKS)
        out->checks[n++] = ZERO_SLOT;
    switch (out->cls) {
    case CLS_GET: case CLS_PUT: case CLS_BCAST_LOAD: case CLS_DMA: case CLS_LOAD: case CLS_STORE:
        out->flags |= F_STRUCTURAL;
        break;
    default:
        break;
    }
}

/* ---- introspection for tests ---------------------------------------------------------- */

void swsim_decode_word(uint32_t word, SwDecoded *out)
{
    memset(out, 0, sizeof *out);
    out->dest = -1;
    const DecodeEntry *e = lookup_entry(word);
    if (!e)
        return;
    out->id = e->id;
    out->literal = e->literal;
    out->format = e->format;
    out->cls = e->cls;
    out->pipes = e->pipes;
    out->latency_class = e->latency_class;
    out->size = e->size;
    out->ends_group = e->ends_group;
    if (e->dest_field >= 0)
        out->dest = (int32_t)field_value(word, e->dest_field);
    out->num_sources = e->num_sources;
    for (int k = 0; k < e->num_sources; k++)
        out->sources[k] = (int32_t)field_value(word, e->source_fields[k]);
    out->immediate = (int64_t)immediate_value(word, e);
}

const char *swsim_instruction_name(int32_t id)
{
    return id >= 0 && id < NUM_INSTRUCTIONS ? INSTRUCTION_NAMES[id] : "";
}

int32_t swsim_num_latency_classes(void)
{
    return NUM_LATENCY_CLASSES;
}
