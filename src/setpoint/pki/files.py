"""Private files: written whole (temp file and rename), mode 0600, in a 0700 directory.

Invariants: a reader never sees a half-written file; the file is never readable by others,
not even for an instant (it is created 0600, not chmod-ed afterwards); an existing directory
that is more open than 0700 is tightened, not refused (a data directory created by an older
version, or by ``mkdir``, becomes private on the next start).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as 0700, or tighten it to 0700 when it exists."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        path.chmod(mode & ~0o077 | 0o700)
    return path


def tighten(path: Path) -> None:
    """Make an existing file 0600 (no-op when it does not exist)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & 0o077:
        path.chmod(mode & ~0o077)


def write_private(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``, mode 0600, its directory made private."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
