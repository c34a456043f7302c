"""The public surface of ``setpoint.cel``: ``__all__`` lists exactly what it exports, and the
engine stands on its own below the schema that uses it."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

from setpoint import cel
from setpoint.cel import types as t
from setpoint.cel.schemas import PlainSchema
from setpoint.cel.values import decl_type
from setpoint.schema.structural import parse


def test_all_is_the_public_api() -> None:
    exported = {name for name, value in vars(cel).items()
                if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert sorted(cel.__all__) == sorted(exported)


def test_all_names_resolve() -> None:
    for name in cel.__all__:
        assert getattr(cel, name) is not None


_IMPORTS_ALONE = """
import sys
import setpoint.cel
import setpoint.cel.library
import setpoint.cel.validate
loaded = sorted(m for m in sys.modules if m.startswith("setpoint.schema"))
assert not loaded, loaded
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_the_engine_loads_nothing_of_schema() -> None:
    result = _run(_IMPORTS_ALONE)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("first", ["setpoint.cel", "setpoint.schema", "setpoint.schema.celrules",
                                   "setpoint.cel.compile", "setpoint.admission.expressions"])
def test_either_package_imports_first(first: str) -> None:
    """No import cycle between the engine and the schema that uses it, whichever comes first."""
    result = _run(f"import {first}\nimport setpoint.schema\nimport setpoint.cel\n"
                  "assert setpoint.schema.CompiledSchema is not None\n"
                  "assert setpoint.cel.RuleCache is not None\n")
    assert result.returncode == 0, result.stderr


def _shape(typ: t.Type | None) -> object:
    """A type as plain data: object types compare by identity, their shapes by value."""
    if typ is None:
        return None
    fields = {k: _shape(v) for k, v in (typ.fields or {}).items()}
    return (typ.kind, typ.name, tuple(_shape(p) for p in typ.params), fields)


def test_a_structural_node_is_a_cel_schema() -> None:
    """The schema model satisfies the engine's protocol as it is: the engine's own nodes and
    parsed ones give the same CEL types."""
    parsed = parse({"type": "object", "properties": {
        "name": {"type": "string"}, "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}}}})
    plain = PlainSchema(type="object", properties={
        "name": PlainSchema(type="string"),
        "when": PlainSchema(type="string", format="date-time"),
        "tags": PlainSchema(type="array", items=PlainSchema(type="string"))})
    for root in (False, True):
        a, b = decl_type(parsed, resource_root=root), decl_type(plain, resource_root=root)
        assert a is not None
        assert a.kind == "object"
        assert _shape(a) == _shape(b)
    typed = decl_type(plain)
    assert typed is not None
    assert typed.fields == {"name": t.STRING, "when": t.TIMESTAMP, "tags": t.list_of(t.STRING)}
    rooted = decl_type(plain, resource_root=True)
    assert rooted is not None
    assert rooted.fields is not None
    assert sorted(rooted.fields) == ["apiVersion", "kind", "metadata", "name", "tags", "when"]
    map_plain = PlainSchema(type="object", additional_properties=PlainSchema(type="integer"))
    assert map_plain.additional_schema is not None
    assert decl_type(map_plain) == t.map_of(t.STRING, t.INT)
    assert PlainSchema(type="object", additional_properties=True).additional_schema is None
