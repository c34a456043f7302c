"""Field management: ``metadata.managedFields`` and server-side apply.

Every write records who set which fields, as kube-apiserver's field manager does:

* an **Update** entry per (manager, apiVersion, subresource) for writes that are not applies:
  the writer takes over every field it changed or added (from whoever owned it) and loses the
  ones it removed; a write that changes nothing records nothing;
* an **Apply** entry per (manager, subresource) for ``application/apply-patch+yaml``: the
  manager owns exactly the fields of its applied configuration. Applying a field another
  manager owns, with a different value, is a conflict (409, one ``FieldManagerConflict``
  cause per field) unless ``force`` takes the field over; fields the applier set last time
  and no longer sets are removed from the object when no other manager owns them.

Pure: objects in, objects out, no I/O. Invariants:

* the metadata Kubernetes strips (apiVersion, kind, name, namespace, uid, resourceVersion,
  generation, creationTimestamp, selfLink, managedFields) is never owned;
* fields the endpoint resets are never owned by its writers (``status`` through the main
  endpoint of a resource with a status subresource, everything else through ``/status``);
* an entry's ``time`` moves only when its manager changed the object; entries are ordered as
  Kubernetes orders them (Apply first, then by time, manager, apiVersion, subresource);
* at most :data:`MAX_UPDATE_MANAGERS` Update entries: older ones merge into
  ``ancient-changes``;
* a client that sends ``managedFields`` replaces them (``[{}]`` clears them); one that sends
  none keeps the stored ones; an apply configuration may not carry any (400);
* ``kubectl`` applying over a ``kubectl apply`` (client-side) object may take the fields of
  its last-applied annotation without ``force``, and keeps that annotation in step.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from setpoint.apimachinery import errors, fieldpath, typed
from setpoint.apimachinery.fieldpath import FieldSet, Path
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.apimachinery.typed import TypeSpec
from setpoint.registry.fieldscodec import FieldsCodec

Obj = dict[str, Any]

APPLY = "Apply"
UPDATE = "Update"
MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: the manager whose applies upgrade a client-side-applied object (and keep its annotation)
KUBECTL = "kubectl"
MAX_MANAGER_LENGTH = 128
#: shapes of created objects whose field ownership is kept encoded, per resource version
MAX_CREATE_SHAPES = 256

STRIPPED: FieldSet = frozenset({
    fieldpath.path("apiVersion"), fieldpath.path("kind"), fieldpath.path("metadata"),
    *(fieldpath.path("metadata", name) for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
        "generation", "managedFields", "resourceVersion")),
})


@dataclass(frozen=True, slots=True)
class ManagerKey:
    """Who an entry belongs to. Apply entries have no apiVersion in their identity."""

    manager: str
    operation: str
    api_version: str = ""
    subresource: str = ""

    def display(self) -> str:
        """How a conflict names the manager: ``"kubectl" using v1``."""
        text = json.dumps(self.manager, ensure_ascii=False)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


@dataclass(frozen=True, slots=True)
class Entry:
    fields: FieldSet
    api_version: str
    time: str | None = None


Managers = dict[ManagerKey, Entry]


def manager_from_user_agent(user_agent: str | None) -> str:
    """The manager name of a write that named none, as Kubernetes' ``prefixFromUserAgent``:
    the User-Agent up to its first ``/`` (``kubectl/v1.32.4 (linux/amd64) ...`` is
    ``kubectl``, for every kubectl command that sends no ``fieldManager``, ``kubectl scale``
    included), unprintable characters left out, at most 128 bytes of UTF-8; ``unknown``
    when nothing is left."""
    prefix = (user_agent or "").split("/", 1)[0]
    if prefix.isascii() and prefix.isprintable() and 0 < len(prefix) <= MAX_MANAGER_LENGTH:
        return prefix  # the usual User-Agent: nothing to leave out, one byte per character
    kept: list[str] = []
    size = 0
    for ch in prefix:
        if not ch.isprintable():
            continue
        size += len(ch.encode("utf-8", "surrogatepass"))
        if size > MAX_MANAGER_LENGTH:
            break
        kept.append(ch)
    return "".join(kept) or "unknown"


# --- encoding ------------------------------------------------------------------------------------


def decode(entries: Any, fields_of: Callable[[Any], FieldSet] = fieldpath.from_fields_v1
           ) -> Managers:
    """The managers of a ``metadata.managedFields`` list; ``ValueError`` when malformed.
    ``fields_of`` reads an entry's ``fieldsV1`` (a :class:`FieldsCodec`'s, to share)."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    out: Managers = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"managed fields entry {i} must be an object")
        operation = entry.get("operation")
        if operation not in (APPLY, UPDATE):
            raise ValueError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise ValueError("apiVersion must not be empty")
        if entry.get("fieldsType") != "FieldsV1":
            raise ValueError(f"invalid fieldsType in managed fields entry {i}")
        manager = entry.get("manager") or ""
        subresource = entry.get("subresource") or ""
        if not isinstance(manager, str) or not isinstance(subresource, str):
            raise ValueError(f"invalid managed fields entry {i}")
        fields = fields_of(entry.get("fieldsV1") or {})
        stamp = entry.get("time")
        out[_key(manager, operation, api_version, subresource)] = Entry(
            fields, api_version, stamp if isinstance(stamp, str) else None)
    return out


def encode(managers: Managers,
           fields_v1_of: Callable[[FieldSet], Obj] = fieldpath.to_fields_v1) -> list[Obj]:
    """The ``metadata.managedFields`` list, in Kubernetes' order (``fields_v1_of`` writes an
    entry's ``fieldsV1``)."""
    def order(item: tuple[ManagerKey, Entry]) -> tuple[Any, ...]:
        k, e = item
        return (k.operation, e.time or "", k.manager, e.api_version, k.subresource)

    out: list[Obj] = []
    for k, e in sorted(managers.items(), key=order):
        entry: Obj = {"manager": k.manager, "operation": k.operation,
                      "apiVersion": e.api_version}
        if e.time is not None:
            entry["time"] = e.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = fields_v1_of(e.fields)
        if k.subresource:
            entry["subresource"] = k.subresource
        out.append(entry)
    return out


def _key(manager: str, operation: str, api_version: str, subresource: str) -> ManagerKey:
    return ManagerKey(manager, operation, api_version if operation == UPDATE else "",
                      subresource)


def _is_reset_request(entries: Any) -> bool:
    return isinstance(entries, list) and len(entries) == 1 and entries[0] == {}


def _ignored(obj: Obj | None, other: Obj | None, subresource: str,
             status_subresource: bool) -> FieldSet:
    if subresource == "status":
        names = {k for o in (obj, other) if o for k in o} - {
            "apiVersion", "kind", "metadata", "status"}
        return frozenset(fieldpath.path(n) for n in names)
    if subresource == "" and status_subresource:
        return frozenset({fieldpath.path("status")})
    return fieldpath.EMPTY


# --- the updater (structured-merge-diff's merge.Updater) -----------------------------------------


class Updater:
    """Update and Apply over one type; see the module docstring."""

    def __init__(self, spec: TypeSpec) -> None:
        self.spec = spec

    def _take_over(self, live: Any, new: Any, managers: Managers, me: ManagerKey | None,
                   force: bool, ignored: FieldSet) -> tuple[Managers, typed.Comparison]:
        """Other managers lose what changed between ``live`` and ``new`` (or, without
        ``force``, the conflicts are raised)."""
        comparison = typed.compare(self.spec, live, new, skip=ignored).exclude(ignored)
        changed = comparison.changed()
        removed = frozenset(comparison.removed)
        conflicts: dict[ManagerKey, FieldSet] = {}
        for key, entry in managers.items():
            if key == me:
                continue
            taken = entry.fields & changed
            if taken:
                conflicts[key] = taken
        if conflicts and not force:
            raise ApplyConflicts(conflicts)
        out: Managers = {}
        for key, entry in managers.items():
            fields = entry.fields
            if key != me:
                fields = fields - conflicts.get(key, fieldpath.EMPTY) - removed
            if fields:
                out[key] = replace(entry, fields=fields) if fields != entry.fields else entry
        return out, comparison

    def update(self, live: Any, new: Any, managers: Managers, me: ManagerKey,
               api_version: str, now: str, ignored: FieldSet) -> Managers:
        out, comparison = self._take_over(live, new, managers, None, True, ignored)
        changed = _strip(comparison.changed())
        if not changed:
            return out
        previous = out.get(me)
        fields = changed | (previous.fields if previous else fieldpath.EMPTY)
        out[me] = Entry(fields, api_version, now)
        return out

    def apply(self, live: Any, config: Obj, managers: Managers, me: ManagerKey,
              api_version: str, now: str, ignored: FieldSet, force: bool
              ) -> tuple[Obj, Managers]:
        merged = typed.merge(self.spec, live, config)
        last = managers.get(me)
        applied = fieldpath.recursive_difference(typed.to_field_set(self.spec, config),
                                                 ignored)
        working = dict(managers)
        working[me] = Entry(applied, api_version, last.time if last else None)
        if last is not None and last.fields:
            merged = self._prune(merged, working, last.fields)
        out, _ = self._take_over(live, merged, working, me, force, ignored)
        mine = out.get(me)
        if mine is not None:
            stripped = _strip(mine.fields)
            if stripped:
                out[me] = replace(mine, fields=stripped)
            else:
                del out[me]
        if merged != live and me in out:
            out[me] = replace(out[me], time=now)
        result: Obj = merged if isinstance(merged, dict) else {}
        return result, out

    def _prune(self, merged: Any, managers: Managers, last: FieldSet) -> Any:
        """Remove what the applier set last time and not now, unless someone owns it."""
        spec = self.spec
        last_named = typed.ensure_named_fields_are_members(spec, last)
        pruned = typed.remove_items(spec, merged, last_named)
        owned: set[Path] = set()
        for entry in managers.values():
            owned |= entry.fields
        merged_set = typed.ensure_named_fields_are_members(
            spec, typed.to_field_set(spec, merged))
        pruned_set = typed.ensure_named_fields_are_members(
            spec, typed.to_field_set(spec, pruned))
        owned_named = typed.ensure_named_fields_are_members(spec, frozenset(owned))
        # add back what any manager (this applier's new configuration included) owns
        pruned = typed.remove_items(spec, merged, merged_set - (pruned_set | owned_named))
        # and remove only what this applier owned last time
        pruned_set = typed.ensure_named_fields_are_members(
            spec, typed.to_field_set(spec, pruned))
        return typed.remove_items(spec, merged, (merged_set - pruned_set) & last_named)


def _strip(fields: FieldSet) -> FieldSet:
    return fields - STRIPPED if fields & STRIPPED else fields


class ApplyConflicts(Exception):
    """Fields another manager owns and an apply would change."""

    def __init__(self, conflicts: Mapping[ManagerKey, FieldSet]) -> None:
        super().__init__("apply conflicts")
        self.conflicts = dict(conflicts)

    def items(self) -> list[tuple[ManagerKey, Path]]:
        pairs = [(k, p) for k, paths in self.conflicts.items() for p in paths]
        pairs.sort(key=lambda kp: (kp[0].display(), _path_order(kp[1])))
        return pairs

    def restrict(self, allowed: FieldSet) -> ApplyConflicts | None:
        """The conflicts outside ``allowed``, or ``None`` when there are none."""
        left = {k: paths - allowed for k, paths in self.conflicts.items()}
        left = {k: paths for k, paths in left.items() if paths}
        return ApplyConflicts(left) if left else None

    def error(self) -> errors.Conflict:
        """Kubernetes' 409: ``Apply failed with N conflict(s): ...``."""
        pairs = self.items()
        causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {k.display()}",
                   "field": fieldpath.render(p)} for k, p in pairs]
        if len(pairs) == 1:
            k, p = pairs[0]
            message = (f"Apply failed with 1 conflict: conflict with {k.display()}: "
                       f"{fieldpath.render(p)}")
        else:
            lines: list[str] = []
            current = None
            for k, p in pairs:
                if k != current:
                    lines.append(f"conflicts with {k.display()}:")
                    current = k
                lines.append(f"- {fieldpath.render(p)}")
            message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
        return errors.Conflict(message, details={"causes": causes})


def _path_order(p: Path) -> tuple[Any, ...]:
    return tuple(fieldpath.element_order(pe) for pe in p)


# --- what the store calls ------------------------------------------------------------------------


class FieldManager:
    """Field management of one resource version (a :class:`TypeSpec` and its endpoints)."""

    def __init__(self, spec: TypeSpec, api_version: str, *, status_subresource: bool) -> None:
        self.updater = Updater(spec)
        self.api_version = api_version
        self.status_subresource = status_subresource
        # the fieldsV1 of the managers' entries, both ways (see registry/fieldscodec.py)
        self._codec = FieldsCodec()
        # creates: the fields a created object sets -> the encoded fieldsV1 its creator owns
        # (None: none). Objects of one resource mostly share a few shapes; bounded.
        self._created: collections.OrderedDict[FieldSet, bytes | None] = \
            collections.OrderedDict()

    def _managers(self, live: Obj | None, new: Obj | None, subresource: str) -> Managers:
        """The managers to start from: the client's, if it sent valid ones, else the live."""
        if new is not None and not subresource:
            sent = _meta(new).get("managedFields")
            if sent:
                try:
                    managers = decode(sent, self._codec.decode)
                except ValueError:
                    managers = {}
                if managers:
                    return managers
        try:
            return decode(_meta(live).get("managedFields"), self._codec.decode) \
                if live is not None else {}
        except ValueError:
            return {}

    def update(self, live: Obj | None, new: Obj, manager: str, now: str,
               subresource: str = "") -> None:
        """Record a create (``live`` None) or an update in ``new``'s managedFields."""
        meta = new.setdefault("metadata", {})
        if _is_reset_request(meta.get("managedFields")) and not subresource:
            meta.pop("managedFields", None)
            return
        if live is None and not subresource and not meta.get("managedFields"):
            self._record_create(new, manager, now)
            return
        managers = self._managers(live, new, subresource)
        base = _without_managed_fields(live) if live is not None else {}
        target = _without_managed_fields(new)
        me = _key(manager, UPDATE, self.api_version, subresource)
        ignored = _ignored(base, target, subresource, self.status_subresource)
        try:
            out = self.updater.update(base, target, managers, me, self.api_version, now,
                                      ignored)
        except ValueError:
            # an object the schema cannot type (duplicate keys): no field management, as
            # Kubernetes drops managedFields when it cannot update them
            meta.pop("managedFields", None)
            return
        _cap(out)
        _store(meta, out, self._codec)

    def _record_create(self, new: Obj, manager: str, now: str) -> None:
        """:meth:`update` of a create whose client sent no managedFields: the creator owns
        every field the object sets (the comparison with nothing, without comparing), and
        the encoding of that set is shared by the creates of the same shape."""
        meta = new["metadata"]
        try:
            added = typed.added(self.updater.spec, _without_managed_fields(new))
        except ValueError:
            meta.pop("managedFields", None)  # as update(): an object the schema cannot type
            return
        created = self._created
        if added in created:
            created.move_to_end(added)
            encoded = created[added]
        else:
            ignored = _ignored(None, None, "", self.status_subresource)
            owned = _strip(fieldpath.recursive_difference(added, ignored) if ignored
                           else added)
            encoded = orjson.dumps(fieldpath.to_fields_v1(owned)) if owned else None
            created[added] = encoded
            if len(created) > MAX_CREATE_SHAPES:
                created.popitem(last=False)
        if encoded is None:
            meta.pop("managedFields", None)
            return
        meta["managedFields"] = [{"manager": manager, "operation": UPDATE,
                                  "apiVersion": self.api_version, "time": now,
                                  "fieldsType": "FieldsV1",
                                  "fieldsV1": orjson.loads(encoded)}]

    def apply(self, live: Obj | None, config: Obj, manager: str, now: str, *, force: bool,
              subresource: str = "") -> Obj:
        """The object an apply of ``config`` makes of ``live`` (None: it creates), with its
        managedFields; raises a 409 Conflict, or 400 for a configuration it cannot take."""
        if "managedFields" in _meta(config):
            raise errors.BadRequest("metadata.managedFields must be nil")
        try:
            typed.validate(self.updater.spec, config)
        except ValueError as e:
            raise errors.BadRequest(f"failed to create typed patch object: {e}") from e
        managers = self._managers(live, None, subresource)
        base = _without_managed_fields(live) if live is not None else {}
        me = _key(manager, APPLY, self.api_version, subresource)
        ignored = _ignored(base, config, subresource, self.status_subresource)
        try:
            try:
                merged, out = self.updater.apply(base, config, managers, me, self.api_version,
                                                 now, ignored, force)
            except ApplyConflicts as conflicts:
                allowed = self._last_applied_allowance(manager, base)
                if allowed is None:
                    raise
                left = conflicts.restrict(allowed)
                if left is not None:
                    raise left from None
                merged, out = self.updater.apply(base, config, managers, me,
                                                 self.api_version, now, ignored, True)
        except ApplyConflicts as conflicts:
            raise conflicts.error() from None
        except ValueError as e:
            raise errors.BadRequest(str(e)) from e
        if manager == KUBECTL and LAST_APPLIED in (_meta(merged).get("annotations") or {}):
            _set_last_applied(merged, config)
        _cap(out)
        _store(merged.setdefault("metadata", {}), out, self._codec)
        return merged

    def _last_applied_allowance(self, manager: str, live: Obj) -> FieldSet | None:
        """What ``kubectl`` may take over from a client-side apply: the fields of the
        last-applied annotation whose value is still what it says."""
        if manager != KUBECTL:
            return None
        text = (_meta(live).get("annotations") or {}).get(LAST_APPLIED)
        if not isinstance(text, str) or not text:
            return None
        try:
            last = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(last, dict):
            return None
        spec = self.updater.spec
        try:
            fields = typed.to_field_set(spec, last)
            modified = typed.compare(spec, last, live).modified
        except ValueError:
            return None
        return fields - modified


def _meta(obj: Obj | None) -> Obj:
    meta = obj.get("metadata") if obj else None
    return meta if isinstance(meta, dict) else {}


def _without_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = dict(meta)
        del meta["managedFields"]
        return {**obj, "metadata": meta}
    return obj


def _store(meta: Obj, managers: Managers, codec: FieldsCodec | None = None) -> None:
    if managers:
        meta["managedFields"] = encode(managers, codec.encode if codec is not None
                                       else fieldpath.to_fields_v1)
    else:
        meta.pop("managedFields", None)


def _cap(managers: Managers) -> None:
    """Merge the oldest Update entries into ``ancient-changes`` (one per apiVersion)."""
    updaters = [(k, e) for k, e in managers.items() if k.operation == UPDATE]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda ke: ke[1].time or "", reverse=True)
    for k, e in updaters[MAX_UPDATE_MANAGERS:]:
        if k.manager == ANCIENT_CHANGES:
            continue
        bucket = ManagerKey(ANCIENT_CHANGES, UPDATE, e.api_version)
        previous = managers.get(bucket)
        fields = e.fields | (previous.fields if previous else fieldpath.EMPTY)
        stamp = max(filter(None, (e.time, previous.time if previous else None)), default=None)
        managers[bucket] = Entry(fields, e.api_version, stamp)
        del managers[k]


def _set_last_applied(obj: Obj, config: Obj) -> None:
    applied = deep_copy(config)
    annotations = _meta(applied).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
        if not annotations:
            del applied["metadata"]["annotations"]
    obj["metadata"]["annotations"][LAST_APPLIED] = orjson.dumps(applied).decode() + "\n"
