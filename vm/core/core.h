/* Internal state of the C core: decoded instructions, CPEs, the CG's shared units. */
#ifndef SWSIM_CORE_H
#define SWSIM_CORE_H
#include <stdint.h>
#include <stddef.h>
#include "core_api.h"
#include "isa_tables.h"
#include "engine_enums.h"

/* Stall reasons (REASON_*), counter columns (COUNTER_*), CG counters (CG_*), stop kinds
 * (STOP_*) and DMA/barrier problems are generated from vm/engine_defs.py in engine_enums.h. */
enum { NO_STALL = -1 };

/* The cycle loop is compiled several times on x86-64 (glibc ifunc picks one at load time):
 * for hosts with AVX2 + FMA (x86-64-v3: 256-bit integer vector operations for the NaN and
 * change tests of the vector float instructions, popcnt, BMI), for hosts with FMA (and AVX),
 * where fma() of the vector FMA instructions inlines to one hardware FMA instruction
 * (correctly rounded, as the C library's fma), and for the baseline. Floating-point results
 * are the same in every clone (-ffp-contract=off: no contraction anywhere). */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#if (defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 11)
#define HOT_LOOP_CLONES __attribute__((target_clones("arch=x86-64-v3", "fma", "default")))
#else
#define HOT_LOOP_CLONES __attribute__((target_clones("fma", "default")))
#endif
#endif
#endif
#ifndef HOT_LOOP_CLONES
#define HOT_LOOP_CLONES
#endif

#define PIPE_P0 1
#define PIPE_P1 2
#define TIME_NEVER INT64_MAX

/* Register slots: $31 reads from ZERO_SLOT (always 0, never written) and writes go to
 * DISCARD_SLOT, so operand access needs no test for $31. The ready time of BUSY_SLOT is the
 * cycle P0 is free of a divide/sqrt (it has no register value), so that one scan of ready
 * times covers the raw, waw and divide checks. */
enum { ZERO_SLOT = 32, DISCARD_SLOT = 33, BUSY_SLOT = 34, NUM_SLOTS = 35 };

/* Instr.flags */
enum {
    F_INVALID = 1,         /* undecodable word */
    F_STRUCTURAL = 2,      /* get, put, load-and-broadcast, dma, load, store: a class check */
    F_CONSIDER_NEXT = 4,   /* the word after it is considered as a follower */
    F_PAIRS_NEXT = 8,      /* ... and pairs with it whenever it is ready */
    F_MORE_CHECKS = 16,    /* checks[3] or checks[4] is not ZERO_SLOT */
    F_GROUP_CHECKS = 32,   /* group_checks holds the union of its checks and the next word's */
    F_BAD_PC = 64,         /* not a word: the one after the code, where Cpe.at points while
                              the pc is outside the code image or misaligned */
    F_BLOCK = 128,         /* a private block starts here (Instr.block) */
};
#define NUM_CHECKS 5
#define NUM_GROUP_CHECKS 4
#define MAX_WATCHED_READS 4

/* One code word, decoded once before the run. */
typedef struct {
    uint16_t id;           /* I_* (I_INVALID: undecodable) */
    uint8_t cls;           /* CLS_* */
    uint8_t pipes;         /* PIPE_P0 | PIPE_P1 */
    uint8_t ra, rb, rc, r3; /* operand slots of the register fields */
    uint8_t dest;          /* slot written (DISCARD_SLOT if none) */
    uint8_t waw_slot;      /* slot checked for WAW (ZERO_SLOT if none) */
    uint8_t num_sources;
    uint8_t sources[3];    /* slots checked for RAW */
    uint8_t literal;       /* rb is replaced by the immediate */
    uint8_t size;          /* bytes accessed by loads/stores */
    uint8_t ends_group;    /* branch, jump, halt or barrier: no follower is considered */
    uint8_t flops;         /* floating-point operations it performs (counter float_ops) */
    uint8_t flags;         /* F_* (the follower flags are set once the whole code is decoded) */
    uint8_t checks[NUM_CHECKS]; /* slots whose ready time must be <= t to issue: the sources,
                                   the WAW slot, BUSY_SLOT if P0-only; padded with ZERO_SLOT */
    uint8_t group_checks[NUM_GROUP_CHECKS]; /* see F_GROUP_CHECKS */
    uint8_t pipe_alone;    /* the leader's pipe when it issues alone (paired: both valid) */
    uint32_t reads_mask;   /* registers 0..30 read */
    uint32_t dest_mask;    /* register 0..30 written, or 0 */
    int64_t latency;       /* cycles until the result is readable (from the configuration) */
    uint64_t imm;          /* literal / sign-extended displacement / lane / n / mask */
    uint32_t word;
    int32_t block;         /* index in Sim.blocks of the private block that starts here, or -1 */
} Instr;

/* ---- private blocks (engine_batch.c) ----------------------------------------------------
 * A private block is a straight run of code words whose instructions touch only their CPE's
 * registers and LDM (integer, float, vector, shuffle, LDM loads and stores), possibly ended by
 * a branch back to its first word, with its issue schedule computed once by the issue rules
 * for given ready times of the registers it reads before writing them: all ready at its entry,
 * or for a loop, those its previous iteration leaves if that is a steady state. A CPE
 * whose leader is the block's first word and whose ready times satisfy that runs the
 * schedule's cycles, and the loop's further iterations, in one visit (a batch). */
#define MAX_BLOCK_CYCLES 64    /* cycles of a schedule */
#define MAX_BLOCK_WRITES 8     /* slots a block writes (saved to take a batch back) */
#define MAX_BATCH_STORES 256   /* stores a batch issues (their old LDM bytes are saved) */
#define MAX_BLOCK_UOPS (4 * MAX_BLOCK_CYCLES)   /* a step's checks and words (Uop) */

/* Step.flags */
enum {
    STEP_CHECK_LEADER = 1,     /* the leader is a load or store: its access must be in LDM */
    STEP_CHECK_NEXT = 2,       /* the same for the word after it (issued or only examined) */
    STEP_BRANCH = 4,           /* it issues the block's branch back to its first word */
};

/* Cycles of a block's schedule: `stall` cycles charged to one stall reason, then, if `words`,
 * the cycle that issues the leader (and the word after it if words is 2). */
typedef struct {
    const Instr *leader;
    int16_t issue_offset;      /* its issue cycle (after the stall), from the block's entry */
    uint8_t stall;
    uint8_t words;
    uint8_t flags;             /* STEP_* */
    uint8_t counter[2];        /* the counters of the issue cycle */
    uint8_t stall_counter[2];  /* ... and of a stall cycle */
    int8_t stall_reason;
} Step;

/* A whole iteration of a loop's schedule as micro-operations (Uop), run without the per-step
 * bookkeeping of the steps (engine_batch.c batch_iteration): the words in issue order, each with its
 * issue cycle, preceded in its step by the checks the step makes before it issues. */
typedef struct {
    const Instr *in;
    int16_t offset;            /* its step's issue cycle, from the block's entry */
    uint8_t kind;              /* the word's id (I_*) or another kind (engine.h U_*) */
    uint8_t step;              /* its step's index in the block */
    uint8_t word;              /* 0: the step's leader, 1: the word after it */
} Uop;

typedef struct {
    int32_t first_step, num_steps;   /* in Sim.steps */
    int32_t first_uop, num_uops;     /* in Sim.uops (none for a block that does not loop) */
    int32_t num_deltas;              /* counters a whole iteration charges, */
    uint8_t delta_counter[SWSIM_NUM_CPE_COUNTERS];   /* ... their columns */
    uint16_t delta[SWSIM_NUM_CPE_COUNTERS];           /* ... and cycles */
    int32_t cycles;                  /* the schedule's length */
    int32_t loops;                   /* it ends with the branch back to its first word, */
    int32_t steady;                  /* ... scheduled for the steady state of its iterations */
    int32_t stores;                  /* stores it issues */
    int32_t num_needs, num_writes;
    uint8_t need_slot[NUM_SLOTS];    /* slots read or checked before the block writes them, */
    int16_t need_offset[NUM_SLOTS];  /* ... each first at this cycle offset, */
    int32_t need_ready[NUM_SLOTS];   /* ... assumed ready at this offset: the schedule holds if
                                        every ready[slot] - entry cycle is <= need_offset when
                                        need_ready is, else equal to need_ready */
    uint8_t write_slot[MAX_BLOCK_WRITES];
} Block;

/* The fields of Cpe a batch may change besides registers and LDM, each saved in BatchUndo
 * under the same name (X(field) for each). */
#define BATCH_CHANGES(X) X(pc) X(at) X(last_state) X(charged) X(dirty) X(armed) X(confirmed) \
    X(mark_pc) X(mark_cycle) X(num_reads) X(reads_overflow) X(read_start) X(read_end) X(counters)

/* What a batch changed in its CPE, to take it back (a fault of another CPE at an earlier cycle
 * than the batch's last one, engine_batch.c rewind_batch). */
typedef struct {
    const Block *block;
    uint64_t pc;
    const Instr *at;
    int last_state, charged[2], dirty, armed, confirmed;
    uint64_t mark_pc;
    int64_t mark_cycle;
    int num_reads, reads_overflow;
    uint64_t read_start[MAX_WATCHED_READS], read_end[MAX_WATCHED_READS];
    uint64_t counters[SWSIM_NUM_CPE_COUNTERS];
    uint64_t regs[MAX_BLOCK_WRITES][SWSIM_LANES];
    int64_t ready[MAX_BLOCK_WRITES];
    int num_stores;
    uint64_t store_addr[MAX_BATCH_STORES];
    uint8_t store_size[MAX_BATCH_STORES];
    uint8_t store_old[MAX_BATCH_STORES][SWSIM_LANES * 8];
} BatchUndo;

/* A CPE's last instruction-cache fill (icache.c). */
typedef struct {
    int64_t until;             /* it ends at this cycle, */
    int count;                 /* ... and brings these lines (present from then on) */
    int64_t line[2];
} IcacheFill;

/* A register-communication transfer waiting in its sender's FIFO. */
typedef struct {
    int64_t due;
    uint64_t targets;      /* CPE id bit mask */
    int column;            /* 0: row queues, 1: column queues */
    uint64_t value[SWSIM_LANES];
} Transfer;

typedef struct {
    /* hot in the issue loop: one cache line of scalars, then ready times and counters (no
     * software prefetch of the next CPEs: measured slower than the hardware prefetchers) */
    int64_t wait_until;        /* barrier: TIME_NEVER until every participant arrived; in a
                                  batch: ahead_until (the cycle loop's one test for both) */
    int64_t sleep_until;       /* the leader's stall (last_state) cannot end before this:
                                  a known time, or TIME_NEVER until a delivery or DMA
                                  activation wakes the CPE */
    uint64_t pc;
    const Instr *at;           /* the word at pc, while the CPE runs (F_BAD_PC: none) */
    int last_state;            /* stall reason of the last charged cycle or RUNNING */
    int charged[2];            /* the two counters charged in the last cycle */
    int running;
    int dirty;                 /* spin-loop detection: a side effect or a changed register
                                  since the last mark */
    int confirmed;             /* spin-loop detection: the last two marks saw the same state */
    int id;
    int64_t ready[NUM_SLOTS];  /* ready[BUSY_SLOT]: divide/sqrt occupancy of P0 */
    uint64_t counters[SWSIM_NUM_CPE_COUNTERS];
    /* architectural state */
    uint64_t regs[NUM_SLOTS][SWSIM_LANES];
    int64_t global_free;       /* next global access may issue at this cycle */
    int row, col;
    uint8_t *ldm;

    /* register communication (the FIFO and receive queues are in Sim) */
    uint64_t put_mask[2][9];   /* targets of a put along the row/column with n = 0..8 */
    int8_t put_fault[2][9];    /* ... or the fault kind of that put (0: none) */
    int dma_waiting;           /* requests of this CPE not yet accepted by the engine */

    /* spin-loop fixed-point detection (see engine_ahead.c; dirty and confirmed above) */
    int armed;                 /* the snapshot (CpeCold) was taken at the last mark */
    uint64_t mark_pc;
    int64_t mark_cycle, window_start, period;
    int64_t ldm_changed;       /* last cycle an event wrote LDM bytes the loop reads */
    int num_reads;             /* LDM ranges loaded since the loop head was last reset */
    int reads_overflow;        /* ... more than MAX_WATCHED_READS: every write counts */
    uint64_t read_start[MAX_WATCHED_READS], read_end[MAX_WATCHED_READS];

    /* batches (engine_batch.c), off the lines the cycle loop reads every cycle */
    int64_t ahead_until;       /* a batch simulated the cycles before this one, */
    int64_t batch_start;       /* ... from this one */
    uint64_t *icache_lines;    /* icache.c: a bit per line of the code, set if in its L1 */
    IcacheFill icache_fill;    /* ... and its last fill, read only when a fetch misses */
} __attribute__((aligned(64))) Cpe;
/* A power of two (2048 bytes: one more line) would put the same field of the 64 CPEs in 2 of
 * the 64 sets of a 48 KiB 12-way L1, where the hot first lines evict each other: measured
 * 8-16% more host CPU time per simulated instruction (docs/vm.md, fourth round). */
_Static_assert((sizeof(Cpe) & (sizeof(Cpe) - 1)) != 0, "sizeof(Cpe) is a power of two");

/* The state of a CPE that the cycle loop does not touch every cycle, apart from Cpe (which
 * it keeps smaller): the spin-loop snapshot, read and written only at the loop head of a
 * loop without side effects (mark_loop_head), the open trace span and the halt cycle. */
typedef struct {
    int64_t snap_ready[NUM_SLOTS + 2];
    uint64_t snap_counters[SWSIM_NUM_CPE_COUNTERS];
    uint64_t period_delta[SWSIM_NUM_CPE_COUNTERS];
    int64_t ahead_from;        /* running ahead (engine_ahead.c): from the loop head of this cycle, */
    int64_t ahead_cycles;      /* ... by these cycles (0: not running ahead), */
    int64_t saved_wait, saved_ahead;   /* ... with these wait_until and ahead_until before */
    int span_kind;             /* open span kind, -1 if none */
    int64_t span_start;
    int64_t halt_cycle;
} CpeCold;

typedef struct {
    int cpe;
    int put;                   /* 0 get (memory -> LDM), 1 put */
    int barrier;               /* a BARRIER: no data, done after the CPE's earlier requests */
    int broadcast;             /* BCAST or BROW */
    int strided;               /* several blocks cut apart (block set, and a stride or
                                  dma_merge_unstrided_blocks 0) */
    uint64_t targets;          /* PE, BCAST, BROW: CPEs whose LDM the bytes are in */
    int sharers;               /* ROW, RANK: CPEs the bytes are dealt to (0 in other modes), */
    int sharer[SWSIM_MAX_MESH_SIDE];   /* ... their ids in dealing order, */
    uint64_t unit;             /* ... and the bytes dealt at a time */
    int64_t issue;
    uint64_t mem_offset, ldm_addr, size, block, stride, reply;
    uint64_t handed;           /* bytes already in started transactions */
    uint64_t number;           /* activation number (round robin order) */
} DmaRequest;

typedef struct {
    DmaRequest *pool;          /* free slots have cpe == -1 */
    int64_t pool_size;
    int64_t *waiting;          /* ring of pool indices, issue order */
    int64_t waiting_head, waiting_count;
    int64_t *active;           /* pool indices in activation order */
    int64_t active_count;
    uint64_t next_number, last_served;
    int served_any;
    int64_t current;           /* pool index of the transaction in progress, -1 if none */
    int64_t current_done;      /* its completion cycle */
    uint64_t current_mem, current_offset, current_bytes;   /* offset: in the request's bytes */
    uint8_t *put_buffer;       /* bytes a put transaction read at its start */
} DmaEngine;

/* The instruction caches (icache.c): per CPE, a bit per line of the code (present in its
 * L1) and the FIFO ways of each L1 set; the shared L2's ways with the cycle each line is (or
 * will be) in. Lines are absolute addresses >> shift. */
typedef struct {
    int shift;                 /* log2 of the line size */
    int64_t base_line, words;  /* the code's first line; bitmap words per CPE */
    uint64_t *present;
    int64_t l1_sets, l1_ways, l2_sets, l2_ways;
    int64_t *l1_tag, *l2_tag, *l2_ready;   /* -1: an empty way */
    int32_t *l1_next, *l2_next;            /* each set's next way to replace */
} Icache;

/* Why an instruction faulted: filled by the unit that detected it. */
typedef struct {
    int kind;
    uint64_t a;
    int64_t b;
} Fault;

typedef struct Sim {
    SwConfig cfg;
    const SwJob *job;
    SwResult *result;
    int num_cpes;
    uint64_t ldm_bytes;
    uint64_t spawned_mask;
    Instr *code;               /* code_words words, then the F_BAD_PC word */
    int64_t code_words;
    int64_t latency[NUM_LATENCY_CLASSES];
    Cpe *cpes;
    CpeCold *cold;             /* by CPE id */
    Block *blocks;             /* private blocks (Instr.block) and their schedules */
    Step *steps;
    int64_t num_blocks, num_steps;
    BatchUndo *undo;           /* by CPE id: the CPE's last batch */
    int64_t horizon;           /* the run pauses before this cycle */
    int64_t batch_bound, bound_cycle;   /* batches end before batch_bound (valid in cycle
                                           bound_cycle) */
    uint64_t *cg;              /* result->cg_counters */
    /* register communication (comm.c), in arrays by CPE id so that a delivery scan and a
     * delivery's appends touch a few dense lines rather than each CPE's own */
    Transfer *fifos;           /* a ring of fifo_capacity transfers per CPE */
    int64_t fifo_capacity;
    int32_t fifo_head[SWSIM_MAX_CPES], fifo_count[SWSIM_MAX_CPES];
    int64_t head_due[SWSIM_MAX_CPES];        /* the FIFO head's due, TIME_NEVER if empty */
    uint64_t head_targets[SWSIM_MAX_CPES];   /* ... its targets */
    uint8_t head_column[SWSIM_MAX_CPES];     /* ... and queue */
    uint64_t senders;          /* CPEs whose transfer FIFO is not empty */
    uint64_t due_senders;      /* ... and whose head was found due (by comm_deliver) */
    int64_t next_due;          /* no head of the other senders is due before this cycle */
    uint64_t (*queue_entries)[SWSIM_LANES]; /* a ring of rc_queue_depth per receive queue */
    uint64_t (*queue_ring[2][SWSIM_MAX_CPES])[SWSIM_LANES]; /* the ring of the row / column
                                                               queue of each CPE */
    int32_t queue_head[2][SWSIM_MAX_CPES], queue_count[2][SWSIM_MAX_CPES];
    uint64_t nonempty_queues[2]; /* CPEs whose row / column receive queue is not empty */
    uint64_t full_queues[2];   /* ... is full */
    int64_t deliver_at;        /* no delivery can happen before this cycle */
    int running[SWSIM_MAX_CPES]; /* ids of the CPEs still running, between steps of a run */
    int num_running;
    int64_t next_cycle;        /* the first cycle not simulated yet */
    /* in-step issue (engine_instep.h) */
    int in_step;               /* every running CPE (or the group, below) has the same issue
                                  state, */
    uint64_t step_mask;        /* ... these CPEs */
    int woke;                  /* an event set a CPE's sleep_until or wait_until */
    int step_retry, step_backoff;   /* loop heads of the first CPE until the next test */
    int64_t interface_free;    /* the CG memory interface takes the next global access */
    int halted_this_cycle;
    DmaEngine dma;
    /* barriers: arrivals per (row/column, line, mask); pending release times */
    uint8_t *barrier_arrived;
    int64_t releases[SWSIM_MAX_CPES];
    int num_releases;
    int64_t spans_capacity;
    int error;                 /* SWSIM_ERROR_* once something went wrong in the host */
    Fault fault;               /* the issue step's fault: zero until the fault that ends the
                                  run (only fault paths set kind and b; each sets a) */
    /* batches, after the fields above (whose offsets the cycle loop's speed is sensitive to,
     * docs/vm.md "fifth round") */
    Uop *uops;                 /* the blocks' micro-operations (Block.first_uop) */
    int64_t num_uops;
    int code_has_dma;          /* a word of the code is a dma (else no request can arise) */
    /* in step as a group (engine_instep.h): in_step with only some running CPEs alike */
    int grouped;               /* in_step holds for group[] only, not every running CPE */
    int group_size;
    Cpe *group[SWSIM_MAX_CPES];   /* the group's CPEs in run order */
    int group_position[SWSIM_MAX_CPES];   /* ... and their positions in it */
    Icache icache;             /* used if cfg.icache */
    int may_run_ahead;         /* a CPE at a spin fixed point may run ahead (engine_ahead.c) */
    /* takes a CPE that runs ahead back to its state before cycle `keep` (engine_ahead.c's
     * return_from_ahead, for the units: before_ldm_write) */
    void (*return_from_ahead)(struct Sim *s, Cpe *c, int64_t keep);
} Sim;


/* decode.c */
void decode_word(uint32_t word, const int64_t *latency, Instr *out);

/* comm.c */
int comm_init(Sim *s);
void comm_free(Sim *s);
int put_targets(const Sim *s, const Cpe *c, int column, uint64_t n, uint64_t *targets,
                Fault *fault);
int comm_send_blocked(const Sim *s, const Cpe *c, int64_t t);
void comm_send(Sim *s, Cpe *c, int column, uint64_t targets, const uint64_t *value, int64_t t);
void comm_deliver(Sim *s, int64_t t);
int64_t comm_next_event(const Sim *s, int64_t t);

/* dma.c */
int dma_init(Sim *s);
int dma_request(Sim *s, Cpe *c, const uint64_t *descriptor, uint64_t mem_addr,
                uint64_t ldm_addr, int64_t t, Fault *fault);
void dma_step(Sim *s, int64_t t);
int64_t dma_next_event(const Sim *s, int64_t t);
int64_t dma_quiet_until(Sim *s, int64_t t, int64_t limit);
void dma_advance(Sim *s, int64_t t, int64_t end);
int64_t dma_drain(Sim *s, int64_t t, int64_t limit);
void dma_close_spans(Sim *s, int64_t end);

/* barrier.c */
int barrier_init(Sim *s);
int barrier_arrive(Sim *s, Cpe *c, int column, uint64_t mask, int64_t t, Fault *fault);
void barrier_release(Sim *s, int64_t t);
int64_t barrier_next_event(const Sim *s, int64_t t);

/* A receive-queue entry as one value: kept in a register and moved with one 32-byte load and
 * store where the host has AVX (an array went through the stack in two 16-byte halves), and
 * of a type the stores of the queues' counts and heads cannot alias. */
typedef uint64_t Entry __attribute__((vector_size(32), aligned(8)));

/* Gets for n CPEs (one or every CPE in step, engine_step.h and engine_instep.h): pops the oldest entry of each one's row
 * (column = 0) or column receive queue, which the caller checked is not empty, into register
 * slot `dest`, readable at `ready`. A get is a side effect: no test for a changed value. */
__attribute__((always_inline))
static inline void comm_receive(Sim *s, Cpe *const *cpe, int n, int column, int dest,
                                int64_t ready)
{
    uint64_t (**ring)[SWSIM_LANES] = s->queue_ring[column];
    int32_t *head = s->queue_head[column], *count = s->queue_count[column];
    const int32_t depth = (int32_t)s->cfg.rc_queue_depth;
    uint64_t popped = 0, emptied = 0;
    for (int k = 0; k < n; k++) {
        Cpe *c = cpe[k];
        const int id = c->id;
        const int32_t at = head[id];
        *(Entry *)c->regs[dest] = *(const Entry *)ring[id][at];
        c->ready[dest] = ready;
        c->dirty = 1;
        head[id] = at + 1 == depth ? 0 : at + 1;
        const uint64_t bit = UINT64_C(1) << id;
        popped |= bit;
        if (--count[id] == 0)
            emptied |= bit;
    }
    s->nonempty_queues[column] &= ~emptied;
    if (s->full_queues[column] & popped) {
        s->full_queues[column] &= ~popped;
        if (s->due_senders)   /* a due head waiting for room may deliver next cycle */
            s->deliver_at = 0;
    }
}

static inline int comm_queue_empty(const Sim *s, const Cpe *c, int column)
{
    return !(s->nonempty_queues[column] >> c->id & 1);
}

/* Spin-loop fixed points (engine_ahead.c) depend on the LDM bytes the loop loads: an event that
 * writes LDM notes the write here, and it counts only if it overlaps a range loaded since the
 * loop head was last reset. */
static inline int ldm_write_is_watched(const Cpe *c, uint64_t addr, uint64_t bytes)
{
    if (c->reads_overflow)
        return 1;
    for (int k = 0; k < c->num_reads; k++)
        if (addr < c->read_end[k] && c->read_start[k] < addr + bytes)
            return 1;
    return 0;
}

/* Before an event of cycle t writes LDM bytes of c: a CPE running ahead on a loop that loads
 * them comes back to cycle t first, its loop having seen the bytes before the write (the
 * engine's return_from_ahead, engine_ahead.c, called through Sim so that the units do not
 * depend on the engine). */
static inline void before_ldm_write(Sim *s, Cpe *c, uint64_t addr, uint64_t bytes, int64_t t)
{
    if (c->ahead_until > t && s->cold[c->id].ahead_cycles && ldm_write_is_watched(c, addr, bytes))
        s->return_from_ahead(s, c, t);
}

static inline void note_ldm_write(Cpe *c, uint64_t addr, uint64_t bytes, int64_t t)
{
    if (ldm_write_is_watched(c, addr, bytes))
        c->ldm_changed = t;
}

/* icache.c */
int icache_init(Sim *s);
void icache_free(Sim *s);
int64_t icache_fetch(Sim *s, Cpe *c, const Instr *leader, int64_t t);

/* The lines a CPE fetches to issue `leader`, a word of the code: its own and the next word's. */
static inline void icache_window(const Sim *s, const Instr *leader, int64_t *first, int64_t *last)
{
    const int64_t index = leader - s->code;
    const uint64_t pc = s->cfg.code_base + 4 * (uint64_t)index;
    *first = (int64_t)(pc >> s->icache.shift);
    *last = index + 1 < s->code_words ? (int64_t)((pc + 4) >> s->icache.shift) : *first;
}

/* Whether lines first..last are all in CPE c's L1. */
static inline int icache_present(const Sim *s, const Cpe *c, int64_t first, int64_t last)
{
    const int64_t base = s->icache.base_line;
    for (int64_t k = first - base; k <= last - base; k++)
        if (!(c->icache_lines[k >> 6] >> (k & 63) & 1))
            return 0;
    return 1;
}

/* Whether the fetch of `leader` by c hits (always, without the cache model). */
static inline int icache_hits(const Sim *s, const Cpe *c, const Instr *leader)
{
    if (!s->cfg.icache)
        return 1;
    int64_t first, last;
    icache_window(s, leader, &first, &last);
    return icache_present(s, c, first, last);
}

/* trace.c */
void emit_span(Sim *s, int cpe, int kind, int64_t start, int64_t end);

#endif
