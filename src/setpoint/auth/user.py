"""Identities: the ``user.Info`` of Kubernetes' authentication, and its well-known names.

Invariants: a :class:`UserInfo` is immutable; ``groups`` keeps the order it was built with
(Kubernetes prints groups in that order) and holds no duplicates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: members of this group are authorized for everything (kube-apiserver's privileged group)
SYSTEM_MASTERS: Final = "system:masters"
ALL_AUTHENTICATED: Final = "system:authenticated"
ALL_UNAUTHENTICATED: Final = "system:unauthenticated"
ANONYMOUS: Final = "system:anonymous"
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP: Final = "system:serviceaccounts"
NODES_GROUP: Final = "system:nodes"
#: a node agent's user is this prefix and the node's name (``system:node:worker-1``)
NODE_PREFIX: Final = "system:node:"


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: dict[str, None] = dict.fromkeys(self.groups)
        if len(seen) != len(self.groups):
            object.__setattr__(self, "groups", tuple(seen))

    def with_groups(self, extra_groups: Iterable[str]) -> UserInfo:
        """This user with ``extra_groups`` appended (those it already has are not repeated)."""
        return UserInfo(self.name, self.uid, (*self.groups, *extra_groups), self.extra)

    @property
    def is_anonymous(self) -> bool:
        return self.name == ANONYMOUS

    def to_api(self) -> dict[str, Any]:
        """The ``authentication.k8s.io/v1`` UserInfo object."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in sorted(self.extra.items())}
        return out


def anonymous() -> UserInfo:
    return UserInfo(ANONYMOUS, groups=(ALL_UNAUTHENTICATED,))


def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def split_service_account(username: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a service-account user name, or None for any other user."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    rest = username[len(SERVICE_ACCOUNT_PREFIX):]
    namespace, sep, name = rest.partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}")
