"""Lists: selectors, one page, every page, and the fallback when a continue token expires."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.client import api
from tests.unit.client.fakeapi import FakeAPI, json_response, serve, status_response

CM = ("v1", "ConfigMap")
PATH = "/api/v1/namespaces/default/configmaps"
NAMES = [f"cm{i}" for i in range(7)]


def paged_handler(*, expire_token: str | None = None) -> Any:
    """Pages over NAMES; items without apiVersion/kind, as a real server sends them."""
    expired = {"done": False}

    async def handler(request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", "0")) or len(NAMES)
        token = request.query.get("continue", "")
        if token and token == expire_token and not expired["done"]:
            expired["done"] = True
            return status_response(410, "Expired", "The provided continue parameter is too old")
        start = int(token or 0)
        chunk = NAMES[start:start + limit]
        metadata: dict[str, Any] = {"resourceVersion": "100"}
        if start + limit < len(NAMES):
            metadata["continue"] = str(start + limit)
            metadata["remainingItemCount"] = len(NAMES) - start - limit
        return json_response({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": metadata,
                              "items": [{"metadata": {"name": n}} for n in chunk]})

    return handler


@pytest.fixture
def fake() -> FakeAPI:
    fake = FakeAPI()
    fake.route("GET", PATH, paged_handler())
    return fake


async def test_one_page_with_selectors(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        page = await client.list(CM, label_selector="app=a", field_selector="metadata.name=x",
                                 limit=3, resource_version="0",
                                 resource_version_match="NotOlderThan", timeout_seconds=5)
    assert [i["metadata"]["name"] for i in page["items"]] == ["cm0", "cm1", "cm2"]
    assert page["metadata"]["continue"] == "3"
    assert fake.requests_to(PATH)[0].query == {
        "labelSelector": "app=a", "fieldSelector": "metadata.name=x", "limit": "3",
        "resourceVersion": "0", "resourceVersionMatch": "NotOlderThan", "timeoutSeconds": "5"}


async def test_items_get_api_version_and_kind(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        page = await client.list(CM)
    assert {(i["apiVersion"], i["kind"]) for i in page["items"]} == {("v1", "ConfigMap")}


async def test_list_pages_follows_continue_tokens(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        pages = [page async for page in client.list_pages(CM, limit=3,
                                                          label_selector="app=a")]
    assert [[i["metadata"]["name"] for i in p["items"]] for p in pages] == [
        NAMES[0:3], NAMES[3:6], NAMES[6:7]]
    sent = fake.requests_to(PATH)
    assert [r.query.get("continue") for r in sent] == [None, "3", "6"]
    assert all(r.query["labelSelector"] == "app=a" and r.query["limit"] == "3" for r in sent)


async def test_list_pages_sends_resource_version_on_the_first_page_only(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        async for _ in client.list_pages(CM, limit=5, resource_version="0"):
            pass
    assert [r.query.get("resourceVersion") for r in fake.requests_to(PATH)] == ["0", None]


async def test_list_all_joins_pages(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        everything = await client.list_all(CM, limit=2)
    assert [i["metadata"]["name"] for i in everything["items"]] == NAMES
    assert everything["kind"] == "ConfigMapList"
    assert everything["metadata"] == {"resourceVersion": "100"}
    assert len(fake.requests_to(PATH)) == 4


async def test_list_all_falls_back_to_one_list_when_the_token_expires() -> None:
    fake = FakeAPI()
    fake.route("GET", PATH, paged_handler(expire_token="4"))
    async with serve(fake) as client:
        everything = await client.list_all(CM, limit=2)
    assert [i["metadata"]["name"] for i in everything["items"]] == NAMES
    assert [r.query.get("continue") for r in fake.requests_to(PATH)] == [None, "2", "4", None]
    assert "limit" not in fake.requests_to(PATH)[-1].query


async def test_list_pages_raises_expired() -> None:
    fake = FakeAPI()
    fake.route("GET", PATH, paged_handler(expire_token="2"))
    async with serve(fake) as client:
        with pytest.raises(errors.Expired):
            async for _ in client.list_pages(CM, limit=2):
                pass


async def test_list_all_raises_when_the_first_page_fails() -> None:
    fake = FakeAPI()

    async def gone(request: web.Request) -> web.Response:
        return status_response(410, "Expired", "too old resource version: 1 (5)")

    fake.route("GET", PATH, gone)
    async with serve(fake) as client:
        with pytest.raises(errors.Expired):
            await client.list_all(CM, resource_version="1")


async def test_list_all_namespaces(fake: FakeAPI) -> None:
    fake.route("GET", "/api/v1/configmaps", paged_handler())
    async with serve(fake) as client:
        everything = await client.list_all(CM, namespace=api.ALL_NAMESPACES)
    assert len(everything["items"]) == len(NAMES)


async def test_page_size_must_be_positive(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        with pytest.raises(ValueError, match="limit"):
            await client.list_all(CM, limit=0)
