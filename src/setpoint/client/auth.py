"""The ``Authorization`` header for a request.

Invariants:

- Credentials go only over TLS. For an ``http://`` server no header is produced at all, as
  client-go, kubectl and the official Python clients do (the token would travel in clear).
- A token file wins over an inline token once it has been read successfully (client-go's
  ``BearerTokenFile`` rule). It is re-read when the cached copy is older than
  ``token_refresh_interval`` or after :meth:`Credentials.invalidate` (called on a 401), so a
  rotated projected service-account token is picked up without a restart.
- A failed re-read keeps the last good token; a failed first read falls back to the inline
  token, or raises :class:`~setpoint.client.kubeconfig.ConfigError` when there is none.

Non-guarantee: a request that already carried a stale token is not retried here.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

from setpoint.apimachinery import clock as clocks
from setpoint.client import config as cfg
from setpoint.client import kubeconfig


class Credentials:
    """Produces the ``Authorization`` header value for one :class:`ClientConfig`."""

    def __init__(self, config: cfg.ClientConfig, *, clock: clocks.Clock | None = None) -> None:
        self._config = config
        self._clock = clock or clocks.SystemClock()
        self._file_token: str | None = None
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    def invalidate(self) -> None:
        """Forget the cached file token; the next request reads the file again."""
        self._read_at = None

    async def authorization(self) -> str | None:
        """The header value, or ``None`` when nothing is to be sent."""
        config = self._config
        if not config.is_https:
            return None
        token = await self._token()
        if token:
            return f"Bearer {token}"
        if config.username is not None and config.password is not None:
            pair = f"{config.username}:{config.password}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        return None

    async def _token(self) -> str | None:
        path = self._config.token_file
        if path is None:
            return self._config.token
        async with self._lock:
            now = self._clock.monotonic()
            fresh = (self._read_at is not None
                     and now - self._read_at < self._config.token_refresh_interval)
            if not fresh:
                try:
                    text = await asyncio.to_thread(_read, path)
                except OSError as e:
                    if self._file_token is None and not self._config.token:
                        raise kubeconfig.ConfigError(f"cannot read token file {path}: "
                                          f"{e.strerror or e}") from e
                else:
                    if text:
                        self._file_token = text
                self._read_at = now
        return self._file_token or self._config.token


def _read(path: Path) -> str:
    return path.read_text().strip()
