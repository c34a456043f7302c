"""Resources and subresources that answer a request instead of storing an object.

The review APIs (``selfsubjectaccessreviews``, ``tokenreviews``, ...) take a body and answer
it; ``serviceaccounts/token`` takes a TokenRequest and answers it with a token. An
:class:`Action` is such an answer: it gets the request's namespace, name, body and requester,
and returns the response body (the server answers 201 Created, as Kubernetes does).
A :class:`Reader` answers ``get`` and ``list`` of a resource that is computed rather than
stored (``metrics.k8s.io``): it gets the namespace, name (empty for a list) and selectors.

Invariants: an action never writes storage unless its own code does so through a store; an
action raises :class:`~setpoint.apimachinery.errors.ApiError` for every refusal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from setpoint.auth.user import UserInfo
from setpoint.registry.resources import ResourceInfo

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRequest:
    namespace: str | None
    name: str
    body: Any
    user: UserInfo
    dry_run: bool = False


Action = Callable[[ActionRequest], Awaitable[Obj]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadRequest:
    namespace: str | None
    #: empty for a list
    name: str
    label_selector: str = ""
    field_selector: str = ""
    user: UserInfo


Reader = Callable[[ReadRequest], Awaitable[Obj]]


@dataclass(frozen=True, slots=True)
class VirtualResource:
    """A resource answered rather than stored: ``create`` by ``create`` (the reviews), or
    ``get`` and ``list`` by ``read`` (never watch)."""

    info: ResourceInfo
    create: Action | None = None
    read: Reader | None = None
