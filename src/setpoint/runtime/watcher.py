"""List-then-watch as an explicit, pure state machine.

The protocol (client-go's reflector, kube-rs's watcher): list everything, page by page, then
watch for changes from the list's resourceVersion; on ``410 Gone`` (the server no longer has
history that old) list again; on any other failure wait and re-watch from the last
resourceVersion seen. Output is kube-rs's event vocabulary:

- ``Init``: a (re)list starts; a store begins buffering.
- ``InitApply(obj)``: one object of the list.
- ``InitDone``: the list is complete; a store swaps its buffer in atomically, and objects it
  held that are absent from the list were deleted meanwhile.
- ``Apply(obj)`` / ``Delete(obj)``: a change seen on the watch.
- ``Resync``: the resync period passed (an addition to kube-rs's vocabulary): a store
  replays what it holds, as client-go's resync does. Nothing is re-listed.

:func:`step` is pure: ``step(state, input) -> Step(events, state, action)``. The *input* is
what the driver observed (a list page, a watch event, an error, the stream's end, a timer);
the *action* tells the driver what to do next (list a page, start a watch, read the next
event, or first wait out a backoff). States::

    Empty ──first page──▶ InitListing(continue) ──last page──▶ InitListed(rv)
      ▲                                                      │ first event
      └──────────── 410 Gone, or "resourceVersion too large" ◀ Watching(rv)

:func:`setpoint.runtime.listwatch.run_watcher` performs the actions against a real or
scripted API, on an injected clock.

Invariants:

- Every (re)list starts with ``Init`` and emits ``InitDone`` only after its last page; a list
  that fails midway is started over with a new ``Init``, never resumed.
- A watch starts from the resourceVersion of the list, or of the last event or bookmark
  received, so no change after the list is missed, short of a 410, which forces a relist.
- Every error is retried, with a backoff: failed requests, ERROR events, a stream that ends
  or falls silent before delivering anything. A stream that delivered something and then
  ended (the server's timeout) or fell silent is re-watched at once.
- ``step`` is total over the inputs a state can receive and raises ``ValueError`` for the
  others (a driver bug).

Non-guarantees: events are not deduplicated (a relist re-applies every object); between
``Init`` and ``InitDone`` the old view stays current only in a store that buffers; a watch
event older than the list is not detected (the server does not send one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from setpoint.apimachinery import errors

Obj = Mapping[str, Any]

# --- output events ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Init:
    """A list starts: buffer what follows until ``InitDone``."""


@dataclass(frozen=True, slots=True)
class InitApply:
    """An object of the list being read."""

    object: Obj


@dataclass(frozen=True, slots=True)
class InitDone:
    """The list is complete: replace what was known with what was buffered."""

    #: the list's ``metadata.resourceVersion`` (the snapshot the cache now reflects);
    #: informational, so not part of equality
    resource_version: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Apply:
    """An object was added or modified."""

    object: Obj


@dataclass(frozen=True, slots=True)
class Delete:
    """An object was deleted (its last state)."""

    object: Obj


@dataclass(frozen=True, slots=True)
class Resync:
    """The resync period elapsed: replay the known objects."""


WatcherEvent = Init | InitApply | InitDone | Apply | Delete | Resync

# --- states ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Empty:
    """Nothing listed yet; the first page of a list was asked for.

    ``consistent``: the list is a consistent read (resourceVersion ""), as after a 410.
    """

    consistent: bool = False


@dataclass(frozen=True, slots=True)
class InitListing:
    """Some pages were received; the page at ``continue_token`` was asked for."""

    continue_token: str
    consistent: bool = False


@dataclass(frozen=True, slots=True)
class InitListed:
    """Listed and in sync up to ``resource_version``; a watch from it is being opened.

    Also the state after a stream ends: nothing has been received on the new stream yet.
    """

    resource_version: str


@dataclass(frozen=True, slots=True)
class Watching:
    """The stream is delivering; ``resource_version`` is that of the last event received."""

    resource_version: str


State = Empty | InitListing | InitListed | Watching

# --- inputs ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListResult:
    """A list response: ``items``, ``metadata.resourceVersion``, ``metadata.continue``."""

    page: Obj


@dataclass(frozen=True, slots=True)
class ListFailed:
    error: Exception


@dataclass(frozen=True, slots=True)
class WatchEventReceived:
    """One decoded watch event: ``{"type": ..., "object": {...}}``."""

    event: Obj


@dataclass(frozen=True, slots=True)
class WatchFailed:
    """Opening or reading the stream raised (an ERROR event may also arrive as this)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class WatchEnded:
    """The server closed the stream cleanly (its timeout, or shutdown)."""


@dataclass(frozen=True, slots=True)
class InactivityTimeout:
    """Nothing arrived on the stream for the inactivity timeout."""


@dataclass(frozen=True, slots=True)
class ResyncDue:
    """The resync period elapsed."""


Input = (ListResult | ListFailed | WatchEventReceived | WatchFailed | WatchEnded
         | InactivityTimeout | ResyncDue)

# --- actions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListPage:
    """List one page (the page size is the driver's)."""

    resource_version: str
    continue_token: str | None = None


@dataclass(frozen=True, slots=True)
class StartWatch:
    """Close any open stream; open a watch from ``resource_version`` and read from it."""

    resource_version: str


@dataclass(frozen=True, slots=True)
class NextEvent:
    """Read the next event of the open stream."""


@dataclass(frozen=True, slots=True)
class Continue:
    """Keep waiting for what was being waited for."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Close any open stream, wait out the reconnect backoff, then do ``then``."""

    then: ListPage | StartWatch
    reason: str
    retry_after: float | None = None


Action = ListPage | StartWatch | NextEvent | Continue | Backoff


class Step(NamedTuple):
    events: tuple[WatcherEvent, ...]
    state: State
    action: Action


class NoResourceVersion(Exception):
    """A complete list carried no ``metadata.resourceVersion`` to watch from."""


# --- resourceVersion rules -------------------------------------------------------------

#: list from any resourceVersion: the server may answer from its cache, possibly stale
ANY_RESOURCE_VERSION = "0"
#: list at the most recent resourceVersion: a consistent (quorum) read
MOST_RECENT_RESOURCE_VERSION = ""


def list_resource_version(consistent: bool) -> str:
    """The resourceVersion of a list's first page.

    The first list takes ``"0"`` (cheap, may be stale: the watch catches up); a relist after
    a 410 takes ``""``, since the cache that answered "0" may be the one that is behind.
    """
    return MOST_RECENT_RESOURCE_VERSION if consistent else ANY_RESOURCE_VERSION


def page_resource_version() -> str:
    """Later pages send no resourceVersion: the continue token carries the snapshot."""
    return MOST_RECENT_RESOURCE_VERSION


def watch_resource_version(page: Obj) -> str | None:
    """A watch starts at the list's ``metadata.resourceVersion`` (exclusive)."""
    rv = (page.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None


def event_resource_version(obj: Obj, current: str) -> str:
    """After an event or bookmark, a re-watch resumes from the object's resourceVersion."""
    metadata = obj.get("metadata")
    rv = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
    return str(rv) if rv else current


def requires_relist(error: BaseException) -> bool:
    """410 Gone/Expired, or a resourceVersion the server has not reached: list again."""
    if not isinstance(error, errors.ApiError):
        return False
    if error.status_code == 410 or isinstance(error, errors.Gone):
        return True
    causes = error.details.get("causes") or []
    return any(isinstance(c, Mapping) and c.get("reason") == "ResourceVersionTooLarge"
               for c in causes)


def _retry_after(error: BaseException) -> float | None:
    if isinstance(error, errors.ApiError) and error.retry_after is not None:
        return float(error.retry_after)
    return None


# --- the state machine -----------------------------------------------------------------


def initial(consistent: bool = False) -> Step:
    """Where a watcher starts: ask for the first page of a list."""
    return Step((), Empty(consistent), ListPage(list_resource_version(consistent)))


def _relist(error: BaseException) -> Step:
    # 410 Gone means the history the watch needed is gone: we are out of sync, list again
    return Step((), Empty(True), Backoff(ListPage(list_resource_version(True)),
                                         f"relist: {error}", _retry_after(error)))


def _on_page(state: Empty | InitListing, page: Obj) -> Step:
    events: list[WatcherEvent] = [Init()] if isinstance(state, Empty) else []
    events.extend(InitApply(item) for item in page.get("items") or ())
    token = (page.get("metadata") or {}).get("continue")
    if token:
        return Step(tuple(events), InitListing(str(token), state.consistent),
                    ListPage(page_resource_version(), str(token)))
    rv = watch_resource_version(page)
    if rv is None:
        error = NoResourceVersion("the list carried no metadata.resourceVersion")
        return Step((), Empty(state.consistent),
                    Backoff(ListPage(list_resource_version(state.consistent)), str(error)))
    events.append(InitDone(rv))
    return Step(tuple(events), InitListed(rv), StartWatch(rv))


def _on_list_failed(state: Empty | InitListing, error: Exception) -> Step:
    if requires_relist(error):  # also an expired continue token: start the list over
        return _relist(error)
    if isinstance(state, Empty):
        retry = ListPage(list_resource_version(state.consistent))
    else:
        retry = ListPage(page_resource_version(), state.continue_token)
    return Step((), state, Backoff(retry, f"list failed: {error}", _retry_after(error)))


def _on_watch_failed(rv: str, error: Exception) -> Step:
    if requires_relist(error):
        return _relist(error)
    return Step((), InitListed(rv),
                Backoff(StartWatch(rv), f"watch failed: {error}", _retry_after(error)))


def _on_event(state: InitListed | Watching, event: Obj) -> Step:
    rv = state.resource_version
    kind = event.get("type")
    obj = event.get("object")
    if not isinstance(obj, Mapping):
        return _on_watch_failed(rv, errors.InternalError(f"malformed watch event: {kind!r}"))
    if kind == "ERROR":
        return _on_watch_failed(rv, errors.from_status(obj))
    new_rv = event_resource_version(obj, rv)
    events: tuple[WatcherEvent, ...]
    if kind in ("ADDED", "MODIFIED"):
        events = (Apply(obj),)
    elif kind == "DELETED":
        events = (Delete(obj),)
    else:  # BOOKMARK (only moves the resourceVersion), or a type from a newer server
        events = ()
    return Step(events, Watching(new_rv), NextEvent())


def step(state: State, observed: Input) -> Step:
    """The pure transition function; raises ``ValueError`` for an input the state never gets."""
    match state, observed:
        case Empty() | InitListing(), ListResult(page):
            return _on_page(state, page)
        case Empty() | InitListing(), ListFailed(error):
            return _on_list_failed(state, error)
        case Empty() | InitListing(), ResyncDue():
            return Step((), state, Continue())  # not in sync: InitDone will tell everyone
        case InitListed() | Watching(), WatchEventReceived(ev):
            return _on_event(state, ev)
        case InitListed() | Watching(), WatchFailed(error):
            return _on_watch_failed(state.resource_version, error)
        case Watching(rv), WatchEnded() | InactivityTimeout():
            return Step((), InitListed(rv), StartWatch(rv))
        case InitListed(rv), WatchEnded() | InactivityTimeout():
            # nothing came on this stream: reconnecting at once could spin, so back off
            return Step((), state, Backoff(StartWatch(rv), "the watch delivered nothing"))
        case InitListed() | Watching(), ResyncDue():
            return Step((Resync(),), state, Continue())
    raise ValueError(f"{type(observed).__name__} cannot happen in {state!r}")
