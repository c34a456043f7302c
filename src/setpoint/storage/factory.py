"""Choosing a backend from configuration.

:func:`create_backend` returns an unstarted backend; the caller owns it and must ``await
backend.start()`` and, in the end, ``await backend.close()``. New kinds (etcd) are new
``kind`` values with their own options, validated here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, assert_never

from setpoint.storage import rules
from setpoint.storage.interface import Backend
from setpoint.storage.memory import MemoryBackend
from setpoint.storage.sqlite.backend import DEFAULT_MAX_BATCH, SQLiteBackend
from setpoint.storage.sqlite.schema import Synchronous


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageConfig:
    """Which backend, and its options.

    * ``kind``: ``"memory"`` (nothing survives the process) or ``"sqlite"``.
    * ``path``: the database file, required for ``sqlite`` and rejected for ``memory``.
    * ``watch_buffer``: live events a watcher may have pending before ``WatchLagged``.
    * ``synchronous`` (sqlite): ``"FULL"`` survives power loss, ``"NORMAL"`` survives a
      killed process and is faster.
    * ``max_batch`` (sqlite): the most writes group commit puts in one transaction.

    >>> StorageConfig(kind="memory").watch_buffer
    1000
    """

    kind: Literal["memory", "sqlite"]
    path: Path | None = None
    watch_buffer: int = rules.DEFAULT_WATCH_BUFFER
    synchronous: Synchronous = "FULL"
    max_batch: int = DEFAULT_MAX_BATCH

    def __post_init__(self) -> None:
        if self.kind not in ("memory", "sqlite"):
            raise ValueError(f"unknown storage kind {self.kind!r}")
        if self.kind == "sqlite" and self.path is None:
            raise ValueError("sqlite storage needs a path")
        if self.kind == "memory" and self.path is not None:
            raise ValueError("memory storage takes no path")
        if self.watch_buffer < 1:
            raise ValueError(f"watch_buffer must be positive, got {self.watch_buffer}")
        if self.synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, got {self.synchronous!r}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be positive, got {self.max_batch}")


def create_backend(config: StorageConfig) -> Backend:
    """An unstarted backend for ``config``."""
    if config.kind == "memory":
        return MemoryBackend(watch_buffer=config.watch_buffer)
    if config.kind == "sqlite":
        assert config.path is not None  # checked in StorageConfig.__post_init__
        return SQLiteBackend(config.path, synchronous=config.synchronous,
                             watch_buffer=config.watch_buffer, max_batch=config.max_batch)
    assert_never(config.kind)
