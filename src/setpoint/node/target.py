"""A pod's streams on this node: :class:`StreamTarget` over the agent's :class:`PodRuntime`.

What the agent's endpoint serves to the API server (``kubectl logs/exec/attach/
port-forward`` end here):

* ``exec`` runs the command in the container's context (the runtime's exec); a stream the
  client did not ask for is read and dropped so the command never blocks on it;
* ``attach`` follows the container's output from now on (its log, as written): containers
  run without a standard input here, so attaching with ``stdin`` is refused (400);
* ``port_forward`` connects to the port inside the pod;
* ``logs`` checks the container first, with the kubelet's messages (400): an unknown
  container, a container still waiting to start, ``--previous`` with no previous instance;
  then reads the log. ``stream`` (Stdout/Stderr only) is not applied: the log holds both.

Errors of the runtime become API errors: an unknown pod 404, anything else 400.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any

from setpoint.agent import (
    AgentError,
    ContainerNotFound,
    ContainerNotRunning,
    ExecSession,
    LogOptions,
    NotSupported,
    PodNotFound,
    PodRuntime,
)
from setpoint.apimachinery import errors
from setpoint.apimachinery.clock import Clock, SystemClock
from setpoint.server import streaming

__all__ = ["RuntimeTarget", "api_error"]


def api_error(e: AgentError) -> errors.ApiError:
    if isinstance(e, PodNotFound):
        return errors.NotFound(str(e))
    return errors.BadRequest(str(e))


def _drain(reader: Any) -> asyncio.Task[None]:
    async def run() -> None:
        while await reader.read(65536):
            pass
    return asyncio.ensure_future(run())


class _ExecSession:
    """A runtime exec session as the streaming protocols want it."""

    def __init__(self, session: ExecSession, options: streaming.ExecOptions) -> None:
        self._session = session
        self._argv = list(options.command)
        self._stdout = session.stdout if options.stdout else None
        self._stderr = session.stderr if options.stderr and not options.tty else None
        self._drains = [_drain(r) for r, wanted in ((session.stdout, options.stdout),
                                                     (session.stderr, options.stderr))
                        if r is not None and not wanted]

    @property
    def stdin(self) -> streaming.ByteWriter | None:
        return self._session.stdin

    @property
    def stdout(self) -> streaming.ByteReader | None:
        return self._stdout

    @property
    def stderr(self) -> streaming.ByteReader | None:
        return self._stderr

    async def resize(self, size: streaming.TerminalSize) -> None:
        self._session.resize(size.width, size.height)

    async def wait(self) -> streaming.ExitStatus:
        code = await self._session.wait()
        code = code if 0 <= code <= 255 else 255
        message = "" if code == 0 else \
            f"error executing command [{' '.join(self._argv)}], exit code {code}"
        return streaming.ExitStatus(code, message)

    async def close(self) -> None:
        for task in self._drains:
            task.cancel()
        await self._session.close()


class _AttachSession:
    """The container's output from now on (read-only attach)."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._reader = asyncio.StreamReader()
        self._chunks = chunks
        self._pump = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            async for chunk in self._chunks:
                self._reader.feed_data(chunk)
        except AgentError:
            pass
        finally:
            self._reader.feed_eof()

    @property
    def stdin(self) -> streaming.ByteWriter | None:
        return None

    @property
    def stdout(self) -> streaming.ByteReader | None:
        return self._reader

    @property
    def stderr(self) -> streaming.ByteReader | None:
        return None

    async def resize(self, size: streaming.TerminalSize) -> None:
        return None

    async def wait(self) -> streaming.ExitStatus:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._pump)
        return streaming.ExitStatus(0)

    async def close(self) -> None:
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._pump
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


class RuntimeTarget:
    """One pod (``uid``) of this node's runtime, as a :class:`streaming.StreamTarget`."""

    def __init__(self, pods: PodRuntime, uid: str, name: str, container: str, *,
                 clock: Clock | None = None) -> None:
        self.runtime = pods
        self.uid = uid
        self.name = name
        self.container = container
        self.clock = clock or SystemClock()

    def _status(self) -> Mapping[str, Any]:
        status = self.runtime.pod_status(self.uid)
        if status is None:
            raise errors.NotFound(f'pod "{self.name}" is not running on this node')
        return status

    def _container_status(self, container: str) -> Mapping[str, Any]:
        status = self._status()
        for c in [*(status.get("containerStatuses") or []),
                  *(status.get("initContainerStatuses") or [])]:
            if c.get("name") == container:
                return dict(c)
        raise errors.BadRequest(f"container {container} is not valid for pod {self.name}")

    async def exec(self, options: streaming.ExecOptions) -> streaming.Session:
        container = options.container or self.container
        try:
            session = await self.runtime.exec(self.uid, container, list(options.command),
                                              stdin=options.stdin, tty=options.tty)
        except AgentError as e:
            raise api_error(e) from None
        return _ExecSession(session, options)

    async def attach(self, options: streaming.AttachOptions) -> streaming.Session:
        container = options.container or self.container
        if options.stdin:
            raise errors.BadRequest(
                "setpoint runs containers without a standard input: attach with stdin is "
                "not supported (attach without -i follows the container's output)")
        state = self._container_status(container).get("state") or {}
        if "running" not in state:
            raise errors.BadRequest(f'container "{container}" in pod "{self.name}" is not '
                                    "running")
        chunks = self.runtime.logs(self.uid, container,
                                   LogOptions(since_time=self.clock.now(), follow=True))
        return _AttachSession(chunks)

    async def port_forward(self, port: int
                           ) -> tuple[streaming.ByteReader, streaming.ByteWriter]:
        try:
            return await self.runtime.port_forward(self.uid, port)
        except AgentError as e:
            raise api_error(e) from None

    async def logs(self, options: streaming.LogOptions) -> AsyncIterator[bytes]:
        container = options.container or self.container
        c = self._container_status(container)
        state = c.get("state") or {}
        if options.previous and not c.get("lastState", {}).get("terminated"):
            raise errors.BadRequest(f'previous terminated container "{container}" in pod '
                                    f'"{self.name}" not found')
        if "waiting" in state and not c.get("lastState", {}).get("terminated") \
                and not options.previous:
            reason = state["waiting"].get("reason") or "ContainerCreating"
            raise errors.BadRequest(f'container "{container}" in pod "{self.name}" is '
                                    f"waiting to start: {reason}")
        since = options.since_time
        if options.since_seconds is not None:
            since = self.clock.now() - timedelta(seconds=options.since_seconds)
        chunks = self.runtime.logs(self.uid, container, LogOptions(
            previous=options.previous, tail_lines=options.tail_lines, since_time=since,
            timestamps=options.timestamps, limit_bytes=options.limit_bytes,
            follow=options.follow))
        return _guarded(chunks)


async def _guarded(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The log's bytes; a runtime error after the first byte ends the stream."""
    try:
        async for chunk in chunks:
            yield chunk
    except (ContainerNotFound, ContainerNotRunning, NotSupported, PodNotFound):
        return
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
