"""The gathered fan-out writes at their edges: bookmarks and the initial-events-end bookmark
between bursts keep their place among the events, a stream that ends at ``timeoutSeconds``
in the middle of a burst ends its body cleanly (the connection's next response follows the
terminating chunk), events larger together than :data:`DIRECT_LIMIT` in one turn arrive
once each in order, clients that vanish while their events are gathered leave no error in
the event loop, and a server that shuts down in the middle of a burst ends its streams
cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.server.watchresponse import DIRECT_LIMIT, INITIAL_EVENTS_END
from setpoint.testing import waiting
from tests.conftest import kubeconfig_ssl_context
from tests.integration.api.helpers import WIDGETS, install_widgets, request, secured_config, widget
from tests.integration.api.test_watch_fanout import (
    close,
    next_event,
    open_watch,
    revisions_to_end,
)

Event = dict[str, Any]


@contextlib.asynccontextmanager
async def serving(config: ServerConfig, *, tls: bool
                  ) -> AsyncIterator[tuple[Server, ssl.SSLContext | None, aiohttp.ClientSession]]:
    """A server of ``config`` (secured with ``tls``, else plain) with the widgets installed,
    and a client of it."""
    if not tls:
        config = dataclasses.replace(config, security=None)
    async with Server(config) as server:
        context = None
        if tls:
            assert config.kubeconfig_path is not None
            context = kubeconfig_ssl_context(config.kubeconfig_path)
        async with aiohttp.ClientSession(
                base_url=server.url, connector=aiohttp.TCPConnector(ssl=context or False)
        ) as http:
            await install_widgets(http)
            yield server, context, http


@pytest.fixture(params=["tls", "plain"])
async def served(tmp_path: Path, request: pytest.FixtureRequest
                 ) -> AsyncIterator[tuple[Server, ssl.SSLContext | None, aiohttp.ClientSession]]:
    """A server with a short bookmark interval, secured or plain, and a client of it."""
    config = dataclasses.replace(secured_config(tmp_path), bookmark_interval=0.05)
    async with serving(config, tls=request.param == "tls") as served_:
        yield served_


async def create_all(http: aiohttp.ClientSession, names: list[str], **extra: Any) -> list[str]:
    """Create the widgets concurrently (one burst); their resourceVersions in order."""
    answers = await asyncio.gather(*(request(http, "POST", WIDGETS, widget(
        name, metadata={"name": name, **extra})) for name in names))
    assert all(status == 201 for status, _, _ in answers), answers
    return sorted((body["metadata"]["resourceVersion"] for _, body, _ in answers), key=int)


class Collected:
    """Every event of one watch, read as it comes by a task of its own."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.events: list[Event] = []
        self.ended = False
        self._task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while (event := await next_event(reader)) is not None:
            self.events.append(event)
        self.ended = True

    def rvs(self) -> list[str]:
        return [e["object"]["metadata"]["resourceVersion"] for e in self.events
                if e["type"] != "BOOKMARK"]

    def bookmarks_after(self, rv: str) -> bool:
        return any(e["type"] == "BOOKMARK" and int(e["object"]["metadata"]["resourceVersion"])
                   >= int(rv) for e in self.events)

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, asyncio.IncompleteReadError, ConnectionError,
                ssl.SSLError):
            pass


def assert_bookmarks_in_place(events: list[Event]) -> None:
    """A bookmark's resourceVersion is at least that of every event before it and below that
    of every event after it (all changes up to it were sent, none after it yet)."""
    high = 0
    for n, event in enumerate(events):
        rv = int(event["object"]["metadata"]["resourceVersion"])
        if event["type"] == "BOOKMARK":
            assert rv >= high, (n, events)
            later = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[n + 1:]
                     if e["type"] != "BOOKMARK"]
            assert all(r > rv for r in later), (n, events)
        high = max(high, rv)


async def stop_all(collected: list[Collected],
                   watches: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    """Stop the collectors, then close their connections."""
    for c in collected:
        await c.stop()
    for _, writer in watches:
        await close(writer)


async def listed_revision(http: aiohttp.ClientSession) -> str:
    """The resourceVersion of a list of the widgets: where a watch of what follows starts."""
    _, listed, _ = await request(http, "GET", WIDGETS)
    revision: str = listed["metadata"]["resourceVersion"]
    return revision


async def test_bookmarks_and_the_initial_events_end_keep_their_place_among_bursts(
        served: tuple[Server, ssl.SSLContext | None, aiohttp.ClientSession]) -> None:
    server, context, http = served
    initial = await create_all(http, [f"i{n}" for n in range(5)])
    queries = ["sendInitialEvents=true&allowWatchBookmarks=true"
               "&resourceVersionMatch=NotOlderThan&resourceVersion=",
               f"allowWatchBookmarks=true&resourceVersion={initial[-1]}",
               f"allowWatchBookmarks=true&resourceVersion={initial[-1]}"
               "&fieldSelector=metadata.name%3Db0-3"]
    watches = [await open_watch(server, q, context=context) for q in queries * 4]
    collected = [Collected(reader) for reader, _ in watches]
    try:
        written: list[str] = []
        b03: list[str] = []
        for burst in range(6):
            names = [f"b{burst}-{n}" for n in range(12)]
            rvs = await create_all(http, names)
            written += rvs
            last = rvs[-1]
            if burst == 0:
                # a bookmark after the initial events and this burst, before the next one
                await waiting.eventually(lambda last=last: all(
                    c.bookmarks_after(last) for c in collected[1::3]),
                    what="a bookmark after the first burst")
            else:
                await waiting.eventually(lambda last=last: all(
                    c.rvs()[-1:] == [last] for n, c in enumerate(collected) if n % 3 != 2),
                    what="the burst's last event")
        status, body, _ = await request(http, "GET", f"{WIDGETS}/b0-3")
        assert status == 200
        b03 = [body["metadata"]["resourceVersion"]]
        await waiting.eventually(lambda: all(c.bookmarks_after(written[-1]) for c in collected),
                                 what="bookmarks after the last burst")
        for n, c in enumerate(collected):
            kind = n % 3
            events = [e for e in c.events if e["type"] != "BOOKMARK"
                      or int(e["object"]["metadata"]["resourceVersion"]) <= int(written[-1])]
            assert_bookmarks_in_place(c.events)
            if kind == 0:
                end = [i for i, e in enumerate(events)
                       if e["type"] == "BOOKMARK" and e["object"]["metadata"].get(
                           "annotations", {}).get(INITIAL_EVENTS_END) == "true"]
                assert len(end) == 1, events
                before = [e for e in events[:end[0]] if e["type"] != "BOOKMARK"]
                assert sorted(e["object"]["metadata"]["name"] for e in before) == \
                    [f"i{n}" for n in range(5)]
                assert int(events[end[0]]["object"]["metadata"]["resourceVersion"]) >= \
                    int(initial[-1])
                after = [e["object"]["metadata"]["resourceVersion"]
                         for e in events[end[0]:] if e["type"] != "BOOKMARK"]
                assert after == written
            elif kind == 1:
                assert c.rvs() == written
            else:
                assert c.rvs() == b03
    finally:
        await stop_all(collected, watches)


async def test_a_stream_that_times_out_mid_burst_ends_its_body_cleanly(
        served: tuple[Server, ssl.SSLContext | None, aiohttp.ClientSession]) -> None:
    server, context, http = served
    since = await listed_revision(http)
    watches = [await open_watch(server, f"resourceVersion={since}&timeoutSeconds=1",
                                context=context) for _ in range(6)]
    written: list[str] = []
    ended = asyncio.Event()

    async def bursts() -> None:
        n = 0
        while not ended.is_set():
            written.extend(await create_all(http, [f"w{n}-{i}" for i in range(8)]))
            n += 1

    writing = asyncio.create_task(bursts())
    try:
        for reader, writer in watches:
            got = await revisions_to_end(reader)
            ended.set()
            assert got, "no event before the stream's end"
            # the connection is kept alive: the next bytes after the terminating chunk are
            # those of the next response, not a late event
            writer.write(b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n")
            async with asyncio.timeout(20):
                head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 "), head
            await writing
            assert got == written[:len(got)]
    finally:
        ended.set()
        await writing
        for _, writer in watches:
            await close(writer)


async def test_events_beyond_the_direct_limit_in_one_turn_arrive_once_in_order(
        served: tuple[Server, ssl.SSLContext | None, aiohttp.ClientSession]) -> None:
    server, context, http = served
    since = await listed_revision(http)
    watches = [await open_watch(server, f"resourceVersion={since}", context=context)
               for _ in range(4)]
    collected = [Collected(reader) for reader, _ in watches]
    try:
        writes_before = server._watch.fanout_writes
        pad = "x" * (DIRECT_LIMIT // 5)
        written: list[str] = []
        for burst in range(4):
            written += await create_all(http, [f"w{burst}-{n}" for n in range(20)],
                                        annotations={"pad": pad})
        await waiting.eventually(lambda: all(c.rvs()[-1:] == written[-1:] for c in collected),
                                 what="every event")
        for c in collected:
            assert c.rvs() == written
        assert server._watch.fanout_writes > writes_before
    finally:
        await stop_all(collected, watches)


async def test_clients_that_vanish_with_events_gathered_leave_no_error_in_the_loop(
        served: tuple[Server, ssl.SSLContext | None, aiohttp.ClientSession],
        caplog: pytest.LogCaptureFixture) -> None:
    server, context, http = served
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: unhandled.append(ctx))
    caplog.set_level(logging.WARNING)
    since = await listed_revision(http)
    assert server.cache is not None
    watchers_before = server.cache.watcher_count()
    staying = [await open_watch(server, f"resourceVersion={since}", context=context)
               for _ in range(4)]
    leaving = [await open_watch(server, f"resourceVersion={since}", context=context)
               for _ in range(12)]
    collected = [Collected(reader) for reader, _ in staying]
    try:
        first = asyncio.create_task(create_all(http, [f"a{n}" for n in range(30)]))
        await waiting.eventually(lambda: bool(collected[0].events), what="the first event")
        for n, (_, writer) in enumerate(leaving):
            if n % 2:
                writer.transport.abort()
            else:
                writer.close()
        written = [*await first]
        for burst in range(3):
            written += await create_all(http, [f"b{burst}-{n}" for n in range(30)])
        written.sort(key=int)
        await waiting.eventually(lambda: all(c.rvs()[-1:] == written[-1:] for c in collected),
                                 what="every event to the watchers that stayed")
        for c in collected:
            assert c.rvs() == written
        await waiting.eventually(
            lambda: server.cache is not None
            and server.cache.watcher_count() == watchers_before + len(staying),
            what="the vanished watchers to be closed")
        assert unhandled == []
        noisy = [r for r in caplog.records if r.name.startswith(("asyncio", "aiohttp",
                                                                  "setpoint.server"))]
        assert noisy == []
    finally:
        loop.set_exception_handler(previous)
        for c in collected:
            await c.stop()
        for _, writer in [*staying, *leaving]:
            await close(writer)


async def test_a_server_shutting_down_mid_burst_ends_its_streams_cleanly(tmp_path: Path
                                                                         ) -> None:
    config = dataclasses.replace(secured_config(tmp_path), security=None)
    server = Server(config)
    await server.__aenter__()
    stopped = False
    try:
        async with aiohttp.ClientSession(base_url=server.url) as http:
            await install_widgets(http)
            since = await listed_revision(http)
            watches = [await open_watch(server, f"resourceVersion={since}") for _ in range(8)]
            ended = asyncio.Event()

            async def bursts() -> list[str]:
                written: list[str] = []
                n = 0
                while not ended.is_set():
                    answers = await asyncio.gather(*(request(
                        http, "POST", WIDGETS, widget(f"w{n}-{i}")) for i in range(8)),
                        return_exceptions=True)
                    written += [a[1]["metadata"]["resourceVersion"] for a in answers
                                if isinstance(a, tuple) and a[0] == 201]
                    if any(not isinstance(a, tuple) or a[0] != 201 for a in answers):
                        break
                    n += 1
                return sorted(written, key=int)

            writing = asyncio.create_task(bursts())
            async with asyncio.timeout(10):
                opening = await next_event(watches[0][0])
            assert opening is not None
            await server.__aexit__(None, None, None)
            stopped = True
            ended.set()
            written = await writing
            for n, (reader, writer) in enumerate(watches):
                got: list[int] = []
                if n == 0:
                    got.append(int(opening["object"]["metadata"]["resourceVersion"]))
                async with asyncio.timeout(20):
                    partial = b""
                    try:
                        while (event := await next_event(reader)) is not None:
                            got.append(int(event["object"]["metadata"]["resourceVersion"]))
                    except asyncio.IncompleteReadError as e:
                        partial = e.partial
                # a connection cut may end the body, but only between chunks
                assert partial == b""
                # once each, in order, none of the acknowledged writes up to the last skipped
                # (a write cut by the shutdown may be in storage without an answer)
                assert got == sorted(set(got))
                assert {int(rv) for rv in written if int(rv) <= got[-1]} <= set(got)
                await close(writer)
    finally:
        if not stopped:
            await server.__aexit__(None, None, None)


async def test_a_tls_watcher_that_stops_reading_mid_burst_falls_behind_and_resumes(
        tmp_path: Path) -> None:
    config = dataclasses.replace(secured_config(tmp_path), watcher_buffer=4)
    async with Server(config) as server:
        assert config.kubeconfig_path is not None
        context = kubeconfig_ssl_context(config.kubeconfig_path)
        assert context is not None
        async with aiohttp.ClientSession(
                base_url=server.url, connector=aiohttp.TCPConnector(ssl=context)) as http:
            await install_widgets(http)
            since = await listed_revision(http)
            reader, writer = await open_watch(server, f"resourceVersion={since}",
                                              context=context, rcvbuf=4096)
            reading = [await open_watch(server, f"resourceVersion={since}", context=context)
                       for _ in range(2)]
            collected = [Collected(r) for r, _ in reading]
            try:
                pad = "x" * 60_000
                written: list[str] = []
                for burst in range(8):  # about 4.8 MB the first client does not read
                    written += await create_all(http, [f"w{burst}-{n}" for n in range(10)],
                                                annotations={"pad": pad})
                await waiting.eventually(
                    lambda: all(c.rvs()[-1:] == written[-1:] for c in collected),
                    what="every event to the watchers that read")
                for c in collected:
                    assert c.rvs() == written
                # now read: a prefix of the events, in order, then the end of the stream
                got = await revisions_to_end(reader)
                assert got == written[:len(got)]
                assert len(got) < len(written)  # it fell behind and its watch ended
            finally:
                for c in collected:
                    await c.stop()
                for _, w in [(reader, writer), *reading]:
                    await close(w)
            # it watches again from the last event it saw and gets the rest, once each
            resumed_reader, resumed_writer = await open_watch(
                server, f"resourceVersion={got[-1] if got else since}", context=context)
            resumed = Collected(resumed_reader)
            try:
                await waiting.eventually(lambda: resumed.rvs()[-1:] == written[-1:],
                                         what="the rest of the events")
                assert resumed.rvs() == written[len(got):]
            finally:
                await resumed.stop()
                await close(resumed_writer)


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
async def test_a_client_that_stops_reading_then_vanishes_ends_its_watch_quietly(
        tmp_path: Path, tls: bool, caplog: pytest.LogCaptureFixture) -> None:
    """The watch's task waits for the client to read (its events no longer fit any buffer)
    when the client goes away: the watch ends, nothing is logged as an error."""
    caplog.set_level(logging.WARNING)
    config = dataclasses.replace(secured_config(tmp_path), watcher_buffer=1000)
    async with serving(config, tls=tls) as (server, context, http):
        _, listed, _ = await request(http, "GET", WIDGETS)
        assert server.cache is not None
        watchers = server.cache.watcher_count()
        _, writer = await open_watch(
            server, f"resourceVersion={listed['metadata']['resourceVersion']}",
            context=context, rcvbuf=4096)
        try:
            pad = "x" * 60_000
            for burst in range(10):  # 12 MB: more than the kernel buffers hold
                await create_all(http, [f"w{burst}-{n}" for n in range(20)],
                                 annotations={"pad": pad})
            assert server.cache.watcher_count() == watchers + 1  # not ended: it waits
        finally:
            writer.transport.abort()
        await waiting.eventually(
            lambda: server.cache is not None and server.cache.watcher_count() == watchers,
            what="the watch to end")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
