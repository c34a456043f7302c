"""Table tests for setpoint.apimachinery.jsonpath.

Expectations restate client-go's util/jsonpath tests (Kubernetes 1.32) with JSON input, plus
the paths CRDs use in additionalPrinterColumns. Where client-go walks Go structs (fixed field
order), the data here is JSON objects, visited in sorted key order.
"""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery.jsonpath import JSONPath, JSONPathError, format_cell

TYPES: dict[str, Any] = {
    "bools": [True, False, True, False],
    "integers": [1, 2, 3, 4],
    "floats": [1.0, 2.2, 3.3, 4.0],
    "strings": ["one", "two", "three", "four"],
    "interfaces": [True, "one", 1, 1.1],
    "maps": [{"name": "one", "value": 1}, {"name": "two", "value": 2.02},
             {"name": "three", "value": 3.03}, {"name": "four", "value": 4.04}],
}

STORE: dict[str, Any] = {
    "Name": "jsonpath",
    "Book": [
        {"Category": "reference", "Author": "Nigel Rees", "Title": "Sayings of the Centurey",
         "Price": 8.95},
        {"Category": "fiction", "Author": "Evelyn Waugh", "Title": "Sword of Honour",
         "Price": 12.99},
        {"Category": "fiction", "Author": "Herman Melville", "Title": "Moby Dick",
         "Price": 8.99},
    ],
    "Bicycle": [{"Color": "red", "Price": 19.95, "IsNew": True},
                {"Color": "green", "Price": 20.01, "IsNew": False}],
    "Labels": {"engieer": 10, "web/html": 15, "k8s-app": 20},
    "Employees": {"jason": "manager", "dan": "clerk"},
}

POINTS: list[Any] = [
    {"id": "i1", "x": 4, "y": -5},
    {"id": "i2", "x": -2, "y": -5, "z": 1},
    {"id": "i3", "x": 8, "y": 3},
    {"id": "i4", "x": -6, "y": -1},
    {"id": "i5", "x": 0, "y": 2, "z": 1},
    {"id": "i6", "x": 1, "y": 4},
    {"id": "i7", "x": None, "y": 4},
]

NODES: dict[str, Any] = {
    "kind": "List",
    "items": [
        {"kind": "None",
         "metadata": {"name": "127.0.0.1", "labels": {"kubernetes.io/hostname": "127.0.0.1"}},
         "status": {"capacity": {"cpu": "4"}, "ready": True,
                    "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}]}},
        {"kind": "None",
         "metadata": {"name": "127.0.0.2", "labels": {"kubernetes.io/hostname": "127.0.0.2"}},
         "status": {"capacity": {"cpu": "8"}, "ready": False,
                    "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.2"},
                                  {"type": "another", "address": "127.0.0.3"}]}},
    ],
    "users": [{"name": "myself", "user": {}},
              {"name": "e2e", "user": {"username": "admin", "password": "secret"}}],
}

PODS: dict[str, Any] = {"items": [
    {"metadata": {"name": "pod1"}, "spec": {"containers": [
        {"name": "foo", "another": [{"name": "value1"}, {"name": "value2"}]},
        {"name": "bar", "another": [{"name": "value1"}, {"name": "value2"}]}]}},
    {"metadata": {"name": "pod2"}, "spec": {"containers": [
        {"name": "baz", "another": [{"name": "value1"}, {"name": "value2"}]}]}},
]}

ANNOTATED: dict[str, Any] = {"kind": "List", "items": [
    {"kind": "Pod", "metadata": {"name": "pod1", "annotations": {"color": "blue"}}},
    {"kind": "Pod", "metadata": {"name": "pod2"}},
    {"kind": "Pod", "metadata": {"name": "pod3", "annotations": {"color": "green"}}},
    {"kind": "Pod", "metadata": {"name": "pod4", "annotations": {"color": "blue"}}},
]}

CONTAINERS: dict[str, Any] = {"spec": {"containers": [{"name": f"fake{i}"} for i in range(6)]}}
FOUR = {"spec": {"containers": CONTAINERS["spec"]["containers"][:4]}}

RUNNING: dict[str, Any] = {"kind": "List", "items": [
    *({"kind": "Pod", "metadata": {"name": f"pod{i}"}, "status": {"phase": "Running"}}
      for i in (1, 2, 3)),
    {"resourceVersion": ""},
]}

# (id, template, data, printed output)
EXECUTE: list[tuple[str, str, Any, str]] = [
    ("bool-slice", "{ .bools }", TYPES, "[true,false,true,false]"),
    ("bool-index", "{ .bools[0] }", TYPES, "true"),
    ("bool-last", "{ .bools[-1] }", TYPES, "false"),
    ("bool-sub-slice", "{ .bools[0:2] }", TYPES, "true false"),
    ("bool-first-two", "{ .bools[:2] }", TYPES, "true false"),
    ("bool-step", "{ .bools[:4:2] }", TYPES, "true true"),
    ("int-slice", "{ .integers }", TYPES, "[1,2,3,4]"),
    ("int-reverse-index", "{ .integers[-2] }", TYPES, "3"),
    ("int-step", "{ .integers[:4:2] }", TYPES, "1 3"),
    ("float-slice", "{ .floats }", TYPES, "[1,2.2,3.3,4]"),
    ("float-index", "{ .floats[0] }", TYPES, "1"),
    ("float-sub-slice", "{ .floats[0:2] }", TYPES, "1 2.2"),
    ("float-step", "{ .floats[:4:2] }", TYPES, "1 3.3"),
    ("string-slice", "{ .strings }", TYPES, '["one","two","three","four"]'),
    ("string-reverse-index", "{ .strings[-2] }", TYPES, "three"),
    ("string-step", "{ .strings[:4:2] }", TYPES, "one three"),
    ("mixed-slice", "{ .interfaces }", TYPES, '[true,"one",1,1.1]'),
    ("mixed-sub-slice", "{ .interfaces[0:2] }", TYPES, "true one"),
    ("mixed-step", "{ .interfaces[:4:2] }", TYPES, "true 1"),
    ("map-slice", "{ .maps }", TYPES,
     '[{"name":"one","value":1},{"name":"two","value":2.02},{"name":"three","value":3.03},'
     '{"name":"four","value":4.04}]'),
    ("map-index", "{ .maps[0] }", TYPES, '{"name":"one","value":1}'),
    ("map-step-odd", "{ .maps[::2] }", TYPES,
     '{"name":"one","value":1} {"name":"three","value":3.03}'),
    ("map-step-even", "{ .maps[1::2] }", TYPES,
     '{"name":"two","value":2.02} {"name":"four","value":4.04}'),
    # text without braces is a path here (see test_find), so a template needs one action
    ("plain-text", 'hello jsonpath{""}', None, "hello jsonpath"),
    ("recursive-root", "{..}", [1, 2, 3], "[1,2,3]"),
    ("filter-current", "{[?(@<5)]}", [2, 6, 3, 7], "2 3"),
    ("quoted-brace", '{"{"}', None, "{"),
    ("union-indexes", "{[1,3,4]}", [0, 1, 2, 3, 4], "1 3 4"),
    ("slice", "{[0:2]}", ["Monday", "Tudesday"], "Monday Tudesday"),
    ("text-and-action", "hello {.Name}", STORE, "hello jsonpath"),
    ("slash-in-key", "{$.Labels.web/html}", STORE, "15"),
    ("dollar-root", "{$.Employees.jason}", STORE, "manager"),
    ("dash-in-key", "{.Labels.k8s-app}", STORE, "20"),
    ("wildcard-index", "{.Bicycle[*].Color}", STORE, "red green"),
    ("all-authors", "{.Book[*].Author}", STORE, "Nigel Rees Evelyn Waugh Herman Melville"),
    ("range-all-members", '{range .Bicycle[*]}{ "{" }{ @.* }{ "} " }{end}', STORE,
     "{red true 19.95} {green false 20.01} "),
    # members in sorted order: Bicycle before Book
    ("recursive-field", "{..Price}", STORE, "19.95 20.01 8.95 12.99 8.99"),
    ("recursive-then-dot", "{...Price}", STORE, "19.95 20.01 8.95 12.99 8.99"),
    ("list-of-objects", "{.Bicycle}", STORE,
     '[{"Color":"red","IsNew":true,"Price":19.95},{"Color":"green","IsNew":false,'
     '"Price":20.01}]'),
    ("range-current", '{range .Bicycle[*]}{ @ }{ " " }{end}', STORE,
     '{"Color":"red","IsNew":true,"Price":19.95} {"Color":"green","IsNew":false,"Price":20.01} '),
    ("last-slice", "{.Book[-1:]}", STORE,
     '{"Author":"Herman Melville","Category":"fiction","Price":8.99,"Title":"Moby Dick"}'),
    ("recursive-index", "{..Book[2]}", STORE,
     '{"Author":"Herman Melville","Category":"fiction","Price":8.99,"Title":"Moby Dick"}'),
    ("filter-bool", "{.Bicycle[?(@.IsNew==true)]}", STORE,
     '{"Color":"red","IsNew":true,"Price":19.95}'),
    ("missing-field", "{.hello}", STORE, ""),
    ("missing-field-between-text", "before-{.hello}after", STORE, "before-after"),
    ("exists-filter", "{[?(@.z)].id}", POINTS, "i2 i5"),
    ("bracket-key", "{[0]['id']}", POINTS, "i1"),
    ("null-value", "{[-1]['x']}", POINTS, "null"),
    ("range-items", "{range .items[*]}{.metadata.name}, {end}{.kind}", NODES,
     "127.0.0.1, 127.0.0.2, List"),
    ("range-with-tab", '{range .items[*]}{.metadata.name}{"\\t"}{end}', NODES,
     "127.0.0.1\t127.0.0.2\t"),
    ("nested-wildcards", "{.items[*].status.addresses[*].address}", NODES,
     "127.0.0.1 127.0.0.2 127.0.0.3"),
    ("double-range", "{range .items[*]}{range .status.addresses[*]}{.address}, {end}{end}",
     NODES, "127.0.0.1, 127.0.0.2, 127.0.0.3, "),
    ("item-names", "{.items[*].metadata.name}", NODES, "127.0.0.1 127.0.0.2"),
    ("union-of-bracket-paths", "{.items[*]['metadata.name', 'status.capacity']}", NODES,
     '127.0.0.1 127.0.0.2 {"cpu":"4"} {"cpu":"8"}'),
    ("range-brackets-text", "{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}",
     NODES, '[127.0.0.1, {"cpu":"4"}] [127.0.0.2, {"cpu":"8"}] '),
    ("filter-then-path", '{.users[?(@.name=="e2e")].user.password}', NODES, "secret"),
    ("escaped-dot", "{.items[0].metadata.labels.kubernetes\\.io/hostname}", NODES,
     "127.0.0.1"),
    ("escaped-dot-in-filter",
     '{.items[?(@.metadata.labels.kubernetes\\.io/hostname=="127.0.0.1")].kind}', NODES,
     "None"),
    ("recursive-in-filter", "{.items[?(@..ready==true)].metadata.name}", NODES, "127.0.0.1"),
    ("recursive-name", "{..name}", NODES, "127.0.0.1 127.0.0.2 myself e2e"),
    ("empty-range", "{range .items[*]}{.metadata.name}{end}", {"items": []}, ""),
    ("empty-nested-range",
     '{range .items[*]}{.metadata.name}{":"}{range @.spec.containers[*]}{.name}{","}{end}'
     '{"+"}{end}', {"items": []}, ""),
    ("nested-range",
     '{range .items[*]}{.metadata.name}{":"}{range @.spec.containers[*]}{.name}{","}{end}'
     '{"+"}{end}', PODS, "pod1:foo,bar,+pod2:baz,+"),
    ("three-level-range",
     '{range .items[*]}{.metadata.name}{"~"}{range @.spec.containers[*]}{.name}{":"}'
     '{range @.another[*]}{.name}{","}{end}{"+"}{end}{"#"}{end}', PODS,
     "pod1~foo:value1,value2,+bar:value1,value2,+#pod2~baz:value1,value2,+#"),
    ("sibling-ranges",
     '{range .items[*]}{.metadata.name}{"\\t"}{range @.spec.containers[*]}{.name}{" "}{end}'
     '{"\\t"}{range @.spec.containers[*]}{.name}{" "}{end}{"\\n"}{end}', PODS,
     "pod1\tfoo bar \tfoo bar \npod2\tbaz \tbaz \n"),
    ("filter-tolerates-missing",
     '{.items[?(@.metadata.annotations.color=="blue")].metadata.name}', ANNOTATED,
     "pod1 pod4"),
    ("range-over-filter",
     '{range .items[?(.status.phase=="Running")]}{.metadata.name}{" is Running\\n"}{end}',
     RUNNING, "pod1 is Running\npod2 is Running\npod3 is Running\n"),
    ("index-0", "{.spec.containers[0].name}", FOUR, "fake0"),
    ("empty-slice", "{.spec.containers[0:0].name}", FOUR, ""),
    ("slice-to-negative", "{.spec.containers[0:-1].name}", FOUR, "fake0 fake1 fake2"),
    ("last", "{.spec.containers[-1].name}", FOUR, "fake3"),
    ("last-open-slice", "{.spec.containers[-1:].name}", FOUR, "fake3"),
    ("second-last", "{.spec.containers[-2].name}", FOUR, "fake2"),
    ("last-two", "{.spec.containers[-2:].name}", FOUR, "fake2 fake3"),
    ("first-by-negative", "{.spec.containers[-4].name}", FOUR, "fake0"),
    ("all-by-negative", "{.spec.containers[-4:].name}", FOUR, "fake0 fake1 fake2 fake3"),
    ("empty-past-end", "{.spec.containers[5:5].name}", FOUR, ""),
    ("empty-before-start", "{.spec.containers[-5:-5].name}", FOUR, ""),
    ("open-end", "{.spec.containers[0:].name}", CONTAINERS,
     "fake0 fake1 fake2 fake3 fake4 fake5"),
    ("empty-step", "{.spec.containers[0:6:].name}", CONTAINERS,
     "fake0 fake1 fake2 fake3 fake4 fake5"),
    ("step-2", "{.spec.containers[1:4:2].name}", CONTAINERS, "fake1 fake3"),
    ("step-3", "{.spec.containers[1:4:3].name}", CONTAINERS, "fake1"),
    ("step-beyond", "{.spec.containers[1:4:4].name}", CONTAINERS, "fake1"),
    ("step-5", "{.spec.containers[0:6:5].name}", CONTAINERS, "fake0 fake5"),
    ("step-6", "{.spec.containers[0:6:6].name}", CONTAINERS, "fake0"),
]


@pytest.mark.parametrize(("template", "data", "want"), [c[1:] for c in EXECUTE],
                         ids=[c[0] for c in EXECUTE])
def test_execute(template: str, data: Any, want: str) -> None:
    assert JSONPath.parse(template).execute(data) == want


BOOK = {
    "apiVersion": "example.com/v1", "kind": "Book",
    "metadata": {"name": "b1", "creationTimestamp": "2024-01-02T03:04:05Z",
                 "labels": {"app.kubernetes.io/name": "shelf"},
                 "annotations": {"example.com/owner": "me"}},
    "spec": {"title": "T", "replicas": 3, "ratio": 0.5, "enabled": False, "tags": ["a", "b"],
             "nothing": None},
    "status": {"conditions": [
        {"type": "Synced", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        {"type": "Ready", "status": "True", "observedGeneration": 2},
    ]},
}

# (id, path as a CRD would declare it, matches)
FIND: list[tuple[str, str, list[Any]]] = [
    ("integer", ".spec.replicas", [3]),
    ("braced", "{.spec.replicas}", [3]),
    ("float", ".spec.ratio", [0.5]),
    ("bool", ".spec.enabled", [False]),
    ("null-member", ".spec.nothing", [None]),
    ("list", ".spec.tags", [["a", "b"]]),
    ("index", ".spec.tags[0]", ["a"]),
    ("last", ".spec.tags[-1]", ["b"]),
    ("wildcard", ".spec.tags[*]", ["a", "b"]),
    ("slice", ".spec.tags[0:1]", ["a"]),
    ("missing", ".spec.missing", []),
    ("missing-deep", ".status.missing.deeper[0].x", []),
    ("through-scalar", ".spec.title.x", []),
    ("condition-status", '.status.conditions[?(@.type=="Ready")].status', ["True"]),
    ("condition-single-quotes", ".status.conditions[?(@.type=='Ready')].status", ["True"]),
    ("condition-not-equal", '.status.conditions[?(@.type!="Ready")].type', ["Synced"]),
    ("condition-missing", '.status.conditions[?(@.type=="Gone")].status', []),
    ("filter-number", ".status.conditions[?(@.observedGeneration>=2)].type", ["Ready"]),
    ("filter-number-less", ".status.conditions[?(@.observedGeneration<2)].type", []),
    ("filter-exists", ".status.conditions[?(@.lastTransitionTime)].type", ["Synced"]),
    ("filter-string-order", '.status.conditions[?(@.type<"S")].type', ["Ready"]),
    ("escaped-dots", ".metadata.labels.app\\.kubernetes\\.io/name", ["shelf"]),
    ("bracket-escaped-dots", ".metadata.annotations['example\\.com/owner']", ["me"]),
    ("bracket-dots-are-a-path", ".metadata.annotations['example.com/owner']", []),
    ("bracket-simple", ".metadata['name']", ["b1"]),
    ("recursive", "..type", ["Synced", "Ready"]),
    ("recursive-status", ".status..status", ["False", "True"]),
    ("members", ".metadata.labels.*", ["shelf"]),
    ("union", ".spec['title','replicas']", ["T", 3]),
    ("root-dollar", "$.kind", ["Book"]),
    ("template-text", "kind={.kind}", ["kind=", "Book"]),
    ("string-bytes", ".spec.title.*", [84]),
]


@pytest.mark.parametrize(("path", "want"), [c[1:] for c in FIND], ids=[c[0] for c in FIND])
def test_find(path: str, want: list[Any]) -> None:
    compiled = JSONPath.parse(path)
    assert compiled.find(BOOK) == want
    assert str(compiled) == path


def test_find_does_not_modify_input() -> None:
    data = {"a": [{"b": 1}, {"b": 2}]}
    found = JSONPath.parse(".a[*]").find(data)
    assert found == [{"b": 1}, {"b": 2}]
    assert JSONPath.parse("..b").find(data) == [1, 2]
    assert data == {"a": [{"b": 1}, {"b": 2}]}


PARSE_ERRORS = [
    ("unclosed-action", "{.hello", "unclosed action"),
    ("unrecognized-character", "{*}", "unrecognized character in action: U+002A '*'"),
    ("tab-in-action", "{\t.a}", "unrecognized character in action: U+0009"),
    ("invalid-number", "{+12.3.0}", "cannot parse number +12.3.0"),
    ("sign-only", "{-}", "cannot parse number -"),
    ("unterminated-array", "{[1}", "unterminated array"),
    ("unterminated-filter", "{[?(.price]}", "unterminated filter"),
    ("filter-without-bracket", "{[?(@.a)x}", "unclosed array expect ]"),
    ("multiple-recursive", "{........}", "invalid multiple recursive descent"),
    ("super-recursive", "{" + "." * 60 + "Price}", "invalid multiple recursive descent"),
    ("malformed", "{\\\\\\}", "unrecognized character in action: U+005C '\\'"),
    ("double-quoted-key", '{["a"]}', 'invalid array index "a"'),
    ("bad-index", "{[a]}", "invalid array index a"),
    ("minus-index", "{[-]}", "array index - is not a number"),
    ("unterminated-quote", "{'abc}", "unterminated quoted string"),
    ("bad-escape", '{"\\q"}', 'unquote string "\\q" error invalid syntax'),
    ("newline-in-action", "{.a\n}", "unclosed action"),
    ("braces-in-column-path", "{{.a}}", "unrecognized character in action: U+007B '{'"),
]


@pytest.mark.parametrize(("template", "message"), [c[1:] for c in PARSE_ERRORS],
                         ids=[c[0] for c in PARSE_ERRORS])
def test_parse_errors(template: str, message: str) -> None:
    with pytest.raises(JSONPathError) as info:
        JSONPath.parse(template)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


EVAL_ERRORS: list[tuple[str, str, Any, str]] = [
    ("unknown-identifier", "{hello}", STORE, "unrecognized identifier hello"),
    ("index-on-map", "{.Labels[0]}", STORE, "map[string]interface {} is not array or slice"),
    ("index-on-string", "{.Name[0]}", STORE, "string is not array or slice"),
    ("bad-filter-operator", "{.Book[?(@.Price<>10)]}", STORE, "unrecognized filter operator <>"),
    ("redundant-end", "{range .Labels.*}{@}{end}{end}", STORE, "not in range, nothing to end"),
    ("index-out-of-range", "{.spec.containers[-5].name}", FOUR,
     "array index out of bounds: index -1, length 4"),
    ("index-past-end", "{.spec.containers[4]}", FOUR,
     "array index out of bounds: index 4, length 4"),
    ("slice-past-end", "{.spec.containers[0:10]}", FOUR,
     "array index out of bounds: index 9, length 4"),
    ("reversed-slice", "{.spec.containers[3:1].name}", FOUR,
     "starting index 3 is greater than ending index 1"),
    ("reversed-negative-slice", "{.spec.containers[-1:-2].name}", FOUR,
     "starting index 3 is greater than ending index 2"),
    ("negative-start-past-end", "{.spec.containers[-1:0].name}", FOUR,
     "starting index 3 is greater than ending index 0"),
    ("zero-step", "{.spec.containers[0:4:0].name}", FOUR, "step must be > 0"),
    ("negative-step", "{.spec.containers[0:4:-1].name}", FOUR, "step must be > 0"),
    ("filter-on-map", '{.spec[?(@.a=="b")]}', FOUR,
     "map[containers:[map[name:fake0] map[name:fake1] map[name:fake2] map[name:fake3]]] is "
     "not array or slice and cannot be filtered"),
    ("int-vs-float", "{.integers[?(@>1.5)]}", TYPES, "incompatible types for comparison"),
    ("number-vs-string", '{.integers[?(@=="1")]}', TYPES, "incompatible types for comparison"),
    ("compare-null", "{[?(@.x>0)].id}", POINTS, "invalid type for comparison"),
    ("order-bools", "{.bools[?(@<true)]}", TYPES, "invalid type for comparison"),
    ("compare-several", "{.maps[?(@.*==1)]}", TYPES, "can only compare one element at a time"),
]


@pytest.mark.parametrize(("template", "data", "message"), [c[1:] for c in EVAL_ERRORS],
                         ids=[c[0] for c in EVAL_ERRORS])
def test_evaluation_errors(template: str, data: Any, message: str) -> None:
    compiled = JSONPath.parse(template)
    with pytest.raises(JSONPathError) as info:
        compiled.find(data)
    assert str(info.value) == message


FORMAT: list[tuple[str, Any, str]] = [
    ("string", "Running", "Running"),
    ("empty-string", "", ""),
    ("string-with-html", "<a&b>", "<a&b>"),
    ("true", True, "true"),
    ("false", False, "false"),
    ("null", None, "null"),
    ("int", 42, "42"),
    ("negative-int", -7, "-7"),
    ("big-int", 2**62, "4611686018427387904"),
    ("float", 2.5, "2.5"),
    ("whole-float", 3.0, "3"),
    ("negative-zero", -0.0, "-0"),
    ("float-small", 0.0001, "0.0001"),
    ("float-tiny", 0.00001, "1e-05"),
    ("float-100k", 123456.0, "123456"),
    ("float-million", 1e6, "1e+06"),
    ("float-long", 1234567.5, "1.2345675e+06"),
    ("float-huge", 1.5e300, "1.5e+300"),
    ("map", {"b": 1, "a": "x"}, '{"a":"x","b":1}'),
    ("nested", {"a": [1, 2.0, None, True, {"c": "d"}]}, '{"a":[1,2,null,true,{"c":"d"}]}'),
    ("empty-map", {}, "{}"),
    ("empty-list", [], "[]"),
    ("json-float-big", [1e20, 1e21, 123456789.0], "[100000000000000000000,1e+21,123456789]"),
    ("json-float-small", [0.000001, 0.0000001, 1.5e-10], "[0.000001,1e-7,1.5e-10]"),
    ("json-html-escaped", ["<a&b>"], '["\\u003ca\\u0026b\\u003e"]'),
    ("json-control-chars", ["a\nb\tc\x01\b\f\"\\"], '["a\\nb\\tc\\u0001\\b\\f\\"\\\\"]'),
    ("json-line-separators", ["\u2028\u2029"], '["\\u2028\\u2029"]'),
    ("json-unicode-kept", {"k": "\u00e9\u4e2d"}, '{"k":"\u00e9\u4e2d"}'),
]


@pytest.mark.parametrize(("value", "want"), [c[1:] for c in FORMAT], ids=[c[0] for c in FORMAT])
def test_format_cell(value: Any, want: str) -> None:
    assert format_cell(value) == want


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(JSONPathError):
        JSONPath.parse(None)  # type: ignore[arg-type]


def test_parsed_paths_are_values() -> None:
    assert JSONPath.parse(".a.b") == JSONPath.parse(".a.b")
    assert hash(JSONPath.parse(".a[0]")) == hash(JSONPath.parse(".a[0]"))
