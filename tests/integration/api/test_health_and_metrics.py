"""``/livez``, ``/readyz`` and ``/healthz`` list named checks as kube-apiserver does, and take
checks added by others; ``/metrics`` counts requests with kube-apiserver's labels."""

from __future__ import annotations

import re

import aiohttp

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget


async def text(http: aiohttp.ClientSession, path: str) -> tuple[int, str]:
    async with http.get(path) as response:
        return response.status, await response.text()


async def test_named_checks(server: Server, http: aiohttp.ClientSession) -> None:
    assert await text(http, "/readyz") == (200, "ok")
    assert await text(http, "/readyz?verbose") == (200, (
        "[+]ping ok\n[+]storage ok\n[+]informer-sync ok\n[+]shutdown ok\n"
        "readyz check passed\n"))
    assert await text(http, "/livez?verbose") == (
        200, "[+]ping ok\nlivez check passed\n")
    assert await text(http, "/healthz") == (200, "ok")
    assert await text(http, "/readyz/informer-sync") == (200, "ok")
    assert (await text(http, "/readyz/nope"))[0] == 404
    assert (await text(http, "/livez/informer-sync"))[0] == 404


async def test_a_failing_added_check_makes_the_server_unready() -> None:
    server = Server(ServerConfig(port=0, storage=StorageConfig(kind="memory")))
    broken = {"now": False}

    async def storage_file() -> None:
        if broken["now"]:
            raise RuntimeError("state.db was replaced")

    server.health.add("storage-file", storage_file)
    async with server, aiohttp.ClientSession(base_url=server.url) as http:
        assert await text(http, "/readyz") == (200, "ok")
        broken["now"] = True
        assert await text(http, "/readyz") == (503, (
            "[+]ping ok\n[-]storage-file failed: reason withheld\n[+]storage ok\n"
            "[+]informer-sync ok\n[+]shutdown ok\nreadyz check failed\n"))
        assert await text(http, "/readyz/storage-file") == (
            503, "internal server error: state.db was replaced\n")
        assert await text(http, "/readyz?exclude=storage-file") == (200, "ok")
        assert await text(http, "/livez") == (200, "ok")  # a readiness check only


def series(metrics_text: str, name: str) -> dict[str, float]:
    found = {}
    for line in metrics_text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, value = line.rsplit(" ", 1)
            found[labels] = float(value)
    return found


async def test_requests_are_counted_with_kubernetes_labels(server: Server,
                                                           http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    assert (await request(http, "POST", WIDGETS, widget("a")))[0] == 201
    assert (await request(http, "GET", WIDGETS + "/a"))[0] == 200
    assert (await request(http, "GET", WIDGETS + "/b"))[0] == 404
    assert (await request(http, "GET", WIDGETS))[0] == 200
    for _ in range(3):  # unknown paths make no series
        assert (await request(http, "GET", "/apis/example.com/v1/nopes"))[0] == 404
        assert (await request(http, "GET", WIDGETS + "/a/nonsense"))[0] == 404
    _, body = await text(http, "/metrics")
    total = series(body, "apiserver_request_total")
    common = 'dry_run="",group="example.com",version="v1",resource="widgets",subresource=""'
    assert total[f'apiserver_request_total{{verb="POST",{common},scope="resource",'
                 'component="apiserver",code="201"}'] == 1
    assert total[f'apiserver_request_total{{verb="GET",{common},scope="resource",'
                 'component="apiserver",code="200"}'] == 1
    assert total[f'apiserver_request_total{{verb="GET",{common},scope="resource",'
                 'component="apiserver",code="404"}'] == 1
    # install_widgets lists until the resource is served: one LIST there, one here
    assert total[f'apiserver_request_total{{verb="LIST",{common},scope="namespace",'
                 'component="apiserver",code="200"}'] == 2
    assert "nopes" not in body
    assert "nonsense" not in body
    count = series(body, "apiserver_request_duration_seconds_count")
    assert count[f'apiserver_request_duration_seconds_count{{verb="GET",{common},'
                 'scope="resource",component="apiserver"}'] == 2
    objects = series(body, "apiserver_storage_objects")
    assert objects['apiserver_storage_objects{resource="widgets.example.com"}'] == 1
    assert objects['apiserver_storage_objects{resource="namespaces"}'] == 4
    assert objects['apiserver_storage_objects{resource="customresourcedefinitions.'
                   'apiextensions.k8s.io"}'] == 1
    # the scrape itself is not counted against the limits
    assert re.search(r'^apiserver_current_inflight_requests\{request_kind="readOnly"\} 0$',
                     body, re.M)
    assert series(body, "setpoint_open_connections")["setpoint_open_connections"] >= 1


async def test_metrics_and_health_answer_only_get(http: aiohttp.ClientSession) -> None:
    for path in ("/metrics", "/readyz"):
        status, body, _ = await request(http, "POST", path, {})
        assert status == 405, body
