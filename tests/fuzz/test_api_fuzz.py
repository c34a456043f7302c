"""Property-based fuzzing of the whole API over HTTP: malformed input is always a 4xx Status.

A real ``setpoint serve`` process is started once for the module. Hypothesis sends it
requests built from the shapes real clients use — every verb, the paths of every served
kind (built-in and custom, collections, objects, subresources), the query parameters the
API reads, and bodies that start from valid objects and then get fields replaced by values of
the wrong type, junk, YAML, or bytes — and checks for each:

* the answer is never a 5xx (503 with ``Retry-After`` aside, which means "try again");
* every error answer is a ``metav1.Status`` whose ``code`` matches the HTTP status;
* the server is healthy afterwards (``/readyz`` is 200 and a plain write succeeds).

Watches are asked with ``timeoutSeconds=1`` so that none holds the fuzzer.
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import json
import os
import ssl
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.client import config as client_config
from setpoint.client import transport
from setpoint.pki import certs
from setpoint.pki import csr as pkicsr
from tests.conftest import ServeProcess, start_serve
from tests.integration.api.helpers import CRD_V1

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("SETPOINT_FUZZ_EXAMPLES", "400"))

KINDS = [  # (collection path under a namespace or cluster-wide, a valid object)
    ("/api/v1/namespaces/default/configmaps",
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
      "data": {"a": "b"}, "binaryData": {"x": "eA=="}}),
    ("/api/v1/namespaces/default/secrets",
     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
      "stringData": {"a": "b"}, "type": "Opaque"}),
    ("/api/v1/namespaces",
     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
    ("/api/v1/namespaces/default/events",
     {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
      "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R", "message": "m"}),
    ("/apis/events.k8s.io/v1/namespaces/default/events",
     {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
      "regarding": {"kind": "Pod", "name": "p"}, "note": "n", "eventTime": None}),
    ("/apis/coordination.k8s.io/v1/namespaces/default/leases",
     {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
      "spec": {"holderIdentity": "me", "leaseDurationSeconds": 10}}),
    ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
     {**CRD_V1, "metadata": {"name": "gadgets.example.com"},
      "spec": {**CRD_V1["spec"], "names": {"plural": "gadgets", "singular": "gadget",
                                           "kind": "Gadget"}}}),
    ("/apis/example.com/v1/namespaces/default/widgets",
     {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
      "spec": {"size": 1, "replicas": 2}}),
    ("/api/v1/namespaces/default/pods",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"containers": [{"name": "a", "image": "busybox", "ports": [
          {"containerPort": 80}], "env": [{"name": "A", "value": "b"}]}],
               "nodeName": "n1"}}),
    ("/api/v1/nodes",
     {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
      "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
    ("/api/v1/namespaces/default/services",
     {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
      "spec": {"type": "NodePort", "ports": [{"port": 80}], "selector": {"app": "a"}}}),
    ("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
     {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es"},
      "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]}),
    ("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
     {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
      "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "x"}},
               "unhealthyPodEvictionPolicy": "IfHealthyBudget"},
      "status": {"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 0,
                 "expectedPods": 1, "disruptedPods": {"p": "2026-01-01T00:00:00Z"}}}),
    ("/apis/certificates.k8s.io/v1/certificatesigningrequests",
     {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
      "metadata": {"name": "csr"},
      "spec": {"request": base64.b64encode(pkicsr.new_request("fuzz", ("a.example",))[0])
               .decode(), "signerName": "setpoint.dev/serving",
               "usages": ["digital signature", "server auth"], "expirationSeconds": 600,
               "username": "someone-else", "groups": ["system:masters"]},
      "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "r"}],
                 "certificate": base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAAAA\n"
                                                 b"-----END CERTIFICATE-----\n").decode()}}),
    ("/apis/certificates.k8s.io/v1beta1/clustertrustbundles",
     {"apiVersion": "certificates.k8s.io/v1beta1", "kind": "ClusterTrustBundle",
      "metadata": {"name": "setpoint.dev:serving:fuzz"},
      "spec": {"signerName": "setpoint.dev/serving",
               "trustBundle": certs.new_ca("fuzz", now=dt.datetime.now(dt.UTC))
               .cert_pem.decode()}}),
]
SUBRESOURCES = ["", "", "", "status", "scale", "finalize", "log", "x", "token", "binding",
                "eviction"]
CONTENT_TYPES = ["application/json", "application/json", "application/yaml",
                 "application/merge-patch+json", "application/json-patch+json",
                 "application/strategic-merge-patch+json", "application/apply-patch+yaml",
                 "application/vnd.kubernetes.protobuf", "text/plain",
                 "application/x-www-form-urlencoded", "", "application/json; charset=utf-8"]
QUERY_KEYS = ["limit", "continue", "resourceVersion", "resourceVersionMatch", "labelSelector",
              "fieldSelector", "timeoutSeconds", "dryRun", "fieldManager", "fieldValidation",
              "propagationPolicy", "gracePeriodSeconds", "orphanDependents", "force",
              "allowWatchBookmarks", "sendInitialEvents", "includeObject", "pretty", "watch"]

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                         st.floats(allow_nan=False), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
query_values = st.one_of(st.text(max_size=12), st.integers().map(str),
                         st.sampled_from(["1e400", "-1", "0", "true", "All", "Exact", "Strict",
                                          "Orphan", "a=b", "a in (", "metadata.name=x",
                                          "eyJydiI6LTF9", "9" * 30, " 1", "+1"]))
#: resourceVersions the server has reached or cannot parse: a future one is answered after a
#: bounded wait (504, as Kubernetes), which test_future_resource_versions covers once
resource_versions = st.one_of(st.sampled_from(["", "0", "1", "-1", " 1", "+1", "1e3", "x",
                                               "9" * 30, "01", "0x1"]), st.text(max_size=6))


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: _replace(obj[head], rest, value)}
    copy = list(obj)
    copy[head] = _replace(copy[head], rest, value)
    return copy


@st.composite
def mutated(draw: st.DrawFn, template: Any) -> Any:
    obj = template
    for _ in range(draw(st.integers(0, 3))):
        paths = list(_paths(obj))
        obj = _replace(obj, draw(st.sampled_from(paths)), draw(json_values))
    return obj


PATCH_BODIES = {  # a patch of each shape, per kind: which top-level fields it touches
    "application/merge-patch+json": ["metadata", "data", "spec", "status", "type", "rules"],
    "application/strategic-merge-patch+json": ["metadata", "data", "spec", "involvedObject"],
    "application/apply-patch+yaml": ["metadata", "data", "spec"],
}
SUBRESOURCES_OF = {"namespaces": ["status", "finalize"], "widgets": ["status", "scale"],
                   "customresourcedefinitions": ["status"],
                   "pods": ["status", "binding", "eviction"], "nodes": ["status"],
                   "services": ["status"], "poddisruptionbudgets": ["status"],
                   "certificatesigningrequests": ["status", "approval"]}


@st.composite
def json_patch(draw: st.DrawFn, template: Any) -> Any:
    paths = ["/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)
             for path in _paths(template)]
    ops = []
    for _ in range(draw(st.integers(0, 3))):
        op: dict[str, Any] = {"op": draw(st.sampled_from(["add", "remove", "replace", "move",
                                                          "copy", "test", "bogus"])),
                              "path": draw(st.one_of(st.sampled_from(paths),
                                                     st.text(max_size=10)))}
        if draw(st.booleans()):
            op["value"] = draw(json_values)
        if op["op"] in ("move", "copy"):
            op["from"] = draw(st.sampled_from(paths))
        ops.append(draw(st.one_of(st.just(op), json_values)))
    return ops


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes | None, str]:
    """One request of a random verb, shaped as a client would send it, then damaged."""
    collection, template = draw(st.sampled_from(KINDS))
    resource = collection.rsplit("/", 1)[1]
    name = template["metadata"]["name"]
    verb = draw(st.sampled_from(["create", "create", "update", "patch", "patch", "patch",
                                 "get", "list", "delete", "junk"]))
    query = draw(st.dictionaries(st.sampled_from(QUERY_KEYS), query_values, max_size=3))
    if "resourceVersion" in query:
        query["resourceVersion"] = draw(resource_versions)
    if "watch" in query or "timeoutSeconds" in query:
        query["timeoutSeconds"] = "1"
    json_type = draw(st.sampled_from(["application/json", "application/json",
                                      "application/yaml", "application/json; charset=utf-8"]))
    body: Any = None
    if verb == "create":
        obj = {**template, "metadata": {**template["metadata"],
                                        "name": draw(st.from_regex(r"[a-z][a-z0-9]{0,8}",
                                                                   fullmatch=True))}}
        return "POST", collection, query, _encode(draw(mutated(obj)), json_type), json_type
    if verb == "update":
        path = f"{collection}/{name}"
        subs = SUBRESOURCES_OF.get(resource, [])
        if subs and draw(st.booleans()):
            path += "/" + draw(st.sampled_from(subs))
        return "PUT", path, query, _encode(draw(mutated(template)), json_type), json_type
    if verb == "patch":
        path = f"{collection}/{name}"
        subs = SUBRESOURCES_OF.get(resource, [])
        if subs and draw(st.booleans()):
            path += "/" + draw(st.sampled_from(subs))
        patch_type = draw(st.sampled_from(["application/merge-patch+json",
                                           "application/json-patch+json",
                                           "application/strategic-merge-patch+json",
                                           "application/apply-patch+yaml"]))
        if patch_type == "application/json-patch+json":
            body = draw(json_patch(template))
        else:
            field = draw(st.sampled_from(PATCH_BODIES[patch_type]))
            body = draw(mutated({field: template.get(field, {"a": "b"})}))
            if patch_type == "application/apply-patch+yaml":
                query["fieldManager"] = draw(st.sampled_from(["fuzz", "", "x" * 200]))
                if isinstance(body, dict):
                    body = {"apiVersion": template["apiVersion"], "kind": template["kind"],
                            "metadata": {"name": name}, **body}
        return "PATCH", path, query, _encode(body, "application/json"), patch_type
    if verb == "get":
        return "GET", f"{collection}/{draw(st.sampled_from([name, 'missing']))}", query, \
            None, ""
    if verb == "list":
        return "GET", collection, query, None, ""
    if verb == "delete":
        query["dryRun"] = "All"
        options = draw(mutated({"kind": "DeleteOptions", "apiVersion": "v1",
                                "propagationPolicy": "Background",
                                "preconditions": {"uid": "x", "resourceVersion": "1"},
                                "gracePeriodSeconds": 0}))
        return "DELETE", f"{collection}/{name}", query, _encode(options, "application/json"), \
            "application/json"
    # junk: anything at all, anywhere
    sub = draw(st.sampled_from(["", "status", "scale", "finalize", "log", "token", "x",
                                "binding", "eviction"]))
    path = draw(st.sampled_from([collection, f"{collection}/{name}",
                                 f"{collection}/{name}/{sub}", "/api", "/apis/x", "/api/v1/x",
                                 "/openapi/v2", "/version", "/apis/example.com/v9"]))
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]))
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    raw = draw(st.one_of(st.binary(max_size=200), st.sampled_from([
        b"a: &a [1]\nb: [*a, *a]", b"- op: add\n  path: /x",
        b'[{"op":"test","path":"/metadata","value":1}]', b""])))
    return method, path, query, raw or None, content_type


def _encode(body: Any, content_type: str) -> bytes:
    if content_type.startswith("application/yaml"):
        return yaml.safe_dump(body).encode()
    return json.dumps(body, allow_nan=True).encode()


class Client:
    def __init__(self, serve: ServeProcess) -> None:
        cfg = client_config.load_kubeconfig(serve.kubeconfig)
        parsed = urllib.parse.urlsplit(serve.url)
        self._host, self._port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self._tls: ssl.SSLContext | None = transport.ssl_context(cfg) \
            if parsed.scheme == "https" else None
        self._conn = self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        if self._tls is not None:
            return http.client.HTTPSConnection(self._host, self._port, context=self._tls,
                                               timeout=30)
        return http.client.HTTPConnection(self._host, self._port, timeout=30)

    def send(self, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        for attempt in range(2):
            try:
                self._conn.request(method, path, body=body, headers=headers or {})
                response = self._conn.getresponse()
                return response.status, dict(response.getheaders()), response.read()
            except (ConnectionError, http.client.HTTPException):
                self._conn.close()
                self._conn = self._connect()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    serve = start_serve(tmp_path_factory.mktemp("fuzz") / "data")
    client = Client(serve)
    status, _, _ = client.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               json.dumps(CRD_V1).encode(),
                               {"Content-Type": "application/json"})
    assert status == 201
    for _ in range(200):
        if client.send("GET", "/apis/example.com/v1/namespaces/default/widgets")[0] == 200:
            break
    for collection, template in KINDS:  # every verb has an object to work on
        if template["kind"] != "CustomResourceDefinition":
            status, _, body = client.send("POST", collection, json.dumps(template).encode(),
                                          {"Content-Type": "application/json"})
            assert status == 201, body
    client.close()
    yield serve
    serve.stop()


@pytest.fixture(scope="module")
def client(server: ServeProcess) -> Iterator[Client]:
    c = Client(server)
    yield c
    c.close()


def check_answer(method: str, path: str, status: int, headers: dict[str, str],
                 body: bytes) -> None:
    what = f"{method} {path} -> {status}: {body[:300]!r}"
    assert status < 500 or (status in (503, 504) and "Retry-After" in headers), what
    if status >= 400 and method != "HEAD":
        ctype = headers.get("Content-Type", "")
        assert ctype.startswith("application/json"), what
        doc = json.loads(body)
        assert doc.get("kind") == "Status", what
        assert doc.get("code") == status, what
        assert doc.get("status") == "Failure", what


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(requests())
def test_malformed_requests_get_a_4xx_status(client: Client,
                                            req: tuple[str, str, dict[str, str], bytes | None,
                                                       str]) -> None:
    method, path, query, body, content_type = req
    target = path + ("?" + urllib.parse.urlencode(query) if query else "")
    headers = {"Content-Type": content_type} if content_type else {}
    status, response_headers, response = client.send(method, target, body, headers)
    check_answer(method, target, status, response_headers, response)


@settings(max_examples=EXAMPLES // 4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(path=st.text(alphabet=st.characters(codec="ascii", exclude_characters="?#"),
                    max_size=60).map(lambda p: "/" + urllib.parse.quote(p, safe="/%")),
       method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]))
def test_arbitrary_paths_get_a_4xx_status(client: Client, path: str, method: str) -> None:
    status, headers, body = client.send(method, path)
    check_answer(method, path, status, headers, body)


def test_future_resource_versions_time_out_with_a_status(client: Client) -> None:
    status, headers, body = client.send(
        "GET", "/api/v1/namespaces/default/configmaps?resourceVersion=" + "9" * 12)
    assert status == 504
    assert headers.get("Retry-After") == "1"
    assert json.loads(body)["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_the_server_is_healthy_after_the_fuzzing(client: Client, server: ServeProcess) -> None:
    status, _, body = client.send("GET", "/readyz")
    assert (status, body) == (200, b"ok")
    status, _, body = client.send(
        "POST", "/api/v1/namespaces/default/configmaps",
        json.dumps({"metadata": {"generateName": "after-"}, "data": {"k": "v"}}).encode(),
        {"Content-Type": "application/json"})
    assert status == 201, body
    assert server.process.poll() is None
    assert "Traceback" not in Path(server.log).read_text()
