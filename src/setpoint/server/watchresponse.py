"""Watch streams: one JSON event per line, flushed as it happens.

Every watch that sends an event the same way (event type, version, output form) sends the
same bytes, encoded once (:meth:`~setpoint.registry.store.WatchEvent.frame`; kept with the
event in the watch cache's history, within its byte budget): a thousand watchers of one
object cost one encoding per event, not a thousand.

Once the 200 has been sent, errors travel in-band as ``ERROR`` events carrying a Status (a too
old resourceVersion is a 410 ``Expired`` there, as kube-apiserver sends it). Streams end at
``timeoutSeconds``, or after a long server-chosen time when the client gave none (kubectl
``get -w`` exits when its stream ends, so that time is long), or when the watcher fell behind
(the client resumes from its last resourceVersion). Bookmarks go out after ``bookmark_interval``
of silence when the client allows them; kopf reconnects after 70 s without a byte. A client
that closes its stream simply ends the watch (clients stop watches by disconnecting), as soon
as its connection is lost (:func:`~setpoint.server.connections.when_lost`), whether it closed
it or the kernel gave up on a client that vanished.
The body is chunked over HTTP/1.1; an HTTP/1.0 client (no chunks) gets the same lines
through the watch's task, the body ending when the server closes the connection.

A JSON or metadata-only watch that has caught up is written to from the watch cache's fan-out
(:meth:`~setpoint.registry.store.WatchStream.set_sink`): the event's chunk (its size line,
the shared frame and the chunk's end, encoded once per event and form) goes straight to the
connection's transport in one write, which over TLS is one record, without waking the
watch's task. That happens only while the transport has not asked to pause writing (it
does at :data:`DIRECT_LIMIT` unsent bytes) and is not closing; otherwise the event goes to
the task, which writes it and waits for the client to read (so a client that does not read
is still bounded by the watcher's queue and the history, and is ended as before).

The first event the fan-out writes to a connection in a turn of the event loop goes at once;
the connection's later events of the same turn are gathered and leave together at its end
(:class:`FanoutWrites`): the events of one storage commit that a watch takes (a group commit
holds many) cost two writes, over TLS two records, instead of one each, and a single event
is not held back. What is gathered is written before anything the watch's task writes, and
at once when it reaches :data:`DIRECT_LIMIT`, so order and the bound on unsent bytes hold.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.apimachinery.clock import Clock
from setpoint.registry import table
from setpoint.registry.options import WatchOptions
from setpoint.registry.resources import VersionInfo
from setpoint.registry.store import Store, WatchEvent, WatchStream
from setpoint.server import connections, negotiation, responses

Obj = dict[str, Any]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: a connection holding this many unsent bytes gets its events from the watch's task, which
#: waits for the client to read (aiohttp's own threshold for waiting)
DIRECT_LIMIT = 0x10000


class FanoutWrites:
    """Turns of the event loop as the fan-out sees them, and the writes left to their end.

    :meth:`turn` numbers the current turn (a callback queued at its first use ends it);
    :meth:`defer` leaves a connection's flush to the end of the turn, where the flushes run
    in the order they were deferred. A flush that fails is the connection's to notice (its
    task meets the closed connection); it does not stop the others.
    """

    __slots__ = ("_armed", "_due", "_turn")

    def __init__(self) -> None:
        self._due: list[Callable[[], None]] = []
        self._turn = 0
        self._armed = False

    def turn(self) -> int:
        if not self._armed:
            self._armed = True
            asyncio.get_running_loop().call_soon(self._end_turn)
        return self._turn

    def defer(self, flush: Callable[[], None]) -> None:
        self.turn()
        self._due.append(flush)

    def _end_turn(self) -> None:
        self._armed = False
        self._turn += 1
        due, self._due = self._due, []
        for flush in due:
            try:
                flush()
            except Exception:  # the watch's task meets the connection's end
                continue


@dataclass(slots=True)
class WatchConfig:
    bookmark_interval: float = 55.0
    #: streams without timeoutSeconds end after a random time in this range (seconds)
    min_request_timeout: float = 1800.0
    max_request_timeout: float = 3600.0
    rng: random.Random = field(default_factory=random.Random)
    #: open streams, closed all at once on shutdown
    active: weakref.WeakSet[WatchStream] = field(default_factory=weakref.WeakSet)
    #: events written to a caught-up watch's connection from the cache's fan-out (counted
    #: when written: gathered events a closed connection never got are not)
    sent_from_fanout: int = 0
    #: writes those events took (several events of one turn of the loop go in one)
    fanout_writes: int = 0
    #: the fan-out's writes of one turn of the event loop, one per connection
    writes: FanoutWrites = field(default_factory=FanoutWrites)

    def close_all(self) -> None:
        for stream in list(self.active):
            stream.close()


def _line(event_type: str, obj: Obj) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


def _chunk(line: bytes) -> bytes:
    """``line`` as one chunk of a chunked HTTP/1.1 body."""
    return b"%x\r\n%b\r\n" % (len(line), line)


def _hashable(cells: list[Any]) -> tuple[Any, ...] | None:
    """The cells as a key (with their types: 1, 1.0 and True are equal in Python, not in
    JSON), or ``None`` when one cannot be (a value that is not hashable)."""
    key = tuple((type(cell), cell) for cell in cells)
    try:
        hash(key)
    except TypeError:
        return None
    return key


async def serve_watch(request: web.Request, store: Store, namespace: str | None,
                      version: VersionInfo, opts: WatchOptions, output: negotiation.Output,
                      columns: list[table.Column] | None, clock: Clock,
                      config: WatchConfig) -> web.StreamResponse:
    content_type = output.content_type if output.kind != "json" else "application/json"
    expired: errors.ApiError | None = None
    stream: WatchStream | None = None
    try:
        stream = await store.watch(namespace, version.name, opts)
    except errors.Expired as e:
        expired = e
    # Cache-Control is the app's, as on every answer (server/app.py)
    response = web.StreamResponse(status=200, headers={
        "Content-Type": content_type, "X-Content-Type-Options": "nosniff"})
    responses.stream_body(request, response)
    await response.prepare(request)
    if expired is not None or stream is None:
        assert expired is not None
        await response.write(_line("ERROR", expired.status()))
        await response.write_eof()
        return response
    config.active.add(stream)
    api_version = store.info.api_version(version.name)
    limit = opts.timeout_seconds or config.rng.uniform(config.min_request_timeout,
                                                       config.max_request_timeout)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    need_initial_end = bool(opts.send_initial_events) and opts.allow_bookmarks
    first_table = True
    #: what a Table event's row carries: None, Metadata (the default) or Object
    include_object = request.query.get("includeObject", "Metadata")

    def frame(event: WatchEvent) -> bytes:
        """The line of ``event``: made once per event and form, and shared (see
        :meth:`~setpoint.registry.store.WatchEvent.frame`)."""
        nonlocal first_table
        if output.kind == "table" and columns is not None:
            # a Table's cells depend on the time and the column definitions go in the first
            # event only: built per watch, the encoding shared when the Table is the same
            obj = event.object
            tbl = table.build(columns, [obj], clock.now(), with_definitions=first_table,
                              include_object=include_object,
                              metadata={"resourceVersion": obj["metadata"].get(
                                  "resourceVersion", "")})
            first_table = False
            cells = _hashable(tbl["rows"][0]["cells"])
            if cells is None:
                return _line(event.type, tbl)
            return event.frame(("table", bool(tbl["columnDefinitions"]), cells),
                               lambda kind, _obj: _line(kind, tbl))
        if output.kind == "partial":
            return event.frame("partial", lambda kind, obj: _line(
                kind, table.partial_metadata(obj)))
        return event.frame("json", _line)

    def bookmark(revision: int, annotations: Obj | None = None) -> bytes:
        meta: Obj = {"resourceVersion": str(revision)}
        if annotations:
            meta["annotations"] = annotations
        return _line("BOOKMARK", {"kind": store.info.kind, "apiVersion": api_version,
                                  "metadata": meta})

    transport = request.transport
    #: chunks the fan-out took for this connection in this turn of the loop, not yet written
    gathered: list[bytes] = []
    gathered_size = 0
    last_turn = -1  # the turn of the loop this connection's last event was written in

    def flush() -> None:
        """Write what the fan-out gathered (before anything else is written)."""
        nonlocal gathered_size
        if not gathered:
            return
        events = len(gathered)
        data = gathered[0] if events == 1 else b"".join(gathered)
        gathered.clear()
        gathered_size = 0
        if transport is not None and not transport.is_closing():
            transport.write(data)
            config.fanout_writes += 1
            config.sent_from_fanout += events

    def flush_quietly() -> None:
        """:func:`flush` from the fan-out: a closed connection is the task's to meet."""
        try:
            flush()
        except Exception:  # the watch's task meets the closed connection
            pass

    async def write(data: bytes) -> None:
        flush()
        await response.write(data)

    # the fan-out writes chunks itself: only where aiohttp would write the same bytes
    if output.kind in ("json", "partial") and transport is not None and response.chunked \
            and not response.compression:
        make: Callable[[str, Obj], bytes] = _line if output.kind == "json" else (
            lambda kind, obj: _line(kind, table.partial_metadata(obj)))

        # the transport asks aiohttp's protocol to pause once DIRECT_LIMIT bytes are unsent
        # (uvloop's TLS transport would wait for 512 KiB): reading that flag is cheaper than
        # asking a TLS transport for its buffer's size at every event
        transport.set_write_buffer_limits(high=DIRECT_LIMIT)
        protocol = request.protocol

        def send_now(data: bytes) -> bool:
            """Take ``data`` from the fan-out, when the connection can take it now. The
            first event of a turn of the loop is written at once (the client can read it
            while the fan-out goes on); the turn's later ones are gathered and written
            together at its end, or at once when they reach DIRECT_LIMIT."""
            nonlocal gathered_size, last_turn
            if protocol.writing_paused or transport.is_closing():
                flush_quietly()  # what was taken goes before what the task will write
                return False
            turn = config.writes.turn()
            if turn != last_turn and not gathered:
                last_turn = turn
                try:
                    transport.write(data)
                except Exception:  # the task meets the closed connection and ends the watch
                    return False
                config.fanout_writes += 1
                config.sent_from_fanout += 1
            else:
                if not gathered:
                    config.writes.defer(flush)
                gathered.append(data)
                gathered_size += len(data)
                if gathered_size >= DIRECT_LIMIT:
                    flush_quietly()
            return True

        stream.set_sink(send_now, ("chunk", output.kind),
                        lambda kind, obj: _chunk(make(kind, obj)))
    # a connection lost while the watch waits for its next event ends the watch then (its
    # watcher and queue are freed), not at the next event or at its timeout
    forget = connections.when_lost(request.transport, lambda exc: stream.close())
    try:
        while True:
            if need_initial_end and stream.pending_replay() == 0:
                need_initial_end = False
                await write(bookmark(stream.bookmark_revision(store.cache_revision),
                                              {INITIAL_EVENTS_END: "true"}))
            now = loop.time()
            if now >= deadline:
                break
            wait = deadline - now
            if opts.allow_bookmarks:
                wait = min(wait, config.bookmark_interval)
            try:
                event = await stream.next_event(timeout=wait)
            except TimeoutError:
                if opts.allow_bookmarks and loop.time() < deadline:
                    await write(bookmark(stream.bookmark_revision(
                        store.cache_revision)))
                continue
            except errors.ApiError as e:
                # an event that cannot be served (its conversion webhook failed) ends the
                # watch with an ERROR event, as Kubernetes ends it
                await write(_line("ERROR", e.status()))
                break
            if event is None:
                break
            await write(frame(event))
    except ConnectionError:
        # the client went away (a watch it stopped, or a client that stopped reading and then
        # vanished while the task waited for it): nothing to log, nothing more to send
        return response
    finally:
        forget()
        stream.close()
    try:
        flush()
        await response.write_eof()
    except ConnectionError:
        pass
    return response
