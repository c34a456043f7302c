"""Predicates and their combinators, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.runtime import predicates as p


def obj(generation: int | None = 1, rv: str = "1", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "a", "namespace": "ns", "resourceVersion": rv}
    if generation is not None:
        meta["generation"] = generation
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta}


BASE = obj()
UPDATES = {
    "status only": obj(rv="2"),
    "spec": obj(generation=2, rv="2"),
    "labels": obj(rv="2", labels={"a": "b"}),
    "annotations": obj(rv="2", annotations={"k": "v"}),
    "resync": BASE,
}


@pytest.mark.parametrize(("predicate", "passes"), [
    (p.generation_changed, {"spec"}),
    (p.labels_changed, {"labels"}),
    (p.annotations_changed, {"annotations"}),
    (p.resource_version_changed, {"status only", "spec", "labels", "annotations"}),
    (p.generation_changed | p.labels_changed, {"spec", "labels"}),
    (p.resource_version_changed & ~p.generation_changed,
     {"status only", "labels", "annotations"}),
    (p.all_of(), set(UPDATES)),
    (p.any_of(), set()),
], ids=["generation", "labels", "annotations", "resourceVersion", "or", "and-not", "all_of()",
        "any_of()"])
def test_updates(predicate: p.Predicate, passes: set[str]) -> None:
    assert {name for name, new in UPDATES.items() if predicate.update(BASE, new)} == passes


@pytest.mark.parametrize("predicate", [p.generation_changed, p.labels_changed,
                                       p.annotations_changed, p.resource_version_changed])
def test_creates_and_deletes_pass(predicate: p.Predicate) -> None:
    assert predicate.create(BASE)
    assert predicate.delete(BASE)


def test_generation_changed_ignores_objects_without_generation() -> None:
    assert not p.generation_changed.update(obj(generation=None), obj(generation=None, rv="9"))


def test_funcs_and_matching() -> None:
    only_labelled = p.has_label("app", "web")
    assert only_labelled.create(obj(labels={"app": "web"}))
    assert not only_labelled.create(obj(labels={"app": "db"}))
    assert only_labelled.update(obj(), obj(labels={"app": "web"}))  # judged on the new object
    assert p.has_label("app").delete(obj(labels={"app": "db"}))
    no_deletes = p.Funcs(on_delete=lambda o: False)
    assert no_deletes.create(BASE)
    assert not no_deletes.delete(BASE)
    assert (~no_deletes).delete(BASE)
    assert not (~no_deletes).create(BASE)
