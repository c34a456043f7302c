"""Escalation prevention: nobody grants permissions they do not hold.

Writing a Role or ClusterRole is allowed when the requester may ``escalate`` on that kind, or
holds every rule the role grants (in the role's namespace; cluster-wide for ClusterRoles).
An aggregated ClusterRole needs ``escalate``: its rules are whatever the selected roles hold.
Writing a RoleBinding or ClusterRoleBinding is allowed when the requester may ``bind`` the
referenced role, or holds every rule of it. Members of ``system:masters`` may do anything.

The messages are Kubernetes': ``user "bob" (groups=["a" "b"]) is attempting to grant RBAC
permissions not currently held:`` followed by the missing rules, one per line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from setpoint.apimachinery import errors
from setpoint.auth import user as users
from setpoint.auth.attributes import Attributes
from setpoint.auth.rbac.authorizer import Authorizer, RuleResolver
from setpoint.auth.rbac.rules import BreakdownTooLarge, PolicyRule, uncovered
from setpoint.auth.user import UserInfo

Obj = Mapping[str, Any]
GROUP = "rbac.authorization.k8s.io"
#: finds a role by (kind, namespace, name); None when it does not exist
RoleLookup = Callable[[str, str, str], Obj | None]


def _go_strings(values: tuple[str, ...]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _rules(obj: Obj) -> list[PolicyRule]:
    rules = obj.get("rules")
    return [PolicyRule.from_api(r) for r in rules if isinstance(r, dict)] \
        if isinstance(rules, list) else []


def _allowed(authorizer: Authorizer, user: UserInfo, verb: str, resource: str,
             namespace: str, name: str) -> bool:
    return authorizer.authorize(Attributes(user=user, verb=verb, resource_request=True,
                                           api_group=GROUP, api_version="v1",
                                           resource=resource, namespace=namespace,
                                           name=name)).allowed


def _confirm(user: UserInfo, resolver: RuleResolver, namespace: str, rules: list[PolicyRule],
             resource: str, name: str) -> None:
    held, problems = resolver.rules_for(user, namespace)
    attempting = (f'user "{user.name}" (groups={_go_strings(user.groups)}) is attempting to '
                  "grant RBAC permissions not currently held:")
    try:
        missing = uncovered(held, rules)
    except BreakdownTooLarge as e:
        # not confirmed within the bound is not confirmed: refused as an escalation would
        # be, at once; the "escalate" verb (or "bind" for a binding) still allows it
        raise _forbidden(resource, name, f"{attempting} cannot confirm it: {e}") from e
    if not missing:
        return
    message = attempting + "\n" + "\n".join(str(rule) for rule in missing)
    if problems:
        message += f"; resolution errors: [{', '.join(problems)}]"
    raise _forbidden(resource, name, message)


def _forbidden(resource: str, name: str, message: str) -> errors.Forbidden:
    return errors.Forbidden(f'{resource}.{GROUP} "{name}" is forbidden: {message}',
                            details={"name": name, "group": GROUP, "kind": resource})


def check_role(user: UserInfo, obj: Obj, *, resource: str, namespace: str,
               authorizer: Authorizer, resolver: RuleResolver) -> None:
    """Raise 403 unless ``user`` may write the role ``obj`` (``roles`` or ``clusterroles``)."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    if users.SYSTEM_MASTERS in user.groups or _allowed(authorizer, user, "escalate", resource,
                                                       namespace, name):
        return
    if resource == "clusterroles" and obj.get("aggregationRule") is not None:
        raise _forbidden(resource, name,
                         "must have cluster-admin privileges to use the aggregationRule")
    _confirm(user, resolver, namespace, _rules(obj), resource, name)


def check_binding(user: UserInfo, obj: Obj, *, resource: str, namespace: str,
                  authorizer: Authorizer, resolver: RuleResolver, lookup: RoleLookup) -> None:
    """Raise 403 unless ``user`` may bind the role ``obj`` refers to."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    if users.SYSTEM_MASTERS in user.groups:
        return
    ref = obj.get("roleRef") or {}
    kind = str(ref.get("kind", ""))
    role_name = str(ref.get("name", ""))
    role_resource = "roles" if kind == "Role" else "clusterroles"
    if _allowed(authorizer, user, "bind", role_resource, namespace, role_name):
        return
    role = lookup(kind, namespace if kind == "Role" else "", role_name)
    if role is None:
        raise _forbidden(resource, name, f'{kind.lower()}.{GROUP} "{role_name}" not found')
    _confirm(user, resolver, namespace, _rules(role), resource, name)
