"""StatefulSets through the API: Kubernetes' defaults, validation messages, the fields an
update may not change, status and scale subresources, the table and discovery."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.integration.api.helpers import request

STATEFULSETS = "/apis/apps/v1/namespaces/default/statefulsets"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
MERGE = "application/merge-patch+json"
FORBIDDEN = ("Forbidden: updates to statefulset spec for fields other than 'replicas', "
             "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
             "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")

Obj = dict[str, Any]


def statefulset(name: str = "web", **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": "nginx", "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{
                                      "name": "nginx", "image": "nginx:1.25",
                                      "volumeMounts": [{"name": "www",
                                                        "mountPath": "/usr/share/nginx"}]}]}},
                     "volumeClaimTemplates": [{
                         "metadata": {"name": "www"},
                         "spec": {"accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "1Gi"}}}}],
                     **spec}}


def causes(body: Obj) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c.get("message", ""))
            for c in body.get("details", {}).get("causes", [])]


async def test_defaults(http: aiohttp.ClientSession) -> None:
    status, created, _ = await request(http, "POST", STATEFULSETS, statefulset())
    assert status == 201, created
    spec = created["spec"]
    assert spec["replicas"] == 1
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate",
                                      "rollingUpdate": {"partition": 0}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain",
                                                            "whenScaled": "Retain"}
    claim = spec["volumeClaimTemplates"][0]
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["status"] == {"phase": "Pending"}
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert created["metadata"]["generation"] == 1
    assert created["status"] == {"replicas": 0, "availableReplicas": 0}

    _, on_delete, _ = await request(http, "POST", STATEFULSETS, statefulset(
        "od", updateStrategy={"type": "OnDelete"}))
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}


async def test_validation(http: aiohttp.ClientSession) -> None:
    bad = statefulset("bad", replicas=-1, podManagementPolicy="Random",
                      updateStrategy={"type": "OnDelete", "rollingUpdate": {"partition": 1}},
                      serviceName="Not_A_Label",
                      persistentVolumeClaimRetentionPolicy={"whenDeleted": "Keep"})
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    status, body, _ = await request(http, "POST", STATEFULSETS, bad)
    assert status == 422, body
    found = causes(body)
    fields = {f for f, _ in found}
    assert fields >= {"spec.replicas", "spec.podManagementPolicy",
                      "spec.updateStrategy.rollingUpdate", "spec.serviceName",
                      "spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
                      "spec.template.metadata.labels"}, found
    assert ("spec.podManagementPolicy", 'Unsupported value: "Random": supported values: '
            '"OrderedReady", "Parallel"') in found
    # a mount of a name that is neither a volume nor a claim template is refused
    unmounted = statefulset("um")
    unmounted["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] = "other"
    status, body, _ = await request(http, "POST", STATEFULSETS, unmounted)
    assert status == 422
    assert any("volumeMounts[0].name" in f for f, _ in causes(body)), body


async def test_only_some_spec_fields_may_change(http: aiohttp.ClientSession) -> None:
    await request(http, "POST", STATEFULSETS, statefulset())
    for change in ({"serviceName": "other"}, {"podManagementPolicy": "Parallel"},
                   {"selector": {"matchLabels": {"app": "web", "x": "y"}}},
                   {"volumeClaimTemplates": None}):
        status, body, _ = await request(http, "PATCH", f"{STATEFULSETS}/web",
                                        {"spec": change}, content_type=MERGE)
        assert status == 422, (change, body)
        assert ("spec", FORBIDDEN) in causes(body), body
    status, body, _ = await request(http, "PATCH", f"{STATEFULSETS}/web", {"spec": {
        "replicas": 3, "minReadySeconds": 5, "revisionHistoryLimit": 2,
        "ordinals": {"start": 1},
        "updateStrategy": {"rollingUpdate": {"partition": 2}},
        "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"},
        "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.26",
                                              "volumeMounts": [{"name": "www",
                                                                "mountPath": "/w"}]}]}}}},
        content_type=MERGE)
    assert status == 200, body
    assert body["metadata"]["generation"] == 2


async def test_status_scale_table_and_discovery(http: aiohttp.ClientSession) -> None:
    await request(http, "POST", STATEFULSETS, statefulset(replicas=2))
    status, body, _ = await request(http, "PUT", f"{STATEFULSETS}/web/status", {
        **(await request(http, "GET", f"{STATEFULSETS}/web"))[1],
        "status": {"replicas": 1, "readyReplicas": 2}})
    assert status == 422
    assert ("status.readyReplicas", "Invalid value: 2: cannot be greater than "
            "status.replicas") in causes(body)
    status, scale, _ = await request(http, "GET", f"{STATEFULSETS}/web/scale")
    assert status == 200, scale
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    status, scale, _ = await request(http, "PATCH", f"{STATEFULSETS}/web/scale",
                                     {"spec": {"replicas": 4}}, content_type=MERGE)
    assert status == 200, scale
    _, table, _ = await request(http, "GET", STATEFULSETS, headers=TABLE)
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0), ("Ready", 0), ("Age", 0), ("Containers", 1), ("Images", 1)]
    assert table["rows"][0]["cells"][:2] == ["web", "0/4"]
    assert table["rows"][0]["cells"][3:] == ["nginx", "nginx:1.25"]
    _, discovery, _ = await request(http, "GET", "/apis/apps/v1")
    by_name = {r["name"]: r for r in discovery["resources"]}
    assert by_name["statefulsets"]["categories"] == ["all"]
    assert by_name["statefulsets"]["shortNames"] == ["sts"]
    assert {"statefulsets/status", "statefulsets/scale"} <= set(by_name)
