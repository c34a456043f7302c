"""A fake message-queue service (an SQS stand-in) that counts every call it receives.

The queue operator manages queues here as it would manage SQS queues. The API, all JSON:

- ``PUT /queues/{name}`` with ``{"visibilityTimeout": s}``: create the queue, or update it
  (idempotent, as SQS ``CreateQueue`` is): 201 when created, 200 when it existed; answers
  ``{"name", "url", "visibilityTimeout"}``;
- ``GET /queues/{name}``: the queue, or 404; ``DELETE /queues/{name}``: 204, or 404;
- ``GET /queues``: ``{"queues": [names]}``.

Every one of those is *a call*: counted, with its arrival and response times, and it may be
answered by an injected failure instead (:meth:`FakeQueueService.inject`: the next ``count``
calls get ``status`` with ``Retry-After``). Besides them, for tests and demos, and **not
counted**: ``GET /_stats`` (the counters), ``POST /_inject`` (``{"status", "count",
"retryAfter"}``) and ``DELETE /_queues/{name}`` (delete a queue *out of band*, as someone
with the console would).

``max_in_window`` is the most calls that arrived within any one second (a sliding window
over arrival times, measured on the service's own clock).

Bounds: a queue name is 1..80 of ``[A-Za-z0-9_-]`` (SQS's rule), a body at most 4 KiB, at
most 100,000 queues and 1,000,000 recorded calls (older ones are dropped from the log, never
from the counters).

Run alone: ``python fakequeues.py --port 9324``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

MAX_NAME = 80
MAX_BODY = 4096
MAX_QUEUES = 100_000
MAX_LOG = 1_000_000
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(slots=True)
class CallRecord:
    """One call the service received."""

    method: str
    name: str
    arrived: float
    responded: float = 0.0
    status: int = 0


def valid_name(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME and all(c in NAME_CHARS for c in name)


class FakeQueueService:
    """The service's state, counters and HTTP app; see the module docstring."""

    def __init__(self, *, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        #: queue name -> attributes
        self.queues: dict[str, dict[str, Any]] = {}
        self.calls: deque[CallRecord] = deque(maxlen=MAX_LOG)
        self.total = 0
        self.by_status: Counter[int] = Counter()
        self.max_in_window = 0
        self._window: deque[float] = deque()
        self._inject_status = 0
        self._inject_left = 0
        self._inject_retry_after = ""
        self._url = ""
        self._runner: web.AppRunner | None = None

    # --- test and demo controls (not calls) ----------------------------------------------

    def inject(self, status: int, count: int = 1, retry_after: float | None = None) -> None:
        """Answer the next ``count`` calls with ``status`` (and ``Retry-After``)."""
        if not 400 <= status <= 599 or not 0 <= count <= 1_000_000:
            raise ValueError("status must be 4xx/5xx and count in [0, 1000000]")
        self._inject_status = status
        self._inject_left = count
        self._inject_retry_after = "" if retry_after is None else f"{retry_after:g}"

    def delete_out_of_band(self, name: str) -> bool:
        """Delete a queue behind the operator's back; False when it does not exist."""
        return self.queues.pop(name, None) is not None

    def calls_for(self, name: str) -> list[CallRecord]:
        return [c for c in self.calls if c.name == name]

    def stats(self) -> dict[str, Any]:
        return {"calls": self.total, "byStatus": {str(k): v for k, v in self.by_status.items()},
                "maxInWindow": self.max_in_window, "queues": len(self.queues)}

    # --- HTTP --------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_put("/queues/{name}", self._put)
        app.router.add_get("/queues/{name}", self._get)
        app.router.add_delete("/queues/{name}", self._delete)
        app.router.add_get("/queues", self._list)
        app.router.add_get("/_stats", self._stats)
        app.router.add_post("/_inject", self._inject)
        app.router.add_delete("/_queues/{name}", self._delete_out_of_band)
        return app

    @property
    def url(self) -> str:
        return self._url

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen (port 0: a free one); returns the base URL."""
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        sockets: Any = getattr(site._server, "sockets", None) or []
        self._url = f"http://{host}:{sockets[0].getsockname()[1] if sockets else port}"
        return self._url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeQueueService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _arrive(self, method: str, name: str) -> CallRecord:
        arrived = self.now()
        record = CallRecord(method, name, arrived)
        self.calls.append(record)
        self.total += 1
        self._window.append(arrived)
        while self._window and self._window[0] <= arrived - 1.0:
            self._window.popleft()
        self.max_in_window = max(self.max_in_window, len(self._window))
        return record

    def _answer(self, record: CallRecord, status: int, body: Any = None,
                headers: dict[str, str] | None = None) -> web.Response:
        record.status = status
        record.responded = self.now()
        self.by_status[status] += 1
        if body is None:
            return web.Response(status=status, headers=headers)
        return web.json_response(body, status=status, headers=headers)

    def _injected(self, record: CallRecord) -> web.Response | None:
        if self._inject_left <= 0:
            return None
        self._inject_left -= 1
        headers = {"Retry-After": self._inject_retry_after} if self._inject_retry_after else {}
        return self._answer(record, self._inject_status, {"error": "injected"}, headers)

    def _queue(self, name: str) -> dict[str, Any]:
        return {"name": name, "url": f"{self._url}/queues/{name}", **self.queues[name]}

    async def _put(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        record = self._arrive("PUT", name)
        failed = self._injected(record)
        if failed is not None:
            return failed
        if not valid_name(name):
            return self._answer(record, 400, {"error": "invalid queue name"})
        try:
            body = json.loads(await request.read() or b"{}")
        except (ValueError, web.HTTPRequestEntityTooLarge):
            return self._answer(record, 400, {"error": "body must be JSON of at most 4 KiB"})
        timeout = body.get("visibilityTimeout", 30) if isinstance(body, dict) else None
        if not isinstance(timeout, int) or isinstance(timeout, bool) \
                or not 0 <= timeout <= 43200:
            return self._answer(record, 400, {"error": "visibilityTimeout: 0..43200"})
        created = name not in self.queues
        if created and len(self.queues) >= MAX_QUEUES:
            return self._answer(record, 409, {"error": "too many queues"})
        self.queues[name] = {"visibilityTimeout": timeout}
        return self._answer(record, 201 if created else 200, self._queue(name))

    async def _get(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        record = self._arrive("GET", name)
        failed = self._injected(record)
        if failed is not None:
            return failed
        if name not in self.queues:
            return self._answer(record, 404, {"error": "no such queue"})
        return self._answer(record, 200, self._queue(name))

    async def _delete(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        record = self._arrive("DELETE", name)
        failed = self._injected(record)
        if failed is not None:
            return failed
        if self.queues.pop(name, None) is None:
            return self._answer(record, 404, {"error": "no such queue"})
        return self._answer(record, 204)

    async def _list(self, request: web.Request) -> web.Response:
        record = self._arrive("LIST", "")
        failed = self._injected(record)
        if failed is not None:
            return failed
        return self._answer(record, 200, {"queues": sorted(self.queues)})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _inject(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
            self.inject(int(body["status"]), int(body.get("count", 1)),
                        None if body.get("retryAfter") is None else float(body["retryAfter"]))
        except (ValueError, KeyError, TypeError, web.HTTPRequestEntityTooLarge) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"injected": True})

    async def _delete_out_of_band(self, request: web.Request) -> web.Response:
        found = self.delete_out_of_band(request.match_info["name"])
        return web.Response(status=204 if found else 404)


async def _serve(port: int) -> None:
    service = FakeQueueService()
    await service.start(port=port)
    try:
        print(f"fake queue service on {service.url}", flush=True)
        await asyncio.Event().wait()
    finally:
        await service.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9324)
    asyncio.run(_serve(parser.parse_args().port))
