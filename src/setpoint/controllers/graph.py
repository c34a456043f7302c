"""The garbage collector's dependency graph: who owns whom, from ``ownerReferences``.

One :class:`Node` per object UID, seen through the garbage collector's informers (every
deletable resource, metadata only). A node knows its owners (its own ``ownerReferences``) and
its dependents (the nodes whose references name it). An owner that has not been seen is a
*virtual* node, built from a dependent's reference; the collector asks the API whether it
exists.

:class:`Graph` takes the informers' events, keeps the graph, and says what must be looked at
by calling two callbacks (the collector's work queues):

- ``attempt_to_delete(node)``: a dependent whose owners may all be gone (or waiting for it in
  foreground deletion), a virtual owner to verify, an owner whose foreground deletion may be
  able to finish;
- ``retry_delete(node)``: the same, after a backoff (Kubernetes' ``AddRateLimited``): a
  virtual owner that took another identity after one was verified absent;
- ``attempt_to_orphan(node)``: an owner deleted with the ``orphan`` finalizer.

and ``invalid_owner(node, reference)`` when a dependent's reference names a namespaced owner
that lives in another namespace (Kubernetes reports ``OwnerRefInvalidNamespace``).

The rules are Kubernetes' (``GraphBuilder.processGraphChanges``):

- an object that appears adds itself to its owners' dependents (virtual owners are made and
  queued for verification); a reference that cannot be right (an owner of another namespace,
  other coordinates than the observed owner) queues the dependent;
- an object that gains ``deletionTimestamp`` with ``foregroundDeletion`` is *deleting its
  dependents*: it and all its dependents are queued; with ``orphan`` it is queued to orphan;
- an object whose references change queues the owners it stopped blocking
  (``blockOwnerDeletion`` removed or set false); references are compared per owner UID, so
  several references to one UID (with the same or other coordinates) are one edge;
- an object that disappears queues its dependents (their owner is now absent, which is
  remembered in the :class:`AbsentOwners` cache) and its owners that are deleting
  dependents (one fewer dependent to wait for);
- a *virtual* delete (the collector found that a node's object does not exist) removes the
  node, unless dependents name that UID with other coordinates: then only the dependents
  that match are queued, and the node takes one of the other identities, to be verified
  after a backoff (so that identities that are all absent are not tried in a tight loop).

Malformed graphs: an object may name itself as its owner (it is then its own solid owner,
as in Kubernetes, but never blocks its own foreground deletion: Kubernetes would wait for it
forever); owners form cycles (broken by the collector, see ``garbagecollector`` and
:meth:`Graph.waiting_for`); one UID
may be named with several coordinates, by one dependent or by several (the virtual owner
tries them in turn, see above); a cluster-scoped dependent may name a namespaced kind (its
virtual owner then has no namespace and can never be verified: the collector leaves it, as
Kubernetes does).

Invariants: every method is synchronous, does no I/O, and costs O(references + dependents)
of the nodes it touches (the collector applies events in batches and yields between them).
A dependent is in ``owner.dependents`` exactly when one of its references names the owner's
UID; a virtual node is in the graph only while some dependent references it (it is dropped
with its last dependent), so the graph holds at most the observed objects plus the distinct
UIDs their references name.

Non-guarantees: the graph follows the informers, so it may be behind the API; the collector
re-reads what it acts on, and every write it makes carries preconditions.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def group_of(api_version: str) -> str:
    """``"apps/v1"`` → ``"apps"``; ``"v1"`` → ``""``."""
    group, _, _ = api_version.rpartition("/")
    return group


@dataclass(frozen=True, slots=True)
class Identity:
    """An object's coordinates; ``namespace`` is ``""`` for a cluster-scoped object."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    def __str__(self) -> str:
        return (f"[{self.api_version}/{self.kind}, namespace: {self.namespace}, "
                f"name: {self.name}, uid: {self.uid}]")


def reference_matches(ref: Obj, identity: Identity) -> bool:
    """Whether an owner reference names ``identity`` (same UID, name, kind and API group;
    the version may differ, as one object is served in several versions)."""
    return (ref.get("uid") == identity.uid and ref.get("name") == identity.name
            and ref.get("kind") == identity.kind
            and group_of(str(ref.get("apiVersion", ""))) == identity.group)


def owner_identity(ref: Obj, namespace: str) -> Identity:
    """The identity a reference names, placed in the dependent's ``namespace``."""
    return Identity(str(ref.get("apiVersion", "")), str(ref.get("kind", "")), namespace,
                    str(ref.get("name", "")), str(ref.get("uid", "")))


def is_blocking(ref: Obj) -> bool:
    return ref.get("blockOwnerDeletion") is True


def metadata(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def owner_references(obj: Obj) -> list[Obj]:
    refs = metadata(obj).get("ownerReferences") or []
    return [r for r in refs if isinstance(r, Mapping) and r.get("uid")]


def finalizers(obj: Obj) -> list[str]:
    return [f for f in metadata(obj).get("finalizers") or [] if isinstance(f, str)]


def being_deleted(obj: Obj) -> bool:
    return bool(metadata(obj).get("deletionTimestamp"))


def _starts_deletion_with(old: Obj | None, new: Obj, finalizer: str) -> bool:
    """``new`` is being deleted with ``finalizer`` and ``old`` was not (or lacked it)."""
    if not being_deleted(new) or finalizer not in finalizers(new):
        return False
    return old is None or not being_deleted(old) or finalizer not in finalizers(old)


class Node:
    """One object (or a virtual owner) in the graph."""

    __slots__ = ("_owners", "_owners_by_uid", "being_deleted", "deleting_dependents",
                 "dependents", "identity", "obj", "observed")

    def __init__(self, identity: Identity, *, owners: list[Obj] | None = None,
                 observed: bool = True, obj: Obj | None = None) -> None:
        self.identity = identity
        self.owners = owners or []
        self.dependents: set[Node] = set()
        #: seen through an informer (False: a virtual owner, not verified yet)
        self.observed = observed
        self.being_deleted = False
        #: being deleted in the foreground: its dependents go first
        self.deleting_dependents = False
        #: the latest object seen by the informer (metadata only)
        self.obj = obj

    @property
    def uid(self) -> str:
        return self.identity.uid

    @property
    def owners(self) -> list[Obj]:
        """The object's owner references, in order."""
        return self._owners

    @owners.setter
    def owners(self, refs: list[Obj]) -> None:
        self._owners = refs
        self._owners_by_uid = by_uid(refs)

    def references_to(self, uid: str) -> list[Obj]:
        """The owner references naming ``uid``, in order: a lookup, not a scan, so that
        handling each owner of an object of thousands of references is not quadratic."""
        return [r for r in self._owners_by_uid.get(uid, ()) if r.get("uid") == uid]

    def blocking_dependents(self) -> list[Node]:
        """Dependents whose reference to this node has ``blockOwnerDeletion: true`` (the node
        itself excepted: an object that names itself never waits for itself)."""
        return [dep for dep in self.dependents if blocks(dep, self)]

    def __repr__(self) -> str:
        state = "" if self.observed else " virtual"
        return f"<Node {self.identity}{state}>"


def blocks(dependent: Node, owner: Node) -> bool:
    """Whether ``dependent`` holds up ``owner``'s foreground deletion: one of its references
    to the owner has ``blockOwnerDeletion: true``, and it is not the owner itself."""
    return dependent is not owner and any(
        is_blocking(r) for r in dependent.references_to(owner.uid))


class AbsentOwners:
    """Identities verified not to exist (Kubernetes' ``absentOwnerCache``): least recently
    used ones are forgotten beyond ``size``."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._entries: OrderedDict[Identity, None] = OrderedDict()

    def add(self, identity: Identity) -> None:
        self._entries[identity] = None
        self._entries.move_to_end(identity)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __contains__(self, identity: object) -> bool:
        if identity in self._entries:
            self._entries.move_to_end(identity)  # type: ignore[arg-type]
            return True
        return False

    def __len__(self) -> int:
        return len(self._entries)


#: references examined at most when looking for a cycle of foreground deletions
CYCLE_SEARCH_BUDGET = 10_000


def partition_dependents(dependents: Iterable[Node], owner: Identity
                         ) -> tuple[list[Node], list[Node]]:
    """Dependents whose references name ``owner`` with its coordinates, and those that name
    its UID otherwise (or live in another namespace than a namespaced ``owner``). A dependent
    with several references to the UID may be in both."""
    matching: list[Node] = []
    nonmatching: list[Node] = []
    for dep in dependents:
        found_match = found_mismatch = False
        if owner.namespace and owner.namespace != dep.identity.namespace:
            found_mismatch = True
        else:
            for ref in dep.references_to(owner.uid):
                if reference_matches(ref, owner):
                    found_match = True
                else:
                    found_mismatch = True
        if found_match:
            matching.append(dep)
        if found_mismatch:
            nonmatching.append(dep)
    return matching, nonmatching


def _order(identity: Identity) -> tuple[str, ...]:
    return (identity.kind, identity.api_version, identity.namespace, identity.name,
            identity.uid)


def alternate_identity(dependents: Iterable[Node], absent: Identity) -> Identity | None:
    """Another identity the dependents give ``absent``'s UID: the first after ``absent`` in
    (kind, apiVersion, namespace, name) order, else the first."""
    cluster_scoped = not absent.namespace
    seen = {absent}
    first: Identity | None = None
    following: Identity | None = None
    for dep in dependents:
        for ref in dep.references_to(absent.uid):
            if reference_matches(ref, absent) and (
                    cluster_scoped or absent.namespace == dep.identity.namespace):
                continue
            candidate = owner_identity(ref, dep.identity.namespace)
            if cluster_scoped and candidate.api_version == absent.api_version \
                    and candidate.kind == absent.kind:
                candidate = Identity(candidate.api_version, candidate.kind, "",
                                     candidate.name, candidate.uid)
            if candidate in seen:
                continue
            seen.add(candidate)
            if first is None or _order(candidate) < _order(first):
                first = candidate
            if _order(absent) < _order(candidate) and (
                    following is None or _order(candidate) < _order(following)):
                following = candidate
    return following or first


def by_uid(refs: Iterable[Obj]) -> dict[str, list[Obj]]:
    """References grouped by the owner UID they name, in order."""
    groups: dict[str, list[Obj]] = {}
    for ref in refs:
        groups.setdefault(str(ref.get("uid")), []).append(ref)
    return groups


def _diff(old: list[Obj], new: list[Obj]
          ) -> tuple[list[Obj], list[Obj], list[tuple[list[Obj], list[Obj]]]]:
    """(added, removed, changed) references, compared per owner UID: references to a UID
    that only ``new`` names, those to a UID that only ``old`` names, and (before, after) for
    each UID both name differently."""
    before, after = by_uid(old), by_uid(new)
    added = [r for uid, refs in after.items() if uid not in before for r in refs]
    removed = [r for uid, refs in before.items() if uid not in after for r in refs]
    changed = [(before[uid], refs) for uid, refs in after.items()
               if uid in before and [dict(r) for r in before[uid]] != [dict(r) for r in refs]]
    return added, removed, changed


NodeCallback = Callable[[Node], None]
InvalidOwnerCallback = Callable[[Node, Obj], None]


class Graph:
    """The dependency graph; see the module docstring."""

    def __init__(self, *, attempt_to_delete: NodeCallback, attempt_to_orphan: NodeCallback,
                 retry_delete: NodeCallback | None = None,
                 invalid_owner: InvalidOwnerCallback | None = None,
                 absent: AbsentOwners | None = None) -> None:
        self._to_delete = attempt_to_delete
        self._retry_delete = retry_delete or attempt_to_delete
        self._to_orphan = attempt_to_orphan
        self._invalid_owner = invalid_owner or (lambda node, ref: None)
        self.absent = absent if absent is not None else AbsentOwners()
        self._nodes: dict[str, Node] = {}

    # --- reading ----------------------------------------------------------------------

    def get(self, uid: str) -> Node | None:
        return self._nodes.get(uid)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, uid: object) -> bool:
        return uid in self._nodes

    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def waiting_for(self, node: Node, budget: int = CYCLE_SEARCH_BUDGET) -> set[Node]:
        """The nodes deleting their dependents in the foreground that wait, directly or
        through other such nodes, for ``node`` (following blocking references from ``node``
        to its owners). A blocking dependent of ``node`` in that set closes a cycle that
        would never finish. The search stops after ``budget`` references (what it found so
        far is returned: fewer cycles are seen, and those deletions wait, as without it)."""
        found: set[Node] = set()
        todo = [node]
        while todo:
            current = todo.pop()
            for ref in current.owners:
                budget -= 1
                if budget < 0:
                    return found
                if not is_blocking(ref):
                    continue
                owner = self._nodes.get(str(ref.get("uid")))
                if owner is not None and owner.deleting_dependents and owner not in found \
                        and current in owner.dependents:
                    found.add(owner)
                    todo.append(owner)
        return found

    # --- events -----------------------------------------------------------------------

    def observe(self, api_version: str, kind: str, old: Obj | None, new: Obj) -> None:
        """An object of ``kind`` was added (``old`` None) or updated."""
        meta = metadata(new)
        uid = str(meta.get("uid") or "")
        if not uid:
            return
        identity = Identity(api_version, kind, str(meta.get("namespace") or ""),
                            str(meta.get("name") or ""), uid)
        existing = self._nodes.get(uid)
        if existing is not None and not existing.observed:
            self._mark_observed(existing, identity)
        refs = owner_references(new)
        if existing is None:
            node = Node(identity, owners=refs, obj=new)
            node.being_deleted = being_deleted(new)
            node.deleting_dependents = node.being_deleted and FOREGROUND in finalizers(new)
            self._nodes[uid] = node
            self._add_dependent_to_owners(node, refs)
            self._transitions(old, new, node)
            return
        existing.obj = new
        if existing.identity.api_version != api_version or existing.identity.kind != kind:
            existing.identity = identity
        added, removed, changed = _diff(existing.owners, refs)
        if added or removed or changed:
            self._unblocked_owners(removed, changed)
            existing.owners = refs
            # references whose coordinates changed are checked again, as new ones are
            self._add_dependent_to_owners(existing, [*added, *(r for _, a in changed for r in a)])
            self._remove_dependent_from_owners(existing, removed)
        if being_deleted(new):
            existing.being_deleted = True
        self._transitions(old, new, existing)

    def observe_delete(self, api_version: str, kind: str, obj: Obj) -> None:
        """An object of ``kind`` was deleted (seen by an informer)."""
        meta = metadata(obj)
        uid = str(meta.get("uid") or "")
        existing = self._nodes.get(uid)
        if existing is None:
            return
        identity = Identity(api_version, kind, str(meta.get("namespace") or ""),
                            str(meta.get("name") or ""), uid)
        self._remove(existing, identity)

    def virtual_delete(self, identity: Identity) -> None:
        """The object ``identity`` names was verified not to exist (by the collector)."""
        existing = self._nodes.get(identity.uid)
        if existing is None:
            return
        if not existing.observed:
            matching, nonmatching = partition_dependents(existing.dependents, identity)
            if nonmatching:
                # dependents disagree on the owner's coordinates: keep the virtual node
                if matching:
                    self.absent.add(identity)
                    for dep in matching:
                        self._to_delete(dep)
                if existing.identity == identity:
                    replacement = alternate_identity(nonmatching, identity)
                    if replacement is not None:
                        existing.identity = replacement
                        self._retry_delete(existing)
                return
        elif existing.identity != identity:
            # the observed object disagrees with what was verified absent
            matching, _ = partition_dependents(existing.dependents, identity)
            if matching:
                self.absent.add(identity)
                for dep in matching:
                    self._to_delete(dep)
            return
        self._remove(existing, identity)

    # --- internals --------------------------------------------------------------------

    def _mark_observed(self, node: Node, observed: Identity) -> None:
        if observed != node.identity:
            _, invalid = partition_dependents(node.dependents, observed)
            for dep in invalid:
                if observed.namespace and dep.identity.namespace != observed.namespace:
                    self._report_invalid(dep, observed.uid)
                self._to_delete(dep)
            node.identity = observed
        node.observed = True

    def _report_invalid(self, node: Node, owner_uid: str) -> None:
        for ref in node.references_to(owner_uid):
            self._invalid_owner(node, ref)
            return

    def _add_dependent_to_owners(self, node: Node, refs: list[Obj]) -> None:
        potentially_invalid = False
        for ref in refs:
            uid = str(ref.get("uid"))
            owner = self._nodes.get(uid)
            if owner is None:
                owner = Node(owner_identity(ref, node.identity.namespace), observed=False)
                self._nodes[uid] = owner
                owner.dependents.add(node)
                self._to_delete(owner)  # verify that it exists
                continue
            owner.dependents.add(node)
            if potentially_invalid:
                continue
            namespaced_owner = bool(owner.identity.namespace)
            if namespaced_owner and owner.identity.namespace != node.identity.namespace:
                if owner.observed:
                    self._invalid_owner(node, ref)
                potentially_invalid = True
            elif not reference_matches(ref, owner.identity) or (
                    not namespaced_owner and node.identity.namespace and not owner.observed):
                # other coordinates than the owner's; or a virtual owner without namespace
                # that a namespaced dependent names (it may be a namespaced kind)
                potentially_invalid = True
        if potentially_invalid:
            self._to_delete(node)

    def _remove_dependent_from_owners(self, node: Node, refs: list[Obj]) -> None:
        for ref in refs:
            uid = str(ref.get("uid"))
            owner = self._nodes.get(uid)
            if owner is None:
                continue
            owner.dependents.discard(node)
            if not owner.observed and not owner.dependents:
                # nothing names it any more: a virtual node exists only for its dependents
                del self._nodes[uid]

    def _unblocked_owners(self, removed: list[Obj],
                          changed: list[tuple[list[Obj], list[Obj]]]) -> None:
        unblocked = {str(ref.get("uid")) for ref in removed if is_blocking(ref)}
        for before, after in changed:
            if any(is_blocking(r) for r in before) and not any(is_blocking(r) for r in after):
                unblocked.add(str(after[0].get("uid")))
        for uid in unblocked:
            owner = self._nodes.get(uid)
            if owner is not None:
                self._to_delete(owner)

    def _transitions(self, old: Obj | None, new: Obj, node: Node) -> None:
        if _starts_deletion_with(old, new, ORPHAN):
            self._to_orphan(node)
            return
        if _starts_deletion_with(old, new, FOREGROUND):
            node.deleting_dependents = True
            for dep in list(node.dependents):
                self._to_delete(dep)
            self._to_delete(node)

    def _remove(self, node: Node, identity: Identity) -> None:
        self._nodes.pop(node.uid, None)
        self._remove_dependent_from_owners(node, node.owners)
        if node.dependents:
            self.absent.add(identity)
        for dep in list(node.dependents):
            self._to_delete(dep)
        for ref in node.owners:
            owner = self._nodes.get(str(ref.get("uid")))
            if owner is not None and owner.deleting_dependents:
                self._to_delete(owner)
