"""Hostile bodies over HTTP: YAML alias bombs, objects nested too deep, numbers out of range.

Each is answered with a 4xx Status naming the limit, and the server keeps serving the resource
(LIST, watch, Table) afterwards.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.apimachinery import decoding
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from setpoint.storage.memory import MemoryBackend
from tests.integration.api.helpers import request

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}],
    },
}
THINGS = "/apis/example.com/v1/namespaces/default/things"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def thing(name: str, depth: int) -> dict[str, Any]:
    """A Thing whose whole object nests ``depth`` levels (the object itself is one)."""
    return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": name},
            "spec": nested(depth - 1)}


def laughs(levels: int) -> bytes:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: lol}", "data:",
             '  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return ("\n".join(lines) + "\n").encode()


async def install_things(http: aiohttp.ClientSession) -> None:
    status, body, _ = await request(
        http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    assert status == 201, body
    for _ in range(200):
        status, _, _ = await request(http, "GET", THINGS)
        if status == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("things were not served")


async def first_events(http: aiohttp.ClientSession, path: str, count: int,
                       accept: str = "application/json") -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with http.get(path, headers={"Accept": accept}) as response:
        assert response.status == 200
        async with asyncio.timeout(10):
            while len(events) < count:
                line = await response.content.readline()
                assert line, "the watch ended early"
                events.append(orjson.loads(line))
    return events


async def test_a_yaml_alias_bomb_is_a_400_and_the_server_keeps_serving(
        http: aiohttp.ClientSession) -> None:
    bomb = laughs(9)  # half a kilobyte that expands to 387 million strings
    assert len(bomb) < 600
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps",
                                    raw=bomb, content_type="application/yaml")
    assert status == 400
    assert body["reason"] == "BadRequest"
    assert "document contains excessive aliasing" in body["message"]
    status, _, _ = await request(http, "GET", "/api/v1/namespaces/default/configmaps")
    assert status == 200


async def test_a_body_nested_beyond_the_limit_is_a_400_naming_it(
        http: aiohttp.ClientSession) -> None:
    await install_things(http)
    for content_type, raw in (
            ("application/json", orjson.dumps(thing("deep", 250))),
            ("application/yaml", orjson.dumps(thing("deep", 250)) + b"\n# not JSON"),
            ("application/json", b"[" * 100_000 + b"]" * 100_000)):
        status, body, _ = await request(http, "POST", THINGS, raw=raw,
                                        content_type=content_type)
        assert status == 400, body
        assert f"nested deeper than the limit of {decoding.MAX_DEPTH} levels" in \
            body["message"]
    status, listed, _ = await request(http, "GET", THINGS)
    assert status == 200
    assert listed["items"] == []


async def test_an_object_at_the_limit_works_through_every_read(
        http: aiohttp.ClientSession) -> None:
    await install_things(http)
    status, _, _ = await request(http, "POST", THINGS, thing("hundred", 100))
    assert status == 201
    status, created, _ = await request(http, "POST", THINGS,
                                       thing("limit", decoding.MAX_DEPTH))
    assert status == 201, created
    status, applied, _ = await request(
        http, "PATCH", f"{THINGS}/applied?fieldManager=test",
        thing("applied", decoding.MAX_DEPTH), content_type="application/apply-patch+yaml")
    assert status == 201, applied
    status, got, _ = await request(http, "GET", f"{THINGS}/limit")
    assert status == 200
    assert got["spec"] == nested(decoding.MAX_DEPTH - 1)
    status, listed, _ = await request(http, "GET", THINGS)
    assert status == 200
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == [
        "applied", "hundred", "limit"]
    status, table, _ = await request(http, "GET", f"{THINGS}?includeObject=Object",
                                     headers={"Accept": TABLE})
    assert status == 200
    assert {row["object"]["metadata"]["name"] for row in table["rows"]} == {
        "applied", "hundred", "limit"}
    events = await first_events(http, f"{THINGS}?watch=true&resourceVersion=0", 3)
    assert {e["object"]["metadata"]["name"] for e in events} == {"applied", "hundred", "limit"}
    events = await first_events(
        http, f"{THINGS}?watch=true&resourceVersion=0&includeObject=Object", 3, accept=TABLE)
    assert all(e["object"]["kind"] == "Table" for e in events)


@pytest.mark.parametrize("operation", ["add", "copy"])
async def test_a_patch_that_nests_too_deep_is_a_422_and_lists_keep_working(
        http: aiohttp.ClientSession, operation: str) -> None:
    await install_things(http)
    status, _, _ = await request(http, "POST", THINGS, thing("grow", 100))
    assert status == 201
    deep = "/spec" + "/a" * 98  # the innermost object of the Thing
    if operation == "add":  # a shallow body whose value lands deep in the object
        body: Any = [{"op": "add", "path": deep + "/b", "value": nested(60)}]
    else:  # a few bytes that copy the whole spec into its own innermost object
        body = [{"op": "copy", "from": "/spec", "path": deep + "/b"}]
    status, answer, _ = await request(http, "PATCH", f"{THINGS}/grow", body,
                                      content_type="application/json-patch+json")
    assert status == 422, answer
    assert f"may be nested at most {decoding.MAX_DEPTH} levels deep" in answer["message"]
    assert answer["details"]["causes"][0]["field"].startswith("spec.a.a.a")
    status, listed, _ = await request(http, "GET", THINGS)
    assert status == 200
    assert listed["items"][0]["spec"] == nested(99)


async def test_copies_that_double_the_depth_are_a_422_and_the_server_keeps_serving(
        http: aiohttp.ClientSession) -> None:
    # each copy puts the whole of /x at its own deepest point: fifteen of them, a few
    # hundred bytes of copies, nest it 32,768 levels deep
    status, _, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doubled"}})
    assert status == 201
    ops: list[Any] = [{"op": "add", "path": "/x", "value": {"a": {}}}]
    ops += [{"op": "copy", "from": "/x", "path": "/x" + "/a" * (2 ** k)} for k in range(15)]
    path = "/api/v1/namespaces/default/configmaps/doubled"
    status, answer, _ = await request(http, "PATCH", path, ops,
                                      content_type="application/json-patch+json")
    assert status == 422, answer
    assert answer["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "patch",
        "message": f"the patched object nests deeper than {decoding.MAX_DEPTH} levels"}]
    status, _, _ = await request(http, "GET", path)
    assert status == 200


async def test_a_json_patch_copy_bomb_is_a_422_and_the_server_keeps_serving(
        http: aiohttp.ClientSession) -> None:
    # thirty copies of /spec into itself double it thirty times: a two-kilobyte body asking
    # for a terabyte (kube-apiserver bounds what copies add at 3 MiB)
    status, _, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed"},
        "data": {"a": "x" * 1000}})
    assert status == 201
    bomb = [{"op": "copy", "from": "/data", "path": f"/data/k{i}"} for i in range(30)]
    status, answer, _ = await request(
        http, "PATCH", "/api/v1/namespaces/default/configmaps/seed", bomb,
        content_type="application/json-patch+json")
    assert status == 422, answer
    assert "copy operations of the patch add more than 3145728 bytes" in \
        answer["details"]["causes"][0]["message"]
    status, seed, _ = await request(http, "GET", "/api/v1/namespaces/default/configmaps/seed")
    assert status == 200
    assert seed["data"] == {"a": "x" * 1000}


async def test_a_json_patch_of_more_than_10000_operations_is_a_413(
        http: aiohttp.ClientSession) -> None:
    status, _, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ops"},
        "data": {"a": "1"}})
    assert status == 201
    ops = [{"op": "test", "path": "/data/a", "value": "1"}]
    path = "/api/v1/namespaces/default/configmaps/ops"
    status, answer, _ = await request(http, "PATCH", path, ops * 10_001,
                                      content_type="application/json-patch+json")
    assert status == 413, answer
    assert answer["reason"] == "RequestEntityTooLarge"
    assert answer["message"] == \
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    status, answer, _ = await request(http, "PATCH", path, ops * 10_000,
                                      content_type="application/json-patch+json")
    assert status == 200, answer


async def test_a_json_patch_that_moves_an_array_head_again_and_again_is_a_422(
        http: aiohttp.ClientSession) -> None:
    await install_things(http)
    status, _, _ = await request(http, "POST", THINGS, {
        "apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "long"},
        "spec": {"a": [0] * 200_000}})
    assert status == 201
    # 10,000 removals at the head move two thousand million elements
    head = [{"op": "remove", "path": "/spec/a/0"}] * 10_000
    status, answer, _ = await request(http, "PATCH", f"{THINGS}/long", head,
                                      content_type="application/json-patch+json")
    assert status == 422, answer
    assert "move more than 50000000 array elements" in \
        answer["details"]["causes"][0]["message"]
    status, listed, _ = await request(http, "GET", THINGS)
    assert status == 200
    assert len(listed["items"][0]["spec"]["a"]) == 200_000


async def test_a_strategic_merge_patch_of_thousands_of_finalizers_is_refused_at_once(
        http: aiohttp.ClientSession) -> None:
    # merging lists compares every element of one with every element of the other: a
    # patch of a few thousand finalizers held the server's event loop for minutes
    path = "/api/v1/namespaces/default/configmaps/many"
    status, _, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "many", "finalizers": [f"example.com/old{i}" for i in range(3000)]}})
    assert status == 201
    smp = "application/strategic-merge-patch+json"
    body = {"metadata": {"finalizers": [f"example.com/new{i}" for i in range(3000)]}}
    status, answer, _ = await request(http, "PATCH", path, body, content_type=smp)
    assert status == 400, answer
    assert answer["message"] == (
        "the lists merged at metadata.finalizers are too long: a strategic merge patch may "
        "compare list elements at most 100000 times")
    # a merge patch replaces the list without merging it; then strategic ones merge again
    status, answer, _ = await request(http, "PATCH", path, {"metadata": {"finalizers": None}},
                                      content_type="application/merge-patch+json")
    assert status == 200, answer
    for finalizer in ("example.com/a", "example.com/b"):
        status, answer, _ = await request(
            http, "PATCH", path, {"metadata": {"finalizers": [finalizer]}}, content_type=smp)
        assert status == 200, answer
    assert sorted(answer["metadata"]["finalizers"]) == ["example.com/a", "example.com/b"]
    status, answer, _ = await request(http, "PATCH", path, {"metadata": {"finalizers": None}},
                                      content_type="application/merge-patch+json")
    assert status == 200, answer


async def test_an_object_of_thousands_of_mistakes_gets_a_status_of_a_thousand(
        http: aiohttp.ClientSession) -> None:
    # every error names its value and is listed in the message and in the causes: 64,000
    # invalid finalizers (1.2 MB) once made a 43 MB Status
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "mistakes", "finalizers": [f"Not A Qualified Name {i}" for i in range(5000)]}}
    status, answer, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps",
                                      body)
    assert status == 422, str(answer)[:300]
    assert len(answer["details"]["causes"]) == 1000
    assert answer["message"].endswith(", and 4000 more errors]")
    assert len(orjson.dumps(answer)) < 1_000_000  # a thousand errors' worth, however many
    status, _, _ = await request(http, "GET", "/api/v1/namespaces/default/configmaps")
    assert status == 200


async def test_integers_beyond_int64_are_stored_as_floats(
        http: aiohttp.ClientSession) -> None:
    await install_things(http)
    raw = (b'{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "big"},'
           b' "spec": {"u64": 18446744073709551615, "huge": 1' + b"0" * 30 + b"}}")
    status, created, _ = await request(http, "POST", THINGS, raw=raw)
    assert status == 201, created
    assert created["spec"] == {"u64": 1.8446744073709552e19, "huge": 1e30}
    status, body, _ = await request(
        http, "POST", THINGS, raw=raw.replace(b'"huge": 1', b'"huge": 1' + b"0" * 400))
    assert status == 400
    assert "infinity" in body["message"]
    status, listed, _ = await request(http, "GET", THINGS)
    assert status == 200
    assert len(listed["items"]) == 1


async def test_an_object_stored_before_the_limit_can_still_lose_its_finalizers(
        tmp_path: Path) -> None:
    """An object written deeper than the limit by an older server is not stuck: writes that
    leave it no deeper go through (removing its finalizer deletes it), deeper ones do not."""
    backend = MemoryBackend()
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          kubeconfig_path=tmp_path / "kubeconfig")
    async with Server(config, backend=backend) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        await install_things(http)
        legacy = thing("legacy", 10)
        legacy["metadata"]["finalizers"] = ["example.com/keep"]
        status, created, _ = await request(http, "POST", THINGS, legacy)
        assert status == 201, created
        key = "/registry/example.com/things/default/legacy"
        kv = await backend.get(key)
        assert kv is not None
        stored = orjson.loads(kv.value)
        stored["spec"] = nested(decoding.MAX_DEPTH + 20)
        await backend.update(key, orjson.dumps(stored), kv.mod_revision)
        status, answer, _ = await request(
            http, "PATCH", f"{THINGS}/legacy", [{"op": "copy", "from": "/spec",
                                                  "path": "/spec/b"}],
            content_type="application/json-patch+json")
        assert status == 422, answer
        status, _, _ = await request(http, "DELETE", f"{THINGS}/legacy")
        assert status == 200
        status, answer, _ = await request(
            http, "PATCH", f"{THINGS}/legacy", {"metadata": {"finalizers": None}},
            content_type="application/merge-patch+json")
        assert status == 200, answer
        status, _, _ = await request(http, "GET", f"{THINGS}/legacy")
        assert status == 404
