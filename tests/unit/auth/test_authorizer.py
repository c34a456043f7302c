"""The RBAC authorizer over the bootstrap policy and hand-made bindings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from setpoint.auth import user as users
from setpoint.auth.attributes import Attributes
from setpoint.auth.rbac import bootstrap
from setpoint.auth.rbac.aggregation import aggregated_rules
from setpoint.auth.rbac.authorizer import (
    AuthorizerChain,
    Decision,
    PrivilegedGroupAuthorizer,
    RBACAuthorizer,
)
from setpoint.auth.user import UserInfo

Obj = Mapping[str, Any]


class Source:
    def __init__(self, objects: Iterable[Obj]) -> None:
        self.objects = list(objects)

    def _of(self, kind: str) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == kind]

    def cluster_role(self, name: str) -> Obj | None:
        return next((o for o in self._of("ClusterRole") if o["metadata"]["name"] == name), None)

    def role(self, namespace: str, name: str) -> Obj | None:
        return next((o for o in self._of("Role") if o["metadata"]["name"] == name
                     and o["metadata"]["namespace"] == namespace), None)

    def cluster_role_bindings(self) -> Iterable[Obj]:
        return self._of("ClusterRoleBinding")

    def role_bindings(self, namespace: str) -> Iterable[Obj]:
        return [o for o in self._of("RoleBinding") if o["metadata"]["namespace"] == namespace]


def bootstrapped(*extra: Obj) -> Source:
    roles = bootstrap.cluster_roles()
    for role in roles:  # what the aggregation controller would write
        rules = aggregated_rules(role, roles)
        if rules is not None:
            role["rules"] = rules
    # aggregation is transitive: view feeds edit feeds admin, so settle it
    for _ in range(3):
        for role in roles:
            rules = aggregated_rules(role, roles)
            if rules is not None:
                role["rules"] = rules
    return Source([*roles, *bootstrap.cluster_role_bindings(), *extra])


def role_binding(namespace: str, name: str, role_kind: str, role: str,
                 subjects: list[dict[str, str]]) -> Obj:
    return {"kind": "RoleBinding", "metadata": {"namespace": namespace, "name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role}, "subjects": subjects}


SA = UserInfo(users.service_account_username("team", "reader"), "u1",
              (*users.service_account_groups("team"), users.ALL_AUTHENTICATED))


def can(source: Source, user: UserInfo, verb: str, resource: str, ns: str = "",
        group: str = "", name: str = "", sub: str = "") -> bool:
    chain = AuthorizerChain(PrivilegedGroupAuthorizer(), RBACAuthorizer(source))
    return chain.authorize(Attributes(user=user, verb=verb, resource_request=True,
                                      namespace=ns, api_group=group, resource=resource,
                                      name=name, subresource=sub)).allowed


def test_a_service_account_bound_to_view_in_one_namespace_reads_there_only() -> None:
    source = bootstrapped(role_binding("team", "readers", "ClusterRole", "view", [
        {"kind": "ServiceAccount", "name": "reader", "namespace": "team"}]))
    assert can(source, SA, "list", "configmaps", "team")
    assert can(source, SA, "watch", "configmaps", "team")
    assert not can(source, SA, "list", "configmaps", "other")
    assert not can(source, SA, "list", "configmaps")  # cluster scope
    assert not can(source, SA, "create", "configmaps", "team")
    assert not can(source, SA, "list", "secrets", "team")  # view never reads secrets
    assert not can(source, SA, "list", "roles", "team", group="rbac.authorization.k8s.io")


def test_aggregation_makes_admin_a_superset_of_edit_and_edit_of_view() -> None:
    source = bootstrapped()
    admin = {str(r) for r in _rules(source, "admin")}
    edit = {str(r) for r in _rules(source, "edit")}
    view = {str(r) for r in _rules(source, "view")}
    assert view
    assert view <= edit <= admin
    assert any("secrets" in r for r in edit - view)
    assert any("rolebindings" in r for r in admin - edit)


def _rules(source: Source, name: str) -> list[Any]:
    role = source.cluster_role(name)
    assert role is not None
    return list(role["rules"])


def test_system_masters_may_do_anything_even_without_bindings() -> None:
    admin = UserInfo("system:admin", groups=(users.SYSTEM_MASTERS, users.ALL_AUTHENTICATED))
    assert can(Source([]), admin, "delete", "anything", "ns", group="x.io")


def test_role_binding_to_a_missing_role_grants_nothing_and_reports_it() -> None:
    source = Source([role_binding("team", "b", "Role", "absent", [
        {"kind": "User", "name": "bob"}])])
    authorizer = RBACAuthorizer(source)
    rules, errs = authorizer.resolver.rules_for(UserInfo("bob"), "team")
    assert rules == []
    assert errs == ['role.rbac.authorization.k8s.io "absent" not found']


def test_allowed_reason_names_binding_role_and_subject() -> None:
    source = bootstrapped(role_binding("team", "readers", "ClusterRole", "view", [
        {"kind": "Group", "name": "devs"}]))
    verdict = RBACAuthorizer(source).authorize(Attributes(
        user=UserInfo("bob", groups=("devs",)), verb="get", resource_request=True,
        resource="pods", namespace="team", name="p"))
    assert verdict.decision is Decision.ALLOW
    assert verdict.reason == ('RBAC: allowed by RoleBinding "readers" of ClusterRole "view" '
                              'to Group "devs"')


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/version"])
def test_public_info_is_open_to_anonymous(path: str) -> None:
    chain = RBACAuthorizer(bootstrapped())
    attrs = Attributes(user=users.anonymous(), verb="get", resource_request=False, path=path)
    assert chain.authorize(attrs).allowed


def test_anonymous_gets_no_discovery() -> None:
    attrs = Attributes(user=users.anonymous(), verb="get", resource_request=False, path="/api")
    assert not RBACAuthorizer(bootstrapped()).authorize(attrs).allowed


def test_every_authenticated_user_may_ask_about_themselves() -> None:
    bob = UserInfo("bob", groups=(users.ALL_AUTHENTICATED,))
    source = bootstrapped()
    assert can(source, bob, "create", "selfsubjectaccessreviews", group="authorization.k8s.io")
    assert can(source, bob, "create", "selfsubjectreviews", group="authentication.k8s.io")
    assert not can(source, bob, "create", "subjectaccessreviews", group="authorization.k8s.io")


def test_controllers_hold_what_they_need() -> None:
    source = bootstrapped()
    name, groups = bootstrap.controller_user("garbagecollector")
    gc = UserInfo(name, groups=(*groups, users.ALL_AUTHENTICATED))
    assert can(source, gc, "delete", "widgets", "ns", group="example.com")
    assert not can(source, gc, "create", "widgets", "ns", group="example.com")
