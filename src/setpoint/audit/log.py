"""The audit log file: one JSON event per line, rotated by size, written off the event loop.

:class:`AuditLog` takes events from any thread or coroutine without blocking (a bounded
queue) and writes them from a thread of its own. When the file would grow past ``max_size``
bytes it is renamed ``<name>-<UTC timestamp>.<ext>`` and a new one begun; backups beyond
``max_backups`` (oldest first) and older than ``max_age_days`` are removed, as
kube-apiserver's ``--audit-log-max{size,backup,age}`` do.

Invariants: the file and its backups are 0600; events are written in the order they were
accepted; :meth:`AuditLog.close` writes everything accepted before it returns; an event that
quotes bytes that are not UTF-8 (a ``User-Agent``, an impersonated name) is written with
U+FFFD in their place (:mod:`setpoint.apimachinery.lossyjson`), never lost.

Non-guarantee: when the queue is full (the disk is slower than the requests), events are
dropped and counted in :attr:`AuditLog.dropped` rather than stalling the server.
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.apimachinery import lossyjson
from setpoint.pki import files


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditLogConfig:
    path: Path
    max_size: int = 100 * 1024 * 1024
    max_backups: int = 10
    max_age_days: int = 30
    queue_size: int = 10_000

    def __post_init__(self) -> None:
        if self.max_size < 1024:
            raise ValueError("audit log max_size must be at least 1 KiB")
        if self.max_backups < 0 or self.max_age_days < 0 or self.queue_size < 1:
            raise ValueError("audit log limits must not be negative")


_STOP = object()


class AuditLog:
    def __init__(self, config: AuditLogConfig) -> None:
        self.config = config
        self.dropped = 0
        self.written = 0
        self._queue: queue.Queue[Any] = queue.Queue(config.queue_size)
        files.private_dir(config.path.parent)
        self._file = self._open()
        self._thread = threading.Thread(target=self._run, name="audit-log", daemon=True)
        self._thread.start()

    def _open(self) -> Any:
        fd = os.open(self.config.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        files.tighten(self.config.path)
        return os.fdopen(fd, "ab")

    def write(self, event: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait(lossyjson.dumps(event) + b"\n")
        except queue.Full:
            self.dropped += 1

    def flush(self) -> None:
        """Block until every event accepted so far is written (a thread may call it; the
        event loop should not)."""
        self._queue.join()

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < 512 and batch[-1] is not _STOP:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = batch[-1] is _STOP
            lines = batch[:-1] if stop else batch
            self._write(lines)
            for _ in batch:
                self._queue.task_done()
            if stop:
                self._file.close()
                return

    def _write(self, lines: list[bytes]) -> None:
        for line in lines:
            if self._file.tell() + len(line) > self.config.max_size and self._file.tell() > 0:
                self._rotate()
            self._file.write(line)
            self.written += 1
        self._file.flush()

    def _rotate(self) -> None:
        self._file.close()
        path = self.config.path
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")
        path.rename(path.with_name(f"{path.stem}-{stamp}{path.suffix}"))
        self._prune()
        self._file = self._open()

    def backups(self) -> list[Path]:
        path = self.config.path
        return sorted(p for p in path.parent.glob(f"{path.stem}-*{path.suffix}") if p != path)

    def _prune(self) -> None:
        backups = self.backups()
        cutoff = dt.datetime.now(dt.UTC).timestamp() - self.config.max_age_days * 86400
        for i, backup in enumerate(backups):
            too_many = len(backups) - i > self.config.max_backups
            too_old = self.config.max_age_days and backup.stat().st_mtime < cutoff
            if too_many or too_old:
                backup.unlink(missing_ok=True)
