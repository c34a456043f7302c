#!/usr/bin/env python3
"""Extract the OpenAPI definitions of the built-in kinds setpoint serves from Kubernetes'
published spec into the data file the server ships.

    python scripts/extract_openapi.py SWAGGER_JSON --kubernetes-version v1.32.0 \\
        [--source TEXT] [--output PATH]

SWAGGER_JSON is Kubernetes' ``api/openapi-spec/swagger.json`` of the release named by
``--kubernetes-version`` (the minor must match the ``/version`` setpoint reports). The output
(by default ``src/setpoint/server/openapi/kubernetes.json``) holds the definitions listed in
:data:`KINDS` and :data:`SHARED`, their list kinds, and every definition they reference, as
published (OpenAPI v2 form, ``#/definitions/`` references), with the release, the source and
its SHA-256, and the license of the material (Apache-2.0, the Kubernetes Authors).

To serve the schema of another built-in kind, add its definition name to :data:`KINDS` and
run the script again; the server finds definitions by their ``x-kubernetes-group-version-kind``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: the kinds whose schemas the server publishes (their ``...List`` kinds come along)
KINDS = (
    "io.k8s.api.core.v1.ConfigMap",
    "io.k8s.api.core.v1.Event",
    "io.k8s.api.core.v1.Namespace",
    "io.k8s.api.core.v1.Secret",
    "io.k8s.api.coordination.v1.Lease",
    "io.k8s.api.events.v1.Event",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "io.k8s.api.core.v1.ServiceAccount",
    "io.k8s.api.rbac.v1.ClusterRole",
    "io.k8s.api.rbac.v1.ClusterRoleBinding",
    "io.k8s.api.rbac.v1.Role",
    "io.k8s.api.rbac.v1.RoleBinding",
    "io.k8s.api.authentication.v1.SelfSubjectReview",
    "io.k8s.api.authentication.v1.TokenRequest",
    "io.k8s.api.authentication.v1.TokenReview",
    "io.k8s.api.authorization.v1.LocalSubjectAccessReview",
    "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
    "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
    "io.k8s.api.authorization.v1.SubjectAccessReview",
    "io.k8s.api.core.v1.Pod",
    "io.k8s.api.core.v1.Binding",
    "io.k8s.api.policy.v1.Eviction",
    "io.k8s.api.core.v1.Node",
    "io.k8s.api.core.v1.Service",
    "io.k8s.api.core.v1.Endpoints",
    "io.k8s.api.discovery.v1.EndpointSlice",
    "io.k8s.api.apps.v1.ReplicaSet",
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.batch.v1.Job",
    "io.k8s.api.batch.v1.CronJob",
    "io.k8s.api.apps.v1.DaemonSet",
    "io.k8s.api.apps.v1.StatefulSet",
    "io.k8s.api.apps.v1.ControllerRevision",
    "io.k8s.api.policy.v1.PodDisruptionBudget",
    "io.k8s.api.certificates.v1.CertificateSigningRequest",
)

#: definitions the operations refer to (responses, request bodies) and the custom resources'
#: schemas use (metadata)
SHARED = (
    "io.k8s.api.autoscaling.v1.Scale",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
)

#: the operations whose query parameters are copied (those of ConfigMaps, which every
#: served resource shares), by ``x-kubernetes-action``
OPERATIONS = {
    "list": ("/api/v1/namespaces/{namespace}/configmaps", "get"),
    "post": ("/api/v1/namespaces/{namespace}/configmaps", "post"),
    "deletecollection": ("/api/v1/namespaces/{namespace}/configmaps", "delete"),
    "get": ("/api/v1/namespaces/{namespace}/configmaps/{name}", "get"),
    "put": ("/api/v1/namespaces/{namespace}/configmaps/{name}", "put"),
    "patch": ("/api/v1/namespaces/{namespace}/configmaps/{name}", "patch"),
    "delete": ("/api/v1/namespaces/{namespace}/configmaps/{name}", "delete"),
}
#: parameters setpoint does not implement, left out of what it publishes
UNSUPPORTED_PARAMETERS = frozenset({"ignoreStoreReadErrorWithClusterBreakingPotential"})

OUTPUT = Path(__file__).resolve().parents[1] / "src/setpoint/server/openapi/kubernetes.json"
REF_PREFIX = "#/definitions/"


def subschemas(schema: Any) -> Iterator[Any]:
    """The schemas directly inside a schema (not the names in ``properties``)."""
    if not isinstance(schema, dict):
        return
    for key in ("properties", "patternProperties", "definitions"):
        members = schema.get(key)
        if isinstance(members, dict):
            yield from members.values()
    for key in ("items", "additionalProperties", "not", "additionalItems"):
        value = schema.get(key)
        if isinstance(value, list):
            yield from value
        elif isinstance(value, dict):
            yield value
    for key in ("allOf", "anyOf", "oneOf"):
        value = schema.get(key)
        if isinstance(value, list):
            yield from value


def references(schema: Any) -> Iterator[str]:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str):
        if not ref.startswith(REF_PREFIX):
            raise SystemExit(f"unexpected reference {ref!r}")
        yield ref[len(REF_PREFIX):]
    for sub in subschemas(schema):
        yield from references(sub)


def closure(definitions: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in found:
            continue
        if name not in definitions:
            raise SystemExit(f"{name} is not defined in the source")
        found[name] = definitions[name]
        pending.extend(references(found[name]))
    return dict(sorted(found.items()))


def query_parameters(spec: dict[str, Any]) -> dict[str, list[Any]]:
    """Per action, the query parameters of :data:`OPERATIONS`, references resolved."""
    shared = spec.get("parameters") or {}

    def resolve(param: Any) -> Any:
        target = param.get("$ref", "") if isinstance(param, dict) else ""
        if target.startswith("#/parameters/"):
            return shared[target[len("#/parameters/"):]]
        return param

    found: dict[str, list[Any]] = {}
    for action, (path, method) in OPERATIONS.items():
        item = spec["paths"][path]
        params = [resolve(p) for p in [*item[method].get("parameters", []),
                                        *item.get("parameters", [])]]
        found[action] = sorted((p for p in params if p.get("in") == "query"
                                and p.get("name") not in UNSUPPORTED_PARAMETERS),
                               key=lambda p: str(p.get("name")))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("swagger", type=Path, help="Kubernetes' api/openapi-spec/swagger.json")
    parser.add_argument("--kubernetes-version", required=True,
                        help="the release the spec is from, e.g. v1.32.0")
    parser.add_argument("--source", default="kubernetes/kubernetes api/openapi-spec/swagger.json",
                        help="where the spec was taken from (recorded in the output)")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)

    raw = args.swagger.read_bytes()
    spec = json.loads(raw)
    definitions = spec.get("definitions")
    if spec.get("swagger") != "2.0" or not isinstance(definitions, dict):
        raise SystemExit(f"{args.swagger} is not a Swagger 2.0 document with definitions")
    roots = list(KINDS) + [name + "List" for name in KINDS if name + "List" in definitions]
    roots += SHARED
    document = {
        "kubernetesVersion": args.kubernetes_version,
        "source": args.source,
        "sourceSha256": hashlib.sha256(raw).hexdigest(),
        "copyright": "The Kubernetes Authors",
        "license": "Apache-2.0 (https://www.apache.org/licenses/LICENSE-2.0)",
        "generatedBy": "scripts/extract_openapi.py",
        "definitions": closure(definitions, roots),
        "queryParameters": query_parameters(spec),
    }
    text = json.dumps(document, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    args.output.write_text(text, encoding="utf-8")
    print(f"{len(document['definitions'])} definitions, {len(text)} bytes -> {args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
