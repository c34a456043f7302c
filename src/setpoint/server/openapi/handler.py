"""HTTP for the OpenAPI documents: ``/openapi/v2``, ``/openapi/v3`` and ``/openapi/v3/<gv>``.

As kube-openapi serves them: the representation is chosen from ``Accept`` (JSON, or for v2
gnostic protobuf under either of its media-type spellings; ``*/*`` is JSON; anything else 406);
every answer carries ``ETag``, ``Last-Modified`` and ``Vary: Accept``, and a matching
``If-None-Match`` (or, without one, an ``If-Modified-Since`` not older than the document) is
answered ``304 Not Modified`` without a body, which is what kubectl's HTTP cache sends on its
next run. A v3 document asked for with the current ``?hash=`` is immutable (``Cache-Control:
public, immutable``); with an outdated hash the client is redirected (301) to the current URL.
Bodies are sent gzip-compressed to clients that accept it.

Documents not yet built for the current catalog generation, and their compressed forms, are
made in a worker thread, one at a time (concurrent requests for the same document wait for
the one build), so that a rebuild after a CRD change never holds the event loop.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from datetime import UTC, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from typing import TypeVar

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.apimachinery.clock import Clock
from setpoint.server import negotiation
from setpoint.server.openapi import documents, gnostic

JSON = "application/json"
#: bodies smaller than this are sent as they are
GZIP_MIN_BYTES = 1024

T = TypeVar("T")


def _choose(header: str | None, *, protobuf: bool) -> str:
    for media in negotiation.parse_accept(header):
        kind = media.type
        if kind in ("*/*", "application/*", JSON):
            return JSON
        if protobuf and kind in gnostic.ACCEPTED:
            return gnostic.CONTENT_TYPE
    raise errors.NotAcceptable(
        "only the following media types are accepted: application/json"
        + (f", {', '.join(gnostic.ACCEPTED)}" if protobuf else ""))


def _not_modified(request: web.Request, rendered: documents.Rendered) -> bool:
    tags = request.headers.get("If-None-Match")
    if tags is not None:
        wanted = {t.strip().removeprefix("W/") for t in tags.split(",")}
        return "*" in wanted or rendered.etag in wanted
    since = request.headers.get("If-Modified-Since")
    if since:
        try:
            moment = parsedate_to_datetime(since)
        except (TypeError, ValueError, IndexError):
            return False
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return rendered.last_modified.replace(microsecond=0) <= moment
    return False


def _accepts_gzip(request: web.Request) -> bool:
    for item in request.headers.get("Accept-Encoding", "").split(","):
        pieces = [p.strip() for p in item.split(";")]
        if pieces[0].lower() == "gzip":
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000")
                           for p in pieces[1:])
    return False


class OpenAPIHandler:
    """Answers the OpenAPI paths from one :class:`~documents.Documents`."""

    def __init__(self, docs: documents.Documents, clock: Clock) -> None:
        self.docs = docs
        self._clock = clock
        self._lock = asyncio.Lock()
        # the compressed bodies of the newest documents, by identity
        self._gzipped: dict[int, tuple[documents.Rendered, bytes]] = {}
        self._generation = -1

    async def _made(self, ready: Callable[[], T | None], make: Callable[[], T]) -> T:
        """What ``ready`` has, or else ``make``'s result, made in a thread, one at a time."""
        found = ready()
        if found is not None:
            return found
        async with self._lock:
            found = ready()
            if found is not None:
                return found
            return await asyncio.to_thread(make)

    async def _respond(self, request: web.Request, rendered: documents.Rendered,
                       content_type: str) -> web.Response:
        headers = {"ETag": rendered.etag, "Vary": "Accept",
                   "Last-Modified": format_datetime(rendered.last_modified.astimezone(UTC),
                                                    usegmt=True)}
        if _not_modified(request, rendered):
            return web.Response(status=304, headers=headers)
        body = rendered.body
        if len(body) >= GZIP_MIN_BYTES and _accepts_gzip(request):
            def ready() -> bytes | None:
                cached = self._gzipped.get(id(rendered))
                return cached[1] if cached is not None and cached[0] is rendered else None

            def make() -> bytes:
                compressed = gzip.compress(rendered.body, compresslevel=6, mtime=0)
                self._gzipped[id(rendered)] = (rendered, compressed)
                return compressed

            body = await self._made(ready, make)
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept, Accept-Encoding"
        headers["Content-Type"] = content_type
        if request.method == "HEAD":
            return web.Response(status=200, headers={**headers, "Content-Length": str(len(body))})
        return web.Response(body=body, headers=headers)

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path.rstrip("/")
        parts = [p for p in path.split("/") if p]
        snap = self.docs.snapshot()
        if snap.generation != self._generation:
            self._gzipped.clear()  # the bodies of an older generation are not served again
            self._generation = snap.generation
        if path == "/openapi/v2":
            content_type = _choose(request.headers.get("Accept"), protobuf=True)
            if content_type == JSON:
                rendered = await self._made(lambda: snap.v2_json,
                                            lambda: self.docs.build_v2_json(snap))
            else:
                rendered = await self._made(lambda: snap.v2_proto,
                                            lambda: self.docs.build_v2_protobuf(snap))
            return await self._respond(request, rendered, content_type)
        if path == "/openapi/v3":
            _choose(request.headers.get("Accept"), protobuf=False)
            rendered = await self._made(lambda: snap.v3_root,
                                        lambda: self.docs.build_v3_root(snap))
            return await self._respond(request, rendered, JSON)
        rest = parts[2:]
        if parts[:2] == ["openapi", "v3"] and len(rest) == 2 and rest[0] == "api":
            group, version = "", rest[1]
        elif parts[:2] == ["openapi", "v3"] and len(rest) == 3 and rest[0] == "apis":
            group, version = rest[1], rest[2]
        else:
            raise errors.path_not_found()
        content_type = _choose(request.headers.get("Accept"), protobuf=False)
        found = await self._made(lambda: snap.v3.get((group, version)),
                                 lambda: self.docs.build_v3(snap, group, version))
        if found is None:
            raise errors.path_not_found()
        wanted = request.query.get("hash")
        current = found.etag.strip('"')
        if wanted and wanted != current:
            raise web.HTTPMovedPermanently(
                f"/openapi/v3/{documents.gv_path(group, version)}?hash={current}")
        response = await self._respond(request, found, content_type)
        if wanted:
            response.headers["Cache-Control"] = "public, immutable"
            response.headers["Expires"] = format_datetime(
                self._clock.now().astimezone(UTC) + timedelta(days=365), usegmt=True)
        return response
