"""Custom resources: the strategy a CRD defines.

Per served version: the compiled structural schema (prune, default, validate, with
ratcheting on update), the status and scale subresources, and the printer columns. Writes
follow Kubernetes' order: prune unknown fields (unless the CRD sets ``preserveUnknownFields``;
``x-kubernetes-preserve-unknown-fields`` keeps them only where it is set), default,
then validate the object metadata and the schema.
"""

from __future__ import annotations

import collections
from typing import Any

from setpoint.apimachinery import jsonpath, typed, validation
from setpoint.apimachinery.fields import FieldError
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry import table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy
from setpoint.schema import CompiledSchema

Obj = dict[str, Any]

#: converted copies kept per served version (a bound on the memory defaulting on read costs)
READ_MEMO_SIZE = 50_000


def _has_defaults(schema: Any) -> bool:
    """Whether a schema sets a ``default`` anywhere."""
    if isinstance(schema, dict):
        return "default" in schema or any(_has_defaults(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_defaults(v) for v in schema)
    return False


class CustomResourceStrategy(Strategy):
    uses_generation = True
    strategic_merge = False
    allow_unconditional_update = False
    requires_type_meta = True

    def __init__(self, info: ResourceInfo, *, preserve_unknown_fields: bool) -> None:
        super().__init__(info)
        self.preserve_unknown_fields = preserve_unknown_fields
        self._schemas: dict[str, CompiledSchema] = {}
        for v in info.versions:
            if v.schema is not None:
                self._schemas[v.name] = CompiledSchema.from_openapi(v.schema)
        self._defaulted_versions = {v.name for v in info.versions
                                    if v.schema is not None and _has_defaults(v.schema)}
        self._read_memo: dict[str, collections.OrderedDict[tuple[Any, ...], Obj]] = {}
        self._selectors: dict[str, dict[str, jsonpath.JSONPath]] = {}
        for v in info.versions:
            compiled = {}
            for path in v.selectable_fields:
                try:
                    compiled[path.lstrip(".")] = jsonpath.JSONPath.parse(path)
                except jsonpath.JSONPathError:
                    continue
            self._selectors[v.name] = compiled

    def schema(self, version: VersionInfo) -> CompiledSchema | None:
        return self._schemas.get(version.name)

    def field_type(self, version: VersionInfo) -> typed.TypeSpec:
        """The version's schema as server-side apply reads it (list types and map keys)."""
        return typed.from_openapi(version.schema,
                                  preserve_unknown_fields=self.preserve_unknown_fields)

    def from_storage(self, obj: Obj, version: str) -> Obj:
        """The stored object through ``version``: apiVersion rewritten (conversion None),
        then that version's defaults applied, as Kubernetes defaults objects it reads.

        ``obj`` is shared: its content is what storage holds for its key at its
        resourceVersion, so the converted copy is memoised by (namespace, name, uid,
        resourceVersion) and reads of a version with defaults stay cheap; the memo holds
        the copies only (bounded), never the stored objects.
        """
        converted = super().from_storage(obj, version)
        schema = self._schemas.get(version)
        if schema is None or version not in self._defaulted_versions:
            return converted
        meta = obj.get("metadata") or {}
        revision = meta.get("resourceVersion")
        key = (meta.get("namespace"), meta.get("name"), meta.get("uid"), revision)
        memo = self._read_memo.setdefault(version, collections.OrderedDict())
        if revision:
            hit = memo.get(key)
            if hit is not None:
                memo.move_to_end(key)
                return hit
        copy: Obj = deep_copy(converted)
        schema.default(copy)
        if revision:
            memo[key] = copy
            if len(memo) > READ_MEMO_SIZE:
                memo.popitem(last=False)
        return copy

    def from_storage_owned(self, obj: Obj, version: str) -> Obj:
        """:meth:`from_storage` of an object the caller owns: converted and defaulted in
        place (no copy, no memo)."""
        obj["apiVersion"] = self.info.api_version(version)
        schema = self._schemas.get(version)
        if schema is not None and version in self._defaulted_versions:
            schema.default(obj)
        return obj

    def prune(self, obj: Obj, version: VersionInfo) -> list[str]:
        pruned = super().prune(obj, version)
        schema = self._schemas.get(version.name)
        # x-kubernetes-preserve-unknown-fields at the root keeps unknown fields at the root
        # only: the pruning algorithm still prunes every specified field by its own schema
        if schema is not None and not self.preserve_unknown_fields:
            pruned.extend(schema.prune(obj))
        return sorted(pruned)

    def default(self, obj: Obj, version: VersionInfo) -> None:
        schema = self._schemas.get(version.name)
        if schema is not None:
            schema.default(obj)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        schema = self._schemas.get(version.name)
        if schema is not None:
            errs.extend(schema.validate(obj))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = Strategy.validate(self, new, version)
        errs.extend(validation.validate_object_meta_update(new.get("metadata") or {},
                                                           old.get("metadata") or {}))
        schema = self._schemas.get(version.name)
        if schema is not None:
            errs.extend(schema.validate_update(new, old))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        if not version.printer_columns:
            return [table.name_column(), table.age_column()]
        cols = [table.name_column()]
        for c in version.printer_columns:
            cols.append(table.path_column(c.name, c.type, c.json_path, format_=c.format,
                                          description=c.description, priority=c.priority))
        return cols

    def supported_field_selectors(self, version: VersionInfo) -> tuple[str, ...]:
        return (*super().supported_field_selectors(version),
                *self._selectors.get(version.name, {}))

    def field_labels_in(self, obj: Obj, version: str) -> dict[str, str]:
        """Selectable fields are the request version's, read from the object as that version
        serves it (its paths and defaults), as Kubernetes selects custom resources."""
        if str(obj.get("apiVersion", "")).rsplit("/", 1)[-1] == version:
            return self.field_labels(obj)
        return self.field_labels(self.from_storage(obj, version))

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        version = str(obj.get("apiVersion", "")).rsplit("/", 1)[-1]
        for name, path in self._selectors.get(version, {}).items():
            found = path.find(obj)
            labels[name] = jsonpath.format_cell(found[0]) if found else ""
        return labels
