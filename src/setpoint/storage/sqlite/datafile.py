"""Whether the database file a backend opened is still the one its path names.

SQLite keeps writing to the files it opened, even after they were deleted or replaced: a
server whose ``state.db`` (or ``state.db-wal``) was removed would go on acknowledging writes
that the next start cannot see. :class:`DataFile` remembers the device and inode of both
files once they are open and compares them with what the paths name now. The backend checks
before and after every commit batch (so no write is acknowledged once the check fails) and
whenever readiness is asked; the first failure is kept for good.

Non-guarantees: a file that was changed in place (same inode) is not detected; nor is a
deletion between the last check of a batch and the moment its callers hear back, which is
not a loss this process could still prevent.
"""

from __future__ import annotations

import os
from pathlib import Path


class DataFile:
    """The identity of ``path`` and its write-ahead log; see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._files = (path, path.with_name(path.name + "-wal"))
        self._identities: dict[Path, tuple[int, int]] = {}
        self._lost: str | None = None

    def record(self) -> None:
        """Remember what the paths name now: call once the files are open."""
        for file in self._files:
            st = os.stat(file)
            self._identities[file] = (st.st_dev, st.st_ino)

    @property
    def lost(self) -> str | None:
        """Why the files can no longer be trusted (None while they can); no system call."""
        return self._lost

    def check(self) -> str | None:
        """Compare the paths with what was recorded; return :attr:`lost`."""
        if self._lost is not None:
            return self._lost
        for file, identity in self._identities.items():
            try:
                st = os.stat(file)
            except FileNotFoundError:
                self._lost = _message(file, "deleted")
                break
            except OSError as e:
                self._lost = _message(file, f"made unreadable ({e.strerror})")
                break
            if (st.st_dev, st.st_ino) != identity:
                self._lost = _message(file, "replaced by another file")
                break
        return self._lost


def _message(file: Path, what: str) -> str:
    return (f"the database file {file} was {what} while the server was running; writes are "
            "refused because they could not be read back after a restart (restart the "
            "server to use the file its data directory holds now)")
