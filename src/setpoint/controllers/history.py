"""ControllerRevisions of StatefulSets and DaemonSets: one per distinct pod template.

As Kubernetes' ``pkg/controller/history`` and the two controllers' use of it:

- a revision's ``data`` is the patch that puts its template back,
  ``{"spec": {"template": {..., "$patch": "replace"}}}`` (what ``kubectl rollout undo``
  applies as a strategic merge patch); its labels are the template's plus a hash label
  (``controller.kubernetes.io/hash`` for a StatefulSet, ``controller-revision-hash`` for a
  DaemonSet), its annotations the owner's, and it has a controller ``ownerReference`` to the
  owner (so the garbage collector deletes it with the owner);
- the *update* revision is the one whose ``data`` equals the owner's template now: created
  with the next number (one more than the highest) when there is none, renumbered to the
  next number when an older revision has it (a template that comes back, ``rollout undo``),
  kept as it is when it already has the highest number;
- history is trimmed to ``spec.revisionHistoryLimit`` (default 10) revisions besides the
  ones in use: the oldest go first, never the current or update revision nor one a live pod
  was made from.

:func:`plan` decides, as a pure function of the owned revisions; :func:`sync` carries it out.

Orphaned revisions that match the owner's selector are adopted (an owner deleted with
``propagationPolicy: Orphan`` and created again finds its history), as pods are.

Non-guarantees: a hash collision (a revision of the same name with other data) is not resolved with
``collisionCount``: the owner's reconcile is retried until the other revision is deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.controllers import replicaset

Obj = Mapping[str, Any]

CONTROLLER_REVISION: Final = ("apps/v1", "ControllerRevision")
DEFAULT_HISTORY_LIMIT: Final = 10


def _d(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _meta(obj: Obj) -> Mapping[str, Any]:
    return _d(obj.get("metadata"))


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def number(revision: Obj) -> int:
    value = revision.get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def patch_of(owner: Obj) -> dict[str, Any]:
    """The ``data`` of a revision of ``owner``'s current template."""
    template = dict(_d(_d(owner.get("spec")).get("template")))
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def controlled_by(obj: Obj, uid: str) -> bool:
    refs = _meta(obj).get("ownerReferences")
    return any(_d(r).get("uid") == uid and _d(r).get("controller") is True
               for r in (refs if isinstance(refs, list) else []))


async def owned(ctx: runtime.Context, owner: Obj, owner_kind: tuple[str, str]) -> list[Obj]:
    """The revisions ``owner`` controls, oldest (lowest number) first, after adopting the
    orphans its selector matches and releasing the ones it no longer matches (as pods are
    claimed: :func:`setpoint.controllers.replicaset.claim`)."""
    uid = str(_meta(owner).get("uid") or "")
    namespace = str(_meta(owner).get("namespace") or "")
    candidates = [r for r in ctx.cache_for(CONTROLLER_REVISION).by_index("namespace", namespace)
                  if not _meta(r).get("deletionTimestamp")
                  and replicaset.controller_uid(r) in (uid, None)]
    selector = replicaset.selector_of(owner)
    if selector is None:
        found = [r for r in candidates if controlled_by(r, uid)]
    else:
        found = await replicaset.claim(ctx.client, owner, candidates, selector,
                                       CONTROLLER_REVISION, owner_kind)
    return sorted(found, key=lambda r: (number(r), _name(r)))


def new_revision(owner: Obj, owner_kind: tuple[str, str], name: str, hash_label: str,
                 hash_value: str, revision: int) -> dict[str, Any]:
    meta = _meta(owner)
    template_meta = _meta(_d(_d(owner.get("spec")).get("template")))
    labels = {str(k): str(v) for k, v in _d(template_meta.get("labels")).items()}
    labels[hash_label] = hash_value
    revision_meta: dict[str, Any] = {
        "name": name, "namespace": meta.get("namespace"), "labels": labels,
        "ownerReferences": [{"apiVersion": owner_kind[0], "kind": owner_kind[1],
                             "name": _name(owner), "uid": meta.get("uid"),
                             "controller": True, "blockOwnerDeletion": True}]}
    if meta.get("annotations"):
        revision_meta["annotations"] = dict(_d(meta.get("annotations")))
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": revision_meta,
            "data": patch_of(owner), "revision": revision}


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with an owner's revisions."""

    #: the revision of the template now, when it exists already
    update: Obj | None
    #: the number the update revision must have (a renumbering when it differs from its own)
    update_number: int
    #: names of the revisions to delete
    trim: tuple[str, ...] = ()


def plan(owner: Obj, revisions: Sequence[Obj], update_name: str,
         in_use: Callable[[Obj], bool], current_name: str | None = None) -> Plan:
    """The update revision and the trimming, for ``owner`` whose revisions (oldest first)
    are ``revisions``; ``in_use`` tells the revisions live pods were made from."""
    data = _canonical(patch_of(owner))
    highest = max((number(r) for r in revisions), default=0)
    equal = [r for r in revisions if _canonical(r.get("data")) == data]
    update = equal[-1] if equal else None
    if update is None:
        update_number = highest + 1
    elif number(update) == highest:
        update_number = highest
    else:
        update_number = highest + 1
    limit = _d(owner.get("spec")).get("revisionHistoryLimit")
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 \
        else DEFAULT_HISTORY_LIMIT
    keep = {update_name, current_name or update_name}
    if update is not None:
        keep.add(_name(update))
    spare = [r for r in revisions if _name(r) not in keep and not in_use(r)]
    trim = tuple(_name(r) for r in spare[:max(0, len(spare) - limit)])
    return Plan(update, update_number, trim)


def template_of(revision: Obj) -> dict[str, Any] | None:
    """The pod template a revision holds (its ``data`` without the ``$patch`` directive)."""
    template = _d(_d(_d(revision.get("data")).get("spec")).get("template"))
    if not template:
        return None
    return {k: v for k, v in template.items() if k != "$patch"}


@dataclass(frozen=True, slots=True)
class Synced:
    """The owner's revisions after :func:`sync`."""

    update: Obj
    #: the owner's revisions by name, as they were before the writes of the sync
    by_name: Mapping[str, Obj]


def _rv(obj: Obj) -> int:
    try:
        return int(str(_meta(obj).get("resourceVersion") or "0"))
    except ValueError:
        return 0


class Written:
    """The last revision each owner wrote (by owner key), until the cache shows it: a pass
    that comes before the watch neither creates it again nor renumbers a stale copy.
    Holds one revision per owner; :meth:`forget` drops an owner that is gone."""

    def __init__(self) -> None:
        self._last: dict[str, Obj] = {}

    def remember(self, key: str, revision: Obj) -> None:
        self._last[key] = revision

    def forget(self, key: str) -> None:
        self._last.pop(key, None)

    def merged(self, key: str, owner: Obj, revisions: list[Obj]) -> list[Obj]:
        """``revisions`` (from the cache) with the one written for ``key`` in place of a
        stale or missing copy; sorted as :func:`owned` sorts."""
        written = self._last.get(key)
        if written is None:
            return revisions
        uid = str(_meta(owner).get("uid") or "")
        seen = next((r for r in revisions if _name(r) == _name(written)), None)
        if not controlled_by(written, uid) or (seen is not None and _rv(seen) >= _rv(written)):
            self._last.pop(key, None)  # the cache has caught up (or the owner is new)
            return revisions
        others = [r for r in revisions if _name(r) != _name(written)]
        return sorted([*others, written], key=lambda r: (number(r), _name(r)))


class Collision(Exception):
    """A revision of the update revision's name holds another template."""


async def sync(ctx: runtime.Context, owner: Obj, owner_kind: tuple[str, str], *,
               name: str, hash_label: str, hash_value: str,
               in_use: Callable[[Obj], bool], current_name: str | None = None,
               written: Written | None = None, key: str = "") -> Synced:
    """Make the update revision of ``owner`` exist with the highest number, trim history,
    and return the update revision and the others. Raises :class:`errors.Conflict` when a
    write raced, and :class:`Collision` when the name is taken by other data. ``written``
    remembers, under ``key``, what this pass writes for the passes that come before the
    cache shows it."""
    namespace = str(_meta(owner).get("namespace") or "")
    revisions = await owned(ctx, owner, owner_kind)
    if written is not None:
        revisions = written.merged(key, owner, revisions)
    decided = plan(owner, revisions, name, in_use, current_name)
    update = decided.update
    if update is None:
        wanted = new_revision(owner, owner_kind, name, hash_label, hash_value,
                              decided.update_number)
        try:
            update = await ctx.client.create(wanted, namespace=namespace)
        except errors.AlreadyExists:
            # made by an earlier pass the cache does not show yet, or a collision
            raise Collision(name) from None
        if written is not None:
            written.remember(key, update)
    elif number(update) != decided.update_number:
        update = await ctx.client.update({**update, "revision": decided.update_number},
                                         namespace=namespace)
        if written is not None:
            written.remember(key, update)
    for victim in decided.trim:
        try:
            await ctx.client.delete(CONTROLLER_REVISION, victim, namespace=namespace)
        except errors.NotFound:
            continue
    return Synced(update, {_name(r): r for r in revisions})


__all__ = ["CONTROLLER_REVISION", "Collision", "Plan", "Synced", "Written", "new_revision",
           "owned", "patch_of", "plan", "sync", "template_of"]
