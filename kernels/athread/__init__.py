"""The athread CPE runtime (docs/runtime.md): ``athread.s`` provides what compiled CPE code
expects of the vendor library (the thread-local ``_MYID _PEN _ROW _COL _CGN``, ``printf``,
``fprintf`` on ``_slave_stdout``/``_slave_stderr`` and the calls the compiler makes of them
(puts, fwrite, ...), ``penv_slave_cycle_count``, ``penv_slave_float_ops_init``/``_count``, the
counter slots ``penv_slave{0..3}_{cycle,float_ops,get,put}_{init,count}``, sqrt/sqrtf/fabs,
``athread_get_id``, ``athread_get_core``, ``athread_syn``, the DMA calls ``athread_get``,
``athread_put`` and ``athread_dma_*``) and the start routine ``__swsim_start`` that sets the
thread-local variables before the entry runs.

``link_with_runtime(objects)`` links the runtime's object after ``objects`` when they refer to
one of its symbols; ``build_with_runtime(paths)`` assembles source files and does the same (what
``swsim run`` uses); ``console_text(machine, program)`` is the text the CPEs printed.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from ...asm import Library, assemble_object, build_files, link, undefined_symbols
from ...vm.machine import register_library
from .console import console_text, read_console

__all__ = ["RUNTIME_SOURCE", "UNSUPPORTED", "runtime_object", "runtime_library", "runtime_symbols",
           "needs_runtime", "link_with_runtime", "build_with_runtime", "console_text",
           "read_console"]

RUNTIME_SOURCE = Path(__file__).resolve().parent / "athread.s"
# What CPE code may call that swsim does not provide, and why: a program using one is refused
# at link time with the reason (docs/runtime.md "Not provided").
_COUNTERS = ("the CPE exposes only the cycle (rcsr 4) and floating-point operation (rcsr 8) "
             "counters, and the runtime counts the DMA requests it issues (get, put); {} "
             "would need a counter the emulator does not keep")
_LIBM = ("the runtime's libm is sqrt, sqrtf and fabs (one instruction each); compute it in "
         "the kernel or pass a table")
UNSUPPORTED = {
    **{f"penv_slave{slot}_{event}_{step}": _COUNTERS.format(what)
       for slot in range(4) for event, what in (("gld", "counting global loads"),
                                                ("gst", "counting global stores"))
       for step in ("init", "count")},
    **{name: "there is no LDM heap: declare the buffer __thread_local (.tbss) or in .ldm"
       for name in ("ldm_malloc", "ldm_free")},
    **{name: "CPE code cannot allocate main memory here: allocate it on the host "
             "(Machine.mem.put) and pass its address" for name in ("malloc", "free", "calloc")},
    **{name: _LIBM for name in ("exp", "expf", "log", "logf", "pow", "powf", "sin", "cos",
                                "tanh", "tanhf")},
    **{name: "a lock needs an atomic read-modify-write of memory (the hardware's faaw), which the "
             "emulated CPE instruction subset does not have: order the CPEs with athread_syn, "
             "or let one CPE do the update" for name in ("athread_lock", "athread_unlock")},
    "athread_rma_iput": "RMA is the SW26010-Pro's; the SW26010 CPEs exchange data through "
                        "register communication (putr/putc/getr/getc)",
}

@functools.lru_cache(maxsize=None)
def runtime_object():
    """The assembled runtime (an ObjectFile)."""
    return assemble_object(RUNTIME_SOURCE.read_text(encoding="utf-8"), str(RUNTIME_SOURCE))


def runtime_symbols() -> frozenset[str]:
    """The runtime's global symbols: a program referring to one of them gets the runtime."""
    return frozenset(name for name, symbol in runtime_object().symbols.items()
                     if symbol.binding != "local")


def runtime_library():
    """The runtime as a library (asm.Library): linked to programs that use it, and naming why
    it refuses the vendor calls it does not provide (UNSUPPORTED)."""
    return Library("the athread runtime", (runtime_object(),), UNSUPPORTED)


# Machine.run links the runtime as `swsim run` does (vm.machine.Machine.program).
register_library(runtime_library)


def needs_runtime(objects) -> bool:
    return bool(set(undefined_symbols(list(objects))) & runtime_symbols())


def link_with_runtime(objects):
    """``link(objects)``, with the runtime's object after them if they refer to it."""
    return link(list(objects), (runtime_library(),))


def build_with_runtime(paths, include_dirs: tuple[str, ...] = ()):
    """Assemble source files and load object .swo files, and ``link_with_runtime`` them;
    AsmError lists the errors of all of them."""
    return build_files([os.fspath(path) for path in paths], tuple(include_dirs),
                       (runtime_library(),))
