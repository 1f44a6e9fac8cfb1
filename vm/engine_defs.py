"""The facts both engines share, as data: stall reasons, counters, stop kinds, problem codes,
trace span kinds and the C core's fixed limits.

The Python engine reads these tuples; the C core's enums, counter-column macros and array sizes
are generated from them at build time (``vm/build_core.py`` writes ``engine_defs.h``), so the
two cannot disagree. ``engine_api`` re-exports them. Like ``isa/table.py`` this module imports
nothing, so the C build can load it by file path.
"""

# Why a pipe was idle in a cycle (docs/timing.md "Counters"); the order is the counter order.
STALL_REASONS = ("raw", "waw", "get_empty", "put_full", "dma_full", "global", "barrier",
                 "divide", "icache", "pairing", "finished")

# Per-CPE counters, columns of EngineResult.cpe_counters.
CPE_COUNTERS = (
    "p0_valid", "p1_valid",
    *(f"p0_idle_{r}" for r in STALL_REASONS),
    *(f"p1_idle_{r}" for r in STALL_REASONS),
    "active_cycles",   # cycles up to and including the CPE's halt
    "float_ops",       # floating-point operations issued (isa/table.py Instr.flops)
    "icache_l1_misses",   # instruction-cache lines fetched into the CPE's L1 (config icache)
    "icache_l2_misses",   # ... of which the shared L2 did not hold either
)
CPE_COUNTER_INDEX = {name: i for i, name in enumerate(CPE_COUNTERS)}

# Per-CG counters, entries of EngineResult.cg_counters.
CG_COUNTERS = ("dma_requests", "dma_bytes_requested", "dma_transactions", "dma_bytes_moved",
               "rc_transfers", "rc_deliveries", "gld_count", "gst_count", "barriers")
CG_COUNTER_INDEX = {name: i for i, name in enumerate(CG_COUNTERS)}

# Why a run stopped early. Each code has a message template over the stop's (a, b) values.
STOP_KINDS = {
    1: ("access", "address {a:#x} is outside this CPE's LDM and main memory"),
    2: ("misaligned", "{b}-byte access at {a:#x} is not {b}-byte aligned"),
    3: ("undecodable", "undecodable instruction word {a:#010x}"),
    4: ("pc", "pc {a:#x} is outside the code image"),
    5: ("dma", "bad DMA request: {detail}"),
    6: ("put_unspawned", "register communication to CPE {a}, which is not spawned"),
    7: ("put_self", "register communication to itself (n = {a})"),
    8: ("barrier", "barrier mask {a:#04x}: {detail}"),
    9: ("bcast_memory", "load-and-broadcast from main memory address {a:#x} (LDM only)"),
    10: ("csr", "rcsr of control/status register {a}, which swsim does not model (only 4, "
                "the cycle counter, and 8, the floating-point operations)"),
    11: ("put_outside", "register communication to position {a} of a row/column of {b} CPEs "
                        "(no such CPE)"),
    100: ("deadlock", "deadlock: every running CPE waits for something that cannot happen"),
    101: ("cycle_limit", "cycle limit of {a} cycles reached"),
}
STOP_DEADLOCK, STOP_CYCLE_LIMIT = 100, 101
# The 256-bit DMA descriptor (MACHINE.md section 6, the athread headers' packed layout):
# field -> (lowest bit, width); the bits between fields are padding, which the engines ignore.
DMA_FIELDS = {"size": (0, 24), "block": (32, 20), "op": (56, 4), "mode": (60, 4),
              "reply": (64, 16), "mask": (88, 8), "stride": (96, 32)}
# Values of the op and mode fields (docs/timing.md "DMA" says what each does).
DMA_OPS = {"put": 0, "get": 1, "put_p": 2, "get_p": 3, "barrier": 5}
DMA_MODES = {"pe": 0, "bcast": 1, "row": 2, "brow": 3, "rank": 4}
# Details of stop kinds 5 (dma) and 8 (barrier): the stop's b is the index of (name, text).
DMA_PROBLEMS = (
    ("bad_op", "bad op (must be 0 PUT, 1 GET, 2 PUT_P, 3 GET_P or 5 BARRIER)"),
    ("bad_mode", "bad mode (must be 0 PE, 1 BCAST, 2 ROW, 3 BROW or 4 RANK)"),
    ("put_broadcast", "a put in BCAST/BROW mode (broadcasts only write LDM)"),
    ("size_zero", "size is 0"),
    ("ldm_range", "LDM range outside LDM"),
    ("mem_range", "memory range outside main memory"),
    ("bad_reply", "reply word not 4-byte aligned in LDM"),
    ("empty_mask", "broadcast mask names no CPE of the mesh"),
    ("uneven_split", "ROW/RANK mode: a contiguous size must be a multiple of the sharing CPEs"),
)
BARRIER_PROBLEMS = (
    ("not_in_mask", "the issuing CPE is not in the mask"),
    ("outside_mesh", "a mask bit names a position beyond the row/column (no such CPE)"),
    ("participant_unspawned", "a participant is not spawned"),
)

# Trace span kinds, by the C core's number: 1 + a stall reason is a stall ("finished" is never
# a span).
SPAN_KINDS = ("issue", *(f"stall:{r}" for r in STALL_REASONS), "dma")
# The C core's last_state of a CPE that issued in its last charged cycle (else a stall reason).
STATE_RUNNING = -1

# The C core's fixed limits (a configuration beyond them is refused) and register layout.
MAX_MESH_SIDE = 8
MAX_CPES = MAX_MESH_SIDE * MAX_MESH_SIDE
MAX_LDM_BYTES = 1 << 20
MAX_CYCLES = 1 << 62            # the largest max_cycles of a run (cycles are int64 in the core)
LANES = 4                       # 64-bit lanes of a 256-bit register
