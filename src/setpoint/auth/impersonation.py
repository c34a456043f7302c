"""Acting as someone else: the ``Impersonate-*`` headers, as kube-apiserver reads them.

``Impersonate-User`` names the user (a ``system:serviceaccount:<ns>:<name>`` user is checked
as the ServiceAccount), ``Impersonate-Group`` (repeatable) the groups,
``Impersonate-Uid`` the uid and ``Impersonate-Extra-<key>`` (repeatable, key percent-encoded)
the extra fields. :func:`requests` lists what the requester must be allowed to
``impersonate`` for each; :func:`impersonated` is the user the request then runs as.

Invariants: groups, uid or extras without a user are refused (400), and so is an
``Impersonate-*`` value that is not UTF-8 (an identity is never a guess at what undecodable
bytes meant); an impersonated user
other than ``system:anonymous`` is in ``system:authenticated``; a ServiceAccount impersonated
without groups gets its fixed groups.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from setpoint.auth import user as users
from setpoint.auth.attributes import Attributes
from setpoint.auth.user import UserInfo

USER = "impersonate-user"
GROUP = "impersonate-group"
UID = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
PREFIX = "impersonate-"


class ImpersonationError(ValueError):
    """The headers are inconsistent (400)."""


@dataclass(frozen=True, slots=True)
class Wanted:
    name: str
    groups: tuple[str, ...]
    uid: str
    extra: Mapping[str, tuple[str, ...]]
    groups_given: bool


def parse(headers: Iterable[tuple[str, str]]) -> Wanted | None:
    """The impersonation asked for by ``headers`` (name, value pairs), or None."""
    name: str | None = None
    groups: list[str] = []
    uid: str | None = None
    extra: dict[str, list[str]] = {}
    for key, value in headers:
        lower = key.lower()
        if lower.startswith(PREFIX) and not _utf8(value):
            raise ImpersonationError(f"{key}: the value is not valid UTF-8")
        if lower == USER:
            if name is not None and name != value:
                raise ImpersonationError("only one Impersonate-User header may be given")
            name = value
        elif lower == GROUP:
            groups.append(value)
        elif lower == UID:
            uid = value
        elif lower.startswith(EXTRA_PREFIX):
            extra_key = urllib.parse.unquote(lower[len(EXTRA_PREFIX):])
            if not extra_key:
                raise ImpersonationError("an Impersonate-Extra- header needs a key")
            extra.setdefault(extra_key, []).append(value)
    if name is None:
        if groups or uid is not None or extra:
            raise ImpersonationError(
                "requested impersonation of groups, uid or extra fields without impersonating "
                "a user")
        return None
    if not name:
        raise ImpersonationError("Impersonate-User may not be empty")
    return Wanted(name, tuple(groups), uid or "",
                  {k: tuple(v) for k, v in extra.items()}, bool(groups))


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # the surrogates undecodable header bytes are read as
        return False
    return True


def requests(requester: UserInfo, wanted: Wanted) -> list[Attributes]:
    """What ``requester`` must be allowed to ``impersonate``, one check each."""
    checks: list[Attributes] = []
    account = users.split_service_account(wanted.name)
    if account is not None:
        namespace, name = account
        checks.append(Attributes(user=requester, verb="impersonate", resource_request=True,
                                 resource="serviceaccounts", namespace=namespace, name=name,
                                 api_version="v1"))
    else:
        checks.append(Attributes(user=requester, verb="impersonate", resource_request=True,
                                 resource="users", name=wanted.name, api_version="v1"))
    for group in wanted.groups:
        checks.append(Attributes(user=requester, verb="impersonate", resource_request=True,
                                 resource="groups", name=group, api_version="v1"))
    if wanted.uid:
        checks.append(Attributes(user=requester, verb="impersonate", resource_request=True,
                                 api_group="authentication.k8s.io", api_version="v1",
                                 resource="uids", name=wanted.uid))
    for key, values in sorted(wanted.extra.items()):
        for value in values:
            checks.append(Attributes(user=requester, verb="impersonate", resource_request=True,
                                     api_group="authentication.k8s.io", api_version="v1",
                                     resource="userextras", subresource=key, name=value))
    return checks


def impersonated(wanted: Wanted) -> UserInfo:
    groups = list(wanted.groups)
    account = users.split_service_account(wanted.name)
    if account is not None and not wanted.groups_given:
        groups.extend(users.service_account_groups(account[0]))
    if wanted.name == users.ANONYMOUS:
        if users.ALL_UNAUTHENTICATED not in groups:
            groups.append(users.ALL_UNAUTHENTICATED)
    elif users.ALL_AUTHENTICATED not in groups:
        groups.append(users.ALL_AUTHENTICATED)
    return UserInfo(wanted.name, wanted.uid, tuple(groups), wanted.extra)
