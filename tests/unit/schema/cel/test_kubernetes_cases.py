"""Schema-typed rules from apiextensions-apiserver's ``TestValidationExpressions``: for each
schema and object, the ``valid`` rules hold and the ``errors`` rules fail with the given text
(compile-time or run-time)."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery.fields import FieldPath
from setpoint.schema import cel
from setpoint.schema.structural import parse

INT = {"type": "integer"}
STR = {"type": "string"}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


_ESCAPED_NAMES = [
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void",
    "while",
]
_LANGUAGE_NAMES = ["int", "uint", "double", "bool", "string", "bytes", "list", "map",
                   "null_type", "type"]

GROUPS: list[tuple[str, dict[str, Any], Any, list[str], dict[str, str]]] = [
    ("escaping",
     _obj(**{n: INT for n in _ESCAPED_NAMES + _LANGUAGE_NAMES},
          self=INT, getDate=INT, all=INT, size=STR, _true=INT, **{
              "dot.dot": INT, "dash-dash": INT, "slash/slash": INT,
              "underscore_underscore": INT, "doubleunderscore__doubleunderscore": INT}),
     {**{n: i + 1 for i, n in enumerate(_ESCAPED_NAMES)},
      **{n: 101 + i for i, n in enumerate(_LANGUAGE_NAMES)},
      "self": 201, "getDate": 202, "all": 203, "size": "204", "_true": 301, "dot.dot": 401,
      "dash-dash": 402, "slash/slash": 403, "underscore_underscore": 404,
      "doubleunderscore__doubleunderscore": 405},
     [*(f"self.__{n}__ == {i + 1}" for i, n in enumerate(_ESCAPED_NAMES)),
      *(f"self.{n} == {101 + i}" for i, n in enumerate(_LANGUAGE_NAMES)),
      "self.self == 201", "self.getDate == 202", "self.all == 203", "self.size == '204'",
      "self._true == 301", "self.__true__ != 301", "self.dot__dot__dot == 401",
      "self.dash__dash__dash == 402", "self.slash__slash__slash == 403",
      "self.underscore_underscore == 404",
      "self.doubleunderscore__underscores__doubleunderscore == 405"],
     {"self.true == 1": "mismatched input 'true' expecting IDENTIFIER",
      "self == 201": "found no matching overload for '_==_'",
      "self.__illegal__ == 301": "undefined field '__illegal__'"}),
    ("map keys are not escaped",
     _obj(m={"type": "object", "additionalProperties": INT}),
     {"m": {"@": 1, "9": 2, "int": 3, "./-": 4, "👑": 5}},
     ["self.m['@'] == 1", "self.m['9'] == 2", "self.m['int'] == 3", "self.m['./-'] == 4",
      "self.m['👑'] == 5"], {}),
    ("preserve unknown fields",
     _obj(withUnknown={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
          withUnknownList={"type": "array", "items": {
              "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
          withUnknownFieldList={"type": "array", "items": _obj(
              fieldOfUnknownType={"x-kubernetes-preserve-unknown-fields": True})},
          anyvalList={"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}},
          anyvalField1={"x-kubernetes-preserve-unknown-fields": True}),
     {"withUnknown": {"field1": "a", "field2": "b"},
      "withUnknownList": [{"field1": "a", "field2": "b"}, {"field1": "x", "field2": "y"},
                          {"field1": "x", "field2": "y"}, {}, {}],
      "withUnknownFieldList": [{"fieldOfUnknownType": "a"}, {"fieldOfUnknownType": 1},
                               {"fieldOfUnknownType": 1}],
      "anyvalList": ["a", 2], "anyvalField1": 1},
     ["has(self.withUnknown)", "self.withUnknownList.size() == 5",
      "self.withUnknownList[0] != self.withUnknownList[1]",
      "self.withUnknownList[1] == self.withUnknownList[2]",
      "self.withUnknownList[3] == self.withUnknownList[4]",
      "self.withUnknownFieldList[0] != self.withUnknownFieldList[1]",
      "self.withUnknownFieldList[1] == self.withUnknownFieldList[2]"],
     {"has(self.withUnknown.field1)": "undefined field 'field1'",
      "has(self.anyvalList)": "undefined field 'anyvalList'",
      "has(self.anyvalField1)": "undefined field 'anyvalField1'"}),
    ("known and unknown fields",
     _obj(withUnknown={**_obj(known=INT), "x-kubernetes-preserve-unknown-fields": True},
          withUnknownList={"type": "array", "items": {
              **_obj(known=INT), "x-kubernetes-preserve-unknown-fields": True}}),
     {"withUnknown": {"known": 1, "unknown": "a"},
      "withUnknownList": [{"known": 1, "unknown": "a"}, {"known": 1, "unknown": "b"},
                          {"known": 1, "unknown": "b"}, {"known": 1}, {"known": 1},
                          {"known": 2}]},
     ["self.withUnknown.known == 1",
      "self.withUnknownList[1] == self.withUnknownList[2]",
      "self.withUnknownList[0] != self.withUnknownList[1]",
      "self.withUnknownList[0] != self.withUnknownList[3]",
      "self.withUnknownList[0] != self.withUnknownList[5]",
      "self.withUnknownList[3] == self.withUnknownList[4]",
      "self.withUnknownList[4] != self.withUnknownList[5]"],
     {"has(self.withUnknown.unknown)": "undefined field 'unknown'"}),
    ("field nullability",
     _obj(unsetPlainStr=STR, unsetNullableStr=_nullable(STR), setPlainStr=STR,
          setNullableStr=_nullable(STR), setToNullNullableStr=_nullable(STR)),
     {"setPlainStr": "v1", "setNullableStr": "v3", "setToNullNullableStr": None},
     ["!has(self.unsetPlainStr)", "!has(self.unsetNullableStr)",
      "has(self.setPlainStr) && self.setPlainStr == 'v1'",
      "has(self.setNullableStr) && self.setNullableStr == 'v3'",
      "type(self.setNullableStr) != null_type", "!has(self.setToNullNullableStr)"],
     {"self.unsetPlainStr == null":
      "no matching overload for '_==_' applied to '(string, null_type)'",
      "self.setNullableStr != null":
      "no matching overload for '_!=_' applied to '(string, null_type)'",
      "self.unsetPlainStr == 'x'": "no such key: unsetPlainStr"}),
    ("null values in container types",
     _obj(m={"type": "object", "additionalProperties": _nullable(STR)},
          l={"type": "array", "items": _nullable(STR)},
          s={"type": "array", "x-kubernetes-list-type": "set", "items": _nullable(STR)}),
     {"m": {"a": None, "b": "not-nil"}, "l": [None, "not-nil"], "s": [None, "not-nil"]},
     ["self.m.size() == 2", "'a' in self.m", "type(self.m['a']) == null_type",
      "self.l.size() == 2", "type(self.l[0]) == null_type", "self.s.size() == 2",
      "type(self.s[0]) == null_type"], {}),
    ("object types are not accessible",
     _obj(nestedInMap={"type": "object", "additionalProperties": _obj(inMapField=INT)},
          nestedInList={"type": "array", "items": _obj(inListField=INT)}),
     {"nestedInMap": {"k1": {"inMapField": 1}, "k2": {"inMapField": 2}},
      "nestedInList": [{"inListField": 1}, {"inListField": 2}]},
     ["type(self) == type(self)",
      "type(self.nestedInMap['k1']) == type(self.nestedInMap['k2'])",
      "type(self.nestedInList[0]) == type(self.nestedInList[1])"],
     {"string(type(self.nestedInList[0])).endsWith('.nestedInList.@idx')":
      "found no matching overload for 'string' applied to '(type"}),
    ("listMaps with unsupported identity characters in property names",
     _obj(objs={"type": "array", "items": {
         "type": "array", "x-kubernetes-list-type": "map",
         "x-kubernetes-list-map-keys": ["k!", "k."], "items": _obj(**{"k!": STR, "k.": STR})}}),
     {"objs": [[{"k!": "a", "k.": "1"}, {"k!": "b", "k.": "2"}],
               [{"k!": "b", "k.": "2"}, {"k!": "a", "k.": "1"}],
               [{"k!": "b", "k.": "2"}, {"k!": "c", "k.": "1"}],
               [{"k!": "b", "k.": "2"}, {"k!": "a", "k.": "3"}]]},
     ["self.objs[0] == self.objs[1]", "self.objs[0][0].k__dot__ == '1'",
      "self.objs[0] != self.objs[2]", "self.objs[0] != self.objs[3]"],
     {"self.objs[0][0].k! == '1'": "Syntax error: mismatched input '!'"}),
    ("typemeta and objectmeta access specified",
     _obj(kind=STR, apiVersion=STR, metadata=_obj(name=STR, generateName=STR)),
     {"apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "foo", "generateName": "pickItForMe", "namespace": "xyz"}},
     ["self.kind == 'Pod'", "self.apiVersion == 'v1'", "self.metadata.name == 'foo'",
      "self.metadata.generateName == 'pickItForMe'"],
     {"has(self.metadata.namespace)": "undefined field 'namespace'"}),
    ("embedded object",
     _obj(embedded={"type": "object", "x-kubernetes-embedded-resource": True}),
     {"embedded": {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "foo", "generateName": "pickItForMe",
                                "namespace": "xyz"},
                   "spec": {"field1": "a"}}},
     ["self.embedded.kind == 'Pod'", "self.embedded.apiVersion == 'v1'",
      "self.embedded.metadata.name == 'foo'",
      "self.embedded.metadata.generateName == 'pickItForMe'"],
     {"has(self.embedded.metadata.namespace)": "undefined field 'namespace'",
      "has(self.embedded.spec)": "undefined field 'spec'"}),
    ("embedded object with properties",
     _obj(embedded={**_obj(kind=STR, apiVersion=STR,
                           metadata=_obj(name=STR, generateName=STR),
                           spec=_obj(field1=STR)),
                    "x-kubernetes-embedded-resource": True}),
     {"embedded": {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "foo", "generateName": "pickItForMe",
                                "namespace": "xyz"},
                   "spec": {"field1": "a"}}},
     ["self.embedded.kind == 'Pod'", "self.embedded.metadata.name == 'foo'",
      "self.embedded.spec.field1 == 'a'"],
     {"has(self.embedded.metadata.namespace)": "undefined field 'namespace'"}),
    ("reserved keywords as field names",
     _obj(embedded={**_obj(kind=STR, apiVersion=STR,
                           metadata=_obj(name=STR, generateName=STR, namespace=STR),
                           spec=_obj(**{"if": STR})),
                    "x-kubernetes-embedded-resource": True}),
     {"embedded": {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "foo", "namespace": "reserved_keyword_namespace"},
                   "spec": {"if": "reserved_keyword_if"}}},
     ["has(self.embedded.metadata.namespace)",
      "self.embedded.metadata.namespace == 'reserved_keyword_namespace'",
      "has(self.embedded.spec.if)", "self.embedded.spec.if == 'reserved_keyword_if'",
      "self.embedded.spec.__if__ == 'reserved_keyword_if'"], {}),
    ("embedded object with preserve unknown",
     _obj(embedded={"type": "object", "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True}),
     {"embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "foo"},
                   "spec": {"field1": "a"}}},
     ["self.embedded.kind == 'Pod'", "self.embedded.metadata.name == 'foo'",
      "has(self.embedded)"],
     {"has(self.embedded.spec)": "undefined field 'spec'"}),
    ("string in intOrString", _obj(something={"x-kubernetes-int-or-string": True}),
     {"something": "25%"},
     ["self.something == '25%'", "self.something != 1",
      "self.something == 1 || self.something == '25%'",
      "self.something == '25%' || self.something == 1",
      "type(self.something) == string && self.something == '25%'",
      "type(self.something) == int ? self.something == 1 : self.something == '25%'",
      "self.something != ['anything']"], {}),
    ("int in intOrString", _obj(something={"x-kubernetes-int-or-string": True}),
     {"something": 1},
     ["self.something == 1", "self.something != 'some string'",
      "type(self.something) == int && self.something == 1",
      "type(self.something) == int ? self.something == 1 : self.something == '25%'"], {}),
    ("null in intOrString",
     _obj(something={"x-kubernetes-int-or-string": True, "nullable": True}),
     {"something": None}, ["!has(self.something)"],
     {"type(self.something) == int": "no such key"}),
    ("percent comparison using intOrString",
     _obj(min={"x-kubernetes-int-or-string": True}, current=INT, available=INT),
     {"min": "50%", "current": 5, "available": 10},
     [r"type(self.min) == string && self.min.matches(r'(\d+(\.\d+)?%)')",
      "type(self.min) == int ? self.current <= self.min : double(self.current) / "
      "double(self.available) >= double(self.min.replace('%', '')) / 100.0"], {}),
    ("conversions",
     _obj(**{f"val{i + 1}": sch for i, sch in enumerate([
         INT, {"type": "number"}, {"type": "number"}, {"type": "number"}, {"type": "boolean"},
         STR, {"type": "string", "format": "byte"}, STR,
         {"type": "string", "format": "duration"}, STR,
         {"type": "string", "format": "date-time"}, STR,
         {"type": "string", "format": "date"}])}),
     {f"val{i + 1}": v for i, v in enumerate([
         10, 10.0, 10.49, 10.5, True, "10", "MTA=", "3723.004s", "1h2m3s4ms",
         "2011-08-18T19:03:37.01+01:00", "2011-08-18T19:03:37.01+01:00",
         "2011-08-18T00:00:00Z", "2011-08-18"])},
     ["int(self.val2) == self.val1", "int(self.val3) == self.val1",
      "int(self.val4) == self.val1", "int(self.val6) == self.val1",
      "double(self.val1) == self.val2", "double(self.val6) == self.val2",
      "bytes(self.val6) == self.val7", "string(self.val1) == self.val6",
      "string(self.val2) == '10'", "string(self.val3) == '10.49'",
      "string(self.val4) == '10.5'", "string(self.val5) == 'true'",
      "string(self.val7) == self.val6", "duration(self.val8) == self.val9",
      "string(self.val9) == self.val8", "timestamp(self.val10) == self.val11",
      "string(self.val11) == self.val10", "timestamp(self.val12) == self.val13",
      "string(self.val13) == self.val12"], {}),
    ("lists", _obj(val1={"type": "array", "items": INT}, val2={"type": "array", "items": INT}),
     {"val1": [1, 2, 3], "val2": [1, 2, 3]},
     ["self.val1 == self.val2", "self.val1 == [1, 2, 3]", "1 in self.val1",
      "self.val2[0] in self.val1", "!(0 in self.val1)",
      "self.val1 + self.val2 == [1, 2, 3, 1, 2, 3]", "self.val1 + [4, 5] == [1, 2, 3, 4, 5]"],
     {"[1, 'a', false].filter(x, string(x) == 'a')":
      "compilation failed: ERROR: <input>:1:5: expected type 'int' but found 'string'"}),
    ("ext lists version 3", _obj(), {},
     ["lists.range(4) == [0,1,2,3]", "lists.range(0) == []", "[5,1,2,3].reverse() == [3,2,1,5]",
      "[].reverse() == []", "[false, true, true].reverse().reverse() == [false, true, true]",
      "[1,2,3,4].slice(0, 4) == [1,2,3,4]", "[1,2,3,4].slice(4, 4) == []",
      "[1,2,3,4].slice(1, 3) == [2, 3]", "dyn([]).flatten() == []",
      "dyn([1,2,3,4]).flatten() == [1,2,3,4]", "[].sort() == []",
      "[4, 3, 2, 1].sort() == [1, 2, 3, 4]", '["d", "a", "b", "c"].sort() == ["a", "b", "c", "d"]',
      "[].sortBy(e, e) == []", "[-3, 1, -5, -2, 4].sortBy(e, -(e * e)) == [-5, 4, -3, -2, 1]",
      "lists.range(3).sortBy(e, -e) == [2, 1, 0]",
      '["a", "c", "b", "first"].sortBy(e, e == "first" ? "" : e) == ["first", "a", "b", "c"]',
      "[{'name': 'foo'}, {'name': 'bar'}, {'name': 'baz'}].sortBy(e, e.name) == "
      "[{'name': 'bar'}, {'name': 'baz'}, {'name': 'foo'}]",
      "[-2, 5, -2, 1, 1, 5, -2, 1].distinct() == [-2, 5, 1]",
      "[[1], [1], [2]].distinct() == [[1], [2]]",
      "[{'name': 'a'}, {'name': 'b'}, {'name': 'a'}].distinct() == [{'name': 'a'}, {'name': 'b'}]",
      "[[1],[2],[3,4]].flatten() == [1,2,3,4]"],
     {"[1,2,3,4].slice(3, 0) != [1,2]":
      "cannot slice(3, 0), start index must be less than or equal to end index",
      "[1,2,3,4].slice(0, 10) != [1,2]": "cannot slice(0, 10), list is length 4",
      "[1,2,3,4].slice(-5, 10) != [1,2]": "cannot slice(-5, 10), negative indexes not supported",
      "[[1],[2],[3,4]].flatten(-1) == [1,2,3,4]": "level must be non-negative evaluating rule: "
                                                 "[[1],[2],[3,4]].flatten(-1) == [1,2,3,4]",
      '["d", 3, 2, "c"].sort() == ["a", "b", "c", "d"]': "expected type 'string' but found 'int'"}),
    ("listMaps",
     _obj(objs={"type": "array", "items": {
         "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
         "items": _obj(k=STR, v=STR)}}),
     {"objs": [[{"k": "a", "v": "1"}, {"k": "b", "v": "2"}],
               [{"k": "b", "v": "2"}, {"k": "a", "v": "1"}],
               [{"k": "b", "v": "3"}, {"k": "a", "v": "1"}],
               [{"k": "c", "v": "4"}]]},
     ["self.objs[0] == self.objs[1]", "self.objs[0] + self.objs[2] == self.objs[2]",
      "self.objs[2] + self.objs[0] == self.objs[0]",
      "self.objs[0] == [self.objs[0][0], self.objs[0][1]]",
      "self.objs[0] == [self.objs[0][1], self.objs[0][0]]",
      "self.objs[2] + [self.objs[0][0], self.objs[0][1]] == self.objs[0]",
      "size(self.objs[0] + [self.objs[3][0]]) == 3"],
     {"self.objs[0] == {'k': 'a', 'v': '1'}": "no matching overload for '_==_'"}),
    ("maps",
     _obj(val1={"type": "object", "additionalProperties": STR},
          val2={"type": "object", "additionalProperties": STR}),
     {"val1": {"k1": "a", "k2": "b"}, "val2": {"k2": "b", "k1": "a"}},
     ["self.val1 == self.val2", "'k1' in self.val1", "!('k3' in self.val1)",
      "self.val1 == {'k1': 'a', 'k2': 'b'}"],
     {"{'k1': 'a', 'k2': 1, 'k2': false}": "expected type 'string' but found 'int'"}),
    ("objects", _obj(objs={"type": "array", "items": _obj(f1=STR, f2=STR)}),
     {"objs": [{"f1": "a", "f2": "b"}, {"f1": "a", "f2": "b"}]},
     ["self.objs[0] == self.objs[1]"],
     {"self.objs[0] == {'f1': 'a', 'f2': 'b'}": "found no matching overload for '_==_'"}),
    ("enums", _obj(enumStr={**STR, "enum": ["Pending", "Available", "Bound"]}),
     {"enumStr": "Pending"},
     ["self.enumStr == 'Pending'", "self.enumStr in ['Pending', 'Available']"], {}),
    ("object access",
     _obj(a=_obj(b=INT, c=INT, d=_nullable(INT)), a1=_obj(b1=_obj(c1=INT), d2=_obj(e2=INT))),
     {"a": {"b": 1, "d": None}, "a1": {"b1": {"c1": 4}}, "a3": {}},
     ["has(self.a.b)", "!has(self.a.c)", "!has(self.a.d)", "has(self.a1.b1.c1)",
      "!(has(self.a1.d2) && has(self.a1.d2.e2))", "!has(self.a1.d2)"],
     {"has(self.a.z)": "undefined field 'z'",
      "self.a['b'] == 1": "no matching overload for '_[_]'",
      "has(self.a1.d2.e2)": "no such key: d2"}),
    ("container type composition",
     _obj(obj=_obj(field=STR),
          mapOfMap={"type": "object", "additionalProperties": {
              "type": "object", "additionalProperties": STR}},
          mapOfObj={"type": "object", "additionalProperties": _obj(field2=STR)},
          mapOfListMap={"type": "object", "additionalProperties": {
              "type": "array", "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["k"], "items": _obj(k=STR, v=STR)}},
          mapOfList={"type": "object", "additionalProperties": {"type": "array", "items": STR}},
          listMapOfObj={"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["k2"], "items": _obj(k2=STR, v2=STR)},
          listOfMap={"type": "array", "items": {"type": "object", "additionalProperties": STR}},
          listOfObj={"type": "array", "items": _obj(field3=STR)}),
     {"obj": {"field": "a"}, "mapOfMap": {"x": {"y": "b"}}, "mapOfObj": {"k": {"field2": "c"}},
      "mapOfListMap": {"o": [{"k": "1", "v": "d"}]}, "mapOfList": {"l": ["e"]},
      "listMapOfObj": [{"k2": "2", "v2": "f"}], "listOfMap": [{"z": "g"}],
      "listOfObj": [{"field3": "h"}]},
     ["self.obj.field == 'a'", "self.mapOfMap['x']['y'] == 'b'",
      "self.mapOfObj['k'].field2 == 'c'",
      "self.mapOfListMap['o'].exists(e, e.k == '1' && e.v == 'd')",
      "self.mapOfList['l'][0] == 'e'", "self.listMapOfObj.exists(e, e.k2 == '2' && e.v2 == 'f')",
      "self.listOfMap[0]['z'] == 'g'", "self.listOfObj[0].field3 == 'h'"], {}),
    ("invalid data",
     _obj(o=_obj(field=STR), m={"type": "object", "additionalProperties": STR},
          l={"type": "array", "items": STR},
          s={"type": "array", "x-kubernetes-list-type": "set", "items": STR},
          intorstring={"x-kubernetes-int-or-string": True},
          nullable={"type": "array", "items": STR}),
     {"o": [], "m": [], "l": {}, "s": {}, "intorstring": True, "nullable": [None]}, [],
     {"has(self.o)": "invalid data, expected a map for the provided schema with type=object",
      "has(self.m)": "invalid data, expected a map for the provided schema with type=object",
      "has(self.l)": "invalid data, expected an array for the provided schema with type=array",
      "has(self.s)": "invalid data, expected an array for the provided schema with type=array",
      "has(self.intorstring)":
      "invalid data, expected XIntOrString value to be either a string or integer",
      "self.nullable[0] == 'x'": "invalid data, got null for schema with nullable=false"}),
    ("optionals",
     _obj(presentObj=_obj(presentStr=STR), absentObj=_obj(absentStr=STR),
          m={"type": "object", "additionalProperties": STR}, l={"type": "array", "items": STR}),
     {"presentObj": {"presentStr": "value"}, "m": {"k": "v"}, "l": ["a"]},
     ["self.?presentObj.?presentStr == optional.of('value')",
      "self.presentObj.?presentStr == optional.of('value')",
      "self.presentObj.?presentStr.or(optional.of('nope')) == optional.of('value')",
      "self.presentObj.?presentStr.orValue('') == 'value'",
      "self.presentObj.?presentStr.hasValue() == true",
      "self.presentObj.?presentStr.optMap(v, v == 'value').hasValue()",
      "self.?absentObj.?absentStr == optional.none()",
      "self.?absentObj.?absentStr.or(optional.of('nope')) == optional.of('nope')",
      "self.?absentObj.?absentStr.orValue('nope') == 'nope'",
      "self.?absentObj.?absentStr.hasValue() == false",
      "self.?absentObj.?absentStr.optMap(v, v == 'value').hasValue() == false",
      "self.m[?'k'] == optional.of('v')", "self.m[?'k'].orValue('') == 'v'",
      "self.m[?'k'].optMap(v, v == 'v').hasValue()", "self.m[?'x'] == optional.none()",
      "self.m[?'x'].or(optional.of('nope')) == optional.of('nope')",
      "self.l[?0] == optional.of('a')", "self.l[?1] == optional.none()",
      "self.l[?0].optMap(v, v == 'a').hasValue()", "self.l[?1].orValue('nope') == 'nope'",
      "optional.ofNonZeroValue(1).hasValue()", "optional.ofNonZeroValue(uint(1)).hasValue()",
      "optional.ofNonZeroValue(1.1).hasValue()", "optional.ofNonZeroValue('a').hasValue()",
      "optional.ofNonZeroValue(true).hasValue()", "optional.ofNonZeroValue(['a']).hasValue()",
      "optional.ofNonZeroValue({'k': 'v'}).hasValue()",
      "optional.ofNonZeroValue(timestamp('2011-08-18T00:00:00.000+01:00')).hasValue()",
      "optional.ofNonZeroValue(duration('19h3m37s10ms')).hasValue()",
      "optional.ofNonZeroValue(null) == optional.none()",
      "optional.ofNonZeroValue(0) == optional.none()",
      "optional.ofNonZeroValue(uint(0)) == optional.none()",
      "optional.ofNonZeroValue(0.0) == optional.none()",
      "optional.ofNonZeroValue('') == optional.none()",
      "optional.ofNonZeroValue(false) == optional.none()",
      "optional.ofNonZeroValue([]) == optional.none()",
      "optional.ofNonZeroValue({}) == optional.none()",
      "optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00.000+00:00')) == optional.none()",
      "optional.ofNonZeroValue(duration('0s')) == optional.none()",
      "{?'k': optional.none(), 'k2': 'v2'} == {'k2': 'v2'}",
      "{?'k': optional.of('v'), 'k2': 'v2'} == {'k': 'v', 'k2': 'v2'}",
      "['a', ?optional.none(), 'c'] == ['a', 'c']",
      "['a', ?optional.of('v'), 'c'] == ['a', 'v', 'c']"],
     {"self.absentObj.?absentStr == optional.none()": "no such key: absentObj"}),
    ("listSets",
     _obj(array={"type": "array", "x-kubernetes-list-type": "set", "items": STR}),
     {"array": ["a", "b", "c"]},
     ["self.array == ['c', 'b', 'a']", "self.array + ['d'] == ['d', 'a', 'b', 'c']",
      "self.array + ['a'] == ['a', 'b', 'c']", "'b' in self.array",
      "self.array.size() == 3"], {}),
    ("date and duration formats",
     _obj(d={"type": "string", "format": "date"}, dt={"type": "string", "format": "date-time"},
          dur={"type": "string", "format": "duration"}),
     {"d": "2021-01-01", "dt": "2021-01-01T00:00:00Z", "dur": "1h2m3s"},
     ["self.d == timestamp('2021-01-01T00:00:00Z')", "self.dt == self.d",
      "self.dur == duration('3723s')", "self.dt.getFullYear() == 2021",
      "self.dur.getMinutes() == 62"],
     {"self.dt == '2021-01-01T00:00:00Z'":
      "found no matching overload for '_==_' applied to '(google.protobuf.Timestamp, string)'"}),
]


def _check(schema: dict[str, Any], obj: Any, rule: str) -> list[str]:
    node = parse({**schema, "x-kubernetes-validations": [{"rule": rule}]})
    return [e.error() for e in cel.validate_rules(
        cel.rules_of(node), obj, None, path=FieldPath(), has_old=False, budget=cel.Budget(),
        node=node, cache=cel.RuleCache())]


def _valid() -> list[tuple[str, dict[str, Any], Any, str]]:
    return [(f"{name}: {rule}", schema, obj, rule)
            for name, schema, obj, rules, _ in GROUPS for rule in rules]


def _errors() -> list[tuple[str, dict[str, Any], Any, str, str]]:
    return [(f"{name}: {rule}", schema, obj, rule, want)
            for name, schema, obj, _, errs in GROUPS for rule, want in errs.items()]


@pytest.mark.parametrize(("schema", "obj", "rule"), [c[1:] for c in _valid()],
                         ids=[c[0] for c in _valid()])
def test_valid(schema: dict[str, Any], obj: Any, rule: str) -> None:
    assert _check(schema, obj, rule) == []


@pytest.mark.parametrize(("schema", "obj", "rule", "want"), [c[1:] for c in _errors()],
                         ids=[c[0] for c in _errors()])
def test_errors(schema: dict[str, Any], obj: Any, rule: str, want: str) -> None:
    got = _check(schema, obj, rule)
    assert len(got) == 1
    assert want in got[0], got[0]


@pytest.mark.parametrize(("schema", "old"), [
    (STR, None), ({"type": "array", "items": STR}, None), (_obj(a=STR), None),
], ids=["primitive", "array", "object"])
def test_transition_rules_skip_without_old(schema: dict[str, Any], old: Any) -> None:
    node = parse({**schema, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]})
    value: Any = {"string": "x", "array": ["x"], "object": {"a": "x"}}[schema["type"]]
    got = cel.validate_rules(cel.rules_of(node), value, old, path=FieldPath(), has_old=True,
                             budget=cel.Budget(), node=node, cache=cel.RuleCache())
    assert got == []
