"""ControllerRevisions through the API: Kubernetes' validation messages, immutable data, a
revision that may be renumbered, the table kubectl prints, discovery, OpenAPI (protobuf
bodies: tests/integration/api/test_protobuf_bodies.py)."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.integration.api.helpers import request

REVISIONS = "/apis/apps/v1/namespaces/default/controllerrevisions"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}

Obj = dict[str, Any]


def revision(name: str = "web-abc", **fields: Any) -> Obj:
    body: Obj = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                 "metadata": {"name": name, "labels": {"app": "web"}, "ownerReferences": [{
                     "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                     "uid": "6f1d8a1e-0000-4000-8000-000000000001", "controller": True}]},
                 "data": {"spec": {"template": {"$patch": "replace", "spec": {}}}},
                 "revision": 1}
    body.update(fields)
    return body


def causes(body: Obj) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c.get("message", ""))
            for c in body.get("details", {}).get("causes", [])]


async def test_validation_and_immutable_data(http: aiohttp.ClientSession) -> None:
    missing = revision()
    del missing["data"]
    status, body, _ = await request(http, "POST", REVISIONS, missing)
    assert status == 422, body
    assert ("data", "Required value: data is mandatory") in causes(body)
    status, body, _ = await request(http, "POST", REVISIONS, revision(revision=-1))
    assert status == 422, body
    assert ("revision", "Invalid value: -1: must be greater than or equal to 0") in causes(body)
    status, body, _ = await request(http, "POST", REVISIONS, revision("Not_A_Name"))
    assert status == 422, body

    status, created, _ = await request(http, "POST", REVISIONS, revision())
    assert status == 201, created
    assert created["data"]["spec"]["template"]["$patch"] == "replace"
    # renumbering is allowed (a template that comes back)...
    status, renumbered, _ = await request(http, "PUT", f"{REVISIONS}/web-abc",
                                          {**created, "revision": 5})
    assert status == 200, renumbered
    assert renumbered["revision"] == 5
    # ...changing the snapshot is not
    status, body, _ = await request(http, "PUT", f"{REVISIONS}/web-abc",
                                    {**renumbered, "data": {"spec": {}}})
    assert status == 422, body
    assert [f for f, m in causes(body) if m.endswith("field is immutable")] == ["data"]


async def test_table_discovery_and_openapi(http: aiohttp.ClientSession) -> None:
    await request(http, "POST", REVISIONS, revision())
    orphan = revision("lonely-1", revision=7)
    del orphan["metadata"]["ownerReferences"]
    await request(http, "POST", REVISIONS, orphan)
    _, table, _ = await request(http, "GET", REVISIONS, headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Controller", "Revision", "Age"]
    cells = sorted(r["cells"][:3] for r in table["rows"])
    assert cells == [["lonely-1", "<none>", 7], ["web-abc", "statefulset.apps/web", 1]]

    _, discovery, _ = await request(http, "GET", "/apis/apps/v1")
    by_name = {r["name"]: r for r in discovery["resources"]}
    assert by_name["controllerrevisions"]["kind"] == "ControllerRevision"
    assert by_name["controllerrevisions"]["namespaced"] is True

    status, spec, _ = await request(http, "GET", "/openapi/v3/apis/apps/v1")
    assert status == 200
    schema = spec["components"]["schemas"]["io.k8s.api.apps.v1.ControllerRevision"]
    assert {"data", "revision"} <= set(schema["properties"])

