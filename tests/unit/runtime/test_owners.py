"""Owner references: one controller, same-namespace owners, lookups through the cache."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.runtime import informercache as rtcache
from setpoint.runtime import owners
from setpoint.runtime import watcher as w

BOOK = {"apiVersion": "example.com/v1", "kind": "Book",
        "metadata": {"name": "dune", "namespace": "lib", "uid": "u-book"}}
SHELF = {"apiVersion": "example.com/v1", "kind": "Shelf",
         "metadata": {"name": "top", "namespace": "lib", "uid": "u-shelf"}}


def child(name: str = "dune-index") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "lib"}}


def test_set_controller_reference() -> None:
    obj = owners.set_controller_reference(BOOK, child())
    assert obj["metadata"]["ownerReferences"] == [{
        "apiVersion": "example.com/v1", "kind": "Book", "name": "dune", "uid": "u-book",
        "controller": True, "blockOwnerDeletion": True}]
    owners.set_controller_reference(BOOK, obj)  # the same owner again: still one entry
    assert len(obj["metadata"]["ownerReferences"]) == 1
    assert owners.controller_of(obj) == obj["metadata"]["ownerReferences"][0]
    assert owners.owner_of(obj, kind="Book", group="example.com") is not None
    assert owners.owner_of(obj, kind="Shelf") is None
    assert owners.is_owned_by(obj, BOOK)
    assert not owners.is_owned_by(obj, SHELF)


def test_a_second_controller_is_refused() -> None:
    obj = owners.set_controller_reference(BOOK, child())
    with pytest.raises(owners.AlreadyOwnedError, match="dune"):
        owners.set_controller_reference(SHELF, obj)


def test_plain_owner_references_are_kept() -> None:
    obj = child()
    obj["metadata"]["ownerReferences"] = [owners.owner_reference(SHELF, controller=False)]
    owners.set_controller_reference(BOOK, obj)
    assert [r["kind"] for r in obj["metadata"]["ownerReferences"]] == ["Shelf", "Book"]
    assert owners.owner_of(obj, kind="Shelf") is None
    assert owners.owner_of(obj, kind="Shelf", only_controller=False) is not None


@pytest.mark.parametrize(("owner", "message"), [
    ({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}}, "metadata.uid"),
    ({"kind": "X", "metadata": {"name": "a", "uid": "u"}}, "apiVersion"),
    ({"apiVersion": "v1", "kind": "X",
      "metadata": {"name": "a", "uid": "u", "namespace": "other"}}, "namespace"),
], ids=["no uid", "no apiVersion", "other namespace"])
def test_invalid_owners(owner: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        owners.set_controller_reference(owner, child())


def test_owned_by_uses_the_owner_index() -> None:
    cache = rtcache.Cache()
    a = owners.set_controller_reference(BOOK, child("a"))
    b = owners.set_controller_reference(SHELF, child("b"))
    for event in (w.Init(), w.InitApply(a), w.InitApply(b), w.InitDone()):
        cache.apply(event)
    assert owners.owned_by(cache, BOOK) == [a]
    assert owners.owned_by(cache, {"metadata": {}}) == []
