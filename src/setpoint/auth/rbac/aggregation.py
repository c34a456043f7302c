"""ClusterRole aggregation: an aggregated role's rules are those of the roles it selects.

A ClusterRole with ``aggregationRule.clusterRoleSelectors`` has its ``rules`` computed: the
rules of every *other* ClusterRole whose labels match one of the selectors, in order of the
selectors, then of role names, each distinct rule once. This is what the
clusterrole-aggregation controller writes; the function is pure so the controller and tests
share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from setpoint.apimachinery import errors, selectors

Obj = Mapping[str, Any]


def selectors_of(role: Obj) -> list[selectors.LabelSelector] | None:
    """The role's aggregation selectors, or None when it is not aggregated."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    found: list[selectors.LabelSelector] = []
    for term in rule.get("clusterRoleSelectors") or []:
        if not isinstance(term, dict):
            continue
        try:
            found.append(selectors.LabelSelector.from_dict(term))
        except errors.ApiError:
            continue  # validated on write; an unreadable selector selects nothing
    return found


def aggregated_rules(role: Obj, roles: Iterable[Obj]) -> list[dict[str, Any]] | None:
    """The rules ``role`` should hold, or None when it is not an aggregated role."""
    wanted = selectors_of(role)
    if wanted is None:
        return None
    own_name = (role.get("metadata") or {}).get("name")
    by_name = sorted(((str((r.get("metadata") or {}).get("name", "")), r) for r in roles),
                     key=lambda pair: pair[0])
    rules: list[dict[str, Any]] = []
    for selector in wanted:
        for name, other in by_name:
            if name == own_name:
                continue
            labels = (other.get("metadata") or {}).get("labels") or {}
            if not selector.matches(labels):
                continue
            for rule in other.get("rules") or []:
                if isinstance(rule, dict) and rule not in rules:
                    rules.append(rule)
    return rules
