"""The RBAC authorizer and rule resolver, over whatever holds the RBAC objects.

:class:`RBACSource` is the seam: the server implements it over its watch cache, tests over a
list. Objects are the ``rbac.authorization.k8s.io/v1`` dicts as stored.

Decisions follow Kubernetes' RBAC authorizer:

* ClusterRoleBindings grant their ClusterRole's rules everywhere; RoleBindings grant a Role
  of their namespace, or a ClusterRole, in their namespace only;
* a subject matches by kind: ``User`` by user name, ``Group`` by group, ``ServiceAccount``
  by namespace and name (the user ``system:serviceaccount:<ns>:<name>``);
* a binding whose role is missing grants nothing (the error is reported in rule reviews);
* the reason of an allowed decision names the binding, role and subject that allowed it.

Rules are parsed once per role object (keyed by uid and resourceVersion) and reused.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from setpoint.auth import user as users
from setpoint.auth.attributes import Attributes
from setpoint.auth.rbac.rules import PolicyRule
from setpoint.auth.user import UserInfo

Obj = Mapping[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"


class RBACSource(Protocol):
    def cluster_role(self, name: str) -> Obj | None: ...

    def role(self, namespace: str, name: str) -> Obj | None: ...

    def cluster_role_bindings(self) -> Iterable[Obj]: ...

    def role_bindings(self, namespace: str) -> Iterable[Obj]: ...


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


def subject_matches(subject: Mapping[str, Any], user: UserInfo, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if not isinstance(name, str):
        return False
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and users.service_account_username(namespace, name) == user.name
    return False


def _describe_subject(subject: Mapping[str, Any]) -> str:
    kind = subject.get("kind", "")
    name = subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{subject.get("namespace", "")}/{name}"'
    return f'{kind} "{name}"'


@dataclass(frozen=True, slots=True)
class _Grant:
    """Rules granted by one binding to one subject; ``describe`` explains it."""

    rules: tuple[PolicyRule, ...]
    binding_kind: str
    binding: str
    role_kind: str
    role: str
    subject: Mapping[str, Any]
    error: str = ""

    def reason(self) -> str:
        binding = f'{self.binding_kind} "{self.binding}"'
        return (f"RBAC: allowed by {binding} of {self.role_kind} \"{self.role}\" to "
                f"{_describe_subject(self.subject)}")


class RuleResolver:
    """Finds the rules a user holds in a namespace (or cluster-wide)."""

    def __init__(self, source: RBACSource) -> None:
        self._source = source
        self._parsed: dict[tuple[str, str], tuple[PolicyRule, ...]] = {}

    def _rules_of(self, role: Obj) -> tuple[PolicyRule, ...]:
        meta = role.get("metadata") or {}
        key = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
        found = self._parsed.get(key) if key[0] else None
        if found is None:
            rules = role.get("rules")
            found = tuple(PolicyRule.from_api(r) for r in rules if isinstance(r, dict)) \
                if isinstance(rules, list) else ()
            if key[0]:  # stored objects only: a uid and resourceVersion name one content
                if len(self._parsed) > 4096:
                    self._parsed.clear()
                self._parsed[key] = found
        return found

    def _role_for(self, binding: Obj, namespace: str) -> tuple[str, str, Obj | None]:
        ref = binding.get("roleRef") or {}
        kind = str(ref.get("kind", ""))
        name = str(ref.get("name", ""))
        if kind == "ClusterRole":
            return kind, name, self._source.cluster_role(name)
        if kind == "Role" and namespace:
            return kind, name, self._source.role(namespace, name)
        return kind, name, None

    def grants(self, user: UserInfo, namespace: str) -> Iterator[_Grant]:
        """Every grant that applies to ``user`` in ``namespace`` ("" : cluster-wide only)."""
        sources: list[tuple[str, str, Iterable[Obj]]] = [
            ("ClusterRoleBinding", "", self._source.cluster_role_bindings())]
        if namespace:
            sources.append(("RoleBinding", namespace, self._source.role_bindings(namespace)))
        for binding_kind, binding_ns, bindings in sources:
            for binding in bindings:
                subjects = binding.get("subjects")
                if not isinstance(subjects, list):
                    continue
                subject = next((s for s in subjects if isinstance(s, dict)
                                and subject_matches(s, user, binding_ns)), None)
                if subject is None:
                    continue
                name = str((binding.get("metadata") or {}).get("name", ""))
                role_kind, role_name, role = self._role_for(binding, binding_ns)
                if role is None:
                    error = (f'{role_kind.lower()}.{RBAC_GROUP} "{role_name}" not found')
                    yield _Grant((), binding_kind, name, role_kind, role_name, subject, error)
                    continue
                yield _Grant(self._rules_of(role), binding_kind, name, role_kind, role_name,
                             subject)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[PolicyRule], list[str]]:
        """(rules, errors): everything ``user`` may do in ``namespace``."""
        rules: list[PolicyRule] = []
        errors: list[str] = []
        for grant in self.grants(user, namespace):
            rules.extend(grant.rules)
            if grant.error:
                errors.append(grant.error)
        return rules, errors


class RBACAuthorizer:
    """Allows what some binding grants; no opinion otherwise (the chain then denies)."""

    def __init__(self, source: RBACSource) -> None:
        self.resolver = RuleResolver(source)

    def authorize(self, attrs: Attributes) -> Verdict:
        for grant in self.resolver.grants(attrs.user, attrs.namespace):
            if any(rule.allows(attrs) for rule in grant.rules):
                return Verdict(Decision.ALLOW, grant.reason())
        return Verdict(Decision.NO_OPINION)


class Authorizer(Protocol):
    def authorize(self, attrs: Attributes) -> Verdict: ...


class PrivilegedGroupAuthorizer:
    """Members of ``system:masters`` may do anything (kube-apiserver's superuser group)."""

    def authorize(self, attrs: Attributes) -> Verdict:
        if users.SYSTEM_MASTERS in attrs.user.groups:
            return Verdict(Decision.ALLOW)
        return Verdict(Decision.NO_OPINION)


class AuthorizerChain:
    """The first authorizer with an opinion decides; nobody's opinion is a denial."""

    def __init__(self, *authorizers: Authorizer) -> None:
        self._authorizers = authorizers

    def authorize(self, attrs: Attributes) -> Verdict:
        reasons: list[str] = []
        for authorizer in self._authorizers:
            verdict = authorizer.authorize(attrs)
            if verdict.decision is not Decision.NO_OPINION:
                return verdict
            if verdict.reason:
                reasons.append(verdict.reason)
        # as kube-apiserver's union of authorizers: the reasons of those without an opinion
        return Verdict(Decision.NO_OPINION, "\n".join(reasons))
