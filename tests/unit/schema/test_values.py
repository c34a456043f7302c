"""Value validation: kube-openapi's checks with apiextensions' messages (cases after
apiextensions-apiserver's ``pkg/apiserver/validation/validation_test.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery.fields import ErrorType
from setpoint.schema import CompiledSchema

from ._util import errors_of, obj_schema

ANY_OF_INT_STRING = [{"type": "integer"}, {"type": "string"}]

CASES: list[tuple[str, dict[str, Any], Any, list[str]]] = [
    # --- types ---------------------------------------------------------------------------------
    ("object ok", obj_schema(field={"type": "object"}), {"field": {}}, []),
    ("object vs string", obj_schema(field={"type": "object"}), {"field": "foo"},
     ['field: Invalid value: "string": field in body must be of type object: "string"']),
    ("object vs integer", obj_schema(field={"type": "object"}), {"field": 42},
     ['field: Invalid value: "integer": field in body must be of type object: "integer"']),
    ("object vs boolean", obj_schema(field={"type": "object"}), {"field": True},
     ['field: Invalid value: "boolean": field in body must be of type object: "boolean"']),
    ("object vs number", obj_schema(field={"type": "object"}), {"field": 1.2},
     ['field: Invalid value: "number": field in body must be of type object: "number"']),
    ("object vs array", obj_schema(field={"type": "object"}), {"field": []},
     ['field: Invalid value: "array": field in body must be of type object: "array"']),
    ("object vs null", obj_schema(field={"type": "object"}), {"field": None},
     ['field: Invalid value: "null": field in body must be of type object: "null"']),
    ("nullable null", obj_schema(field={"type": "object", "nullable": True}), {"field": None}, []),
    ("nullable no type", obj_schema(field={"nullable": True}), {"field": [1, "x"]}, []),
    ("integer ok", obj_schema(n={"type": "integer"}), {"n": 42}, []),
    ("integer accepts integral float", obj_schema(n={"type": "integer"}), {"n": 42.0}, []),
    ("integer rejects fraction", obj_schema(n={"type": "integer"}), {"n": 1.5},
     ['n: Invalid value: "number": n in body must be of type integer: "number"']),
    ("integer rejects float beyond 2^53", obj_schema(n={"type": "integer"}), {"n": 1e300},
     ['n: Invalid value: "number": n in body must be of type integer: "number"']),
    ("integer rejects bool", obj_schema(n={"type": "integer"}), {"n": True},
     ['n: Invalid value: "boolean": n in body must be of type integer: "boolean"']),
    ("integer rejects string", obj_schema(pages={"type": "integer"}), {"pages": "string"},
     ['pages: Invalid value: "string": pages in body must be of type integer: "string"']),
    ("number accepts integer", obj_schema(n={"type": "number"}), {"n": 3}, []),
    ("boolean", obj_schema(b={"type": "boolean"}), {"b": "true"},
     ['b: Invalid value: "string": b in body must be of type boolean: "string"']),
    ("root not an object", {"type": "object"}, "x",
     ['<nil>: Invalid value: "string":  in body must be of type object: "string"']),
    # --- int-or-string -------------------------------------------------------------------------
    ("int-or-string int", obj_schema(f={"x-kubernetes-int-or-string": True}), {"f": 42}, []),
    ("int-or-string string", obj_schema(f={"x-kubernetes-int-or-string": True}), {"f": "1%"}, []),
    ("int-or-string null", obj_schema(f={"x-kubernetes-int-or-string": True}), {"f": None},
     ['f: Invalid value: "null": f in body must be of type integer,string: "null"']),
    ("int-or-string bool", obj_schema(f={"x-kubernetes-int-or-string": True}), {"f": True},
     ['f: Invalid value: "boolean": f in body must be of type integer,string: "boolean"']),
    ("int-or-string number", obj_schema(f={"x-kubernetes-int-or-string": True}), {"f": 1.2},
     ['f: Invalid value: "number": f in body must be of type integer,string: "number"']),
    ("int-or-string nullable null",
     obj_schema(f={"x-kubernetes-int-or-string": True, "nullable": True}), {"f": None}, []),
    ("int-or-string with anyOf",
     obj_schema(f={"x-kubernetes-int-or-string": True, "anyOf": ANY_OF_INT_STRING}),
     {"f": True},
     ['<nil>: Invalid value: "": "f" must validate at least one schema (anyOf)',
      'f: Invalid value: "boolean": f in body must be of type integer,string: "boolean"',
      'f: Invalid value: "boolean": f in body must be of type integer: "boolean"']),
    ("int-or-string with allOf anyOf",
     obj_schema(f={"x-kubernetes-int-or-string": True, "allOf": [{"anyOf": ANY_OF_INT_STRING}]}),
     {"f": {}},
     ['<nil>: Invalid value: "": "f" must validate all the schemas (allOf). None validated',
      '<nil>: Invalid value: "": "f" must validate at least one schema (anyOf)',
      'f: Invalid value: "object": f in body must be of type integer,string: "object"',
      'f: Invalid value: "object": f in body must be of type integer: "object"']),
    # --- required, enum ------------------------------------------------------------------------
    ("required at root", {"type": "object", "required": ["field"],
                          "properties": {"field": {"type": "object", "required": ["nested"]}}},
     {"test": "a"}, ["field: Required value"]),
    ("required nested", {"type": "object", "required": ["field"],
                         "properties": {"field": {"type": "object", "required": ["nested"]}}},
     {"field": {}}, ["field.nested: Required value"]),
    ("required present as null is not missing",
     {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
     {"a": None}, ['a: Invalid value: "null": a in body must be of type string: "null"']),
    ("enum with types",
     obj_schema(field={"type": "object", "required": ["nestedint", "nestedstring"], "properties": {
         "nestedint": {"type": "integer", "enum": [1, 2]},
         "nestedstring": {"type": "string", "enum": ["a", "b"]}}}),
     {"field": {"nestedint": "x", "nestedstring": True}},
     ['field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: '
      '"string"',
      'field.nestedint: Unsupported value: "x": supported values: "1", "2"',
      'field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type '
      'string: "boolean"',
      'field.nestedstring: Unsupported value: true: supported values: "a", "b"']),
    ("enum unsupported", obj_schema(color={"type": "string", "enum": ["red", "blue"]}),
     {"color": "pink"}, ['color: Unsupported value: "pink": supported values: "red", "blue"']),
    ("enum ok", obj_schema(color={"type": "string", "enum": ["red", "blue"]}), {"color": "red"},
     []),
    ("enum int matches float member", obj_schema(n={"enum": [1.0]}), {"n": 1}, []),
    ("enum float truncates to int member", obj_schema(n={"enum": [1]}), {"n": 1.5}, []),
    ("enum int converts to one-rune string", obj_schema(n={"enum": ["a"]}), {"n": 97}, []),
    ("enum object member", obj_schema(o={"enum": [{"a": 1}]}), {"o": {"a": 1}}, []),
    ("enum object mismatch", obj_schema(o={"enum": [{"a": 1}]}), {"o": {"a": 2}},
     ['o: Unsupported value: "object": supported values: "{\\"a\\":1}"']),
    # --- strings -------------------------------------------------------------------------------
    ("maxLength", obj_schema(fieldX={"type": "string", "maxLength": 2}), {"fieldX": "abc"},
     ["fieldX: Too long: may not be more than 2 bytes"]),
    ("maxLength counts code points", obj_schema(s={"type": "string", "maxLength": 2}),
     {"s": "\u00e9\u00e9"}, []),
    ("minLength", obj_schema(s={"type": "string", "minLength": 2}), {"s": "a"},
     ['s: Invalid value: "a": s in body should be at least 2 chars long']),
    ("only the first string failure is reported",
     obj_schema(s={"type": "string", "maxLength": 1, "pattern": "^[0-9]+$"}), {"s": "abc"},
     ["s: Too long: may not be more than 1 bytes"]),
    ("pattern", obj_schema(name={"type": "string", "pattern": "^[a-z]+$"}), {"name": "AB"},
     ["name: Invalid value: \"AB\": name in body should match '^[a-z]+$'"]),
    ("pattern is unanchored search", obj_schema(s={"type": "string", "pattern": "b"}),
     {"s": "abc"}, []),
    ("pattern dollar is end of text", obj_schema(s={"type": "string", "pattern": "^a$"}),
     {"s": "a\n"}, ["s: Invalid value: \"a\\n\": s in body should match '^a$'"]),
    ("invalid pattern",
     obj_schema(field={"type": "string", "pattern": "+"}), {"field": "foo"},
     ["field: Invalid value: \"foo\": field in body should match '+, but pattern is invalid: "
      "error parsing regexp: missing argument to repetition operator: `+`'"]),
    # --- formats -------------------------------------------------------------------------------
    ("date-time ok", obj_schema(t={"type": "string", "format": "date-time"}),
     {"t": "2024-01-02T03:04:05Z"}, []),
    ("date-time bad", obj_schema(t={"type": "string", "format": "date-time"}), {"t": "nope"},
     ['t: Invalid value: "nope": t in body must be of type date-time: "nope"']),
    ("email bad", obj_schema(e={"type": "string", "format": "email"}), {"e": "x"},
     ['e: Invalid value: "x": e in body must be of type email: "x"']),
    ("unknown format ignored", obj_schema(e={"type": "string", "format": "foo"}), {"e": "x"}, []),
    ("1.34 format ignored", obj_schema(e={"type": "string", "format": "k8s-short-name"}),
     {"e": "A_"}, []),
    ("string format on integer stripped", obj_schema(n={"type": "integer", "format": "email"}),
     {"n": 5}, []),
    ("int32 rejects fraction", obj_schema(n={"type": "integer", "format": "int32"}), {"n": 1.5},
     ['n: Invalid value: "float64": n in body must be of type int32: "float64"']),
    ("int64 rejects huge float", obj_schema(n={"type": "integer", "format": "int64"}),
     {"n": 1.01e19},
     ['n: Invalid value: "float64": n in body must be of type int64: "float64"']),
    ("formatted string vs integer", obj_schema(d={"type": "string", "format": "date"}), {"d": 5},
     ['d: Invalid value: "int64": d in body must be of type date: "int64"']),
    ("formatted string vs bool", obj_schema(d={"type": "string", "format": "date"}), {"d": True},
     ['d: Invalid value: "": d in body must be of type date: ""']),
    ("formatted string vs array passes the type check",
     obj_schema(d={"type": "string", "format": "date"}), {"d": []}, []),
    # --- numbers -------------------------------------------------------------------------------
    ("maximum", obj_schema(n={"type": "integer", "maximum": 10}), {"n": 11},
     ["n: Invalid value: 11: n in body should be less than or equal to 10"]),
    ("exclusiveMaximum", obj_schema(n={"type": "integer", "maximum": 10,
                                       "exclusiveMaximum": True}), {"n": 10},
     ["n: Invalid value: 10: n in body should be less than 10"]),
    ("minimum", obj_schema(n={"type": "integer", "minimum": 1}), {"n": 0},
     ["n: Invalid value: 0: n in body should be greater than or equal to 1"]),
    ("exclusiveMinimum", obj_schema(n={"type": "integer", "minimum": 1,
                                       "exclusiveMinimum": True}), {"n": 1},
     ["n: Invalid value: 1: n in body should be greater than 1"]),
    ("integer against fractional maximum is truncated",
     obj_schema(n={"type": "integer", "maximum": 10.5}), {"n": 11},
     ["n: Invalid value: 11: n in body should be less than or equal to 10"]),
    ("number maximum", obj_schema(n={"type": "number", "maximum": 1.5}), {"n": 2.5},
     ["n: Invalid value: 2.5: n in body should be less than or equal to 1.5"]),
    ("float maximum printed like Go", obj_schema(n={"type": "number", "maximum": 1e8}),
     {"n": 2.5e8}, ["n: Invalid value: 2.5e+08: n in body should be less than or equal to "
                    "1e+08"]),
    ("multipleOf int", obj_schema(n={"type": "integer", "multipleOf": 3}), {"n": 7},
     ["n: Invalid value: 7: n in body should be a multiple of 3"]),
    ("multipleOf int ok", obj_schema(n={"type": "integer", "multipleOf": 3}), {"n": -9}, []),
    ("multipleOf below one on an integer", obj_schema(n={"type": "integer", "multipleOf": 0.5}),
     {"n": 3}, ["n: Invalid value: 0: factor MultipleOf declared for n must be positive: 0"]),
    ("multipleOf float ok", obj_schema(n={"type": "number", "multipleOf": 0.1}), {"n": 0.3}, []),
    ("multipleOf float", obj_schema(n={"type": "number", "multipleOf": 0.1}), {"n": 0.35},
     ["n: Invalid value: 0.35: n in body should be a multiple of 0.1"]),
    # --- arrays --------------------------------------------------------------------------------
    ("items", obj_schema(a={"type": "array", "items": {"type": "string"}}), {"a": ["x", 1]},
     ['a[1]: Invalid value: "integer": a[1] in body must be of type string: "integer"']),
    ("minItems", obj_schema(a={"type": "array", "items": {}, "minItems": 2}), {"a": [1]},
     ["a: Invalid value: 1: a in body should have at least 2 items"]),
    ("maxItems", obj_schema(fieldX={"type": "array", "maxItems": 2}), {"fieldX": ["a", "b", "c"]},
     ["fieldX: Too many: 3: must have at most 2 items"]),
    ("uniqueItems", obj_schema(a={"type": "array", "uniqueItems": True}),
     {"a": [{"x": 1}, {"x": 1}]},
     ['a: Invalid value: "": a in body shouldn\'t contain duplicates']),
    ("uniqueItems tells 1 and 1.0 apart", obj_schema(a={"type": "array", "uniqueItems": True}),
     {"a": [1, 1.0, True]}, []),
    # --- objects -------------------------------------------------------------------------------
    ("minProperties", obj_schema(o={"type": "object", "minProperties": 2}), {"o": {"a": 1}},
     ["o: Invalid value: 1: o in body should have at least 2 properties"]),
    ("maxProperties", obj_schema(fieldX={"type": "object", "maxProperties": 2}),
     {"fieldX": {"a": True, "b": True, "c": True}},
     ["fieldX: Too many: 3: must have at most 2 items"]),
    ("additionalProperties schema",
     obj_schema(labels={"type": "object", "additionalProperties": {"type": "string"}}),
     {"labels": {"a": "b", "c": 1}},
     ['labels.c: Invalid value: "integer": labels.c in body must be of type string: "integer"']),
    ("additionalProperties false", obj_schema(o={"type": "object", "additionalProperties": False}),
     {"o": {"x": 1}}, ['o: Invalid value: "x": o.x in body is a forbidden property']),
    ("additionalProperties true accepts anything",
     obj_schema(o={"type": "object", "additionalProperties": True}), {"o": {"x": [1]}}, []),
    ("nested map of objects",
     obj_schema(m={"type": "object", "additionalProperties": {
         "type": "object", "properties": {"x": {"type": "integer", "minimum": 0}}}}),
     {"m": {"k": {"x": -1}}},
     ["m.k.x: Invalid value: -1: m.k.x in body should be greater than or equal to 0"]),
    # --- junctors ------------------------------------------------------------------------------
    ("allOf", obj_schema(s={"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 5}]}),
     {"s": "a"},
     ['<nil>: Invalid value: "": "s" must validate all the schemas (allOf)',
      's: Invalid value: "a": s in body should be at least 2 chars long']),
    ("anyOf satisfied", obj_schema(s={"type": "string", "anyOf": [{"minLength": 5},
                                                                  {"maxLength": 1}]}),
     {"s": "a"}, []),
    ("anyOf reports the first best branch",
     obj_schema(s={"type": "string", "anyOf": [{"minLength": 5}, {"maxLength": 1}]}), {"s": "abc"},
     ['<nil>: Invalid value: "": "s" must validate at least one schema (anyOf)',
      's: Invalid value: "abc": s in body should be at least 5 chars long']),
    ("anyOf reports the branch with most checks",
     obj_schema(o={"type": "object", "properties": {"a": {"type": "string"}},
                   "anyOf": [{"minProperties": 3}, {"properties": {"a": {"pattern": "^x"}}}]}),
     {"o": {"a": "y"}},
     ['<nil>: Invalid value: "": "o" must validate at least one schema (anyOf)',
      "o.a: Invalid value: \"y\": o.a in body should match '^x'"]),
    ("oneOf two valid", obj_schema(s={"type": "string", "oneOf": [{"minLength": 1},
                                                                  {"maxLength": 5}]}),
     {"s": "abc"},
     ['<nil>: Invalid value: "": "s" must validate one and only one schema (oneOf). Found 2 valid '
      'alternatives']),
    ("oneOf none valid", obj_schema(s={"type": "string", "oneOf": [{"minLength": 5},
                                                                   {"pattern": "^z"}]}),
     {"s": "abc"},
     ['<nil>: Invalid value: "": "s" must validate one and only one schema (oneOf). Found none '
      'valid',
      's: Invalid value: "abc": s in body should be at least 5 chars long']),
    ("oneOf exactly one", obj_schema(s={"type": "string", "oneOf": [{"minLength": 5},
                                                                    {"pattern": "^a"}]}),
     {"s": "abc"}, []),
    ("not", obj_schema(s={"type": "string", "not": {"enum": ["forbidden"]}}), {"s": "forbidden"},
     ['<nil>: Invalid value: "": "s" must not validate the schema (not)']),
    ("junctors skip null", obj_schema(s={"nullable": True, "allOf": [{"minLength": 2}]}),
     {"s": None}, []),
]


@pytest.mark.parametrize(("schema", "obj", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_validate(schema: dict[str, Any], obj: Any, expected: list[str]) -> None:
    assert sorted(errors_of(schema, obj)) == sorted(expected)


def test_errors_are_sorted_and_structured() -> None:
    schema = obj_schema(b={"type": "integer", "maximum": 1}, a={"type": "array", "maxItems": 1},
                        c={"type": "string", "maxLength": 1})
    errs = CompiledSchema.from_openapi(schema).validate({"c": "xx", "b": 5, "a": [1, 2, 3]})
    assert [e.field for e in errs] == ["a", "b", "c"]
    too_many, invalid, too_long = errs
    assert (too_many.type, too_many.detail) == (ErrorType.TOO_MANY, "must have at most 1 items")
    assert (invalid.type, invalid.value) == (ErrorType.INVALID, 5)
    assert too_long.type is ErrorType.TOO_LONG


def test_enum_never_matches_null() -> None:
    schema = obj_schema(n={"nullable": True, "enum": ["a", None]})
    errs = CompiledSchema.from_openapi(schema).validate({"n": None})
    assert [(e.type, e.field, e.value, e.supported) for e in errs] == [
        (ErrorType.NOT_SUPPORTED, "n", None, ("a", "null"))]


def test_duplicate_errors_collapse() -> None:
    schema = obj_schema(s={"type": "string", "allOf": [{"minLength": 3}, {"minLength": 3}]})
    assert errors_of(schema, {"s": "a"}) == [
        '<nil>: Invalid value: "": "s" must validate all the schemas (allOf). None validated',
        's: Invalid value: "a": s in body should be at least 3 chars long',
    ]


def test_validation_does_not_mutate() -> None:
    schema = obj_schema(a={"type": "object", "properties": {"b": {"type": "string"}}})
    obj = {"a": {"b": 1, "unknown": None}, "x": None}
    snapshot = repr(obj)
    CompiledSchema.from_openapi(schema).validate(obj)
    assert repr(obj) == snapshot


COUNT_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string", "maxLength": 3, "format": "date", "enum": ["a"]},
    {"type": "object", "properties": {"a": {"type": "integer", "maximum": 3}},
     "required": ["b"], "anyOf": [{"minProperties": 5}]},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 3},
    {"type": "integer", "format": "int32", "multipleOf": 2},
    {"type": "number", "minimum": 1},
    {"type": "boolean", "enum": [True]},
    {"x-kubernetes-int-or-string": True},
    {"x-kubernetes-int-or-string": True, "pattern": "^[0-9]+%$", "maximum": 5},
    {"type": "string"},
    {"type": "boolean"},
]
COUNT_VALUES: list[Any] = ["x", "2024-01-01", 1, 2.0, 2.5, 1 << 70, True, None, [], [True, 1],
                           {}, {"a": 1}, {"a": "x", "b": None}]


@pytest.mark.parametrize("schema", COUNT_SCHEMAS, ids=[str(i) for i in range(len(COUNT_SCHEMAS))])
def test_fast_paths_agree_with_the_generic_validator(schema: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Specialised validators give kube-openapi's errors and match counts, as the generic one."""
    from setpoint.schema import values
    from setpoint.schema.structural import parse

    wrapped = {"type": "object", "properties": {"p": schema}}
    fast = values.compile_validator(parse(schema))
    fast_wrapped = values.compile_validator(parse(wrapped))
    monkeypatch.setattr(values._Compiler, "_fast_path", staticmethod(lambda *a: a[2]))
    monkeypatch.setattr(values.CompiledNode, "__init__", _without_shortcut(values.CompiledNode))
    generic = values.compile_validator(parse(schema))
    generic_wrapped = values.compile_validator(parse(wrapped))
    for value in COUNT_VALUES:
        for a, b, v in ((fast, generic, value), (fast_wrapped, generic_wrapped, {"p": value})):
            a_errs: values.Errs = []
            b_errs: values.Errs = []
            assert a.validate(v, "v", a_errs) == b.validate(v, "v", b_errs)
            assert a_errs == b_errs


def _without_shortcut(cls: Any) -> Any:
    original = cls.__init__

    def init(self: Any, node: Any, validate: Any, ratchet: Any, equal: Any,
             trivial: Any = None) -> None:
        original(self, node, validate, ratchet, equal, None)

    return init
