"""CRD-time validation of ``default`` values: apiextensions' ``defaulting.ValidateDefaults``.

Every ``default`` in a structural schema must:

* be pruned already (``must not have unknown fields``; embedded ``metadata`` is exempt, as
  upstream only prunes it later);
* decode as TypeMeta/ObjectMeta where it is or contains an embedded resource, and give valid
  embedded metadata;
* pass value validation of its own node (errors under ``<path>.default``), validated as the
  structural schema says: formats are not stripped and int-or-string adds no type;
* inside the ``metadata``/``apiVersion``/``kind`` of an embedded resource, result in valid
  metadata once placed in a surrounding object (``must result in valid metadata: ...``);
* once all that holds, satisfy the CEL rules on and below its node
  (:func:`~setpoint.schema.celrules.default_errors`), all defaults sharing one cost budget;
  when it runs out, no further default is checked.

``additionalProperties`` is not followed (defaults there are forbidden by other checks).

Invariants: the schema nodes and their defaults are never mutated.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from setpoint import cel
from setpoint.apimachinery import fields, govalues
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.schema import celrules, objectmeta, pruning, values
from setpoint.schema.structural import META_FIELDS, MISSING, Node

Step = tuple[str, str]


class _Rules:
    """What the CEL checks of all defaults share: one cost budget, one rule cache."""

    __slots__ = ("budget", "cache")

    def __init__(self) -> None:
        self.budget = cel.Budget()
        self.cache = cel.RuleCache()

    def check(self, s: Node, default: Any, dpath: FieldPath,
              embedded: bool) -> list[FieldError]:
        return celrules.default_errors(s, default, dpath, resource_root=embedded,
                                       budget=self.budget, cache=self.cache)


def validate_defaults(root: Node, path: FieldPath) -> list[FieldError]:
    """``defaulting.ValidateDefaults`` with ``isResourceRoot`` and ``requirePrunedDefaults``."""
    return _defaults(root, path, root, [], False, True, _Rules())


def _defaults(s: Node | None, pth: FieldPath, root: Node, steps: list[Step],
              inside_meta: bool, embedded: bool, rules: _Rules) -> list[FieldError]:
    if s is None or rules.budget.exhausted:
        return []
    if embedded:
        inside_meta = False
        root = s
        steps = []
    errs: list[FieldError] = []
    if s.default is not MISSING:
        dpath = pth.child("default")
        validator = values.compile_validator(s, values.DEFAULTS)
        if inside_meta:
            meta_errs = _meta_default(s, dpath, root, steps, validator)
            errs.extend(meta_errs)
            if not meta_errs:
                errs.extend(rules.check(s, s.default, dpath, embedded))
        else:
            pruned = deep_copy(s.default)
            pruning.compile_pruner(s, resource_root=embedded, coerce_metadata=False)(
                pruned, "", [])
            if not govalues.deep_equal(pruned, s.default):
                errs.append(fields.invalid(dpath, s.default, "must not have unknown fields"))
            coerce = _coerce_error(s.default, s, dpath, embedded)
            if coerce is not None:
                errs.append(coerce)
            else:
                meta_errs = _embedded_errors(s.default, s, dpath, embedded)
                if meta_errs:
                    errs.extend(meta_errs)
                else:
                    raw: values.Errs = []
                    validator.validate(s.default, "", raw)
                    errs.extend(values.to_field_errors(raw, str(dpath)))
                    if not raw:
                        errs.extend(rules.check(s, s.default, dpath, embedded))
    if s.items is not None:
        errs.extend(_defaults(s.items, pth.child("items"), root, [*steps, ("index", "")],
                              inside_meta, s.items.embedded_resource, rules))
    for k, sub in (s.properties or {}).items():
        sub_meta = inside_meta or (embedded and k in META_FIELDS)
        errs.extend(_defaults(sub, pth.child("properties").key(k), root, [*steps, ("key", k)],
                              sub_meta, sub.embedded_resource, rules))
    return errs


def _meta_default(s: Node, dpath: FieldPath, root: Node, steps: list[Step],
                  validator: values.CompiledNode) -> list[FieldError]:
    obj: Any = deep_copy(s.default)
    for kind, key in reversed(steps):
        obj = {key: obj} if kind == "key" else [obj]
    if not isinstance(obj, dict):
        return []
    obj.setdefault("kind", "Validation")
    obj.setdefault("apiVersion", "validation/v1")
    coerce = _coerce_error(obj, root, None, True)
    if coerce is not None:
        return [fields.invalid(dpath, s.default,
                               f"must result in valid metadata: {coerce.error()}")]
    meta_errs = _embedded_errors(obj, root, None, True)
    if meta_errs:
        return [fields.invalid(dpath, s.default,
                               f"must result in valid metadata: {_aggregate(meta_errs)}")]
    raw: values.Errs = []
    validator.validate(s.default, "", raw)
    return values.to_field_errors(raw, str(dpath))


def _aggregate(errs: list[FieldError]) -> str:
    msgs: list[str] = []
    for e in errs:
        if e.error() not in msgs:
            msgs.append(e.error())
    return msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"


def _child_path(path: FieldPath | None, name: str) -> FieldPath:
    return path.child(name) if path is not None else FieldPath.root(name)


def _coerce_error(value: Any, s: Node | None, path: FieldPath | None,
                  embedded: bool) -> FieldError | None:
    """``objectmeta.Coerce`` without dropping: the first TypeMeta/ObjectMeta decode error."""
    if s is None:
        return None
    if type(value) is dict:
        for k, v in value.items():
            if embedded:
                if k in ("apiVersion", "kind") and type(v) is not str:
                    return fields.invalid(_child_path(path, k), v, "must be a string")
                if k == "metadata":
                    problem = objectmeta.decode_error(v)
                    if problem is not None:
                        return fields.invalid(_child_path(path, "metadata"), v, problem)
            prop = s.prop(k)
            if prop is not None:
                err = _coerce_error(v, prop, _child_path(path, k), prop.embedded_resource)
            elif s.additional_schema is not None:
                ap = s.additional_schema
                kp = path.key(k) if path is not None else FieldPath((f"[{k}]",))
                err = _coerce_error(v, ap, kp, ap.embedded_resource)
            else:
                err = None
            if err is not None:
                return err
    elif type(value) is list and s.items is not None:
        for i, v in enumerate(value):
            ip = path.index(i) if path is not None else FieldPath((f"[{i}]",))
            err = _coerce_error(v, s.items, ip, s.items.embedded_resource)
            if err is not None:
                return err
    return None


def _embedded_errors(value: Any, s: Node, path: FieldPath | None,
                     embedded: bool) -> list[FieldError]:
    """``objectmeta.Validate(path, value, s, isResourceRoot=embedded)``."""
    node = replace(s, embedded_resource=True) if embedded and not s.embedded_resource else s
    checker = objectmeta.compile_embedded_checker(node)
    if checker is None:
        return []
    errs: list[FieldError] = []
    checker(value, path, errs)
    return errs
