"""``x-kubernetes-validations`` of one CRD version, evaluated where and when Kubernetes does.

**Object time** (:class:`RuleValidator`, apiextensions' ``cel.Validator``). A
:class:`~setpoint.schema.CompiledSchema` builds one only if a rule sits on the schema's
structural spine (a node reached through ``properties``, ``additionalProperties`` and
``items``; rules found only inside ``allOf`` branches never run, as upstream). Rules compile
on first use into the validator's own :class:`~setpoint.cel.RuleCache`. For each
create or update, after the OpenAPI value validation and the embedded-resource and list-type
checks:

* if those reported a *blocking* error (``Required``, ``Unsupported``, ``Too long``, ``Too
  many``, a wrong type) no rule runs and the object gets ``<nil>: Invalid value: "null": some
  validation rules were not checked because the object was invalid; ...`` instead;
* otherwise the walk visits every node that has a value, parent before children: its rules
  (in order), then the rules of its ``allOf`` branches (typed by the node), then its children.
  A JSON ``null`` runs nothing at or below it. Only properties CEL can see are visited
  (``SchemaDeclType``: a property whose type CEL cannot express is skipped entirely);
* ``oldSelf`` is the correlated old value: the same key of the old map (every map and object),
  the item with the same keys of an old ``x-kubernetes-list-type: map`` list, nothing for items
  of other lists. A rule using ``oldSelf`` (a transition rule) runs only on update when that
  value exists, unless it sets ``optionalOldSelf`` (then ``oldSelf`` is ``optional.none()``);
* one :class:`~setpoint.cel.Budget` per object: once spent, the rule that overran
  reports ``validation failed due to running out of cost budget, no further validation rules
  will be run`` and nothing else runs;
* ratcheting (CRDValidationRatcheting, on by default since Kubernetes 1.30): on update, a
  failing rule that does not use ``oldSelf`` is downgraded to a warning when its node is
  unchanged, judged with apiextensions' ``CorrelatedObject``: a node correlates with the old
  object through map keys and map-list keys; a node that does not (an item of another list, a
  new key) is judged by its nearest correlated ancestor; ``allOf`` rules only by the ancestor;
  ``apiVersion`` and ``kind`` at the root never ratchet. Transition rules never ratchet.

Errors are Kubernetes' (``spec: Invalid value: "object": <message>``; the root is ``<nil>``)
and are returned unsorted; :class:`~setpoint.schema.CompiledSchema` merges and sorts them.

**CRD time**: :func:`default_errors` evaluates the rules on every ``default`` (as
``ValidateDefaults`` does); :func:`rule_errors` reports the compile errors of every rule on
the structural spine at ``<path>.x-kubernetes-validations[i].rule``, as
``ValidateCustomResourceDefinitionOpenAPISchema`` does, skipping any node with a schema error
at or below it (Kubernetes compiles only rules whose schema is sound); ``oldSelf`` is refused
below a list whose items cannot be correlated.

Invariants: nothing here mutates the object; a schema without rules costs nothing (no
validator is built); the walk never evaluates a rule after the budget ran out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from setpoint import cel
from setpoint.apimachinery import govalues
from setpoint.apimachinery.fields import ErrorType, FieldError, FieldPath
from setpoint.cel.values import decl_type, escape, visible_properties
from setpoint.schema import correlation, paths
from setpoint.schema.correlation import NO_MATCH, KeyFn
from setpoint.schema.paths import LazyPath
from setpoint.schema.structural import Node

NOT_CHECKED: Final = ("some validation rules were not checked because the object was invalid; "
                      "correct the existing errors to complete validation")
_BLOCKING: Final = frozenset({ErrorType.NOT_SUPPORTED, ErrorType.REQUIRED, ErrorType.TOO_LONG,
                              ErrorType.TOO_MANY, ErrorType.TYPE_INVALID})
_CORRELATABLE_MAPS: Final = (None, "granular", "atomic")


def has_rules(node: Node | None) -> bool:
    """``hasXValidations``: a rule on ``node`` or below it through the structural spine."""
    if node is None:
        return False
    if node.validations:
        return True
    if has_rules(node.items) or has_rules(node.additional_schema):
        return True
    return any(has_rules(p) for p in (node.properties or {}).values())


def blocking(errors: Sequence[FieldError]) -> bool:
    """Whether value errors keep Kubernetes from evaluating the rules (``hasBlockingErr``)."""
    return any(e.type in _BLOCKING for e in errors)


# --- the validator tree -------------------------------------------------------------------------

class _Rules:
    """The rules at one schema node and the subtrees below it that hold rules."""

    __slots__ = ("additional", "all_of", "items", "list_key", "map_correlates", "node", "props",
                 "resource_root", "rules")

    def __init__(self, node: Node, rules: tuple[cel.Rule, ...], resource_root: bool) -> None:
        self.node = node
        self.rules = rules
        self.resource_root = resource_root
        self.props: dict[str, _Rules] | None = None
        self.additional: _Rules | None = None
        self.items: _Rules | None = None
        self.all_of: tuple[_Rules, ...] = ()
        self.list_key: KeyFn | None = correlation.list_key_fn(node)
        self.map_correlates = node.map_type in _CORRELATABLE_MAPS


def _cel_fields(node: Node, resource_root: bool) -> frozenset[str] | None:
    """The CEL field names of ``node``'s type; ``None`` when CEL cannot type the node."""
    if decl_type(node, resource_root=resource_root) is None:
        return None
    kind = "object" if resource_root or node.embedded_resource else node.type
    if node.int_or_string or kind != "object":
        return frozenset()
    if node.additional_schema is not None and not resource_root and not node.embedded_resource:
        return frozenset()
    out = set()
    for name, prop in visible_properties(node, resource_root=resource_root).items():
        cel_name = escape(name)
        if cel_name is not None and decl_type(prop) is not None:
            out.add(cel_name)
    return frozenset(out)


def _build(rules_node: Node, node: Node, resource_root: bool) -> _Rules | None:
    """``validator(validationSchema, nodeSchema, ...)``: rules of ``rules_node`` typed by
    ``node`` (the same node, or the node an ``allOf`` branch applies to)."""
    out = _Rules(node, cel.rules_of(rules_node), resource_root)
    if rules_node.items is not None and node.items is not None:
        out.items = _build(rules_node.items, node.items, node.items.embedded_resource)
    if rules_node.properties and node.properties:
        fields = _cel_fields(node, resource_root)
        props: dict[str, _Rules] = {}
        for name, sub_rules in rules_node.properties.items():
            sub = node.properties.get(name)
            if sub is None:
                continue
            cel_name = escape(name)
            if cel_name is not None:
                if fields is None or cel_name not in fields:
                    continue
            elif decl_type(sub, resource_root=sub.embedded_resource) is None:
                continue
            child = _build(sub_rules, sub, sub.embedded_resource)
            if child is not None:
                props[name] = child
        out.props = props or None
    ap_rules, ap = rules_node.additional_schema, node.additional_schema
    if ap_rules is not None and ap is not None:
        out.additional = _build(ap_rules, ap, ap.embedded_resource)
    branches = (_build(b, node, resource_root) for b in rules_node.all_of)
    out.all_of = tuple(b for b in branches if b is not None)
    if out.rules or out.items or out.props or out.additional or out.all_of:
        return out
    return None


# --- correlation with the old object, for ratcheting ---------------------------------------------

class _Correlated:
    """apiextensions' ``CorrelatedObject``: a new value, its old counterpart, and whether the
    two are equal (computed on demand, once)."""

    __slots__ = ("_children", "_equal", "_index", "node", "old", "value")

    def __init__(self, value: Any, old: Any, node: Node) -> None:
        self.value = value
        self.old = old
        self.node = node
        self._equal: bool | None = None
        self._children: dict[str | int, _Correlated | None] = {}
        self._index: tuple[KeyFn | None, dict[Any, Any]] | None = None

    def key(self, name: str) -> _Correlated | None:
        """The child at map key ``name``, if both the new and the old map have it."""
        children = self._children
        if name in children:
            return children[name]
        value, old = self.value, self.old
        child = None
        if (type(value) is dict and type(old) is dict and name in value and name in old):
            node = self.node
            sub = node.properties.get(name) if node.properties else None
            if sub is None:
                sub = node.additional_schema
            if sub is not None:
                child = _Correlated(value[name], old[name], sub)
        children[name] = child
        return child

    def index(self, i: int) -> _Correlated | None:
        """The item at ``i`` and the old item with the same keys (map lists only)."""
        children = self._children
        if i in children:
            return children[i]
        value, old, node = self.value, self.old, self.node
        child = None
        if self._index is None:
            key_fn = correlation.list_key_fn(node)
            self._index = (key_fn, correlation.index_list(old, key_fn) if key_fn else {})
        key_fn, index = self._index
        if (key_fn is not None and node.items is not None and type(value) is list
                and type(old) is list and i < len(value)):
            old_item = correlation.correlate(value[i], index, key_fn)
            if old_item is not NO_MATCH and old_item is not None:
                child = _Correlated(value[i], old_item, node.items)
        children[i] = child
        return child

    def equal(self) -> bool:
        """``CachedDeepEqual``: deep equality that follows the correlation."""
        if self._equal is None:
            self._equal = self._compute_equal()
        return self._equal

    def _compute_equal(self) -> bool:
        value, old = self.value, self.old
        if value is None or old is None:
            return value is None and old is None
        tv, to = type(value), type(old)
        if tv is list or to is list:
            if tv is not to or len(value) != len(old):
                return False
            for i in range(len(value)):
                child = self.index(i)
                if child is None:
                    if self.node.list_type == "map":
                        return False
                    return govalues.deep_equal(old, value)
                if not child.equal():
                    return False
            return True
        if tv is dict or to is dict:
            if tv is not to or len(value) != len(old):
                return False
            for k in value:
                child = self.key(k)
                if child is None or not child.equal():
                    return False
            return True
        return govalues.deep_equal(old, value)


def _ratchets(current: _Correlated | None, nearest: _Correlated | None) -> Callable[[], bool]:
    """``shouldRatchetError``: the node is unchanged, or (when it does not correlate) its
    nearest correlated ancestor is."""
    def unchanged() -> bool:
        if current is not None:
            return current.equal()
        return nearest is not None and nearest.equal()
    return unchanged


# --- the walk ---------------------------------------------------------------------------------

class _Stop(Exception):
    """The budget ran out: no further rule runs for this object."""


class _Walk:
    __slots__ = ("budget", "cache", "errors", "warnings")

    def __init__(self, cache: cel.RuleCache, warnings: list[str] | None) -> None:
        self.cache = cache
        self.budget = cel.Budget()
        self.errors: list[FieldError] = []
        self.warnings = warnings

    def visit(self, v: _Rules, path: LazyPath, value: Any, old: Any,
              current: _Correlated | None, nearest: _Correlated | None) -> None:
        if value is None:
            return
        if v.rules:
            self.run(v, path, value, old, current, nearest)
        for branch in v.all_of:
            self.visit(branch, path, value, old, None, nearest)
        t = type(value)
        if t is dict:
            old_map = old if type(old) is dict and v.map_correlates else None
            if v.additional is not None:
                for k, item in value.items():
                    self.field(v.additional, paths.key(path, k), k, item, old_map, current,
                               nearest)
            if v.props is not None:
                # Only fields with rules below them matter; the schema's order is as good as
                # the object's (Kubernetes walks a Go map, in no fixed order).
                for k, child in v.props.items():
                    item = value.get(k)
                    if item is not None:
                        self.field(child, paths.child(path, k), k, item, old_map, current,
                                   nearest)
        elif t is list and v.items is not None:
            items = v.items
            key_fn = v.list_key
            index = (correlation.index_list(old, key_fn)
                     if key_fn is not None and type(old) is list and old else None)
            for i, item in enumerate(value):
                if item is None:
                    continue
                old_item = None
                if index is not None:
                    found = correlation.correlate(item, index, key_fn)
                    old_item = None if found is NO_MATCH else found
                if current is None:
                    cur, near = None, nearest
                else:
                    cur, near = current.index(i), current
                self.visit(items, paths.index(path, i), item, old_item, cur, near)

    def field(self, child: _Rules, path: LazyPath, key: str, item: Any,
              old_map: dict[str, Any] | None, current: _Correlated | None,
              nearest: _Correlated | None) -> None:
        """Visit the value at ``key`` of a map or object."""
        if item is None:
            return
        if current is None:
            cur, near = None, nearest
        elif nearest is None and (key == "apiVersion" or key == "kind"):
            cur, near = None, None  # the root's type meta never ratchets
        else:
            cur, near = current.key(key), current
        self.visit(child, path, item, old_map.get(key) if old_map is not None else None,
                   cur, near)

    def run(self, v: _Rules, path: LazyPath, value: Any, old: Any,
            current: _Correlated | None, nearest: _Correlated | None) -> None:
        ratchet = self.warnings
        unchanged = None
        if current is not None or nearest is not None:
            unchanged = _ratchets(current, nearest)
            if ratchet is None:
                ratchet = []
        self.errors.extend(cel.validate_rules(
            v.rules, value, old, path=lambda: paths.resolve(path), has_old=old is not None,
            budget=self.budget, node=v.node, cache=self.cache, resource_root=v.resource_root,
            ratchet=ratchet if unchanged is not None else None, unchanged=unchanged))
        if self.budget.exhausted:
            raise _Stop


class RuleValidator:
    """The rules of one CRD version's schema; build with :meth:`compile`, share freely."""

    __slots__ = ("_cache", "_root")

    def __init__(self, root: _Rules) -> None:
        self._root = root
        self._cache = cel.RuleCache()

    @classmethod
    def compile(cls, node: Node, *, resource_root: bool = True,
                cache: cel.RuleCache | None = None) -> RuleValidator | None:
        """The validator for the schema ``node`` (a whole resource unless ``resource_root`` is
        false); ``None`` if no rule can ever run. ``cache``: share compiled rules."""
        if not has_rules(node):
            return None
        root = _build(node, node, resource_root)
        if root is None:
            return None
        validator = cls(root)
        if cache is not None:
            validator._cache = cache
        return validator

    def validate(self, obj: Any, old: Any = None, *, prior: Sequence[FieldError] = (),
                 warnings: list[str] | None = None, path: FieldPath | None = None,
                 budget: cel.Budget | None = None, ratchet: bool = True) -> list[FieldError]:
        """The rule errors of ``obj`` (a create; an update when ``old`` is given), unsorted.

        ``prior``: the errors the value validation already found (a blocking one means no rule
        runs). ``warnings``: where ratcheted failures go (Kubernetes returns them as warnings).
        ``path``: where ``obj`` sits (the root, ``<nil>``, by default). ``budget``: the cost
        budget to spend (a fresh one by default). ``ratchet=False``: no ratcheting on update.
        """
        if blocking(prior):
            return [FieldError(ErrorType.INVALID, "<nil>", NOT_CHECKED, None)]
        walk = _Walk(self._cache, warnings)
        if budget is not None:
            walk.budget = budget
        root = self._root
        current = _Correlated(obj, old, root.node) if old is not None and ratchet else None
        try:
            walk.visit(root, path, obj, old, current, None)
        except _Stop:
            pass
        return walk.errors


# --- CRD time -----------------------------------------------------------------------------------

def default_errors(node: Node, default: Any, path: FieldPath, *, resource_root: bool,
                   budget: cel.Budget, cache: cel.RuleCache) -> list[FieldError]:
    """The rules on and below ``node`` evaluated on its ``default`` (at ``path``, the
    ``...default`` path), as ``ValidateDefaults`` does: as an update from the default to
    itself (so transition rules run), then, if that passes, as a create (so ``optionalOldSelf``
    rules see no old value). ``budget`` is shared by all the defaults of a schema and keeps
    the lower of the two runs' remainders."""
    validator = RuleValidator.compile(node, resource_root=resource_root, cache=cache)
    if validator is None:
        return []
    first = cel.Budget(remaining=budget.remaining)
    errs = validator.validate(default, default, path=path, budget=first, ratchet=False)
    remaining = first.remaining
    if not errs:
        second = cel.Budget(remaining=budget.remaining)
        errs = validator.validate(default, None, path=path, budget=second)
        remaining = min(remaining, second.remaining)
    budget.remaining = remaining
    return errs


def rule_errors(node: Node, path: FieldPath,
                schema_errors: Sequence[FieldError] = ()) -> list[FieldError]:
    """The CRD-time errors of every rule on the structural spine of the resource schema
    ``node`` (at ``path``), for a schema that is structural and whose defaults are valid.

    A node with a schema error at or below it (any of ``schema_errors``) is not compiled.
    """
    bad = [e.field for e in schema_errors]
    cache = cel.RuleCache()
    out: list[FieldError] = []

    def clean(at: str) -> bool:
        return not any(f == at or f.startswith((at + ".", at + "[")) for f in bad)

    def visit(n: Node, at: FieldPath, resource_root: bool,
              uncorrelatable: FieldPath | None) -> None:
        if n.validations and clean(str(at)):
            out.extend(cel.rule_errors(n, at, cache=cache, resource_root=resource_root,
                                       uncorrelatable=uncorrelatable))
        for name, sub in (n.properties or {}).items():
            visit(sub, at.child("properties").key(name), False, uncorrelatable)
        ap = n.additional_schema
        if ap is not None:
            visit(ap, at.child("additionalProperties"), False, uncorrelatable)
        if n.items is not None:
            below = uncorrelatable
            if below is None and n.list_type != "map":
                below = at
            visit(n.items, at.child("items"), False, below)

    visit(node, path, True, None)
    return out
