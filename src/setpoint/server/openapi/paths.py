"""The operations of one served resource version, as OpenAPI v2 path items, and their v3 form.

Each operation carries what kubectl looks for: ``x-kubernetes-action`` and an
``x-kubernetes-group-version-kind`` *object* (explain finds a resource's kind through it), the
``fieldValidation`` query parameter on PATCH (kubectl then validates server-side), and the
patch types the server accepts in ``consumes`` (v2) or the request body's content (v3):
kubectl's client-side ``apply`` sends a strategic merge patch only when it is listed, so it is
listed exactly for the kinds the server applies it to.

Query parameters and their descriptions are Kubernetes' own (from the shipped data, see
:mod:`~setpoint.server.openapi.builtins`); in v2 operations refer to them in the document's
``parameters`` (``#/parameters/KEY``, as Kubernetes does; kubectl resolves those), in v3 they
are inline. Responses and bodies refer to definitions by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.server.openapi import builtins, schemas

Obj = dict[str, Any]

JSON = "application/json"
YAML = "application/yaml"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

NAMESPACE_PARAM: Obj = {
    "description": "object name and auth scope, such as for teams and projects",
    "in": "path", "name": "namespace", "required": True, "type": "string",
    "uniqueItems": True,
}
UNAUTHORIZED: Obj = {"description": "Unauthorized"}
PARAMETERS_PREFIX = "#/parameters/"


@dataclass(frozen=True, slots=True)
class Target:
    """What the operations of one resource version are about."""

    info: ResourceInfo
    version: VersionInfo
    kind_definition: str
    list_definition: str
    strategic: bool  # the server accepts strategic merge patches for this resource


def _pascal(text: str) -> str:
    parts = text.translate(_SEPARATORS).split("\0")
    return "".join(part[:1].upper() + part[1:] for part in parts if part)


_SEPARATORS = str.maketrans(".-_/", "\0\0\0\0")


def group_tag(group: str) -> str:
    """Kubernetes' operation-id spelling of a group: ``core``, ``apiextensions``, ``exampleCom``."""
    if not group:
        return "core"
    if group.endswith(".k8s.io"):
        group = group[: -len(".k8s.io")]
    name = _pascal(group)
    return name[:1].lower() + name[1:]


def gvk(info: ResourceInfo, version: str, kind: str | None = None) -> Obj:
    return {"group": info.group, "kind": kind or info.kind, "version": version}


def _body(schema: Obj, *, required: bool = True) -> Obj:
    param: Obj = {"in": "body", "name": "body", "schema": schema}
    if required:
        param["required"] = True
    return param


def _ok(schema: Obj, *codes: tuple[str, str]) -> Obj:
    responses: Obj = {"200": {"description": "OK", "schema": schema}}
    for code, text in codes:
        responses[code] = {"description": text, "schema": schema}
    responses["401"] = UNAUTHORIZED
    return responses


def path_items(target: Target, params: builtins.Definitions) -> Obj:
    """The v2 path items of one resource version: collection, item and subresources."""
    info, version = target.info, target.version.name
    base = f"/api/{version}" if not info.group else f"/apis/{info.group}/{version}"
    scope = "Namespaced" if info.namespaced else ""
    collection = (f"{base}/namespaces/{{namespace}}/{info.resource}" if info.namespaced
                  else f"{base}/{info.resource}")
    item = f"{collection}/{{name}}"
    tag = f"{group_tag(info.group)}_{version}"
    gv = _pascal(group_tag(info.group)) + _pascal(version)
    kind_ref = schemas.ref(target.kind_definition)
    list_ref = schemas.ref(target.list_definition)
    status_ref = schemas.ref(builtins.STATUS)
    the_kind = gvk(info, version)
    verbs = set(info.verbs)
    query = params.query_parameters

    def op(action: str, op_id: str, description: str, responses: Obj, *, body: Obj | None = None,
           consumes: list[str] | None = None, kind: Obj | None = None,
           query_action: str | None = None) -> Obj:
        parameters = [*([body] if body else []),
                      *({"$ref": PARAMETERS_PREFIX + key}
                        for key in query.get(query_action or action, []))]
        operation: Obj = {
            "consumes": consumes or [JSON, YAML],
            "description": description,
            "operationId": op_id,
            "produces": [JSON, YAML],
            "responses": responses,
            "schemes": ["https"],
            "tags": [tag],
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": kind or the_kind,
        }
        if parameters:
            operation["parameters"] = parameters
        return operation

    patch_types = [JSON_PATCH, MERGE_PATCH, *([STRATEGIC_PATCH] if target.strategic else []),
                   APPLY_PATCH]
    name_param: Obj = {"description": f"name of the {info.kind}", "in": "path", "name": "name",
                       "required": True, "type": "string", "uniqueItems": True}
    scope_params = [NAMESPACE_PARAM] if info.namespaced else []
    kind_name = f"{scope}{info.kind}"

    items: Obj = {}
    listing: Obj = {"parameters": list(scope_params)}
    if "list" in verbs:
        listing["get"] = op("list", f"list{gv}{kind_name}",
                            f"list or watch objects of kind {info.kind}", _ok(list_ref))
    if "create" in verbs:
        listing["post"] = op("post", f"create{gv}{kind_name}", f"create {_article(info.kind)}",
                             _ok(kind_ref, ("201", "Created"), ("202", "Accepted")),
                             body=_body(kind_ref))
    if "deletecollection" in verbs:
        listing["delete"] = op("deletecollection", f"deleteCollection{gv}{kind_name}",
                               f"delete collection of {info.kind}", _ok(status_ref),
                               body=_body(schemas.ref(builtins.DELETE_OPTIONS), required=False))
    items[collection] = listing
    if info.namespaced and "list" in verbs:
        items[f"{base}/{info.resource}"] = {"get": op(
            "list", f"list{gv}{info.kind}ForAllNamespaces",
            f"list or watch objects of kind {info.kind}", _ok(list_ref))}

    one: Obj = {"parameters": [name_param, *scope_params]}
    if "get" in verbs:
        one["get"] = op("get", f"read{gv}{kind_name}", f"read the specified {info.kind}",
                        _ok(kind_ref))
    if "update" in verbs:
        one["put"] = op("put", f"replace{gv}{kind_name}", f"replace the specified {info.kind}",
                        _ok(kind_ref, ("201", "Created")), body=_body(kind_ref))
    if "patch" in verbs:
        one["patch"] = op("patch", f"patch{gv}{kind_name}",
                          f"partially update the specified {info.kind}",
                          _ok(kind_ref, ("201", "Created")),
                          body=_body(schemas.ref(builtins.PATCH)), consumes=patch_types)
    if "delete" in verbs:
        one["delete"] = op("delete", f"delete{gv}{kind_name}", f"delete {_article(info.kind)}",
                           _ok(status_ref, ("202", "Accepted")),
                           body=_body(schemas.ref(builtins.DELETE_OPTIONS), required=False))
    items[item] = one

    subresources: list[tuple[str, str, Obj, Obj | None]] = []
    if target.version.status:
        subresources.append(("status", "Status", kind_ref, None))
    if target.version.scale is not None:
        subresources.append(("scale", "Scale", schemas.ref(builtins.SCALE),
                             {"group": "autoscaling", "kind": "Scale", "version": "v1"}))
    for sub, suffix, sub_ref, sub_kind in subresources:
        named = (sub_kind or the_kind)["kind"]
        items[f"{item}/{sub}"] = {
            "parameters": [{**name_param, "description": f"name of the {named}"}, *scope_params],
            "get": op("get", f"read{gv}{kind_name}{suffix}",
                      f"read {sub} of the specified {info.kind}", _ok(sub_ref), kind=sub_kind),
            "put": op("put", f"replace{gv}{kind_name}{suffix}",
                      f"replace {sub} of the specified {info.kind}",
                      _ok(sub_ref, ("201", "Created")), body=_body(sub_ref), kind=sub_kind),
            "patch": op("patch", f"patch{gv}{kind_name}{suffix}",
                        f"partially update {sub} of the specified {info.kind}",
                        _ok(sub_ref, ("201", "Created")), body=_body(schemas.ref(builtins.PATCH)),
                        consumes=patch_types, kind=sub_kind),
        }
    for extra in target.info.extra_subresources:
        sub = extra.name
        sub_ref = kind_ref if extra.kind is None else {"type": "object"}
        sub_gvk = None if extra.kind is None else {
            "group": extra.group or "", "kind": extra.kind, "version": extra.version or "v1"}
        entry: Obj = {"parameters": [name_param, *scope_params]}
        if "update" in extra.verbs:
            entry["put"] = op("put", f"replace{gv}{kind_name}{_pascal(sub)}",
                              f"replace {sub} of the specified {info.kind}",
                              _ok(sub_ref, ("201", "Created")), body=_body(sub_ref),
                              kind=sub_gvk)
        if "create" in extra.verbs:
            entry["post"] = op("post", f"create{gv}{kind_name}{_pascal(sub)}",
                               f"create {sub} of {_article(info.kind)}",
                               _ok(sub_ref, ("201", "Created"), ("202", "Accepted")),
                               body=_body(sub_ref), kind=sub_gvk)
        if "get" in extra.verbs:
            entry["get"] = op("get", f"read{gv}{kind_name}{_pascal(sub)}",
                              f"read {sub} of the specified {info.kind}", _ok(sub_ref),
                              kind=sub_gvk)
        items[f"{item}/{sub}"] = entry
    return items


def _article(kind: str) -> str:
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


# --- v3 ----------------------------------------------------------------------------------------


def _parameter_v3(param: Obj) -> Obj:
    out: Obj = {key: param[key] for key in ("name", "in", "description", "required")
                if key in param}
    schema = {key: param[key] for key in ("type", "format", "uniqueItems", "items")
              if key in param}
    out["schema"] = schema
    return out


def _operation_v3(operation: Obj, shared: Mapping[str, Obj]) -> Obj:
    consumes = operation.get("consumes") or [JSON]
    produces = operation.get("produces") or [JSON]
    out: Obj = {key: value for key, value in operation.items()
                if key not in ("consumes", "produces", "schemes", "parameters", "responses")}
    params = []
    for param in operation.get("parameters", []):
        target = param.get("$ref", "")
        if target.startswith(PARAMETERS_PREFIX):
            param = shared[target[len(PARAMETERS_PREFIX):]]
        if param.get("in") == "body":
            body: Obj = {"content": {mime: {"schema": schemas.to_v3(param["schema"])}
                                     for mime in consumes}}
            if param.get("required"):
                body["required"] = True
            out["requestBody"] = body
        else:
            params.append(_parameter_v3(param))
    if params:
        out["parameters"] = params
    responses: Obj = {}
    for code, response in operation.get("responses", {}).items():
        converted: Obj = {"description": response.get("description", "")}
        if "schema" in response:
            converted["content"] = {mime: {"schema": schemas.to_v3(response["schema"])}
                                    for mime in produces}
        responses[code] = converted
    out["responses"] = responses
    return out


def to_v3(items: Obj, shared: Mapping[str, Obj]) -> Obj:
    """The OpenAPI v3 form of v2 path items, shared parameters (``#/parameters/``) inlined."""
    out: Obj = {}
    for path, item in items.items():
        converted: Obj = {}
        for key, value in item.items():
            if key == "parameters":
                if value:
                    converted[key] = [_parameter_v3(p) for p in value]
            else:
                converted[key] = _operation_v3(value, shared)
        out[path] = converted
    return out
