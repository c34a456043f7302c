"""Owner references: who created an object, and which objects a controller owns.

:func:`set_controller_reference` marks ``obj`` as created and managed by ``owner`` (the
reference that garbage collection follows and that ``Controller.owns`` maps back to the
owner); :func:`controller_of` reads it back; :func:`owned_by` lists an owner's objects from
a cache, through its ``owner`` index.

Invariants (those of Kubernetes' API validation and controller-runtime's helper):

- an object has **at most one** controller reference; setting a second one, for another
  owner, raises :class:`AlreadyOwnedError`; setting the same owner again updates the entry;
- a namespaced object's owner is cluster-scoped or in the same namespace; a cluster-scoped
  object's owner is cluster-scoped (checked when the owner's scope is visible, i.e. when it
  has ``metadata.namespace``);
- the owner must have a ``uid`` (it must exist): references match on uid.

Non-guarantees: :func:`set_controller_reference` changes ``obj`` in place; never call it on an
object read from a cache (caches share their objects), only on one you are building.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, MutableMapping
from typing import Any

from setpoint.runtime import informercache as rtcache

Obj = Mapping[str, Any]


class AlreadyOwnedError(ValueError):
    """The object already has a controller reference to another owner."""


def _group(api_version: str) -> str:
    group, _, _ = api_version.rpartition("/")
    return group


def owner_reference(owner: Obj, *, controller: bool = True,
                    block_owner_deletion: bool = True) -> dict[str, Any]:
    """An ``ownerReferences`` entry pointing at ``owner``."""
    metadata = owner.get("metadata") or {}
    missing = [f for f, v in (("apiVersion", owner.get("apiVersion")),
                              ("kind", owner.get("kind")),
                              ("metadata.name", metadata.get("name")),
                              ("metadata.uid", metadata.get("uid"))) if not v]
    if missing:
        raise ValueError("an owner needs " + ", ".join(missing))
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": metadata["name"], "uid": metadata["uid"],
            "controller": controller, "blockOwnerDeletion": block_owner_deletion}


def set_controller_reference(owner: Obj, obj: MutableMapping[str, Any]
                             ) -> MutableMapping[str, Any]:
    """Make ``owner`` the controller of ``obj`` (in place); returns ``obj``.

    >>> book = {"apiVersion": "example.com/v1", "kind": "Book",
    ...         "metadata": {"name": "dune", "namespace": "lib", "uid": "u-1"}}
    >>> cm = set_controller_reference(book, {"metadata": {"name": "dune-index"}})
    >>> cm["metadata"]["ownerReferences"][0]["controller"], controller_of(cm)["name"]
    (True, 'dune')
    """
    ref = owner_reference(owner)
    owner_ns = (owner.get("metadata") or {}).get("namespace")
    metadata = obj.setdefault("metadata", {})
    obj_ns = metadata.get("namespace")
    if owner_ns and obj_ns and owner_ns != obj_ns:
        raise ValueError(f"an owner in namespace {owner_ns!r} cannot own an object in "
                         f"namespace {obj_ns!r}")
    refs: builtins.list[dict[str, Any]] = [dict(r) for r in metadata.get("ownerReferences")
                                           or ()]
    current = controller_of(obj)
    if current is not None and current.get("uid") != ref["uid"]:
        raise AlreadyOwnedError(
            f"the object is already controlled by {current.get('kind')} "
            f"{current.get('name')!r} ({current.get('uid')})")
    for i, existing in enumerate(refs):
        if existing.get("uid") == ref["uid"]:
            refs[i] = ref
            break
    else:
        refs.append(ref)
    metadata["ownerReferences"] = refs
    return obj


def controller_of(obj: Obj) -> dict[str, Any] | None:
    """The owner reference with ``controller: true``, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return dict(ref)
    return None


def owner_of(obj: Obj, *, kind: str | None = None, group: str | None = None,
             only_controller: bool = True) -> dict[str, Any] | None:
    """The (controller) owner reference of ``obj`` with this kind and API group, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if not isinstance(ref, Mapping):
            continue
        if only_controller and ref.get("controller") is not True:
            continue
        if kind is not None and ref.get("kind") != kind:
            continue
        if group is not None and _group(str(ref.get("apiVersion", ""))) != group:
            continue
        return dict(ref)
    return None


def is_owned_by(obj: Obj, owner: Obj) -> bool:
    """Whether ``obj`` has any owner reference to ``owner`` (by uid)."""
    uid = (owner.get("metadata") or {}).get("uid")
    return bool(uid) and any(
        isinstance(ref, Mapping) and ref.get("uid") == uid
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ())


def owned_by(cache: rtcache.Cache, owner: Obj) -> builtins.list[Obj]:
    """The objects in ``cache`` that reference ``owner`` (sorted by key)."""
    uid = (owner.get("metadata") or {}).get("uid")
    if not uid:
        return []
    return cache.by_index(rtcache.OWNER_INDEX, str(uid))
