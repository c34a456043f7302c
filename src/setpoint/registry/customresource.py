"""Custom resources: the strategy a CRD defines.

Per served version: the compiled structural schema (prune, default, validate, with
ratcheting on update), the status and scale subresources, and the printer columns. Writes
follow Kubernetes' order: prune unknown fields (unless the CRD preserves them), default,
then validate the object metadata and the schema.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import jsonpath, validation
from setpoint.apimachinery.fields import FieldError
from setpoint.registry import table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy
from setpoint.schema import CompiledSchema

Obj = dict[str, Any]


class CustomResourceStrategy(Strategy):
    uses_generation = True
    allow_unconditional_update = False

    def __init__(self, info: ResourceInfo, *, preserve_unknown_fields: bool) -> None:
        super().__init__(info)
        self.preserve_unknown_fields = preserve_unknown_fields
        self._schemas: dict[str, CompiledSchema] = {}
        for v in info.versions:
            if v.schema is not None:
                self._schemas[v.name] = CompiledSchema.from_openapi(v.schema)
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

    def prune(self, obj: Obj, version: VersionInfo) -> list[str]:
        pruned = super().prune(obj, version)
        schema = self._schemas.get(version.name)
        if schema is not None and not self.preserve_unknown_fields \
                and not schema.preserves_unknown_fields:
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

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        version = str(obj.get("apiVersion", "")).rsplit("/", 1)[-1]
        for name, path in self._selectors.get(version, {}).items():
            found = path.find(obj)
            labels[name] = jsonpath.format_cell(found[0]) if found else ""
        return labels
