"""RBAC rule matching and coverage, as Kubernetes' evaluation helpers and comparator decide."""

from __future__ import annotations

import pytest

from setpoint.auth.attributes import Attributes, resource_verb
from setpoint.auth.rbac.rules import PolicyRule, covers, uncovered
from setpoint.auth.user import UserInfo

BOB = UserInfo("bob")


def res(verb: str, resource: str, *, group: str = "", sub: str = "", name: str = "",
        ns: str = "default") -> Attributes:
    return Attributes(user=BOB, verb=verb, resource_request=True, api_group=group,
                      resource=resource, subresource=sub, name=name, namespace=ns)


def url(verb: str, path: str) -> Attributes:
    return Attributes(user=BOB, verb=verb, resource_request=False, path=path)


def r(verbs: list[str], groups: list[str] | None = None, resources: list[str] | None = None,
      names: list[str] | None = None, urls: list[str] | None = None) -> PolicyRule:
    return PolicyRule.from_api({"verbs": verbs, "apiGroups": groups or [],
                                "resources": resources or [], "resourceNames": names or [],
                                "nonResourceURLs": urls or []})


@pytest.mark.parametrize(("rule", "attrs", "allowed"), [
    (r(["get"], [""], ["pods"]), res("get", "pods"), True),
    (r(["get"], [""], ["pods"]), res("list", "pods"), False),
    (r(["*"], [""], ["pods"]), res("delete", "pods"), True),
    (r(["get"], ["apps"], ["pods"]), res("get", "pods"), False),
    (r(["get"], ["*"], ["pods"]), res("get", "pods", group="apps"), True),
    (r(["get"], [""], ["pods"]), res("get", "pods", sub="log"), False),
    (r(["get"], [""], ["pods/log"]), res("get", "pods", sub="log"), True),
    (r(["get"], [""], ["*/log"]), res("get", "pods", sub="log"), True),
    (r(["get"], [""], ["*/log"]), res("get", "pods"), False),
    (r(["get"], [""], ["*"]), res("get", "pods", sub="status"), True),
    (r(["get"], [""], ["pods"], names=["a"]), res("get", "pods", name="a"), True),
    (r(["get"], [""], ["pods"], names=["a"]), res("get", "pods", name="b"), False),
    (r(["list"], [""], ["pods"], names=["a"]), res("list", "pods"), False),
    (r(["get"], urls=["/healthz"]), url("get", "/healthz"), True),
    (r(["get"], urls=["/healthz"]), url("get", "/healthz/ping"), False),
    (r(["get"], urls=["/healthz*"]), url("get", "/healthz/ping"), True),
    (r(["get"], urls=["*"]), url("get", "/anything"), True),
    (r(["get"], urls=["/api"]), url("post", "/api"), False),
    (r(["get"], [""], ["pods"]), url("get", "/api"), False),
    (r(["get"], urls=["*"]), res("get", "pods"), False),
], ids=lambda v: str(v) if isinstance(v, bool) else None)
def test_rule_matching(rule: PolicyRule, attrs: Attributes, allowed: bool) -> None:
    assert rule.allows(attrs) is allowed


@pytest.mark.parametrize(("owner", "servant", "covered"), [
    ([r(["*"], ["*"], ["*"])], [r(["get", "list"], [""], ["pods", "secrets"])], True),
    ([r(["get"], [""], ["pods"])], [r(["get", "list"], [""], ["pods"])], False),
    ([r(["get"], [""], ["pods"]), r(["list"], [""], ["pods"])],
     [r(["get", "list"], [""], ["pods"])], True),
    ([r(["get"], [""], ["pods"], names=["a"])], [r(["get"], [""], ["pods"])], False),
    ([r(["get"], [""], ["pods"])], [r(["get"], [""], ["pods"], names=["a"])], True),
    ([r(["get"], [""], ["pods"], names=["a", "b"])],
     [r(["get"], [""], ["pods"], names=["a"])], True),
    ([r(["get"], [""], ["*/status"])], [r(["get"], [""], ["pods/status"])], True),
    ([r(["get"], [""], ["*/status"])], [r(["get"], [""], ["pods"])], False),
    ([r(["get"], urls=["/logs/*"])], [r(["get"], urls=["/logs/a"])], True),
    ([r(["get"], urls=["/logs"])], [r(["get"], urls=["/logs/a"])], False),
    ([r(["get"], [""], ["pods"])], [r(["get"], urls=["/logs"])], False),
    ([], [], True),
])
def test_covers(owner: list[PolicyRule], servant: list[PolicyRule], covered: bool) -> None:
    assert covers(owner, servant) is covered


def test_uncovered_lists_the_atomic_rules_that_are_missing() -> None:
    missing = uncovered([r(["get"], [""], ["pods"])], [r(["get", "delete"], [""], ["pods"])])
    assert [str(m) for m in missing] == ['{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}']


def test_rule_round_trips_through_the_api_form() -> None:
    api = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}
    assert PolicyRule.from_api(api).to_api() == api
    assert PolicyRule.from_api({"verbs": ["get", 3], "resources": "x"}).to_api() == {
        "verbs": ["get"]}


@pytest.mark.parametrize(("method", "has_name", "watch", "verb"), [
    ("GET", True, False, "get"), ("GET", False, False, "list"), ("GET", False, True, "watch"),
    ("GET", True, True, "watch"), ("HEAD", True, False, "get"), ("POST", False, False, "create"),
    ("PUT", True, False, "update"), ("PATCH", True, False, "patch"),
    ("DELETE", True, False, "delete"), ("DELETE", False, False, "deletecollection"),
])
def test_resource_verb(method: str, has_name: bool, watch: bool, verb: str) -> None:
    assert resource_verb(method, has_name=has_name, watch=watch) == verb


@pytest.mark.parametrize(("attrs", "message"), [
    (res("list", "configmaps", ns="team"),
     'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in '
     'the namespace "team"'),
    (res("get", "leases", group="coordination.k8s.io", name="x", ns=""),
     'leases.coordination.k8s.io "x" is forbidden: User "bob" cannot get resource "leases" in '
     'API group "coordination.k8s.io" at the cluster scope'),
    (res("get", "pods", sub="log", name="p"),
     'pods "p" is forbidden: User "bob" cannot get resource "pods/log" in API group "" in the '
     'namespace "default"'),
    (url("get", "/metrics"), 'forbidden: User "bob" cannot get path "/metrics"'),
])
def test_forbidden_messages(attrs: Attributes, message: str) -> None:
    assert attrs.forbidden_message() == message
