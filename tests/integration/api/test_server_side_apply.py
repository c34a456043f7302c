"""Server-side apply and managedFields through the HTTP API (in-process server)."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp

from tests.integration.api.helpers import CRD_V1, WIDGETS, install_widgets, request, widget

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def entries(obj: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e["manager"], e["operation"], e["fieldsV1"])
            for e in obj["metadata"].get("managedFields", [])]


async def apply(http: aiohttp.ClientSession, path: str, body: Any, manager: str = "alice",
                extra: str = "") -> tuple[int, Any]:
    status, out, _ = await request(http, "PATCH", f"{path}?fieldManager={manager}{extra}",
                                   body, content_type=APPLY)
    return status, out


async def test_apply_creates_then_updates(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, created = await apply(http, WIDGETS + "/a", widget("a", 1))
    assert status == 201, created
    assert entries(created) == [("alice", "Apply", {"f:spec": {"f:size": {}}})]
    assert created["metadata"]["managedFields"][0]["apiVersion"] == "example.com/v1"
    status, updated = await apply(http, WIDGETS + "/a", widget("a", 2))
    assert status == 200, updated
    assert updated["spec"]["size"] == 2
    assert updated["metadata"]["generation"] == 2
    # the same configuration again changes nothing: same resourceVersion, no new event
    status, again = await apply(http, WIDGETS + "/a", widget("a", 2))
    assert status == 200
    assert again["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


async def test_apply_needs_a_field_manager(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, body, _ = await request(http, "PATCH", WIDGETS + "/a", widget("a"),
                                    content_type=APPLY)
    assert status == 400
    assert "fieldManager is required" in body["message"]


async def test_conflicts_are_409_with_causes_and_force_takes_over(
        http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, created, _ = await request(
        http, "POST", WIDGETS + "?fieldManager=kubectl-client-side-apply", widget("c", 1))
    assert status == 201
    assert entries(created)[0][:2] == ("kubectl-client-side-apply", "Update")
    status, conflict = await apply(http, WIDGETS + "/c", widget("c", 5), manager="mine")
    assert status == 409, conflict
    assert conflict["reason"] == "Conflict"
    assert conflict["message"] == ('Apply failed with 1 conflict: conflict with '
                                   '"kubectl-client-side-apply" using example.com/v1: '
                                   '.spec.size')
    assert conflict["details"]["causes"] == [{
        "reason": "FieldManagerConflict",
        "message": 'conflict with "kubectl-client-side-apply" using example.com/v1',
        "field": ".spec.size"}]
    status, forced = await apply(http, WIDGETS + "/c", widget("c", 5), manager="mine",
                                 extra="&force=true")
    assert status == 200, forced
    assert forced["spec"]["size"] == 5
    owners = {m: f for m, _, f in entries(forced)}
    assert owners["mine"] == {"f:spec": {"f:size": {}}}
    assert "f:size" not in owners["kubectl-client-side-apply"].get("f:spec", {})


async def test_fields_dropped_from_the_configuration_are_removed(
        http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    body = widget("r", 1)
    body["metadata"]["labels"] = {"a": "1", "b": "2"}
    body["spec"]["replicas"] = 3
    await apply(http, WIDGETS + "/r", body)
    other = {"apiVersion": "example.com/v1", "kind": "Widget",
             "metadata": {"name": "r", "labels": {"b": "2"}}}
    status, _ = await apply(http, WIDGETS + "/r", other, manager="bob")
    assert status == 200
    status, pruned = await apply(http, WIDGETS + "/r", widget("r", 1))
    assert status == 200, pruned
    assert pruned["metadata"]["labels"] == {"b": "2"}
    assert "replicas" not in pruned["spec"]


async def test_non_apply_writes_record_update_entries(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await apply(http, WIDGETS + "/u", widget("u", 1))
    status, patched, _ = await request(http, "PATCH", WIDGETS + "/u", {"spec": {"size": 2}},
                                       content_type=MERGE,
                                       headers={"User-Agent": "my-tool/1.0 (linux)"})
    assert status == 200
    assert entries(patched) == [("my-tool", "Update", {"f:spec": {"f:size": {}}})]
    # the applier lost the field to the writer, so re-applying its old value conflicts
    status, conflict = await apply(http, WIDGETS + "/u", widget("u", 1))
    assert status == 409, conflict
    assert conflict["details"]["causes"][0]["message"] == (
        'conflict with "my-tool" using example.com/v1')


async def test_status_subresource_apply(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await apply(http, WIDGETS + "/s", widget("s", 1))
    status_body = {"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "s"}, "status": {"phase": "Ready"}}
    status, out = await apply(http, WIDGETS + "/s/status", status_body, manager="ctrl")
    assert status == 200, out
    assert out["status"] == {"phase": "Ready"}
    ctrl = [e for e in out["metadata"]["managedFields"] if e["manager"] == "ctrl"]
    assert ctrl[0]["subresource"] == "status"
    assert ctrl[0]["fieldsV1"] == {"f:status": {"f:phase": {}}}
    # status sent to the main endpoint is neither stored nor owned
    body = widget("s", 1)
    body["status"] = {"phase": "Other"}
    _, main = await apply(http, WIDGETS + "/s", body)
    assert main["status"] == {"phase": "Ready"}


async def test_list_map_items_merge_by_their_keys(http: aiohttp.ClientSession) -> None:
    crd = copy.deepcopy(CRD_V1)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["ports"] = {
        "type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "port": {"type": "integer"}}}}
    spec["properties"]["tags"] = {"type": "array", "x-kubernetes-list-type": "set",
                                  "items": {"type": "string"}}
    status, _, _ = await request(http, "POST",
                                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201
    await install_widgets_served(http)
    web = widget("m", 1)
    web["spec"].update(ports=[{"name": "web", "port": 80}], tags=["a"])
    await apply(http, WIDGETS + "/m", web)
    tls = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "m"},
           "spec": {"ports": [{"name": "tls", "port": 443}], "tags": ["b"]}}
    status, both = await apply(http, WIDGETS + "/m", tls, manager="bob")
    assert status == 200, both
    assert both["spec"]["ports"] == [{"name": "web", "port": 80}, {"name": "tls", "port": 443}]
    assert both["spec"]["tags"] == ["a", "b"]
    bob = next(e for e in both["metadata"]["managedFields"] if e["manager"] == "bob")
    assert bob["fieldsV1"] == {"f:spec": {
        "f:ports": {'k:{"name":"tls"}': {".": {}, "f:name": {}, "f:port": {}}},
        "f:tags": {'v:"b"': {}}}}
    status, conflict = await apply(http, WIDGETS + "/m", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "m"},
        "spec": {"ports": [{"name": "web", "port": 8080}]}}, manager="bob")
    assert status == 409
    assert conflict["details"]["causes"][0]["field"] == '.spec.ports[name="web"].port'


async def install_widgets_served(http: aiohttp.ClientSession) -> None:
    import asyncio

    for _ in range(100):
        status, _, _ = await request(http, "GET", WIDGETS)
        if status == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("widgets were not served")


async def test_configmaps_apply_by_key(http: aiohttp.ClientSession) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "cm", "finalizers": ["a.io/x"]}, "data": {"a": "1"}}
    status, created = await apply(http, CONFIGMAPS + "/cm", config)
    assert status == 201, created
    other = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cm", "finalizers": ["b.io/y"]}, "data": {"b": "2"}}
    status, merged = await apply(http, CONFIGMAPS + "/cm", other, manager="bob")
    assert status == 200, merged
    assert merged["data"] == {"a": "1", "b": "2"}
    assert merged["metadata"]["finalizers"] == ["a.io/x", "b.io/y"]
    status, dropped = await apply(http, CONFIGMAPS + "/cm", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert status == 200
    assert dropped["data"] == {"b": "2"}
    assert dropped["metadata"]["finalizers"] == ["b.io/y"]


async def test_apply_rejects_managed_fields_and_duplicates(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    body = widget("d", 1)
    body["metadata"]["managedFields"] = [{"manager": "x"}]
    status, out = await apply(http, WIDGETS + "/d", body)
    assert status == 400
    assert out["message"] == "metadata.managedFields must be nil"
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "dup", "finalizers": ["a", "a"]}}
    status, out = await apply(http, CONFIGMAPS + "/dup", config)
    assert status == 400
    assert "duplicate entries" in out["message"]


async def test_apply_with_a_stale_resource_version_conflicts(
        http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, created = await apply(http, WIDGETS + "/v", widget("v", 1))
    await apply(http, WIDGETS + "/v", widget("v", 2))
    stale = widget("v", 3)
    stale["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    status, out = await apply(http, WIDGETS + "/v", stale)
    assert status == 409
    assert "the object has been modified" in out["message"]


async def test_dry_run_apply_persists_nothing(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, out = await apply(http, WIDGETS + "/dry", widget("dry", 1), extra="&dryRun=All")
    assert status == 201, out
    status, _, _ = await request(http, "GET", WIDGETS + "/dry")
    assert status == 404


async def test_clearing_managed_fields_with_an_empty_entry(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await apply(http, WIDGETS + "/e", widget("e", 1))
    status, cleared, _ = await request(http, "PATCH", WIDGETS + "/e",
                                       {"metadata": {"managedFields": [{}]}},
                                       content_type=MERGE)
    assert status == 200
    assert "managedFields" not in cleared["metadata"]


async def test_unknown_fields_cannot_be_applied(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    body = widget("unknown", 1)
    body["spec"]["nope"] = 1
    for validation in ("Strict", "Warn", "Ignore"):
        status, out = await apply(http, WIDGETS + "/unknown", body,
                                  extra=f"&fieldValidation={validation}")
        assert status == 400, out
        assert out["message"] == (
            "failed to create typed patch object (default/unknown; example.com/v1, "
            "Kind=Widget): .spec.nope: field not declared in schema")
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"},
              "data_error": {"a": "1"}}
    status, out = await apply(http, CONFIGMAPS + "/bad", config)
    assert status == 400
    assert out["message"] == ("failed to create typed patch object (default/bad; /v1, "
                              "Kind=ConfigMap): .data_error: field not declared in schema")


DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(image: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{
                                      "name": "web", "image": image,
                                      "ports": [{"containerPort": 80}]}]}}}}


async def test_built_in_lists_with_merge_keys_are_associative(
        http: aiohttp.ClientSession) -> None:
    # Kubernetes' clients create and then apply the same manifest (the kubernetes client's
    # create_from_yaml(apply=True)): the containers a create set, defaulted, are a list keyed
    # by name, so applying the same values co-owns them instead of conflicting on the list.
    status, created, _ = await request(http, "POST", DEPLOYMENTS + "?fieldManager=creator",
                                       deployment("nginx:1.15.4"))
    assert status == 201, created
    created_containers = entries(created)[0][2]["f:spec"]["f:template"]["f:spec"][
        "f:containers"]
    assert 'k:{"name":"web"}' in created_containers
    assert "f:terminationMessagePath" in created_containers['k:{"name":"web"}']
    status, applied = await apply(http, DEPLOYMENTS + "/web", deployment("nginx:1.15.4"),
                                  manager="applier")
    assert status == 200, applied
    mine = next(e for e in entries(applied) if e[0] == "applier")[2]
    assert mine["f:spec"]["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}, "f:ports": {
            'k:{"containerPort":80}': {".": {}, "f:containerPort": {}}}}}
    # a different value is a conflict on that container's field, not on the list
    status, conflict = await apply(http, DEPLOYMENTS + "/web", deployment("nginx:1.16"),
                                   manager="third")
    assert status == 409, conflict
    fields = {c["field"] for c in conflict["details"]["causes"]}
    assert fields == {'.spec.template.spec.containers[name="web"].image'}
