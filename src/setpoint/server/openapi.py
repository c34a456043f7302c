"""OpenAPI v3 documents: the root index and one document per group-version.

kubectl reads them before ``create``/``apply`` to choose server-side field validation (it
looks for a PATCH operation tagged with the kind's GVK and a ``fieldValidation`` parameter),
and ``kubectl explain`` reads the component schemas (tagged with an *array* of GVKs). Each
document's URL carries a hash that changes whenever the served resources change, because
kubectl caches documents by URL.
"""

from __future__ import annotations

import copy
from typing import Any

from setpoint.registry.catalog import Catalog, Served
from setpoint.registry.resources import ResourceInfo, VersionInfo

Obj = dict[str, Any]

META = "io.k8s.apimachinery.pkg.apis.meta.v1."

QUERY_PARAMS = {
    "dryRun": "When present, indicates that modifications should not be persisted.",
    "fieldManager": "fieldManager is a name associated with the actor or entity that is "
                    "making these changes.",
    "fieldValidation": "fieldValidation instructs the server on how to handle objects in the "
                       "request containing unknown or duplicate fields. Valid values are: "
                       "Ignore, Warn (the default) and Strict.",
    "pretty": "If 'true', then the output is pretty printed.",
}


def gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def root(catalog: Catalog) -> Obj:
    paths: Obj = {}
    for group, versions in catalog.groups():
        for v in versions:
            p = gv_path(group, v)
            paths[p] = {"serverRelativeURL": f"/openapi/v3/{p}?hash="
                                             f"{catalog.fingerprint(group, v)}"}
    return {"paths": paths}


def schema_name(info: ResourceInfo, version: str, kind: str | None = None) -> str:
    prefix = ".".join(reversed(info.group.split("."))) if info.group else "io.k8s.api.core"
    return f"{prefix}.{version}.{kind or info.kind}"


def _gvk(info: ResourceInfo, version: str, kind: str | None = None) -> Obj:
    return {"group": info.group, "version": version, "kind": kind or info.kind}


def _object_meta() -> Obj:
    string = {"type": "string"}
    return {
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "type": "object",
        "properties": {
            "name": {**string, "description": "Name must be unique within a namespace."},
            "generateName": {**string, "description": "An optional prefix used to generate "
                             "a unique name."},
            "namespace": {**string, "description": "The namespace of the object."},
            "uid": {**string, "description": "UID is the unique in time and space value for "
                    "this object."},
            "resourceVersion": {**string, "description": "An opaque value that represents "
                                "the internal version of this object."},
            "generation": {"type": "integer", "format": "int64",
                           "description": "A sequence number representing a specific "
                           "generation of the desired state."},
            "creationTimestamp": {**string, "format": "date-time"},
            "deletionTimestamp": {**string, "format": "date-time"},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "labels": {"type": "object", "additionalProperties": string,
                       "description": "Map of string keys and values that can be used to "
                       "organize and categorize objects."},
            "annotations": {"type": "object", "additionalProperties": string,
                            "description": "Annotations is an unstructured key value map."},
            "finalizers": {"type": "array", "items": string,
                           "description": "Must be empty before the object is deleted from "
                           "the registry."},
            "ownerReferences": {"type": "array", "items": {
                "type": "object", "required": ["apiVersion", "kind", "name", "uid"],
                "properties": {"apiVersion": string, "kind": string, "name": string,
                               "uid": string, "controller": {"type": "boolean"},
                               "blockOwnerDeletion": {"type": "boolean"}}},
                "x-kubernetes-patch-merge-key": "uid",
                "x-kubernetes-patch-strategy": "merge"},
            "managedFields": {"type": "array", "items": {"type": "object"}},
        },
    }


def _builtin_body(info: ResourceInfo) -> Obj:
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    bodies: dict[str, Obj] = {
        "ConfigMap": {"data": string_map, "binaryData": string_map,
                      "immutable": {"type": "boolean"}},
        "Secret": {"data": string_map, "stringData": string_map, "type": {"type": "string"},
                   "immutable": {"type": "boolean"}},
        "Namespace": {"spec": {"type": "object", "properties": {
            "finalizers": {"type": "array", "items": {"type": "string"}}}},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}},
        "Lease": {"spec": {"type": "object", "properties": {
            "holderIdentity": {"type": "string"},
            "leaseDurationSeconds": {"type": "integer", "format": "int32"},
            "acquireTime": {"type": "string", "format": "date-time"},
            "renewTime": {"type": "string", "format": "date-time"},
            "leaseTransitions": {"type": "integer", "format": "int32"}}}},
    }
    if info.kind == "Event":
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"type": "object", "properties": bodies.get(info.kind, {})}


def _kind_schema(served: Served, version: VersionInfo) -> Obj:
    info = served.info
    body: Obj
    if served.custom or info.kind == "CustomResourceDefinition":
        body = copy.deepcopy(version.schema) if version.schema else {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
    else:
        body = _builtin_body(info)
    props: Obj = body.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": "APIVersion defines the versioned "
                           "schema of this representation of an object."}
    props["kind"] = {"type": "string", "description": "Kind is a string value representing "
                     "the REST resource this object represents."}
    props["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{META}ObjectMeta"}],
                         "description": "Standard object's metadata."}
    body["x-kubernetes-group-version-kind"] = [_gvk(info, version.name)]
    return body


def _list_schema(served: Served, version: VersionInfo) -> Obj:
    info = served.info
    return {
        "type": "object", "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "items": {"type": "array", "items": {
                "$ref": f"#/components/schemas/{schema_name(info, version.name)}"}},
            "metadata": {"type": "object"},
        },
        "x-kubernetes-group-version-kind": [_gvk(info, version.name, info.list_kind)],
    }


def _params(*names: str) -> list[Obj]:
    return [{"name": n, "in": "query", "description": QUERY_PARAMS[n], "schema": {
        "type": "string", "uniqueItems": True}} for n in names]


def _ref(info: ResourceInfo, version: str) -> Obj:
    return {"content": {"application/json": {"schema": {
        "$ref": f"#/components/schemas/{schema_name(info, version)}"}}}}


def _paths(served: Served, version: VersionInfo) -> Obj:
    info = served.info
    base = "/" + gv_path(info.group, version.name)
    if info.namespaced:
        collection = f"{base}/namespaces/{{namespace}}/{info.resource}"
    else:
        collection = f"{base}/{info.resource}"
    item = f"{collection}/{{name}}"
    gvk = _gvk(info, version.name)
    ok = {"200": {"description": "OK", **_ref(info, version.name)}}
    patch_body = {"content": {t: {"schema": {"type": "object"}} for t in (
        "application/json-patch+json", "application/merge-patch+json",
        "application/apply-patch+yaml")}, "required": True}
    write = _params("dryRun", "fieldManager", "fieldValidation", "pretty")
    paths: Obj = {
        collection: {
            "get": {"operationId": f"list{info.kind}", "x-kubernetes-action": "list",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok},
            "post": {"operationId": f"create{info.kind}", "x-kubernetes-action": "post",
                     "x-kubernetes-group-version-kind": gvk, "parameters": write,
                     "requestBody": _ref(info, version.name), "responses": ok},
        },
        item: {
            "get": {"operationId": f"read{info.kind}", "x-kubernetes-action": "get",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok},
            "put": {"operationId": f"replace{info.kind}", "x-kubernetes-action": "put",
                    "x-kubernetes-group-version-kind": gvk, "parameters": write,
                    "requestBody": _ref(info, version.name), "responses": ok},
            "patch": {"operationId": f"patch{info.kind}", "x-kubernetes-action": "patch",
                      "x-kubernetes-group-version-kind": gvk,
                      "parameters": [*write, {"name": "force", "in": "query",
                                              "schema": {"type": "boolean"}}],
                      "requestBody": patch_body, "responses": ok},
            "delete": {"operationId": f"delete{info.kind}", "x-kubernetes-action": "delete",
                       "x-kubernetes-group-version-kind": gvk, "responses": ok},
            "parameters": [{"name": "name", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
        },
    }
    if version.status:
        paths[f"{item}/status"] = {
            "get": {"operationId": f"read{info.kind}Status", "x-kubernetes-action": "get",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok},
            "patch": {"operationId": f"patch{info.kind}Status",
                      "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
                      "parameters": write, "requestBody": patch_body, "responses": ok},
        }
    return paths


def group_version(catalog: Catalog, group: str, version: str) -> Obj | None:
    served = catalog.resources_in(group, version)
    if not served:
        return None
    schemas: Obj = {f"{META}ObjectMeta": _object_meta()}
    paths: Obj = {}
    for s in served:
        v = s.info.version(version)
        if v is None:
            continue
        schemas[schema_name(s.info, version)] = _kind_schema(s, v)
        schemas[schema_name(s.info, version, s.info.list_kind)] = _list_schema(s, v)
        paths.update(_paths(s, v))
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths, "components": {"schemas": schemas}}
