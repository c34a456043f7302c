"""StorageConfig validation and create_backend."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

import setpoint.storage as storage
from setpoint.storage import (
    Backend,
    MemoryBackend,
    SQLiteBackend,
    StorageConfig,
    create_backend,
)


def test_memory_config_builds_a_memory_backend() -> None:
    backend = create_backend(StorageConfig(kind="memory", watch_buffer=5))
    assert isinstance(backend, MemoryBackend)
    assert isinstance(backend, Backend)


def test_sqlite_config_builds_an_sqlite_backend_without_touching_the_path(
        tmp_path: Path) -> None:
    path = tmp_path / "db" / "store.db"
    backend = create_backend(StorageConfig(kind="sqlite", path=path, synchronous="NORMAL"))
    assert isinstance(backend, SQLiteBackend)
    assert backend.path == path
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize(("options", "message"), [
    ({"kind": "consul"}, "unknown storage kind"),
    ({"kind": "sqlite"}, "needs a path"),
    ({"kind": "memory", "path": Path("x.db")}, "takes no path"),
    ({"kind": "memory", "watch_buffer": 0}, "watch_buffer"),
    ({"kind": "sqlite", "path": Path("x.db"), "synchronous": "OFF"}, "synchronous"),
    ({"kind": "sqlite", "path": Path("x.db"), "max_batch": 0}, "max_batch"),
    ({"kind": "etcd"}, "needs endpoints"),
    ({"kind": "etcd", "endpoints": ["127.0.0.1:2379"]}, "needs endpoints"),
    ({"kind": "etcd", "endpoints": ("127.0.0.1:2379",), "path": Path("x.db")},
     "takes no path"),
    ({"kind": "memory", "endpoints": ("127.0.0.1:2379",)}, "takes no endpoints"),
    ({"kind": "sqlite", "path": Path("x.db"), "prefix": "/c"}, "takes no endpoints"),
], ids=["kind", "sqlite-path", "memory-path", "buffer", "synchronous", "batch",
        "etcd-endpoints", "etcd-endpoints-list", "etcd-path", "memory-endpoints",
        "sqlite-prefix"])
def test_invalid_configs_are_rejected(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StorageConfig(**options)


def test_config_is_frozen() -> None:
    config = StorageConfig(kind="memory")
    with pytest.raises(AttributeError):
        config.kind = "sqlite"  # type: ignore[misc]


def test_exports_match_the_public_names() -> None:
    public = {name for name, value in vars(storage).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}

    assert storage.__all__ == sorted(public)
