"""The dependency graph on malformed owner references: self-references, one UID named with
several coordinates, cluster-scoped dependents of namespaced kinds, cycles, unknown kinds and
very large fan-in and fan-out. Each case ends in a bounded amount of work: no callback loop,
no node left behind."""

from __future__ import annotations

from setpoint.controllers.graph import FOREGROUND, Identity, by_uid
from tests.unit.controllers.test_graph import CM, Recorder, W, obj, ref

NS = ("v1", "Namespace")


def test_one_dependent_naming_one_uid_twice_makes_one_edge_and_is_checked() -> None:
    r = Recorder()
    r.graph.observe(*CM, None, obj("cm", "c1", owners=[ref("a", "u1"), ref("b", "u1")]))
    owner = r.graph.get("u1")
    assert owner is not None
    assert not owner.observed
    assert owner.identity == Identity("example.com/v1", "Widget", "default", "a", "u1")
    assert [d.identity.name for d in owner.dependents] == ["cm"]
    # the virtual owner is verified, the dependent too: its references disagree
    assert sorted(r.deletes) == ["a", "cm"]


def test_identities_verified_absent_in_turn_are_retried_with_a_backoff_only() -> None:
    """The loop that never yielded: every identity of the UID is absent, and the dependents
    stay. Each turn goes through ``retry_delete`` (rate limited), never straight back."""
    r = Recorder()
    r.graph.observe(*CM, None, obj("cm", "c1", owners=[ref("a", "u1"), ref("b", "u1")]))
    node = r.graph.get("u1")
    assert node is not None
    names = []
    for _ in range(6):
        r.clear()
        names.append(node.identity.name)
        r.graph.virtual_delete(node.identity)
        assert r.graph.get("u1") is node  # the dependent still disagrees: kept
        assert r.deletes == ["cm"]  # the dependent matching the absent identity
        assert r.retries == [node.identity.name]
    assert names == ["a", "b", "a", "b", "a", "b"]
    assert Identity("example.com/v1", "Widget", "default", "a", "u1") in r.graph.absent
    assert Identity("example.com/v1", "Widget", "default", "b", "u1") in r.graph.absent


def test_a_cluster_scoped_dependent_naming_a_namespaced_uid_twice() -> None:
    """A virtual owner without a namespace: only a cluster-scoped object names it so."""
    r = Recorder()
    r.graph.observe(*NS, None, obj("confused", "n1", namespace="", owners=[
        ref("a", "u1", kind="ConfigMap", api_version="v1"),
        ref("b", "u1", kind="ConfigMap", api_version="v1")]))
    owner = r.graph.get("u1")
    assert owner is not None
    assert owner.identity == Identity("v1", "ConfigMap", "", "a", "u1")
    assert sorted(r.deletes) == ["a", "confused"]
    assert r.invalid == []  # reported when the collector looks at the kind (it needs discovery)


def test_exact_duplicate_references_are_one_edge_and_not_suspicious() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    twice = obj("cm", "c1", owners=[ref("w", "w1"), ref("w", "w1")])
    r.graph.observe(*CM, None, twice)
    assert r.deletes == []
    owner = r.graph.get("w1")
    assert owner is not None
    assert [d.identity.name for d in owner.dependents] == ["cm"]
    # the same object seen again is no change
    r.graph.observe(*CM, twice, twice)
    assert r.deletes == []
    # dropping one of the two keeps the edge; dropping both removes it
    once = obj("cm", "c1", owners=[ref("w", "w1")])
    r.graph.observe(*CM, twice, once)
    assert [d.identity.name for d in owner.dependents] == ["cm"]
    r.graph.observe(*CM, once, obj("cm", "c1"))
    assert owner.dependents == set()


def test_a_blocking_reference_among_duplicates_unblocks_only_when_none_blocks() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    both = obj("cm", "c1", owners=[ref("w", "w1", block=True), ref("w", "w1", block=False)])
    r.graph.observe(*CM, None, both)
    r.clear()
    still = obj("cm", "c1", owners=[ref("w", "w1", block=False), ref("w", "w1", block=True)])
    r.graph.observe(*CM, both, still)
    assert r.deletes == []  # one of them still blocks
    r.graph.observe(*CM, still, obj("cm", "c1", owners=[ref("w", "w1", block=False)]))
    assert r.deletes == ["w"]


def test_a_reference_whose_coordinates_change_is_checked_again() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    before = obj("cm", "c1", owners=[ref("w", "w1")])
    r.graph.observe(*CM, None, before)
    assert r.deletes == []
    r.graph.observe(*CM, before, obj("cm", "c1", owners=[ref("w", "w1", kind="Gadget")]))
    assert r.deletes == ["cm"]


def test_references_are_grouped_by_uid_in_order() -> None:
    refs = [ref("a", "u1"), ref("b", "u2"), ref("c", "u1")]
    assert {uid: [x["name"] for x in group] for uid, group in by_uid(refs).items()} == {
        "u1": ["a", "c"], "u2": ["b"]}


def test_an_object_that_owns_itself_is_its_own_solid_owner_and_never_blocks_itself() -> None:
    r = Recorder()
    r.graph.observe(*CM, None, obj("me", "m1"))
    before = obj("me", "m1", owners=[ref("me", "m1", kind="ConfigMap", api_version="v1",
                                         block=True)])
    r.graph.observe(*CM, obj("me", "m1"), before)
    node = r.graph.get("m1")
    assert node is not None
    assert node.dependents == {node}
    assert r.deletes == []  # the reference matches an observed owner: nothing to check
    r.graph.observe(*CM, before, obj("me", "m1", finalizers=[FOREGROUND], deleting=True,
                                     owners=before["metadata"]["ownerReferences"]))
    assert node.deleting_dependents
    assert node.blocking_dependents() == []  # it can finish
    assert sorted(r.deletes) == ["me", "me"]  # as a dependent and as the deleting owner
    r.clear()
    r.graph.observe_delete(*CM, before)
    assert "m1" not in r.graph
    assert r.deletes == ["me"]  # its dependent (itself) is looked at once more: it is gone


def test_a_cycle_keeps_both_nodes_until_each_goes() -> None:
    r = Recorder()
    a = obj("a", "a1", owners=[ref("b", "b1", kind="ConfigMap", api_version="v1", block=True)])
    b = obj("b", "b1", owners=[ref("a", "a1", kind="ConfigMap", api_version="v1", block=True)])
    r.graph.observe(*CM, None, a)
    r.graph.observe(*CM, None, b)
    node_a, node_b = r.graph.get("a1"), r.graph.get("b1")
    assert node_a is not None
    assert node_b is not None
    assert node_a.dependents == {node_b}
    assert node_b.dependents == {node_a}
    r.clear()
    deleting = obj("a", "a1", finalizers=[FOREGROUND], deleting=True,
                   owners=a["metadata"]["ownerReferences"])
    r.graph.observe(*CM, a, deleting)
    assert sorted(r.deletes) == ["a", "b"]
    assert node_a.blocking_dependents() == [node_b]
    r.clear()
    r.graph.observe_delete(*CM, deleting)
    assert r.deletes == ["b"]
    assert node_b.dependents == set()


def test_an_owner_of_a_kind_nobody_serves_is_a_virtual_node_to_verify() -> None:
    r = Recorder()
    r.graph.observe(*CM, None, obj("cm", "c1", owners=[
        ref("x", "u1", kind="Nope", api_version="nowhere.example.com/v9"),
        ref("y", "u2", kind="Odd", api_version="a/b/c")]))
    assert sorted(r.deletes) == ["x", "y"]
    node = r.graph.get("u2")
    assert node is not None
    assert node.identity.group == "a/b"  # the collector finds it unserved and retries


def test_a_virtual_owner_goes_with_its_last_dependent() -> None:
    r = Recorder()
    first = obj("one", "c1", owners=[ref("ghost", "g1")])
    r.graph.observe(*CM, None, first)
    r.graph.observe(*CM, None, obj("two", "c2", owners=[ref("ghost", "g1")]))
    r.graph.observe(*CM, first, obj("one", "c1"))  # stops naming it
    assert "g1" in r.graph
    r.graph.observe_delete(*CM, obj("two", "c2", owners=[ref("ghost", "g1")]))
    assert "g1" not in r.graph
    assert len(r.graph) == 1  # "one"


def test_fan_in_a_dependent_naming_thousands_of_owners() -> None:
    r = Recorder()
    refs = [ref(f"o{i}", f"u{i}") for i in range(5_000)]
    many = obj("many", "m1", owners=refs)
    r.graph.observe(*CM, None, many)
    assert len(r.graph) == 5_001
    assert len(r.deletes) == 5_000  # each virtual owner verified once
    r.clear()
    r.graph.observe(*CM, many, many)
    assert r.deletes == []
    r.graph.observe_delete(*CM, many)
    assert len(r.graph) == 0  # no virtual owner left behind


def test_fan_out_an_owner_with_thousands_of_dependents() -> None:
    r = Recorder()
    r.graph.observe(*W, None, obj("w", "w1"))
    for i in range(20_000):
        r.graph.observe(*CM, None, obj(f"d{i}", f"c{i}", owners=[ref("w", "w1")]))
    assert r.deletes == []
    owner = r.graph.get("w1")
    assert owner is not None
    assert len(owner.dependents) == 20_000
    r.graph.observe_delete(*W, obj("w", "w1"))
    assert len(r.deletes) == 20_000
    assert len(set(r.deletes)) == 20_000  # each once


def test_waiting_for_finds_owners_that_wait_for_each_other_in_the_foreground() -> None:
    r = Recorder()

    def cm(name: str, owner: str | None, deleting: bool) -> None:
        owners = [ref(owner, f"{owner}1", kind="ConfigMap", api_version="v1", block=True)] \
            if owner else None
        r.graph.observe(*CM, None, obj(name, f"{name}1", owners=owners, deleting=deleting,
                                       finalizers=[FOREGROUND] if deleting else None))

    cm("a", "c", True)   # a waits for b (b names a), b for c, c for a
    cm("b", "a", True)
    cm("c", "b", True)
    cm("x", "a", False)  # x blocks a but is not deleting its dependents
    a, b, c, x = (r.graph.get(f"{n}1") for n in "abcx")
    assert a is not None
    assert b is not None
    assert c is not None
    assert x is not None
    # a waits for b; c waits for a: c (a blocking dependent of a) closes a cycle
    assert r.graph.waiting_for(a) == {c, b, a}
    assert r.graph.waiting_for(x) == {a, c, b}  # x blocks a, which is in the cycle
    assert r.graph.waiting_for(a, budget=1) == {c}  # the search gives up, with what it has
    # break the cycle: a no longer names c
    r.graph.observe(*CM, None, obj("a", "a1", finalizers=[FOREGROUND], deleting=True))
    assert r.graph.waiting_for(a) == set()
    assert r.graph.waiting_for(b) == {a}
