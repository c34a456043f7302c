"""Kubernetes' CEL authorizer library: ``authorizer.group(g).resource(r).check(verb)``.

Admission expressions may ask whether the requesting user may do something else::

    authorizer.group('apps').resource('deployments').namespace('ns').check('delete').allowed()
    authorizer.path('/healthz').check('get').reason()
    authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('list').allowed()

The receiver chain builds the attributes; ``check`` asks the server's authorizer (RBAC) and
returns a decision with ``allowed()``, ``reason()``, ``errored()`` and ``error()``. A check
costs :data:`CHECK_COST` units, as in Kubernetes, so at most two fit in one expression's
per-call limit.

Invariants: values are immutable (every builder call returns a new value); the authorizer is
synchronous and never does I/O, so a check cannot stall an expression. Not covered: the
``fieldSelector`` and ``labelSelector`` builders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final

from setpoint.auth.attributes import Attributes
from setpoint.auth.user import UserInfo
from setpoint.cel import types as t
from setpoint.cel.errors import NoSuchOverload
from setpoint.cel.functions import Function, Library, library, member
from setpoint.cel.objects import Opaque

#: Kubernetes' cost of one authorization check
CHECK_COST: Final = 350_000

AUTHORIZER: Final = t.opaque("kubernetes.authorization.Authorizer")
PATH_CHECK: Final = t.opaque("kubernetes.authorization.PathCheck")
GROUP_CHECK: Final = t.opaque("kubernetes.authorization.GroupCheck")
RESOURCE_CHECK: Final = t.opaque("kubernetes.authorization.ResourceCheck")
DECISION: Final = t.opaque("kubernetes.authorization.Decision")

#: ``authorize(attributes) -> (allowed, reason)``
Authorize = Callable[[Attributes], tuple[bool, str]]


@dataclass(frozen=True, slots=True, eq=False)
class Authorizer(Opaque):
    """The ``authorizer`` variable: the requesting user (or a ServiceAccount) and how to ask."""

    type_name: ClassVar[str] = "kubernetes.authorization.Authorizer"
    authorize: Authorize
    user: UserInfo


@dataclass(frozen=True, slots=True, eq=False)
class PathCheck(Opaque):
    type_name: ClassVar[str] = "kubernetes.authorization.PathCheck"
    authorizer: Authorizer
    path: str


@dataclass(frozen=True, slots=True, eq=False)
class ResourceCheck(Opaque):
    """A group (and, once ``resource`` was given, a resource) to check; a GroupCheck is one
    without a resource."""

    type_name: ClassVar[str] = "kubernetes.authorization.ResourceCheck"
    authorizer: Authorizer
    group: str
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Decision(Opaque):
    type_name: ClassVar[str] = "kubernetes.authorization.Decision"
    allowed: bool
    reason: str


def _string(value: Any) -> str:
    if type(value) is not str:
        raise NoSuchOverload()
    return value


def _path(a: Any, path: Any) -> PathCheck:
    if not isinstance(a, Authorizer):
        raise NoSuchOverload()
    return PathCheck(a, _string(path))


def _group(a: Any, group: Any) -> ResourceCheck:
    if not isinstance(a, Authorizer):
        raise NoSuchOverload()
    return ResourceCheck(a, _string(group))


def _service_account(a: Any, namespace: Any, name: Any) -> Authorizer:
    if not isinstance(a, Authorizer):
        raise NoSuchOverload()
    ns, n = _string(namespace), _string(name)
    user = UserInfo(f"system:serviceaccount:{ns}:{n}",
                    groups=("system:serviceaccounts", f"system:serviceaccounts:{ns}"))
    return Authorizer(a.authorize, user)


def _setter(field: str) -> Callable[[Any, Any], ResourceCheck]:
    def set_field(check: Any, value: Any) -> ResourceCheck:
        if not isinstance(check, ResourceCheck):
            raise NoSuchOverload()
        changes: dict[str, Any] = {field: _string(value)}
        return replace(check, **changes)
    return set_field


def _check(target: Any, verb: Any) -> Decision:
    v = _string(verb)
    if isinstance(target, PathCheck):
        attrs = Attributes(user=target.authorizer.user, verb=v, resource_request=False,
                           path=target.path)
        allowed, reason = target.authorizer.authorize(attrs)
    elif isinstance(target, ResourceCheck):
        attrs = Attributes(user=target.authorizer.user, verb=v, resource_request=True,
                           api_group=target.group, resource=target.resource,
                           subresource=target.subresource, namespace=target.namespace,
                           name=target.name)
        allowed, reason = target.authorizer.authorize(attrs)
    else:
        raise NoSuchOverload()
    return Decision(allowed, reason)


def _decision(getter: Callable[[Decision], Any]) -> Callable[[Any], Any]:
    def get(d: Any) -> Any:
        if not isinstance(d, Decision):
            raise NoSuchOverload()
        return getter(d)
    return get


def _check_cost(args: Sequence[Any], result: Any) -> int:
    return CHECK_COST


AUTHZ_LIBRARY: Final[Library] = library(
    Function("path", (member("authorizer_path", (AUTHORIZER, t.STRING), PATH_CHECK),), _path),
    Function("group", (member("authorizer_group", (AUTHORIZER, t.STRING), GROUP_CHECK),),
             _group),
    Function("serviceAccount", (member("authorizer_serviceaccount",
                                       (AUTHORIZER, t.STRING, t.STRING), AUTHORIZER),),
             _service_account),
    Function("resource", (member("groupcheck_resource", (GROUP_CHECK, t.STRING),
                                 RESOURCE_CHECK),), _setter("resource")),
    Function("subresource", (member("resourcecheck_subresource", (RESOURCE_CHECK, t.STRING),
                                    RESOURCE_CHECK),), _setter("subresource")),
    Function("namespace", (member("resourcecheck_namespace", (RESOURCE_CHECK, t.STRING),
                                  RESOURCE_CHECK),), _setter("namespace")),
    Function("name", (member("resourcecheck_name", (RESOURCE_CHECK, t.STRING),
                             RESOURCE_CHECK),), _setter("name")),
    Function("check", (member("pathcheck_check", (PATH_CHECK, t.STRING), DECISION),
                       member("resourcecheck_check", (RESOURCE_CHECK, t.STRING), DECISION)),
             _check, cost=_check_cost),
    Function("allowed", (member("decision_allowed", (DECISION,), t.BOOL),),
             _decision(lambda d: d.allowed)),
    Function("reason", (member("decision_reason", (DECISION,), t.STRING),),
             _decision(lambda d: d.reason)),
    Function("errored", (member("decision_errored", (DECISION,), t.BOOL),),
             _decision(lambda d: False)),
    Function("error", (member("decision_error", (DECISION,), t.STRING),),
             _decision(lambda d: "")),
)
