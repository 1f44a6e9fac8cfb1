"""The on-disk cache of linked kernels: ``kernels.program(*names)`` is stored as a ``.swo``
file keyed by content, so a second process loads it instead of assembling and linking; so is
each source's object (``kernels.object_file``, an object ``.swo``), which launches read for the
kernel's requirements.

The key is a SHA-256 of the names and of every input that could change the result: the
kernel tree's sources, headers and Python (the runtime's linking), and the assembler, linker,
``.swo`` format and ISA table (``asm/``, ``isa/``). Editing any of them gives new keys, so an
entry is never stale; entries of old keys are simply not read again. Each file starts with
the SHA-256 of the rest: a corrupt or truncated file is ignored and rebuilt. Deleting the
directory is always safe. The checkout's own directory is part of the key too: an entry
records its sources' paths (fault and requirement messages name file:line), which must be
this checkout's files, not those of another clone that built the entry first.

Where: ``$SWSIM_CACHE_DIR`` if set (empty: no cache), else ``$XDG_CACHE_HOME/swsim/programs``,
else ``~/.cache/swsim/programs``.
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Optional

CACHE_ENV = "SWSIM_CACHE_DIR"
PACKAGE_DIR = Path(__file__).resolve().parent.parent
# The trees whose files decide what program() returns, and the suffixes read in them.
INPUT_TREES = (("kernels", (".s", ".inc", ".py")), ("asm", (".py",)),
               ("isa", (".py",)))
CHECKSUM_BYTES = hashlib.sha256().digest_size


def cache_dir() -> Optional[Path]:
    """The cache directory, None when caching is off (``SWSIM_CACHE_DIR=""``)."""
    override = os.environ.get(CACHE_ENV)
    if override is not None:
        return Path(override) if override else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "swsim" / "programs"


@functools.lru_cache(maxsize=None)
def inputs_digest() -> str:
    """SHA-256 of the paths and contents of every file in INPUT_TREES (read once a process)."""
    digest = hashlib.sha256()
    for tree, suffixes in INPUT_TREES:
        for path in sorted((PACKAGE_DIR / tree).rglob("*")):
            if path.suffix in suffixes and path.is_file():
                digest.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def entry_path(directory: Path, names: tuple, kind: str = "program") -> Path:
    """The file of `names`' linked program, or (kind "object") of one source's object."""
    key = hashlib.sha256("\0".join((inputs_digest(), str(PACKAGE_DIR), kind, *names))
                         .encode()).hexdigest()
    return directory / f"{key}.swo"


def cached_program(names: tuple, build: Callable):
    """The Program of `names` from the cache, or `build()`'s, stored for the next process."""
    from ..asm.swo import program_bytes, program_from_bytes
    return _cached(names, "program", build, program_bytes, program_from_bytes)


def cached_object(name: str, build: Callable):
    """The ObjectFile of source `name` from the cache, or `build()`'s, stored for the next
    process (a kernel's own symbols, e.g. its ``REQ_*`` requirements, without assembling)."""
    from ..asm.objfile import objects_bytes, objects_from_bytes
    return _cached((name,), "object", build, lambda obj: objects_bytes([obj]),
                   lambda data, where: objects_from_bytes(data, where)[0])


def _cached(names: tuple, kind: str, build: Callable, to_bytes: Callable, from_bytes: Callable):
    from ..asm.swo import SwoError
    directory = cache_dir()
    if directory is None:
        return build()
    path = entry_path(directory, names, kind)
    try:
        data = path.read_bytes()
        payload = data[CHECKSUM_BYTES:]
        if hashlib.sha256(payload).digest() == data[:CHECKSUM_BYTES]:
            return from_bytes(payload, str(path))
    except (OSError, SwoError):
        pass                                # missing, unreadable or corrupt: rebuilt below
    built = build()
    payload = to_bytes(built)
    _write_atomically(path, hashlib.sha256(payload).digest() + payload)
    return built


def _write_atomically(path: Path, data: bytes) -> None:
    """Write via a temporary file and a rename: a concurrent reader sees the old file or the
    whole new one. A cache that cannot be written (read-only home, full disk) is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass
