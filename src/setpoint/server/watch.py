"""Watch streams: one JSON event per line, flushed as it happens.

Once the 200 has been sent, errors travel in-band as ``ERROR`` events carrying a Status (a too
old resourceVersion is a 410 ``Expired`` there, as kube-apiserver sends it). Streams end at
``timeoutSeconds``, or after a long server-chosen time when the client gave none (kubectl
``get -w`` exits when its stream ends, so that time is long), or when the watcher fell behind
(the client resumes from its last resourceVersion). Bookmarks go out after ``bookmark_interval``
of silence when the client allows them; kopf reconnects after 70 s without a byte. A client
that closes its stream simply ends the watch (clients stop watches by disconnecting).
"""

from __future__ import annotations

import asyncio
import random
import weakref
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.apimachinery.clock import Clock
from setpoint.registry import table
from setpoint.registry.options import WatchOptions
from setpoint.registry.resources import VersionInfo
from setpoint.registry.store import Store, WatchStream
from setpoint.server import negotiation

Obj = dict[str, Any]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(slots=True)
class WatchConfig:
    bookmark_interval: float = 55.0
    #: streams without timeoutSeconds end after a random time in this range (seconds)
    min_request_timeout: float = 1800.0
    max_request_timeout: float = 3600.0
    rng: random.Random = field(default_factory=random.Random)
    #: open streams, closed all at once on shutdown
    active: weakref.WeakSet[WatchStream] = field(default_factory=weakref.WeakSet)

    def close_all(self) -> None:
        for stream in list(self.active):
            stream.close()


def _line(event_type: str, obj: Obj) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


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
    response = web.StreamResponse(status=200, headers={
        "Content-Type": content_type, "Cache-Control": "no-cache, private",
        "X-Content-Type-Options": "nosniff"})
    response.enable_chunked_encoding()
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

    def shape(obj: Obj) -> Obj:
        nonlocal first_table
        if output.kind == "table" and columns is not None:
            tbl = table.build(columns, [obj], clock.now(), with_definitions=first_table,
                              include_object=include_object,
                              metadata={"resourceVersion": obj["metadata"].get(
                                  "resourceVersion", "")})
            first_table = False
            return tbl
        if output.kind == "partial":
            return table.partial_metadata(obj)
        return obj

    def bookmark(revision: int, annotations: Obj | None = None) -> bytes:
        meta: Obj = {"resourceVersion": str(revision)}
        if annotations:
            meta["annotations"] = annotations
        return _line("BOOKMARK", {"kind": store.info.kind, "apiVersion": api_version,
                                  "metadata": meta})

    try:
        while True:
            if need_initial_end and stream.pending_replay() == 0:
                need_initial_end = False
                await response.write(bookmark(stream.bookmark_revision(store.cache_revision),
                                              {INITIAL_EVENTS_END: "true"}))
            now = loop.time()
            if now >= deadline:
                break
            wait = deadline - now
            if opts.allow_bookmarks:
                wait = min(wait, config.bookmark_interval)
            try:
                event = await stream.next(timeout=wait)
            except TimeoutError:
                if opts.allow_bookmarks and loop.time() < deadline:
                    await response.write(bookmark(stream.bookmark_revision(
                        store.cache_revision)))
                continue
            if event is None:
                break
            kind, obj = event
            await response.write(_line(kind, shape(obj)))
    except ConnectionResetError:
        # the client went away (a watch it stopped): nothing to log, nothing more to send
        return response
    finally:
        stream.close()
    try:
        await response.write_eof()
    except ConnectionResetError:
        pass
    return response
