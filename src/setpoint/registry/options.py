"""Options of read and write requests, parsed from the query (and body, for delete)."""

from __future__ import annotations

from dataclasses import dataclass, field

from setpoint.apimachinery import selectors
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


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOptions:
    dry_run: bool = False
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    grace_period_seconds: int | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None


@dataclass(slots=True)
class WriteResult:
    """What a write returns: the object as the client sees it, and any warnings."""

    object: dict[str, object]
    created: bool = False
    warnings: list[str] = field(default_factory=list)
