"""The ``/scale`` subresource: an ``autoscaling/v1`` Scale seen through a custom resource.

A CRD version's ``subresources.scale`` names where replicas live in its objects
(:class:`~setpoint.registry.resources.ScaleSpec`). :func:`scale_of` reads the Scale of an
object, :func:`with_replicas` writes the desired replicas back into a copy of it; the store
wraps both in its retrying write (:meth:`~setpoint.registry.store.Store.update_scale`).

Invariants: pure (objects in, objects out, nothing mutated); a path that names nothing, or
a value of the wrong type, reads as 0 replicas (as Kubernetes reports it) and never raises.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import fields, jsonpath
from setpoint.apimachinery.fields import FieldError
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry.resources import ScaleSpec

Obj = dict[str, Any]

_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")


def scale_of(obj: Obj, spec: ScaleSpec) -> Obj:
    """The Scale of ``obj``."""
    meta = obj.get("metadata") or {}
    replicas = _first(spec.spec_replicas_path, obj)
    status_replicas = _first(spec.status_replicas_path, obj)
    scale: Obj = {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in _META if k in meta},
        "spec": {"replicas": replicas if _is_int(replicas) else 0},
        "status": {"replicas": status_replicas if _is_int(status_replicas) else 0},
    }
    if spec.label_selector_path:
        selector = _first(spec.label_selector_path, obj)
        if isinstance(selector, str):
            scale["status"]["selector"] = selector
    return scale


def replicas_errors(scale: Any) -> tuple[int, list[FieldError]]:
    """The desired replicas of a Scale sent by a client, or why they are not acceptable."""
    spec = scale.get("spec") if isinstance(scale, dict) else None
    replicas = spec.get("replicas") if isinstance(spec, dict) else None
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 0:
        return replicas, []
    return 0, [fields.invalid("spec.replicas", replicas, "must be greater than or equal to 0")]


def resource_version(scale: Any) -> str:
    """The resourceVersion a client's Scale names (its precondition), or ``""``."""
    meta = scale.get("metadata") if isinstance(scale, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return str(rv) if rv else ""


def with_replicas(obj: Obj, spec: ScaleSpec, replicas: int) -> Obj:
    """A copy of ``obj`` whose spec replicas path holds ``replicas``."""
    out: Obj = deep_copy(obj)
    parts = [p for p in spec.spec_replicas_path.strip().lstrip(".").split(".") if p]
    if not parts:
        return out
    node = out
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = replicas
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _first(path: str, obj: Obj) -> Any:
    try:
        found = jsonpath.JSONPath.parse(path).find(obj)
    except jsonpath.JSONPathError:
        return None
    return found[0] if found else None
