"""Table tests for setpoint.registry.fieldmanager: managedFields and server-side apply.

Each scenario is a sequence of writes (``update`` by a manager, or ``apply`` of a
configuration) on one object; after each, the object and the fields each manager owns are
checked. Expectations restate Kubernetes' field manager (structured-merge-diff's Updater
plus kube-apiserver's layers: stripped metadata, reset fields, times, conflicts).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import errors, fieldpath, typed
from setpoint.apimachinery.fieldpath import key, path, value
from setpoint.registry import fieldmanager as fm

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "x": {"type": "string"},
            "y": {"type": "string"},
            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                     "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {
                          "name": {"type": "string"}, "port": {"type": "integer"}}}},
            "args": {"type": "array", "items": {"type": "string"}},
        }},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}
API = "example.com/v1"
NOW = "2026-01-02T03:04:05Z"
LATER = "2026-01-02T03:05:00Z"


def book(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Book", "metadata": {"name": "b"}, "spec": spec}


@dataclass
class Step:
    op: str  # "update" or "apply"
    manager: str
    obj: dict[str, Any]
    force: bool = False
    subresource: str = ""
    #: the object after the step (None: not checked)
    expect: dict[str, Any] | None = None
    #: manager -> owned paths after the step (managers not listed own nothing)
    owners: dict[str, set[fieldpath.Path]] = field(default_factory=dict)
    #: the conflicts the step fails with: {(manager display, rendered path)}
    conflicts: set[tuple[str, str]] | None = None


def run(steps: list[Step], *, status: bool = True) -> dict[str, Any] | None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=status)
    live: dict[str, Any] | None = None
    for i, step in enumerate(steps):
        stamp = NOW if i == 0 else LATER
        if step.op == "update":
            new = copy.deepcopy(step.obj)
            if live is not None and "managedFields" in live["metadata"]:
                new["metadata"].setdefault("managedFields", live["metadata"]["managedFields"])
            manager.update(live, new, step.manager, stamp, step.subresource)
            result = new
        else:
            if step.conflicts is not None:
                with pytest.raises(errors.Conflict) as raised:
                    manager.apply(live, step.obj, step.manager, stamp, force=step.force,
                                  subresource=step.subresource)
                causes = raised.value.details["causes"]
                got = {(c["message"].removeprefix("conflict with "), c["field"])
                       for c in causes}
                assert got == step.conflicts, f"step {i}"
                assert {c["reason"] for c in causes} == {"FieldManagerConflict"}
                continue
            result = manager.apply(live, step.obj, step.manager, stamp, force=step.force,
                                   subresource=step.subresource)
        managers = fm.decode(result["metadata"].get("managedFields"))
        owned = {k.manager: set(e.fields) for k, e in managers.items()}
        assert owned == step.owners, f"step {i}"
        if step.expect is not None:
            shown = copy.deepcopy(result)
            shown["metadata"].pop("managedFields", None)
            assert shown == step.expect, f"step {i}"
        live = result
    return live


X, Y = path("spec", "x"), path("spec", "y")

SCENARIOS: list[tuple[str, list[Step]]] = [
    ("create-records-an-update-entry-with-intermediate-nodes", [
        Step("update", "kubectl-create", {**book(x="1"), "metadata": {
            "name": "b", "labels": {"a": "1"}}},
             owners={"kubectl-create": {path("spec"), X, path("metadata", "labels"),
                                        path("metadata", "labels", "a")}}),
    ]),
    ("apply-owns-exactly-its-configuration", [
        Step("apply", "alice", book(x="1"), expect=book(x="1"), owners={"alice": {X}}),
    ]),
    ("apply-conflicts-with-an-updater", [
        Step("update", "editor", book(x="1"), owners={"editor": {path("spec"), X}}),
        Step("apply", "alice", book(x="2"), conflicts={('"editor" using example.com/v1',
                                                         ".spec.x")}),
    ]),
    ("same-value-is-shared-not-a-conflict", [
        Step("apply", "alice", book(x="1"), owners={"alice": {X}}),
        Step("apply", "bob", book(x="1"), owners={"alice": {X}, "bob": {X}}),
    ]),
    ("force-takes-ownership", [
        Step("apply", "alice", book(x="1", y="1"), owners={"alice": {X, Y}}),
        Step("apply", "bob", book(x="2"), conflicts={('"alice"', ".spec.x")}),
        Step("apply", "bob", book(x="2"), force=True, expect=book(x="2", y="1"),
             owners={"alice": {Y}, "bob": {X}}),
    ]),
    ("fields-no-longer-applied-are-removed", [
        Step("apply", "alice", book(x="1", y="1"), owners={"alice": {X, Y}}),
        Step("apply", "alice", book(x="1"), expect=book(x="1"), owners={"alice": {X}}),
    ]),
    ("fields-another-manager-owns-are-kept", [
        Step("apply", "alice", book(x="1", y="1"), owners={"alice": {X, Y}}),
        Step("apply", "bob", book(y="1"), owners={"alice": {X, Y}, "bob": {Y}}),
        Step("apply", "alice", book(x="1"), expect=book(x="1", y="1"),
             owners={"alice": {X}, "bob": {Y}}),
    ]),
    ("updater-changes-take-fields-from-appliers", [
        Step("apply", "alice", book(x="1", y="1"), owners={"alice": {X, Y}}),
        Step("update", "editor", book(x="2", y="1"),
             owners={"alice": {Y}, "editor": {X}}),
        Step("apply", "alice", book(y="1"), expect=book(x="2", y="1"),
             owners={"alice": {Y}, "editor": {X}}),
    ]),
    ("set-lists-merge-per-item", [
        Step("apply", "alice", book(tags=["a"]),
             owners={"alice": {path("spec", "tags", value("a"))}}),
        Step("apply", "bob", book(tags=["b"]), expect=book(tags=["a", "b"]),
             owners={"alice": {path("spec", "tags", value("a"))},
                     "bob": {path("spec", "tags", value("b"))}}),
        Step("apply", "alice", book(), expect=book(tags=["b"]),
             owners={"alice": {path("spec")}, "bob": {path("spec", "tags", value("b"))}}),
    ]),
    ("map-lists-merge-per-key", [
        Step("apply", "alice", book(ports=[{"name": "web", "port": 80}]), owners={"alice": {
            path("spec", "ports", key({"name": "web"})),
            path("spec", "ports", key({"name": "web"}), "name"),
            path("spec", "ports", key({"name": "web"}), "port")}}),
        Step("apply", "bob", book(ports=[{"name": "tls", "port": 443}]),
             expect=book(ports=[{"name": "web", "port": 80}, {"name": "tls", "port": 443}]),
             owners={"alice": {path("spec", "ports", key({"name": "web"})),
                               path("spec", "ports", key({"name": "web"}), "name"),
                               path("spec", "ports", key({"name": "web"}), "port")},
                     "bob": {path("spec", "ports", key({"name": "tls"})),
                             path("spec", "ports", key({"name": "tls"}), "name"),
                             path("spec", "ports", key({"name": "tls"}), "port")}}),
        Step("apply", "bob", book(ports=[{"name": "web", "port": 8080}]),
             conflicts={('"alice"', '.spec.ports[name="web"].port')}),
    ]),
    ("atomic-lists-are-one-field", [
        Step("apply", "alice", book(args=["a"]), owners={"alice": {path("spec", "args")}}),
        Step("apply", "bob", book(args=["b"]), conflicts={('"alice"', ".spec.args")}),
    ]),
    ("status-is-not-owned-through-the-main-endpoint", [
        Step("apply", "alice", {**book(x="1"), "status": {"phase": "Ready"}},
             owners={"alice": {X}}),
        Step("apply", "ctrl", {**book(), "status": {"phase": "Done"}}, subresource="status",
             owners={"alice": {X}, "ctrl": {path("status", "phase")}}),
    ]),
    ("a-status-write-records-a-status-entry", [
        Step("apply", "alice", book(x="1"), owners={"alice": {X}}),
        Step("update", "ctrl", {**book(x="1"), "status": {"phase": "Done"}},
             subresource="status",
             owners={"alice": {X}, "ctrl": {path("status"), path("status", "phase")}}),
    ]),
    ("finalizers-and-owner-references-merge-as-in-object-meta", [
        Step("apply", "alice", {**book(), "metadata": {"name": "b", "finalizers": ["a/x"],
                                                       "ownerReferences": [{"uid": "1"}]}},
             owners={"alice": {path("spec"), path("metadata", "finalizers", value("a/x")),
                               path("metadata", "ownerReferences", key({"uid": "1"})),
                               path("metadata", "ownerReferences", key({"uid": "1"}),
                                    "uid")}}),
        Step("apply", "bob", {**book(), "metadata": {"name": "b", "finalizers": ["b/y"],
                                                     "ownerReferences": [{"uid": "2"}]}},
             expect={**book(), "metadata": {
                 "name": "b", "finalizers": ["a/x", "b/y"],
                 "ownerReferences": [{"uid": "1"}, {"uid": "2"}]}},
             owners={"alice": {path("spec"), path("metadata", "finalizers", value("a/x")),
                               path("metadata", "ownerReferences", key({"uid": "1"})),
                               path("metadata", "ownerReferences", key({"uid": "1"}),
                                    "uid")},
                     "bob": {path("spec"), path("metadata", "finalizers", value("b/y")),
                             path("metadata", "ownerReferences", key({"uid": "2"})),
                             path("metadata", "ownerReferences", key({"uid": "2"}),
                                  "uid")}}),
    ]),
    ("a-no-op-update-records-nothing", [
        Step("apply", "alice", book(x="1"), owners={"alice": {X}}),
        Step("update", "editor", book(x="1"), owners={"alice": {X}}),
    ]),
    ("removing-a-field-takes-it-from-its-owner", [
        Step("apply", "alice", book(x="1", y="2"), owners={"alice": {X, Y}}),
        Step("update", "editor", book(x="1"), owners={"alice": {X}}),
    ]),
]


@pytest.mark.parametrize(("name", "steps"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_field_management(name: str, steps: list[Step]) -> None:
    run(steps)


def test_conflict_message_is_kubernetes_wording() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), "v1", status_subresource=False)
    live = book(x="1", y="1")
    manager.update(None, live, "kubectl-client-side-apply", NOW)
    with pytest.raises(errors.Conflict) as one:
        manager.apply(live, book(x="2"), "other", NOW, force=False)
    assert one.value.message == ('Apply failed with 1 conflict: conflict with '
                                 '"kubectl-client-side-apply" using v1: .spec.x')
    assert one.value.status()["code"] == 409
    with pytest.raises(errors.Conflict) as two:
        manager.apply(live, book(x="2", y="2"), "other", NOW, force=False)
    assert two.value.message == ('Apply failed with 2 conflicts: conflicts with '
                                 '"kubectl-client-side-apply" using v1:\n- .spec.x\n- .spec.y')


def test_times_move_only_when_the_manager_changes_the_object() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=False)
    first = manager.apply(None, book(x="1"), "alice", NOW, force=False)
    again = manager.apply(first, book(x="1"), "alice", LATER, force=False)
    assert again["metadata"]["managedFields"][0]["time"] == NOW
    changed = manager.apply(again, book(x="2"), "alice", LATER, force=False)
    assert changed["metadata"]["managedFields"][0]["time"] == LATER


def test_entries_are_ordered_apply_first_then_by_time() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=False)
    obj = manager.apply(None, book(x="1"), "zed", NOW, force=False)
    new = copy.deepcopy(obj)
    new["spec"]["y"] = "1"
    manager.update(obj, new, "alpha", LATER)
    assert [(e["manager"], e["operation"]) for e in new["metadata"]["managedFields"]] == [
        ("zed", "Apply"), ("alpha", "Update")]
    assert list(new["metadata"]["managedFields"][1]) == [
        "manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]


def test_an_apply_configuration_may_not_carry_managed_fields() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=False)
    config = book(x="1")
    config["metadata"]["managedFields"] = []
    with pytest.raises(errors.BadRequest, match=r"metadata\.managedFields must be nil"):
        manager.apply(None, config, "alice", NOW, force=False)


def test_an_apply_configuration_with_duplicates_is_a_bad_request() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=False)
    with pytest.raises(errors.BadRequest, match="duplicate entries"):
        manager.apply(None, book(tags=["a", "a"]), "alice", NOW, force=False)


def test_clients_may_replace_or_clear_managed_fields() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=False)
    live = manager.apply(None, book(x="1"), "alice", NOW, force=False)
    replaced = copy.deepcopy(live)
    replaced["metadata"]["managedFields"][0]["manager"] = "renamed"
    manager.update(live, replaced, "editor", LATER)
    assert [e["manager"] for e in replaced["metadata"]["managedFields"]] == ["renamed"]
    cleared = copy.deepcopy(live)
    cleared["metadata"]["managedFields"] = [{}]
    manager.update(live, cleared, "editor", LATER)
    assert "managedFields" not in cleared["metadata"]
    kept = copy.deepcopy(live)
    del kept["metadata"]["managedFields"]
    manager.update(live, kept, "editor", LATER)
    assert [e["manager"] for e in kept["metadata"]["managedFields"]] == ["alice"]


def test_kubectl_server_side_apply_takes_over_client_side_applied_fields() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=False)
    applied = book(x="1")
    live = {**book(x="1"), "metadata": {"name": "b", "annotations": {
        fm.LAST_APPLIED: '{"apiVersion":"example.com/v1","kind":"Book",'
                         '"metadata":{"name":"b"},"spec":{"x":"1"}}\n'}}}
    manager.update(None, live, "kubectl-client-side-apply", NOW)
    result = manager.apply(live, book(x="2"), "kubectl", LATER, force=False)
    assert result["spec"] == {"x": "2"}
    annotation = result["metadata"]["annotations"][fm.LAST_APPLIED]
    assert '"x":"2"' in annotation
    assert annotation.endswith("\n")
    with pytest.raises(errors.Conflict):
        manager.apply(live, book(x="2"), "someone-else", LATER, force=False)
    assert applied == book(x="1")


def test_update_managers_are_capped() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=False)
    obj = book()
    manager.update(None, obj, "m0", "2026-01-01T00:00:00Z")
    for i in range(1, 15):
        new = copy.deepcopy(obj)
        new["spec"][f"f{i}"] = "v"
        manager.update(obj, new, f"m{i}", f"2026-01-01T00:00:{i:02d}Z")
        obj = new
    names = [e["manager"] for e in obj["metadata"]["managedFields"]]
    assert len(names) == fm.MAX_UPDATE_MANAGERS + 1
    assert fm.ANCIENT_CHANGES in names
    assert "m14" in names
    assert "m1" not in names


def test_decode_rejects_what_kubernetes_rejects() -> None:
    for bad in ([{"operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}],
                [{"operation": "Apply", "fieldsType": "FieldsV1"}],
                [{"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV2"}],
                {"not": "a list"}):
        with pytest.raises(ValueError):  # noqa: PT011
            fm.decode(bad)


def test_manager_names_from_user_agents() -> None:
    assert fm.manager_from_user_agent("kubectl/v1.32.4 (linux/amd64)") == "kubectl"
    assert fm.manager_from_user_agent("OpenAPI-Generator/37.0.2/python") == "OpenAPI-Generator"
    assert fm.manager_from_user_agent("") == "unknown"
    assert len(fm.manager_from_user_agent("x" * 300)) == fm.MAX_MANAGER_LENGTH


@pytest.mark.parametrize(("user_agent", "manager"), [
    ("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07", "kubectl"),
    ("OpenAPI-Generator/31.0.0/python", "OpenAPI-Generator"),
    ("kopf", "kopf"),
    ("tab\there/1", "tabhere"),
    ("é" * 100 + "/1", "é" * 64),
    ("/v1", "unknown"),
    (None, "unknown"),
], ids=["kubectl", "python-client", "no-slash", "unprintable", "utf8-bytes", "empty", "none"])
def test_the_default_manager_is_the_user_agents_program(user_agent: str | None,
                                                        manager: str) -> None:
    assert fm.manager_from_user_agent(user_agent) == manager


def _manager_by_characters(user_agent: str) -> str:
    kept: list[str] = []
    size = 0
    for ch in user_agent.split("/", 1)[0]:
        if ch.isprintable():
            size += len(ch.encode("utf-8", "surrogatepass"))
            if size > fm.MAX_MANAGER_LENGTH:
                break
            kept.append(ch)
    return "".join(kept) or "unknown"


@settings(max_examples=300)
@given(st.text(max_size=300) | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127),
                                      max_size=300))
def test_the_quick_answer_for_plain_user_agents_is_the_character_by_character_one(
        user_agent: str) -> None:
    assert fm.manager_from_user_agent(user_agent) == _manager_by_characters(user_agent)
