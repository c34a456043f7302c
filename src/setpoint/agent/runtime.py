"""The seam between the node agent and what runs pods: the :class:`PodRuntime` protocol.

Two implementations: :class:`~setpoint.agent.process.ProcessRuntime` runs containers as local
processes; :class:`~setpoint.agent.simulated.SimulatedRuntime` runs nothing and moves pods
through their states on a script (scale tests, operator tests).

The contract, for whoever drives a runtime (the agent's sync loop):

* ``async with runtime:`` starts its background work and, for a runtime with state on disk,
  first recovers the pods a previous agent left (:meth:`PodRuntime.pods` lists them).
* :meth:`PodRuntime.sync_pod` is level-triggered and idempotent: the first call for a uid
  starts the pod; later calls pass the newest object and inputs (volume contents are updated
  in place; the spec is otherwise immutable, as in the API).
* :meth:`PodRuntime.kill_pod` terminates a pod gracefully (``preStop``, SIGTERM, the grace
  period, SIGKILL) and returns when none of its processes is left; its status then shows a
  terminal phase. :meth:`PodRuntime.remove_pod` also deletes everything kept for it.
* :meth:`PodRuntime.pod_status` is the ``status`` to write to the API, computed on demand;
  :meth:`PodRuntime.changes` yields the uids whose status may have changed (deduplicated:
  a uid is pending at most once), :meth:`PodRuntime.events` what the kubelet would record
  as Events.
* ``logs``, ``exec``, ``port_forward`` and ``metrics`` serve ``kubectl logs/exec/port-forward``
  and ``top``; a runtime that cannot raises :class:`NotSupported`.

Errors: :class:`PodNotFound`, :class:`ContainerNotFound`, :class:`ContainerNotRunning`,
:class:`NotSupported`, all :class:`AgentError` subclasses; the API layer maps them to
Status codes.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from setpoint.agent import inputs as inp

__all__ = [
    "ChangeFeed", "ContainerMetrics", "ContainerNotFound", "ContainerNotRunning", "EventFeed",
    "ExecSession", "LogOptions", "NotSupported", "PodEvent", "PodMetrics", "PodNotFound",
    "PodRuntime", "AgentError",
]


class AgentError(Exception):
    """Base of the runtime's errors."""


class PodNotFound(AgentError):
    pass


class ContainerNotFound(AgentError):
    pass


class ContainerNotRunning(AgentError):
    pass


class NotSupported(AgentError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class LogOptions:
    """``kubectl logs`` options: ``--previous``, ``--tail``, ``--since(-time)``,
    ``--timestamps``, ``--limit-bytes``, ``-f``."""

    previous: bool = False
    tail_lines: int | None = None
    since_time: datetime | None = None
    timestamps: bool = False
    limit_bytes: int | None = None
    follow: bool = False


@dataclass(frozen=True, slots=True)
class PodEvent:
    """Something the kubelet would record as an Event about a pod (or one of its containers).

    ``field_path`` is ``spec.containers{NAME}`` / ``spec.initContainers{NAME}`` for a container.
    """

    uid: str
    namespace: str
    name: str
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    field_path: str = ""


@dataclass(frozen=True, slots=True)
class ContainerMetrics:
    """Cumulative CPU seconds and the working set, for ``kubectl top`` (rate by the caller)."""

    name: str
    cpu_seconds: float
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class PodMetrics:
    uid: str
    timestamp: datetime
    containers: tuple[ContainerMetrics, ...]


class InputWriter(Protocol):
    """A command's standard input (``asyncio.StreamWriter`` is one)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def write_eof(self) -> None: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class ExecSession(Protocol):
    """A command running in a container's context (``kubectl exec``).

    ``stdin`` is None unless asked for; with a TTY, ``stderr`` is None (merged, as in
    Kubernetes) and :meth:`resize` sets the terminal size.
    """

    stdin: InputWriter | None
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader | None

    async def wait(self) -> int:
        """The command's exit code (128 + signal number when killed by a signal)."""

    def resize(self, width: int, height: int) -> None:
        ...

    async def close(self) -> None:
        """Kill the command if it still runs, and release its streams."""


class PodRuntime(Protocol):
    async def __aenter__(self) -> PodRuntime: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def pods(self) -> list[str]:
        """The uids of the pods this runtime holds (including ones recovered at start)."""

    async def sync_pod(self, pod: Mapping[str, Any], inputs: inp.ResolvedInputs) -> None:
        """Run ``pod``, or bring a running one up to date."""

    async def kill_pod(self, uid: str, grace_period: float | None = None) -> None:
        """Terminate the pod's containers; returns when none of its processes is left."""

    async def remove_pod(self, uid: str, grace_period: float | None = None) -> None:
        """Kill the pod if needed and forget it (directories, logs, state)."""

    def pod_status(self, uid: str) -> dict[str, Any] | None:
        """The pod's ``status`` as the kubelet reports it; None for an unknown uid."""

    def changes(self) -> AsyncIterator[str]:
        """Uids whose status may have changed, each pending at most once."""

    def events(self) -> AsyncIterator[PodEvent]:
        """Events, oldest first (a bounded buffer: the oldest are dropped when it is full)."""

    def logs(self, uid: str, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        """A container's log, as ``kubectl logs`` wants it."""

    async def exec(self, uid: str, container: str, command: list[str], *, stdin: bool = False,
                   tty: bool = False) -> ExecSession:
        """Start ``command`` in the container's context."""

    async def port_forward(self, uid: str, port: int
                           ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to ``port`` of the pod."""

    async def metrics(self, uid: str) -> PodMetrics:
        """CPU and memory of the pod's containers."""


class ChangeFeed:
    """A deduplicating FIFO of uids with one async consumer.

    Bounded by the number of distinct uids (a uid already pending is not added again).
    """

    def __init__(self) -> None:
        self._pending: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._wake = asyncio.Event()

    def mark(self, uid: str) -> None:
        self._pending[uid] = None
        self._wake.set()

    def __len__(self) -> int:
        return len(self._pending)

    def drain(self) -> list[str]:
        """Every pending uid, in the order first marked."""
        uids = list(self._pending)
        self._pending.clear()
        self._wake.clear()
        return uids

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            while not self._pending:
                self._wake.clear()
                await self._wake.wait()
            uid, _ = self._pending.popitem(last=False)
            yield uid


class EventFeed:
    """A bounded buffer of :class:`PodEvent` with one async consumer; drops the oldest."""

    def __init__(self, capacity: int = 1000) -> None:
        self._events: collections.deque[PodEvent] = collections.deque(maxlen=capacity)
        self._wake = asyncio.Event()
        self.dropped = 0

    def emit(self, event: PodEvent) -> None:
        if len(self._events) == self._events.maxlen:
            self.dropped += 1
        self._events.append(event)
        self._wake.set()

    def drain(self) -> list[PodEvent]:
        out = list(self._events)
        self._events.clear()
        self._wake.clear()
        return out

    async def __aiter__(self) -> AsyncIterator[PodEvent]:
        while True:
            while not self._events:
                self._wake.clear()
                await self._wake.wait()
            yield self._events.popleft()
