"""Storage errors reach clients as Status answers (503 with Retry-After), never as 500, and
the server keeps serving: the registry maps every storage error, whatever the backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageError, Unavailable
from tests.flaky_backend import FlakyBackend
from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def flaky() -> AsyncIterator[FlakyBackend]:
    backend = FlakyBackend()
    await backend.start()
    yield backend
    await backend.close()


@pytest.fixture
async def flaky_http(flaky: FlakyBackend, tmp_path: Path
                     ) -> AsyncIterator[aiohttp.ClientSession]:
    async with Server(ServerConfig(port=0), backend=flaky) as server, \
            aiohttp.ClientSession(base_url=server.url) as session:
        yield session


@pytest.mark.parametrize("fault", [StorageError("etcd txn: UNKNOWN: raft proposal dropped"),
                                   Unavailable("etcd txn: UNAVAILABLE: leader changed")],
                         ids=["bare", "unavailable"])
async def test_every_verb_maps_storage_errors_to_503(
        flaky: FlakyBackend, flaky_http: aiohttp.ClientSession, fault: Exception) -> None:
    http = flaky_http
    status, _, _ = await request(http, "POST", CONFIGMAPS, {"metadata": {"name": "kept"}})
    assert status == 201
    calls = [
        ("write", "POST", CONFIGMAPS, {"metadata": {"name": "new"}}, "application/json"),
        ("write", "PUT", f"{CONFIGMAPS}/kept", {"metadata": {"name": "kept"}, "data": {}},
         "application/json"),
        ("write", "PATCH", f"{CONFIGMAPS}/kept", {"data": {"a": "b"}},
         "application/merge-patch+json"),
        ("write", "DELETE", f"{CONFIGMAPS}/kept", None, "application/json"),
        ("read", "GET", f"{CONFIGMAPS}/kept", None, "application/json"),
        ("read", "GET", CONFIGMAPS, None, "application/json"),
        ("read", "GET", f"{CONFIGMAPS}?limit=1&resourceVersion=1&resourceVersionMatch=Exact",
         None, "application/json"),
    ]
    for which, method, path, body, content_type in calls:
        faults = flaky.write_faults if which == "write" else flaky.read_faults
        faults.append(fault)
        status, reply, headers = await request(http, method, path, body,
                                               content_type=content_type)
        assert (method, path, status) == (method, path, 503), reply
        assert reply["reason"] == "ServiceUnavailable"
        assert headers["Retry-After"] == "1"
        assert not faults
    # and everything works again
    status, reply, _ = await request(http, "PATCH", f"{CONFIGMAPS}/kept", {"data": {"a": "b"}},
                                     content_type="application/merge-patch+json")
    assert status == 200, reply
    assert reply["data"] == {"a": "b"}


async def test_a_storage_watch_failure_does_not_stop_the_server(
        flaky: FlakyBackend, flaky_http: aiohttp.ClientSession) -> None:
    http = flaky_http
    flaky.watch_faults.append(StorageError("etcd watch: UNKNOWN: stream removed"))
    for i in range(3):
        status, created, _ = await request(http, "POST", CONFIGMAPS,
                                           {"metadata": {"name": f"after-{i}"}})
        assert status == 201, created
    status, listed, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200
    assert {o["metadata"]["name"] for o in listed["items"]} == {f"after-{i}" for i in range(3)}
    assert not flaky.watch_faults


async def test_a_deletion_cut_short_by_storage_is_finished_by_the_retry(
        flaky: FlakyBackend, flaky_http: aiohttp.ClientSession) -> None:
    http = flaky_http
    path = f"{CONFIGMAPS}/held"
    status, _, _ = await request(http, "POST", CONFIGMAPS, {
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    assert status == 201
    status, _, _ = await request(http, "DELETE", path)
    assert status == 200
    release = {"metadata": {"finalizers": None}}
    # a consistent read: the watch cache holds the deleting object, which the patch starts
    # from (no storage read)
    status, deleting, _ = await request(http, "GET", path)
    assert status == 200
    assert deleting["metadata"]["deletionTimestamp"]
    # the write that removes the last finalizer lands, the delete after it fails
    flaky.write_faults.extend([None, StorageError("etcd txn: UNKNOWN: stream removed")])
    status, _, _ = await request(http, "PATCH", path, release,
                                 content_type="application/merge-patch+json")
    assert status == 503
    status, stuck, _ = await request(http, "GET", path)
    assert status == 200
    assert stuck["metadata"]["deletionTimestamp"]
    assert "finalizers" not in stuck["metadata"]
    # the client retries the same write: nothing to change, but the deletion is finished
    status, _, _ = await request(http, "PATCH", path, release,
                                 content_type="application/merge-patch+json")
    assert status == 200
    status, _, _ = await request(http, "GET", path)
    assert status == 404
