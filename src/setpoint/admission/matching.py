"""Which requests a policy (or a binding) applies to: Kubernetes' ``MatchResources``.

A request matches when, in order:

1. the **namespace selector** matches the labels of the request's namespace (always for
   cluster-scoped objects other than Namespaces; a Namespace is matched by its own labels);
2. the **object selector** matches the labels of the object or of the old object;
3. no **excludeResourceRules** entry matches;
4. a **resourceRules** entry matches (an empty list matches everything): operation
   (``*`` for all), API group, version and resource (``*``, ``pods``, ``pods/status``,
   ``pods/*``, ``*/scale``), scope (``Namespaced``, ``Cluster``, ``*``) and, when given,
   ``resourceNames``. With ``matchPolicy: Equivalent`` a rule naming another served version
   of the same resource matches too, and the request is then seen in that version.

Pure: the caller supplies the namespace's labels. Invariant: selectors and rules are read,
never modified; a malformed selector in a stored object matches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from setpoint.apimachinery import errors, selectors

#: resources admission policies and webhooks never apply to (their own configuration)
EXEMPT: Final = frozenset({
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
})


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What matching needs to know of a request."""

    operation: str
    group: str
    version: str
    resource: str
    subresource: str
    #: the request's namespace; for a Namespace, its own name (as Kubernetes sets it)
    namespace: str
    name: str
    #: every served version of the resource, for ``matchPolicy: Equivalent``
    versions: tuple[str, ...] = ()
    object_labels: Mapping[str, str] | None = None
    old_object_labels: Mapping[str, str] | None = None

    @property
    def is_namespace(self) -> bool:
        return self.group == "" and self.resource == "namespaces"


@dataclass(frozen=True, slots=True)
class Match:
    """A match, in the version the matching rule names."""

    version: str


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _exact_or_wildcard(items: Sequence[str], requested: str) -> bool:
    return any(item == "*" or item == requested for item in items)


def _resource(rule_resources: Sequence[str], resource: str, subresource: str) -> bool:
    for entry in rule_resources:
        res, _, sub = entry.partition("/")
        if (res == "*" or res == resource) and (sub == "*" or sub == subresource):
            return True
    return False


def _scope(scope: Any, req: Request) -> bool:
    if scope in (None, "*"):
        return True
    if scope == "Namespaced":
        return not req.is_namespace and req.namespace != ""
    if scope == "Cluster":
        return req.is_namespace or req.namespace == ""
    return False


def rule_matches(rule: Mapping[str, Any], req: Request, version: str) -> bool:
    """One ``NamedRuleWithOperations`` against the request seen in ``version``."""
    return (_scope(rule.get("scope"), req)
            and _exact_or_wildcard(_strings(rule.get("operations")), req.operation)
            and _exact_or_wildcard(_strings(rule.get("apiGroups")), req.group)
            and _exact_or_wildcard(_strings(rule.get("apiVersions")), version)
            and _resource(_strings(rule.get("resources")), req.resource, req.subresource))


def _named(rule: Mapping[str, Any], req: Request) -> bool:
    names = _strings(rule.get("resourceNames"))
    return not names or req.name in names


def rules_match(rules: Any, match_policy: Any, req: Request) -> Match | None:
    """The first rule of ``rules`` that matches, in the version it matched."""
    entries = [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []
    for rule in entries:
        if rule_matches(rule, req, req.version) and _named(rule, req):
            return Match(req.version)
    if match_policy == "Exact":
        return None
    for rule in entries:
        for version in req.versions:
            if version != req.version and rule_matches(rule, req, version) \
                    and _named(rule, req):
                return Match(version)
    return None


def selector(value: Any) -> selectors.LabelSelector | None:
    """A ``metav1.LabelSelector`` (``None``: absent, which selects everything); raises
    ``ValueError`` for one that does not parse."""
    if value is None:
        return None
    try:
        return selectors.LabelSelector.from_dict(value)
    except errors.ApiError as e:
        raise ValueError(e.message) from None


def _selects(value: Any, labels: Mapping[str, str] | None) -> bool:
    try:
        sel = selector(value)
    except ValueError:
        return False
    if sel is None or sel.empty:
        return True
    return labels is not None and sel.matches(labels)


def namespace_needed(resources: Mapping[str, Any] | None, req: Request) -> bool:
    """Whether matching ``resources`` needs the labels of the request's namespace."""
    if resources is None or req.is_namespace or not req.namespace:
        return False
    try:
        sel = selector(resources.get("namespaceSelector"))
    except ValueError:
        return False
    return sel is not None and not sel.empty


def matches(resources: Mapping[str, Any] | None, req: Request,
            namespace_labels: Mapping[str, str] | None, *, binding: bool = False
            ) -> Match | None:
    """Whether ``resources`` (a policy's ``matchConstraints``, a binding's
    ``matchResources``) match the request. A binding without ``matchResources`` matches
    every request its policy matches (``binding=True``)."""
    if resources is None:
        return Match(req.version) if binding else None
    if not req.namespace and not req.is_namespace:
        ns_ok = True  # cluster-scoped objects are never exempted by a namespace selector
    elif req.is_namespace:
        ns_ok = _selects(resources.get("namespaceSelector"),
                         req.object_labels if req.object_labels is not None
                         else req.old_object_labels)
    else:
        ns_ok = _selects(resources.get("namespaceSelector"), namespace_labels)
    if not ns_ok:
        return None
    object_sel = resources.get("objectSelector")
    if not _empty(object_sel):
        new_ok = req.object_labels is not None and _selects(object_sel, req.object_labels)
        old_ok = req.old_object_labels is not None and \
            _selects(object_sel, req.old_object_labels)
        if not (new_ok or old_ok):
            return None
    policy = resources.get("matchPolicy") or "Equivalent"
    if rules_match(resources.get("excludeResourceRules"), policy, req) is not None:
        return None
    rules = resources.get("resourceRules")
    if not rules:
        return Match(req.version)
    return rules_match(rules, policy, req)


def _empty(value: Any) -> bool:
    try:
        sel = selector(value)
    except ValueError:
        return False
    return sel is None or sel.empty


def labels_of(obj: Any) -> dict[str, str] | None:
    """An object's labels (``{}`` when it has none), or ``None`` for no object."""
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
