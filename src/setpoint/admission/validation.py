"""What a ValidatingAdmissionPolicy or a binding must satisfy to be stored, and its defaults.

Kubernetes' ``ValidateValidatingAdmissionPolicy`` and ``...Binding``, with its messages:
required fields, supported values, rules, selectors, and every CEL expression compiled in the
environment it will run in (a compile error is ``Invalid value: "<expression>": compilation
failed: ERROR: <input>:1:6: ...``). :func:`default_policy` and :func:`default_binding` fill in
what the API defaults (``failurePolicy: Fail``, ``matchPolicy: Equivalent``, empty selectors,
``scope: "*"``).

Invariant: validation never raises on any JSON value; defaulting only adds missing fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from setpoint.admission import expressions as ex
from setpoint.admission import matching, mutation, mutationtypes
from setpoint.admission.policy import declarations, param_kind
from setpoint.apimachinery import fields, regexp
from setpoint.apimachinery import validation as names
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.cel.functions import Library

FAILURE_POLICIES: Final = ("Fail", "Ignore")
MATCH_POLICIES: Final = ("Equivalent", "Exact")
OPERATIONS: Final = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES: Final = ("*", "Cluster", "Namespaced")
REASONS: Final = ("Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized")
ACTIONS: Final = ("Audit", "Deny", "Warn")
NOT_FOUND_ACTIONS: Final = ("Deny", "Allow")
MAX_MATCH_CONDITIONS: Final = 64
MAX_AUDIT_ANNOTATIONS: Final = 20
MAX_VALUE_EXPRESSION: Final = 5 * 1024
_CEL_IDENTIFIER: Final = regexp.Regexp(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_CEL_RESERVED: Final = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while"})


def _as_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- defaults --------------------------------------------------------------------------------


def _default_rules(rules: Any) -> None:
    for rule in _items(rules):
        if isinstance(rule, dict):
            rule.setdefault("scope", "*")


def default_match_resources(resources: Any) -> None:
    if not isinstance(resources, dict):
        return
    resources.setdefault("matchPolicy", "Equivalent")
    resources.setdefault("namespaceSelector", {})
    resources.setdefault("objectSelector", {})
    _default_rules(resources.get("resourceRules"))
    _default_rules(resources.get("excludeResourceRules"))


def default_policy(obj: dict[str, Any]) -> None:
    spec = _as_dict(obj.get("spec"))
    if spec is None:
        return
    spec.setdefault("failurePolicy", "Fail")
    default_match_resources(spec.get("matchConstraints"))


def default_binding(obj: dict[str, Any]) -> None:
    spec = _as_dict(obj.get("spec"))
    if spec is None:
        return
    default_match_resources(spec.get("matchResources"))


# --- shared pieces ---------------------------------------------------------------------------


def _strings(value: Any, path: FieldPath, errs: list[FieldError]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errs.append(fields.type_invalid(path, value, "must be a list of strings"))
        return []
    return list(value)


def _star_alone(values: list[str], path: FieldPath, what: str, errs: list[FieldError]) -> None:
    if len(values) > 1 and "*" in values:
        errs.append(fields.invalid(path, values, f"if '*' is present, must not specify other "
                                                 f"{what}"))


def _validate_resources(resources: list[str], path: FieldPath, errs: list[FieldError]) -> None:
    if not resources:
        errs.append(fields.required(path))
        return
    res_sub: set[str] = set()
    has_double_star = False
    star_with_sub: set[str] = set()
    with_sub: set[str] = set()
    for i, entry in enumerate(resources):
        if entry == "":
            errs.append(fields.required(path.index(i)))
            continue
        if entry == "*/*":
            has_double_star = True
        res, _, sub = entry.partition("/")
        if res == "*" and sub:
            star_with_sub.add(sub)
        if sub:
            with_sub.add(res)
        res_sub.add(entry)
    if has_double_star and len(resources) > 1:
        errs.append(fields.invalid(path, resources,
                                   "if '*/*' is present, must not specify other resources"))
    if "*" in res_sub and len([r for r in resources if "/" not in r]) > 1:
        errs.append(fields.invalid(path, resources, "if '*' is present, must not specify "
                                                    "other resources without subresources"))
    for i, entry in enumerate(resources):
        res, _, sub = entry.partition("/")
        if sub and res != "*" and sub in star_with_sub:
            errs.append(fields.invalid(path.index(i), entry,
                                       f"if '*/{sub}' is present, must not specify {entry}"))
        if sub == "*" and res != "*" and any(
                r.startswith(res + "/") and r != entry for r in resources):
            errs.append(fields.invalid(path.index(i), entry,
                                       f"if '{entry}' is present, must not specify "
                                       f"other subresources of {res}"))
    _ = with_sub


def _validate_rule(rule: Any, path: FieldPath, errs: list[FieldError]) -> None:
    if not isinstance(rule, dict):
        errs.append(fields.type_invalid(path, rule, "must be an object"))
        return
    ops = _strings(rule.get("operations"), path.child("operations"), errs)
    if not ops:
        errs.append(fields.required(path.child("operations")))
    _star_alone(ops, path.child("operations"), "operations", errs)
    for i, op in enumerate(ops):
        if op not in OPERATIONS:
            errs.append(fields.not_supported(path.child("operations").index(i), op, OPERATIONS))
    groups = _strings(rule.get("apiGroups"), path.child("apiGroups"), errs)
    if not groups:
        errs.append(fields.required(path.child("apiGroups")))
    _star_alone(groups, path.child("apiGroups"), "API groups", errs)
    versions = _strings(rule.get("apiVersions"), path.child("apiVersions"), errs)
    if not versions:
        errs.append(fields.required(path.child("apiVersions")))
    _star_alone(versions, path.child("apiVersions"), "API versions", errs)
    for i, v in enumerate(versions):
        if v == "":
            errs.append(fields.required(path.child("apiVersions").index(i)))
    resources = _strings(rule.get("resources"), path.child("resources"), errs)
    _validate_resources(resources, path.child("resources"), errs)
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        errs.append(fields.not_supported(path.child("scope"), scope, SCOPES))
    seen: set[str] = set()
    for i, name in enumerate(_strings(rule.get("resourceNames"), path.child("resourceNames"),
                                      errs)):
        for msg in names.is_path_segment_name(name):
            errs.append(fields.invalid(path.child("resourceNames").index(i), name, msg))
        if name in seen:
            errs.append(fields.duplicate(path.child("resourceNames").index(i), name))
        seen.add(name)


def _validate_selector(value: Any, path: FieldPath, errs: list[FieldError]) -> None:
    if value is None:
        errs.append(fields.required(path))
        return
    try:
        matching.selector(value)
    except ValueError as e:
        errs.append(fields.invalid(path, value, str(e)))


def validate_match_resources(resources: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    if resources is None:
        return errs
    if not isinstance(resources, dict):
        return [fields.type_invalid(path, resources, "must be an object")]
    policy = resources.get("matchPolicy")
    if policy is None:
        errs.append(fields.required(path.child("matchPolicy")))
    elif policy not in MATCH_POLICIES:
        errs.append(fields.not_supported(path.child("matchPolicy"), policy, MATCH_POLICIES))
    _validate_selector(resources.get("namespaceSelector"), path.child("namespaceSelector"),
                       errs)
    _validate_selector(resources.get("objectSelector"), path.child("objectSelector"), errs)
    for key in ("resourceRules", "excludeResourceRules"):
        rules = resources.get(key)
        if rules is not None and not isinstance(rules, list):
            errs.append(fields.type_invalid(path.child(key), rules, "must be a list"))
            continue
        for i, rule in enumerate(_items(rules)):
            _validate_rule(rule, path.child(key).index(i), errs)
    return errs


def _compile(source: str, decl: ex.Declarations, results: tuple[Any, ...],
             path: FieldPath, errs: list[FieldError],
             library: Library = ex.ADMISSION_LIBRARY) -> None:
    try:
        ex.compile_expression(source, decl, results, library)
    except ex.CompileError as e:
        errs.append(fields.invalid(path, source, e.detail))


def _validate_failure_policy(spec: Mapping[str, Any], path: FieldPath,
                             errs: list[FieldError]) -> None:
    failure = spec.get("failurePolicy")
    if failure is None:
        errs.append(fields.required(path.child("failurePolicy")))
    elif failure not in FAILURE_POLICIES:
        errs.append(fields.not_supported(path.child("failurePolicy"), failure,
                                         FAILURE_POLICIES))


def _validate_match_constraints(constraints: Any, at: FieldPath,
                                errs: list[FieldError]) -> None:
    """A policy's ``matchConstraints``: required, with ``resourceRules``."""
    if constraints is None:
        errs.append(fields.required(at))
        return
    errs.extend(validate_match_resources(constraints, at))
    if isinstance(constraints, dict) and not constraints.get("resourceRules"):
        errs.append(fields.required(at.child("resourceRules")))


def _validate_variables(steps: list[tuple[str, str, ex.Declarations]], path: FieldPath,
                        errs: list[FieldError],
                        library: Library = ex.ADMISSION_LIBRARY) -> None:
    """A policy's ``variables``: each a CEL identifier with an expression that compiles in
    ``library``, with the variables before it declared."""
    for i, (name, source, var_decl) in enumerate(steps):
        at = path.child("variables").index(i)
        if not name.strip():
            errs.append(fields.required(at.child("name"), "name is not specified"))
        elif not _CEL_IDENTIFIER.match(name) or name in _CEL_RESERVED:
            errs.append(fields.invalid(at.child("name"), name,
                                       "name is not a valid CEL identifier"))
        if not source.strip():
            errs.append(fields.required(at.child("expression"), "expression is not specified"))
        else:
            _compile(source, var_decl, ex.ANY_RESULT, at.child("expression"), errs, library)


def _validate_binding_target(spec: Mapping[str, Any], path: FieldPath,
                             errs: list[FieldError]) -> None:
    """A binding's ``policyName`` and ``paramRef``."""
    policy = _text(spec.get("policyName"))
    if not policy:
        errs.append(fields.required(path.child("policyName")))
    else:
        for msg in names.is_dns1123_subdomain(policy):
            errs.append(fields.invalid(path.child("policyName"), policy, msg))
    _validate_param_ref(spec.get("paramRef"), path.child("paramRef"), errs)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# --- ValidatingAdmissionPolicy ---------------------------------------------------------------


def _validate_param_kind(kind: Any, path: FieldPath, errs: list[FieldError]) -> None:
    if not isinstance(kind, dict):
        errs.append(fields.type_invalid(path, kind, "must be an object"))
        return
    api_version = _text(kind.get("apiVersion"))
    if not api_version:
        errs.append(fields.required(path.child("apiVersion")))
    elif api_version.count("/") > 1:
        errs.append(fields.invalid(path.child("apiVersion"), api_version,
                                   f"unexpected GroupVersion string: {api_version}"))
    else:
        group, _, version = api_version.rpartition("/")
        if group:
            problems = names.is_dns1123_subdomain(group)
            if problems:
                errs.append(fields.invalid(path.child("apiVersion"), group, ",".join(problems)))
        if not version:
            errs.append(fields.invalid(path.child("apiVersion"), api_version,
                                       "version must be specified"))
    kind_name = _text(kind.get("kind"))
    if not kind_name:
        errs.append(fields.required(path.child("kind")))


def _validate_match_conditions(conditions: Any, decl: ex.Declarations, path: FieldPath,
                               errs: list[FieldError]) -> None:
    items = _items(conditions)
    if len(items) > MAX_MATCH_CONDITIONS:
        errs.append(fields.too_many(path, len(items), MAX_MATCH_CONDITIONS))
    seen: set[str] = set()
    for i, cond in enumerate(items):
        at = path.index(i)
        if not isinstance(cond, dict):
            errs.append(fields.type_invalid(at, cond, "must be an object"))
            continue
        source = _text(cond.get("expression"))
        if not source.strip():
            errs.append(fields.required(at.child("expression")))
        else:
            _compile(source.strip(), decl, ex.BOOL_RESULT, at.child("expression"), errs)
        name = _text(cond.get("name"))
        if not name:
            errs.append(fields.required(at.child("name")))
        else:
            for msg in names.is_qualified_name(name):
                errs.append(fields.invalid(at.child("name"), name, msg))
            if name in seen:
                errs.append(fields.duplicate(at.child("name"), name))
            seen.add(name)


def validate_policy(obj: Mapping[str, Any]) -> list[FieldError]:
    """The spec of a ValidatingAdmissionPolicy (metadata is the strategy's)."""
    errs: list[FieldError] = []
    path = FieldPath.root("spec")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [fields.required(path)] if spec is None else \
            [fields.type_invalid(path, spec, "must be an object")]
    _validate_failure_policy(spec, path, errs)
    if spec.get("paramKind") is not None:
        _validate_param_kind(spec.get("paramKind"), path.child("paramKind"), errs)
    _validate_match_constraints(spec.get("matchConstraints"), path.child("matchConstraints"),
                                errs)
    decl, _types, steps = declarations(spec)
    has_params = param_kind(spec) is not None
    _validate_match_conditions(spec.get("matchConditions"), decl, path.child("matchConditions"),
                               errs)
    _validate_variables(steps, path, errs)
    validations = _items(spec.get("validations"))
    audits = _items(spec.get("auditAnnotations"))
    if not validations and not audits:
        detail = "validations or auditAnnotations must contain at least one item"
        errs.append(fields.required(path.child("validations"), detail))
        errs.append(fields.required(path.child("auditAnnotations"), detail))
        return errs
    message_decl = ex.Declarations(has_params=has_params, has_authorizer=False,
                                   variables=decl.variables)
    for i, v in enumerate(validations):
        _validate_validation(v, decl, message_decl, path.child("validations").index(i), errs)
    if len(audits) > MAX_AUDIT_ANNOTATIONS:
        errs.append(fields.invalid(path.child("auditAnnotations"), audits,
                                   f"must not have more than {MAX_AUDIT_ANNOTATIONS} "
                                   "auditAnnotations"))
    name = _text((obj.get("metadata") or {}).get("name"))
    keys: set[str] = set()
    for i, audit in enumerate(audits):
        at = path.child("auditAnnotations").index(i)
        if not isinstance(audit, dict):
            errs.append(fields.type_invalid(at, audit, "must be an object"))
            continue
        key = _text(audit.get("key"))
        if name:
            for msg in names.is_qualified_name(f"{name}/{key}"):
                errs.append(fields.invalid(at.child("key"), f"{name}/{key}", msg))
        else:
            errs.append(fields.invalid(at.child("key"), key, "requires metadata.name be "
                                                             "non-empty"))
        source = _text(audit.get("valueExpression")).strip()
        if not source:
            errs.append(fields.required(at.child("valueExpression"),
                                        "valueExpression is not specified"))
        elif len(source) > MAX_VALUE_EXPRESSION:
            errs.append(fields.required(at.child("valueExpression"),
                                        f"must not exceed {MAX_VALUE_EXPRESSION} bytes in "
                                        "length"))
        else:
            _compile(source, decl, ex.AUDIT_RESULT, at.child("valueExpression"), errs)
        if key in keys:
            errs.append(fields.duplicate(at.child("key"), key))
        keys.add(key)
    return errs


def _validate_validation(v: Any, decl: ex.Declarations, message_decl: ex.Declarations,
                         at: FieldPath, errs: list[FieldError]) -> None:
    if not isinstance(v, dict):
        errs.append(fields.type_invalid(at, v, "must be an object"))
        return
    source = _text(v.get("expression"))
    if not source.strip():
        errs.append(fields.required(at.child("expression"), "expression is not specified"))
    else:
        _compile(source, decl, ex.BOOL_RESULT, at.child("expression"), errs)
    message_expression = _text(v.get("messageExpression"))
    if message_expression and not message_expression.strip():
        errs.append(fields.invalid(at.child("messageExpression"), message_expression,
                                   "must be non-empty if specified"))
    elif message_expression.strip():
        _compile(message_expression, message_decl, ex.STRING_RESULT,
                 at.child("messageExpression"), errs)
    message = _text(v.get("message"))
    if message and not message.strip():
        errs.append(fields.invalid(at.child("message"), message,
                                   "message must be non-empty if specified"))
    elif "\n" in message.strip() or "\r" in message.strip():
        errs.append(fields.invalid(at.child("message"), message,
                                   "message must not contain line breaks"))
    reason = v.get("reason")
    if reason is not None and reason not in REASONS:
        errs.append(fields.not_supported(at.child("reason"), reason, REASONS))


# --- ValidatingAdmissionPolicyBinding --------------------------------------------------------


def _validate_param_ref(ref: Any, path: FieldPath, errs: list[FieldError]) -> None:
    if ref is None:
        return
    if not isinstance(ref, dict):
        errs.append(fields.type_invalid(path, ref, "must be an object"))
        return
    name = _text(ref.get("name"))
    sel = ref.get("selector")
    if name:
        for msg in names.is_path_segment_name(name):
            errs.append(fields.invalid(path.child("name"), name, msg))
        if sel is not None:
            errs.append(fields.forbidden(path.child("name"),
                                         "name and selector are mutually exclusive"))
    if sel is not None:
        _validate_selector(sel, path.child("selector"), errs)
        if name:
            errs.append(fields.forbidden(path.child("selector"),
                                         "name and selector are mutually exclusive"))
    if not name and sel is None:
        errs.append(fields.required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        errs.append(fields.required(path.child("parameterNotFoundAction")))
    elif action not in NOT_FOUND_ACTIONS:
        errs.append(fields.not_supported(path.child("parameterNotFoundAction"), action,
                                         NOT_FOUND_ACTIONS))


def validate_binding(obj: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    path = FieldPath.root("spec")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [fields.required(path)] if spec is None else \
            [fields.type_invalid(path, spec, "must be an object")]
    _validate_binding_target(spec, path, errs)
    errs.extend(validate_match_resources(spec.get("matchResources"),
                                         path.child("matchResources")))
    at = path.child("validationActions")
    actions = _strings(spec.get("validationActions"), at, errs)
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in ACTIONS:
            errs.append(fields.not_supported(at.index(i), action, ACTIONS))
        if action in seen:
            errs.append(fields.duplicate(at.index(i), action))
        seen.add(action)
    if "Deny" in seen and "Warn" in seen:
        errs.append(fields.invalid(at, actions, "must not contain both Deny and Warn "
                                                "(repeating the same validation failure "
                                                "information in the API response and headers "
                                                "serves no purpose)"))
    if not seen:
        errs.append(fields.required(at, "at least one validation action is required"))
    return errs


# --- MutatingAdmissionPolicy and its binding -------------------------------------------------

#: what a mutating policy or binding may match (DELETE has no object to mutate)
MUTATING_OPERATIONS: Final = ("*", "CONNECT", "CREATE", "UPDATE")


def default_mutating_policy(obj: dict[str, Any]) -> None:
    spec = _as_dict(obj.get("spec"))
    if spec is None:
        return
    spec.setdefault("failurePolicy", "Fail")
    default_match_resources(spec.get("matchConstraints"))


def _validate_mutating_operations(resources: Any, path: FieldPath,
                                  errs: list[FieldError]) -> None:
    if not isinstance(resources, dict):
        return
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(_items(resources.get(key))):
            if not isinstance(rule, dict):
                continue
            at = path.child(key).index(i).child("operations")
            for j, op in enumerate(_items(rule.get("operations"))):
                if op in OPERATIONS and op not in MUTATING_OPERATIONS:
                    errs.append(fields.not_supported(at.index(j), op, MUTATING_OPERATIONS))


def _validate_mutation(m: Any, decl: ex.Declarations, at: FieldPath,
                       errs: list[FieldError]) -> None:
    if not isinstance(m, dict):
        errs.append(fields.type_invalid(at, m, "must be an object"))
        return
    patch_type = m.get("patchType")
    holders = {"ApplyConfiguration": "applyConfiguration", "JSONPatch": "jsonPatch"}
    if not patch_type:
        errs.append(fields.required(at.child("patchType")))
        return
    if patch_type not in holders:
        errs.append(fields.not_supported(at.child("patchType"), patch_type,
                                         mutation.PATCH_TYPES))
        return
    wanted = holders[patch_type]
    for holder in holders.values():
        if holder != wanted and m.get(holder) is not None:
            errs.append(fields.forbidden(at.child(holder),
                                         f"must not be specified when patchType is "
                                         f"{patch_type}"))
    content = m.get(wanted)
    if content is None:
        errs.append(fields.required(at.child(wanted),
                                    f"must be specified when patchType is {patch_type}"))
        return
    if not isinstance(content, dict):
        errs.append(fields.type_invalid(at.child(wanted), content, "must be an object"))
        return
    source = _text(content.get("expression"))
    where = at.child(wanted).child("expression")
    if not source.strip():
        errs.append(fields.required(where))
        return
    try:
        mutation.compile_mutation(source, patch_type, decl)
    except ex.CompileError as e:
        errs.append(fields.invalid(where, source, e.detail))


def validate_mutating_policy(obj: Mapping[str, Any]) -> list[FieldError]:
    """The spec of a MutatingAdmissionPolicy (metadata is the strategy's)."""
    errs: list[FieldError] = []
    path = FieldPath.root("spec")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [fields.required(path)] if spec is None else \
            [fields.type_invalid(path, spec, "must be an object")]
    _validate_failure_policy(spec, path, errs)
    reinvocation = spec.get("reinvocationPolicy")
    if not reinvocation:
        errs.append(fields.required(path.child("reinvocationPolicy")))
    elif reinvocation not in mutation.REINVOCATION_POLICIES:
        errs.append(fields.not_supported(path.child("reinvocationPolicy"), reinvocation,
                                         mutation.REINVOCATION_POLICIES))
    if spec.get("paramKind") is not None:
        _validate_param_kind(spec.get("paramKind"), path.child("paramKind"), errs)
    constraints = spec.get("matchConstraints")
    at = path.child("matchConstraints")
    _validate_match_constraints(constraints, at, errs)
    if constraints is not None:
        _validate_mutating_operations(constraints, at, errs)
    decl, steps = mutation.declarations(spec)
    _validate_match_conditions(spec.get("matchConditions"), decl, path.child("matchConditions"),
                               errs)
    _validate_variables(steps, path, errs, mutationtypes.MUTATION_LIBRARY)
    mutations = spec.get("mutations")
    if not _items(mutations):
        errs.append(fields.required(path.child("mutations"),
                                    "mutations must contain at least one item"))
    for i, m in enumerate(_items(mutations)):
        _validate_mutation(m, decl, path.child("mutations").index(i), errs)
    return errs


def validate_mutating_binding(obj: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    path = FieldPath.root("spec")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [fields.required(path)] if spec is None else \
            [fields.type_invalid(path, spec, "must be an object")]
    _validate_binding_target(spec, path, errs)
    resources = spec.get("matchResources")
    errs.extend(validate_match_resources(resources, path.child("matchResources")))
    _validate_mutating_operations(resources, path.child("matchResources"), errs)
    return errs
