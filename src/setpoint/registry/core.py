"""The built-in kinds: Namespace, ConfigMap, Secret, Event (two views), Lease.

Each strategy states what its kind adds to the generic store: known fields (unknown ones are
pruned, as decoding into a typed object drops them), defaults, validation and columns.
"""

from __future__ import annotations

import base64
from typing import Any

from setpoint.apimachinery import errors, fields, gotypes, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import builtintypes, table
from setpoint.registry.resources import ResourceInfo, SubresourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy, meta_of

Obj = dict[str, Any]

#: what a config key is made of (``[-._a-zA-Z0-9]+``), checked without a regular expression:
#: ``key.strip(CONFIG_KEY_CHARS)`` is empty exactly when every character is one of these
CONFIG_KEY_CHARS = "-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _v1(status: bool = False) -> tuple[VersionInfo, ...]:
    return (VersionInfo("v1", storage=True, status=status),)


def _validate_config_keys(data: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    if data is None:
        return errs
    if not isinstance(data, dict):
        return [fields.type_invalid(path, data, "must be an object")]
    for key in data:
        if len(key) > 253:
            errs.append(fields.too_long(path.key(key), 253))
        elif not key or key.strip(CONFIG_KEY_CHARS) or key in (".", "..") \
                or key.startswith(".."):
            errs.append(fields.invalid(path, key,
                                       "a valid config key must consist of alphanumeric "
                                       "characters, '-', '_' or '.' (e.g. 'key.name',  or "
                                       "'KEY_NAME',  or 'key-name', regex used for validation "
                                       "is '[-._a-zA-Z0-9]+')"))
    return errs


NAME_LABEL = "kubernetes.io/metadata.name"


def _label_with_name(obj: Obj) -> None:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    labels[NAME_LABEL] = meta["name"]


def _canonicalize_bytes(obj: Obj, name: str) -> None:
    """Rewrite the base64 values of the ``map[string][]byte`` field ``name`` canonically (no
    line breaks), as Kubernetes answers what it decoded. Values that do not decode are left
    for validation to report."""
    values = obj.get(name)
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        if isinstance(value, str):
            try:
                values[key] = gotypes.canonical_base64(value)
            except ValueError:
                continue


class NamespaceStrategy(Strategy):
    """Namespaces carry the ``kubernetes.io/metadata.name`` label, always equal to their name:
    set on every write (whatever the client sent) and on every read of a namespace stored
    without it, as Kubernetes' defaulting and canonicalization do."""

    known_fields = frozenset({"spec", "status"})
    selectable_fields = ("status.phase",)

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return builtintypes.namespace()

    def default(self, obj: Obj, version: VersionInfo) -> None:
        _label_with_name(obj)

    def from_storage(self, obj: Obj, version: str) -> Obj:
        meta = meta_of(obj)
        name = meta.get("name")
        if not name or (meta.get("labels") or {}).get(NAME_LABEL) == name:
            return obj
        out = dict(obj)
        out["metadata"] = {**meta, "labels": {**(meta.get("labels") or {}), NAME_LABEL: name}}
        return out

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        _label_with_name(obj)  # again: a generateName has become a name since defaulting
        spec = obj.get("spec")
        finalizers = [f for f in (spec.get("finalizers") or []) if isinstance(f, str)] \
            if isinstance(spec, dict) else []
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")  # the namespace controller's, always there
        obj["spec"] = {"finalizers": finalizers}
        obj["status"] = {"phase": "Active"}

    def prepare_for_update(self, new: Obj, old: Obj, version: VersionInfo,
                           subresource: str) -> None:
        if subresource == "status":
            status = new.get("status")
            new.clear()
            new.update(old)
            new["status"] = status if status is not None else old.get("status")
        elif subresource == "finalize":
            spec = new.get("spec")
            new.clear()
            new.update(old)
            new["spec"] = spec if isinstance(spec, dict) else {}
        else:
            new["spec"] = old.get("spec", {})
            new["status"] = old.get("status", {})

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        meta = meta_of(obj)
        errs = validation.validate_object_meta(meta, namespaced=False, name_is_label=True)
        return errs

    def check_delete(self, obj: Obj) -> None:
        name = str(meta_of(obj).get("name", ""))
        if name in PROTECTED_NAMESPACES:
            raise errors.Forbidden(f'namespaces "{name}" is forbidden: this namespace may not '
                                   "be deleted",
                                   details={"name": name, "kind": "namespaces"})

    def blocks_deletion(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers"))

    def prepare_for_delete(self, obj: Obj) -> None:
        status = obj.get("status")
        if not isinstance(status, dict):
            status = obj["status"] = {}
        status["phase"] = "Terminating"

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        labels["status.phase"] = str((obj.get("status") or {}).get("phase", ""))
        return labels

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.path_column("Status", "string", ".status.phase",
                                  description="The status of the namespace"),
                table.age_column()]


class ConfigMapStrategy(Strategy):
    known_fields = frozenset({"data", "binaryData", "immutable"})

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return builtintypes.config_map()

    def default(self, obj: Obj, version: VersionInfo) -> None:
        _canonicalize_bytes(obj, "binaryData")

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        errs += _validate_config_keys(obj.get("data"), FieldPath.root("data"))
        errs += _validate_config_keys(obj.get("binaryData"), FieldPath.root("binaryData"))
        for key, value in (obj.get("data") or {}).items():
            if not isinstance(value, str):
                errs.append(fields.type_invalid(FieldPath.root("data").key(key), value,
                                                "must be a string"))
        for key in set(obj.get("data") or {}) & set(obj.get("binaryData") or {}):
            errs.append(fields.invalid(FieldPath.root("data"), key,
                                       "duplicate of key present in binaryData"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        if old.get("immutable") is True:
            if new.get("immutable") is not True:
                errs.append(fields.forbidden("immutable",
                                             "field is immutable when `immutable` is set"))
            if new.get("data") != old.get("data") or \
                    new.get("binaryData") != old.get("binaryData"):
                errs.append(fields.forbidden("data",
                                             "field is immutable when `immutable` is set"))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.Column("Data", "integer",
                             lambda o, _n: len(o.get("data") or {}) + len(
                                 o.get("binaryData") or {}),
                             description="Number of data entries"),
                table.age_column()]


class SecretStrategy(Strategy):
    known_fields = frozenset({"data", "stringData", "type", "immutable"})
    selectable_fields = ("type",)

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return builtintypes.secret()

    def default(self, obj: Obj, version: VersionInfo) -> None:
        if not obj.get("type"):
            obj["type"] = "Opaque"
        _canonicalize_bytes(obj, "data")
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict) and string_data:
            data = obj.get("data")
            if not isinstance(data, dict):
                data = obj["data"] = {}
            for key, value in string_data.items():
                if isinstance(value, str):
                    data[key] = base64.b64encode(value.encode()).decode()

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        errs += _validate_config_keys(obj.get("data"), FieldPath.root("data"))
        total = 0
        for key, value in (obj.get("data") or {}).items():
            path = FieldPath.root("data").key(key)
            if not isinstance(value, str):
                errs.append(fields.type_invalid(path, value, "must be a base64 string"))
                continue
            try:
                total += len(gotypes.decode_base64(value))
            except ValueError as e:
                errs.append(fields.invalid(path, "<secret contents redacted>", str(e)))
        if total > 1024 * 1024:
            errs.append(fields.too_long("data", 1024 * 1024))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        if new.get("type") != old.get("type"):
            errs.append(fields.invalid("type", new.get("type"), "field is immutable"))
        if old.get("immutable") is True and new.get("data") != old.get("data"):
            errs.append(fields.forbidden("data", "field is immutable when `immutable` is set"))
        return errs

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        labels["type"] = str(obj.get("type", ""))
        return labels

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.path_column("Type", "string", ".type"),
                table.Column("Data", "integer", lambda o, _n: len(o.get("data") or {})),
                table.age_column()]


EVENT_FIELDS = frozenset({
    "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp",
    "count", "type", "eventTime", "series", "action", "related", "reportingComponent",
    "reportingInstance",
})
EVENT_SELECTORS = (
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
)


class EventStrategy(Strategy):
    """core/v1 Event: the storage form of both Event views."""

    known_fields = EVENT_FIELDS
    selectable_fields = EVENT_SELECTORS

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return builtintypes.core_event()

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        involved = obj.get("involvedObject")
        if involved is not None and not isinstance(involved, dict):
            errs.append(fields.type_invalid("involvedObject", involved, "must be an object"))
        return errs

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        involved = obj.get("involvedObject") or {}
        for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                     "fieldPath"):
            labels[f"involvedObject.{name}"] = str(involved.get(name) or "")
        labels["reason"] = str(obj.get("reason") or "")
        labels["reportingComponent"] = str(obj.get("reportingComponent") or "")
        labels["source"] = str((obj.get("source") or {}).get("component") or "")
        labels["type"] = str(obj.get("type") or "")
        return labels

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return event_columns()


def _stamp(value: Any, now: Any) -> str | None:
    return table.age(value, now) if value else "<unknown>"


def _object_at(o: Obj, name: str) -> Obj:
    value = o.get(name)
    return value if isinstance(value, dict) else {}


def _event_cells(o: Obj, now: Any) -> dict[str, Any]:
    """The cells of a core/v1 Event's row, as Kubernetes' event printer makes them."""
    first = _stamp(o.get("firstTimestamp") or o.get("eventTime"), now)
    last = _stamp(o.get("lastTimestamp"), now) if o.get("lastTimestamp") else first
    count = o.get("count")
    series = o.get("series")
    if isinstance(series, dict):
        last = _stamp(series.get("lastObservedTime"), now)
        count = series.get("count")
    elif not count:
        count = 1  # singleton events have no count in events.k8s.io/v1
    involved = _object_at(o, "involvedObject")
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = _object_at(o, "source")
    component = source.get("component") or o.get("reportingComponent") or ""
    instance = source.get("host") or o.get("reportingInstance") or ""
    return {"Last Seen": last, "Type": o.get("type") or "", "Reason": o.get("reason") or "",
            "Object": target, "Subobject": involved.get("fieldPath") or "",
            "Source": f"{component}, {instance}" if instance else component,
            "Message": str(o.get("message") or "").strip(), "First Seen": first,
            "Count": count if isinstance(count, int) else None,
            "Name": meta_of(o).get("name")}


#: (name, type, priority, description): Kubernetes' columns of ``kubectl get events``
_EVENT_COLUMNS = (
    ("Last Seen", "string", 0, "The time at which the most recent occurrence of this event "
                               "was recorded."),
    ("Type", "string", 0, "Type of this event (Normal, Warning)."),
    ("Reason", "string", 0, "A short, machine understandable string that gives the reason "
                            "for the transition into the object's current status."),
    ("Object", "string", 0, "The object that this event is about."),
    ("Subobject", "string", 1, "The part of the object the event is about (fieldPath)."),
    ("Source", "string", 1, "The component reporting this event."),
    ("Message", "string", 0, "A human-readable description of the status of this "
                             "operation."),
    ("First Seen", "string", 1, "The time at which the event was first recorded."),
    ("Count", "integer", 1, "The number of times this event has occurred."),
    ("Name", "string", 1, "Name must be unique within a namespace."),
)


def event_columns(view: Any = None) -> list[table.Column]:
    """The columns of the event table; ``view`` turns the listed object into its core/v1
    form first (events.k8s.io/v1 names the same fields differently)."""
    def cell(name: str) -> Any:
        def compute(o: Obj, now: Any) -> Any:
            return _event_cells(view(o) if view is not None else o, now)[name]
        return compute

    return [table.Column(name, type_, cell(name), priority=priority, description=doc,
                         format="name" if name == "Name" else "")
            for name, type_, priority, doc in _EVENT_COLUMNS]


_NEW_TO_OLD = {"regarding": "involvedObject", "note": "message",
               "reportingController": "reportingComponent",
               "deprecatedSource": "source", "deprecatedFirstTimestamp": "firstTimestamp",
               "deprecatedLastTimestamp": "lastTimestamp", "deprecatedCount": "count"}
_SAME = ("reason", "type", "eventTime", "series", "action", "related", "reportingInstance")


def _map_event(obj: Obj, api_version: str, renames: dict[str, str]) -> Obj:
    """An Event in the other view: fields renamed by ``renames``, the shared ones kept."""
    out: Obj = {"apiVersion": api_version, "kind": "Event", "metadata": obj.get("metadata", {})}
    for source, target in renames.items():
        if source in obj:
            out[target] = obj[source]
    for name in _SAME:
        if name in obj:
            out[name] = obj[name]
    return out


class EventsV1Strategy(EventStrategy):
    """events.k8s.io/v1 Event: the same objects, renamed fields (regarding, note, ...)."""

    known_fields = frozenset({*_NEW_TO_OLD, *_SAME})
    selectable_fields = EVENT_SELECTORS

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return builtintypes.events_v1_event()

    def to_storage(self, obj: Obj, version: str) -> Obj:
        return _map_event(obj, "v1", {new: old for new, old in _NEW_TO_OLD.items()})

    def from_storage(self, obj: Obj, version: str) -> Obj:
        return _map_event(obj, "events.k8s.io/v1", {old: new for new, old in _NEW_TO_OLD.items()})

    def field_labels(self, obj: Obj) -> dict[str, str]:
        return super().field_labels(obj)

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return event_columns(lambda o: _map_event(o, "v1", {
            new: old for new, old in _NEW_TO_OLD.items()}))


class LeaseStrategy(Strategy):
    known_fields = frozenset({"spec"})

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return builtintypes.lease()

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        spec = obj.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            errs.append(fields.invalid("spec.leaseDurationSeconds", duration,
                                       "must be greater than 0"))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.path_column("Holder", "string", ".spec.holderIdentity"),
                table.age_column()]


def builtin_resources() -> list[tuple[ResourceInfo, type[Strategy]]]:
    """Every built-in resource with its strategy class."""
    return [
        (ResourceInfo(group="", resource="namespaces", kind="Namespace", singular="namespace",
                      namespaced=False, versions=_v1(status=True), short_names=("ns",),
                      extra_subresources=(SubresourceInfo("finalize"),)),
         NamespaceStrategy),
        (ResourceInfo(group="", resource="configmaps", kind="ConfigMap", singular="configmap",
                      namespaced=True, versions=_v1(), short_names=("cm",)),
         ConfigMapStrategy),
        (ResourceInfo(group="", resource="secrets", kind="Secret", singular="secret",
                      namespaced=True, versions=_v1()),
         SecretStrategy),
        (ResourceInfo(group="", resource="events", kind="Event", singular="event",
                      namespaced=True, versions=_v1(), short_names=("ev",)),
         EventStrategy),
        (ResourceInfo(group="events.k8s.io", resource="events", kind="Event",
                      singular="event", namespaced=True, versions=_v1(), short_names=("ev",),
                      storage_group=""),
         EventsV1Strategy),
        (ResourceInfo(group="coordination.k8s.io", resource="leases", kind="Lease",
                      singular="lease", namespaced=True, versions=_v1()),
         LeaseStrategy),
    ]
