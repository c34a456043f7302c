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
resource, one name) and each must be allowed by a single owner rule. A servant rule that one
owner rule covers whole is not broken down (every atom of it is covered by that rule), and
the atoms of the others are bounded (:data:`MAX_BREAKDOWN_WORK`): a rule breaks down into
the product of its lists' lengths, so a few hundred strings asked for billions of atoms.

Invariants: rules are immutable and hashable; :meth:`PolicyRule.from_api` never raises on a
malformed object (non-string entries are dropped), since stored objects were validated.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from setpoint.auth.attributes import Attributes

ALL = "*"

#: the work :func:`uncovered` may do on the rules no single owner rule covers whole: each of
#: their atoms costs one comparison with every owner rule (and one more to break it down).
#: 100,000 is about 0.1 s. Rules held only piecewise are small (a few groups, resources and
#: verbs: hundreds of atoms); one rule of 80 verbs, 80 resources and 80 names broke down
#: into 512,000 atoms and held the event loop for 2.4 s; one of 200 each (5 KB) asked for
#: 8 million
MAX_BREAKDOWN_WORK: Final = 100_000


class BreakdownTooLarge(ValueError):
    """The servant rules break down into more atoms than :func:`uncovered` may compare."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the rules that no single rule held covers whole break down into "
                         f"too many single permissions to compare (at most {limit} "
                         f"comparisons)")
        self.limit = limit


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


def atoms(rule: PolicyRule) -> int:
    """How many atomic rules :func:`breakdown` yields for ``rule`` (duplicates included)."""
    return (len(rule.api_groups) * len(rule.resources) * len(rule.verbs)
            * max(1, len(rule.resource_names)) + len(rule.non_resource_urls) * len(rule.verbs))


def _parts(rule: PolicyRule) -> Iterator[PolicyRule]:
    """``rule``'s resource atoms, then its URL ones, as two rules: what :func:`breakdown`
    yields of each is what it yields of ``rule``, and one owner rule covering a part whole
    covers each of its atoms (a URL atom has no resourceNames, so its part has none)."""
    if rule.api_groups and rule.resources and rule.verbs:
        yield PolicyRule(rule.verbs, rule.api_groups, rule.resources, rule.resource_names)
    if rule.non_resource_urls and rule.verbs:
        yield PolicyRule(rule.verbs, non_resource_urls=rule.non_resource_urls)


def _lookup(values: Sequence[str], against: int) -> Collection[str]:
    """``values`` for ``against`` membership tests: a set when scanning would be quadratic."""
    return values if against <= 1 or len(values) <= 8 else frozenset(values)


def _has_all(owner: Sequence[str], servant: Sequence[str]) -> bool:
    have = _lookup(owner, len(servant))
    return all(s in have for s in servant)


def _resources_covered(owner: Sequence[str], servant: Sequence[str]) -> bool:
    if ALL in owner:
        return True
    have = _lookup(owner, len(servant))
    for resource in servant:
        if resource in have:
            continue
        _, sep, sub = resource.partition("/")
        if not sep or f"*/{sub}" not in have:
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


def uncovered(owner: Sequence[PolicyRule], servant: Iterable[PolicyRule], *,
              max_work: int | None = MAX_BREAKDOWN_WORK) -> list[PolicyRule]:
    """The atomic rules of ``servant`` that no rule of ``owner`` covers (empty: covered), in
    the order :func:`breakdown` yields them.

    :class:`BreakdownTooLarge` when the rules no owner rule covers whole would cost more
    than ``max_work`` (None: no bound) atoms times owner rules to compare.
    """
    missing: list[PolicyRule] = []
    seen: set[PolicyRule] = set()
    work = 0
    for part in (p for rule in servant for p in _parts(rule)):
        if any(rule_covers(o, part) for o in owner):
            continue  # each of its atoms is covered by that owner rule
        work += atoms(part) * (len(owner) + 1)
        if max_work is not None and work > max_work:
            raise BreakdownTooLarge(max_work)
        for atom in breakdown(part):
            if atom in seen:
                continue
            seen.add(atom)
            if not any(rule_covers(o, atom) for o in owner):
                missing.append(atom)
    return missing


def covers(owner: Sequence[PolicyRule], servant: Iterable[PolicyRule]) -> bool:
    return not uncovered(owner, servant)
