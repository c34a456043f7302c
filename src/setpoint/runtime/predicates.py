"""Predicates: which cache events may enqueue a request at all.

A :class:`Predicate` answers three questions, one per event: ``create(obj)`` (the object
appeared, or was there when the controller started), ``update(old, new)`` and
``delete(obj)``. An event is passed on only if the predicate says True. The ready-made ones
are controller-runtime's; each filters **updates only** and passes creates and deletes:

- :data:`generation_changed`: ``metadata.generation`` changed, i.e. the spec changed (status
  and metadata writes do not bump it; resyncs and relists of unchanged objects are dropped);
- :data:`labels_changed`, :data:`annotations_changed`;
- :data:`resource_version_changed`: anything changed (drops only resyncs and relist echoes).

Combine them with ``&``, ``|`` and ``~`` (or :func:`all_of`, :func:`any_of`, :func:`not_`),
and build one from functions with :class:`Funcs` or from a test of the object with
:func:`matching`.

>>> v1 = {"metadata": {"name": "a", "generation": 1, "labels": {"app": "x"}}}
>>> v2 = {"metadata": {"name": "a", "generation": 1, "labels": {"app": "y"}}}
>>> (generation_changed | labels_changed).update(v1, v2), generation_changed.update(v1, v2)
(True, False)

Invariants: predicates are pure functions of the objects they are given (no I/O, no clock),
so they are safe to call from a cache handler, synchronously.

Non-guarantees: a predicate that drops an update does not drop the *change*: a later event
(or a periodic requeue) still carries the object's latest state, since requests hold no
event. An object without ``metadata.generation`` (most built-in kinds other than workloads)
never looks changed to :data:`generation_changed`, so its updates are all dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]


def _meta(obj: Obj, field: str) -> Any:
    return (obj.get("metadata") or {}).get(field)


class Predicate:
    """Decides, per event, whether it may enqueue; the base class passes everything."""

    def create(self, obj: Obj) -> bool:
        return True

    def update(self, old: Obj, new: Obj) -> bool:
        return True

    def delete(self, obj: Obj) -> bool:
        return True

    def __and__(self, other: Predicate) -> Predicate:
        return all_of(self, other)

    def __or__(self, other: Predicate) -> Predicate:
        return any_of(self, other)

    def __invert__(self) -> Predicate:
        return not_(self)


class _UpdateField(Predicate):
    """Passes an update when one ``metadata`` field differs between old and new."""

    def __init__(self, field: str) -> None:
        self.field = field

    def update(self, old: Obj, new: Obj) -> bool:
        return bool(_meta(old, self.field) != _meta(new, self.field))

    def __repr__(self) -> str:
        return f"<{self.field} changed>"


class _GenerationChanged(_UpdateField):
    def update(self, old: Obj, new: Obj) -> bool:
        # no generation on either side: nothing to compare, so no spec change is visible
        if _meta(old, "generation") is None and _meta(new, "generation") is None:
            return False
        return super().update(old, new)


#: the spec changed (``metadata.generation``)
generation_changed: Predicate = _GenerationChanged("generation")
#: ``metadata.labels`` changed
labels_changed: Predicate = _UpdateField("labels")
#: ``metadata.annotations`` changed
annotations_changed: Predicate = _UpdateField("annotations")
#: the object changed at all (``metadata.resourceVersion``)
resource_version_changed: Predicate = _UpdateField("resourceVersion")


class _AllOf(Predicate):
    def __init__(self, predicates: tuple[Predicate, ...]) -> None:
        self.predicates = predicates

    def create(self, obj: Obj) -> bool:
        return all(p.create(obj) for p in self.predicates)

    def update(self, old: Obj, new: Obj) -> bool:
        return all(p.update(old, new) for p in self.predicates)

    def delete(self, obj: Obj) -> bool:
        return all(p.delete(obj) for p in self.predicates)

    def __repr__(self) -> str:
        return "all_of(" + ", ".join(map(repr, self.predicates)) + ")"


class _AnyOf(Predicate):
    def __init__(self, predicates: tuple[Predicate, ...]) -> None:
        self.predicates = predicates

    def create(self, obj: Obj) -> bool:
        return any(p.create(obj) for p in self.predicates)

    def update(self, old: Obj, new: Obj) -> bool:
        return any(p.update(old, new) for p in self.predicates)

    def delete(self, obj: Obj) -> bool:
        return any(p.delete(obj) for p in self.predicates)

    def __repr__(self) -> str:
        return "any_of(" + ", ".join(map(repr, self.predicates)) + ")"


class _Not(Predicate):
    def __init__(self, predicate: Predicate) -> None:
        self.predicate = predicate

    def create(self, obj: Obj) -> bool:
        return not self.predicate.create(obj)

    def update(self, old: Obj, new: Obj) -> bool:
        return not self.predicate.update(old, new)

    def delete(self, obj: Obj) -> bool:
        return not self.predicate.delete(obj)

    def __repr__(self) -> str:
        return f"not_({self.predicate!r})"


def all_of(*predicates: Predicate) -> Predicate:
    """Passes an event only if every predicate does (none: everything passes)."""
    return _AllOf(predicates)


def any_of(*predicates: Predicate) -> Predicate:
    """Passes an event if at least one predicate does (none: nothing passes)."""
    return _AnyOf(predicates)


def not_(predicate: Predicate) -> Predicate:
    """Passes exactly the events ``predicate`` drops."""
    return _Not(predicate)


def _yes(*_: Obj) -> bool:
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Funcs(Predicate):
    """A predicate from plain functions; an event without a function passes."""

    on_create: Callable[[Obj], bool] = _yes
    on_update: Callable[[Obj, Obj], bool] = _yes
    on_delete: Callable[[Obj], bool] = _yes

    def create(self, obj: Obj) -> bool:
        return self.on_create(obj)

    def update(self, old: Obj, new: Obj) -> bool:
        return self.on_update(old, new)

    def delete(self, obj: Obj) -> bool:
        return self.on_delete(obj)


def matching(test: Callable[[Obj], bool]) -> Predicate:
    """Passes the events of objects for which ``test`` holds (the new one, for updates)."""
    return Funcs(on_create=test, on_update=lambda old, new: test(new), on_delete=test)


def has_label(key: str, value: str | None = None) -> Predicate:
    """Objects labelled ``key`` (with ``value``, when given)."""
    def test(obj: Obj) -> bool:
        labels = _meta(obj, "labels") or {}
        return key in labels and (value is None or labels[key] == value)
    return matching(test)
