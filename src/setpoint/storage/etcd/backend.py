"""The etcd backend: the storage contract on a real etcd v3 cluster.

Every operation is one etcd request; nothing is cached except the compacted revision (a
lower bound, checked with one read). Keys and revisions are mapped as
:mod:`setpoint.storage.etcd.keys` describes (interface revision = etcd revision - 1).

* ``create`` is a transaction "create_revision == 0 → put"; ``update`` is "exists and
  mod_revision == expected → put"; ``delete`` is "exists (and mod_revision == expected) →
  delete". A failed compare reads the key inside the same transaction, so ``KeyExists``,
  ``KeyNotFound`` and ``RevisionConflict`` report the value that made it fail.
* ``get`` and ``list`` are linearizable ranges at a revision; ``list`` pages with etcd's
  ``limit``/``more`` and reports ``remaining`` from etcd's ``count``.
* ``watch`` is one etcd watch per stream (:mod:`setpoint.storage.etcd.watch`), with previous
  values and etcd's progress notifications.
* ``compact`` is etcd's compaction. Nothing here compacts by itself: whoever runs the
  backend decides when (see ``docs/storage-etcd.md``).

Invariants:

* Acknowledged means committed by etcd's quorum; the revision returned is etcd's.
* Reads are linearizable: ``current_revision()`` is at least the revision of every write
  acknowledged (by anyone) before the call.
* ``close()`` ends every watch (their next step raises ``StopAsyncIteration``), waits for
  their reader tasks, and closes the channel; nothing outlives it.

Non-guarantees: a write that raises :class:`Unavailable` (etcd unreachable or no answer
within ``timeout``) may still have been applied. With a shared etcd, revisions advance with
every write to it, not only with this backend's. The backend recovers by itself when etcd
comes back (gRPC reconnects within a second); open watches end with :class:`Unavailable`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Coroutine, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from setpoint.storage import fanout, rules
from setpoint.storage.etcd import keys, wire
from setpoint.storage.etcd import tls as etcd_tls
from setpoint.storage.etcd.watch import EtcdWatch, Host
from setpoint.storage.interface import (
    Event,
    Expired,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    Progress,
    RevisionConflict,
    Unavailable,
)

if TYPE_CHECKING:
    from setpoint.storage.interface import Backend

DEFAULT_TIMEOUT = 5.0
"""Seconds an etcd request may take before it counts as :class:`Unavailable`."""


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


class EtcdBackend:
    """A :class:`~setpoint.storage.interface.Backend` on the etcd cluster at ``endpoints``
    (``http://host:port``, or ``https://host:port`` for TLS; several must be IP addresses),
    owning the keys under ``prefix``.

    Options: ``watch_buffer``, the live events a watcher may have pending (replay pages
    hold at most ``min(watch_buffer, 256)`` events); ``timeout``, seconds per request;
    ``tls``, the CA, client certificate and key files for ``https://`` endpoints (see
    :mod:`setpoint.storage.etcd.tls`). The constructor only validates (and reads the TLS
    files, to refuse unusable ones at once); :meth:`start` connects and raises
    :class:`Unavailable` (leaving the backend startable again) when etcd cannot be reached
    or the TLS handshake fails.
    """

    def __init__(self, endpoints: Sequence[str], *, prefix: str = "",
                 watch_buffer: int = rules.DEFAULT_WATCH_BUFFER,
                 timeout: float = DEFAULT_TIMEOUT,
                 tls: etcd_tls.ClientTLS | None = None) -> None:
        if watch_buffer < 1:
            raise ValueError(f"watch_buffer must be positive, got {watch_buffer}")
        self._keyspace = keys.Keyspace(prefix)
        self._connection = wire.Connection(endpoints, timeout=timeout, tls=tls)
        self._watch_buffer = watch_buffer
        self._state = _State.NEW
        self._compacted = 0  # a lower bound of the compacted revision
        self._streams: set[EtcdWatch] = set()
        self._group: asyncio.TaskGroup | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._version = ""

    @property
    def prefix(self) -> str:
        return self._keyspace.prefix

    @property
    def server_version(self) -> str:
        """The etcd version reported by the member that answered at :meth:`start`."""
        return self._version

    async def __aenter__(self) -> EtcdBackend:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def start(self) -> None:
        if self._state is not _State.NEW:
            raise Unavailable(f"etcd backend is {self._state.value}")
        try:
            self._connection.open()
        except ValueError as e:  # the TLS files have become unusable since the constructor
            raise Unavailable(str(e)) from e
        try:
            self._version = await self._connection.version()
            await self._current()
        except BaseException:
            await self._connection.close()
            raise
        ready: asyncio.Future[asyncio.TaskGroup] = asyncio.get_running_loop().create_future()
        self._supervisor = asyncio.create_task(self._supervise(ready),
                                               name="etcd-watch-readers")
        self._group = await ready
        self._state = _State.RUNNING

    async def _supervise(self, ready: asyncio.Future[asyncio.TaskGroup]) -> None:
        """Run the task group that owns every watch reader, until :meth:`close`."""
        async with asyncio.TaskGroup() as group:
            ready.set_result(group)
            await asyncio.Event().wait()  # cancelled by close(), which cancels the readers

    async def close(self) -> None:
        """End every watch, wait for their readers, close the channel. Idempotent."""
        self._state = _State.CLOSED
        readers = [task for stream in list(self._streams) if (task := stream.end()) is not None]
        self._streams.clear()
        if readers:
            await asyncio.wait(readers)  # each ends its gRPC stream on the way out
        supervisor, self._supervisor = self._supervisor, None
        self._group = None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor})
        await self._connection.close()

    # -- revisions -----------------------------------------------------------------------

    async def current_revision(self) -> int:
        self._check_running()
        return await self._current()

    async def _current(self) -> int:
        start, _ = self._keyspace.range("")
        reply = await self._connection.range(start, count_only=True)
        return keys.from_etcd_revision(reply.revision)

    async def compacted_revision(self) -> int:
        """etcd has no call for it: reading at a revision fails iff it is below etcd's
        compacted revision, so the answer is the lowest readable revision. The known lower
        bound is checked with one read; only if someone else compacted further does a
        binary search follow."""
        self._check_running()
        low = self._compacted
        if await self._readable(low):
            return low
        high = await self._current()  # readable: compaction never passes the current revision
        while high - low > 1:  # invariant: low unreadable, high readable
            middle = (low + high) // 2
            if await self._readable(middle):
                high = middle
            else:
                low = middle
        self._learn_compacted(high)
        return high

    async def _readable(self, revision: int) -> bool:
        start, _ = self._keyspace.range("")
        try:
            await self._connection.range(start, revision=keys.to_etcd_revision(revision),
                                         count_only=True)
        except wire.Compacted:
            return False
        return True

    def _learn_compacted(self, revision: int) -> None:
        self._compacted = max(self._compacted, revision)

    async def _explain(self, error: Exception, revision: int) -> Exception:
        if isinstance(error, wire.Compacted):
            return Expired(revision, await self.compacted_revision())
        return FutureRevision(revision, await self._current())

    # -- writes --------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        self._check_running()
        rules.check_write(key, value)
        reply = await self._connection.put_if_absent(self._keyspace.key(key), value)
        if not reply.succeeded:
            current = self._key_value(key, reply.kv)
            assert current is not None  # the compare saw the key in the same transaction
            raise KeyExists(key, current)
        revision = keys.from_etcd_revision(reply.revision)
        return KeyValue(key, value, revision, revision)

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        self._check_running()
        rules.check_write(key, value)
        reply = await self._connection.put_if_current(
            self._keyspace.key(key), value, _etcd_expected(expected_revision))
        if not reply.succeeded:
            raise self._compare_failed(key, expected_revision, reply.kv)
        revision = keys.from_etcd_revision(reply.revision)
        prev = self._key_value(key, reply.kv)
        assert prev is not None  # etcd returns the previous value it replaced
        return KeyValue(key, value, prev.create_revision, revision)

    async def delete(self, key: str, expected_revision: int | None = None) -> KeyValue:
        self._check_running()
        rules.check_write(key)
        expected = None if expected_revision is None else _etcd_expected(expected_revision)
        reply = await self._connection.delete_if(self._keyspace.key(key), expected)
        if not reply.succeeded:
            raise self._compare_failed(key, expected_revision, reply.kv)
        prev = self._key_value(key, reply.kv)
        assert prev is not None  # etcd returns the value it deleted
        return KeyValue(key, prev.value, prev.create_revision,
                        keys.from_etcd_revision(reply.revision))

    def _compare_failed(self, key: str, expected: int | None,
                        raw: wire.RawKV | None) -> Exception:
        current = self._key_value(key, raw)
        if current is None:
            return KeyNotFound(key)
        return RevisionConflict(key, -1 if expected is None else expected, current)

    # -- reads ---------------------------------------------------------------------------

    async def get(self, key: str, revision: int | None = None) -> KeyValue | None:
        self._check_running()
        _check_revision(revision)
        try:
            reply = await self._connection.range(
                self._keyspace.key(key), revision=_etcd_read_revision(revision))
        except (wire.Compacted, wire.FutureRev) as e:
            raise await self._explain(e, revision or 0) from e
        return self._key_value(key, reply.kvs[0] if reply.kvs else None)

    async def list(self, prefix: str, *, revision: int | None = None,
                   start_after: str | None = None, limit: int | None = None) -> ListResult:
        self._check_running()
        _check_revision(revision)
        rules.check_limit(limit)
        # A ``start_after`` beyond the prefix gives start >= end: etcd reads nothing then,
        # but still checks the revision.
        start, end = self._keyspace.range(prefix, start_after)
        try:
            reply = await self._connection.range(
                start, end, revision=_etcd_read_revision(revision), limit=limit or 0)
        except (wire.Compacted, wire.FutureRev) as e:
            raise await self._explain(e, revision or 0) from e
        at = revision or keys.from_etcd_revision(reply.revision)
        kvs = [self._named(kv) for kv in reply.kvs]
        return ListResult(kvs, at, more=reply.more, remaining=max(reply.count - len(kvs), 0))

    # -- watch ---------------------------------------------------------------------------

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: Literal[False] = False) -> AsyncIterator[Event]: ...

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: Literal[True]) -> AsyncIterator[Event | Progress]: ...

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: bool) -> AsyncIterator[Event] | AsyncIterator[Event | Progress]: ...

    def watch(self, prefix: str, start_revision: int, *,
              progress: bool = False) -> AsyncIterator[Event] | AsyncIterator[Event | Progress]:
        """Events under ``prefix`` from ``start_revision`` (see the interface). With
        ``progress``, the stream also yields :class:`Progress` markers when etcd reports
        progress and every event up to it has been yielded."""
        self._check_running()
        stream = EtcdWatch(self._host(), prefix, rules.watch_start(start_revision),
                           progress=progress)
        self._streams.add(stream)
        if progress:
            return stream
        return cast(AsyncIterator[Event], stream)

    def _host(self) -> Host:
        return Host(keyspace=self._keyspace, open_call=self._open_call, spawn=self._spawn,
                    current_revision=self.current_revision,
                    compacted_revision=self.compacted_revision, forget=self._streams.discard,
                    timeout=self._connection.timeout, buffer=self._watch_buffer,
                    page=min(self._watch_buffer, fanout.DEFAULT_PAGE_SIZE))

    def _open_call(self) -> wire.WatchCall:
        self._check_running()
        return self._connection.watch()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        group = self._group
        if group is None:
            coroutine.close()
            raise Unavailable(f"etcd backend is {self._state.value}")
        return group.create_task(coroutine)

    # -- compaction ----------------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        self._check_running()
        if revision < 0:
            raise ValueError(f"revision must not be negative, got {revision}")
        if revision == 0:
            return  # nothing is below the store's first state
        try:
            await self._connection.compact(keys.to_etcd_revision(revision))
        except wire.Compacted:
            return  # already compacted at or beyond it: compaction is idempotent
        except wire.FutureRev as e:
            raise FutureRevision(revision, await self._current()) from e
        self._learn_compacted(revision)

    # -- helpers -------------------------------------------------------------------------

    def _check_running(self) -> None:
        if self._state is not _State.RUNNING:
            raise Unavailable(f"etcd backend is {self._state.value}")

    def _key_value(self, key: str, raw: wire.RawKV | None) -> KeyValue | None:
        if raw is None:
            return None
        return KeyValue(key, raw.value, keys.from_etcd_revision(raw.create_revision),
                        keys.from_etcd_revision(raw.mod_revision))

    def _named(self, raw: wire.RawKV) -> KeyValue:
        kv = self._key_value(self._keyspace.name(raw.key), raw)
        assert kv is not None
        return kv


def _check_revision(revision: int | None) -> None:
    if revision is not None and revision < 0:
        raise ValueError(f"revision must not be negative, got {revision}")


def _etcd_expected(revision: int) -> int:
    """etcd's ``mod_revision`` to compare with. A negative expectation matches no key, and
    neither does etcd revision 1 (the empty store, which no write has)."""
    return keys.to_etcd_revision(max(revision, 0))


def _etcd_read_revision(revision: int | None) -> int:
    """etcd's revision for a read at interface ``revision``; 0 (etcd: "now") for now."""
    return 0 if not revision else keys.to_etcd_revision(revision)


if TYPE_CHECKING:
    _: Backend = EtcdBackend(["127.0.0.1:2379"])
