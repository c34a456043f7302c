"""Table tests for setpoint.apimachinery.validation (cases from apimachinery validation_test.go)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from setpoint.apimachinery import errors, fields, validation
from setpoint.apimachinery.fields import FieldPath

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

Check = Callable[[str], list[str]]

GOOD: list[tuple[Check, list[str]]] = [
    (validation.is_dns1123_label, [
        "a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2",
        "a" * 63,
    ]),
    (validation.is_dns1123_subdomain, [
        "a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2",
        "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1", "ab.1", "abc.1", "a1.1",
        "a-1.1", "a--1--2--b.1", "0.a", "01.a", "012.a", "1a.a", "1-a.a", "0.1", "01.1",
        "012.1", "1a.1", "1-a.1", "1--a--b--2.1", "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5",
        "11.22.33.44.55", "a" * 253,
    ]),
    (validation.is_qualified_name, [
        "simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple",
        "now-with-dashes/simple", "now-with-dashes/now-with-dashes", "now.with.dots/simple",
        "now-with.dashes-and.dots/simple", "1-num.2-num/3-num", "1234/5678", "1.2.3.4/5678",
        "Uppercase_Is_OK_123", "example.com/Uppercase_Is_OK_123", "requests.storage-foo",
        "a" * 63, "a" * 253 + "/" + "b" * 63,
    ]),
    (validation.is_valid_label_value, [
        "simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, "",
        "Mixed_Case.v1",
    ]),
]

BAD: list[tuple[Check, list[str]]] = [
    (validation.is_dns1123_label, [
        "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a",
        "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a",
        "a b", "1 ", " 1", "1 2", "a" * 64, "a\n",
    ]),
    (validation.is_dns1123_subdomain, [
        "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a",
        "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a",
        "a b", "1 ", " 1", "1 2", "A.a", "aB.a", "ab.A", "A1.a", "a1.A", "A.1", "aB.1", "A1.1",
        "1A.1", "0.A", "01.A", "012.A", "1A.a", "1a.A", "A.B.C.D.E", "AA.BB.CC.DD.EE",
        "a.B.c.d.e", "aa.bB.cc.dd.ee", "a@b", "a,b", "a_b", "a;b", "a:b", "a%b", "a?b", "a$b",
        "a" * 254, "a\n",
    ]),
    (validation.is_qualified_name, [
        "nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash",
        "Example.com/abc", "example_com/abc", "example.com/", "/simple", "a" * 64,
        "a" * 254 + "/abc", "", "é",
    ]),
    (validation.is_valid_label_value, [
        "nospecialchars%^=@", "Tama-nui-te-r\u0101.is.M\u0101ori.sun", "\\backslashes\\are\\bad",
        "-starts-with-dash", "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "a" * 64,
        "has space", "\u0661\u0662",
    ]),
]


def _cases(table: list[tuple[Check, list[str]]]) -> list[tuple[Check, str]]:
    return [(check, value) for check, values in table for value in values]


def _ids(table: list[tuple[Check, list[str]]]) -> list[str]:
    return [f"{check.__name__}:{value[:20]!r}{'...' if len(value) > 20 else ''}"
            for check, values in table for value in values]


@pytest.mark.parametrize(("check", "value"), _cases(GOOD), ids=_ids(GOOD))
def test_good_names(check: Check, value: str) -> None:
    assert check(value) == []


@pytest.mark.parametrize(("check", "value"), _cases(BAD), ids=_ids(BAD))
def test_bad_names(check: Check, value: str) -> None:
    assert check(value) != []


# (id, check, value, exact messages)
MESSAGES: list[tuple[str, Check, str, list[str]]] = [
    ("subdomain-regex", validation.is_dns1123_subdomain, "Foo", [SUBDOMAIN_MSG]),
    ("subdomain-too-long", validation.is_dns1123_subdomain, "a" * 254,
     ["must be no more than 253 characters"]),
    ("subdomain-too-long-and-bad", validation.is_dns1123_subdomain, "A" * 254,
     ["must be no more than 253 characters", SUBDOMAIN_MSG]),
    ("label-regex", validation.is_dns1123_label, "Foo", [LABEL_MSG]),
    ("label-dots", validation.is_dns1123_label, "my.name", ["must not contain dots"]),
    ("label-too-long", validation.is_dns1123_label, "a" * 64,
     ["must be no more than 63 characters"]),
    ("label-too-long-with-dots", validation.is_dns1123_label, "a." * 40 + "a",
     ["must be no more than 63 characters", "must not contain dots"]),
    ("qname-name-regex", validation.is_qualified_name, "-a", ["name part " + QNAME_MSG]),
    ("qname-empty", validation.is_qualified_name, "",
     ["name part must be non-empty", "name part " + QNAME_MSG]),
    ("qname-too-long", validation.is_qualified_name, "a" * 64,
     ["name part must be no more than 63 characters"]),
    ("qname-empty-prefix", validation.is_qualified_name, "/a", ["prefix part must be non-empty"]),
    ("qname-bad-prefix", validation.is_qualified_name, "Example.com/a",
     ["prefix part " + SUBDOMAIN_MSG]),
    ("qname-empty-name", validation.is_qualified_name, "example.com/",
     ["name part must be non-empty", "name part " + QNAME_MSG]),
    ("qname-two-slashes", validation.is_qualified_name, "a/b/c",
     ["a qualified name " + QNAME_MSG
      + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]),
    ("label-value-regex", validation.is_valid_label_value, "-a", [LABEL_VALUE_MSG]),
    ("label-value-too-long", validation.is_valid_label_value, "a" * 64,
     ["must be no more than 63 characters"]),
    ("label-value-bytes-not-chars", validation.is_valid_label_value, "\u00e9" * 32,
     ["must be no more than 63 characters", LABEL_VALUE_MSG]),
]


@pytest.mark.parametrize(("check", "value", "want"), [c[1:] for c in MESSAGES],
                         ids=[c[0] for c in MESSAGES])
def test_messages(check: Check, value: str, want: list[str]) -> None:
    assert check(value) == want


# --- generate_name -----------------------------------------------------------------------------

GENERATE = [
    ("short", "kopf-event-", "kopf-event-"),
    ("empty", "", ""),
    ("exactly-58", "a" * 58, "a" * 58),
    ("truncated", "b" * 70, "b" * 58),
]


@pytest.mark.parametrize(("prefix", "kept"), [c[1:] for c in GENERATE],
                         ids=[c[0] for c in GENERATE])
def test_generate_name(prefix: str, kept: str) -> None:
    name = validation.generate_name(prefix, random.Random(7))
    assert name.startswith(kept)
    suffix = name[len(kept):]
    assert len(suffix) == 5
    assert set(suffix) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert len(name) <= 63
    assert validation.generate_name(prefix, random.Random(7)) == name  # rng decides, nothing else
    if kept:
        assert validation.is_dns1123_subdomain(name) == []


def test_generate_name_varies_with_rng() -> None:
    rng = random.Random(1)
    names = {validation.generate_name("x-", rng) for _ in range(50)}
    assert len(names) == 50


# --- validate_object_meta ----------------------------------------------------------------------

OK_REF = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u1"}


def _messages(errs: list[fields.FieldError]) -> list[str]:
    return sorted(e.error() for e in errs)


# (id, meta, namespaced, name_is_label, expected messages)
META: list[tuple[str, dict[str, Any], bool, bool, list[str]]] = [
    ("valid-namespaced", {"name": "my.config", "namespace": "default"}, True, False, []),
    ("valid-cluster", {"name": "ns-1"}, False, True, []),
    ("name-required", {"namespace": "default"}, True, False,
     ["metadata.name: Required value: name or generateName is required"]),
    ("empty-name-required", {"name": "", "namespace": "default"}, True, False,
     ["metadata.name: Required value: name or generateName is required"]),
    ("generate-name-only-still-needs-name", {"generateName": "x-", "namespace": "d"}, True, False,
     ["metadata.name: Required value: name or generateName is required"]),
    ("generate-name-trailing-dash-ok", {"name": "test", "generateName": "foo-"}, False, False,
     []),
    ("generate-name-invalid", {"name": "test", "generateName": "Foo-"}, False, False,
     ['metadata.generateName: Invalid value: "Foo-": ' + SUBDOMAIN_MSG]),
    ("name-subdomain", {"name": "Bad_Name", "namespace": "d"}, True, False,
     ['metadata.name: Invalid value: "Bad_Name": ' + SUBDOMAIN_MSG]),
    ("name-too-long", {"name": "a" * 254, "namespace": "d"}, True, False,
     [f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters']),
    ("namespace-name-is-label", {"name": "foo.bar"}, False, True,
     ['metadata.name: Invalid value: "foo.bar": must not contain dots']),
    ("namespace-required", {"name": "x"}, True, False, ["metadata.namespace: Required value"]),
    ("namespace-forbidden", {"name": "x", "namespace": "default"}, False, False,
     ["metadata.namespace: Forbidden: not allowed on this type"]),
    ("namespace-invalid", {"name": "x", "namespace": "foo.bar"}, True, False,
     ['metadata.namespace: Invalid value: "foo.bar": must not contain dots']),
    ("generation-negative", {"name": "x", "generation": -1}, False, False,
     ["metadata.generation: Invalid value: -1: must be greater than or equal to 0"]),
    ("labels-valid", {"name": "x", "labels": {"app": "web", "example.com/tier": "",
                                               "Upper_Case": "V.1"}}, False, False, []),
    ("label-key-invalid", {"name": "x", "labels": {"-app": "web"}}, False, False,
     ['metadata.labels: Invalid value: "-app": name part ' + QNAME_MSG]),
    ("label-value-invalid", {"name": "x", "labels": {"app": "web site"}}, False, False,
     ['metadata.labels: Invalid value: "web site": ' + LABEL_VALUE_MSG]),
    ("annotation-key-upper-prefix-ok", {"name": "x", "annotations": {"Example.COM/Key": "v"}},
     False, False, []),
    ("annotation-key-invalid", {"name": "x", "annotations": {"only/one/slash": "v"}},
     False, False,
     ['metadata.annotations: Invalid value: "only/one/slash": a qualified name ' + QNAME_MSG
      + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]),
    ("annotations-at-limit", {"name": "x", "annotations": {"a": "b" * (256 * 1024 - 1)}},
     False, False, []),
    ("annotations-too-long", {"name": "x", "annotations": {"a": "b" * (128 * 1024),
                                                            "c": "d" * (128 * 1024)}},
     False, False, ["metadata.annotations: Too long: may not be more than 262144 bytes"]),
    ("finalizers-valid", {"name": "x", "finalizers": ["kubernetes", "example.com/f"]},
     False, False, []),
    ("finalizer-invalid", {"name": "x", "finalizers": ["a b"]}, False, False,
     ['metadata.finalizers: Invalid value: "a b": name part ' + QNAME_MSG]),
    ("finalizers-conflict", {"name": "x", "finalizers": ["orphan", "foregroundDeletion"]},
     False, False,
     ['metadata.finalizers: Invalid value: "array": finalizer orphan and foregroundDeletion '
      "cannot be both set"]),
    ("owner-reference-valid", {"name": "x", "ownerReferences": [
        {**OK_REF, "controller": True, "blockOwnerDeletion": True}]}, False, False, []),
    ("owner-reference-empty", {"name": "x", "ownerReferences": [{}]}, False, False, [
        'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
        'metadata.ownerReferences.kind: Invalid value: "": kind must not be empty',
        'metadata.ownerReferences.name: Invalid value: "": name must not be empty',
        'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty',
    ]),
    ("owner-reference-group-without-version",
     {"name": "x", "ownerReferences": [{**OK_REF, "apiVersion": "apps/"}]}, False, False,
     ['metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty']),
    ("owner-reference-two-slashes",
     {"name": "x", "ownerReferences": [{**OK_REF, "apiVersion": "a/b/c"}]}, False, False,
     ['metadata.ownerReferences.apiVersion: Invalid value: "a/b/c": version must not be '
      "empty"]),
    ("owner-reference-grouped", {"name": "x", "ownerReferences": [
        {**OK_REF, "apiVersion": "example.com/v1", "kind": "Book"}]}, False, False, []),
    ("event-cannot-own", {"name": "x", "ownerReferences": [{**OK_REF, "kind": "Event"}]},
     False, False,
     ['metadata.ownerReferences: Invalid value: "object": /v1, Kind=Event is disallowed from '
      "being an owner"]),
    ("two-controllers", {"name": "x", "ownerReferences": [
        {**OK_REF, "controller": True},
        {**OK_REF, "uid": "u2", "name": "b", "controller": False},
        {**OK_REF, "uid": "u3", "kind": "Secret", "name": "c", "controller": True}]},
     False, False,
     ['metadata.ownerReferences: Invalid value: "array": Only one reference can have '
      'Controller set to true. Found "true" in references for ConfigMap/a and Secret/c']),
    ("wrong-types", {"name": 5, "namespace": ["d"], "labels": {"a": 1},
                     "annotations": "x", "finalizers": "f", "ownerReferences": {},
                     "generation": "1"}, True, False, [
        'metadata.annotations: Invalid value: "x": must be a map of strings',
        "metadata.finalizers: Invalid value: \"f\": must be a list",
        'metadata.generation: Invalid value: "1": must be an integer',
        'metadata.labels: Invalid value: "object": must be a map of strings',
        'metadata.name: Invalid value: 5: must be a string',
        'metadata.namespace: Invalid value: "array": must be a string',
        "metadata.namespace: Required value",
        'metadata.ownerReferences: Invalid value: "object": must be a list',
    ]),
    ("wrong-element-types", {"name": "x", "finalizers": [1],
                             "ownerReferences": ["r", {**OK_REF, "controller": "yes"}]},
     False, False, [
         "metadata.finalizers: Invalid value: 1: must be a string",
         'metadata.ownerReferences.controller: Invalid value: "yes": must be a boolean',
         'metadata.ownerReferences: Invalid value: "r": must be an object',
     ]),
]


@pytest.mark.parametrize(("meta", "namespaced", "name_is_label", "want"),
                         [c[1:] for c in META], ids=[c[0] for c in META])
def test_validate_object_meta(meta: dict[str, Any], namespaced: bool, name_is_label: bool,
                              want: list[str]) -> None:
    errs = validation.validate_object_meta(meta, namespaced=namespaced,
                                           name_is_label=name_is_label)
    assert _messages(errs) == sorted(want)


def test_validate_object_meta_custom_path() -> None:
    errs = validation.validate_object_meta({}, namespaced=False,
                                           path=FieldPath.root("spec", "template", "metadata"))
    assert _messages(errs) == [
        "spec.template.metadata.name: Required value: name or generateName is required"]


def test_validate_object_meta_not_a_mapping() -> None:
    errs = validation.validate_object_meta(["x"], namespaced=False)  # type: ignore[arg-type]
    assert _messages(errs) == ['metadata: Invalid value: "array": must be an object']


BASE = {"name": "test", "namespace": "ns", "uid": "u", "resourceVersion": "1",
        "creationTimestamp": "2024-01-02T03:04:05Z"}
NOW = "1970-01-01T00:16:40Z"
LATER = "1970-01-01T00:33:20Z"

# (id, old, new, expected messages)
UPDATE: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("unchanged", BASE, BASE, []),
    ("labels-change-ok", BASE, {**BASE, "labels": {"a": "b"}}, []),
    ("name", BASE, {**BASE, "name": "other"},
     ['metadata.name: Invalid value: "other": field is immutable']),
    ("namespace", BASE, {**BASE, "namespace": "other"},
     ['metadata.namespace: Invalid value: "other": field is immutable']),
    ("uid", BASE, {**BASE, "uid": "v"}, ['metadata.uid: Invalid value: "v": field is immutable']),
    ("uid-removed", BASE, {k: v for k, v in BASE.items() if k != "uid"},
     ['metadata.uid: Invalid value: "": field is immutable']),
    ("creation-timestamp", BASE, {**BASE, "creationTimestamp": "2024-01-02T03:04:06Z"},
     ['metadata.creationTimestamp: Invalid value: "2024-01-02T03:04:06Z": field is immutable']),
    ("creation-timestamp-same-instant", BASE,
     {**BASE, "creationTimestamp": "2024-01-02T04:04:05+01:00"}, []),
    ("creation-timestamp-removed", BASE, {k: v for k, v in BASE.items()
                                          if k != "creationTimestamp"},
     ["metadata.creationTimestamp: Invalid value: \"null\": field is immutable"]),
    # the same text is the same value, whether or not it is a timestamp
    ("same-unparsed-timestamp", {**BASE, "creationTimestamp": "yesterday"},
     {**BASE, "creationTimestamp": "yesterday"}, []),
    ("changed-unparsed-timestamp", {**BASE, "creationTimestamp": "yesterday"},
     {**BASE, "creationTimestamp": "today"},
     ['metadata.creationTimestamp: Invalid value: "today": field is immutable']),
    ("set-deletion-timestamp", BASE, {**BASE, "deletionTimestamp": NOW},
     [f'metadata.deletionTimestamp: Invalid value: "{NOW}": field is immutable']),
    ("clear-deletion-timestamp", {**BASE, "deletionTimestamp": NOW}, BASE,
     ["metadata.deletionTimestamp: Invalid value: \"null\": field is immutable"]),
    ("change-deletion-timestamp", {**BASE, "deletionTimestamp": NOW},
     {**BASE, "deletionTimestamp": LATER},
     [f'metadata.deletionTimestamp: Invalid value: "{LATER}": field is immutable']),
    ("keep-deletion-fields", {**BASE, "deletionTimestamp": NOW, "deletionGracePeriodSeconds": 30},
     {**BASE, "deletionTimestamp": NOW, "deletionGracePeriodSeconds": 30}, []),
    ("set-grace-period", BASE, {**BASE, "deletionGracePeriodSeconds": 30},
     ["metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable"]),
    ("clear-grace-period", {**BASE, "deletionGracePeriodSeconds": 30}, BASE,
     ["metadata.deletionGracePeriodSeconds: Invalid value: \"null\": field is immutable"]),
    ("change-grace-period", {**BASE, "deletionGracePeriodSeconds": 30},
     {**BASE, "deletionGracePeriodSeconds": 40},
     ["metadata.deletionGracePeriodSeconds: Invalid value: 40: field is immutable"]),
    ("generation-decremented", {**BASE, "generation": 5}, {**BASE, "generation": 4},
     ["metadata.generation: Invalid value: 4: must not be decremented"]),
    ("generation-incremented", {**BASE, "generation": 1}, {**BASE, "generation": 2}, []),
    ("resource-version-missing", BASE, {k: v for k, v in BASE.items()
                                        if k != "resourceVersion"},
     ['metadata.resourceVersion: Invalid value: "": must be specified for an update']),
    ("adding-finalizer-while-deleting",
     {**BASE, "deletionTimestamp": NOW, "finalizers": ["x/a"]},
     {**BASE, "deletionTimestamp": NOW, "finalizers": ["x/a", "y/b"]},
     ['metadata.finalizers: Forbidden: no new finalizers can be added if the object is being '
      'deleted, found new finalizers []string{"y/b"}']),
    ("changing-finalizer-while-deleting",
     {**BASE, "deletionTimestamp": NOW, "finalizers": ["x/a"]},
     {**BASE, "deletionTimestamp": NOW, "finalizers": ["x/b"]},
     ['metadata.finalizers: Forbidden: no new finalizers can be added if the object is being '
      'deleted, found new finalizers []string{"x/b"}']),
    ("removing-finalizer-while-deleting",
     {**BASE, "deletionTimestamp": NOW, "finalizers": ["x/a", "y/b"]},
     {**BASE, "deletionTimestamp": NOW, "finalizers": ["x/a"]}, []),
    ("adding-finalizer-not-deleting", {**BASE, "finalizers": ["x/a"]},
     {**BASE, "finalizers": ["x/a", "y/b"]}, []),
    ("invalid-label-on-update", BASE, {**BASE, "labels": {"a": "-"}},
     ['metadata.labels: Invalid value: "-": ' + LABEL_VALUE_MSG]),
    ("two-controllers-on-update", BASE, {**BASE, "ownerReferences": [
        {**OK_REF, "controller": True}, {**OK_REF, "uid": "u2", "controller": True}]},
     ['metadata.ownerReferences: Invalid value: "array": Only one reference can have '
      'Controller set to true. Found "true" in references for ConfigMap/a and ConfigMap/a']),
]


@pytest.mark.parametrize(("old", "new", "want"), [c[1:] for c in UPDATE],
                         ids=[c[0] for c in UPDATE])
def test_validate_object_meta_update(old: dict[str, Any], new: dict[str, Any],
                                     want: list[str]) -> None:
    assert _messages(validation.validate_object_meta_update(new, old)) == sorted(want)


def test_errors_become_an_invalid_status() -> None:
    errs = validation.validate_object_meta({"namespace": "d", "labels": {"a": "-"}},
                                           namespaced=True)
    status = errors.invalid("ConfigMap", "", "x", errs).status()
    assert status["code"] == 422
    assert status["message"] == (
        'ConfigMap "x" is invalid: [metadata.labels: Invalid value: "-": ' + LABEL_VALUE_MSG
        + ", metadata.name: Required value: name or generateName is required]")
    assert [c["field"] for c in status["details"]["causes"]] == ["metadata.labels",
                                                                "metadata.name"]
