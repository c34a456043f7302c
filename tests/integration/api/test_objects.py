"""Object semantics through the HTTP API: metadata, generation, status, conflicts, errors."""

from __future__ import annotations

import asyncio

import aiohttp

from setpoint.server.server import Server
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget


async def test_crd_is_established_and_served(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)  # waits until the resource is served
    status, crd, _ = await request(
        http, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
        "widgets.example.com")
    assert status == 200
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["NamesAccepted"]["status"] == "True"
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert conditions["Established"]["status"] == "True"
    assert conditions["Established"]["reason"] == "InitialNamesAccepted"
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]
    # the same object through v1beta1
    status, beta, _ = await request(
        http, "GET", "/apis/apiextensions.k8s.io/v1beta1/customresourcedefinitions/"
        "widgets.example.com")
    assert status == 200
    assert beta["apiVersion"] == "apiextensions.k8s.io/v1beta1"
    assert beta["spec"]["version"] == "v1"
    assert beta["spec"]["validation"]["openAPIV3Schema"]["type"] == "object"
    assert beta["metadata"]["resourceVersion"] == crd["metadata"]["resourceVersion"]


async def test_name_conflict_is_reported(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    clash = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": "gadgets.example.com"},
             "spec": {"group": "example.com", "scope": "Namespaced",
                      "names": {"plural": "gadgets", "kind": "Widget"},
                      "versions": [{"name": "v1", "served": True, "storage": True,
                                    "schema": {"openAPIV3Schema": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True}}}]}}
    status, _, _ = await request(http, "POST",
                                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                 clash)
    assert status == 201
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com"
    for _ in range(100):
        _, crd, _ = await request(http, "GET", path)
        conditions = {c["type"]: c for c in crd.get("status", {}).get("conditions", [])}
        if "NamesAccepted" in conditions:
            break
        await asyncio.sleep(0.01)
    assert conditions["NamesAccepted"]["status"] == "False"
    assert conditions["NamesAccepted"]["reason"] == "NameConflict"
    assert "Established" not in conditions or conditions["Established"]["status"] != "True"
    status, _, _ = await request(http, "GET", "/apis/example.com/v1/namespaces/default/gadgets")
    assert status == 404


async def test_create_sets_server_fields(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, obj, _ = await request(http, "POST", WIDGETS, widget("a", status={"phase": "X"}))
    assert status == 201, obj
    meta = obj["metadata"]
    assert meta["namespace"] == "default"
    assert len(meta["uid"]) == 36
    assert meta["uid"][14] == "4"
    assert meta["generation"] == 1
    assert meta["creationTimestamp"].endswith("Z")
    assert "status" not in obj  # the status subresource owns status
    assert obj["spec"]["color"] == "red"  # defaulted
    status, got, _ = await request(http, "GET", WIDGETS + "/a")
    assert got == obj


async def test_generate_name(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    body = widget("")
    body["metadata"] = {"generateName": "gen-"}
    status, obj, _ = await request(http, "POST", WIDGETS, body)
    assert status == 201, obj
    name = obj["metadata"]["name"]
    assert name.startswith("gen-")
    assert len(name) == 9
    assert all(c in "bcdfghjklmnpqrstvwxz2456789" for c in name[4:])


async def test_generation_status_and_no_op_writes(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, obj, _ = await request(http, "POST", WIDGETS, widget("g"))
    rv1 = obj["metadata"]["resourceVersion"]
    # a label change is metadata only
    status, obj, _ = await request(http, "PATCH", WIDGETS + "/g",
                                   {"metadata": {"labels": {"a": "b"}}},
                                   content_type="application/merge-patch+json")
    assert status == 200
    assert obj["metadata"]["generation"] == 1
    # a spec change bumps generation
    _, obj, _ = await request(http, "PATCH", WIDGETS + "/g", {"spec": {"size": 5}},
                              content_type="application/merge-patch+json")
    assert obj["metadata"]["generation"] == 2
    # the main endpoint ignores status
    _, obj, _ = await request(http, "PATCH", WIDGETS + "/g", {"status": {"phase": "Ignored"}},
                              content_type="application/merge-patch+json")
    assert "status" not in obj
    # /status ignores everything but status, and does not bump generation
    _, obj, _ = await request(http, "PATCH", WIDGETS + "/g/status",
                              {"spec": {"size": 99}, "status": {"phase": "Ready"}},
                              content_type="application/merge-patch+json")
    assert obj["status"] == {"phase": "Ready"}
    assert obj["spec"]["size"] == 5
    assert obj["metadata"]["generation"] == 2
    # a no-op write keeps the resourceVersion
    rv = obj["metadata"]["resourceVersion"]
    assert int(rv) > int(rv1)
    _, same, _ = await request(http, "PATCH", WIDGETS + "/g", {"spec": {"size": 5}},
                               content_type="application/merge-patch+json")
    assert same["metadata"]["resourceVersion"] == rv


async def test_update_needs_current_resource_version(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, obj, _ = await request(http, "POST", WIDGETS, widget("u"))
    stale = dict(obj)
    obj["spec"]["size"] = 2
    status, updated, _ = await request(http, "PUT", WIDGETS + "/u", obj)
    assert status == 200, updated
    stale["spec"] = {"size": 3}
    status, err, headers = await request(http, "PUT", WIDGETS + "/u", stale)
    assert status == 409
    assert headers["Content-Type"] == "application/json"
    assert err["reason"] == "Conflict"
    assert err["message"] == (
        'Operation cannot be fulfilled on widgets.example.com "u": the object has been '
        "modified; please apply your changes to the latest version and try again")
    del stale["metadata"]["resourceVersion"]
    status, err, _ = await request(http, "PUT", WIDGETS + "/u", stale)
    assert status == 422
    assert err["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    assert "must be specified for an update" in err["message"]


async def test_validation_errors_name_each_field(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    body = widget("bad")
    body["spec"] = {"size": -1, "color": "pink"}
    status, err, _ = await request(http, "POST", WIDGETS, body)
    assert status == 422
    assert err["reason"] == "Invalid"
    assert err["details"]["kind"] == "Widget"
    assert err["details"]["group"] == "example.com"
    fields_ = [c["field"] for c in err["details"]["causes"]]
    assert fields_ == sorted(fields_)
    assert "spec.size" in fields_
    assert "spec.color" in fields_
    assert err["message"].startswith('Widget.example.com "bad" is invalid: ')


async def test_finalizers_hold_deletion(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    body = widget("f")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await request(http, "POST", WIDGETS, body)
    status, obj, _ = await request(http, "DELETE", WIDGETS + "/f")
    assert status == 200
    assert obj["kind"] == "Widget"
    assert obj["metadata"]["deletionTimestamp"]
    assert obj["metadata"]["generation"] == 2
    # adding a finalizer while terminating is forbidden
    status, err, _ = await request(
        http, "PATCH", WIDGETS + "/f",
        {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}},
        content_type="application/merge-patch+json")
    assert status == 422, err
    # removing the last finalizer deletes the object
    status, _, _ = await request(http, "PATCH", WIDGETS + "/f",
                                 {"metadata": {"finalizers": None}},
                                 content_type="application/merge-patch+json")
    assert status == 200
    status, _, _ = await request(http, "GET", WIDGETS + "/f")
    assert status == 404


async def test_delete_without_finalizers_answers_status(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, obj, _ = await request(http, "POST", WIDGETS, widget("d"))
    status, body, _ = await request(http, "DELETE", WIDGETS + "/d",
                                    {"propagationPolicy": "Background"})
    assert status == 200
    assert body["kind"] == "Status"
    assert body["status"] == "Success"
    assert body["details"] == {"name": "d", "group": "example.com", "kind": "widgets",
                               "uid": obj["metadata"]["uid"]}
    status, err, _ = await request(http, "DELETE", WIDGETS + "/d")
    assert status == 404
    assert err["message"] == 'widgets.example.com "d" not found'


async def test_delete_preconditions(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("p"))
    status, err, _ = await request(http, "DELETE", WIDGETS + "/p",
                                   {"preconditions": {"uid": "wrong"}})
    assert status == 409
    assert "Precondition failed: UID in precondition: wrong" in err["message"]


async def test_scale_subresource(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("s", replicas=2) | {})
    await request(http, "PATCH", WIDGETS + "/s", {"spec": {"replicas": 2}},
                  content_type="application/merge-patch+json")
    status, scale, _ = await request(http, "GET", WIDGETS + "/s/scale")
    assert status == 200
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 2
    status, scale, _ = await request(http, "PATCH", WIDGETS + "/s/scale",
                                     {"spec": {"replicas": 5}},
                                     content_type="application/merge-patch+json")
    assert status == 200, scale
    assert scale["spec"]["replicas"] == 5
    _, obj, _ = await request(http, "GET", WIDGETS + "/s")
    assert obj["spec"]["replicas"] == 5
    # a custom resource takes no strategic merge patch, on /scale neither
    status, answer, _ = await request(http, "PATCH", WIDGETS + "/s/scale",
                                      {"spec": {"replicas": 6}},
                                      content_type="application/strategic-merge-patch+json")
    assert status == 415, answer
    assert answer["message"].endswith("application/json-patch+json, "
                                      "application/merge-patch+json, application/apply-patch+yaml")


async def test_dry_run_persists_nothing(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, obj, _ = await request(http, "POST", WIDGETS + "?dryRun=All", widget("dry"))
    assert status == 201
    assert obj["metadata"]["name"] == "dry"
    status, _, _ = await request(http, "GET", WIDGETS + "/dry")
    assert status == 404


async def test_bad_requests_are_clear_4xx(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    cases = [
        ("POST", WIDGETS, b"{not json", "application/json", 400),
        ("POST", WIDGETS, b"a: [", "application/yaml", 400),
        ("POST", WIDGETS, b'{"apiVersion":"example.com/v1","kind":"Gadget",'
                          b'"metadata":{"name":"x"},"spec":{"size":1}}', "application/json",
         400),
        ("POST", WIDGETS, b'{"kind":"Widget","metadata":{"name":"x"}}', "application/json",
         400),
        ("POST", WIDGETS, b'{"apiVersion":"example.com/v1","kind":"Widget",'
                          b'"metadata":{"name":"x","namespace":"other"},"spec":{"size":1}}',
         "application/json", 400),
        ("PATCH", WIDGETS + "/nope", b'{"spec":{}}', "application/strategic-merge-patch+json",
         415),
        ("PATCH", WIDGETS + "/nope", b'[{"op":"add"}]', "application/merge-patch+json", 404),
        ("GET", WIDGETS + "?labelSelector=a%20in%20(", b"", "application/json", 400),
        ("GET", WIDGETS + "?fieldSelector=spec.size%3D1", b"", "application/json", 400),
        ("GET", WIDGETS + "?watch=yes", b"", "application/json", 400),
        ("GET", "/apis/example.com/v9/widgets", b"", "application/json", 404),
        ("GET", "/no/such/path", b"", "application/json", 404),
        ("PUT", WIDGETS, b"{}", "application/json", 405),
        ("POST", WIDGETS, b"{" + b'"a":"' + b"x" * (3 * 1024 * 1024) + b'"}',
         "application/json", 413),
    ]
    for method, path, raw, content_type, code in cases:
        status, body, headers = await request(http, method, path, raw=raw,
                                              content_type=content_type)
        assert status == code, (method, path, status, body)
        assert headers["Content-Type"] == "application/json", (method, path)
        assert body["kind"] == "Status", body
        assert body["code"] == code, body


async def test_mismatched_patch_bodies_are_400(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("m"))
    status, body, _ = await request(http, "PATCH", WIDGETS + "/m", [{"op": "add"}],
                                    content_type="application/merge-patch+json")
    assert status == 400, body
    status, body, _ = await request(http, "PATCH", WIDGETS + "/m", {"spec": {"size": 2}},
                                    content_type="application/json-patch+json")
    assert status == 400, body


async def test_json_patch_test_failure_is_422(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, obj, _ = await request(http, "POST", WIDGETS, widget("t"))
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
           {"op": "add", "path": "/metadata/finalizers", "value": ["x.io/y"]}]
    status, body, _ = await request(http, "PATCH", WIDGETS + "/t", ops,
                                    content_type="application/json-patch+json")
    assert status == 422, body
    ops[0]["value"] = obj["metadata"]["resourceVersion"]
    status, body, _ = await request(http, "PATCH", WIDGETS + "/t", ops,
                                    content_type="application/json-patch+json")
    assert status == 200, body
    assert body["metadata"]["finalizers"] == ["x.io/y"]


async def test_namespace_must_exist(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, err, _ = await request(http, "POST",
                                   "/apis/example.com/v1/namespaces/nowhere/widgets",
                                   widget("n"))
    assert status == 404
    assert err["message"] == 'namespaces "nowhere" not found'


async def test_initial_namespaces_exist(http: aiohttp.ClientSession, server: Server) -> None:
    status, body, _ = await request(http, "GET", "/api/v1/namespaces")
    assert status == 200
    names = [n["metadata"]["name"] for n in body["items"]]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    assert all(n["status"]["phase"] == "Active" for n in body["items"])
