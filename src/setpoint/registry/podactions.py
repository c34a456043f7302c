"""The ``pods/binding`` and ``pods/eviction`` subresources.

* ``POST .../pods/NAME/binding`` with a core/v1 Binding (``target: {kind: Node, name}``)
  sets ``spec.nodeName`` of a pod that has none, merges the Binding's annotations into the
  pod's and sets its ``PodScheduled`` condition to True: what a scheduler does. The
  Binding's ``metadata.uid`` and ``resourceVersion``, when given, are preconditions. A pod
  already bound is a 409 (``pod NAME is already assigned to node "N"``), as is a pod being
  deleted or one with scheduling gates. Answer: a ``Success`` Status, 201.
* ``POST .../pods/NAME/eviction``: what an Eviction body must be (:func:`eviction_body`,
  :func:`delete_options`); the eviction itself, which consults the PodDisruptionBudgets, is
  :mod:`setpoint.registry.eviction`.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import errors, fields
from setpoint.apimachinery.fields import FieldError
from setpoint.registry import actions
from setpoint.registry.options import DeleteOptions, WriteOptions
from setpoint.registry.store import Store

Obj = dict[str, Any]

SUCCESS: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}


def _body(body: Any, kind: str, api_versions: tuple[str, ...]) -> Obj:
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the body must be a {kind} object")
    if body.get("kind") not in (None, kind) or body.get("apiVersion") not in (
            None, *api_versions):
        raise errors.BadRequest(f"the body must be a {api_versions[0]} {kind}, not "
                                f"{body.get('apiVersion')} {body.get('kind')}")
    return body


def _meta(body: Obj) -> Obj:
    meta = body.get("metadata")
    return meta if isinstance(meta, dict) else {}


def check_name(body: Obj, name: str, kind: str) -> None:
    if _meta(body).get("name") != name:
        raise errors.BadRequest(f"name in URL does not match name in {kind} object")


def validate_binding(body: Obj) -> list[FieldError]:
    target = body.get("target")
    target = target if isinstance(target, dict) else {}
    errs: list[FieldError] = []
    kind = target.get("kind")
    if kind not in (None, "", "Node"):
        errs.append(fields.not_supported("target.kind", kind, ["Node", "<empty>"]))
    if not isinstance(target.get("name"), str) or not target.get("name"):
        errs.append(fields.required("target.name", ""))
    annotations = _meta(body).get("annotations")
    if annotations is not None and (not isinstance(annotations, dict) or not all(
            isinstance(v, str) for v in annotations.values())):
        errs.append(fields.type_invalid("metadata.annotations", annotations,
                                        "must be a map of strings"))
    return errs


def binding_action(pods: Store) -> actions.Action:
    async def bind(req: actions.ActionRequest) -> Obj:
        if req.namespace is None:
            raise errors.path_not_found()
        body = _body(req.body, "Binding", ("v1",))
        check_name(body, req.name, "Binding")
        errs = validate_binding(body)
        if errs:
            raise errors.invalid("Binding", "", req.name, errs)
        node = str(body["target"]["name"])
        meta = _meta(body)
        uid, revision = meta.get("uid"), meta.get("resourceVersion")
        annotations = meta.get("annotations") or {}

        def assign(pod: Obj, now: str) -> None:
            pmeta = pod["metadata"]
            why = None
            if uid and uid != pmeta.get("uid"):
                why = (f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                       f"{pmeta.get('uid', '')}")
            elif revision and revision != pmeta.get("resourceVersion"):
                why = ("Precondition failed: ResourceVersion in precondition: "
                       f"{revision}, ResourceVersion in meta: {pmeta.get('resourceVersion')}")
            spec = pod.setdefault("spec", {})
            if why is None and pmeta.get("deletionTimestamp"):
                why = f"pod {req.name} is being deleted, cannot be assigned to a host"
            elif why is None and spec.get("nodeName"):
                why = f'pod {req.name} is already assigned to node "{spec["nodeName"]}"'
            elif why is None and spec.get("schedulingGates"):
                why = f"pod {req.name} has non-empty .spec.schedulingGates"
            if why is not None:
                raise errors.conflict("pods/binding", "", req.name, why)
            spec["nodeName"] = node
            if annotations:
                pmeta["annotations"] = {**(pmeta.get("annotations") or {}), **annotations}
            status = pod.get("status")
            if not isinstance(status, dict):
                status = pod["status"] = {}
            conditions = [c for c in status.get("conditions") or []
                          if not (isinstance(c, dict) and c.get("type") == "PodScheduled")]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": now})
            status["conditions"] = conditions

        await pods.guaranteed_update(req.namespace, req.name, "v1", assign,
                                     subresource="binding",
                                     opts=WriteOptions(dry_run=req.dry_run))
        return dict(SUCCESS)

    return bind


def delete_options(raw: Any, dry_run: bool) -> DeleteOptions:
    if raw is None:
        return DeleteOptions(dry_run=dry_run)
    if not isinstance(raw, dict):
        raise errors.BadRequest("deleteOptions must be an object")
    grace = raw.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        raise errors.BadRequest("deleteOptions.gracePeriodSeconds must be an integer")
    pre = raw.get("preconditions")
    pre = pre if isinstance(pre, dict) else {}
    policy = raw.get("propagationPolicy")
    if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
        raise errors.invalid("Eviction", "policy", "", [fields.not_supported(
            "deleteOptions.propagationPolicy", policy, ("Background", "Foreground",
                                                         "Orphan"))])
    dry = raw.get("dryRun")
    orphan = raw.get("orphanDependents")
    return DeleteOptions(
        dry_run=dry_run or (isinstance(dry, list) and "All" in dry),
        propagation_policy=policy, grace_period_seconds=grace,
        orphan_dependents=orphan if isinstance(orphan, bool) else None,
        precondition_uid=pre.get("uid") if isinstance(pre.get("uid"), str) else None,
        precondition_resource_version=pre.get("resourceVersion")
        if isinstance(pre.get("resourceVersion"), str) else None)


def eviction_body(body: Any) -> Obj:
    return _body(body, "Eviction", ("policy/v1", "policy/v1beta1"))
