"""Reading a user's file with its size bounded before anything is read: a device (``/dev/zero``),
a pipe or a directory named as a source, object or data file is refused by name instead of read
forever."""
from __future__ import annotations

import os
import stat

from ..errors import SwsimError

MAX_SOURCE_BYTES = 64 << 20     # [choice] an assembly source or include: 600x the largest kernel
MAX_PROGRAM_BYTES = 1 << 30     # [choice] a .swo: code, LDM and the 256 MiB of static data fit


def regular_file_size(path, what: str, limit: int) -> int:
    """The size of `path` if it is a regular file of at most `limit` bytes, else SwsimError
    naming the file, what it was read as, and why."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise SwsimError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise SwsimError(f"{path}: {kind} (a device, pipe or directory cannot be read as "
                         f"{what})")
    if info.st_size > limit:
        raise SwsimError(f"{path}: {info.st_size} bytes, more than the {limit} {what} may have")
    return info.st_size


def read_bounded(path, what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see ``regular_file_size``)."""
    regular_file_size(path, what, limit)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)          # a file growing meanwhile stops at the limit
    except OSError as exc:
        raise SwsimError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise SwsimError(f"{path}: more than the {limit} bytes {what} may have")
    return data
