"""Node selectors and node affinity: whether a node is one a pod may (or prefers to) run on.

Pure functions over API dicts, with Kubernetes' rules (``nodeaffinity.GetRequiredNodeAffinity``
and ``NodeSelectorRequirementsAsSelector``):

- ``spec.nodeSelector``: every label must be present with that exact value;
- ``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``: the
  ``nodeSelectorTerms`` are ORed; within a term, every ``matchExpressions`` and every
  ``matchFields`` requirement must hold; a term with neither matches no node, and an empty
  list of terms matches no node;
- operators: ``In`` (the label is one of ``values``), ``NotIn`` (absent, or none of them),
  ``Exists``, ``DoesNotExist``, ``Gt`` and ``Lt`` (the label and the single value are
  integers, compared); ``matchFields`` knows the field ``metadata.name`` with ``In`` and
  ``NotIn`` only;
- ``preferredDuringSchedulingIgnoredDuringExecution``: the score of a node is the sum of the
  ``weight`` s of the preferred terms it matches.

Invariants: a malformed requirement (an unknown operator, ``Gt`` with a value that is not an
integer, an unknown field) matches nothing, never raises; the API server validates pods, so
this only happens with objects that bypassed validation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from setpoint.controllers.taints import items

Obj = Mapping[str, Any]

#: the one field ``matchFields`` may name
NAME_FIELD: Final = "metadata.name"
#: labels and values longer than this are not integers Gt/Lt can compare
_MAX_INT_TEXT: Final = 64


def _labels(node: Obj) -> Mapping[str, Any]:
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _values(requirement: Obj) -> list[str]:
    values = requirement.get("values")
    if not isinstance(values, Sequence) or isinstance(values, str):
        return []
    return [v for v in values if isinstance(v, str)]


def _integer(text: Any) -> int | None:
    if not isinstance(text, str) or not text or len(text) > _MAX_INT_TEXT:
        return None
    digits = text[1:] if text[0] in "+-" else text
    if not digits.isascii() or not digits.isdigit():
        return None
    return int(text)


def requirement_matches(requirement: Obj, value: str | None) -> bool:
    """Whether one requirement holds for a label (or field) whose value is ``value``
    (None: absent)."""
    operator = requirement.get("operator")
    values = _values(requirement)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        have, want = _integer(value), _integer(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def term_matches(term: Obj, node: Obj) -> bool:
    """Whether ``node`` matches one node selector term."""
    expressions = items(term.get("matchExpressions"))
    fields = items(term.get("matchFields"))
    if not expressions and not fields:
        return False
    labels = _labels(node)
    for requirement in expressions:
        key = requirement.get("key")
        label = labels.get(key) if isinstance(key, str) else None
        if not requirement_matches(requirement, label if isinstance(label, str) else None):
            return False
    meta = node.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    for requirement in fields:
        if requirement.get("key") != NAME_FIELD or requirement.get("operator") not in (
                "In", "NotIn"):
            return False
        if not requirement_matches(requirement, name if isinstance(name, str) else None):
            return False
    return True


def selector_matches(selector: Any, node: Obj) -> bool:
    """Whether ``node`` matches a NodeSelector (``nodeSelectorTerms``, ORed)."""
    if not isinstance(selector, Mapping):
        return False
    return any(term_matches(term, node) for term in items(selector.get("nodeSelectorTerms")))


def _node_affinity(pod: Obj) -> Mapping[str, Any]:
    spec = pod.get("spec")
    affinity = spec.get("affinity") if isinstance(spec, Mapping) else None
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    return node_affinity if isinstance(node_affinity, Mapping) else {}


def matches_node_selector(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec")
    selector = spec.get("nodeSelector") if isinstance(spec, Mapping) else None
    if not isinstance(selector, Mapping):
        return True
    labels = _labels(node)
    return all(labels.get(k) == v for k, v in selector.items())


def required_matches(pod: Obj, node: Obj) -> bool:
    """The scheduler's NodeAffinity filter: ``nodeSelector`` and the required affinity."""
    if not matches_node_selector(pod, node):
        return False
    required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    return required is None or selector_matches(required, node)


def preferred_score(pod: Obj, node: Obj) -> int:
    """The sum of the weights of the preferred terms ``node`` matches (not normalised)."""
    total = 0
    for preference in items(
            _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")):
        weight = preference.get("weight")
        term = preference.get("preference")
        if isinstance(weight, bool) or not isinstance(weight, int) or weight == 0:
            continue
        if isinstance(term, Mapping) and term_matches(term, node):
            total += weight
    return total
