"""A pod made of local processes behind the streaming handlers, on a small aiohttp app.

:class:`ProcessTarget` implements :class:`~setpoint.server.streaming.StreamTarget` with real
subprocesses (``exec``: the command; ``attach``: a fresh run of the pod's main command, on a
pty with a TTY), local TCP ports (``port_forward``: pod port -> a port on 127.0.0.1) and a
log the test writes to. :func:`start_app` serves, besides the subresources, what kubectl
asks before it streams: ``/version``, legacy discovery and the pod itself (Running). It
listens through the server's own connection guard, as ``setpoint serve`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import signal
import struct
import termios
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.server import app as server_app
from setpoint.server import connections, discovery, limits, streaming
from setpoint.server.streaming import ExitStatus, TerminalSize

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

NAMESPACE = "default"
POD = "web"
CONTAINER = "main"


class PtyReader:
    """The master side of a pty as a byte reader (EIO once the slave closed is the end)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        loop.add_reader(fd, self._readable)
        self._closed = False

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except OSError:
            data = b""
        if data:
            self._reader.feed_data(data)
        else:
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            asyncio.get_running_loop().remove_reader(self._fd)
            self._reader.feed_eof()

    async def read(self, n: int = -1) -> bytes:
        return await self._reader.read(n)


class PtyWriter:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    async def drain(self) -> None:
        return None

    def write_eof(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._fd, b"\x04")  # ^D: the terminal's end of input

    def close(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None


#: a port whose connection opens and then fails on its first read (the remote agent's way)
LATE_REFUSAL = 13


@dataclass
class ProcessSession:
    process: asyncio.subprocess.Process
    stdin: Any = None
    stdout: Any = None
    stderr: Any = None
    master_fd: int | None = None
    resizes: list[TerminalSize] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    async def resize(self, size: TerminalSize) -> None:
        self.resizes.append(size)
        if self.master_fd is not None:
            fcntl.ioctl(self.master_fd, termios.TIOCSWINSZ,
                        struct.pack("HHHH", size.height, size.width, 0, 0))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGWINCH)

    async def wait(self) -> ExitStatus:
        code = await self.process.wait()
        return ExitStatus(code if code >= 0 else 128 - code)

    async def close(self) -> None:
        self.closed.set()
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        # asyncio's wait() returns once the pipes have closed too: read them to their end
        await asyncio.gather(_drain(self.stdout), _drain(self.stderr), self.process.wait())
        self.release()

    def release(self) -> None:
        if self.master_fd is not None:
            if isinstance(self.stdout, PtyReader):
                self.stdout.close()
            with contextlib.suppress(OSError):
                os.close(self.master_fd)
            self.master_fd = None


async def _drain(reader: Any) -> None:
    if isinstance(reader, asyncio.StreamReader):
        with contextlib.suppress(Exception):
            while await reader.read(65536):
                pass


@dataclass
class ProcessTarget:
    """One pod: commands run as local processes in ``workdir``."""

    workdir: Path
    main_command: tuple[str, ...] = ("sh", "-c", "cat")
    ports: dict[int, int] = field(default_factory=dict)
    log_lines: list[bytes] = field(default_factory=list)
    log_more: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    sessions: list[ProcessSession] = field(default_factory=list)
    log_requests: list[streaming.LogOptions] = field(default_factory=list)
    log_closed: asyncio.Event = field(default_factory=asyncio.Event)
    #: set once a session has started
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def exec(self, options: streaming.ExecOptions) -> ProcessSession:
        if options.container not in ("", CONTAINER):
            raise errors.BadRequest(
                f"container {options.container} is not valid for pod {POD}")
        return await self._start(options.command, options.stdin, options.tty)

    async def attach(self, options: streaming.AttachOptions) -> ProcessSession:
        return await self._start(self.main_command, options.stdin, options.tty)

    async def _start(self, command: tuple[str, ...], stdin: bool,
                     tty: bool) -> ProcessSession:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir),
               "TERM": "xterm"}
        if tty:
            master, slave = pty.openpty()
            os.set_blocking(master, False)
            try:
                process = await asyncio.create_subprocess_exec(
                    *command, stdin=slave, stdout=slave, stderr=slave, cwd=self.workdir,
                    env=env, start_new_session=True,
                    preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
            except Exception:
                os.close(master)
                raise
            finally:
                os.close(slave)
            session = ProcessSession(process, stdin=PtyWriter(master) if stdin else None,
                                     stdout=PtyReader(master), master_fd=master)
        else:
            process = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=self.workdir, env=env, start_new_session=True)
            session = ProcessSession(process, stdin=process.stdin, stdout=process.stdout,
                                     stderr=process.stderr)
        self.sessions.append(session)
        self.started.set()
        return session

    async def port_forward(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if port == LATE_REFUSAL:
            # as a node's agent refuses: the connection to it opens, then its reader fails
            _reader, writer = await asyncio.open_connection("127.0.0.1", self.ports[7])
            late = asyncio.StreamReader()
            late.set_exception(ConnectionResetError(f"nothing listens on port {port}"))
            return late, writer
        if port not in self.ports:
            raise ConnectionRefusedError(f"nothing listens on port {port}")
        return await asyncio.open_connection("127.0.0.1", self.ports[port])

    async def logs(self, options: streaming.LogOptions) -> AsyncIterator[bytes]:
        self.log_requests.append(options)
        if options.previous:
            raise errors.BadRequest(
                f'previous terminated container "{CONTAINER}" in pod "{POD}" not found')
        lines = list(self.log_lines)
        if options.tail_lines is not None:
            lines = lines[len(lines) - options.tail_lines:] if options.tail_lines else []
        return self._log(lines, options)

    async def _log(self, lines: list[bytes], options: streaming.LogOptions
                   ) -> AsyncIterator[bytes]:
        stamp = "2026-01-01T00:00:00.000000000Z "
        try:
            for line in lines:
                yield (stamp.encode() + line) if options.timestamps else line
            while options.follow:
                line_or_end = await self.log_more.get()
                if line_or_end is None:
                    return
                yield (stamp.encode() + line_or_end) if options.timestamps else line_or_end
        finally:
            self.log_closed.set()

    async def cleanup(self) -> None:
        for session in self.sessions:
            if session.process.returncode is None:
                await session.close()
            session.release()


def pod_object(phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE,
                     "uid": "6b1f8a6e-0000-4000-8000-000000000001", "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": CONTAINER, "image": "local"}]},
        "status": {"phase": phase,
                   "containerStatuses": [{"name": CONTAINER, "ready": True,
                                          "restartCount": 0, "image": "local",
                                          "imageID": "", "state": {"running": {
                                              "startedAt": "2026-01-01T00:00:00Z"}}}]},
    }


RESOURCES = {
    "kind": "APIResourceList", "groupVersion": "v1",
    "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list"], "shortNames": ["po"]},
        {"name": "pods/attach", "singularName": "", "namespaced": True, "kind": "PodAttachOptions",
         "verbs": ["create", "get"]},
        {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions",
         "verbs": ["create", "get"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
         "verbs": ["get"]},
        {"name": "pods/portforward", "singularName": "", "namespaced": True,
         "kind": "PodPortForwardOptions", "verbs": ["create", "get"]},
    ],
}


@dataclass
class App:
    runner: web.AppRunner
    url: str
    target: ProcessTarget
    requests: list[tuple[str, str, Mapping[str, str]]]
    guard: connections.ConnectionGuard

    async def close(self) -> None:
        await self.target.cleanup()
        self.guard.close_all()
        await self.runner.cleanup()


async def start_app(target: ProcessTarget,
                    config: streaming.StreamingConfig | None = None) -> App:
    cfg = config or streaming.StreamingConfig()
    requests: list[tuple[str, str, Mapping[str, str]]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        requests.append((request.method, request.path_qs, dict(request.headers)))
        path = request.path.rstrip("/")
        if path == "/version":
            return web.json_response(discovery.version_doc("v1.32.0-setpoint"))
        if path == "/api":
            return web.json_response(discovery.api_versions(request.host))
        if path == "/apis":
            return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            return web.json_response(RESOURCES)
        prefix = f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}"
        if path == prefix:
            return web.json_response(pod_object())
        if path.startswith(prefix + "/"):
            return await streaming.serve_subresource(request, path[len(prefix) + 1:], target,
                                                     cfg)
        raise web.HTTPNotFound()

    # the server's own edge: its connection guard, and the Status mapping
    guard = connections.ConnectionGuard(limits.Limits())

    @web.middleware
    async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        guard.request_started(transport)
        try:
            return await server_app.status_errors(request, handler(request))
        finally:
            guard.request_finished(transport)

    application = web.Application(middlewares=[edge])
    application.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(application, access_log=None, handle_signals=False,
                           shutdown_timeout=2.0)
    await runner.setup()
    site = connections.GuardedSite(runner, "127.0.0.1", 0, guard)
    await site.start()
    return App(runner, f"http://127.0.0.1:{site.port}", target, requests, guard)


def kubeconfig(url: str, path: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c\n  cluster:\n    server: {url}\n"
        "users:\n- name: u\n  user: {}\n"
        "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
        f"    namespace: {NAMESPACE}\n"
        "current-context: x\n")
    return path
