"""A backend wrapper that encrypts the values of configured resources.

Above it every value is plaintext; below it, values under a configured prefix are encrypted
with the first provider of their rule. Reads pick the provider by the value's prefix, falling
back to ``identity`` when the rule lists it (values written before encryption was on).

Invariants: keys, revisions and every other contract of the wrapped backend are unchanged
(compare-and-swap compares revisions, never values); a value that no configured key can
decrypt raises :class:`Undecryptable` (a :class:`StorageError`), never garbage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, overload

from setpoint.storage import interface as st
from setpoint.storage.encryption.config import EncryptionConfig
from setpoint.storage.encryption.providers import DecryptError, Identity


class Undecryptable(st.Unreadable):
    """A stored value could not be decrypted with any configured key."""


class EncryptingBackend:
    def __init__(self, inner: st.Backend, config: EncryptionConfig) -> None:
        self.inner = inner
        self._config = config

    # --- values ----------------------------------------------------------------------------

    def _encrypt(self, key: str, value: bytes) -> bytes:
        rule = self._config.rule_for(key)
        if rule is None:
            return value
        return rule.providers[0].encrypt(value, key.encode())

    def _decrypt(self, key: str, value: bytes) -> tuple[bytes, bool]:
        """(plaintext, stale): stale when the first provider would not have written it."""
        rule = self._config.rule_for(key)
        if rule is None:
            return value, False
        identity = False
        for i, provider in enumerate(rule.providers):
            if isinstance(provider, Identity):
                identity = True
                continue
            if value.startswith(provider.prefix):
                try:
                    return provider.decrypt(value, key.encode()), i > 0
                except DecryptError as e:
                    raise Undecryptable(f"{key}: {e}") from e
        if identity and not value.startswith(b"k8s:enc:"):
            return value, not isinstance(rule.providers[0], Identity)
        raise Undecryptable(f"{key}: no configured key matches the stored value")

    def _kv(self, kv: st.KeyValue) -> st.KeyValue:
        value, stale = self._decrypt(kv.key, kv.value)
        if value is kv.value and not stale:
            return kv
        return st.KeyValue(kv.key, value, kv.create_revision, kv.mod_revision, stale)

    def decrypt_event(self, event: st.Event) -> st.Event:
        return st.Event(event.type, self._kv(event.kv),
                        None if event.prev is None else self._kv(event.prev))

    # --- the Backend protocol --------------------------------------------------------------

    def health(self) -> str | None:
        """The wrapped backend's health (:class:`st.ReportsHealth`); None when it reports
        none. Encryption itself never makes writes unacknowledgeable."""
        if isinstance(self.inner, st.ReportsHealth):
            return self.inner.health()
        return None

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compacted_revision(self) -> int:
        return await self.inner.compacted_revision()

    async def create(self, key: str, value: bytes) -> st.KeyValue:
        try:
            kv = await self.inner.create(key, self._encrypt(key, value))
        except st.KeyExists as e:
            current = None if e.current is None else self._kv(e.current)
            raise st.KeyExists(key, current) from e
        return st.KeyValue(kv.key, value, kv.create_revision, kv.mod_revision)

    async def update(self, key: str, value: bytes, expected_revision: int) -> st.KeyValue:
        try:
            kv = await self.inner.update(key, self._encrypt(key, value), expected_revision)
        except st.RevisionConflict as e:
            raise st.RevisionConflict(key, e.expected, self._kv(e.current)) from e
        return st.KeyValue(kv.key, value, kv.create_revision, kv.mod_revision)

    async def delete(self, key: str, expected_revision: int | None = None) -> st.KeyValue:
        try:
            return self._kv(await self.inner.delete(key, expected_revision))
        except st.RevisionConflict as e:
            raise st.RevisionConflict(key, e.expected, self._kv(e.current)) from e

    async def get(self, key: str, revision: int | None = None) -> st.KeyValue | None:
        kv = await self.inner.get(key, revision)
        return None if kv is None else self._kv(kv)

    async def list(self, prefix: str, *, revision: int | None = None,
                   start_after: str | None = None, limit: int | None = None) -> st.ListResult:
        result = await self.inner.list(prefix, revision=revision, start_after=start_after,
                                       limit=limit)
        return st.ListResult([self._kv(kv) for kv in result.kvs], result.revision, result.more,
                             result.remaining)

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: Literal[False] = False) -> AsyncIterator[st.Event]: ...

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: Literal[True]) -> AsyncIterator[st.Event | st.Progress]: ...

    @overload
    def watch(self, prefix: str, start_revision: int, *, progress: bool
              ) -> AsyncIterator[st.Event] | AsyncIterator[st.Event | st.Progress]: ...

    def watch(self, prefix: str, start_revision: int, *, progress: bool = False
              ) -> AsyncIterator[st.Event] | AsyncIterator[st.Event | st.Progress]:
        return _DecryptingWatch(self, self.inner.watch(prefix, start_revision,
                                                       progress=progress))

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)


class _DecryptingWatch:
    """The wrapped backend's watch with values decrypted.

    A class, not an async generator: cancelling one ``__anext__`` (a caller's timeout) must
    leave the watch usable, as the wrapped backends' iterators are.
    """

    def __init__(self, backend: EncryptingBackend,
                 source: AsyncIterator[st.Event] | AsyncIterator[st.Event | st.Progress]) -> None:
        self._backend = backend
        self._source = source

    def __aiter__(self) -> _DecryptingWatch:
        return self

    async def __anext__(self) -> st.Event | st.Progress:
        item = await anext(self._source)
        if isinstance(item, st.Progress):
            return item
        return self._backend.decrypt_event(item)

    async def aclose(self) -> None:
        close = getattr(self._source, "aclose", None)
        if close is not None:
            await close()
