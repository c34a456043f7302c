"""matchConstraints and matchResources: rules, wildcards, subresources, scopes, selectors,
exclusions and matchPolicy Equivalent."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.admission import matching
from setpoint.admission.matching import Request


def req(**kw: Any) -> Request:
    base: dict[str, Any] = {"operation": "CREATE", "group": "apps", "version": "v1",
                            "resource": "deployments", "subresource": "", "namespace": "ns",
                            "name": "web", "versions": ("v1",), "object_labels": {},
                            "old_object_labels": None}
    base.update(kw)
    return Request(**base)


def rule(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"apiGroups": ["apps"], "apiVersions": ["v1"],
                            "operations": ["CREATE"], "resources": ["deployments"]}
    base.update(kw)
    return base


def constraints(*rules: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"resourceRules": list(rules), "matchPolicy": "Equivalent", **kw}


@pytest.mark.parametrize(("resources", "subresource", "expected"), [
    (["deployments"], "", True),
    (["deployments"], "status", False),
    (["deployments/status"], "status", True),
    (["deployments/status"], "", False),
    (["deployments/*"], "scale", True),
    (["deployments/*"], "", True),  # as Kubernetes' matcher: "*" also matches no subresource
    (["*"], "", True),
    (["*"], "status", False),
    (["*/scale"], "scale", True),
    (["*/*"], "status", True),
    (["*/*"], "", True),
    (["pods"], "", False),
])
def test_resources_and_subresources(resources: list[str], subresource: str,
                                    expected: bool) -> None:
    got = matching.matches(constraints(rule(resources=resources)),
                           req(subresource=subresource), None)
    assert (got is not None) is expected


@pytest.mark.parametrize(("operations", "operation", "expected"), [
    (["CREATE"], "CREATE", True), (["CREATE"], "UPDATE", False), (["*"], "DELETE", True),
    (["UPDATE", "DELETE"], "DELETE", True)])
def test_operations(operations: list[str], operation: str, expected: bool) -> None:
    got = matching.matches(constraints(rule(operations=operations)), req(operation=operation),
                           None)
    assert (got is not None) is expected


def test_groups_versions_wildcards() -> None:
    assert matching.matches(constraints(rule(apiGroups=["*"])), req(), None)
    assert not matching.matches(constraints(rule(apiGroups=[""])), req(), None)
    assert matching.matches(constraints(rule(apiVersions=["*"])), req(), None)


@pytest.mark.parametrize(("scope", "namespace", "resource", "group", "expected"), [
    ("*", "ns", "deployments", "apps", True),
    ("Namespaced", "ns", "deployments", "apps", True),
    ("Namespaced", "", "clusterroles", "apps", False),
    ("Cluster", "", "clusterroles", "apps", True),
    ("Cluster", "ns", "deployments", "apps", False),
    ("Cluster", "ns", "namespaces", "", True),
    ("Namespaced", "ns", "namespaces", "", False),
])
def test_scope(scope: str, namespace: str, resource: str, group: str, expected: bool) -> None:
    r = rule(scope=scope, apiGroups=["*"], resources=["*"])
    got = matching.matches(constraints(r), req(namespace=namespace, resource=resource,
                                               group=group), None)
    assert (got is not None) is expected


def test_resource_names_and_exclusions() -> None:
    named = constraints(rule(resourceNames=["web", "api"]))
    assert matching.matches(named, req(name="api"), None)
    assert not matching.matches(named, req(name="db"), None)
    excluded = constraints(rule(), excludeResourceRules=[rule(resourceNames=["web"])])
    assert not matching.matches(excluded, req(name="web"), None)
    assert matching.matches(excluded, req(name="db"), None)


def test_empty_resource_rules_match_everything_for_bindings() -> None:
    assert matching.matches({"namespaceSelector": {}}, req(), None)
    assert matching.matches(None, req(), None, binding=True)
    assert matching.matches(None, req(), None) is None


def test_namespace_selector() -> None:
    sel = constraints(rule(), namespaceSelector={"matchLabels": {"env": "test"}})
    assert matching.matches(sel, req(), {"env": "test"})
    assert not matching.matches(sel, req(), {"env": "prod"})
    assert not matching.matches(sel, req(), None)
    # cluster-scoped objects other than namespaces are never exempted
    cluster = constraints(rule(apiGroups=["*"], resources=["*"]),
                          namespaceSelector={"matchLabels": {"env": "test"}})
    assert matching.matches(cluster, req(namespace="", resource="clusterroles"), None)
    # a namespace is matched by its own labels
    ns = req(group="", resource="namespaces", namespace="n1", name="n1",
             object_labels={"env": "test"})
    assert matching.matches(cluster, ns, None)
    assert not matching.matches(cluster, req(group="", resource="namespaces", namespace="n1",
                                             object_labels={"env": "prod"}), None)


def test_object_selector_matches_new_or_old_labels() -> None:
    sel = constraints(rule(operations=["*"]), objectSelector={
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]})
    assert matching.matches(sel, req(object_labels={"tier": "web"}), None)
    assert not matching.matches(sel, req(object_labels={"tier": "db"}), None)
    assert matching.matches(sel, req(operation="DELETE", object_labels=None,
                                     old_object_labels={"tier": "web"}), None)
    assert not matching.matches(sel, req(object_labels=None, old_object_labels=None), None)


def test_match_policy_equivalent_and_exact() -> None:
    r = req(version="v2", versions=("v1", "v2"))
    got = matching.matches(constraints(rule()), r, None)
    assert got is not None
    assert got.version == "v1"
    exact = constraints(rule(), matchPolicy="Exact")
    assert matching.matches(exact, r, None) is None


def test_a_malformed_selector_matches_nothing() -> None:
    bad = constraints(rule(), objectSelector={"matchExpressions": [{"key": "a",
                                                                   "operator": "Nope"}]})
    assert matching.matches(bad, req(object_labels={"a": "b"}), None) is None
