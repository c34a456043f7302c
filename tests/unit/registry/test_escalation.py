"""Escalation prevention on role and binding writes."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.auth import user as users
from setpoint.auth.rbac.authorizer import AuthorizerChain, PrivilegedGroupAuthorizer, RBACAuthorizer
from setpoint.auth.user import UserInfo
from setpoint.registry import escalation
from tests.unit.auth.test_authorizer import Source, bootstrapped, role_binding

BOB = UserInfo("bob", groups=(users.ALL_AUTHENTICATED,))


def role(rules: list[dict[str, Any]], name: str = "r", **extra: Any) -> dict[str, Any]:
    return {"kind": "Role", "metadata": {"name": name, "namespace": "team"}, "rules": rules,
            **extra}


@pytest.fixture
def source() -> Source:
    # bob may edit in team (not secrets' deletion elsewhere), and manage roles there
    return bootstrapped(
        role_binding("team", "bob-edit", "ClusterRole", "edit", [
            {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]),
        role_binding("team", "bob-roles", "Role", "role-admin", [
            {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]),
        {"kind": "Role", "metadata": {"name": "role-admin", "namespace": "team"}, "rules": [
            {"verbs": ["create", "get", "list", "update", "patch", "delete"],
             "apiGroups": ["rbac.authorization.k8s.io"],
             "resources": ["roles", "rolebindings"]}]})  # "*" would include escalate


def check_role(source: Source, user: UserInfo, obj: dict[str, Any],
               resource: str = "roles", namespace: str = "team") -> None:
    authorizer = AuthorizerChain(PrivilegedGroupAuthorizer(), RBACAuthorizer(source))
    escalation.check_role(user, obj, resource=resource, namespace=namespace,
                          authorizer=authorizer, resolver=RBACAuthorizer(source).resolver)


def check_binding(source: Source, user: UserInfo, obj: dict[str, Any]) -> None:
    authorizer = AuthorizerChain(PrivilegedGroupAuthorizer(), RBACAuthorizer(source))

    def lookup(kind: str, namespace: str, name: str) -> Any:
        return source.role(namespace, name) if kind == "Role" else source.cluster_role(name)

    escalation.check_binding(user, obj, resource="rolebindings", namespace="team",
                             authorizer=authorizer, resolver=RBACAuthorizer(source).resolver,
                             lookup=lookup)


def test_a_role_within_what_one_holds_may_be_written(source: Source) -> None:
    check_role(source, BOB, role([{"verbs": ["get", "list"], "apiGroups": [""],
                                   "resources": ["configmaps", "secrets"]}]))


def test_a_role_granting_more_is_refused_with_the_missing_rules(source: Source) -> None:
    with pytest.raises(errors.Forbidden) as caught:
        check_role(source, BOB, role([{"verbs": ["get", "create"], "apiGroups": [""],
                                       "resources": ["nodes"]}]))
    assert caught.value.message == (
        'roles.rbac.authorization.k8s.io "r" is forbidden: user "bob" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not '
        'currently held:\n{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}\n'
        '{APIGroups:[""], Resources:["nodes"], Verbs:["create"]}')
    assert caught.value.status_code == 403


def test_rules_held_in_another_namespace_do_not_count(source: Source) -> None:
    with pytest.raises(errors.Forbidden):
        check_role(source, BOB, role([{"verbs": ["get"], "apiGroups": [""],
                                       "resources": ["configmaps"]}]), namespace="other")


def test_binding_a_role_one_holds_is_allowed_and_cluster_admin_is_not(source: Source) -> None:
    check_binding(source, BOB, role_binding("team", "b", "ClusterRole", "view", [
        {"kind": "User", "name": "eve"}]))
    with pytest.raises(errors.Forbidden, match="not currently held"):
        check_binding(source, BOB, role_binding("team", "b", "ClusterRole", "cluster-admin", [
            {"kind": "User", "name": "eve"}]))
    with pytest.raises(errors.Forbidden,
                       match=r'clusterrole\.rbac\.authorization\.k8s\.io "nope" not found'):
        check_binding(source, BOB, role_binding("team", "b", "ClusterRole", "nope", []))


def test_the_bind_and_escalate_verbs_lift_the_check() -> None:
    grants = {"kind": "ClusterRole", "metadata": {"name": "binder"}, "rules": [
        {"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["clusterroles"], "resourceNames": ["cluster-admin"]},
        {"verbs": ["escalate"], "apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["roles"]}]}
    source = bootstrapped(grants, role_binding("team", "bob-binder", "ClusterRole", "binder", [
        {"kind": "User", "name": "bob"}]))
    check_binding(source, BOB, role_binding("team", "b", "ClusterRole", "cluster-admin", []))
    check_role(source, BOB, role([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]))


def test_aggregated_cluster_roles_need_escalate_and_masters_need_nothing(source: Source
                                                                         ) -> None:
    aggregated = {"kind": "ClusterRole", "metadata": {"name": "agg"}, "rules": [],
                  "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}}
    with pytest.raises(errors.Forbidden, match="cluster-admin privileges"):
        check_role(source, BOB, aggregated, resource="clusterroles", namespace="")
    admin = UserInfo("root", groups=(users.SYSTEM_MASTERS,))
    check_role(source, admin, aggregated, resource="clusterroles", namespace="")


def test_a_role_too_costly_to_confirm_is_refused_at_once(source: Source) -> None:
    # 80 verbs, resources and names: 512,000 single permissions, compared one by one with
    # each rule bob holds, held the event loop for seconds; now refused before that
    many = role([{"verbs": [f"v{i}" for i in range(80)], "apiGroups": [""],
                  "resources": [f"r{i}" for i in range(80)],
                  "resourceNames": [f"n{i}" for i in range(80)]}])
    with pytest.raises(errors.Forbidden) as caught:
        check_role(source, BOB, many)
    assert caught.value.message == (
        'roles.rbac.authorization.k8s.io "r" is forbidden: user "bob" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not '
        "currently held: cannot confirm it: the rules that no single rule held covers whole "
        "break down into too many single permissions to compare (at most 100000 "
        "comparisons)")
    # a rule as long, held whole by one of bob's rules, is confirmed without a breakdown
    check_role(source, BOB, role([{"verbs": ["get"], "apiGroups": [""],
                                   "resources": ["configmaps"],
                                   "resourceNames": [f"n{i}" for i in range(100_000)]}]))
