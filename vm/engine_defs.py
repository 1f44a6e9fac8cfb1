"""The facts both engines share, as data: stall reasons, counters, stop kinds, problem codes,
trace span kinds and the C core's fixed limits.

The Python engine reads these tuples; the C core's enums, counter-column macros and array sizes
are generated from them at build time (``vm/build_core.py`` writes ``engine_defs.h``), so the
two cannot disagree. ``engine_api`` re-exports them. Like ``isa/table.py`` this module imports
nothing, so the C build can load it by file path.
"""

# Why a pipe was idle in a cycle (docs/timing.md "Counters"); the order is the counter order.
STALL_REASONS = ("raw", "waw", "get_empty", "put_full", "dma_full", "global", "barrier",
                 "divide", "pairing", "finished")

# Per-CPE counters, columns of EngineResult.cpe_counters.
CPE_COUNTERS = (
    "p0_valid", "p1_valid",
    *(f"p0_idle_{r}" for r in STALL_REASONS),
    *(f"p1_idle_{r}" for r in STALL_REASONS),
    "active_cycles",   # cycles up to and including the CPE's halt
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
    10: ("put_outside", "register communication to position {a} of a row/column of {b} CPEs "
                        "(no such CPE)"),
    100: ("deadlock", "deadlock: every running CPE waits for something that cannot happen"),
    101: ("cycle_limit", "cycle limit of {a} cycles reached"),
}
STOP_DEADLOCK, STOP_CYCLE_LIMIT = 100, 101
# Details of stop kinds 5 (dma) and 8 (barrier): the stop's b is the index of (name, text).
DMA_PROBLEMS = (
    ("bad_op", "bad op (must be 0 get or 1 put)"),
    ("bad_mode", "bad mode (must be 0 PE, 1 BCAST, 2 ROW)"),
    ("put_broadcast", "put in BCAST/ROW mode"),
    ("size_zero", "size is 0"),
    ("ldm_range", "LDM range outside LDM"),
    ("mem_range", "memory range outside main memory"),
    ("bad_reply", "reply word not 4-byte aligned in LDM"),
    ("empty_mask", "broadcast mask is empty"),
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
LANES = 4                       # 64-bit lanes of a 256-bit register
