"""Options of read and write requests, parsed from the query (and body, for delete)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from setpoint.apimachinery import selectors
from setpoint.apimachinery.typed import TypeSpec
from setpoint.auth.user import UserInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOptions:
    label_selector: selectors.LabelSelector | None = None
    field_selector: selectors.FieldSelector | None = None
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions:
    label_selector: selectors.LabelSelector | None = None
    field_selector: selectors.FieldSelector | None = None
    resource_version: str = ""
    send_initial_events: bool | None = None
    allow_bookmarks: bool = False
    timeout_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    dry_run: bool = False
    field_manager: str = ""
    #: Strict, Warn or Ignore
    field_validation: str = "Warn"
    force: bool = False
    #: who asks for the write (None: the server itself, trusted)
    user: UserInfo | None = None
    #: where admission leaves its warnings and audit annotations (None: nowhere)
    sink: AdmissionSink | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOptions:
    dry_run: bool = False
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    grace_period_seconds: int | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    #: who asks for the deletion (None: the server itself, trusted)
    user: UserInfo | None = None
    #: where admission leaves its warnings and audit annotations (None: nowhere)
    sink: AdmissionSink | None = None


@dataclass(slots=True)
class AdmissionSink:
    """What admission of one request reports besides its verdict: ``Warning`` headers for the
    response and annotations for the request's audit event. One per request; a plain
    holder, owned by the request's handler."""

    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class AdmissionAttributes:
    """One write as admission sees it (Kubernetes' ``admission.Attributes``).

    ``operation`` is ``CREATE``, ``UPDATE`` or ``DELETE``; ``version`` is the version of the
    request (the objects admission gets are in it); ``options`` is the request's
    ``CreateOptions``/``UpdateOptions``/``DeleteOptions`` object. ``await convert(obj,
    version)`` gives an object of this resource in another of its versions (a new one, the
    caller's; through the CRD's conversion webhook where it has one).
    """

    operation: str
    group: str
    version: str
    resource: str
    kind: str
    subresource: str
    namespace: str
    name: str
    namespaced: bool
    user: UserInfo | None
    dry_run: bool
    options: dict[str, Any]
    sink: AdmissionSink | None
    #: every version the resource is served in (matchPolicy Equivalent)
    versions: tuple[str, ...] = ()
    convert: Callable[[dict[str, Any], str], Awaitable[dict[str, Any]]] | None = None
    #: prune, default and validate the new object again after a hook changed it in place
    #: (mutating admission); raises the store's 422
    revalidate: Callable[[dict[str, Any]], None] | None = None
    #: how objects of a version merge (server-side apply's type: apply configurations of
    #: MutatingAdmissionPolicies)
    field_type: Callable[[str], TypeSpec] | None = None
    #: what one hook leaves for a later one of the same request
    state: dict[str, Any] = field(default_factory=dict, repr=False)
    #: objects converted by :meth:`in_version` with ``keep``, per version
    converted: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = field(
        default_factory=dict, repr=False)

    async def in_version(self, new: dict[str, Any] | None, old: dict[str, Any] | None,
                         version: str, *, keep: bool = True
                         ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """``new`` and ``old`` in ``version`` (themselves in the request's version). With
        ``keep`` the converted pair is remembered and given to every later call for that
        version: only for objects no hook changes any more (the policies and the validating
        webhooks, which run after mutation, share one conversion per version)."""
        if version == self.version or self.convert is None:
            return new, old
        if keep and version in self.converted:
            return self.converted[version]
        convert = self.convert
        pair = (await convert(new, version) if new is not None else None,
                await convert(old, version) if old is not None else None)
        if keep:
            self.converted[version] = pair
        return pair

    def warn(self, text: str) -> None:
        if self.sink is not None:
            self.sink.warnings.append(text)

    def annotate(self, key: str, value: str) -> None:
        if self.sink is not None:
            self.sink.annotations.setdefault(key, value)


@dataclass(slots=True)
class WriteResult:
    """What a write returns: the object as the client sees it, and any warnings."""

    object: dict[str, object]
    created: bool = False
    warnings: list[str] = field(default_factory=list)
