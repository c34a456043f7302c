"""``x-kubernetes-embedded-resource``: TypeMeta and ObjectMeta checks (after apiextensions'
``objectmeta/validation_test.go``) and the metadata coercion done while pruning."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.schema import CompiledSchema

from ._util import errors_of, obj_schema

EMBEDDED = obj_schema(template={"type": "object", "x-kubernetes-embedded-resource": True,
                                "x-kubernetes-preserve-unknown-fields": True})
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
           "with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',"
           "  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
QNAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
         "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
         "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")

CASES: list[tuple[str, Any, list[str]]] = [
    ("valid", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, []),
    ("metadata optional", {"apiVersion": "apps/v1", "kind": "Deployment"}, []),
    ("typemeta required", {}, ["template.apiVersion: Required value",
                               "template.kind: Required value"]),
    ("apiVersion must be a string", {"apiVersion": 1, "kind": "Pod"},
     ["template.apiVersion: Invalid value: 1: must be a string"]),
    ("apiVersion not empty", {"apiVersion": "", "kind": "Pod"},
     ['template.apiVersion: Invalid value: "": must not be empty']),
    ("apiVersion with two slashes", {"apiVersion": "a/b/c", "kind": "Pod"},
     ['template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c']),
    ("kind may have mixed case", {"apiVersion": "v1", "kind": "ConfigMap"}, []),
    ("kind must be a DNS-1035 label", {"apiVersion": "v1", "kind": "Config_Map"},
     ['template.kind: Invalid value: "Config_Map": may have mixed case, but should otherwise '
      "match: " + DNS1035]),
    ("name is a path segment", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a/b"}},
     ["template.metadata.name: Invalid value: \"a/b\": may not contain '/'"]),
    ("name may not be ..", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ".."}},
     ["template.metadata.name: Invalid value: \"..\": may not be '..'"]),
    ("generateName is a path segment prefix",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "x%"}},
     ["template.metadata.generateName: Invalid value: \"x%\": may not contain '%'"]),
    ("namespace is a DNS label",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "Not_Valid"}},
     ['template.metadata.namespace: Invalid value: "Not_Valid": a lowercase RFC 1123 label must '
      "consist of lower case alphanumeric characters or '-', and must start and end with an "
      "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
      "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ("labels", {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"-x": "ok"}}},
     ['template.metadata.labels: Invalid value: "-x": ' + QNAME]),
    ("metadata must decode", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}},
     ['template.metadata: Invalid value: "object": json: cannot unmarshal number into Go struct '
      "field ObjectMeta.name of type string"]),
    ("negative generation", {"apiVersion": "v1", "kind": "Pod", "metadata": {"generation": -1}},
     ["template.metadata.generation: Invalid value: -1: must be greater than or equal to 0"]),
    # Kubernetes' ValidateOwnerReferences, as for any object: no index in the path
    ("owner references", {"apiVersion": "v1", "kind": "Pod", "metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"},
        {"apiVersion": "", "kind": "", "name": "", "uid": ""}]}},
     ['template.metadata.ownerReferences: Invalid value: "object": /v1, Kind=Event is '
      "disallowed from being an owner",
      'template.metadata.ownerReferences.apiVersion: Invalid value: "": version must not be '
      "empty",
      'template.metadata.ownerReferences.kind: Invalid value: "": kind must not be empty',
      'template.metadata.ownerReferences.name: Invalid value: "": name must not be empty',
      'template.metadata.ownerReferences.uid: Invalid value: "": uid must not be empty']),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_embedded_resource(value: Any, expected: list[str]) -> None:
    assert sorted(errors_of(EMBEDDED, {"template": value})) == sorted(expected)


def test_embedded_in_lists_and_maps() -> None:
    item = {"type": "object", "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True}
    schema = obj_schema(list={"type": "array", "items": item},
                        map={"type": "object", "additionalProperties": item})
    assert errors_of(schema, {"list": [{"kind": "A"}], "map": {"k": {"apiVersion": "v1"}}}) == [
        "list[0].apiVersion: Required value",
        "map[k].kind: Required value",
    ]


def test_root_metadata_is_left_to_the_caller() -> None:
    compiled = CompiledSchema.from_openapi({"type": "object"})
    assert compiled.validate({"metadata": {"name": "a/b", "labels": {"-": 1}}}) == []


def test_prune_coerces_embedded_metadata() -> None:
    compiled = CompiledSchema.from_openapi(obj_schema(template={
        "type": "object", "x-kubernetes-embedded-resource": True,
        "properties": {"spec": {"type": "object"}}}))
    obj = {"template": {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "p", "labels": None, "bogus": 1}, "spec": {}}}
    assert compiled.prune(obj) == ["template.metadata.bogus"]
    assert obj == {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                "spec": {}}}
