"""The athread CPE runtime (docs/runtime.md): ``athread.s`` provides what compiled CPE code
expects of the vendor library (the thread-local ``_MYID _PEN _ROW _COL _CGN``, ``printf`` into
``_slave_stdout``, ``penv_slave_cycle_count``, ``penv_slave_float_ops_init``/``_count``,
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

from ...asm import _read as read_source, assemble_object, link
from .console import console_text, read_console

__all__ = ["RUNTIME_SOURCE", "runtime_object", "runtime_symbols",
           "needs_runtime", "link_with_runtime", "build_with_runtime", "console_text",
           "read_console"]

RUNTIME_SOURCE = Path(__file__).resolve().parent / "athread.s"

@functools.lru_cache(maxsize=None)
def runtime_object():
    """The assembled runtime (an ObjectFile)."""
    return assemble_object(RUNTIME_SOURCE.read_text(encoding="utf-8"), str(RUNTIME_SOURCE))


def runtime_symbols() -> frozenset[str]:
    """The runtime's global symbols: a program referring to one of them gets the runtime."""
    return frozenset(name for name, symbol in runtime_object().symbols.items()
                     if symbol.binding != "local")


def _undefined(objects) -> set[str]:
    """Symbols that relocations of ``objects`` name and no object defines."""
    defined = {name for obj in objects for name in obj.symbols} | \
        {section for obj in objects for section in obj.sections}
    return {reloc.symbol for obj in objects for reloc in obj.relocations
            if reloc.target_section is None and reloc.symbol not in defined}


def needs_runtime(objects) -> bool:
    return bool(_undefined(objects) & runtime_symbols())


def link_with_runtime(objects):
    """``link(objects)``, with the runtime's object after them if they refer to it."""
    objects = list(objects)
    if needs_runtime(objects):
        objects.append(runtime_object())
    return link(objects)


def build_with_runtime(paths, include_dirs: tuple[str, ...] = ()):
    """Assemble source files (AsmError: the errors of the first file that has some) and
    ``link_with_runtime`` them."""
    return link_with_runtime([assemble_object(read_source(os.fspath(path)), os.fspath(path),
                                              tuple(include_dirs)) for path in paths])
