/* Public interface of the swsim C core (docs/timing.md, vm/engine_api.py).
 *
 * The text between the cdef markers is also given to cffi's cdef, so it holds only plain
 * declarations; the generated public part of engine_defs.h goes before it. Python
 * (vm/cengine.py) fills SwConfig from the VMConfig and SwJob with pointers into the job's
 * numpy arrays, which swsim_run modifies in place. */
#ifndef SWSIM_CORE_API_H
#define SWSIM_CORE_API_H
#include <stdint.h>
#include "engine_defs.h"   /* generated: SWSIM_* sizes, span kinds and SwConfig */

/* cdef-begin */
typedef struct {
    const uint32_t *code;
    int64_t code_words;
    const uint8_t *spawned;      /* num_cpes flags */
    uint64_t entry_pc;
    uint64_t *regs;              /* num_cpes x 32 x 4 lanes, in/out */
    uint8_t *ldm;                /* num_cpes x ldm_bytes, in/out */
    uint8_t *mem;                /* mem_bytes, in/out */
} SwJob;

typedef struct {
    int32_t cpe;
    int32_t kind;                /* SWSIM_SPAN_ISSUE, 1 + stall reason, or SWSIM_SPAN_DMA */
    int64_t start, end;          /* end exclusive */
} SwSpan;

typedef struct {
    int32_t status;              /* 0, or a negative SWSIM_ERROR_* (bad config, no memory) */
    int64_t kernel_cycles;
    int32_t stop_kind;           /* 0: every CPE halted; else a key of STOP_KINDS */
    int32_t stop_cpe;
    uint64_t stop_pc;
    int64_t stop_cycle;
    uint64_t stop_a;
    int64_t stop_b;
    int32_t last_state[SWSIM_MAX_CPES]; /* per CPE: stall reason of its last charged cycle,
                                    or SWSIM_STATE_RUNNING if it issued; halted: finished */
    uint64_t pcs[SWSIM_MAX_CPES];
    uint64_t cpe_counters[SWSIM_MAX_CPES * SWSIM_NUM_CPE_COUNTERS];
    uint64_t cg_counters[SWSIM_NUM_CG_COUNTERS];
    SwSpan *spans;               /* owned by the result: release with swsim_free_result */
    int64_t num_spans;
    int64_t batch_cycles;        /* CPE cycles simulated in batches (engine_batch.c), for tests */
    int64_t step_cycles;         /* cycles simulated in step (engine_instep.h), for tests */
    int64_t group_cycles;        /* CPE cycles simulated in step in a group (engine_instep.h) */
    int64_t ahead_cycles;        /* CPE cycles spinning CPEs ran ahead (engine_ahead.c) */
} SwResult;

/* Static facts about one instruction word, for tests of the generated decoder. */
typedef struct {
    int32_t id;                  /* 0: undecodable */
    int32_t literal, format, cls, pipes, latency_class, size, ends_group;
    int32_t dest;                /* destination register, -1 if none */
    int32_t num_sources;
    int32_t sources[3];          /* source register numbers */
    int64_t immediate;
} SwDecoded;

int swsim_run(const SwConfig *config, const SwJob *job, SwResult *result);

/* The same run in steps (for progress reports): swsim_start prepares it (NULL on an error,
 * in result->status); swsim_advance simulates up to (not including) cycle `horizon`, or to
 * the end, and returns 1 once the run ended; swsim_cycle is the next cycle to simulate (the
 * kernel cycles once ended); swsim_finish releases the run and returns the status (results
 * are complete only if the run ended). Any sequence of horizons gives swsim_run's results. */
typedef struct SwSim SwSim;
SwSim *swsim_start(const SwConfig *config, const SwJob *job, SwResult *result);
int32_t swsim_advance(SwSim *sim, int64_t horizon);
int64_t swsim_cycle(const SwSim *sim);
int32_t swsim_finish(SwSim *sim);
void swsim_free_result(SwResult *result);
void swsim_decode_word(uint32_t word, SwDecoded *out);
const char *swsim_instruction_name(int32_t id);
const char *swsim_reason_name(int32_t reason);
int32_t swsim_num_latency_classes(void);
/* cdef-end */

enum {
    SWSIM_ERROR_CONFIG = -1,     /* configuration outside the core's compile-time limits */
    SWSIM_ERROR_MEMORY = -2,     /* the host could not allocate run state or trace spans */
    SWSIM_ERROR_INTERNAL = -3,   /* a bound the core relies on was broken (a bug) */
    SWSIM_ERROR_UNFINISHED = -4, /* swsim_finish before the run ended */
};

#endif
