"""The watch stream of one WATCH request: the cache's events as the request sees them.

The watch cache delivers every event under a resource prefix; a :class:`WatchStream` turns
them into API-level events for one request's selectors and version:

* with selectors, an event is reported by how the object's match changed
  (:func:`reported_type`): an object that starts matching is ADDED, one that stops matching
  DELETED, one that matches before and after MODIFIED, one that matches neither not at all;
* the decision is made once per event for every watch with the same selectors, version and
  strategy (the watcher's verdict cache), and the encoded frame once per event and output
  form (:meth:`WatchEvent.frame`), shared by every watch that sends the same bytes;
* objects are converted to the watch's version when first read; with a conversion webhook
  the selectors see the converted objects, and a failed conversion ends the watch.

* a caller may also take events without waiting for them (:meth:`WatchStream.set_sink`): while
  its reader is parked and caught up, an event whose conversion needs no webhook is classified
  and handed to the sink in the cache's fan-out, so that a thousand caught-up watchers cost no
  task wake-up per event; whatever the sink declines goes to the reader as before.

Invariants: events come in revision order, each at most once, whether through the sink or
:meth:`WatchStream.next_event`; :meth:`WatchStream.bookmark_revision` never reports a revision
ahead of an event not yet delivered.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

from setpoint.apimachinery import selectors
from setpoint.registry import conversion
from setpoint.registry import history as hist
from setpoint.registry import watchcache as wc
from setpoint.registry.options import ListOptions, WatchOptions
from setpoint.registry.strategy import Strategy

Obj = dict[str, Any]


class WatchSource(Protocol):
    """What a watch stream reads of its store."""

    strategy: Strategy
    conversion: conversion.Conversion

    def matches(self, obj: Obj, labels: selectors.LabelSelector | None,
                field_sel: selectors.FieldSelector | None,
                version: str | None = None) -> bool: ...


def no_selectors(opts: ListOptions | WatchOptions) -> bool:
    """Whether a LIST or WATCH selects everything (no label or field selector to apply)."""
    return (opts.label_selector is None or opts.label_selector.empty) and (
        opts.field_selector is None or opts.field_selector.empty)


def reported_type(event_type: str, now: bool, was: bool) -> str | None:
    """How a watch with selectors reports an event of ``event_type`` whose object matches
    them (``now``) and whose previous state matched them (``was``); None: not at all."""
    if event_type == "ADDED":
        return "ADDED" if now else None
    if event_type == "DELETED":
        return "DELETED" if was else None
    if now and was:
        return "MODIFIED"
    if now:
        return "ADDED"
    if was:
        return "DELETED"
    return None


class WatchEvent:
    """One event of a :class:`WatchStream`: its type as this watch reports it and its object
    in the watch's version (converted on first use). :meth:`frame` shares the encoded
    event with every other watch that reports it the same way."""

    __slots__ = ("_event", "_object", "_stream", "type")

    def __init__(self, stream: WatchStream, type: str, event: wc.CacheEvent,
                 converted: Obj | None = None) -> None:
        self._stream = stream
        self._event = event
        self._object: Obj | None = converted
        self.type = type

    @property
    def object(self) -> Obj:
        if self._object is None:
            stream = self._stream
            self._object = stream._store.strategy.from_storage(self._event.object,
                                                               stream._version)
        return self._object

    def frame(self, form: Hashable, make: Callable[[str, Obj], bytes]) -> bytes:
        """``make(type, object)``: the bytes a watch sends for this event in the output
        ``form``, made once per event, type, version, strategy and ``form`` and shared by
        the watches that send the same (``form`` must name everything else the bytes
        depend on)."""
        stream = self._stream
        key = (self.type, stream._version, form, stream._store.strategy)
        return stream._watcher.frame(self._event, key, lambda: make(self.type, self.object))


class WatchStream:
    """API-level events of one watch: selector transitions applied, in the request version."""

    def __init__(self, store: WatchSource, watcher: wc.Watcher, version: str,
                 opts: WatchOptions) -> None:
        self._store = store
        self._watcher = watcher
        self._version = version
        self._opts = opts
        self._unselective = no_selectors(opts)
        self._verdict_key = (opts.label_selector, opts.field_selector, version, store.strategy)
        self.last_revision = 0

    @property
    def lagged(self) -> bool:
        return self._watcher.lagged

    def close(self) -> None:
        self._watcher.close()

    def set_sink(self, write: Callable[[bytes], bool] | None, form: Hashable = None,
                 make: Callable[[str, Obj], bytes] | None = None) -> None:
        """Send this watch's events through ``write`` from the cache's fan-out while its
        reader is parked in :meth:`next_event` with nothing pending (see
        :meth:`~setpoint.registry.watchcache.Watcher.set_sink`); ``None`` stops that.

        What is written for an event is ``make(type, object)``, made once per event for
        every watch with the same selectors, version, strategy and ``form`` (``form`` must
        name everything else the bytes depend on), so a fan-out to many such watches costs
        one decision and one encoding per event and one lookup and ``write`` per watch.
        ``write(data)`` returns whether it sent ``data``; when it did not (the connection is
        backed up or closing), the event goes to :meth:`next_event` instead, and so do the
        events after it until the reader has caught up. Events the selectors filter out
        are taken without a write; events that need a conversion webhook always go to the
        reader."""
        if write is None or make is None:
            self._watcher.set_sink(None)
            return
        shared = self._watcher.shared_key((self._verdict_key, form))

        def sink(entry: hist.Entry) -> bool:
            if not self._store.conversion.immediate:
                return False
            frames = entry.frames
            data = frames.get(shared) if frames is not None else None
            if data is None:
                try:
                    data = self._made(entry, shared, make)
                except Exception:  # the reader meets the same failure and ends the watch
                    return False
            if data and not write(data):
                return False
            if entry.revision > self.last_revision:
                self.last_revision = entry.revision
            return True

        self._watcher.set_sink(sink)

    def _made(self, entry: hist.Entry, shared: Hashable, make: Callable[[str, Obj], bytes]
              ) -> bytes:
        """The bytes of ``entry`` for the watches of ``shared`` (kept on the entry for the
        next of them); empty when the selectors filter the event out (not kept: the
        decision itself is shared, see :meth:`_classify`)."""
        event = entry.event()
        kind = self._classify(event)
        if kind is None:
            return b""
        made = WatchEvent(self, kind, event)
        return self._watcher.shared_frame(entry, shared, lambda: make(kind, made.object))

    def pending_replay(self) -> int:
        return self._watcher.pending_replay()

    def bookmark_revision(self, current: int) -> int:
        """A revision safe to report in a bookmark: never ahead of an undelivered event."""
        if self._watcher.idle():
            return max(self.last_revision, current)
        return self.last_revision

    async def next(self, timeout: float | None = None) -> tuple[str, Obj] | None:
        """The next event that passes the selectors, as ``(type, object)``; ``None`` when
        the watch ended. Raises ``TimeoutError`` when nothing arrived within ``timeout``.
        """
        event = await self.next_event(timeout)
        return None if event is None else (event.type, event.object)

    async def next_event(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event that passes the selectors; ``None`` when the watch ended.

        Raises ``TimeoutError`` when nothing arrived within ``timeout``.
        """
        while True:
            event = await self._watcher.next(timeout)
            if event is None:
                return None
            self.last_revision = max(self.last_revision, event.revision)
            conversion = self._store.conversion
            if conversion.immediate:
                kind = self._classify(event)
                if kind is None:
                    continue
                return WatchEvent(self, kind, event)
            # a webhook converts: the event's objects in this watch's version (shared with
            # the other watches of the version), then the selectors on them; a failure
            # ends the watch (the caller sends it as an ERROR event)
            obj = await conversion.shared_output(event.object, self._version)
            prev = None
            if not self._unselective and event.type != "ADDED" and event.prev is not None:
                prev = await conversion.shared_output(event.prev, self._version)
            kind = self._classify(event, obj, prev)
            if kind is None:
                continue
            return WatchEvent(self, kind, event, obj)

    def _classify(self, event: wc.CacheEvent, obj: Obj | None = None,
                  prev: Obj | None = None) -> str | None:
        """How this watch reports ``event`` (None: not at all); decided once per event for
        every watch with the same selectors, version and strategy. ``obj`` and ``prev``
        are the event's objects in the watch's version when they are converted already."""
        if self._unselective:
            # every event passes; the previous state (decoded on demand) is not needed
            return event.type
        return self._watcher.verdict(event, self._verdict_key,
                                     lambda: self._decide(event, obj, prev))

    def _decide(self, event: wc.CacheEvent, obj: Obj | None, prev: Obj | None) -> str | None:
        opts = self._opts
        matches = self._store.matches
        version = self._version
        now = matches(event.object if obj is None else obj, opts.label_selector,
                      opts.field_selector, version)
        if event.type == "ADDED":
            return reported_type("ADDED", now, False)
        was = event.prev is not None and matches(
            event.prev if prev is None else prev, opts.label_selector, opts.field_selector,
            version)
        return reported_type(event.type, now, was)
