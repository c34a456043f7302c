"""Storage: a revisioned key-value log with etcd semantics, and its backends.

The contract is :class:`Backend` (see :mod:`setpoint.storage.interface`); build one with
:func:`create_backend` from a :class:`StorageConfig`.
"""

from setpoint.storage.factory import StorageConfig, create_backend
from setpoint.storage.interface import (
    Backend,
    Event,
    EventType,
    Expired,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    Progress,
    RevisionConflict,
    StorageError,
    Unavailable,
    WatchLagged,
)
from setpoint.storage.memory import MemoryBackend
from setpoint.storage.sqlite import SQLiteBackend

__all__ = [
    "Backend",
    "Event",
    "EventType",
    "Expired",
    "FutureRevision",
    "KeyExists",
    "KeyNotFound",
    "KeyValue",
    "ListResult",
    "MemoryBackend",
    "Progress",
    "RevisionConflict",
    "SQLiteBackend",
    "StorageConfig",
    "StorageError",
    "Unavailable",
    "WatchLagged",
    "create_backend",
]
