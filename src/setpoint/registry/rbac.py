"""rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding, ClusterRoleBinding.

Validation and defaulting follow Kubernetes' RBAC types: every rule names verbs; a rule is
either about resources (apiGroups and resources required) or about non-resource URLs
(ClusterRoles only), never both; a binding's ``roleRef`` names a Role (RoleBindings only) or
a ClusterRole of ``rbac.authorization.k8s.io`` and can never change; subjects are Users,
Groups (``apiGroup`` defaulted to rbac's) or ServiceAccounts (``apiGroup`` ""; a namespace
is required in ClusterRoleBindings).

Escalation prevention (nobody grants what they do not hold) is not here: it needs the
requester, and lives in :mod:`setpoint.registry.escalation`.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import errors, fields, selectors, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy

Obj = dict[str, Any]

GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("Group", "ServiceAccount", "User")


def _strings(value: Any, path: FieldPath, errs: list[FieldError]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errs.append(fields.type_invalid(path, value, "must be a list of strings"))
        return []
    return value


def validate_rule(rule: Any, path: FieldPath, *, namespaced: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    if not isinstance(rule, dict):
        return [fields.type_invalid(path, rule, "must be an object")]
    verbs = _strings(rule.get("verbs"), path.child("verbs"), errs)
    urls = _strings(rule.get("nonResourceURLs"), path.child("nonResourceURLs"), errs)
    groups = _strings(rule.get("apiGroups"), path.child("apiGroups"), errs)
    resources = _strings(rule.get("resources"), path.child("resources"), errs)
    names = _strings(rule.get("resourceNames"), path.child("resourceNames"), errs)
    if not verbs:
        errs.append(fields.required(path.child("verbs"), "verbs must contain at least one value"))
    if urls:
        if namespaced:
            errs.append(fields.invalid(path.child("nonResourceURLs"), urls,
                                       "namespaced rules cannot apply to non-resource URLs"))
        if groups or resources or names:
            errs.append(fields.invalid(path.child("nonResourceURLs"), urls,
                                       "rules cannot apply to both regular resources and "
                                       "non-resource URLs"))
        return errs
    if not groups:
        errs.append(fields.required(path.child("apiGroups"),
                                    "resource rules must supply at least one api group"))
    if not resources:
        errs.append(fields.required(path.child("resources"),
                                    "resource rules must supply at least one resource"))
    return errs


def _validate_rules(obj: Obj, *, namespaced: bool) -> list[FieldError]:
    rules = obj.get("rules")
    if rules is None:
        return []
    if not isinstance(rules, list):
        return [fields.type_invalid("rules", rules, "must be a list")]
    errs: list[FieldError] = []
    for i, rule in enumerate(rules):
        errs.extend(validate_rule(rule, FieldPath.root("rules").index(i), namespaced=namespaced))
    return errs


class _RBACStrategy(Strategy):
    """RBAC objects are named by any single URL path segment (``system:discovery``)."""

    def check_name(self, name: str) -> list[str]:
        return validation.is_path_segment_name(name)


class RoleStrategy(_RBACStrategy):
    known_fields = frozenset({"rules"})

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + _validate_rules(obj, namespaced=True)

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.path_column("Created At", "string", ".metadata.creationTimestamp")]


class ClusterRoleStrategy(_RBACStrategy):
    known_fields = frozenset({"rules", "aggregationRule"})

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version) + _validate_rules(obj, namespaced=False)
        rule = obj.get("aggregationRule")
        if rule is not None:
            path = FieldPath.root("aggregationRule")
            terms = rule.get("clusterRoleSelectors") if isinstance(rule, dict) else None
            if not isinstance(rule, dict) or not isinstance(terms, list):
                errs.append(fields.type_invalid(path.child("clusterRoleSelectors"), terms,
                                                "must be a list of label selectors"))
            else:
                for i, sel in enumerate(terms):
                    if not isinstance(sel, dict):
                        errs.append(fields.type_invalid(
                            path.child("clusterRoleSelectors").index(i), sel,
                            "must be a label selector"))
                    else:
                        try:
                            selectors.LabelSelector.from_dict(sel)
                        except errors.ApiError as e:
                            errs.append(fields.invalid(
                                path.child("clusterRoleSelectors").index(i), sel, e.message))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.path_column("Created At", "string", ".metadata.creationTimestamp")]


class _BindingStrategy(_RBACStrategy):
    known_fields = frozenset({"roleRef", "subjects"})
    role_kinds: tuple[str, ...] = ("ClusterRole",)

    def default(self, obj: Obj, version: VersionInfo) -> None:
        for subject in obj.get("subjects") or []:
            if isinstance(subject, dict) and "apiGroup" not in subject:
                if subject.get("kind") in ("User", "Group"):
                    subject["apiGroup"] = GROUP
                elif subject.get("kind") == "ServiceAccount":
                    subject["apiGroup"] = ""

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        ref = obj.get("roleRef")
        path = FieldPath.root("roleRef")
        if not isinstance(ref, dict):
            errs.append(fields.required(path, "") if ref is None else
                        fields.type_invalid(path, ref, "must be an object"))
        else:
            if ref.get("apiGroup") != GROUP:
                errs.append(fields.not_supported(path.child("apiGroup"), ref.get("apiGroup"),
                                                 [GROUP]))
            if ref.get("kind") not in self.role_kinds:
                errs.append(fields.not_supported(path.child("kind"), ref.get("kind"),
                                                 self.role_kinds))
            name = ref.get("name")
            if not isinstance(name, str) or not name:
                errs.append(fields.required(path.child("name"), ""))
            elif "/" in name or "%" in name or name in (".", ".."):
                errs.append(fields.invalid(path.child("name"), name,
                                           "may not contain '/' or '%' and may not be '.' "
                                           "or '..'"))
        subjects = obj.get("subjects")
        if subjects is not None and not isinstance(subjects, list):
            errs.append(fields.type_invalid("subjects", subjects, "must be a list"))
        for i, subject in enumerate(subjects if isinstance(subjects, list) else []):
            errs.extend(self._validate_subject(subject, FieldPath.root("subjects").index(i)))
        return errs

    def _validate_subject(self, subject: Any, path: FieldPath) -> list[FieldError]:
        if not isinstance(subject, dict):
            return [fields.type_invalid(path, subject, "must be an object")]
        errs: list[FieldError] = []
        name = subject.get("name")
        if not isinstance(name, str) or not name:
            errs.append(fields.required(path.child("name"), ""))
        kind = subject.get("kind")
        group = subject.get("apiGroup", "")
        if kind == "ServiceAccount":
            if group:
                errs.append(fields.not_supported(path.child("apiGroup"), group, [""]))
            if isinstance(name, str) and name:
                for msg in validation.is_dns1123_subdomain(name):
                    errs.append(fields.invalid(path.child("name"), name, msg))
            if not self.info.namespaced and not subject.get("namespace"):
                errs.append(fields.required(path.child("namespace"), ""))
        elif kind in ("User", "Group"):
            if group != GROUP:
                errs.append(fields.not_supported(path.child("apiGroup"), group, [GROUP]))
        else:
            errs.append(fields.not_supported(path.child("kind"), kind, SUBJECT_KINDS))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        if new.get("roleRef") != old.get("roleRef"):
            errs.append(fields.invalid("roleRef", new.get("roleRef"), "cannot change roleRef"))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        def role(o: Obj, _now: Any) -> str:
            ref = o.get("roleRef") or {}
            return f"{ref.get('kind', '')}/{ref.get('name', '')}"

        def subjects_of(kind: str) -> table.Column:
            def cell(o: Obj, _now: Any) -> str:
                names = [s.get("name", "") if kind != "ServiceAccount" else
                         f"{s.get('namespace', '')}/{s.get('name', '')}"
                         for s in o.get("subjects") or [] if isinstance(s, dict)
                         and s.get("kind") == kind]
                return ", ".join(names)
            return table.Column(kind.replace("ServiceAccount", "ServiceAccounts")
                                .replace("User", "Users").replace("Group", "Groups"),
                                "string", cell, priority=1)

        return [table.name_column(), table.Column("Role", "string", role),
                table.age_column(), subjects_of("User"), subjects_of("Group"),
                subjects_of("ServiceAccount")]


class RoleBindingStrategy(_BindingStrategy):
    role_kinds = ("ClusterRole", "Role")


class ClusterRoleBindingStrategy(_BindingStrategy):
    role_kinds = ("ClusterRole",)


def _v1() -> tuple[VersionInfo, ...]:
    return (VersionInfo("v1", storage=True),)


def rbac_resources() -> list[tuple[ResourceInfo, type[Strategy]]]:
    return [
        (ResourceInfo(group=GROUP, resource="roles", kind="Role", singular="role",
                      namespaced=True, versions=_v1()), RoleStrategy),
        (ResourceInfo(group=GROUP, resource="clusterroles", kind="ClusterRole",
                      singular="clusterrole", namespaced=False, versions=_v1()),
         ClusterRoleStrategy),
        (ResourceInfo(group=GROUP, resource="rolebindings", kind="RoleBinding",
                      singular="rolebinding", namespaced=True, versions=_v1()),
         RoleBindingStrategy),
        (ResourceInfo(group=GROUP, resource="clusterrolebindings", kind="ClusterRoleBinding",
                      singular="clusterrolebinding", namespaced=False, versions=_v1()),
         ClusterRoleBindingStrategy),
    ]
