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


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageConfig:
    """Which backend, and its options.

    * ``kind``: ``"memory"`` (nothing survives the process).
    * ``path``: rejected for ``memory``.
    * ``watch_buffer``: live events a watcher may have pending before ``WatchLagged``.

    >>> StorageConfig(kind="memory").watch_buffer
    1000
    """

    kind: Literal["memory"]
    path: Path | None = None
    watch_buffer: int = rules.DEFAULT_WATCH_BUFFER

    def __post_init__(self) -> None:
        if self.kind != "memory":
            raise ValueError(f"unknown storage kind {self.kind!r}")
        if self.path is not None:
            raise ValueError("memory storage takes no path")
        if self.watch_buffer < 1:
            raise ValueError(f"watch_buffer must be positive, got {self.watch_buffer}")


def create_backend(config: StorageConfig) -> Backend:
    """An unstarted backend for ``config``."""
    if config.kind == "memory":
        return MemoryBackend(watch_buffer=config.watch_buffer)
    assert_never(config.kind)
