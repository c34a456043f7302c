"""What a request does, in the terms authorization decides on (``authorizer.Attributes``).

A resource request names a verb (``get list watch create update patch delete
deletecollection``, or a special one such as ``impersonate``, ``bind``, ``escalate``), an API
group, a resource, perhaps a subresource, a namespace and a name. Any other request is a
non-resource request: its verb is the lower-cased HTTP method and it names a path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from setpoint.apimachinery import errors
from setpoint.apimachinery.selectors import FieldSelector
from setpoint.auth.user import UserInfo

READ_VERBS: Final = frozenset({"get", "list", "watch"})

_METHOD_VERBS: Final = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
                        "PATCH": "patch", "DELETE": "delete"}


def resource_verb(method: str, *, has_name: bool, watch: bool) -> str:
    """The verb of a resource request, as Kubernetes' RequestInfoFactory derives it.

    >>> resource_verb("GET", has_name=False, watch=False)
    'list'
    >>> resource_verb("DELETE", has_name=False, watch=False)
    'deletecollection'
    """
    verb = _METHOD_VERBS.get(method.upper(), method.lower())
    if watch and verb == "get":
        return "watch"
    if not has_name:
        if verb == "get":
            return "list"
        if verb == "delete":
            return "deletecollection"
    return verb


def name_of_selection(field_selector: str) -> str:
    """The object a list or watch selects with ``metadata.name=NAME``, as Kubernetes'
    RequestInfoFactory names it (so that the Node authorizer and RBAC's ``resourceNames``
    judge it as a request for that one object); ``""`` when it selects no single name, the
    selector does not parse, or the name is not a valid path segment.

    >>> name_of_selection("metadata.name=kube-root-ca.crt")
    'kube-root-ca.crt'
    >>> name_of_selection("metadata.name!=a"), name_of_selection("metadata.name=a/b")
    ('', '')
    """
    try:
        selector = FieldSelector.parse(field_selector)
    except errors.ApiError:
        return ""
    name = selector.exact_match("metadata.name") or ""
    if name in (".", "..") or "/" in name or "%" in name:
        return ""
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class Attributes:
    user: UserInfo
    verb: str
    resource_request: bool
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @property
    def is_read_only(self) -> bool:
        return self.verb in READ_VERBS

    def describe(self) -> str:
        """What the request tried, as Kubernetes' forbidden messages word it.

        >>> from setpoint.auth.user import UserInfo
        >>> Attributes(user=UserInfo("bob"), verb="list", resource_request=True,
        ...            resource="configmaps", namespace="ns").describe()
        'User "bob" cannot list resource "configmaps" in API group "" in the namespace "ns"'
        """
        if not self.resource_request:
            return f'User "{self.user.name}" cannot {self.verb} path "{self.path}"'
        resource = self.resource
        if self.subresource:
            resource = f"{resource}/{self.subresource}"
        text = (f'User "{self.user.name}" cannot {self.verb} resource "{resource}" in API '
                f'group "{self.api_group}"')
        if self.namespace:
            return f'{text} in the namespace "{self.namespace}"'
        return f"{text} at the cluster scope"

    def forbidden_message(self, reason: str = "") -> str:
        """The whole message of a 403, with the authorizer's reason when it gave one."""
        if self.resource_request:
            what = self.resource
            if self.api_group:
                what = f"{what}.{self.api_group}"
            subject = f'{what} "{self.name}"' if self.name else what
            text = f"{subject} is forbidden: {self.describe()}"
        else:
            text = f"forbidden: {self.describe()}"
        return f"{text}: {reason}" if reason else text
