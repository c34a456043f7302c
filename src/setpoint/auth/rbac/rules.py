"""RBAC policy rules: matching a request, and whether one set of rules covers another.

A rule grants ``verbs`` on ``resources`` (optionally only those named ``resourceNames``) in
``apiGroups``, or ``verbs`` on ``nonResourceURLs``. Matching follows Kubernetes' evaluation
helpers exactly:

* ``*`` in verbs, apiGroups or resources matches anything; an empty resourceNames list
  matches every name;
* a resource is matched as ``resource`` or ``resource/subresource``; ``*/subresource``
  matches that subresource of every resource;
* a non-resource URL matches exactly, or by prefix when the rule's URL ends in ``*``.

:func:`covers` is the escalation check's question: does ``owner`` grant at least everything
``servant`` grants? ``servant`` is broken into atomic rules (one verb, one group, one
resource, one name) and each must be allowed by a single owner rule.

Invariants: rules are immutable and hashable; :meth:`PolicyRule.from_api` never raises on a
malformed object (non-string entries are dropped), since stored objects were validated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setpoint.auth.attributes import Attributes

ALL = "*"


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


@dataclass(frozen=True, slots=True)
class PolicyRule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, rule: Mapping[str, Any]) -> PolicyRule:
        return cls(verbs=_strings(rule.get("verbs")), api_groups=_strings(rule.get("apiGroups")),
                   resources=_strings(rule.get("resources")),
                   resource_names=_strings(rule.get("resourceNames")),
                   non_resource_urls=_strings(rule.get("nonResourceURLs")))

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verbs": list(self.verbs)}
        if self.api_groups:
            out["apiGroups"] = list(self.api_groups)
        if self.resources:
            out["resources"] = list(self.resources)
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        if self.non_resource_urls:
            out["nonResourceURLs"] = list(self.non_resource_urls)
        return out

    def __str__(self) -> str:
        """Kubernetes' compact form, used in escalation messages."""
        parts = []
        if self.api_groups:
            parts.append(f"APIGroups:{_go_list(self.api_groups)}")
        if self.resources:
            parts.append(f"Resources:{_go_list(self.resources)}")
        if self.resource_names:
            parts.append(f"ResourceNames:{_go_list(self.resource_names)}")
        if self.non_resource_urls:
            parts.append(f"NonResourceURLs:{_go_list(self.non_resource_urls)}")
        parts.append(f"Verbs:{_go_list(self.verbs)}")
        return "{" + ", ".join(parts) + "}"

    # --- matching ------------------------------------------------------------------------

    def allows(self, attrs: Attributes) -> bool:
        if not verb_matches(self, attrs.verb):
            return False
        if not attrs.resource_request:
            return non_resource_url_matches(self, attrs.path)
        combined = attrs.resource
        if attrs.subresource:
            combined = f"{attrs.resource}/{attrs.subresource}"
        return (api_group_matches(self, attrs.api_group)
                and resource_matches(self, combined, attrs.subresource)
                and resource_name_matches(self, attrs.name))


def _go_list(values: Sequence[str]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def verb_matches(rule: PolicyRule, verb: str) -> bool:
    return ALL in rule.verbs or verb in rule.verbs


def api_group_matches(rule: PolicyRule, group: str) -> bool:
    return ALL in rule.api_groups or group in rule.api_groups


def resource_matches(rule: PolicyRule, combined: str, subresource: str) -> bool:
    for resource in rule.resources:
        if resource in (ALL, combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: PolicyRule, name: str) -> bool:
    return not rule.resource_names or name in rule.resource_names


def non_resource_url_matches(rule: PolicyRule, path: str) -> bool:
    for url in rule.non_resource_urls:
        if url in (ALL, path):
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def allows_any(rules: Iterable[PolicyRule], attrs: Attributes) -> bool:
    return any(rule.allows(attrs) for rule in rules)


# --- coverage (escalation prevention) -----------------------------------------------------


def breakdown(rule: PolicyRule) -> Iterator[PolicyRule]:
    """``rule`` as atomic rules: one verb, group, resource and name (or URL) each."""
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    for name in rule.resource_names:
                        yield PolicyRule((verb,), (group,), (resource,), (name,))
                else:
                    yield PolicyRule((verb,), (group,), (resource,))
    for url in rule.non_resource_urls:
        for verb in rule.verbs:
            yield PolicyRule((verb,), non_resource_urls=(url,))


def _has_all(owner: Sequence[str], servant: Sequence[str]) -> bool:
    return all(s in owner for s in servant)


def _resources_covered(owner: Sequence[str], servant: Sequence[str]) -> bool:
    if ALL in owner:
        return True
    for resource in servant:
        if resource in owner:
            continue
        _, sep, sub = resource.partition("/")
        if not sep or f"*/{sub}" not in owner:
            return False
    return True


def _urls_covered(owner: Sequence[str], servant: Sequence[str]) -> bool:
    return all(any(o == url or (o.endswith("*") and url.startswith(o[:-1])) for o in owner)
               for url in servant)


def rule_covers(owner: PolicyRule, servant: PolicyRule) -> bool:
    """Does the single rule ``owner`` grant everything the rule ``servant`` does?

    A servant rule without resourceNames is covered only by an owner rule without them.
    """
    if servant.resource_names:
        names = not owner.resource_names or _has_all(owner.resource_names,
                                                     servant.resource_names)
    else:
        names = not owner.resource_names
    return (names
            and (ALL in owner.verbs or _has_all(owner.verbs, servant.verbs))
            and (ALL in owner.api_groups or _has_all(owner.api_groups, servant.api_groups))
            and _resources_covered(owner.resources, servant.resources)
            and _urls_covered(owner.non_resource_urls, servant.non_resource_urls))


def uncovered(owner: Sequence[PolicyRule], servant: Iterable[PolicyRule]) -> list[PolicyRule]:
    """The atomic rules of ``servant`` that no rule of ``owner`` covers (empty: covered)."""
    missing: list[PolicyRule] = []
    seen: set[PolicyRule] = set()
    for rule in servant:
        for atom in breakdown(rule):
            if atom in seen:
                continue
            seen.add(atom)
            if not any(rule_covers(o, atom) for o in owner):
                missing.append(atom)
    return missing


def covers(owner: Sequence[PolicyRule], servant: Iterable[PolicyRule]) -> bool:
    return not uncovered(owner, servant)
