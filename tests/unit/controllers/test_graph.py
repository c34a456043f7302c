"""The garbage collector's dependency graph, event by event (no server)."""

from __future__ import annotations

from typing import Any

from setpoint.controllers.graph import (
    FOREGROUND,
    ORPHAN,
    AbsentOwners,
    Graph,
    Identity,
    Node,
    alternate_identity,
    partition_dependents,
)

Obj = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.deletes: list[str] = []
        self.retries: list[str] = []
        self.orphans: list[str] = []
        self.invalid: list[tuple[str, str]] = []
        self.graph = Graph(attempt_to_delete=lambda n: self.deletes.append(n.identity.name),
                           attempt_to_orphan=lambda n: self.orphans.append(n.identity.name),
                           retry_delete=lambda n: self.retries.append(n.identity.name),
                           invalid_owner=lambda n, r: self.invalid.append(
                               (n.identity.name, str(r["name"]))))

    def clear(self) -> None:
        self.deletes.clear()
        self.retries.clear()
        self.orphans.clear()
        self.invalid.clear()


def obj(name: str, uid: str, namespace: str = "default", *, owners: list[Obj] | None = None,
        finalizers: list[str] | None = None, deleting: bool = False) -> Obj:
    meta: Obj = {"name": name, "uid": uid, "resourceVersion": "1"}
    if namespace:
        meta["namespace"] = namespace
    if owners:
        meta["ownerReferences"] = owners
    if finalizers:
        meta["finalizers"] = finalizers
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def ref(name: str, uid: str, kind: str = "Widget", api_version: str = "example.com/v1",
        block: bool | None = None) -> Obj:
    out: Obj = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}
    if block is not None:
        out["blockOwnerDeletion"] = block
    return out


W = ("example.com/v1", "Widget")
CM = ("v1", "ConfigMap")


def test_a_dependent_seen_first_makes_a_virtual_owner_to_verify() -> None:
    r = Recorder()
    r.graph.observe(*CM, None, obj("cm", "c1", owners=[ref("w", "w1")]))
    owner = r.graph.get("w1")
    assert owner is not None
    assert not owner.observed
    assert owner.identity == Identity("example.com/v1", "Widget", "default", "w", "w1")
    assert r.deletes == ["w"]
    r.clear()
    r.graph.observe(*W, None, obj("w", "w1"))
    assert owner.observed
    assert r.graph.get("w1") is owner
    assert r.deletes == []  # the reference matches: nothing to check


def test_an_owner_that_goes_queues_its_dependents_and_is_remembered_absent() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    r.graph.observe(*CM, None, obj("a", "c1", owners=[ref("w", "w1")]))
    r.graph.observe(*CM, None, obj("b", "c2", owners=[ref("w", "w1")]))
    r.clear()
    r.graph.observe_delete(*W, obj("w", "w1"))
    assert "w1" not in r.graph
    assert sorted(r.deletes) == ["a", "b"]
    assert Identity("example.com/v1", "Widget", "default", "w", "w1") in r.graph.absent


def test_foreground_deletion_marks_the_owner_and_queues_everything() -> None:
    r = Recorder()
    before = obj("w", "w1")
    r.graph.observe(*W, None, before)
    r.graph.observe(*CM, None, obj("a", "c1", owners=[ref("w", "w1", block=True)]))
    r.clear()
    after = obj("w", "w1", finalizers=[FOREGROUND], deleting=True)
    r.graph.observe(*W, before, after)
    node = r.graph.get("w1")
    assert node is not None
    assert node.deleting_dependents
    assert node.being_deleted
    assert sorted(r.deletes) == ["a", "w"]
    assert [d.identity.name for d in node.blocking_dependents()] == ["a"]
    # the same state seen again (a relist) is no new transition
    r.clear()
    r.graph.observe(*W, after, after)
    assert r.deletes == []
    # a blocking dependent that goes queues its owner
    r.graph.observe_delete(*CM, obj("a", "c1", owners=[ref("w", "w1", block=True)]))
    assert r.deletes == ["w"]
    assert node.blocking_dependents() == []


def test_an_object_listed_while_deleting_in_the_foreground_is_a_transition() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1", finalizers=[FOREGROUND], deleting=True))
    node = r.graph.get("w1")
    assert node is not None
    assert node.deleting_dependents
    assert r.deletes == ["w"]


def test_orphan_deletion_queues_the_owner_to_orphan() -> None:
    r = Recorder()
    before = obj("w", "w1")
    r.graph.observe(*W, None, before)
    r.graph.observe(*W, before, obj("w", "w1", finalizers=[ORPHAN], deleting=True))
    assert r.orphans == ["w"]
    assert r.deletes == []


def test_unblocking_a_reference_queues_the_owner() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    blocking = obj("a", "c1", owners=[ref("w", "w1", block=True)])
    r.graph.observe(*CM, None, blocking)
    r.clear()
    unblocked = obj("a", "c1", owners=[ref("w", "w1", block=False)])
    r.graph.observe(*CM, blocking, unblocked)
    assert r.deletes == ["w"]
    r.clear()
    r.graph.observe(*CM, unblocked, obj("a", "c1"))  # a non-blocking reference removed
    assert r.deletes == []
    owner = r.graph.get("w1")
    assert owner is not None
    assert owner.dependents == set()


def test_changed_references_move_the_dependent_between_owners() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    r.graph.observe(*W, None, obj("v", "w2"))
    first = obj("a", "c1", owners=[ref("w", "w1")])
    r.graph.observe(*CM, None, first)
    r.graph.observe(*CM, first, obj("a", "c1", owners=[ref("v", "w2")]))
    one, two = r.graph.get("w1"), r.graph.get("w2")
    assert one is not None
    assert two is not None
    assert one.dependents == set()
    assert [d.identity.name for d in two.dependents] == ["a"]


def test_a_reference_to_an_owner_in_another_namespace_is_reported_and_checked() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1", namespace="b"))
    r.graph.observe(*CM, None, obj("cm", "c1", namespace="a", owners=[ref("w", "w1")]))
    assert r.invalid == [("cm", "w")]
    assert r.deletes == ["cm"]


def test_the_same_when_the_dependent_is_seen_before_its_owner() -> None:
    r = Recorder()
    r.graph.observe(*CM, None, obj("cm", "c1", namespace="a", owners=[ref("w", "w1")]))
    r.clear()
    r.graph.observe(*W, None, obj("w", "w1", namespace="b"))
    assert r.invalid == [("cm", "w")]
    assert r.deletes == ["cm"]
    owner = r.graph.get("w1")
    assert owner is not None
    assert owner.identity.namespace == "b"


def test_a_cluster_scoped_owner_may_own_namespaced_objects() -> None:
    r = Recorder()
    r.graph.observe("example.com/v1", "Cluster", None, obj("big", "k1", namespace=""))
    r.graph.observe(*CM, None, obj("cm", "c1", namespace="a",
                                   owners=[ref("big", "k1", kind="Cluster")]))
    assert r.invalid == []
    assert r.deletes == []


def test_virtual_delete_removes_a_virtual_owner_and_queues_its_dependents() -> None:
    r = Recorder()
    r.graph.observe(*CM, None, obj("cm", "c1", owners=[ref("ghost", "g1")]))
    owner = r.graph.get("g1")
    assert owner is not None
    r.clear()
    r.graph.virtual_delete(owner.identity)
    assert "g1" not in r.graph
    assert r.deletes == ["cm"]
    assert owner.identity in r.graph.absent


def test_virtual_delete_keeps_a_node_other_dependents_name_differently() -> None:
    r = Recorder()
    r.graph.observe(*CM, None, obj("a", "c1", owners=[ref("x", "u1", kind="Widget")]))
    r.graph.observe(*CM, None, obj("b", "c2", owners=[ref("x", "u1", kind="Gadget")]))
    node = r.graph.get("u1")
    assert node is not None
    first = node.identity
    r.clear()
    r.graph.virtual_delete(first)
    assert "u1" in r.graph  # the other coordinates are still to be checked
    assert node.identity != first
    assert node.identity.kind in ("Widget", "Gadget")
    assert r.deletes == (["a"] if first.kind == "Widget" else ["b"])
    assert r.retries == ["x"]  # the other identity is verified after a backoff


def test_virtual_delete_of_other_coordinates_keeps_an_observed_node() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    r.graph.observe(*CM, None, obj("a", "c1", owners=[ref("w", "w1", kind="Gadget")]))
    r.clear()
    wrong = Identity("example.com/v1", "Gadget", "default", "w", "w1")
    r.graph.virtual_delete(wrong)
    assert "w1" in r.graph
    assert r.deletes == ["a"]
    assert wrong in r.graph.absent


def test_partition_and_alternate_identity() -> None:
    owner = Identity("example.com/v1", "Widget", "default", "w", "w1")
    match = Node(Identity("v1", "ConfigMap", "default", "a", "c1"), owners=[ref("w", "w1")])
    other = Node(Identity("v1", "ConfigMap", "default", "b", "c2"),
                 owners=[ref("w", "w1", kind="Gadget")])
    elsewhere = Node(Identity("v1", "ConfigMap", "other", "c", "c3"), owners=[ref("w", "w1")])
    matching, nonmatching = partition_dependents([match, other, elsewhere], owner)
    assert matching == [match]
    assert nonmatching == [other, elsewhere]
    alternate = alternate_identity([match, other, elsewhere], owner)
    assert alternate == Identity("example.com/v1", "Widget", "other", "w", "w1")
    assert alternate_identity([match], owner) is None
    # another version of the same group and kind is the same owner
    versioned = Node(Identity("v1", "ConfigMap", "default", "d", "c4"),
                     owners=[ref("w", "w1", api_version="example.com/v2")])
    assert partition_dependents([versioned], owner) == ([versioned], [])


def test_absent_owners_forget_the_least_recently_used() -> None:
    absent = AbsentOwners(size=2)
    a, b, c = (Identity("v1", "ConfigMap", "ns", n, n) for n in "abc")
    absent.add(a)
    absent.add(b)
    assert a in absent  # now the most recent
    absent.add(c)
    assert len(absent) == 2
    assert a in absent
    assert b not in absent
    assert c in absent


class _CountedRef(dict[str, Any]):
    """An owner reference that counts how often it is read."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        _CountedRef.reads += 1
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        _CountedRef.reads += 1
        return super().__getitem__(key)


def test_owners_of_one_dependent_are_handled_each_in_constant_reads() -> None:
    # each owner verified absent scanned every reference of its dependents: an object of
    # 16,000 owner references cost the collector 9.6 s (256 million reads), now 0.1 s
    n = 2_000
    r = Recorder()
    refs = [_CountedRef(ref(f"w{i}", f"u{i}", block=True)) for i in range(n)]
    r.graph.observe(*CM, None, obj("cm", "c1", owners=list(refs)))
    _CountedRef.reads = 0
    for i in range(0, n, 2):  # verified absent under the coordinates the dependent gives
        r.graph.virtual_delete(Identity("example.com/v1", "Widget", "default", f"w{i}",
                                        f"u{i}"))
    for i in range(1, n, 2):  # under others: the dependent's owner may still exist
        r.graph.virtual_delete(Identity("example.com/v1", "Gadget", "default", f"w{i}",
                                        f"u{i}"))
    assert _CountedRef.reads <= 20 * n
    assert r.deletes.count("cm") == n // 2
    owner = r.graph.get("u1")
    assert owner is not None
    assert owner.identity.kind == "Widget"
    assert r.graph.get("u0") is None
