"""Hand-written assembly kernels shipped with swsim (installed as package data), in folders by
family: ``gemm/`` (the GEMM inner loop, the LDM GEMM primitive, swGEMM, the baseline GEMM),
``bench/`` (micro-benchmarks), ``examples/`` and ``include/`` (macro and constant headers).

Kernels reuse each other through the linker: a kernel that calls another's entries is linked
with its object (``program("gemm/swgemm.s", "gemm/gemm_prim.s")``); only ``.inc`` headers are
``.include``-d. ``source_path(name)`` is the path of a source (relative to this folder);
``program(*names)`` assembles each source once and links the objects with the athread runtime
(``runtime/``, docs/runtime.md) when they call it; the linked program is kept in memory and on
disk (``kernels/cache.py``: keyed by content, so a later process loads it without assembling).
"""
from __future__ import annotations

import functools
from pathlib import Path

from .cache import cached_object, cached_program

KERNEL_DIR = Path(__file__).resolve().parent


def source_path(name: str) -> Path:
    path = KERNEL_DIR / name
    if not path.is_file():
        known = ", ".join(sorted(str(p.relative_to(KERNEL_DIR)) for p in KERNEL_DIR.rglob("*.s")))
        raise FileNotFoundError(f"no kernel {name!r} in {KERNEL_DIR} (known: {known})")
    return path


@functools.lru_cache(maxsize=None)
def object_file(name: str):
    """The assembled object of one kernel source (kept on disk as the programs are)."""
    path = source_path(name)

    def build():
        from ..asm import assemble_object
        return assemble_object(path.read_text(encoding="utf-8"), str(path))
    return cached_object(name, build)


@functools.lru_cache(maxsize=None)
def program(*names: str):
    """The Program linking the objects of `names`, in this order (and the athread runtime if
    they refer to it)."""
    if not names:
        raise ValueError("program() needs at least one kernel source")
    for name in names:
        source_path(name)                   # an unknown name fails here, cache or not

    def build():
        from .athread import link_with_runtime
        return link_with_runtime([object_file(name) for name in names])
    return cached_program(names, build)
