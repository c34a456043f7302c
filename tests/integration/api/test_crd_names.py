"""CRD names as Kubernetes rules them: protected groups need API approval, and a CRD never
shadows a built-in resource (refused when created; never established nor served if stored).
Discovery, the CRD's status and serving always agree."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import MemoryBackend
from tests.integration.api.helpers import CRD_V1, request

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
APPROVAL = "api-approved.kubernetes.io"
HELP = "see https://github.com/kubernetes/enhancements/pull/1111"
MISSING = f'protected groups must have approval annotation "{APPROVAL}", {HELP}'
INVALID = (f'protected groups must have approval annotation "{APPROVAL}" with either a URL or '
           f'a reason starting with "unapproved", {HELP}')


def crd(group: str, plural: str = "widgets", kind: str = "Widget",
        approval: str | None = None) -> dict[str, Any]:
    body = copy.deepcopy(CRD_V1)
    body["metadata"] = {"name": f"{plural}.{group}"}
    if approval is not None:
        body["metadata"]["annotations"] = {APPROVAL: approval}
    body["spec"]["group"] = group
    body["spec"]["names"] = {"plural": plural, "kind": kind}
    return body


async def conditions_when(http: aiohttp.ClientSession, name: str,
                          ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The CRD's conditions by type, once ``ready`` says they are what the test waits for."""
    async with asyncio.timeout(10):
        while True:
            _, obj, _ = await request(http, "GET", f"{CRDS}/{name}")
            found = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
            if ready(found):
                return found
            await asyncio.sleep(0.02)


async def test_protected_groups_need_api_approval(http: aiohttp.ClientSession) -> None:
    for group in ("sigs.k8s.io", "k8s.io", "kubernetes.io", "x.y.kubernetes.io"):
        status, reply, _ = await request(http, "POST", CRDS, crd(group))
        assert status == 422, reply
        assert reply["message"] == (
            f'CustomResourceDefinition.apiextensions.k8s.io "widgets.{group}" is invalid: '
            f"metadata.annotations[{APPROVAL}]: Required value: {MISSING}")
    status, reply, _ = await request(http, "POST", CRDS, crd("sigs.k8s.io", approval="bad"))
    assert status == 422
    assert reply["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": f"metadata.annotations[{APPROVAL}]",
        "message": f'Invalid value: "bad": {INVALID}'}]
    # look-alike groups are not protected
    for group in ("notk8s.io", "k8s.io.example.com"):
        status, reply, _ = await request(http, "POST", CRDS, crd(group))
        assert status == 201, reply


async def test_approved_and_unapproved_crds_are_served_with_their_condition(
        http: aiohttp.ClientSession) -> None:
    url = "https://github.com/kubernetes/enhancements/pull/1111"
    cases = [("sigs.k8s.io", url, "True", "ApprovedAnnotation", f"approved in {url}"),
             ("x-k8s.kubernetes.io", "unapproved, testing only", "False",
              "UnapprovedAnnotation", 'not approved: "unapproved, testing only"')]
    for group, approval, status_, reason, message in cases:
        status, reply, _ = await request(http, "POST", CRDS, crd(group, approval=approval))
        assert status == 201, reply
        found = await conditions_when(
            http, f"widgets.{group}",
            lambda c: "Established" in c and "KubernetesAPIApprovalPolicyConformant" in c)
        assert found["Established"]["status"] == "True"
        conformant = found["KubernetesAPIApprovalPolicyConformant"]
        assert (conformant["status"], conformant["reason"], conformant["message"]) == (
            status_, reason, message)
        status, _, _ = await request(http, "GET", f"/apis/{group}/v1/widgets")
        assert status == 200
    # an update that leaves the approval alone passes; one that drops it does not
    path = f"{CRDS}/widgets.sigs.k8s.io"
    status, reply, _ = await request(http, "PATCH", path, {"metadata": {"labels": {"a": "b"}}},
                                     content_type="application/merge-patch+json")
    assert status == 200, reply
    status, reply, _ = await request(http, "PATCH", path,
                                     {"metadata": {"annotations": {APPROVAL: None}}},
                                     content_type="application/merge-patch+json")
    assert status == 422
    assert reply["details"]["causes"][0]["field"] == f"metadata.annotations[{APPROVAL}]"
    # CRDs of other groups have no such condition
    status, _, _ = await request(http, "POST", CRDS, crd("example.org"))
    assert status == 201
    found = await conditions_when(http, "widgets.example.org", lambda c: "Established" in c)
    assert "KubernetesAPIApprovalPolicyConformant" not in found


async def test_a_crd_may_not_define_a_built_in_resource(http: aiohttp.ClientSession) -> None:
    for group, plural, kind in (("coordination.k8s.io", "leases", "Lease"),
                                ("events.k8s.io", "events", "Event"),
                                ("apiextensions.k8s.io", "customresourcedefinitions",
                                 "CustomResourceDefinition")):
        status, reply, _ = await request(http, "POST", CRDS,
                                         crd(group, plural, kind, approval="unapproved"))
        assert status == 422, reply
        assert reply["details"]["causes"] == [{
            "reason": "FieldValueInvalid", "field": "spec.names.plural",
            "message": f'Invalid value: "{plural}": {plural}.{group} is a built-in resource '
                       "of this server and cannot be defined by a CustomResourceDefinition"}]
    # a new resource in a built-in group is fine, unless it takes a built-in's name
    status, _, _ = await request(http, "POST", CRDS, crd("coordination.k8s.io", "tokens",
                                                         "Token", approval="unapproved"))
    assert status == 201
    found = await conditions_when(http, "tokens.coordination.k8s.io",
                                  lambda c: "Established" in c)
    assert found["Established"]["status"] == "True"
    status, _, _ = await request(http, "GET", "/apis/coordination.k8s.io/v1/tokens")
    assert status == 200
    status, _, _ = await request(http, "POST", CRDS, crd("coordination.k8s.io", "holders",
                                                         "Lease", approval="unapproved"))
    assert status == 201
    found = await conditions_when(http, "holders.coordination.k8s.io",
                                  lambda c: "NamesAccepted" in c)
    assert (found["NamesAccepted"]["status"], found["NamesAccepted"]["reason"],
            found["NamesAccepted"]["message"]) == ("False", "NameConflict",
                                                   '"Lease" is already in use')
    assert "Established" not in found
    status, _, _ = await request(http, "GET", "/apis/coordination.k8s.io/v1/holders")
    assert status == 404
    _, doc, _ = await request(http, "GET", "/apis/coordination.k8s.io/v1")
    assert sorted(r["name"] for r in doc["resources"] if "/" not in r["name"]) == [
        "leases", "tokens"]


async def test_a_stored_crd_shadowing_a_built_in_is_never_established(tmp_path: Path) -> None:
    """What an older server accepted and established: the new one withdraws it, and serves
    the built-in."""
    backend = MemoryBackend()
    await backend.start()
    shadow = crd("coordination.k8s.io", "leases", "Lease", approval="unapproved")
    shadow["metadata"].update(uid="0f9e1a2b-0000-4000-8000-000000000001",
                              creationTimestamp="2024-01-01T00:00:00Z",
                              finalizers=["customresourcecleanup.apiextensions.k8s.io"])
    shadow["status"] = {
        "acceptedNames": {"plural": "leases", "kind": "Lease", "singular": "lease",
                          "listKind": "LeaseList"},
        "storedVersions": ["v1"],
        "conditions": [
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted",
             "lastTransitionTime": "2024-01-01T00:00:00Z"},
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    await backend.create(
        "/registry/apiextensions.k8s.io/customresourcedefinitions/leases.coordination.k8s.io",
        orjson.dumps(shadow))
    try:
        async with Server(ServerConfig(port=0), backend=backend) as server, \
                aiohttp.ClientSession(base_url=server.url) as http:
            found = await conditions_when(
                http, "leases.coordination.k8s.io",
                lambda c: c.get("NamesAccepted", {}).get("status") == "False")
            assert found["NamesAccepted"]["reason"] == "NameConflict"
            assert found["Established"]["status"] == "False"
            _, obj, _ = await request(http, "GET", f"{CRDS}/leases.coordination.k8s.io")
            assert obj["status"]["acceptedNames"] == {"plural": "", "kind": ""}
            # the built-in is what is served and discovered
            status, lease, _ = await request(
                http, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}})
            assert status == 201, lease
            assert lease["kind"] == "Lease"
            _, doc, _ = await request(http, "GET", "/apis/coordination.k8s.io/v1")
            assert [r["name"] for r in doc["resources"]] == ["leases"]
            # and the stored CRD can still be deleted (its finalizer removed by a write)
            status, _, _ = await request(http, "DELETE", f"{CRDS}/leases.coordination.k8s.io")
            assert status == 200
    finally:
        await backend.close()
