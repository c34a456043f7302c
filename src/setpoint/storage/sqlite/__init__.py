"""The SQLite backend; see :mod:`setpoint.storage.sqlite.backend`."""

from setpoint.storage.sqlite.backend import SQLiteBackend
from setpoint.storage.sqlite.schema import Synchronous

__all__ = ["SQLiteBackend", "Synchronous"]
