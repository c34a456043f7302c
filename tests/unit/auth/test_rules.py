"""RBAC rule matching and coverage, as Kubernetes' evaluation helpers and comparator decide."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.auth.attributes import Attributes, resource_verb
from setpoint.auth.rbac.rules import (
    MAX_BREAKDOWN_WORK,
    BreakdownTooLarge,
    PolicyRule,
    atoms,
    breakdown,
    covers,
    rule_covers,
    uncovered,
)
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


# --- the breakdown's cost -------------------------------------------------------------------------

def _uncovered_atom_by_atom(owner: list[PolicyRule], servant: list[PolicyRule]) -> list[str]:
    """The definition: every atom of every servant rule, checked against each owner rule."""
    missing: list[str] = []
    for rule in servant:
        for atom in breakdown(rule):
            if not any(rule_covers(o, atom) for o in owner) and str(atom) not in missing:
                missing.append(str(atom))
    return missing


_WORDS = st.lists(st.sampled_from(["*", "a", "b", "c"]), max_size=3)
_RESOURCES = st.lists(st.sampled_from(["*", "pods", "pods/log", "*/log", "nodes"]), max_size=3)
_URLS = st.lists(st.sampled_from(["/a", "/a/*", "/a/b", "*"]), max_size=2)
_RULES = st.builds(lambda v, g, res, n, u: r(v, g, res, names=n, urls=u),
                   _WORDS, _WORDS, _RESOURCES, _WORDS, _URLS)


@given(st.lists(_RULES, max_size=4), st.lists(_RULES, max_size=4))
def test_uncovered_is_every_atom_checked(owner: list[PolicyRule],
                                         servant: list[PolicyRule]) -> None:
    found = [str(m) for m in uncovered(owner, servant, max_work=None)]
    assert found == _uncovered_atom_by_atom(owner, servant)


def test_a_rule_held_whole_is_not_broken_down() -> None:
    # a billion atoms, covered by one owner rule: nothing to compare one by one
    huge = r([f"v{i}" for i in range(1000)], [f"g{i}" for i in range(1000)],
             [f"r{i}" for i in range(1000)])
    assert atoms(huge) == 10**9
    assert uncovered([r(["*"], ["*"], ["*"])], [huge], max_work=0) == []


def test_breaking_down_rules_held_piecewise_is_bounded() -> None:
    # one rule of 80 verbs, resources and names broke down into 512,000 atoms (2.4 s)
    rule = r([f"v{i}" for i in range(80)], [""], [f"r{i}" for i in range(80)],
             names=[f"n{i}" for i in range(80)])
    owner = [r(["v0"], [""], ["*"]), r(["*"], [""], ["r0"])]
    with pytest.raises(BreakdownTooLarge) as caught:
        uncovered(owner, [rule])
    assert caught.value.limit == MAX_BREAKDOWN_WORK
    assert str(caught.value) == (
        "the rules that no single rule held covers whole break down into too many single "
        "permissions to compare (at most 100000 comparisons)")
    # the work is the atoms times the owner rules (and one): 8,000 atoms here fit
    small = r([f"v{i}" for i in range(20)], [""], [f"r{i}" for i in range(20)],
              names=[f"n{i}" for i in range(20)])
    assert atoms(small) * (len(owner) + 1) <= MAX_BREAKDOWN_WORK
    assert len(uncovered(owner, [small])) == 8000 - 20 * 20 - 20 * 20 + 20


class _CountedStr(str):
    """A string that counts how often it is compared for equality."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountedStr.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_long_lists_are_compared_as_sets() -> None:
    # an owner rule of n verbs against a servant rule of n verbs compared each with each
    n = 5_000
    verbs = [_CountedStr(f"v{i}") for i in range(n)]
    owner = r(list(reversed(verbs)), [""], ["pods"])
    _CountedStr.compared = 0
    assert rule_covers(owner, r(verbs, [""], ["pods"]))
    assert _CountedStr.compared <= 4 * n
