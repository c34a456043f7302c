"""The server's scrapes of node agents' ``/metrics/resource``: bodies that arrive in many
pieces are read whole, bodies beyond the limit leave the node out, rates between scrapes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp import web

from setpoint.apimachinery import resourcemetrics as rm
from setpoint.registry.catalog import Catalog
from setpoint.server import nodemetrics, nodeproxy

CONTAINERS = 3000  # about 600 KiB of text


class Agent:
    """A node agent's endpoint that streams its text in small pieces."""

    def __init__(self) -> None:
        self.scrapes = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.scrapes += 1
        now = time.time()
        scrape = rm.Scrape(rm.NodeSample(100.0 + self.scrapes, 2**30, now), tuple(
            rm.ContainerSample("ns", f"pod-{i}", "c", 10.0 + self.scrapes * 0.5, 4096, now,
                               now - 3600) for i in range(CONTAINERS)))
        body = rm.render(scrape).encode()
        response = web.StreamResponse(headers={"Content-Type": rm.CONTENT_TYPE})
        await response.prepare(request)
        for start in range(0, len(body), 1024):
            await response.write(body[start:start + 1024])
            if start % (64 * 1024) == 0:
                await asyncio.sleep(0)
        await response.write_eof()
        return response


@pytest.fixture
async def agent() -> AsyncIterator[tuple[Agent, int]]:
    served = Agent()
    app = web.Application()
    app.router.add_get("/metrics/resource", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield served, port
    finally:
        await runner.cleanup()


def node(port: int) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}


async def source(**config: Any) -> tuple[nodemetrics.MetricsSource, nodeproxy.NodeDialer]:
    dialer = nodeproxy.NodeDialer(secure=False)
    settings = {"min_window": 0.2, "fresh_for": 0.1, **config}
    return nodemetrics.MetricsSource(cast(Catalog, None), dialer,
                                     nodemetrics.MetricsConfig(**settings)), dialer


async def test_a_body_in_many_pieces_is_read_whole(agent: tuple[Agent, int]) -> None:
    served, port = agent
    metrics, dialer = await source()
    try:
        found = await metrics.points(node(port))
        assert found is not None
        latest, base = found
        assert len(latest.scrape.containers) == CONTAINERS
        assert served.scrapes == 2  # the first time, a second scrape for a rate
        usage = metrics.node_usage(latest, base)
        assert usage is not None
        assert usage[0] > 0  # one more CPU second between the two scrapes
        pods = metrics.container_usage(latest, base)
        assert len(pods) == CONTAINERS
        (c,) = pods[("ns", "pod-7")]
        assert c.nanocores > 0
        assert c.memory_bytes == 4096
    finally:
        await dialer.close()


async def test_a_body_beyond_the_limit_leaves_the_node_out(agent: tuple[Agent, int]) -> None:
    _, port = agent
    metrics, dialer = await source(max_response_bytes=64 * 1024)
    try:
        assert await metrics.points(node(port)) is None
    finally:
        await dialer.close()


async def test_an_unreachable_agent_is_left_out() -> None:
    metrics, dialer = await source(scrape_timeout=2.0)
    try:
        assert await metrics.points(node(1)) is None
        assert await metrics.points({"metadata": {"name": "x"}, "status": {}}) is None
    finally:
        await dialer.close()


async def test_concurrent_requests_share_one_scrape(agent: tuple[Agent, int]) -> None:
    served, port = agent
    metrics, dialer = await source(fresh_for=5.0, min_window=10.0)
    try:
        first = await metrics._latest(node(port))
        together = await asyncio.gather(*(metrics._latest(node(port)) for _ in range(5)))
        assert served.scrapes == 1
        assert all(point is first for point in together)
    finally:
        await dialer.close()
