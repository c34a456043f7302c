"""Watch events are encoded once per event and output form and shared by every watcher that
sends them the same way; no watcher may notice.

The property: for any sequence of writes, each watcher on a server with many watchers (two
of each kind: versions with and without read defaults, JSON, PartialObjectMetadata and
Tables, selectors that turn events into ADDED and DELETED) receives exactly the bytes that
the same watcher receives on a server where it is alone, so that every frame it gets was
made for it. The servers are identical (memory storage, a fake clock, one seed), so their
writes get the same uids, timestamps and resourceVersions.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.apimachinery.clock import FakeClock
from setpoint.registry.watchcache import SharedKey
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import request

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
COLUMNS = [{"name": "Level", "type": "integer", "jsonPath": ".spec.level"},
           {"name": "Created", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


def _version(name: str, storage: bool, spec: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "served": True, "storage": storage,
            "additionalPrinterColumns": COLUMNS,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "tanks.water.example.com"},
    "spec": {"group": "water.example.com", "scope": "Namespaced",
             "names": {"plural": "tanks", "singular": "tank", "kind": "Tank"},
             "versions": [
                 _version("v1", True, {"type": "object", "properties": {
                     "level": {"type": "integer"}}}),
                 # read defaults: v2 objects are converted and defaulted on every read
                 _version("v2", False, {"type": "object", "properties": {
                     "level": {"type": "integer"},
                     "alarm": {"type": "boolean", "default": False}}}),
             ]},
}

JSON = "application/json"
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
TABLE_BETA = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"

#: (version, Accept, selector query): every watcher kind of the test
WATCHERS: list[tuple[str, str, str]] = [
    ("v1", JSON, ""),
    ("v2", JSON, ""),
    ("v1", PARTIAL, ""),
    ("v2", PARTIAL, ""),
    ("v1", TABLE, ""),
    ("v2", TABLE_BETA, ""),
    ("v1", JSON, "labelSelector=tier%3Dweb"),
    ("v2", JSON, "labelSelector=tier%3Dweb"),
    ("v2", TABLE, "labelSelector=tier%3Dweb"),
    ("v1", PARTIAL, "fieldSelector=metadata.name%3Dt1"),
    # the same label selector with a field selector too: another verdict
    ("v1", JSON, "labelSelector=tier%3Dweb&fieldSelector=metadata.name%21%3Dt0"),
]

NAMES = ("t0", "t1", "t2")
#: one write: (operation, name, level, tier, seconds the clock moves before it)
Op = tuple[str, str, int, str, int]
OPS = st.lists(st.tuples(st.sampled_from(("create", "level", "label", "delete")),
                         st.sampled_from(NAMES), st.integers(0, 3),
                         st.sampled_from(("web", "db")), st.integers(0, 90)),
               min_size=1, max_size=12)


def path(version: str) -> str:
    return f"/apis/water.example.com/{version}/namespaces/default/tanks"


@asynccontextmanager
async def identical_server() -> AsyncIterator[tuple[aiohttp.ClientSession, FakeClock, Server]]:
    """A fresh server that any other from here would match write for write."""
    clock = FakeClock()
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          compaction_interval=None)
    async with Server(config, clock=clock, rng=random.Random(7)) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        status, body, _ = await request(http, "POST", CRDS, CRD)
        assert status == 201, body
        async with asyncio.timeout(10):
            while True:  # established: no write of the server's own comes after this
                _, crd, _ = await request(http, "GET", f"{CRDS}/{CRD['metadata']['name']}")
                conditions = {c["type"]: c["status"]
                              for c in (crd.get("status") or {}).get("conditions", [])}
                if conditions.get("Established") == "True" and \
                        (await request(http, "GET", path("v2")))[0] == 200:
                    break
                await asyncio.sleep(0.01)
        yield http, clock, server


async def write(http: aiohttp.ClientSession, clock: FakeClock, ops: list[Op]) -> str:
    """Apply ``ops`` (refusals included: they are the same on every server), then put t1 in
    every watcher's view; returns that last write's resourceVersion."""
    for op, name, level, tier, seconds in ops:
        clock.advance(seconds)
        if op == "create":
            await request(http, "POST", path("v1"), {
                "apiVersion": "water.example.com/v1", "kind": "Tank",
                "metadata": {"name": name, "labels": {"tier": tier}},
                "spec": {"level": level}})
        elif op == "level":
            await request(http, "PATCH", f"{path('v1')}/{name}", {"spec": {"level": level}},
                          content_type="application/merge-patch+json")
        elif op == "label":
            await request(http, "PATCH", f"{path('v2')}/{name}",
                          {"metadata": {"labels": {"tier": tier}}},
                          content_type="application/merge-patch+json")
        else:
            await request(http, "DELETE", f"{path('v1')}/{name}")
    clock.advance(1)
    status, _, _ = await request(http, "GET", f"{path('v1')}/t1")
    if status == 404:
        status, last, _ = await request(http, "POST", path("v1"), {
            "apiVersion": "water.example.com/v1", "kind": "Tank",
            "metadata": {"name": "t1", "labels": {"tier": "web"}}, "spec": {"level": 9}})
    else:
        status, last, _ = await request(
            http, "PATCH", f"{path('v1')}/t1",
            {"metadata": {"labels": {"tier": "web", "last": "yes"}}},
            content_type="application/merge-patch+json")
    assert status in (200, 201), last
    return str(last["metadata"]["resourceVersion"])


async def receive(response: aiohttp.ClientResponse, last: str) -> list[bytes]:
    """Every line of a watch up to the event of resourceVersion ``last``."""
    lines: list[bytes] = []
    async with asyncio.timeout(10):
        while True:
            line = await response.content.readline()
            assert line, "the watch ended early"
            lines.append(line)
            event = orjson.loads(line)
            if event["object"]["metadata"].get("resourceVersion") == last:
                return lines


async def watched(kinds: list[tuple[str, str, str]], ops: list[Op]) -> list[list[bytes]]:
    """The lines each watcher of ``kinds`` receives on one fresh server while ``ops`` run."""
    async with identical_server() as (http, clock, _server):
        _, listed, _ = await request(http, "GET", path("v1"))
        since = listed["metadata"]["resourceVersion"]
        responses = []
        try:
            for version, accept, query in kinds:
                response = await http.get(
                    f"{path(version)}?watch=true&resourceVersion={since}"
                    + (f"&{query}" if query else ""), headers={"Accept": accept})
                assert response.status == 200
                responses.append(response)
            last = await write(http, clock, ops)
            return [await receive(r, last) for r in responses]
        finally:
            for response in responses:
                response.close()


@pytest.mark.slow
@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
async def test_every_watcher_gets_the_bytes_it_gets_alone(ops: list[Op]) -> None:
    together = await watched(WATCHERS * 2, ops)
    for i, kind in enumerate(WATCHERS):
        alone = (await watched([kind], ops))[0]
        assert together[i] == alone, kind
        assert together[i + len(WATCHERS)] == alone, kind


async def test_watchers_of_one_form_share_the_encoded_event() -> None:
    """Watchers of an object cost one encoding per event and form: the event's entry in the
    watch cache's history keeps one frame per form, sent to every stream."""
    async with identical_server() as (http, clock, server):
        _, listed, _ = await request(http, "GET", path("v1"))
        since = listed["metadata"]["resourceVersion"]
        responses = [await http.get(f"{path(v)}?watch=true&resourceVersion={since}",
                                    headers={"Accept": accept})
                     for v, accept in [("v2", JSON)] * 5 + [("v2", PARTIAL)] * 5]
        try:
            last = await write(http, clock, [])
            received = [await receive(r, last) for r in responses]
            assert server.cache is not None
            entry = next(e for e in server.cache._history if e.revision == int(last))
            assert entry.frames is not None
            # one frame per form: the line the watch's task writes, the chunk written from
            # the cache's fan-out to a caught-up connection (by the watches' selectors,
            # version, strategy and form), or both
            forms = {key[2] if isinstance(key, tuple) else key.key[1][1]
                     for key in entry.frames}
            assert forms == {"json", "partial"}
            assert all(key[:2] == ("ADDED", "v2") for key in entry.frames
                       if isinstance(key, tuple))
            assert all(key.key[0][2] == "v2" for key in entry.frames
                       if isinstance(key, SharedKey))
            assert len(entry.frames) <= 4
        finally:
            for response in responses:
                response.close()
    assert all(lines == received[0] for lines in received[:5])
    assert all(lines == received[5] for lines in received[5:])
    event = orjson.loads(received[0][-1])
    assert event["type"] == "ADDED"
    assert event["object"]["spec"] == {"level": 9,
                                                                     "alarm": False}
    assert orjson.loads(received[5][-1])["object"]["kind"] == "PartialObjectMetadata"
