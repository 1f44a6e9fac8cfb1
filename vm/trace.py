"""Chrome / Perfetto trace-event JSON of a traced run (``Machine.run(..., trace=True)``).

One process per core group, one track (thread) per CPE with its issue and stall spans, and the
CPE's DMA requests as async spans (they overlap) from the ``dma`` issue to the reply update.
Times are real time at ``config.clock_hz`` (microseconds, as the format wants); every event
also carries its cycle numbers. Open the file at ui.perfetto.dev or chrome://tracing.
"""
from __future__ import annotations

import json

from .results import RunResult


def trace_events(result: RunResult) -> list[dict]:
    if result.spans is None:
        raise ValueError("the run was not traced; pass trace=True to Machine.run")
    us_per_cycle = 1e6 / result.config.clock_hz
    pid = result.cg
    events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"CG {pid}"}}]
    for s in result.cpe.values():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": s.cpe,
                       "args": {"name": f"CPE {s.cpe} (row {s.row}, col {s.col})"}})
    for number, (cpe, kind, start, end) in enumerate(result.spans):
        common = {"pid": pid, "tid": cpe, "args": {"start_cycle": start, "end_cycle": end}}
        if kind == "dma":
            events.append({"ph": "b", "cat": "dma", "name": "dma", "id": number,
                           "ts": start * us_per_cycle, **common})
            events.append({"ph": "e", "cat": "dma", "name": "dma", "id": number,
                           "ts": end * us_per_cycle, **common})
        else:
            events.append({"ph": "X", "cat": "pipe", "name": kind, "ts": start * us_per_cycle,
                           "dur": (end - start) * us_per_cycle, **common})
    return events


def write_trace(result: RunResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": trace_events(result), "displayTimeUnit": "ns",
                   "otherData": {"cycles": result.cycles, "clock_hz": result.config.clock_hz,
                                 "stopped": None if result.stop is None
                                 else result.stop.message()}},
                  f)
