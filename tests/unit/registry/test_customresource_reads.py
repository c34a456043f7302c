"""Reads of custom resources through a version with defaults: the converted copy of a stored
object is memoised by what names its content (namespace, name, uid, resourceVersion), and an
object the store owns is converted in place."""

from __future__ import annotations

import copy
from typing import Any

from setpoint.registry import crd
from setpoint.registry.customresource import CustomResourceStrategy

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "tanks.water.example.com"},
    "spec": {"group": "water.example.com", "scope": "Namespaced",
             "names": {"plural": "tanks", "singular": "tank", "kind": "Tank"},
             "versions": [
                 {"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"level": {"type": "integer"}}}}}}},
                 {"name": "v2", "served": True, "storage": False, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {
                             "level": {"type": "integer"},
                             "alarm": {"type": "boolean", "default": False}}}}}}}]},
}


def stored(rv: str, level: int, uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": "water.example.com/v1", "kind": "Tank",
            "metadata": {"name": "t", "namespace": "default", "uid": uid,
                         "resourceVersion": rv},
            "spec": {"level": level}}


def strategy() -> CustomResourceStrategy:
    return CustomResourceStrategy(crd.resource_info(CRD), preserve_unknown_fields=False)


def test_reads_through_a_defaulted_version_are_memoised_by_what_names_the_content() -> None:
    s = strategy()
    first = s.from_storage(stored("5", 1), "v2")
    assert first == {**stored("5", 1), "apiVersion": "water.example.com/v2",
                     "spec": {"level": 1, "alarm": False}}
    # the same write decoded again (another dict): the same converted copy
    assert s.from_storage(stored("5", 1), "v2") is first
    # another write of the key, or another object of the name: converted anew
    assert s.from_storage(stored("6", 2), "v2")["spec"] == {"level": 2, "alarm": False}
    assert s.from_storage(stored("5", 3, uid="u2"), "v2")["spec"] == {"level": 3,
                                                                        "alarm": False}
    # the stored objects are not kept alive by the memo, only the copies
    assert all(isinstance(key, tuple) for key in s._read_memo["v2"])
    assert s._read_memo["v2"][("default", "t", "u1", "5")] is first


def test_a_shared_object_is_never_changed_and_an_owned_one_is_converted_in_place() -> None:
    s = strategy()
    shared = stored("5", 1)
    before = copy.deepcopy(shared)
    s.from_storage(shared, "v2")
    assert shared == before
    owned = stored("7", 4)
    assert s.from_storage_owned(owned, "v2") is owned
    assert owned["apiVersion"] == "water.example.com/v2"
    assert owned["spec"] == {"level": 4, "alarm": False}
    assert ("default", "t", "u1", "7") not in s._read_memo.get("v2", {})


def test_an_object_without_a_resource_version_is_not_memoised() -> None:
    s = strategy()
    obj = stored("", 1)
    assert s.from_storage(obj, "v2")["spec"] == {"level": 1, "alarm": False}
    assert not s._read_memo.get("v2")
