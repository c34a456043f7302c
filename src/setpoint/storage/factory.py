"""Choosing a backend from configuration.

:func:`create_backend` returns an unstarted backend; the caller owns it and must ``await
backend.start()`` and, in the end, ``await backend.close()``. Each kind has its own
options, validated here. The etcd backend is imported only when asked for, since it needs the
``aetcd`` client that the other kinds do not.
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
    * ``endpoints`` (etcd, required): the cluster's client URLs, ``http://host:port``, or
      ``https://host:port`` for TLS (all of them or none).
    * ``prefix`` (etcd): the etcd namespace of every key, ``""`` (keys stay as they are,
      under ``/registry/``) or e.g. ``/clusters/a`` so that clusters can share one etcd.
    * ``ca_file`` (etcd, https): the PEM CA certificates etcd's certificate must chain to;
      without it, the public roots gRPC ships with.
    * ``cert_file`` and ``key_file`` (etcd, https, both or neither): the client certificate
      and key presented to etcd (which needs them when run with ``--client-cert-auth``).

    Only the options' shapes are checked here; :func:`create_backend` also reads the TLS
    files (``ValueError`` when one is missing, unreadable, not PEM, or the key is not the
    certificate's) and refuses them with ``http://`` endpoints.

    >>> StorageConfig(kind="memory").watch_buffer
    1000
    """

    kind: Literal["memory", "sqlite", "etcd"]
    path: Path | None = None
    watch_buffer: int = rules.DEFAULT_WATCH_BUFFER
    synchronous: Synchronous = "FULL"
    max_batch: int = DEFAULT_MAX_BATCH
    endpoints: tuple[str, ...] = ()
    prefix: str = ""
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("memory", "sqlite", "etcd"):
            raise ValueError(f"unknown storage kind {self.kind!r}")
        if self.kind == "etcd":
            if self.path is not None:
                raise ValueError("etcd storage takes no path")
            if not self.endpoints or not isinstance(self.endpoints, tuple):
                raise ValueError("etcd storage needs endpoints (a tuple of URLs)")
            if (self.cert_file is None) != (self.key_file is None):
                raise ValueError("etcd client certificate and key go together: give both "
                                 "or neither")
        elif self.endpoints or self.prefix:
            raise ValueError(f"{self.kind} storage takes no endpoints or prefix")
        elif (self.ca_file, self.cert_file, self.key_file) != (None, None, None):
            raise ValueError(f"{self.kind} storage takes no TLS files")
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
    if config.kind == "etcd":
        from setpoint.storage.etcd import EtcdBackend
        from setpoint.storage.etcd.tls import ClientTLS

        tls = ClientTLS(ca_file=config.ca_file, cert_file=config.cert_file,
                        key_file=config.key_file)
        return EtcdBackend(config.endpoints, prefix=config.prefix,
                           watch_buffer=config.watch_buffer, tls=tls)
    assert_never(config.kind)
