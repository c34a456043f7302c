"""Streaming watches against scripted streams: events, in-band 410, silence, drops, closing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.client import api, http1, watch
from tests.unit.client.fakeapi import FakeAPI, serve, status_response

CM = ("v1", "ConfigMap")
PATH = "/api/v1/namespaces/default/configmaps"


def event(event_type: str, name: str, rv: str, **extra: Any) -> bytes:
    obj: dict[str, Any] = {"metadata": {"name": name, "resourceVersion": rv}, **extra}
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


def bookmark(rv: str) -> bytes:
    return orjson.dumps({"type": "BOOKMARK", "object": {
        "kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": rv}}}) + b"\n"


def expired() -> bytes:
    return orjson.dumps({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
        "code": 410, "message": "too old resource version: 5 (9)"}}) + b"\n"


async def start_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    response.content_type = "application/json"
    await response.prepare(request)
    return response


def disconnected(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def hold(request: web.Request, went_away: asyncio.Event | None = None,
               seconds: float = 10.0) -> None:
    """Keep the stream open without writing; set ``went_away`` when the client leaves.

    Depending on the aiohttp version the handler sees a closing transport or is cancelled.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        while loop.time() < deadline:
            if disconnected(request):
                if went_away is not None:
                    went_away.set()
                return
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        if went_away is not None:
            went_away.set()
        raise


async def drain(events: watch.Watch, into: list[watch.WatchEvent]) -> None:
    async for ev in events:
        into.append(ev)


StreamScript = Callable[[web.Request, web.StreamResponse], Awaitable[None]]


def streaming(script: StreamScript) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = await start_stream(request)
        await script(request, response)
        return response

    return handler


@pytest.fixture
def fake() -> FakeAPI:
    return FakeAPI()


async def test_events_then_in_band_expired(fake: FakeAPI) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "6") + event("MODIFIED", "a", "7"))
        await response.write(bookmark("8"))
        await response.write(event("DELETED", "a", "9", kind="Custom"))
        await response.write(expired())

    fake.route("GET", PATH, streaming(script))
    seen: list[watch.WatchEvent] = []
    async with serve(fake) as client, client.watch(
            CM, resource_version="5", label_selector="app=a", field_selector="metadata.name=a",
            timeout_seconds=30) as events:
        with pytest.raises(errors.Expired) as caught:
            await drain(events, seen)
        assert events.resource_version == "9"
    assert [(ev.type, ev.resource_version) for ev in seen] == [
        ("ADDED", "6"), ("MODIFIED", "7"), ("BOOKMARK", "8"), ("DELETED", "9")]
    assert {ev.object["apiVersion"] for ev in seen} == {"v1"}
    # filled in where missing, never overwritten
    assert [ev.object["kind"] for ev in seen] == ["ConfigMap"] * 3 + ["Custom"]
    assert caught.value.status_code == 410
    assert isinstance(caught.value, errors.Gone)
    assert fake.requests_to(PATH)[0].query == {
        "watch": "true", "resourceVersion": "5", "allowWatchBookmarks": "true",
        "timeoutSeconds": "30", "labelSelector": "app=a", "fieldSelector": "metadata.name=a"}


async def test_clean_end_of_stream_ends_iteration(fake: FakeAPI) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1"))
        await response.write(event("ADDED", "b", "2"))

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client, client.watch(CM, allow_bookmarks=False) as events:
        names = [ev.object["metadata"]["name"] async for ev in events]
        assert not events.timed_out
        assert events.resource_version == "2"
        assert [ev async for ev in events] == []  # stays ended
    assert names == ["a", "b"]
    assert "allowWatchBookmarks" not in fake.requests_to(PATH)[0].query


async def test_events_split_across_chunks(fake: FakeAPI) -> None:
    data = event("ADDED", "a", "1") + event("ADDED", "b", "2") + event("ADDED", "c", "3")

    async def script(request: web.Request, response: web.StreamResponse) -> None:
        for i in range(0, len(data), 7):
            await response.write(data[i:i + 7])
            await asyncio.sleep(0.001)

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client, client.watch(CM) as events:
        assert [ev.object["metadata"]["name"] async for ev in events] == ["a", "b", "c"]


async def test_a_last_line_without_newline_is_kept_when_whole(fake: FakeAPI) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1").rstrip(b"\n"))

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client, client.watch(CM) as events:
        assert [ev.type async for ev in events] == ["ADDED"]


async def test_silence_ends_the_watch(fake: FakeAPI) -> None:
    went_away = asyncio.Event()

    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1"))
        await hold(request, went_away)

    fake.route("GET", PATH, streaming(script))
    async with serve(fake, watch_inactivity_timeout=0.2) as client:
        async with client.watch(CM) as events:
            types = [ev.type async for ev in events]
            assert events.timed_out
            assert events.resource_version == "1"
        await asyncio.wait_for(went_away.wait(), 30)
    assert types == ["ADDED"]


async def test_per_watch_inactivity_timeout(fake: FakeAPI) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await hold(request)

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client, client.watch(CM, inactivity_timeout=0.1) as events:
        assert [ev async for ev in events] == []
        assert events.timed_out


@pytest.mark.parametrize("tail", [b"", b'{"type":"MODIFIED","obj'], ids=["between", "inside"])
async def test_a_dropped_connection_raises(fake: FakeAPI, tail: bytes) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1") + tail)
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.abort()

    fake.route("GET", PATH, streaming(script))
    seen: list[watch.WatchEvent] = []
    async with serve(fake) as client, client.watch(CM) as events:
        with pytest.raises(errors.ServiceUnavailable, match="connection lost") as caught:
            await drain(events, seen)
    assert [ev.type for ev in seen] == ["ADDED"]
    # the lean client's lost connection (mid-chunk: the chunked framing was cut)
    assert isinstance(caught.value.__cause__, http1.ConnectionLost)


async def test_stopping_early_closes_the_connection(fake: FakeAPI) -> None:
    went_away = asyncio.Event()

    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1") + event("ADDED", "b", "2"))
        await hold(request, went_away)

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client:
        async with client.watch(CM) as events:
            async for _ in events:
                break
        await asyncio.wait_for(went_away.wait(), 5)
        # the pool is usable afterwards
        assert (await client.version())["minor"] == "32"


async def test_cancelling_the_consumer_closes_the_connection(fake: FakeAPI) -> None:
    went_away = asyncio.Event()
    first = asyncio.Event()

    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1"))
        await hold(request, went_away)

    async def consume(client: api.Client) -> None:
        async for _ in client.watch(CM):  # no ``async with``: cancellation still closes
            first.set()

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client:
        task = asyncio.create_task(consume(client))
        await asyncio.wait_for(first.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(went_away.wait(), 5)


async def test_aclose_is_idempotent(fake: FakeAPI) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1"))
        await hold(request)

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client:
        stream = client.watch(CM)
        assert (await anext(stream)).type == "ADDED"
        await stream.aclose()
        await stream.aclose()
        with pytest.raises(StopAsyncIteration):
            await anext(stream)


@pytest.mark.parametrize(("code", "reason", "cls"), [
    (403, "Forbidden", errors.Forbidden),
    (410, "Expired", errors.Expired),
], ids=["forbidden", "expired"])
async def test_http_errors_raise_on_open(fake: FakeAPI, code: int, reason: str,
                                         cls: type[errors.ApiError]) -> None:
    async def refuse(request: web.Request) -> web.Response:
        return status_response(code, reason, "no")

    fake.route("GET", PATH, refuse)
    async with serve(fake) as client:
        with pytest.raises(cls):
            async with client.watch(CM):
                raise AssertionError("not reached")
        stream = client.watch(CM)
        with pytest.raises(cls):
            await anext(stream)
        with pytest.raises(StopAsyncIteration):
            await anext(stream)


async def test_all_namespaces_watch(fake: FakeAPI) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1", metadata={"namespace": "x"}))

    fake.route("GET", "/api/v1/configmaps", streaming(script))
    async with serve(fake) as client, client.watch(CM, namespace=api.ALL_NAMESPACES) as events:
        assert len([ev async for ev in events]) == 1


async def test_closing_the_client_breaks_open_watches(fake: FakeAPI) -> None:
    async def script(request: web.Request, response: web.StreamResponse) -> None:
        await response.write(event("ADDED", "a", "1"))
        await hold(request)

    fake.route("GET", PATH, streaming(script))
    async with serve(fake) as client, client.watch(CM) as events:
        assert (await anext(events)).type == "ADDED"
        await client.close()
        with pytest.raises((errors.ServiceUnavailable, StopAsyncIteration)):
            await asyncio.wait_for(anext(events), 5)



class OneRead:
    """A response whose body arrives in the reads given, then stays silent."""

    def __init__(self, *reads: bytes) -> None:
        self.reads = list(reads)
        self.url = "http://test/watch"
        self.closed = False

    async def read_some(self, timeout: float | None = None) -> bytes:
        if not self.reads:
            async with asyncio.timeout(timeout):
                await asyncio.Event().wait()
        return self.reads.pop(0)

    def close(self) -> None:
        self.closed = True


async def test_next_nowait_hands_out_what_one_read_brought() -> None:
    response = OneRead(event("ADDED", "a", "1") + bookmark("2") + event("MODIFIED", "a", "3")
                       + expired(), b"never read")

    async def opener() -> Any:
        return response, "v1", "ConfigMap"

    events = watch.Watch(opener, inactivity_timeout=10)
    assert events.next_nowait() is None  # nothing read yet
    first = await anext(events)  # one read brings all four lines
    second, third = events.next_nowait(), events.next_nowait()
    assert second is not None
    assert third is not None
    assert [(e.type, e.resource_version) for e in (first, second, third)] == [
        ("ADDED", "1"), ("BOOKMARK", "2"), ("MODIFIED", "3")]
    assert third.object["kind"] == "ConfigMap"  # filled in, as iterating does
    assert events.resource_version == "3"
    with pytest.raises(errors.Expired):  # the ERROR, raised as iterating raises it
        events.next_nowait()
    assert response.closed  # and the watch is closed
    assert events.next_nowait() is None
    assert [ev async for ev in events] == []
    assert response.reads == [b"never read"]
