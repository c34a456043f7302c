"""Client verbs against a scripted server: paths, parameters, bodies, headers, failures."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.client import api
from setpoint.client import config as cfg
from setpoint.client import discovery as disc
from tests.unit.client.fakeapi import FakeAPI, json_response, serve, status_response

CM = ("v1", "ConfigMap")
WIDGET_REF = disc.ResourceRef(group="example.com", version="v1", resource="widgets",
                              kind="Widget", namespaced=True)


def configmap(name: str, namespace: str | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


@pytest.fixture
def fake() -> FakeAPI:
    return FakeAPI()


async def test_version(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        assert (await client.version())["minor"] == "32"


async def test_get_by_kind_short_name_and_ref(fake: FakeAPI) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response(configmap("a", "default"))

    fake.route("GET", "/api/v1/namespaces/default/configmaps/a", handler)
    fake.route("GET", "/apis/example.com/v1/namespaces/other/widgets/w", handler)
    async with serve(fake) as client:
        assert (await client.get(CM, "a"))["metadata"]["name"] == "a"
        assert (await client.get("cm", "a"))["metadata"]["name"] == "a"
        assert (await client.get("configmaps", "a", namespace="default"))["data"] == {}
        await client.get(WIDGET_REF, "w", namespace="other")
    assert [r.path for r in fake.requests if "/namespaces/" in r.path] == [
        "/api/v1/namespaces/default/configmaps/a"] * 3 + [
        "/apis/example.com/v1/namespaces/other/widgets/w"]


async def test_headers_and_no_credentials_over_http(fake: FakeAPI) -> None:
    async with serve(fake, token="secret", user_agent="tests/1") as client:
        await client.get(("v1", "Namespace"), "default")
    sent = fake.requests[-1]
    assert sent.path == "/api/v1/namespaces/default"  # cluster-scoped: no namespace segment
    assert "Authorization" not in sent.headers
    assert sent.headers["User-Agent"] == "tests/1"
    assert sent.headers["Accept"] == "application/json"


async def test_namespace_resolution(fake: FakeAPI) -> None:
    async with serve(fake, namespace="team") as client:
        await client.create(configmap("a"))
        await client.create(configmap("b", "own"))
        await client.create(configmap("c", "own"), namespace="explicit")
        await client.list(CM)
        await client.list(CM, namespace=api.ALL_NAMESPACES)
        with pytest.raises(ValueError, match="needs one namespace"):
            await client.get(CM, "x", namespace=api.ALL_NAMESPACES)
    assert [(r.method, r.path) for r in fake.requests if "configmaps" in r.path] == [
        ("POST", "/api/v1/namespaces/team/configmaps"),
        ("POST", "/api/v1/namespaces/own/configmaps"),
        ("POST", "/api/v1/namespaces/explicit/configmaps"),
        ("GET", "/api/v1/namespaces/team/configmaps"),
        ("GET", "/api/v1/configmaps"),
    ]


async def test_create_update_and_status(fake: FakeAPI) -> None:
    obj = configmap("a", "default", k="v")
    async with serve(fake) as client:
        created = await client.create(obj, dry_run=True, field_manager="me")
        assert created["body"] == obj
        await client.update(obj)
        widget = {"apiVersion": "example.com/v1", "kind": "Widget",
                  "metadata": {"name": "w", "namespace": "n"}, "status": {"phase": "Ok"}}
        await client.update_status(widget)
        with pytest.raises(ValueError, match=r"metadata\.name"):
            await client.update(configmap(""))
        with pytest.raises(ValueError, match="apiVersion and kind"):
            await client.create({"metadata": {"name": "x"}})
    post, put, put_status = [r for r in fake.requests if r.method != "GET"]
    assert (post.method, post.query) == ("POST", {"dryRun": "All", "fieldManager": "me"})
    assert post.headers["Content-Type"] == "application/json"
    assert (put.method, put.path, put.query) == (
        "PUT", "/api/v1/namespaces/default/configmaps/a", {})
    assert put_status.path == "/apis/example.com/v1/namespaces/n/widgets/w/status"
    assert put_status.json() == widget


async def test_objects_are_not_mutated(fake: FakeAPI) -> None:
    obj = configmap("a")
    snapshot = repr(obj)
    async with serve(fake) as client:
        await client.create(obj)
        await client.apply(obj, field_manager="m")
    assert repr(obj) == snapshot


@pytest.mark.parametrize(("patch_type", "body", "content_type"), [
    (api.PatchType.MERGE, {"data": {"k": None}}, "application/merge-patch+json"),
    (api.PatchType.JSON, [{"op": "remove", "path": "/data/k"}],
     "application/json-patch+json"),
    (api.PatchType.STRATEGIC, {"data": {"k": "v"}}, "application/strategic-merge-patch+json"),
], ids=["merge", "json", "strategic"])
async def test_patch_types(fake: FakeAPI, patch_type: api.PatchType, body: Any,
                           content_type: str) -> None:
    async with serve(fake) as client:
        await client.patch(CM, "a", body, patch_type=patch_type)
    sent = fake.requests[-1]
    assert (sent.method, sent.path) == ("PATCH", "/api/v1/namespaces/default/configmaps/a")
    assert sent.headers["Content-Type"] == content_type
    assert sent.json() == body


async def test_apply(fake: FakeAPI) -> None:
    obj = configmap("a", "n", k="v")
    async with serve(fake) as client:
        await client.apply(obj, field_manager="ctl", force=True)
        await client.apply(obj, field_manager="ctl")
        with pytest.raises(ValueError, match="field_manager"):
            await client.patch(CM, "a", {}, patch_type=api.PatchType.APPLY)
    forced, unforced = fake.requests[-2:]
    assert forced.path == "/api/v1/namespaces/n/configmaps/a"
    assert forced.headers["Content-Type"] == "application/apply-patch+yaml"
    assert forced.query == {"fieldManager": "ctl", "force": "true"}
    assert unforced.query == {"fieldManager": "ctl", "force": "false"}
    assert forced.json() == obj


async def test_patch_misuse(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        with pytest.raises(ValueError, match="list of operations"):
            await client.patch(CM, "a", {"op": "add"}, patch_type=api.PatchType.JSON)
        with pytest.raises(ValueError, match="list of operations"):
            await client.patch(CM, "a", [{"op": "add"}])
        with pytest.raises(ValueError, match="force"):
            await client.patch(CM, "a", {}, force=True)
    assert not [r for r in fake.requests if r.method == "PATCH"]


async def test_patch_status(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        await client.patch_status(WIDGET_REF, "w", {"status": {"phase": "Ready"}},
                                  namespace="n")
    assert fake.requests[-1].path == "/apis/example.com/v1/namespaces/n/widgets/w/status"


async def test_delete_sends_delete_options(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        await client.delete(CM, "a", propagation_policy="Foreground", grace_period_seconds=0,
                            uid="u-1", resource_version="9", dry_run=True)
        await client.delete(CM, "b")
    full, plain = fake.requests[-2:]
    assert full.query == {"dryRun": "All"}
    assert full.json() == {"kind": "DeleteOptions", "apiVersion": "v1",
                           "propagationPolicy": "Foreground", "gracePeriodSeconds": 0,
                           "preconditions": {"uid": "u-1", "resourceVersion": "9"},
                           "dryRun": ["All"]}
    assert plain.json() == {"kind": "DeleteOptions", "apiVersion": "v1"}
    with pytest.raises(ValueError, match="negative"):
        api.delete_options(grace_period_seconds=-1)


async def test_delete_collection(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        await client.delete_collection(CM, label_selector="app=x", field_selector="a=b",
                                       propagation_policy="Background")
    sent = fake.requests[-1]
    assert (sent.method, sent.path) == ("DELETE", "/api/v1/namespaces/default/configmaps")
    assert sent.query == {"labelSelector": "app=x", "fieldSelector": "a=b"}
    assert sent.json()["propagationPolicy"] == "Background"


async def test_raw_request(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        result = await client.request("POST", "/api/v1/anything", body=b'{"raw": true}',
                                      params={"x": "1"})
    assert result == {"echo": "POST", "path": "/api/v1/anything", "body": {"raw": True}}
    assert fake.requests[-1].query == {"x": "1"}


# --- failures --------------------------------------------------------------------------


async def test_status_errors_raise_their_class(fake: FakeAPI) -> None:
    async def missing(request: web.Request) -> web.Response:
        return status_response(404, "NotFound", 'configmaps "a" not found', name="a",
                               kind="configmaps")

    async def conflict(request: web.Request) -> web.Response:
        return status_response(409, "AlreadyExists", 'configmaps "a" already exists')

    async def invalid(request: web.Request) -> web.Response:
        return status_response(422, "Invalid", "bad", causes=[{"field": "data"}])

    async def throttled(request: web.Request) -> web.Response:
        response = status_response(429, "TooManyRequests", "slow down")
        response.headers["Retry-After"] = "2"
        return response

    fake.route("GET", "/api/v1/namespaces/default/configmaps/a", missing)
    fake.route("POST", "/api/v1/namespaces/default/configmaps", conflict)
    fake.route("PUT", "/api/v1/namespaces/default/configmaps/a", invalid)
    fake.route("DELETE", "/api/v1/namespaces/default/configmaps/a", throttled)
    async with serve(fake) as client:
        with pytest.raises(errors.NotFound) as not_found:
            await client.get(CM, "a")
        assert not_found.value.details == {"name": "a", "kind": "configmaps"}
        with pytest.raises(errors.AlreadyExists):
            await client.create(configmap("a"))
        with pytest.raises(errors.Invalid) as bad:
            await client.update(configmap("a"))
        assert bad.value.details["causes"] == [{"field": "data"}]
        with pytest.raises(errors.TooManyRequests) as slow:
            await client.delete(CM, "a")
        assert slow.value.retry_after == 2


async def test_non_status_error_body(fake: FakeAPI) -> None:
    async def gateway(request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>bad gateway</html>")

    fake.route("GET", "/api/v1/namespaces/default/configmaps/a", gateway)
    async with serve(fake) as client:
        with pytest.raises(errors.ApiError) as caught:
            await client.get(CM, "a")
    assert caught.value.status_code == 502
    assert caught.value.message == "<html>bad gateway</html>"


async def test_unknown_kind_is_no_match(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        with pytest.raises(disc.NoMatchError):
            await client.get(("v1", "Pod"), "p")
        with pytest.raises(disc.NoMatchError):
            await client.get("pods", "p")


async def test_connection_refused_is_service_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = cfg.ClientConfig(server=f"http://127.0.0.1:{port}")
    async with api.Client(config) as client:
        with pytest.raises(errors.ServiceUnavailable, match="connection failed") as caught:
            await client.version()
    # from the lean pool (plain calls) or aiohttp (streams)
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectionError | ConnectionError)


async def test_slow_response_is_timeout(fake: FakeAPI) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return json_response({})

    fake.route("GET", "/version", slow)
    async with serve(fake, request_timeout=0.2) as client:
        with pytest.raises(errors.Timeout, match=r"no response within 0\.2s") as caught:
            await client.version()
    assert isinstance(caught.value.__cause__, TimeoutError)


async def test_non_json_success_is_internal_error(fake: FakeAPI) -> None:
    async def html(request: web.Request) -> web.Response:
        return web.Response(text="<html>login page</html>")

    fake.route("GET", "/version", html)
    async with serve(fake) as client:
        with pytest.raises(errors.InternalError, match="not JSON"):
            await client.version()


# --- session ownership ---------------------------------------------------------------------


async def test_injected_session_is_left_open(fake: FakeAPI) -> None:
    async with serve(fake) as served:
        config = served.config
        async with aiohttp.ClientSession() as session:
            client = api.Client(config, session=session)
            assert (await client.version())["major"] == "1"
            await client.close()
            assert not session.closed


async def test_closed_client_refuses_requests(fake: FakeAPI) -> None:
    async with serve(fake) as client:
        await client.version()
        session = client._transport.session
        await client.close()
        await client.close()  # idempotent
        assert session.closed
        with pytest.raises(RuntimeError, match="closed"):
            await client.version()
