"""``status.typeChecking`` of a ValidatingAdmissionPolicy: its expressions checked against the
schemas of the kinds it matches.

As Kubernetes' type checker: the kinds are those every ``resourceRules`` entry names exactly
(an entry with a ``*`` group, version or resource, or a subresource, is skipped), at most
:data:`MAX_TYPES` of them; ``object`` and ``oldObject`` get each kind's schema in turn and
every validation expression, ``messageExpression`` and audit annotation value is compiled.
An expression that fails for some kinds gets one warning listing them
(``example.com/v1, Kind=Widget: compilation failed: ERROR: ...``).

The admission path still evaluates expressions dynamically typed; these are warnings only.
Not covered: built-in kinds (setpoint has no schemas for them), and params' schema (``params``
stays dynamic).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from setpoint.admission import expressions as ex
from setpoint.admission.policy import declarations
from setpoint.cel import types as t
from setpoint.cel.values import decl_type
from setpoint.schema.structural import Node

#: the most kinds one policy is checked against (Kubernetes' ``maxTypesToCheck``)
MAX_TYPES: Final = 10

#: ``(group, version, resource)`` -> ``(kind, schema)``, or None when unknown or untyped
Resolver = Callable[[str, str, str], "tuple[str, Node] | None"]


def _gvk(group: str, version: str, kind: str) -> str:
    return f"{group}/{version}, Kind={kind}"


def kinds_to_check(spec: Mapping[str, Any], resolve: Resolver) -> list[tuple[str, t.Type]]:
    """``(printed GVK, object type)`` for each kind to check, sorted."""
    constraints = spec.get("matchConstraints")
    rules = constraints.get("resourceRules") if isinstance(constraints, Mapping) else None
    wanted: set[tuple[str, str, str]] = set()
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, Mapping):
            continue
        groups, versions, resources = (rule.get("apiGroups"), rule.get("apiVersions"),
                                       rule.get("resources"))
        if not isinstance(groups, list) or not isinstance(versions, list) or \
                not isinstance(resources, list):
            continue
        if "*" in groups or "*" in versions or any(
                not isinstance(r, str) or r == "*" or "/" in r for r in resources):
            continue
        for g in groups:
            for v in versions:
                for r in resources:
                    if isinstance(g, str) and isinstance(v, str):
                        wanted.add((g, v, r))
    out: list[tuple[str, t.Type]] = []
    for g, v, r in sorted(wanted):
        found = resolve(g, v, r)
        if found is None:
            continue
        kind, node = found
        declared = decl_type(node, resource_root=True)
        if declared is not None:
            out.append((_gvk(g, v, kind), declared))
        if len(out) >= MAX_TYPES:
            break
    return out


def expression_warnings(spec: Mapping[str, Any], resolve: Resolver) -> list[dict[str, str]]:
    """The ``expressionWarnings`` of a policy spec (empty when everything checks)."""
    kinds = kinds_to_check(spec, resolve)
    if not kinds:
        return []
    per_kind = [(gvk, declarations(spec, object_type=object_type)[0])
                for gvk, object_type in kinds]
    checks: list[tuple[str, str, tuple[t.Type, ...], bool]] = []
    validations = spec.get("validations")
    for i, v in enumerate(validations if isinstance(validations, list) else []):
        if not isinstance(v, Mapping):
            continue
        if isinstance(v.get("expression"), str):
            checks.append((f"spec.validations[{i}].expression", v["expression"],
                           ex.BOOL_RESULT, True))
        if isinstance(v.get("messageExpression"), str) and v["messageExpression"].strip():
            checks.append((f"spec.validations[{i}].messageExpression",
                           v["messageExpression"], ex.STRING_RESULT, False))
    audits = spec.get("auditAnnotations")
    for i, a in enumerate(audits if isinstance(audits, list) else []):
        if isinstance(a, Mapping) and isinstance(a.get("valueExpression"), str):
            checks.append((f"spec.auditAnnotations[{i}].valueExpression",
                           a["valueExpression"], ex.AUDIT_RESULT, True))
    warnings: list[dict[str, str]] = []
    for field_ref, source, results, authz in checks:
        lines: list[str] = []
        for gvk, decl in per_kind:
            if not authz:
                decl = ex.Declarations(has_params=decl.has_params, has_authorizer=False,
                                       variables=decl.variables, object_type=decl.object_type)
            try:
                ex.compile_expression(source, decl, results)
            except ex.CompileError as e:
                lines.append(f"{gvk}: {e.detail}")
        if lines:
            warnings.append({"fieldRef": field_ref, "warning": "\n".join(lines)})
    return warnings
