"""Deletion semantics of the server alone (no controllers running): DeleteOptions'
propagation finalizers, namespace termination and ``/finalize``, CRDs being deleted, and
the validation of ownerReferences on write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def gc_http(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    """A server that is told a garbage collector runs (none does: the finalizers stay)."""
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          garbage_collection=True)
    async with Server(config) as server, aiohttp.ClientSession(base_url=server.url) as http:
        yield http


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, **meta}, "data": {"k": "v"}}


async def test_without_a_garbage_collector_every_policy_deletes_at_once(
        http: aiohttp.ClientSession) -> None:
    for policy in ("Foreground", "Orphan", "Background"):
        status, _, _ = await request(http, "POST", CMS, cm("x"))
        assert status == 201
        status, body, _ = await request(http, "DELETE", f"{CMS}/x",
                                        {"propagationPolicy": policy})
        assert status == 200, body
        assert body["kind"] == "Status"
        assert body["status"] == "Success"
        status, _, _ = await request(http, "GET", f"{CMS}/x")
        assert status == 404


async def test_foreground_and_orphan_add_their_finalizers(
        gc_http: aiohttp.ClientSession) -> None:
    http = gc_http
    await request(http, "POST", CMS, cm("fg", finalizers=["example.com/keep"]))
    status, body, _ = await request(http, "DELETE", f"{CMS}/fg",
                                    {"kind": "DeleteOptions", "apiVersion": "v1",
                                     "propagationPolicy": "Foreground"})
    assert status == 200, body
    assert body["kind"] == "ConfigMap"
    assert body["metadata"]["finalizers"] == ["example.com/keep", "foregroundDeletion"]
    assert body["metadata"]["deletionTimestamp"]
    stamp = body["metadata"]["deletionTimestamp"]
    # a second DELETE in background takes the foreground finalizer off again
    status, body, _ = await request(http, "DELETE", f"{CMS}/fg?propagationPolicy=Background")
    assert status == 200, body
    assert body["metadata"]["finalizers"] == ["example.com/keep"]
    assert body["metadata"]["deletionTimestamp"] == stamp  # never moved
    # the old orphanDependents flag, as a query parameter
    await request(http, "POST", CMS, cm("or"))
    status, body, _ = await request(http, "DELETE", f"{CMS}/or?orphanDependents=true")
    assert status == 200, body
    assert body["metadata"]["finalizers"] == ["orphan"]
    # a repeated DELETE without a policy keeps the mode and changes nothing
    status, again, _ = await request(http, "DELETE", f"{CMS}/or")
    assert status == 200
    assert again["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    # removing the finalizer deletes it
    status, _, _ = await request(http, "PATCH", f"{CMS}/or",
                                 {"metadata": {"finalizers": None}},
                                 content_type="application/merge-patch+json")
    assert status == 200
    status, _, _ = await request(http, "GET", f"{CMS}/or")
    assert status == 404
    # background on an object without finalizers deletes it at once
    await request(http, "POST", CMS, cm("bg"))
    status, body, _ = await request(http, "DELETE", f"{CMS}/bg",
                                    {"propagationPolicy": "Background"})
    assert body["kind"] == "Status"


async def test_orphan_dependents_and_a_policy_exclude_each_other(
        gc_http: aiohttp.ClientSession) -> None:
    await request(gc_http, "POST", CMS, cm("x"))
    status, err, _ = await request(gc_http, "DELETE", f"{CMS}/x",
                                   {"orphanDependents": True, "propagationPolicy": "Orphan"})
    assert status == 422, err
    status, err, _ = await request(gc_http, "DELETE", f"{CMS}/x",
                                   {"propagationPolicy": "Sometimes"})
    assert status == 422, err


async def test_deletecollection_honours_the_propagation_policy(
        gc_http: aiohttp.ClientSession) -> None:
    for name in ("a", "b", "c"):
        await request(gc_http, "POST", CMS, cm(name, labels={"set": "one"}))
    await request(gc_http, "POST", CMS, cm("other"))
    status, body, _ = await request(gc_http, "DELETE", f"{CMS}?labelSelector=set%3Done",
                                    {"propagationPolicy": "Orphan"})
    assert status == 200, body
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b", "c"]
    _, listed, _ = await request(gc_http, "GET", CMS)
    by_name = {i["metadata"]["name"]: i["metadata"] for i in listed["items"]}
    for name in ("a", "b", "c"):
        assert by_name[name]["finalizers"] == ["orphan"]
        assert by_name[name]["deletionTimestamp"]
    assert "deletionTimestamp" not in by_name["other"]


async def test_a_deleted_namespace_terminates_until_finalized(
        http: aiohttp.ClientSession) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}
    status, created, _ = await request(http, "POST", "/api/v1/namespaces", ns)
    assert status == 201
    assert created["spec"] == {"finalizers": ["kubernetes"]}
    status, body, _ = await request(http, "DELETE", "/api/v1/namespaces/doomed")
    assert status == 200, body
    assert body["kind"] == "Namespace"
    assert body["status"]["phase"] == "Terminating"
    assert body["metadata"]["deletionTimestamp"]
    assert body["spec"]["finalizers"] == ["kubernetes"]
    # deleting again answers with the namespace, unchanged
    status, again, _ = await request(http, "DELETE", "/api/v1/namespaces/doomed")
    assert status == 200
    assert again["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    # no new content
    status, err, _ = await request(http, "POST", "/api/v1/namespaces/doomed/configmaps",
                                   cm("late"))
    assert status == 403, err
    assert err["message"] == ('configmaps "late" is forbidden: unable to create new content '
                              "in namespace doomed because it is being terminated")
    assert err["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    # a field selector finds it by phase
    _, listed, _ = await request(http, "GET",
                                 "/api/v1/namespaces?fieldSelector=status.phase%3DTerminating")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["doomed"]
    # /finalize with the spec finalizer gone removes it
    final = dict(again)
    final["spec"] = {"finalizers": []}
    status, body, _ = await request(http, "PUT", "/api/v1/namespaces/doomed/finalize", final)
    assert status == 200, body
    status, _, _ = await request(http, "GET", "/api/v1/namespaces/doomed")
    assert status == 404


async def test_a_namespace_keeps_its_own_spec_finalizers_and_gets_kubernetes(
        http: aiohttp.ClientSession) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mine"},
          "spec": {"finalizers": ["example.com/other"]}}
    status, created, _ = await request(http, "POST", "/api/v1/namespaces", ns)
    assert status == 201, created
    assert created["spec"]["finalizers"] == ["example.com/other", "kubernetes"]


async def test_a_finalized_namespace_waits_for_its_metadata_finalizers(
        http: aiohttp.ClientSession) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    await request(http, "POST", "/api/v1/namespaces", ns)
    _, body, _ = await request(http, "DELETE", "/api/v1/namespaces/held")
    body["spec"] = {"finalizers": []}
    status, body, _ = await request(http, "PUT", "/api/v1/namespaces/held/finalize", body)
    assert status == 200
    assert body["spec"]["finalizers"] == []
    status, _, _ = await request(http, "GET", "/api/v1/namespaces/held")
    assert status == 200  # the metadata finalizer holds it
    status, _, _ = await request(http, "PATCH", "/api/v1/namespaces/held",
                                 {"metadata": {"finalizers": []}},
                                 content_type="application/merge-patch+json")
    assert status == 200
    status, _, _ = await request(http, "GET", "/api/v1/namespaces/held")
    assert status == 404


async def test_custom_resources_cannot_be_created_while_their_crd_terminates(
        http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, _, _ = await request(http, "POST", WIDGETS, widget("before"))
    assert status == 201
    status, crd, _ = await request(
        http, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
        "widgets.example.com")
    assert status == 200
    assert crd["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    status, err, _ = await request(http, "POST", WIDGETS, widget("after"))
    assert status == 405, err
    assert err["message"] == "create not allowed while custom resource definition is " \
                             "terminating"
    status, _, _ = await request(http, "GET", f"{WIDGETS}/before")
    assert status == 200  # still served: the CRD controller deletes it, not the server


BAD_REFERENCES = [
    ("no-uid", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}],
     "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty"),
    ("no-kind", [{"apiVersion": "v1", "name": "o", "uid": "u1"}],
     "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty"),
    ("no-name", [{"apiVersion": "v1", "kind": "ConfigMap", "uid": "u1"}],
     "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty"),
    ("no-api-version", [{"kind": "ConfigMap", "name": "o", "uid": "u1"}],
     "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty"),
    ("two-controllers", [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u1", "controller": True},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "u2",
         "controller": True}],
     "Only one reference can have Controller set to true. Found \"true\" in references for "
     "ConfigMap/a and ConfigMap/b"),
]


@pytest.mark.parametrize(("refs", "message"), [c[1:] for c in BAD_REFERENCES],
                         ids=[c[0] for c in BAD_REFERENCES])
async def test_owner_references_are_validated_on_every_write(
        http: aiohttp.ClientSession, refs: list[dict[str, Any]], message: str) -> None:
    status, err, _ = await request(http, "POST", CMS, cm("bad", ownerReferences=refs))
    assert status == 422, err
    assert message in err["message"]
    # the same on an update (merge patch) and on a custom resource
    await request(http, "POST", CMS, cm("good"))
    status, err, _ = await request(http, "PATCH", f"{CMS}/good",
                                   {"metadata": {"ownerReferences": refs}},
                                   content_type="application/merge-patch+json")
    assert status == 422, err
    assert message in err["message"]
    await install_widgets(http)
    body = widget("bad")
    body["metadata"]["ownerReferences"] = refs
    status, err, _ = await request(http, "POST", WIDGETS, body)
    assert status == 422, err
    assert message in err["message"]


async def test_valid_owner_references_are_kept(http: aiohttp.ClientSession) -> None:
    refs = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u1",
             "controller": True, "blockOwnerDeletion": True},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2"}]
    status, body, _ = await request(http, "POST", CMS, cm("owned", ownerReferences=refs))
    assert status == 201, body
    assert body["metadata"]["ownerReferences"] == refs
