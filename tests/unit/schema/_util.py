"""Helpers shared by the schema tests: compile a schema, run it, render errors as strings."""

from __future__ import annotations

from typing import Any

from setpoint.schema import CompiledSchema


def obj_schema(**props: Any) -> dict[str, Any]:
    """A root object schema with the given properties."""
    return {"type": "object", "properties": props}


def errors_of(schema: dict[str, Any], obj: Any) -> list[str]:
    return [e.error() for e in CompiledSchema.from_openapi(schema).validate(obj)]


def update_errors_of(schema: dict[str, Any], new: Any, old: Any) -> list[str]:
    return [e.error() for e in CompiledSchema.from_openapi(schema).validate_update(new, old)]
