"""The public surface of ``setpoint.schema``, its purity, and robustness on arbitrary input."""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import setpoint.schema
from setpoint.schema import CompiledSchema, ValidationRule, check_structural
from setpoint.schema.structural import KNOWN_KEYWORDS

SCHEMA_DIR = Path(setpoint.schema.__file__).parent


def test_public_names() -> None:
    assert sorted(setpoint.schema.__all__) == ["CompiledSchema", "ValidationRule",
                                               "check_structural"]


def test_package_is_pure() -> None:
    """No I/O or event-loop machinery: the schema package is plain computation."""
    forbidden = {"asyncio", "sqlite3", "aiohttp", "socket", "threading", "subprocess"}
    for source in SCHEMA_DIR.glob("*.py"):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{source.name} imports {name}"


def test_every_module_has_a_docstring() -> None:
    for source in SCHEMA_DIR.glob("*.py"):
        assert ast.get_docstring(ast.parse(source.read_text())), source.name


def test_validation_rules_are_kept_for_cel() -> None:
    compiled = CompiledSchema.from_openapi({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.spec.a < 5", "message": "small"}],
        "properties": {"spec": {"type": "object", "properties": {"a": {
            "type": "integer",
            "x-kubernetes-validations": [{"rule": "self >= oldSelf", "optionalOldSelf": True,
                                          "reason": "FieldValueForbidden",
                                          "fieldPath": ".a", "messageExpression": "'x'"}]}}}},
    })
    assert compiled.validation_rules == [
        ("", (ValidationRule(rule="self.spec.a < 5", message="small"),)),
        ("properties[spec].properties[a]", (ValidationRule(
            rule="self >= oldSelf", message_expression="'x'", reason="FieldValueForbidden",
            field_path=".a", optional_old_self=True),)),
    ]
    assert compiled.has_rules
    # Rules are evaluated; one that does not compile (a CRD Kubernetes would have refused)
    # reports so at its node.
    assert [e.error() for e in compiled.validate({"spec": {"a": 10}})] == [
        '<nil>: Invalid value: "object": small',
        'spec.a: Invalid value: "integer": rule compile error: compilation failed: ERROR: '
        "<input>:1:6: found no matching overload for '_>=_' applied to '(int, "
        "optional_type(int))'\n | self >= oldSelf\n | .....^"]
    assert [e.field for e in compiled.validate({"spec": {"a": 1}})] == ["spec.a"]


def test_compiled_schema_is_reusable() -> None:
    compiled = CompiledSchema.from_openapi({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}}})
    for _ in range(3):
        obj: dict[str, Any] = {"spec": {}}
        compiled.prune(obj)
        compiled.default(obj)
        assert obj == {"spec": {"n": 1}}
        assert compiled.validate(obj) == []


# --- robustness --------------------------------------------------------------------------------

_KEYWORDS = sorted(KNOWN_KEYWORDS | {"xml", "readOnly"})
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                          st.floats(allow_nan=False, allow_infinity=False),
                          st.sampled_from(["", "a", "object", "string", "integer", "array",
                                           "map", "set", "atomic", "^a+$", "(?=x)", "date-time",
                                           "int-or-string", "name"]))
_json = st.recursive(_json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "name", "metadata",
                                                                  "kind", "apiVersion"]),
                                                 inner, max_size=3)), max_leaves=8)


def _schemas() -> st.SearchStrategy[Any]:
    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keyword_value = st.one_of(_json, inner, st.lists(inner, max_size=2),
                                  st.dictionaries(st.sampled_from(["a", "b", "metadata"]), inner,
                                                  max_size=2))
        return st.dictionaries(st.sampled_from(_KEYWORDS), keyword_value, max_size=5)

    return st.recursive(st.dictionaries(st.sampled_from(_KEYWORDS), _json, max_size=4), extend,
                        max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schemas(), obj=_json, old=_json)
def test_never_raises(schema: Any, obj: Any, old: Any) -> None:
    original = copy.deepcopy(schema)
    check_structural(schema)
    compiled = CompiledSchema.from_openapi(schema)
    compiled.validate(obj)
    compiled.validate_update(obj, old)
    compiled.prune(obj)
    compiled.default(obj)
    compiled.validate(obj)
    assert schema == original
