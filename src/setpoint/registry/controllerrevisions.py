"""apps/v1 ControllerRevision: an immutable snapshot of a controller's template.

The StatefulSet and DaemonSet controllers write one per distinct pod template
(:mod:`setpoint.controllers.history`); ``kubectl rollout history|undo`` read them.

* **Validation** (Kubernetes' ``ValidateControllerRevision``): the name a DNS-1123 subdomain,
  ``data`` present (``data: Required value: data is mandatory``), ``revision`` not negative.
* **Update**: ``data`` is immutable (``data: Invalid value: ...: field is immutable``);
  ``revision`` and metadata may change (the controllers renumber a revision whose template
  comes back).
* **Columns**: NAME CONTROLLER REVISION AGE, CONTROLLER as kubectl prints it
  (``statefulset.apps/web``, ``<none>`` without a controller ``ownerReference``).

Non-guarantees: ``data`` is any JSON value (a ``runtime.RawExtension``); its content is not
checked against the owner's kind.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import fields
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ControllerRevisionStrategy(TypedStrategy):
    type_key = ("apps/v1", "ControllerRevision")
    known_fields = frozenset({"data", "revision"})

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        if obj.get("data") is None:
            errs.append(fields.required(FieldPath.root("data"), "data is mandatory"))
        revision = _int(obj.get("revision"))
        if revision is not None and revision < 0:
            errs.append(fields.invalid(FieldPath.root("revision"), revision,
                                       "must be greater than or equal to 0"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        if new.get("data") != old.get("data"):
            errs.append(fields.invalid(FieldPath.root("data"), new.get("data"),
                                       "field is immutable"))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return controller_revision_columns()


def controller_of(obj: Obj) -> str:
    """The controller as kubectl prints it: ``kind.group/name`` in lower case."""
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            api_version = str(ref.get("apiVersion") or "")
            group = api_version.rpartition("/")[0] if "/" in api_version else ""
            kind = str(ref.get("kind") or "")
            qualified = f"{kind}.{group}" if group else kind
            return f"{qualified.lower()}/{ref.get('name') or ''}"
    return "<none>"


def controller_revision_columns() -> list[table.Column]:
    return [
        table.name_column(),
        table.Column("Controller", "string", lambda o, now: controller_of(o),
                     description="Controller of the object"),
        table.Column("Revision", "string", lambda o, now: _int(o.get("revision")) or 0,
                     description="Revision indicates the revision of the state represented "
                                 "by Data."),
        table.age_column(),
    ]


def controller_revision_resource() -> tuple[ResourceInfo, type[ControllerRevisionStrategy]]:
    return (ResourceInfo(group="apps", resource="controllerrevisions",
                         kind="ControllerRevision", singular="controllerrevision",
                         namespaced=True, versions=(VersionInfo("v1", storage=True),)),
            ControllerRevisionStrategy)
