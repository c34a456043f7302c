"""``meta.k8s.io/v1`` Table output, as ``kubectl get`` asks for it.

A :class:`Column` knows how to compute its cell from an object. Cells are printed verbatim by
kubectl, so ``date`` columns are formatted here as Kubernetes' HumanDuration (``5m``,
``3d4h``). Invariant: a row has exactly one cell per column, ``None`` where the value is absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from setpoint.apimachinery import jsonpath, timeutil

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    cell: Callable[[Obj, datetime], Any]
    format: str = ""
    description: str = ""
    priority: int = 0

    def definition(self) -> Obj:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


def age(timestamp: Any, now: datetime) -> str | None:
    if not isinstance(timestamp, str) or not timestamp:
        return "<unknown>"
    try:
        then = timeutil.parse_time(timestamp)
    except ValueError:
        return "<invalid>"
    return timeutil.human_duration((now - then).total_seconds())


def name_column() -> Column:
    return Column("Name", "string",
                  lambda o, _now: (o.get("metadata") or {}).get("name"), format="name",
                  description="Name must be unique within a namespace.")


def age_column() -> Column:
    return Column("Age", "string",
                  lambda o, now: age((o.get("metadata") or {}).get("creationTimestamp"), now),
                  description="CreationTimestamp is a timestamp representing the server time "
                              "when this object was created.")


def path_column(name: str, type_: str, path: str, *, format_: str = "",
                description: str = "", priority: int = 0) -> Column:
    """A printer column computed by a JSONPath, as additionalPrinterColumns are."""
    try:
        compiled: jsonpath.JSONPath | None = jsonpath.JSONPath.parse(path)
    except jsonpath.JSONPathError:
        compiled = None

    def cell(obj: Obj, now: datetime) -> Any:
        if compiled is None:
            return None
        try:
            found = compiled.find(obj)
        except Exception:
            return None
        if not found or found[0] is None:
            return None
        value = found[0]
        if type_ == "date":
            return age(value, now) if isinstance(value, str) else None
        if type_ == "string":
            return jsonpath.format_cell(value)
        if type_ == "integer":
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        if type_ == "number":
            return value if isinstance(value, int | float) and not isinstance(value, bool) \
                else None
        if type_ == "boolean":
            return value if isinstance(value, bool) else None
        return jsonpath.format_cell(value)

    # kubectl shows date columns as durations, so the definition says string for them
    return Column(name, "string" if type_ == "date" else type_, cell, format=format_,
                  description=description, priority=priority)


def partial_metadata(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {}}


def build(columns: list[Column], objects: Iterable[Obj], now: datetime, *,
          include_object: str = "Metadata", with_definitions: bool = True,
          metadata: Obj | None = None) -> Obj:
    """A Table of ``objects``; ``include_object`` is None, Metadata or Object."""
    rows = []
    for obj in objects:
        row: Obj = {"cells": [c.cell(obj, now) for c in columns]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = partial_metadata(obj)
        rows.append(row)
    out: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata or {}}
    out["columnDefinitions"] = [c.definition() for c in columns] if with_definitions else []
    out["rows"] = rows
    return out
