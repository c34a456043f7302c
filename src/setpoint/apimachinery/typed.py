"""Objects seen through a schema, as server-side apply sees them (structured-merge-diff).

A :class:`TypeSpec` says how each node of an object merges:

* ``scalar`` — a leaf;
* ``map`` — an object: declared ``fields`` (a *struct*) and/or an ``element`` type for any
  other key; ``atomic`` maps are leaves;
* ``list`` — ``atomic`` (a leaf, replaced whole: the default for custom resources), ``set``
  (items are their own identity) or ``map`` (items are identified by ``keys``);
* ``deduced`` — no schema: objects are granular maps of deduced values, lists are atomic.

Over a spec, :func:`to_field_set` gives the paths an object sets, :func:`merge` lays one object
over another, :func:`compare` lists what changed, :func:`remove_items` cuts paths out and
:func:`validate` rejects lists that cannot be merged (duplicates, items without keys).
Invariants: none of them mutates its arguments; a value whose shape does not match its spec
(a string where an object was declared) is handled as a leaf, never an error; emptied
objects and lists are dropped from their parent (where upstream leaves a null that typed
decoding then drops). :func:`from_openapi` converts a CRD version's ``openAPIV3Schema`` as
Kubernetes does (lists atomic unless ``x-kubernetes-list-type`` says otherwise), with
``metadata`` always :data:`OBJECT_META`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from setpoint.apimachinery import fieldpath
from setpoint.apimachinery.fieldpath import FieldSet, Path, PathElement


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: an absent value (as opposed to ``None``, a null)
MISSING: Any = _Missing()


class TypeSpec:
    """How one node merges; see the module docstring."""

    __slots__ = ("atomic", "element", "fields", "keys", "kind", "relationship")

    def __init__(self, kind: str, *, fields: dict[str, TypeSpec] | None = None,
                 element: TypeSpec | None = None, atomic: bool = False,
                 relationship: str = "atomic", keys: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.fields = fields or {}
        self.element = element
        self.atomic = atomic
        self.relationship = relationship
        self.keys = keys

    def field_type(self, name: str) -> TypeSpec:
        """The spec of a key of this map (``DEDUCED`` when nothing is declared for it)."""
        found = self.fields.get(name)
        if found is not None:
            return found
        return self.element if self.element is not None else DEDUCED

    def __repr__(self) -> str:
        return f"TypeSpec({self.kind})"


SCALAR = TypeSpec("scalar")
DEDUCED = TypeSpec("deduced")


def struct(fields: dict[str, TypeSpec], element: TypeSpec | None = None) -> TypeSpec:
    return TypeSpec("map", fields=fields, element=element)


def map_of(element: TypeSpec, *, atomic: bool = False) -> TypeSpec:
    return TypeSpec("map", element=element, atomic=atomic)


def atomic_list(element: TypeSpec = DEDUCED) -> TypeSpec:
    return TypeSpec("list", element=element, relationship="atomic")


def set_list(element: TypeSpec = SCALAR) -> TypeSpec:
    return TypeSpec("list", element=element, relationship="set")


def map_list(element: TypeSpec, keys: tuple[str, ...]) -> TypeSpec:
    return TypeSpec("list", element=element, relationship="map", keys=keys)


OWNER_REFERENCE = struct({name: SCALAR for name in (
    "apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")})

#: ``metav1.ObjectMeta``: finalizers are a set, ownerReferences a map keyed by uid
OBJECT_META = struct({
    **{name: SCALAR for name in (
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
        "generation", "creationTimestamp", "deletionTimestamp",
        "deletionGracePeriodSeconds")},
    "labels": map_of(SCALAR),
    "annotations": map_of(SCALAR),
    "finalizers": set_list(SCALAR),
    "ownerReferences": map_list(OWNER_REFERENCE, ("uid",)),
    "managedFields": atomic_list(),
})


def object_type(fields: dict[str, TypeSpec] | None = None,
                element: TypeSpec | None = DEDUCED) -> TypeSpec:
    """A top-level object: apiVersion, kind, ObjectMeta, then ``fields``."""
    return struct({"apiVersion": SCALAR, "kind": SCALAR, "metadata": OBJECT_META,
                   **(fields or {})}, element)


def with_list_keys(spec: TypeSpec, merge_keys: Mapping[str, str]) -> TypeSpec:
    """``spec`` with the lists of ``merge_keys`` (dotted paths without list indices, as
    :data:`setpoint.apimachinery.patch.DEFAULT_MERGE_KEYS`) associative: a merge key makes a
    list a map keyed by it, ``""`` a set. The built-in kinds' lists that merge under a strategic
    merge patch (``patchMergeKey``) are the ones their schemas make associative for apply, so
    one table serves both. ``metadata`` keeps :data:`OBJECT_META`."""
    tree: dict[str | None, Any] = {}
    for dotted, key in merge_keys.items():
        parts = dotted.split(".")
        if parts[0] == "metadata":
            continue
        node = tree
        for part in parts:
            node = node.setdefault(part, {})
        node[None] = key
    return _keyed(spec, tree)


def _keyed(spec: TypeSpec, tree: Mapping[Any, Any]) -> TypeSpec:
    children = {name: sub for name, sub in tree.items() if name is not None}
    if None in tree:
        key = tree[None]
        if key == "":
            return set_list(SCALAR)
        item = spec.element if spec.kind == "list" and spec.element is not None else DEDUCED
        return map_list(_keyed(item, children), (key,))
    if not children:
        return spec
    fields = dict(spec.fields) if spec.kind == "map" else {}
    element: TypeSpec | None = spec.element if spec.kind == "map" else DEDUCED
    for name, sub in children.items():
        fields[name] = _keyed(fields.get(name, DEDUCED), sub)
    return TypeSpec("map", fields=fields, element=element, atomic=spec.atomic)


def from_openapi(schema: Mapping[str, Any] | None, *,
                 preserve_unknown_fields: bool = False) -> TypeSpec:
    """The spec of a custom resource whose version has ``schema`` (``openAPIV3Schema``)."""
    if schema is None or preserve_unknown_fields:
        return object_type()
    root = _convert(schema)
    fields = dict(root.fields) if root.kind == "map" else {}
    fields.pop("metadata", None)
    fields.setdefault("apiVersion", SCALAR)
    fields.setdefault("kind", SCALAR)
    element = root.element if root.kind == "map" else DEDUCED
    return object_type(fields, element)


def _convert(node: Mapping[str, Any]) -> TypeSpec:
    if node.get("x-kubernetes-int-or-string"):
        return SCALAR
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields", False))
    kind = node.get("type")
    properties = node.get("properties")
    if kind == "array":
        items = node.get("items")
        item_type = _convert(items) if isinstance(items, Mapping) else DEDUCED
        list_type = node.get("x-kubernetes-list-type")
        if list_type == "set":
            return set_list(item_type)
        if list_type == "map":
            keys = tuple(str(k) for k in node.get("x-kubernetes-list-map-keys") or ())
            return map_list(item_type, keys) if keys else atomic_list(item_type)
        return atomic_list(item_type)
    if kind == "object" or isinstance(properties, Mapping) or preserve:
        fields = {str(name): _convert(sub)
                  for name, sub in (properties or {}).items() if isinstance(sub, Mapping)}
        if node.get("x-kubernetes-embedded-resource"):
            fields.setdefault("apiVersion", SCALAR)
            fields.setdefault("kind", SCALAR)
            fields["metadata"] = OBJECT_META
        additional = node.get("additionalProperties")
        element: TypeSpec | None = None
        if isinstance(additional, Mapping):
            element = _convert(additional)
        elif preserve or additional is True or not fields:
            element = DEDUCED
        spec = TypeSpec("map", fields=fields, element=element,
                        atomic=node.get("x-kubernetes-map-type") == "atomic")
        return spec
    if kind is None and not properties:
        return DEDUCED
    return SCALAR


# --- shapes --------------------------------------------------------------------------------------


def _shape(spec: TypeSpec, v: Any) -> str:
    """``map``, ``list`` or ``leaf``: how ``v`` is handled under ``spec``."""
    if spec.kind == "map" or (spec.kind == "deduced" and isinstance(v, dict)):
        if spec.kind == "map" and spec.atomic:
            return "leaf"
        return "map" if isinstance(v, dict) or v is None else "leaf"
    if spec.kind == "list":
        if spec.relationship == "atomic":
            return "leaf"
        return "list" if isinstance(v, list) or v is None else "leaf"
    return "leaf"


def _granular_map(spec: TypeSpec) -> bool:
    return (spec.kind == "map" and not spec.atomic) or spec.kind == "deduced"


def item_element(spec: TypeSpec, item: Any) -> PathElement:
    """The path element of a ``set`` or ``map`` list item; ``ValueError`` if it has none."""
    if spec.relationship == "map":
        if not isinstance(item, dict):
            raise ValueError("associative list with keys may not have non-map elements")
        found = {k: item[k] for k in spec.keys if k in item}
        if not found:
            raise ValueError(f"associative list with keys has an element that omits all key "
                             f"fields {list(spec.keys)!r}")
        return fieldpath.key(found)
    if isinstance(item, dict):
        raise ValueError("associative list without keys has an element that's a map type")
    return fieldpath.value(item)


def _items(spec: TypeSpec, items: Any) -> list[tuple[PathElement, Any]]:
    if not isinstance(items, list):
        return []
    return [(item_element(spec, item), item) for item in items]


def _child_key(pe: PathElement) -> str:
    return str(pe[1])


# --- to_field_set --------------------------------------------------------------------------------


def to_field_set(spec: TypeSpec, obj: Any) -> FieldSet:
    """The paths ``obj`` sets (structured-merge-diff's ``ToFieldSet``)."""
    out: set[Path] = set()
    _to_set(spec, obj, (), out)
    return frozenset(out)


def _to_set(spec: TypeSpec, v: Any, p: Path, out: set[Path]) -> None:
    shape = _shape(spec, v)
    if shape == "leaf":
        if p:
            out.add(p)
        return
    if shape == "list":
        element = spec.element or DEDUCED
        entries = _items(spec, v)
        counts: dict[PathElement, int] = {}
        for pe, _ in entries:
            counts[pe] = counts.get(pe, 0) + 1
        for pe, item in entries:
            child = (*p, pe)
            out.add(child)
            if counts[pe] == 1:
                _to_set(element, item, child, out)
        return
    if not isinstance(v, dict):
        return
    for k, val in v.items():
        child = (*p, ("f", k))
        _to_set(spec.field_type(k), val, child, out)
        if val is None or (isinstance(val, dict) and not val) or k not in spec.fields:
            out.add(child)


def ensure_named_fields_are_members(spec: TypeSpec, s: FieldSet) -> FieldSet:
    """``s`` plus every declared (struct) field on the way to one of its paths."""
    extra: set[Path] = set()
    for p in s:
        node: TypeSpec | None = spec
        for n, pe in enumerate(p[:-1], start=1):
            if node is None:
                break
            if pe[0] == "f":
                if node.kind == "map" and pe[1] in node.fields:
                    extra.add(p[:n])
                node = node.field_type(pe[1]) if node.kind in ("map", "deduced") else None
            elif pe[0] in ("k", "v") and node.kind == "list":
                node = node.element
            else:
                node = None
    return s | extra if extra else s


def validate(spec: TypeSpec, obj: Any) -> None:
    """Raise ``ValueError`` when ``obj`` has items no ``set`` or ``map`` list can hold: a
    duplicate, or a map-list item without its keys (an apply configuration must not)."""
    _validate(spec, obj, ())


def _validate(spec: TypeSpec, v: Any, p: Path) -> None:
    shape = _shape(spec, v)
    if shape == "list" and isinstance(v, list):
        element = spec.element or DEDUCED
        seen: set[PathElement] = set()
        for pe, item in _items(spec, v):
            if pe in seen:
                raise ValueError(f"{fieldpath.render(p)}: duplicate entries for key "
                                 f"{fieldpath.render_element(pe)}")
            seen.add(pe)
            _validate(element, item, (*p, pe))
    elif shape == "map" and isinstance(v, dict):
        for k, val in v.items():
            _validate(spec.field_type(k), val, (*p, ("f", k)))


# --- merge ---------------------------------------------------------------------------------------


def merge(spec: TypeSpec, lhs: Any, rhs: Any) -> Any:
    """``rhs`` laid over ``lhs`` (structured-merge-diff's ``Merge``, the right side wins
    leaves); either may be :data:`MISSING`."""
    if rhs is MISSING:
        return lhs
    if lhs is MISSING:
        return rhs
    shape = _shape(spec, rhs)
    if shape != _shape(spec, lhs) or shape == "leaf":
        return rhs
    if shape == "map":
        left = lhs or {}
        right = rhs or {}
        if not left and not right:
            return rhs
        out: dict[str, Any] = {}
        for k, lv in left.items():
            out[k] = merge(spec.field_type(k), lv, right.get(k, MISSING))
        for k, rv in right.items():
            if k not in left:
                out[k] = rv
        return out
    return _merge_list(spec, lhs or [], rhs or [])


def _merge_list(spec: TypeSpec, lhs: list[Any], rhs: list[Any]) -> Any:
    if not lhs and not rhs:
        return rhs
    element = spec.element or DEDUCED
    right = _items(spec, rhs)
    right_seen: dict[PathElement, Any] = {}
    for pe, item in right:
        if pe in right_seen:
            raise ValueError(f"duplicate entries for key {fieldpath.render_element(pe)}")
        right_seen[pe] = item
    left = _items(spec, lhs)
    left_seen: dict[PathElement, Any] = {}
    for pe, item in left:
        # a duplicated item is not merged with the new value
        left_seen[pe] = MISSING if pe in left_seen else item
    shared = [pe for pe, _ in right if pe in left_seen]
    shared.reverse()
    next_shared = shared.pop() if shared else None
    merged_right: set[PathElement] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            pe = left[li][0]
            if pe == right[ri][0]:
                merged_right.add(pe)
                out.append(merge(element, left_seen[pe], right_seen[pe]))
                li += 1
                ri += 1
                next_shared = shared.pop() if shared else None
                continue
            if pe in right_seen and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(left):
            pe, item = left[li]
            if pe not in right_seen:
                out.append(item)
                li += 1
                continue
            if pe in merged_right:
                li += 1
        if ri < len(right):
            pe = right[ri][0]
            merged_right.add(pe)
            out.append(merge(element, left_seen.get(pe, MISSING), right_seen[pe]))
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop() if shared else None
    return [item for item in out if item is not MISSING]


# --- compare -------------------------------------------------------------------------------------


class Comparison:
    """Paths removed, modified and added from one object to another."""

    __slots__ = ("added", "modified", "removed")

    def __init__(self) -> None:
        self.removed: set[Path] = set()
        self.modified: set[Path] = set()
        self.added: set[Path] = set()

    def changed(self) -> FieldSet:
        """Modified and added paths: what a writer takes over."""
        return frozenset(self.modified | self.added)

    def exclude(self, ignored: FieldSet) -> Comparison:
        if ignored:
            for name in ("removed", "modified", "added"):
                paths = getattr(self, name)
                if paths:
                    setattr(self, name, set(fieldpath.recursive_difference(paths, ignored)))
        return self

    @property
    def same(self) -> bool:
        return not (self.removed or self.modified or self.added)


def compare(spec: TypeSpec, lhs: Any, rhs: Any, *,
            skip: FieldSet = fieldpath.EMPTY) -> Comparison:
    """What changed from ``lhs`` to ``rhs`` (structured-merge-diff's ``Compare``).

    The top-level fields whose one-element paths are in ``skip`` are not compared at all:
    what :meth:`Comparison.exclude` would remove of them afterwards (a status update
    ignores everything but ``metadata`` and ``status``) is never computed. Deeper paths in
    ``skip`` are not looked at here.
    """
    out = Comparison()
    if skip and type(lhs) is dict and type(rhs) is dict:
        lhs = {k: v for k, v in lhs.items() if (("f", k),) not in skip}
        rhs = {k: v for k, v in rhs.items() if (("f", k),) not in skip}
    if type(lhs) is dict and type(rhs) is dict and lhs and rhs and \
            _shape(spec, lhs) == "map" and _shape(spec, rhs) == "map":
        # a top-level map whose two sides are the same JSON (without lists) has nothing
        # changed under it: left out before the walk (the metadata of most updates)
        same = {k for k, v in lhs.items()
                if type(v) is dict and k in rhs and _same_json(v, rhs[k])}
        if same:
            lhs = {k: v for k, v in lhs.items() if k not in same}
            rhs = {k: v for k, v in rhs.items() if k not in same}
    if isinstance(lhs, dict) and not lhs and isinstance(rhs, dict) and \
            _shape(spec, lhs) == "map" and _shape(spec, rhs) == "map":
        # from nothing (a create): everything is added; no comparison needed
        for k, v in rhs.items():
            _add(spec.field_type(k), v, (("f", k),), out.added)
        return out
    _compare(spec, lhs, rhs, (), out)
    out.removed.discard(())
    out.modified.discard(())
    out.added.discard(())
    return out


def _same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are one JSON value without lists, so that comparing them can
    neither find a change nor fail: their encodings are the same bytes.

    Sound for JSON values: orjson writes ``true`` and ``1``, ``1`` and ``1.0``, distinct
    maps distinctly; what it writes alike (NaN, infinities and ``None``, all ``null``) is
    ruled out by answering False for an encoding holding ``null``, and every error the walk
    can raise is about a list (a set's or a map list's items), so an encoding holding ``[``
    answers False too, as does what orjson cannot encode (an integer beyond 64 bits). False
    only means "compare them"."""
    try:
        encoded = orjson.dumps(a)
    except TypeError:
        return False
    if b"null" in encoded or b"[" in encoded:
        return False
    try:
        return encoded == orjson.dumps(b)
    except TypeError:
        return False


def added(spec: TypeSpec, obj: dict[str, Any]) -> FieldSet:
    """The paths :func:`compare` finds added from ``{}`` to ``obj``."""
    return frozenset(compare(spec, {}, obj).added)


def _add(spec: TypeSpec, v: Any, p: Path, out: set[Path]) -> None:
    """What ``_compare(spec, MISSING, v, p, ...)`` adds, without comparing: ``p`` and every
    path under it (an item that occurs twice in a granular list is added, not entered)."""
    shape = _shape(spec, v)
    if shape == "map" and isinstance(v, dict):
        for k, child in v.items():
            _add(spec.field_type(k), child, (*p, ("f", k)), out)
    elif shape == "list" and isinstance(v, list) and v:
        element = spec.element or DEDUCED
        entries = _items(spec, v)
        counts: dict[PathElement, int] = {}
        for pe, _ in entries:
            counts[pe] = counts.get(pe, 0) + 1
        for pe, item in entries:
            if counts[pe] == 1:
                _add(element, item, (*p, pe), out)
            else:
                out.add((*p, pe))
    out.add(p)


def _leaf(lhs: Any, rhs: Any, p: Path, out: Comparison) -> None:
    if lhs is MISSING:
        out.added.add(p)
    elif rhs is MISSING:
        out.removed.add(p)
    elif not _equal(lhs, rhs):
        out.modified.add(p)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _compare(spec: TypeSpec, lhs: Any, rhs: Any, p: Path, out: Comparison) -> None:
    probe = rhs if rhs is not MISSING else lhs
    shape = _shape(spec, probe)
    if lhs is not MISSING and rhs is not MISSING and _shape(spec, lhs) != shape:
        shape = "leaf"
    if shape == "map":
        left = lhs if isinstance(lhs, dict) else {}
        right = rhs if isinstance(rhs, dict) else {}
        if not left and not right:
            _leaf(lhs, rhs, p, out)
            return
        for k, lv in left.items():
            _compare(spec.field_type(k), lv, right.get(k, MISSING), (*p, ("f", k)), out)
        for k, rv in right.items():
            if k not in left:
                _compare(spec.field_type(k), MISSING, rv, (*p, ("f", k)), out)
    elif shape == "list":
        left_items = lhs if isinstance(lhs, list) else []
        right_items = rhs if isinstance(rhs, list) else []
        if not left_items and not right_items:
            _leaf(lhs, rhs, p, out)
            return
        _compare_list(spec, left_items, right_items, p, out)
    else:
        _leaf(lhs, rhs, p, out)
        return
    if lhs is MISSING:
        out.added.add(p)
    elif rhs is MISSING:
        out.removed.add(p)


def _compare_list(spec: TypeSpec, lhs: list[Any], rhs: list[Any], p: Path,
                  out: Comparison) -> None:
    element = spec.element or DEDUCED
    order: list[PathElement] = []
    left: dict[PathElement, list[Any]] = {}
    right: dict[PathElement, list[Any]] = {}
    for pe, item in _items(spec, lhs):
        if pe not in left:
            left[pe] = []
            order.append(pe)
        left[pe].append(item)
    for pe, item in _items(spec, rhs):
        if pe not in right:
            right[pe] = []
            if pe not in left:
                order.append(pe)
        right[pe].append(item)
    for pe in order:
        ls, rs = left.get(pe, []), right.get(pe, [])
        child = (*p, pe)
        if len(ls) <= 1 and len(rs) <= 1:
            _compare(element, ls[0] if ls else MISSING, rs[0] if rs else MISSING, child, out)
        elif len(ls) >= 2 and len(rs) >= 2:
            if ls != rs:
                out.modified.add(child)
        elif len(ls) >= 2:
            if rs:
                _compare(element, MISSING, rs[0], child, out)
            out.removed.add(child)
        else:
            if ls:
                _compare(element, ls[0], MISSING, child, out)
            out.added.add(child)


# --- remove_items --------------------------------------------------------------------------------


def remove_items(spec: TypeSpec, obj: Any, paths: FieldSet) -> Any:
    """``obj`` without the nodes at ``paths`` (structured-merge-diff's ``RemoveItems``)."""
    if not paths:
        return obj
    result = _remove(spec, obj, fieldpath.Trie.of(paths))
    return result if result is not MISSING else {}


def _remove(spec: TypeSpec, v: Any, trie: fieldpath.Trie) -> Any:
    shape = _shape(spec, v)
    if shape == "list" and isinstance(v, list) and v:
        element = spec.element or DEDUCED
        items: list[Any] = []
        for item in v:
            pe = item_element(spec, item)
            sub = trie.child(pe)
            if sub is None:
                items.append(item)
                continue
            if sub.member:
                continue
            kept = _remove(element, item, sub)
            if kept is not MISSING:
                items.append(kept)
        return items if items else MISSING
    if shape == "map" and isinstance(v, dict) and v:
        out: dict[str, Any] = {}
        for k, val in v.items():
            sub = trie.child(("f", k))
            if sub is None:
                out[k] = val
                continue
            if sub.member:
                continue
            kept = _remove(spec.field_type(k), val, sub)
            if kept is not MISSING:
                out[k] = kept
        return out if out else MISSING
    return v
