"""Streaming watches: newline-delimited JSON events from ``?watch=true``.

:class:`Watch` is an async iterator of :class:`WatchEvent` and an async context manager::

    async with client.watch(("v1", "ConfigMap"), namespace="default",
                            resource_version=rv) as events:
        async for event in events:
            ...

Invariants:

- Events come in the order the server sent them; each ``object`` is a plain dict. Objects
  without ``apiVersion``/``kind`` get the watched resource's (as client-go does).
- :attr:`Watch.resource_version` is the ``metadata.resourceVersion`` of the last event
  delivered (bookmarks included): where a new watch resumes.
- An ``ERROR`` event raises the exception its Status names — ``Expired``/``Gone`` for 410,
  which means: relist, then watch from the list's resourceVersion.
- The iterator **ends** (``StopAsyncIteration``) when the server closes the stream cleanly
  (``timeoutSeconds``, server shutdown) and when no byte arrives for ``inactivity_timeout``
  seconds; the latter sets :attr:`Watch.timed_out`. Either way, re-watch from
  :attr:`Watch.resource_version`.
- A connection that breaks mid-stream (closed, reset, or framing the client cannot read)
  raises ``ServiceUnavailable`` from the underlying ``ConnectionError`` or
  :class:`~setpoint.client.http1.ProtocolError`; the events that arrived whole before the
  break are delivered first. A line longer than ``max_line`` raises ``InternalError``.
- The HTTP response is closed as soon as the stream ends, raises, is cancelled, or the
  ``async with`` block exits; :meth:`Watch.aclose` is idempotent.

Several events often arrive in one read; :meth:`Watch.next_nowait` hands out those already
buffered without awaiting (the informer's driver reads a busy stream so, with no task or
timer per event).

Non-guarantees: no automatic reconnect or relist (that is the informer's job), and a
``Watch`` is single-use. Iterating without ``async with`` and abandoning the loop early leaves
the connection open until :meth:`Watch.aclose` or garbage collection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

import orjson

from setpoint.apimachinery import errors
from setpoint.client import http1, responses
from setpoint.client.transport import BodyStream

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
BOOKMARK: Final = "BOOKMARK"
ERROR: Final = "ERROR"

#: the longest single event line accepted (an object is at most ~1.5 MiB in etcd)
MAX_LINE = 32 * 1024 * 1024

#: sends the request; returns the open response and the watched apiVersion and kind
Opener = Callable[[], Awaitable[tuple[BodyStream, str, str]]]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str | None:
        rv = (self.object.get("metadata") or {}).get("resourceVersion")
        return str(rv) if rv is not None else None


def _malformed(line: bytes) -> errors.InternalError:
    text = responses.truncate(line.decode("utf-8", "replace"), 200)
    return errors.InternalError(f"malformed watch event: {text!r}")


def parse_event(line: bytes) -> WatchEvent:
    """Decode one event line; an ``ERROR`` event raises its Status as an exception."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise _malformed(line) from e
    if (not isinstance(value, dict) or not isinstance(value.get("type"), str)
            or not isinstance(value.get("object"), dict)):
        raise _malformed(line)
    if value["type"] == ERROR:
        raise errors.from_status(value["object"])
    return WatchEvent(value["type"], value["object"])


class LineBuffer:
    """Splits a byte stream into lines; a line longer than ``max_line`` is an error."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of _buffer already known to hold no newline
        self._max_line = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete, non-blank lines that ``chunk`` finishes, without their newlines."""
        self._buffer += chunk
        lines: list[bytes] = []
        start = 0
        while True:
            end = self._buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            line = bytes(self._buffer[start:end]).strip()
            if line:
                lines.append(line)
            start = end + 1
            self._scanned = start
        del self._buffer[:start]
        self._scanned = len(self._buffer)
        if len(self._buffer) > self._max_line:
            raise errors.InternalError(f"a watch event exceeds {self._max_line} bytes")
        return lines

    @property
    def pending(self) -> bytes:
        """What follows the last newline (a partial line)."""
        return bytes(self._buffer).strip()


class Watch:
    """One streaming watch request; see the module docstring for its guarantees."""

    def __init__(self, opener: Opener, *, inactivity_timeout: float,
                 max_line: int = MAX_LINE) -> None:
        if inactivity_timeout <= 0:
            raise ValueError("inactivity_timeout must be positive")
        self._opener = opener
        self._inactivity = inactivity_timeout
        self._api_version = ""
        self._kind = ""
        self._lines = LineBuffer(max_line)
        self._ready: deque[bytes] = deque()
        self._response: BodyStream | None = None
        self._done = False
        self.resource_version: str | None = None
        self.timed_out = False

    async def __aenter__(self) -> Watch:
        await self._open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def __aiter__(self) -> Watch:
        return self

    async def _open(self) -> None:
        if self._response is None and not self._done:
            try:
                self._response, self._api_version, self._kind = await self._opener()
            except BaseException:
                self._done = True
                raise

    async def aclose(self) -> None:
        """Close the connection; the iterator then ends. Idempotent."""
        self._close()

    def _close(self) -> None:
        self._done = True
        response, self._response = self._response, None
        if response is not None:
            response.close()

    def next_nowait(self) -> WatchEvent | None:
        """The next event if it has already arrived (its line is buffered), without waiting
        or reading; ``None`` if the next one needs a read. Raises as iterating does (an
        ``ERROR`` event, a malformed line), and then the watch is closed."""
        if not self._ready:
            return None
        try:
            return self._event(self._ready.popleft())
        except BaseException:
            self._close()
            raise

    def _event(self, line: bytes) -> WatchEvent:
        event = parse_event(line)
        obj = event.object
        if self._kind and "kind" not in obj:
            obj["kind"] = self._kind
        if self._api_version and "apiVersion" not in obj:
            obj["apiVersion"] = self._api_version
        rv = event.resource_version
        if rv:
            self.resource_version = rv
        return event

    async def __anext__(self) -> WatchEvent:
        try:
            await self._open()
            while not self._ready:
                if self._done or self._response is None:
                    raise StopAsyncIteration
                chunk = await self._read(self._response)
                if not chunk:
                    await self._finish()
                    if not self._ready:
                        raise StopAsyncIteration
                else:
                    self._ready.extend(self._lines.feed(chunk))
            return self._event(self._ready.popleft())
        except BaseException:
            await self.aclose()
            raise

    async def _read(self, response: BodyStream) -> bytes:
        try:
            return await response.read_some(self._inactivity)
        except TimeoutError:
            if self._done:
                return b""
            self.timed_out = True
            return b""
        except (OSError, http1.ProtocolError) as e:
            if self._done:
                return b""
            raise errors.ServiceUnavailable(
                f"watch {response.url}: connection lost: {e or type(e).__name__}") from e

    async def _finish(self) -> None:
        """End of stream: a trailing line without newline is kept only if it is whole."""
        pending = self._lines.pending
        response = self._response
        await self.aclose()
        if pending and not self.timed_out:
            try:
                orjson.loads(pending)
            except orjson.JSONDecodeError:
                where = response.url if response is not None else "watch"
                raise errors.ServiceUnavailable(
                    f"watch {where}: the stream ended in the middle of an event") from None
            self._ready.append(pending)
