"""``CompiledSchema``: one CRD version's schema, compiled once, applied to every request.

The API server runs, per custom resource write (Kubernetes' order)::

    pruned = schema.prune(obj)          # unknown fields; paths become warnings
    schema.default(obj)                 # unwanted nulls dropped, defaults applied
    errors = schema.validate(obj)       # or schema.validate_update(obj, old)

``validate`` and ``validate_update`` check, in Kubernetes' order: the OpenAPI value validation
(ratcheted on update), embedded resources, list-type invariants, then the CEL rules
(``x-kubernetes-validations``, see :mod:`~setpoint.schema.celrules`): every rule of every node
that has a value, transition rules (``oldSelf``) only on update against the correlated old
value, one cost budget per object, failures of unchanged parts ratcheted into ``warnings``.
Rules do not run when the value validation found a blocking error (a missing required field,
a wrong type, an unsupported enum value, a too long or too large value); one error says so.

Invariants:

* compiling never raises, whatever the input (v1beta1 CRDs may carry non-structural schemas;
  what cannot be compiled is ignored); :func:`~setpoint.schema.check_structural` is where a
  schema gets judged;
* no method interprets the schema dict: everything was turned into closures at compile time,
  and a ``CompiledSchema`` is immutable after construction (safe to share between requests);
* ``obj`` is a whole resource: ``apiVersion``, ``kind`` and ``metadata`` at the root are never
  pruned and the root ``metadata`` is not validated here (the registry validates ObjectMeta);
* a schema without rules does no CEL work at all (no rule validator is built); rules compile
  once per ``CompiledSchema``, on first use, into a cache it owns;
* errors are sorted with :func:`~setpoint.apimachinery.fields.sort_errors`, pruned paths with
  ``sorted``.

A CRD served with ``spec.preserveUnknownFields: true`` (v1beta1's default) is not pruned by
Kubernetes at all: the caller simply does not call :meth:`CompiledSchema.prune` for it.

CRD-time compile errors of the rules are :func:`~setpoint.schema.check_structural`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from setpoint.apimachinery import fields, regexp
from setpoint.apimachinery.fields import FieldError
from setpoint.schema import celrules, defaulting, listtype, objectmeta, pruning, values
from setpoint.schema.structural import Node, ValidationRule, parse

_PRESERVE_ALL = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


class CompiledSchema:
    """A compiled ``openAPIV3Schema``; see the module docstring."""

    __slots__ = ("_default", "_embedded", "_list_check", "_prune", "_rules", "_validator",
                 "node")

    def __init__(self, node: Node) -> None:
        self.node = node
        defaulting.prune_defaults(node)
        self._prune = pruning.compile_pruner(node, resource_root=True)
        self._default = defaulting.compile_defaulter(node)
        self._validator = values.compile_validator(node, values.RUNTIME, root=True)
        self._list_check = listtype.compile_list_checker(node)
        self._embedded = objectmeta.compile_embedded_checker(node)
        self._rules = celrules.RuleValidator.compile(node)

    @classmethod
    def from_openapi(cls, schema: Mapping[str, Any] | None) -> CompiledSchema:
        """Compile ``schema`` (``None``: no schema, everything is kept and nothing checked)."""
        return cls(parse(schema if schema is not None else _PRESERVE_ALL))

    @property
    def preserves_unknown_fields(self) -> bool:
        """Whether the root has ``x-kubernetes-preserve-unknown-fields: true``."""
        return self.node.preserve_unknown_fields

    @property
    def has_rules(self) -> bool:
        """Whether any ``x-kubernetes-validations`` rule can run on objects of this schema."""
        return self._rules is not None

    @property
    def validation_rules(self) -> list[tuple[str, tuple[ValidationRule, ...]]]:
        """``x-kubernetes-validations`` by schema path (``""`` for the root)."""
        out: list[tuple[str, tuple[ValidationRule, ...]]] = []
        _collect_rules(self.node, "", out)
        return out

    def prune(self, obj: Any) -> list[str]:
        """Drop unknown fields in place; the sorted paths of what was dropped."""
        out: list[str] = []
        self._prune(obj, "", out)
        out.sort()
        return out

    def default(self, obj: Any) -> None:
        """Drop non-nullable nulls and apply defaults, in place."""
        self._default(obj)

    def validate(self, obj: Any, *, warnings: list[str] | None = None) -> list[FieldError]:
        """Every error of ``obj`` (a create, or an update without ratcheting): value
        validation, embedded resources, list types, then CEL rules. ``warnings`` is accepted
        for symmetry with :meth:`validate_update` (a create ratchets nothing)."""
        with regexp.budget():  # the patterns of one object share one matching budget
            raw: values.Errs = []
            self._validator.validate(obj, "", raw)
            errs = values.to_field_errors(raw)
            errs.extend(self._extra(obj))
            if self._list_check is not None:
                self._list_check(obj, None, errs)
            if self._rules is not None:
                errs.extend(self._rules.validate(obj, prior=errs, warnings=warnings))
        return fields.sort_errors(errs)

    def validate_update(self, new: Any, old: Any, *,
                        warnings: list[str] | None = None) -> list[FieldError]:
        """Like :meth:`validate`, ratcheting: unchanged parts that were invalid stay allowed.

        CEL rules that fail on unchanged parts (and do not use ``oldSelf``) are appended to
        ``warnings`` when given, as Kubernetes returns them to the client, else dropped.
        """
        if old is None:
            return self.validate(new, warnings=warnings)
        with regexp.budget():
            raw: values.Errs = []
            self._validator.ratchet(new, old, "", raw)
            errs = values.to_field_errors(raw)
            errs.extend(self._extra(new))
            if self._list_check is not None:
                old_errs: list[FieldError] = []
                self._list_check(old, None, old_errs)
                if not old_errs:
                    self._list_check(new, None, errs)
            if self._rules is not None:
                errs.extend(self._rules.validate(new, old, prior=errs, warnings=warnings))
        return fields.sort_errors(errs)

    def _extra(self, obj: Any) -> list[FieldError]:
        errs: list[FieldError] = []
        if self._embedded is not None:
            self._embedded(obj, None, errs)
        return errs


def _collect_rules(node: Node, path: str,
                   out: list[tuple[str, tuple[ValidationRule, ...]]]) -> None:
    if node.validations:
        out.append((path, node.validations))
    for k, child in (node.properties or {}).items():
        _collect_rules(child, f"{path}.properties[{k}]" if path else f"properties[{k}]", out)
    ap = node.additional_schema
    if ap is not None:
        _collect_rules(ap, f"{path}.additionalProperties" if path else "additionalProperties", out)
    if node.items is not None:
        _collect_rules(node.items, f"{path}.items" if path else "items", out)
    for name, branches in (("allOf", node.all_of), ("anyOf", node.any_of), ("oneOf", node.one_of)):
        for i, b in enumerate(branches):
            _collect_rules(b, f"{path}.{name}[{i}]" if path else f"{name}[{i}]", out)
