"""The etcd v3 gRPC API, typed: one channel, the calls the backend makes, errors translated.

The messages and stubs come from ``aetcd.rpc`` (etcd's protobufs compiled for current
``grpcio``/``protobuf``); this module is the only one that touches them, so the rest of the
package sees plain dataclasses and :mod:`setpoint.storage.interface` errors. Revisions here
are etcd's own; :mod:`setpoint.storage.etcd.keys` maps them.

Errors: a call that cannot reach etcd, or gets no answer within ``timeout`` seconds, raises
:class:`~setpoint.storage.interface.Unavailable` (for a write, its outcome is then unknown);
etcd's "required revision has been compacted" and "is a future revision" raise
:class:`Compacted` and :class:`FutureRev`, which the backend turns into the interface's
errors once it knows the revisions to report; anything else etcd refuses is a
:class:`~setpoint.storage.interface.StorageError` carrying etcd's message.

TLS: ``https://`` endpoints (all of them, or none: mixing is refused) make a TLS channel
with the files of a :class:`~setpoint.storage.etcd.tls.ClientTLS` (CA, client certificate
and key), read when the connection is made and again at each :meth:`Connection.open`. A call
that fails on TLS raises :class:`~setpoint.storage.interface.Unavailable` whose message says
``TLS`` and what is likely wrong (:func:`setpoint.storage.etcd.tls.hint`); gRPC's own words
for it ("Unwrap failed (TSI_DATA_CORRUPTED)") would not tell an operator much.

Non-guarantees: several endpoints must be IP addresses (gRPC balances over one address
list); one DNS name is resolved by gRPC and may stand for the whole cluster. gRPC checks
every member's certificate against one name, the first endpoint's host (a channel has one
authority): with several ``https://`` endpoints each member's certificate must be valid for
that host too (one certificate listing every member's address, or members on one host as
``scripts/cluster.sh`` runs them), or else the members whose certificate is not are never
used; one DNS name that every member's certificate carries avoids the question.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc  # type: ignore[import-untyped]
from aetcd import rpc  # type: ignore[import-untyped]
from grpc import aio as grpc_aio

from setpoint.storage.etcd import tls as etcd_tls
from setpoint.storage.interface import StorageError, Unavailable

_Message = Any
"""A protobuf message or stub from ``aetcd.rpc``; untyped, so it never leaves this module."""

_CHANNEL_OPTIONS: tuple[tuple[str, int | str], ...] = (
    ("grpc.max_receive_message_length", -1),  # a large list is one response
    ("grpc.keepalive_time_ms", 10_000),  # etcd refuses pings more often than every 5s
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),  # be back within a second of etcd
)

_LEADER_REQUIRED = (("hasleader", "true"),)
"""Asks etcd to end a watch stream when its member loses the leader, instead of going quiet."""

_UNREACHABLE = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"})


class Compacted(Exception):
    """etcd: the revision asked for is below its compacted revision."""


class FutureRev(Exception):
    """etcd: the revision asked for is above its current revision."""


@dataclass(frozen=True, slots=True)
class RawKV:
    """A key's value as etcd reports it (etcd revisions, etcd key)."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int


@dataclass(frozen=True, slots=True)
class RangeReply:
    """``revision`` is etcd's current revision when it answered; ``count`` counts every key
    in the range at the revision read, ``more`` says keys beyond the limit exist."""

    revision: int
    kvs: list[RawKV]
    more: bool
    count: int


@dataclass(frozen=True, slots=True)
class TxnReply:
    """The outcome of a compare-and-swap: on success ``revision`` is the write's and ``kv``
    the key's previous value; on failure ``kv`` is its current value (``None``: absent)."""

    succeeded: bool
    revision: int
    kv: RawKV | None


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One watch event; ``prev`` is present whenever etcd could still read it."""

    deleted: bool
    kv: RawKV
    prev: RawKV | None


@dataclass(frozen=True, slots=True)
class WatchReply:
    """One response on a watch stream. ``revision`` is the header revision: on a reply with
    no events (and not ``created`` nor ``canceled``) it is a progress notification, saying
    every event of the watch up to it has been sent."""

    created: bool
    canceled: bool
    compact_revision: int
    cancel_reason: str
    revision: int
    events: list[RawEvent]


def target(endpoints: Sequence[str]) -> str:
    """The gRPC target for ``endpoints`` (``host:port``, ``http://host:port`` or
    ``https://host:port``).

    >>> target(["http://127.0.0.1:2379"])
    'dns:///127.0.0.1:2379'
    >>> target(["127.0.0.1:2379", "http://127.0.0.2:2379"])
    'ipv4:127.0.0.1:2379,127.0.0.2:2379'
    """
    if not endpoints or isinstance(endpoints, str):
        raise ValueError(f"etcd needs a sequence of endpoints, got {endpoints!r}")
    addresses = [_address(endpoint)[1:] for endpoint in endpoints]
    if len(addresses) == 1:
        host, port = addresses[0]
        return f"dns:///{_join(host, port)}"
    versions = set()
    for host, _ in addresses:
        try:
            versions.add(ipaddress.ip_address(host).version)
        except ValueError:
            raise ValueError("several etcd endpoints must all be IP addresses; "
                             f"{host!r} is a name (one name may resolve to every member)"
                             ) from None
    if len(versions) > 1:
        raise ValueError("etcd endpoints must all be IPv4 or all IPv6")
    scheme = f"ipv{versions.pop()}"
    return f"{scheme}:" + ",".join(_join(host, port) for host, port in addresses)


def secure(endpoints: Sequence[str]) -> bool:
    """Whether ``endpoints`` are ``https://`` (all of them); ``ValueError`` when only some
    are (a cluster is reached one way: a plain member would carry what TLS protects).

    >>> secure(["https://10.0.0.1:2379", "https://10.0.0.2:2379"])
    True
    >>> secure(["127.0.0.1:2379"])
    False
    """
    if not endpoints or isinstance(endpoints, str):
        raise ValueError(f"etcd needs a sequence of endpoints, got {endpoints!r}")
    schemes = {_address(endpoint)[0] for endpoint in endpoints}
    if len(schemes) > 1:
        raise ValueError("etcd endpoints must be all https:// or all http://, not both")
    return schemes == {"https"}


def _address(endpoint: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``endpoint``; no scheme means ``http``."""
    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"etcd endpoint {endpoint!r}: only http:// and https:// are "
                         "supported")
    try:
        port = parsed.port
    except ValueError:
        raise ValueError(f"etcd endpoint {endpoint!r} has an invalid port") from None
    if parsed.hostname is None or parsed.path not in ("", "/"):
        raise ValueError(f"etcd endpoint {endpoint!r} must be host:port")
    return parsed.scheme, parsed.hostname, port or 2379


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """Turn a gRPC failure of ``what`` into the errors of the module docstring."""
    try:
        yield
    except rpc.AioRpcError as e:
        raise translate(e, what) from e


def translate(error: _Message, what: str) -> Exception:
    """The error to raise for gRPC ``error`` (an ``AioRpcError``) during ``what``."""
    code = getattr(error.code(), "name", str(error.code()))
    details = str(error.details() or "")
    if (hint := etcd_tls.hint(details)) is not None:
        return Unavailable(f"etcd {what}: TLS: {hint}: {code}: {details}")
    if code == "OUT_OF_RANGE" and "compacted" in details:
        return Compacted(details)
    if code == "OUT_OF_RANGE" and "future revision" in details:
        return FutureRev(details)
    if code in _UNREACHABLE or "no leader" in details or "leader changed" in details:
        return Unavailable(f"etcd {what}: {code}: {details}")
    return StorageError(f"etcd {what}: {code}: {details}")


def is_rpc_error(error: BaseException) -> bool:
    return isinstance(error, rpc.AioRpcError)


def _kv(message: _Message) -> RawKV:
    return RawKV(bytes(message.key), bytes(message.value), int(message.create_revision),
                 int(message.mod_revision))


def _compare(key: bytes, target_name: str, result: str, value: int) -> _Message:
    field = {"CREATE": "create_revision", "MOD": "mod_revision"}[target_name]
    return rpc.Compare(key=key, target=getattr(rpc.Compare, target_name),
                       result=getattr(rpc.Compare, result), **{field: value})


class Connection:
    """A gRPC channel to etcd and the calls made on it. ``open`` creates the channel (it
    connects lazily and reconnects by itself); ``close`` cancels every call still running.

    ``tls`` (``https://`` endpoints only) names the CA, client certificate and key files;
    ``https://`` without it trusts gRPC's default roots and presents no certificate. The
    files are checked here, so that a wrong one is refused before anything starts."""

    def __init__(self, endpoints: Sequence[str], *, timeout: float,
                 tls: etcd_tls.ClientTLS | None = None) -> None:
        if timeout <= 0:
            raise ValueError(f"etcd timeout must be positive, got {timeout}")
        self._target = target(endpoints)
        self._tls: etcd_tls.ClientTLS | None = None
        self._server_name: str | None = None
        if secure(endpoints):
            self._tls = tls or etcd_tls.ClientTLS()
            etcd_tls.load(self._tls)
            if len(endpoints) > 1:  # see the module docstring: one name for every member
                self._server_name = _address(endpoints[0])[1]
        elif tls is not None and tls != etcd_tls.ClientTLS():
            raise ValueError("etcd TLS files are given but the endpoints are http://; "
                             "use https:// endpoints")
        self._timeout = timeout
        self._channel: _Message = None
        self._kv: _Message = None
        self._watch: _Message = None
        self._maintenance: _Message = None

    @property
    def timeout(self) -> float:
        return self._timeout

    def open(self) -> None:
        """Create the channel; with TLS, read the files again (``ValueError`` if they have
        become unusable)."""
        options = list(_CHANNEL_OPTIONS)
        if self._target.startswith("ipv"):
            options.append(("grpc.lb_policy_name", "round_robin"))
        if self._tls is None:
            self._channel = rpc.insecure_channel(self._target, options=options)
        else:
            material = etcd_tls.load(self._tls)
            credentials = grpc.ssl_channel_credentials(
                root_certificates=material.root_certificates,
                private_key=material.private_key,
                certificate_chain=material.certificate_chain)
            if self._server_name is not None:
                options.append(("grpc.ssl_target_name_override", self._server_name))
            self._channel = rpc.secure_channel(self._target, credentials, options=options)
        self._kv = rpc.KVStub(self._channel)
        self._watch = rpc.WatchStub(self._channel)
        self._maintenance = rpc.MaintenanceStub(self._channel)

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    async def version(self) -> str:
        """The server version of the member answering (``Maintenance.Status``)."""
        with _translated("status"):
            reply = await self._maintenance.Status(rpc.StatusRequest(), timeout=self._timeout)
        return str(reply.version)

    async def range(self, key: bytes, end: bytes | None = None, *, revision: int = 0,
                    limit: int = 0, count_only: bool = False) -> RangeReply:
        """A linearizable read of ``[key, end)`` (only ``key`` when ``end`` is ``None``) at
        ``revision`` (0: now), in key order."""
        request = rpc.RangeRequest(key=key, range_end=end or b"", revision=revision,
                                   limit=limit, count_only=count_only)
        with _translated("range"):
            reply = await self._kv.Range(request, timeout=self._timeout)
        return RangeReply(int(reply.header.revision), [_kv(kv) for kv in reply.kvs],
                          bool(reply.more), int(reply.count))

    async def put_if_absent(self, key: bytes, value: bytes) -> TxnReply:
        """Put iff the key does not exist."""
        return await self._txn(
            [_compare(key, "CREATE", "EQUAL", 0)],
            rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value)), key)

    async def put_if_current(self, key: bytes, value: bytes, mod_revision: int) -> TxnReply:
        """Put iff the key exists with ``mod_revision``."""
        return await self._txn(
            [_compare(key, "CREATE", "GREATER", 0), _compare(key, "MOD", "EQUAL", mod_revision)],
            rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, prev_kv=True)), key)

    async def delete_if(self, key: bytes, mod_revision: int | None) -> TxnReply:
        """Delete iff the key exists (with ``mod_revision``, unless it is ``None``)."""
        compare = [_compare(key, "CREATE", "GREATER", 0)]
        if mod_revision is not None:
            compare.append(_compare(key, "MOD", "EQUAL", mod_revision))
        return await self._txn(
            compare,
            rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key, prev_kv=True)),
            key)

    async def _txn(self, compare: list[_Message], write: _Message, key: bytes) -> TxnReply:
        # On failure the same transaction reads the key, so the caller learns why at once
        # and consistently (no second round trip that a concurrent write could slip into).
        read = rpc.RequestOp(request_range=rpc.RangeRequest(key=key))
        request = rpc.TxnRequest(compare=compare, success=[write], failure=[read])
        with _translated("txn"):
            reply = await self._kv.Txn(request, timeout=self._timeout)
        revision = int(reply.header.revision)
        if not reply.succeeded:
            kvs = reply.responses[0].response_range.kvs
            return TxnReply(False, revision, _kv(kvs[0]) if kvs else None)
        response = reply.responses[0]
        if response.HasField("response_put"):
            prev = response.response_put.prev_kv if response.response_put.HasField(
                "prev_kv") else None
        else:
            prev_kvs = response.response_delete_range.prev_kvs
            prev = prev_kvs[0] if prev_kvs else None
        return TxnReply(True, revision, _kv(prev) if prev is not None else None)

    async def compact(self, revision: int) -> None:
        """Compact etcd's history up to ``revision`` (etcd keeps serving reads at it)."""
        with _translated("compact"):
            await self._kv.Compact(rpc.CompactionRequest(revision=revision),
                                   timeout=self._timeout)

    def watch(self) -> WatchCall:
        """A new gRPC watch stream, for one etcd watch."""
        return WatchCall(self._watch.Watch(metadata=_LEADER_REQUIRED))


class WatchCall:
    """One bidirectional ``Watch`` stream carrying a single etcd watch (as Kubernetes does,
    so that progress notifications concern that watch alone)."""

    def __init__(self, call: _Message) -> None:
        self._call = call

    async def create(self, key: bytes, end: bytes, start_revision: int) -> None:
        """Ask for events on ``[key, end)`` from ``start_revision``, with previous values
        and etcd's periodic progress notifications."""
        request = rpc.WatchCreateRequest(key=key, range_end=end, start_revision=start_revision,
                                         prev_kv=True, progress_notify=True)
        with _translated("watch"):
            await self._call.write(rpc.WatchRequest(create_request=request))

    async def read(self) -> WatchReply | None:
        """The next response; ``None`` when etcd ended the stream."""
        with _translated("watch"):
            reply = await self._call.read()
        if reply is grpc_aio.EOF:
            return None
        return WatchReply(bool(reply.created), bool(reply.canceled),
                          int(reply.compact_revision), str(reply.cancel_reason),
                          int(reply.header.revision), [_event(e) for e in reply.events])

    def cancel(self) -> None:
        """End the stream; a pending :meth:`read` then fails. (etcd keeps a half-closed
        watch stream open, so there is no gentler way.)"""
        self._call.cancel()

    async def finished(self) -> None:
        """Wait until gRPC has finished the call, so that none of its completions arrives
        after the event loop has moved on."""
        with contextlib.suppress(asyncio.CancelledError):
            await self._call.code()


def _event(message: _Message) -> RawEvent:
    prev = _kv(message.prev_kv) if message.HasField("prev_kv") else None
    return RawEvent(message.type == rpc.Event.DELETE, _kv(message.kv), prev)
