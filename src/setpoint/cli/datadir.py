"""One server per data directory: an exclusive lock, held for the server's whole life.

``setpoint serve`` takes ``flock(LOCK_EX | LOCK_NB)`` on ``DIR/lock`` before it opens
storage or writes the kubeconfig, and holds it until the process ends. Two servers on one
directory would each be blind to the other's writes to ``state.db`` and overwrite each
other's kubeconfig; the second one now fails at once with :class:`DataDirInUse`, which names
the process that holds the lock (its pid is written into the lock file).

The kernel releases the lock when its holder exits in any way (``kill -9`` included), so a
server that crashed never leaves a stale lock behind: the file stays, the lock does not.

Non-guarantees: ``flock`` is advisory (a process that does not ask for the lock is not
stopped) and local to one machine (a directory on a network filesystem mounted by two
machines is not protected).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType

LOCK_FILE = "lock"


class DataDirInUse(Exception):
    """Another process holds the data directory's lock."""

    def __init__(self, path: Path, holder: str) -> None:
        who = f"another setpoint serve (pid {holder})" if holder else "another process"
        super().__init__(f"data directory {path} is in use by {who}; stop it first or "
                         "choose another --data-dir")
        self.path = path
        self.holder = holder


class DataDirLock:
    """The lock of one data directory; ``with DataDirLock(path):`` holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise :class:`DataDirInUse` at once (never waits)."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already locked by this process")
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise DataDirInUse(self.path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Let go of the lock (idempotent); the file stays for the next server."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return ""
