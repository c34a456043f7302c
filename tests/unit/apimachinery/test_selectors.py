"""Table tests for setpoint.apimachinery.selectors.

Expectations follow apimachinery's labels/selector_test.go and fields/selector_test.go
(Kubernetes 1.32), plus messages a 1.32 API server returns for bad selectors.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import errors, selectors
from setpoint.apimachinery.selectors import FieldSelector, LabelSelector, Operator, Requirement

LABEL_VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_PART_REGEX_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

# (id, selector text, canonical string)
LABEL_PARSE_OK = [
    ("empty", "", ""),
    ("only-space", "   ", ""),
    ("equals-several", "x=a,y=b,z=c", "x=a,y=b,z=c"),
    ("not-equals", "x!=a,y=b", "x!=a,y=b"),
    ("double-equals-kept", "y==jkl", "y==jkl"),
    ("empty-value", "x=", "x="),
    ("empty-value-space", "x= ", "x="),
    ("empty-values", "x=,z= ", "x=,z="),
    ("empty-values-spaced", "x= ,z= ", "x=,z="),
    ("does-not-exist", "!x", "!x"),
    ("does-not-exist-spaced", "! x", "!x"),
    ("greater", "x>1", "x>1"),
    ("greater-and-less", "x>1,z<5", "x>1,z<5"),
    ("sorted-by-key", "x=a,a=x", "a=x,x=a"),
    ("carriage-return", "\rx", "x"),
    ("prefixed-key", "this-is-a-dns.domain.com/key-with-dash",
     "this-is-a-dns.domain.com/key-with-dash"),
    ("in-prefixed", "this-is-another-dns.domain.com/key-with-dash in (so,what)",
     "this-is-another-dns.domain.com/key-with-dash in (so,what)"),
    ("notin-spaced-values", "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
     "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)"),
    ("tabs", "foo  in\t (abc)", "foo in (abc)"),
    ("newline", "x notin\n (abc)", "x notin (abc)"),
    ("values-sorted", "x in (def,abc)", "x in (abc,def)"),
    ("values-deduplicated", "x in (a,b,a)", "x in (a,b)"),
    ("trailing-comma-in-set", "x in (abc,)", "x in (,abc)"),
    ("empty-set", "x in ()", "x in ()"),
    ("empty-set-spaced", "x notin ( )", "x notin ()"),
    ("leading-comma-in-set", "x notin (, a)", "x notin (,a)"),
    ("double-comma-in-set", "x notin (abc,,def),bar,z in (),w",
     "bar,w,x notin (,abc,def),z in ()"),
    ("keywords-as-values", "a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
    ("keyword-as-exact-value", "notin=in", "notin=in"),
    ("keyword-as-key", "in in (in)", "in in (in)"),
    ("trailing-space", "a ", "a"),
    ("mixed", "x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
    ("same-key-twice", "z!=a,z", "z!=a,z"),
    ("stable-for-equal-keys", "z,z!=a", "z,z!=a"),
    ("qualified-value", "app=My_App.v1-2", "app=My_App.v1-2"),
    ("spaces-around-operators", "app = web , tier != db", "app=web,tier!=db"),
]


@pytest.mark.parametrize(("text", "canonical"), [c[1:] for c in LABEL_PARSE_OK],
                         ids=[c[0] for c in LABEL_PARSE_OK])
def test_label_parse(text: str, canonical: str) -> None:
    sel = LabelSelector.parse(text)
    assert str(sel) == canonical
    assert sel.empty == (canonical == "")
    # Canonical text is a fixed point.
    assert LabelSelector.parse(canonical) == sel


LABEL_PARSE_BAD = [
    # '|' is not special, so "a||y" lexes as one (invalid) value
    ("or", "x=a||y=b", 'unable to parse requirement: values[0][x]: Invalid value: "a||y": '
     + LABEL_VALUE_REGEX_MSG),
    ("double-double-equals", "x==a==b", "found '==', expected: ',' or 'end of string'"),
    ("not-with-value", "!x=a", "found '=', expected: ',' or 'end of string'"),
    ("less-than-word", "x<a",
     "unable to parse requirement: values[0]: Invalid value: \"a\": "
     "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("empty-term", "x,,y", "found ',', expected: identifier after ','"),
    ("leading-comma", ",x,y", "found ',', expected: !, identifier, or 'end of string'"),
    ("trailing-comma", "a in (xyz),", "found '', expected: identifier after ','"),
    ("bad-operator-word", "x nott in (y)",
     "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"),
    ("missing-comma", "a in (xyz)b notin ()", "found 'b', expected: ',' or 'end of string'"),
    ("no-comma-in-set", "a in (xyz abc)",
     "unable to parse requirement: found 'abc', expected: ',' or ')'"),
    ("unclosed-set", "a notin(",
     "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("paren-after-key", "a (",
     "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
    ("only-paren", "(", "found '(', expected: !, identifier, or 'end of string'"),
    ("in-without-set", "x in a", "unable to parse requirement: found 'a' expected: '('"),
    ("operator-in-set", "x in (a=)",
     "unable to parse requirement: found '=', expected: ',' or ')'"),
    ("operator-first-in-set", "x in (=)",
     "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
    ("operator-after-comma-in-set", "x in (a,=)",
     "unable to parse requirement: found '=', expected: ',', or identifier"),
    ("not-alone", "!", "unable to parse requirement: found '', expected: identifier"),
    ("operator-as-value", "x=(", "unable to parse requirement: found '(', expected: identifier"),
    ("bad-key", "-x=a",
     "unable to parse requirement: <nil>: Invalid value: \"-x\": " + NAME_PART_REGEX_MSG),
    ("bad-key-prefix", "Example.com/x",
     "unable to parse requirement: <nil>: Invalid value: \"Example.com/x\": prefix part a "
     "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
     "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
     "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ("bad-value", "app=-web",
     "unable to parse requirement: values[0][app]: Invalid value: \"-web\": "
     + LABEL_VALUE_REGEX_MSG),
    ("value-too-long", "app=" + "a" * 64,
     f"unable to parse requirement: values[0][app]: Invalid value: \"{'a' * 64}\": "
     "must be no more than 63 characters"),
    ("bad-value-in-set-sorted-index", "app in (ok,_bad)",
     "unable to parse requirement: values[0][app]: Invalid value: \"_bad\": "
     + LABEL_VALUE_REGEX_MSG),
    ("two-bad-values", "app in (-a,-b)",
     "unable to parse requirement: [values[0][app]: Invalid value: \"-a\": "
     + LABEL_VALUE_REGEX_MSG + ", values[1][app]: Invalid value: \"-b\": "
     + LABEL_VALUE_REGEX_MSG + "]"),
    ("negative-number", "x>-1",
     "unable to parse requirement: values[0][x]: Invalid value: \"-1\": " + LABEL_VALUE_REGEX_MSG),
    ("int64-overflow", "x>9223372036854775808",
     "unable to parse requirement: values[0]: Invalid value: \"9223372036854775808\": "
     "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("nul-is-not-a-terminator", "a\x00junk", None),
    ("unicode-key", "ключ=a", None),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in LABEL_PARSE_BAD],
                         ids=[c[0] for c in LABEL_PARSE_BAD])
def test_label_parse_rejects(text: str, message: str | None) -> None:
    with pytest.raises(errors.BadRequest) as info:
        LabelSelector.parse(text)
    assert info.value.status_code == 400
    if message is not None:
        assert info.value.message == message


LABELS = {"foo": "bar", "baz": "blah"}

# (id, selector, labels, matches)
LABEL_MATCH: list[tuple[str, str, dict[str, str] | None, bool]] = [
    ("everything", "", {"x": "y"}, True),
    ("everything-none", "", None, True),
    ("equals", "x=y", {"x": "y"}, True),
    ("equals-two", "x=y,z=w", {"x": "y", "z": "w"}, True),
    ("not-equals-two", "x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("keywords", "notin=in", {"notin": "in"}, True),
    ("exists", "x", {"x": "z"}, True),
    ("exists-empty-value", "x", {"x": ""}, True),
    ("does-not-exist", "!x", {"y": "z"}, True),
    ("greater", "x>1", {"x": "2"}, True),
    ("less", "x<1", {"x": "0"}, True),
    ("less-negative-label", "x<1", {"x": "-5"}, True),
    ("equals-missing", "x=z", {}, False),
    ("equals-none", "x=z", None, False),
    ("equals-other", "x=y", {"x": "z"}, False),
    ("equals-one-of-two", "x=y,z=w", {"x": "w", "z": "w"}, False),
    ("not-equals-one-of-two", "x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("not-equals-missing", "x!=y", {}, True),
    ("exists-missing", "x", {"y": "z"}, False),
    ("does-not-exist-present", "!x", {"x": "z"}, False),
    ("greater-not", "x>1", {"x": "0"}, False),
    ("less-not", "x<1", {"x": "2"}, False),
    ("greater-not-a-number", "z>1", {"z": "v2"}, False),
    ("greater-missing", "z>1", {}, False),
    ("greater-equal-is-not-greater", "z>1", {"z": "1"}, False),
    ("labelset-1", "foo=bar", LABELS, True),
    ("labelset-2", "baz=blah", LABELS, True),
    ("labelset-both", "foo=bar,baz=blah", LABELS, True),
    ("labelset-wrong-value", "foo=blah", LABELS, False),
    ("labelset-swapped", "baz=bar", LABELS, False),
    ("labelset-extra", "foo=bar,foobar=bar,baz=blah", LABELS, False),
    ("in", "x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
    ("in-not", "x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
    ("notin-empty-missing", "x notin (),y", {"y": ""}, True),
    ("notin-and-does-not-exist", "!x,y", {"y": ""}, True),
    ("notin-and-not-exists", "x notin (),!y", {"y": ""}, False),
    ("in-empty-value", "x in ()", {"y": "baz"}, False),
    ("in-empty-value-present", "x in ()", {"x": ""}, True),
    ("equals-empty-value", "x=", {"x": ""}, True),
    ("equals-empty-missing", "x=", {}, False),
    ("contradiction", "x=a,x=b", {"x": "a"}, False),
]


@pytest.mark.parametrize(("text", "labels", "want"), [c[1:] for c in LABEL_MATCH],
                         ids=[c[0] for c in LABEL_MATCH])
def test_label_matches(text: str, labels: dict[str, str] | None, want: bool) -> None:
    assert LabelSelector.parse(text).matches(labels) is want


# (id, metav1.LabelSelector, canonical string)
FROM_DICT_OK: list[tuple[str, dict[str, Any], str]] = [
    ("empty", {}, ""),
    ("nulls", {"matchLabels": None, "matchExpressions": None}, ""),
    ("match-labels", {"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
    ("expressions", {"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["web", "db"]},
        {"key": "env", "operator": "NotIn", "values": ["prod"]},
        {"key": "canary", "operator": "DoesNotExist"},
        {"key": "app", "operator": "Exists", "values": []},
    ]}, "app,!canary,env notin (prod),tier in (db,web)"),
    ("both", {"matchLabels": {"app": "web"},
              "matchExpressions": [{"key": "app", "operator": "Exists"}]}, "app=web,app"),
    ("empty-label-value", {"matchLabels": {"a": ""}}, "a="),
]


@pytest.mark.parametrize(("sel", "canonical"), [c[1:] for c in FROM_DICT_OK],
                         ids=[c[0] for c in FROM_DICT_OK])
def test_label_from_dict(sel: dict[str, Any], canonical: str) -> None:
    parsed = LabelSelector.from_dict(sel)
    assert str(parsed) == canonical
    assert parsed.empty == (canonical == "")


FROM_DICT_BAD: list[tuple[str, Any, str | None]] = [
    ("bad-operator", {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
     '"Equals" is not a valid label selector operator'),
    ("missing-operator", {"matchExpressions": [{"key": "a"}]},
     '"" is not a valid label selector operator'),
    ("in-without-values", {"matchExpressions": [{"key": "a", "operator": "In"}]},
     "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be "
     "empty"),
    ("exists-with-values",
     {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x", "y"]}]},
     'values: Invalid value: []string{"x", "y"}: values set must be empty for exists and does '
     "not exist"),
    ("bad-key", {"matchLabels": {"-a": "x"}},
     'key: Invalid value: "-a": ' + NAME_PART_REGEX_MSG),
    ("bad-value", {"matchLabels": {"a": "x y"}},
     'values[0][a]: Invalid value: "x y": ' + LABEL_VALUE_REGEX_MSG),
    ("bad-key-and-value", {"matchLabels": {"-a": "x y"}},
     '[key: Invalid value: "-a": ' + NAME_PART_REGEX_MSG
     + ', values[0][-a]: Invalid value: "x y": ' + LABEL_VALUE_REGEX_MSG + "]"),
    ("not-a-mapping", ["a"], None),
    ("labels-not-a-mapping", {"matchLabels": ["a"]}, None),
    ("non-string-label", {"matchLabels": {"a": 1}}, None),
    ("expressions-not-a-list", {"matchExpressions": {"key": "a"}}, None),
    ("expression-not-a-mapping", {"matchExpressions": ["a"]}, None),
    ("non-string-key", {"matchExpressions": [{"key": 1, "operator": "Exists"}]}, None),
    ("non-string-values", {"matchExpressions": [{"key": "a", "operator": "In",
                                                 "values": [1]}]}, None),
]


@pytest.mark.parametrize(("sel", "message"), [c[1:] for c in FROM_DICT_BAD],
                         ids=[c[0] for c in FROM_DICT_BAD])
def test_label_from_dict_rejects(sel: Any, message: str | None) -> None:
    with pytest.raises(errors.BadRequest) as info:
        LabelSelector.from_dict(sel)
    if message is not None:
        assert info.value.message == message


FROM_DICT_MATCH: list[tuple[str, dict[str, Any], dict[str, str], bool]] = [
    ("empty-matches-all", {}, {"a": "b"}, True),
    ("labels", {"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
    ("labels-miss", {"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ("in", {"matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]},
     {"t": "b"}, True),
    ("notin-missing", {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]},
     {}, True),
    ("does-not-exist", {"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]},
     {"t": ""}, False),
]


@pytest.mark.parametrize(("sel", "labels", "want"), [c[1:] for c in FROM_DICT_MATCH],
                         ids=[c[0] for c in FROM_DICT_MATCH])
def test_label_from_dict_matches(sel: dict[str, Any], labels: dict[str, str], want: bool) -> None:
    assert LabelSelector.from_dict(sel).matches(labels) is want


def test_from_set() -> None:
    sel = LabelSelector.from_set({"app": "foo", "a": "b"})
    assert str(sel) == "a=b,app=foo"
    assert sel.matches({"a": "b", "app": "foo", "x": "y"})
    assert LabelSelector.from_set({}).empty


# (id, key, operator, values, canonical)
REQUIREMENT_STR = [
    ("in-many", "x", Operator.IN, ("def", "abc"), "x in (abc,def)"),
    ("notin-one", "x", Operator.NOT_IN, ("abc",), "x notin (abc)"),
    ("exists", "z", Operator.EXISTS, (), "z"),
    ("does-not-exist", "z", Operator.DOES_NOT_EXIST, (), "!z"),
    ("gt", "x", Operator.GREATER_THAN, ("2",), "x>2"),
    ("lt", "y", Operator.LESS_THAN, ("8",), "y<8"),
    ("double-equals", "y", Operator.DOUBLE_EQUALS, ("jkl",), "y==jkl"),
]


@pytest.mark.parametrize(("key", "op", "values", "canonical"), [c[1:] for c in REQUIREMENT_STR],
                         ids=[c[0] for c in REQUIREMENT_STR])
def test_requirement_str(key: str, op: Operator, values: tuple[str, ...],
                         canonical: str) -> None:
    req = Requirement.new(key, op, values)
    assert str(req) == canonical
    assert req.values == values  # the stored order is untouched; only printing sorts


REQUIREMENT_BAD = [
    ("in-empty", "x1", Operator.IN, (), "values: Invalid value: []string(nil): for 'in', "
     "'notin' operators, values set can't be empty"),
    ("equals-two", "x5", Operator.EQUALS, ("bar", "foo"), 'values: Invalid value: '
     '[]string{"bar", "foo"}: exact-match compatibility requires one single value'),
    ("gt-two", "x", Operator.GREATER_THAN, ("1", "2"), 'values: Invalid value: '
     '[]string{"1", "2"}: for \'Gt\', \'Lt\' operators, exactly one value is required'),
    ("gt-none", "x", Operator.GREATER_THAN, (), "values: Invalid value: []string(nil): for "
     "'Gt', 'Lt' operators, exactly one value is required"),
]


@pytest.mark.parametrize(("key", "op", "values", "message"), [c[1:] for c in REQUIREMENT_BAD],
                         ids=[c[0] for c in REQUIREMENT_BAD])
def test_requirement_rejects(key: str, op: Operator, values: tuple[str, ...],
                             message: str) -> None:
    with pytest.raises(errors.BadRequest) as info:
        Requirement.new(key, op, values)
    assert info.value.message == message


# --- field selectors ---------------------------------------------------------------------------

# (id, text, requirements, canonical)
FIELD_PARSE_OK: list[tuple[str, str, tuple[tuple[str, str, str], ...], str]] = [
    ("empty", "", (), ""),
    ("only-commas", ",,", (), ""),
    ("one", "metadata.name=b1", (("metadata.name", "=", "b1"),), "metadata.name=b1"),
    ("double-equals", "a==b", (("a", "=", "b"),), "a=b"),
    ("not-equals", "a!=b", (("a", "!=", "b"),), "a!=b"),
    ("sorted-terms", "z=1,a=2", (("a", "=", "2"), ("z", "=", "1")), "a=2,z=1"),
    ("empty-value", "spec.x=", (("spec.x", "=", ""),), "spec.x="),
    ("empty-term-skipped", "a=b,,c=d", (("a", "=", "b"), ("c", "=", "d")), "a=b,c=d"),
    ("escaped-comma", r"a=b\,c", (("a", "=", "b,c"),), r"a=b\,c"),
    ("escaped-equals", r"a=b\=c", (("a", "=", "b=c"),), r"a=b\=c"),
    ("escaped-backslash", r"a=b\\c", (("a", "=", "b\\c"),), r"a=b\\c"),
    ("first-operator-wins", r"a!=b\=c", (("a", "!=", "b=c"),), r"a!=b\=c"),
    ("equals-before-bang", "a=!b", (("a", "=", "!b"),), "a=!b"),
    ("no-trimming", "a = b", (("a ", "=", " b"),), "a = b"),
    ("kubectl-describe",
     "involvedObject.name=b1,involvedObject.namespace=default,involvedObject.kind=Book,"
     "involvedObject.uid=1234",
     (("involvedObject.kind", "=", "Book"), ("involvedObject.name", "=", "b1"),
      ("involvedObject.namespace", "=", "default"), ("involvedObject.uid", "=", "1234")),
     "involvedObject.kind=Book,involvedObject.name=b1,involvedObject.namespace=default,"
     "involvedObject.uid=1234"),
]


@pytest.mark.parametrize(("text", "requirements", "canonical"), [c[1:] for c in FIELD_PARSE_OK],
                         ids=[c[0] for c in FIELD_PARSE_OK])
def test_field_parse(text: str, requirements: tuple[tuple[str, str, str], ...],
                     canonical: str) -> None:
    sel = FieldSelector.parse(text)
    assert sel.requirements == requirements
    assert str(sel) == canonical
    assert sel.empty == (not requirements)
    assert sel.fields == frozenset(r[0] for r in requirements)
    assert FieldSelector.parse(canonical) == sel


FIELD_PARSE_BAD = [
    ("no-operator", "a", "invalid selector: 'a'; can't understand 'a'"),
    ("no-operator-second", "a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
    ("unescaped-equals", "a=b=c", "invalid field selector: unescaped character in value: 61"),
    ("unescaped-equals-after-bang", "a!=b=c",
     "invalid field selector: unescaped character in value: 61"),
    ("bad-escape", r"a=\x", "invalid field selector: invalid escape sequence: \\x"),
    ("trailing-backslash", "a=b\\", "invalid field selector: invalid escape sequence: \\"),
    ("less-than", "a<b", "invalid selector: 'a<b'; can't understand 'a<b'"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in FIELD_PARSE_BAD],
                         ids=[c[0] for c in FIELD_PARSE_BAD])
def test_field_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(errors.BadRequest) as info:
        FieldSelector.parse(text)
    assert info.value.message == message


OBJECT_FIELDS = {"metadata.name": "b1", "metadata.namespace": "default", "status.phase": ""}

FIELD_MATCH = [
    ("everything", "", True),
    ("name", "metadata.name=b1", True),
    ("name-double", "metadata.name==b1", True),
    ("name-other", "metadata.name=b2", False),
    ("name-not", "metadata.name!=b2", True),
    ("name-not-self", "metadata.name!=b1", False),
    ("and", "metadata.name=b1,metadata.namespace=default", True),
    ("and-fails", "metadata.name=b1,metadata.namespace=other", False),
    ("empty-value-field", "status.phase=", True),
    ("missing-reads-empty", "spec.other=", True),
    ("missing-not-equals", "spec.other!=x", True),
    ("missing-equals", "spec.other=x", False),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in FIELD_MATCH],
                         ids=[c[0] for c in FIELD_MATCH])
def test_field_matches(text: str, want: bool) -> None:
    assert FieldSelector.parse(text).matches(OBJECT_FIELDS) is want


def test_field_exact_match() -> None:
    sel = FieldSelector.parse("metadata.name=b1,status.phase!=Active")
    assert sel.exact_match("metadata.name") == "b1"
    assert sel.exact_match("status.phase") is None
    assert sel.exact_match("metadata.namespace") is None


SUPPORTED = ("metadata.name", "metadata.namespace")

CHECK_SUPPORTED = [
    ("empty", "", None),
    ("supported", "metadata.name=a,metadata.namespace!=b", None),
    ("unsupported", "spec.x=a", "field label not supported: spec.x"),
    ("first-in-term-order", "z.z=1,b.b=2,metadata.name=x", "field label not supported: b.b"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in CHECK_SUPPORTED],
                         ids=[c[0] for c in CHECK_SUPPORTED])
def test_check_supported(text: str, message: str | None) -> None:
    sel = FieldSelector.parse(text)
    if message is None:
        selectors.check_supported(sel, SUPPORTED)
    else:
        with pytest.raises(errors.BadRequest) as info:
            selectors.check_supported(sel, SUPPORTED)
        assert info.value.message == message
        assert info.value.status()["code"] == 400


# --- matching many terms: folded per key, equal to term-by-term evaluation ----------------------

_KEYS = st.sampled_from(["a", "b", "c", "d"])
_VALUES = st.sampled_from(["", "x", "y", "1", "2", "-3", "10"])
_REQUIREMENTS = st.builds(
    Requirement, _KEYS, st.sampled_from(list(Operator)),
    st.lists(_VALUES, max_size=3).map(tuple))
_LABELS = st.dictionaries(_KEYS, _VALUES, max_size=4)


@given(st.lists(_REQUIREMENTS, max_size=8), _LABELS)
def test_label_matching_is_every_requirement(requirements: list[Requirement],
                                             labels: dict[str, str]) -> None:
    # built without validation too: odd operand counts must fold as Requirement.matches has them
    sel = LabelSelector(tuple(requirements))
    assert sel.matches(labels) == all(r.matches(labels) for r in requirements)


_FIELD_TERMS = st.tuples(st.sampled_from(["metadata.name", "status.phase", "spec.x"]),
                         st.sampled_from(["=", "!="]), _VALUES)


@given(st.lists(_FIELD_TERMS, max_size=8),
       st.dictionaries(st.sampled_from(["metadata.name", "status.phase"]), _VALUES))
def test_field_matching_is_every_term(terms: list[tuple[str, str, str]],
                                      fields: dict[str, str]) -> None:
    want = all((fields.get(f, "") == v) == (op == "=") for f, op, v in terms)
    assert FieldSelector(tuple(terms)).matches(fields) is want


class _CountingLabels(dict[str, str]):
    """Labels that count the lookups a selector makes of them."""

    lookups = 0

    def __contains__(self, key: object) -> bool:
        self.lookups += 1
        return super().__contains__(key)

    def __getitem__(self, key: str) -> str:
        self.lookups += 1
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.lookups += 1
        return super().get(key, default)

    def items(self) -> Any:
        for item in super().items():
            self.lookups += 1
            yield item


@pytest.mark.parametrize("terms", [10, 1_000, 10_000])
def test_label_matching_looks_at_the_labels_not_at_every_term(terms: int) -> None:
    # a LIST of many objects evaluated a selector term by term: 1,000 terms over 2,000
    # objects held the event loop for more than a second
    forbidding = LabelSelector.parse(",".join(f"k{i}!=v" for i in range(terms)))
    labels = _CountingLabels({"app": "web", "k1": "w", "tier": "db"})
    assert forbidding.matches(labels)
    assert labels.lookups <= 3
    labels = _CountingLabels({"app": "web", "k1": "v"})
    assert not forbidding.matches(labels)
    assert labels.lookups <= 2
    # terms that require keys fail at once on an object with fewer labels than that
    requiring = LabelSelector.parse(",".join(f"k{i}" for i in range(terms)))
    labels = _CountingLabels({"app": "web"})
    assert not requiring.matches(labels)
    assert labels.lookups <= 1
    # many values of one key are one set
    one_of = LabelSelector.parse("app in (" + ",".join(f"v{i}" for i in range(terms)) + ")")
    labels = _CountingLabels({"app": f"v{terms - 1}"})
    assert one_of.matches(labels)
    assert labels.lookups <= 2


def test_field_matching_looks_up_each_field_once() -> None:
    sel = FieldSelector.parse(",".join(f"metadata.name!=n{i}" for i in range(1_000)))
    counted = _CountingLabels({"metadata.name": "other"})
    assert sel.matches(counted)
    assert counted.lookups == 1
    assert not sel.matches({"metadata.name": "n999"})
    assert not FieldSelector.parse("metadata.name=a,metadata.name=b").matches(
        {"metadata.name": "a"})
