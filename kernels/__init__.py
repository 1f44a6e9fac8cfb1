"""Hand-written assembly kernels shipped with swsim (installed as package data).

``source_path(name)`` is the path of a kernel source; ``program(name)`` assembles it once and
caches the Program.
"""
from __future__ import annotations

import functools
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent


def source_path(name: str) -> Path:
    path = KERNEL_DIR / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in KERNEL_DIR.glob("*.s")))
        raise FileNotFoundError(f"no kernel {name!r} in {KERNEL_DIR} (known: {known})")
    return path


@functools.lru_cache(maxsize=None)
def program(name: str):
    from ..asm import assemble_file
    return assemble_file(str(source_path(name)))
