"""The server's HTTPS client for webhooks (:mod:`setpoint.server.webhookclient`) against
servers that misbehave at the HTTP and TLS level: one deadline covers the whole call, and
every failure is a :class:`CallFailed` in Go's words, quoting little of what was sent."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web

from setpoint.registry.webhooks import CallFailed, Target
from setpoint.server.webhookclient import WebhookClient
from tests.webhookserver import Raw, WebhookServer, webhook_server


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    with webhook_server({}) as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[WebhookClient]:
    c = WebhookClient()
    try:
        yield c
    finally:
        await c.close()


def target(server: WebhookServer, path: str, *, port: int | None = None) -> Target:
    port = server.port if port is None else port
    return Target(f"https://127.0.0.1:{port}{path}?timeout=1s", f"127.0.0.1:{port}",
                  "127.0.0.1", base64.b64decode(server.ca_bundle), "test")


async def call(client: WebhookClient, server: WebhookServer, path: str,
               respond: Raw, timeout: float = 1.0) -> str:
    server.handlers[path] = lambda review: respond
    with pytest.raises(CallFailed) as caught:
        await client.post(target(server, path), b"{}", timeout)
    return str(caught.value)


def connected(request: web.Request) -> bool:
    return request.transport is not None and not request.transport.is_closing()


async def trickle(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    while connected(request):  # one byte every tenth of a second, until the caller leaves
        await response.write(b" ")
        await asyncio.sleep(0.1)
    return response


async def endless(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    chunk = b" " * 65536
    while connected(request):
        await response.write(chunk)
        # a write to a lost connection does not wait: yield, so that the loss is noticed
        await asyncio.sleep(0)
    return response


async def cut_short(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json",
                                           "Content-Length": "1000"})
    await response.prepare(request)
    await response.write(b'{"apiVersion"')
    assert request.transport is not None
    request.transport.close()
    return response


async def hang_up(request: web.Request) -> web.StreamResponse:
    assert request.transport is not None
    request.transport.close()
    await asyncio.sleep(1)
    return web.Response()


async def to_itself(request: web.Request) -> web.StreamResponse:
    return web.Response(status=307, headers={"Location": request.path})


async def test_a_body_that_trickles_ends_at_the_deadline(
        webhook: WebhookServer, client: WebhookClient) -> None:
    message = await call(client, webhook, "/trickle", Raw(trickle))
    assert message == (f'Post "https://127.0.0.1:{webhook.port}/trickle?timeout=1s": '
                       "context deadline exceeded")


async def test_a_body_without_end_fails_at_the_size_limit(
        webhook: WebhookServer, client: WebhookClient) -> None:
    message = await call(client, webhook, "/endless", Raw(endless), timeout=30)
    assert message == (f'Post "https://127.0.0.1:{webhook.port}/endless?timeout=1s": the '
                       f"response is larger than {client.config.max_response_bytes} bytes")


async def test_a_body_cut_short_is_an_unexpected_eof(
        webhook: WebhookServer, client: WebhookClient) -> None:
    message = await call(client, webhook, "/cut", Raw(cut_short))
    assert message == ("unexpected error when reading response body. Please retry. "
                       "Original error: unexpected EOF")


async def test_a_connection_closed_before_an_answer_is_an_eof(
        webhook: WebhookServer, client: WebhookClient) -> None:
    message = await call(client, webhook, "/hang-up", Raw(hang_up))
    assert message == f'Post "https://127.0.0.1:{webhook.port}/hang-up?timeout=1s": EOF'


async def test_redirects_are_followed_ten_times_as_go_follows_them(
        webhook: WebhookServer, client: WebhookClient) -> None:
    message = await call(client, webhook, "/loop", Raw(to_itself))
    assert message == (f'Post "https://127.0.0.1:{webhook.port}/loop?timeout=1s": stopped '
                       "after 10 redirects")

    async def once(request: web.Request) -> web.StreamResponse:
        return web.Response(status=307, headers={"Location": "/there"})

    webhook.handlers["/here"] = lambda review: Raw(once)
    webhook.handlers["/there"] = lambda review: b'{"answered": "there"}'
    assert await client.post(target(webhook, "/here"), b"{}", 1.0) == \
        b'{"answered": "there"}'


async def test_a_server_that_never_speaks_tls_ends_at_the_deadline(
        webhook: WebhookServer, client: WebhookClient) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(CallFailed) as caught:
            await client.post(target(webhook, "/x", port=port), b"{}", 0.5)
        assert str(caught.value) == (f'Post "https://127.0.0.1:{port}/x?timeout=1s": '
                                     "context deadline exceeded")
        assert accepted
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_what_a_garbled_answer_quotes_is_bounded(
        webhook: WebhookServer, client: WebhookClient) -> None:
    """A TLS server whose answer is no HTTP: the parser's complaint quotes a little of it."""
    context = webhook._context()

    async def garble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.write(b"HTTP/1.1 " + b"9" * 6000 + b" \x00\xff" + b"z" * 2000 + b"\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(garble, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(CallFailed) as caught:
            await client.post(target(webhook, "/x", port=port), b"{}", 2.0)
        assert str(caught.value).startswith(f'Post "https://127.0.0.1:{port}/x?timeout=1s": ')
        assert len(str(caught.value)) < 512
    finally:
        server.close()
        await server.wait_closed()
