"""Helpers of the storage contract suite (watch consumption with timeouts, event summaries)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from setpoint.storage import Backend, Event, StorageConfig, create_backend
from setpoint.storage.encryption import EncryptingBackend
from setpoint.storage.encryption.config import parse_config
from setpoint.storage.interface import Unavailable

#: every value encrypted, so the contract suite proves the wrapper changes nothing else
ENCRYPT_EVERYTHING = parse_config({
    "apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
    "resources": [{"resources": ["*.*"], "providers": [
        {"secretbox": {"keys": [{"name": "k", "secret": base64.b64encode(b"k" * 32).decode()}]}}
    ]}]})

TIMEOUT = 10.0


class Opener:
    """Opens backends of one kind (sqlite: always the same file; etcd: always the same
    endpoint; etcd-tls: the same, with ``tls_files``, the CA, certificate and key) and closes
    them all."""

    def __init__(self, kind: str, path: Path, endpoint: str | None = None, *,
                 tls_files: tuple[Path, Path, Path] | None = None) -> None:
        self.kind = kind
        self.path = path
        self.endpoint = endpoint
        self.tls_files = tls_files
        self._opened: list[Backend] = []

    def config(self, **options: Any) -> StorageConfig:
        if self.kind in ("etcd", "etcd-tls"):
            assert self.endpoint is not None
            if self.tls_files is not None:
                ca_file, cert_file, key_file = self.tls_files
                options = {"ca_file": ca_file, "cert_file": cert_file, "key_file": key_file,
                           **options}
            return StorageConfig(kind="etcd", endpoints=(self.endpoint,), **options)
        if self.kind == "encrypted-sqlite":
            return StorageConfig(kind="sqlite", path=self.path, **options)
        path = self.path if self.kind == "sqlite" else None
        return StorageConfig(kind=self.kind, path=path, **options)  # type: ignore[arg-type]

    async def __call__(self, **options: Any) -> Backend:
        # an etcd process on a loaded machine may not answer the first connection in time
        # (gRPC's "timed out before receiving SETTINGS frame"): a fresh backend tries again
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while True:
            backend = create_backend(self.config(**options))
            if self.kind == "encrypted-sqlite":
                backend = EncryptingBackend(backend, ENCRYPT_EVERYTHING)
            try:
                await backend.start()
            except Unavailable:
                if self.kind not in ("etcd", "etcd-tls") or loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)
                continue
            self._opened.append(backend)
            return backend

    async def close_all(self) -> None:
        for backend in reversed(self._opened):
            await backend.close()


async def take(stream: AsyncIterator[Event], count: int) -> list[Event]:
    """The next ``count`` events, failing the test if they do not come in time."""
    events: list[Event] = []
    async with asyncio.timeout(TIMEOUT):
        while len(events) < count:
            events.append(await anext(stream))
    return events


async def drain(stream: AsyncIterator[Event]) -> list[Event]:
    """Every event until the stream ends."""
    async with asyncio.timeout(TIMEOUT):
        return [event async for event in stream]


async def let_tasks_run() -> None:
    """Give every ready task a few steps (a blocked watcher reaches its wait in one)."""
    for _ in range(5):
        await asyncio.sleep(0)


def brief(events: list[Event]) -> list[tuple[str, str, bytes, int]]:
    """``(type, key, value, revision)`` of each event, for readable assertions."""
    return [(e.type.value, e.kv.key, e.kv.value, e.revision) for e in events]
