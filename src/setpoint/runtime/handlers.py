"""Event handlers: from a change to a cached object, to the requests it should enqueue.

A :class:`Handler` maps one object to the :class:`~setpoint.runtime.reconcile.Request` s it
concerns. Three come ready (controller-runtime's):

- :class:`EnqueueSelf`: the object itself (what ``Controller(for_=...)`` watches with);
- :class:`EnqueueOwner`: the object's owner of a given kind, from its ``ownerReferences``
  (by default only the controller reference): what ``Controller.owns`` watches with, so a
  change to a child reconciles its parent;
- :class:`EnqueueMapped`: any function ``obj -> iterable of Request`` (e.g. every Book whose
  ``spec.configMapName`` is this ConfigMap, found through a cache index).

:class:`QueueingHandler` plugs a handler and a predicate into a
:class:`~setpoint.runtime.informercache.Cache` (it is a cache ``EventHandler``) and adds the
requests to a queue. For an update, both the old and the new object are mapped (an owner
reference or a mapped field may have changed, and both sides must hear of it).

Invariants: handlers run synchronously inside the cache's notification and never block: they
only compute keys and add them to a deduplicating queue, so a burst of events for one object
collapses into one reconcile. A mapper that raises is logged and skipped; the cache and other
handlers carry on.

Given a ``watch`` label, :class:`QueueingHandler` says why with each add: a
:class:`~setpoint.runtime.triggers.Trigger` naming the watch, the event (``initial`` for the
replay a new subscription hears, ``resync`` for an update whose old and new object are the
same one) and the changed object's key.

**Reconcile now, by annotation**: an update that sets a new, non-empty value of the
annotation :data:`RECONCILE_NOW_ANNOTATION` (``setpoint.dev/reconcile-now``; any value, a
timestamp is customary: ``kubectl annotate book/x setpoint.dev/reconcile-now="$(date +%s)"
--overwrite``) enqueues with the cause ``reconcile_now`` (``detail``: the value), and passes
whatever the watch's predicate says (``generation_changed`` would otherwise drop a
metadata-only change). The reconcile need not remove the annotation: only a *new* value
triggers.

Non-guarantees: the event itself is not passed on (the request holds only the key and its
triggers); an owner referenced by a child may not exist (its reconcile finds nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from setpoint.runtime import predicates as preds
from setpoint.runtime import reconcile
from setpoint.runtime import triggers as rttriggers

logger = logging.getLogger(__name__)

#: the annotation whose every new value asks for a reconcile now
RECONCILE_NOW_ANNOTATION = "setpoint.dev/reconcile-now"

Obj = Mapping[str, Any]
Mapper = Callable[[Obj], Iterable[reconcile.Request]]


@runtime_checkable
class Handler(Protocol):
    def requests(self, obj: Obj) -> Iterable[reconcile.Request]:
        """The requests a change to ``obj`` should enqueue."""


@dataclass(frozen=True, slots=True)
class EnqueueSelf:
    """The changed object itself."""

    def requests(self, obj: Obj) -> list[reconcile.Request]:
        return [reconcile.Request.for_object(obj)]


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueOwner:
    """The owner of kind ``kind`` in API group ``group`` ("" for the core group).

    ``namespaced``: whether the owner's kind is namespaced (the request then takes the
    child's namespace; owners of a namespaced child live in its namespace or are
    cluster-scoped). ``only_controller``: follow only the ``controller: true`` reference.
    """

    group: str
    kind: str
    namespaced: bool = True
    only_controller: bool = True

    def requests(self, obj: Obj) -> list[reconcile.Request]:
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        out: list[reconcile.Request] = []
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
            if not isinstance(ref, Mapping) or ref.get("kind") != self.kind:
                continue
            if self.only_controller and ref.get("controller") is not True:
                continue
            group, _, _ = str(ref.get("apiVersion", "")).rpartition("/")
            name = ref.get("name")
            if group != self.group or not isinstance(name, str) or not name:
                continue
            out.append(reconcile.Request(namespace if self.namespaced else "", name))
        return out


@dataclass(frozen=True, slots=True)
class EnqueueMapped:
    """Whatever ``func(obj)`` returns."""

    func: Mapper

    def requests(self, obj: Obj) -> Iterable[reconcile.Request]:
        return self.func(obj)


def as_handler(handler: Handler | Mapper) -> Handler:
    """A :class:`Handler` as is; a plain function as an :class:`EnqueueMapped`."""
    if isinstance(handler, Handler):
        return handler
    if callable(handler):
        return EnqueueMapped(handler)
    raise TypeError(f"not a handler or a mapping function: {handler!r}")


class QueueingHandler:
    """A cache event handler that filters events and adds their requests to a queue.

    With ``watch`` (e.g. ``"owns ConfigMap"``), ``add`` is called as ``add(request,
    trigger)``; without, as ``add(request)``. Set :attr:`initial` while subscribing to a
    synced cache, so that its replay is told apart from new objects.
    """

    def __init__(self, handler: Handler, add: Callable[..., None], *,
                 predicate: preds.Predicate | None = None, name: str = "",
                 watch: str | None = None) -> None:
        self.handler = handler
        self.add = add
        self.predicate = predicate or preds.Predicate()
        self.name = name
        self.watch = watch
        #: adds are the replay of a new subscription (cause ``initial``)
        self.initial = False

    def _enqueue(self, cause: str, *objs: Obj, detail: str = "") -> None:
        for obj in objs:
            try:
                requests = list(self.handler.requests(obj))
            except Exception:
                logger.exception("%s: mapping an event to requests failed", self.name)
                continue
            if not requests:
                continue
            if self.watch is None:
                for request in requests:
                    self.add(request)
                continue
            trigger = rttriggers.Trigger(cause, self.watch, _key(obj), detail)
            for request in requests:
                self.add(request, trigger)

    def _passes(self, check: Callable[[], bool]) -> bool:
        try:
            return check()
        except Exception:
            logger.exception("%s: a predicate failed; the event is dropped", self.name)
            return False

    def on_add(self, obj: Obj) -> None:
        if self._passes(lambda: self.predicate.create(obj)):
            self._enqueue(rttriggers.CAUSE_INITIAL if self.initial else rttriggers.CAUSE_ADD,
                          obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        asked = _reconcile_now_value(new)
        if asked and asked != _reconcile_now_value(old) and self.watch is not None:
            self._enqueue(rttriggers.CAUSE_RECONCILE_NOW, new, detail=asked)
            return
        if self._passes(lambda: self.predicate.update(old, new)):
            if old is new:
                self._enqueue(rttriggers.CAUSE_RESYNC, new)
            else:
                self._enqueue(rttriggers.CAUSE_UPDATE, old, new)

    def on_delete(self, obj: Obj) -> None:
        if self._passes(lambda: self.predicate.delete(obj)):
            self._enqueue(rttriggers.CAUSE_DELETE, obj)


def _reconcile_now_value(obj: Obj) -> str:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(RECONCILE_NOW_ANNOTATION) if isinstance(annotations, Mapping) \
        else None
    return value if isinstance(value, str) else ""


def _key(obj: Obj) -> str:
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str):
        return ""
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name
