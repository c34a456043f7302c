"""Lists (selectors, paging, resourceVersion) and watches (history, live, bookmarks, 410)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget


async def watch_events(http: aiohttp.ClientSession, path: str, count: int,
                       timeout: float = 5.0) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with http.get(path) as response:
        assert response.status == 200
        async with asyncio.timeout(timeout):
            while len(events) < count:
                line = await response.content.readline()
                if not line:
                    break
                events.append(orjson.loads(line))
    return events


async def test_list_selectors_and_order(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    for name, labels in [("c", {"tier": "db"}), ("a", {"tier": "web"}), ("b", {})]:
        body = widget(name)
        body["metadata"]["labels"] = labels
        await request(http, "POST", WIDGETS, body)
    _, page, _ = await request(http, "GET", WIDGETS)
    assert page["kind"] == "WidgetList"
    assert [i["metadata"]["name"] for i in page["items"]] == ["a", "b", "c"]
    assert all(i["kind"] == "Widget" and i["apiVersion"] == "example.com/v1"
               for i in page["items"])
    cases = {"tier=web": ["a"], "tier!=web": ["b", "c"], "tier in (db,web)": ["a", "c"],
             "tier": ["a", "c"], "!tier": ["b"], "tier notin (web)": ["b", "c"]}
    for selector, expected in cases.items():
        _, page, _ = await request(http, "GET", f"{WIDGETS}?labelSelector={selector}")
        assert [i["metadata"]["name"] for i in page["items"]] == expected, selector
    _, page, _ = await request(http, "GET", f"{WIDGETS}?fieldSelector=metadata.name%3Db")
    assert [i["metadata"]["name"] for i in page["items"]] == ["b"]
    _, page, _ = await request(http, "GET", "/apis/example.com/v1/widgets")
    assert len(page["items"]) == 3


async def test_paging_with_continue(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    for i in range(7):
        await request(http, "POST", WIDGETS, widget(f"w{i}"))
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        path = f"{WIDGETS}?limit=3" + (f"&continue={token}" if token else "")
        status, page, _ = await request(http, "GET", path)
        assert status == 200, page
        pages += 1
        seen += [i["metadata"]["name"] for i in page["items"]]
        if pages == 1:
            # a write between pages does not change what the later pages show
            await request(http, "POST", WIDGETS, widget("w99"))
            assert page["metadata"]["remainingItemCount"] == 4
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert seen == [f"w{i}" for i in range(7)]
    assert pages == 3
    status, _err, _ = await request(http, "GET", f"{WIDGETS}?limit=3&continue=garbage")
    assert status == 400


async def test_watch_replays_from_a_revision_and_echoes_each_write(
        http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, created, _ = await request(http, "POST", WIDGETS, widget("x"))
    start = created["metadata"]["resourceVersion"]
    _, patched, _ = await request(http, "PATCH", WIDGETS + "/x", {"spec": {"size": 2}},
                                  content_type="application/merge-patch+json")
    await request(http, "DELETE", WIDGETS + "/x")
    events = await watch_events(http, f"{WIDGETS}?watch=true&resourceVersion={start}", 2)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert events[0]["object"]["metadata"]["resourceVersion"] == \
        patched["metadata"]["resourceVersion"]
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) > int(
        patched["metadata"]["resourceVersion"])


async def test_watch_from_zero_sends_current_state_then_live(
        http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("old"))

    async def writer() -> dict[str, Any]:
        await asyncio.sleep(0.2)
        _, body, _ = await request(http, "POST", WIDGETS, widget("new"))
        return body  # type: ignore[no-any-return]

    task = asyncio.create_task(writer())
    events = await watch_events(http, f"{WIDGETS}?watch=1&resourceVersion=0", 2)
    new = await task
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "old"), ("ADDED", "new")]
    assert events[1]["object"]["metadata"]["resourceVersion"] == \
        new["metadata"]["resourceVersion"]


async def test_watch_selector_transitions(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, obj, _ = await request(http, "POST", WIDGETS, widget("sel"))
    rv = obj["metadata"]["resourceVersion"]
    for labels in ({"on": "yes"}, {"on": "no"}):
        await request(http, "PATCH", WIDGETS + "/sel", {"metadata": {"labels": labels}},
                      content_type="application/merge-patch+json")
    events = await watch_events(
        http, f"{WIDGETS}?watch=true&resourceVersion={rv}&labelSelector=on%3Dyes", 2)
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]


async def test_watch_too_old_is_410_in_band(tmp_path: Path) -> None:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"), watch_cache_capacity=20)
    async with Server(config) as server, aiohttp.ClientSession(base_url=server.url) as http:
        await install_widgets(http)
        for i in range(30):
            await request(http, "POST", WIDGETS, widget(f"w{i}"))
        events = await watch_events(http, f"{WIDGETS}?watch=true&resourceVersion=1", 1)
        # a revision inside the window still works
        _, page, _ = await request(http, "GET", WIDGETS)
        recent = int(page["metadata"]["resourceVersion"]) - 5
        replay = await watch_events(http, f"{WIDGETS}?watch=true&resourceVersion={recent}", 5)
        assert [e["type"] for e in replay] == ["ADDED"] * 5
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["code"] == 410
    assert status["reason"] == "Expired"
    assert status["message"].startswith("too old resource version: 1")


async def test_watch_timeout_and_initial_events_bookmark(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("one"))
    async with http.get(f"{WIDGETS}?watch=true&sendInitialEvents=true&resourceVersion="
                        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
                        "&timeoutSeconds=1") as response:
        body = await response.read()
    # read to its end: the server closed the watch after timeoutSeconds
    events = [orjson.loads(line) for line in body.splitlines()]
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"}
    assert len(events) == 2


async def test_table_output(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("tbl", size=4))
    accept = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;"
              "v=v1beta1;g=meta.k8s.io,application/json")
    status, table, headers = await request(http, "GET", WIDGETS, headers={"Accept": accept})
    assert status == 200
    assert headers["Content-Type"] == "application/json;as=Table;v=v1;g=meta.k8s.io"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Phase"]
    assert table["rows"][0]["cells"] == ["tbl", 4, None]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_discovery_and_go_booleans(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    for path in ("/version/", "/api/", "/apis/", "/apis/example.com/",
                 "/apis/example.com/v1/"):
        status, _, _ = await request(http, "GET", path)
        assert status == 200, path
    _, version, _ = await request(http, "GET", "/version")
    assert version["minor"] == "32"
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json")
    status, agg, headers = await request(http, "GET", "/apis", headers={"Accept": accept})
    assert headers["Content-Type"] == (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    groups = {i["metadata"]["name"]: i for i in agg["items"]}
    widget_res = groups["example.com"]["versions"][0]["resources"][0]
    assert widget_res["resource"] == "widgets"
    assert widget_res["scope"] == "Namespaced"
    assert {s["subresource"] for s in widget_res["subresources"]} == {"status", "scale"}
    status, _, _ = await request(http, "GET", f"{WIDGETS}?watch=False")
    assert status == 200
    status, v2, _ = await request(http, "GET", "/openapi/v2")
    assert status == 200
    assert v2["definitions"]["com.example.v1.Widget"]["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "version": "v1", "kind": "Widget"}]
    _, root, _ = await request(http, "GET", "/openapi/v3")
    url = root["paths"]["apis/example.com/v1"]["serverRelativeURL"]
    _, doc, _ = await request(http, "GET", url)
    schema = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "version": "v1", "kind": "Widget"}]
    patch_op = doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"][
        "patch"]
    assert any(p["name"] == "fieldValidation" for p in patch_op["parameters"])


async def test_a_client_closing_its_watch_is_not_a_server_error(
        http: aiohttp.ClientSession, caplog: Any) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("first"))
    async with http.get(f"{WIDGETS}?watch=true") as response:
        async with asyncio.timeout(5):
            assert orjson.loads(await response.content.readline())["type"] == "ADDED"
        response.connection.transport.close()  # type: ignore[union-attr]
    for i in range(5):
        await request(http, "POST", WIDGETS, widget(f"after-{i}"))
        await asyncio.sleep(0.05)
    status, _, _ = await request(http, "GET", WIDGETS)
    assert status == 200
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
