"""One running instance of a container: its process, its output, and how it ended.

An :class:`Instance` is started (:meth:`Instance.spawn`) or adopted from a previous agent
(:meth:`Instance.adopt`); either way the runtime then learns of its end through a pidfd
(readable when the process exits, whoever its parent is) and :attr:`Instance.exited`
resolves to an :class:`Exit`.

The process started is the launcher (:mod:`setpoint.agent._launcher`), in a new session,
which becomes the container's supervisor shell; its pid and start time identify the instance
across agent restarts. The program is the supervisor's child (:meth:`Instance.main_pid`),
which is what SIGTERM is sent to, as a container runtime sends it to the container's first
process.

Output: stdout and stderr are FIFOs in the instance's directory, opened read-write by both
the container and the agent, so the container never gets SIGPIPE or EOF when the agent is
away: its writes wait in the pipe (1 MiB where the system allows) until an agent reads them
again. The agent copies them to the :class:`~setpoint.agent.logs.LogWriter`, one read
(:data:`_READ` bytes at most) at a time: an agent killed with -9 between a read and its write
loses that read, nothing else.

How it ended: the exit status the agent reaped (it is the parent), else the status the
supervisor wrote (the agent was restarted meanwhile), else unknown
(``ContainerStatusUnknown``, 137, as the kubelet reports a container it lost). A launcher
that could not start the program wrote why (``StartError``, 128). ``OOMKilled`` when the
container's cgroup counted an OOM kill during the instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from setpoint.agent import cgroups, procs
from setpoint.agent import logs as logmod
from setpoint.agent.spawner import LAUNCHER, Spawner, SpawnerUnavailable

__all__ = ["Exit", "Instance", "LAUNCHER"]

logger = logging.getLogger(__name__)

_F_SETPIPE_SZ: Final = 1031
_PIPE_SIZE: Final = 1 << 20
_READ: Final = 64 * 1024
_READY_FD: Final = 3


@dataclass(frozen=True, slots=True)
class Exit:
    exit_code: int
    reason: str
    message: str = ""


class Instance:
    """See the module docstring. Create with :meth:`spawn` or :meth:`adopt`."""

    def __init__(self, *, directory: Path, number: int, marker: str,
                 cgroup: cgroups.ContainerCgroup | None, log: logmod.LogWriter) -> None:
        self.directory = directory
        self.number = number
        self.marker = marker
        self.cgroup = cgroup
        self.log = log
        self.pid = 0
        self.start_ticks = 0
        self.is_child = False
        #: the exit status as the spawner that forked it reaped it
        self.exit_report: asyncio.Future[int] | None = None
        #: the supervisor has accounted for this instance's end
        self.handled = False
        #: its preStop hook ran (it runs once, whoever stops the instance)
        self.pre_stopped = False
        self.oom_before = cgroup.oom_kills() if cgroup is not None else 0
        self._fds: dict[str, int] = {}
        self._pidfd = -1
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[Exit] = loop.create_future()
        #: resolved once the launcher has executed the program (or has given up)
        self.launched: asyncio.Future[None] = loop.create_future()
        self._on_exit: Callable[[Instance], None] | None = None

    # -- paths -------------------------------------------------------------------------

    @property
    def spec_path(self) -> Path:
        return self.directory / "spec.json"

    @property
    def exit_path(self) -> Path:
        return self.directory / "exit"

    @property
    def start_error_path(self) -> Path:
        return self.directory / "start-error"

    def _fifo(self, stream: str) -> Path:
        return self.directory / stream

    # -- start ---------------------------------------------------------------------------

    def open_output(self) -> None:
        """Open the instance's pipes and copy what arrives to the log."""
        for stream in ("stdout", "stderr"):
            path = self._fifo(stream)
            if not path.exists():
                os.mkfifo(path, 0o600)
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
            self._fds[stream] = fd
            asyncio.get_running_loop().add_reader(fd, self._pump, stream)

    async def spawn(self, spec: dict[str, Any], *, python: str = sys.executable,
                    spawner: Spawner | None = None) -> None:
        """Start the launcher with ``spec`` (see :mod:`setpoint.agent._launcher`): forked by
        ``spawner`` when there is one that works, else as a new process."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for p in (self.exit_path, self.start_error_path):
            p.unlink(missing_ok=True)
        spec = {**spec, "exit_file": str(self.exit_path),
                "start_error": str(self.start_error_path), "ready_fd": _READY_FD}
        fd = os.open(self.spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, json.dumps(spec).encode())
        finally:
            os.close(fd)
        self.open_output()
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            if spawner is not None:
                # The child's own descriptions of its pipes: blocking, unlike the agent's.
                fds = [os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC),
                       os.open(self._fifo("stdout"), os.O_RDWR | os.O_CLOEXEC),
                       os.open(self._fifo("stderr"), os.O_RDWR | os.O_CLOEXEC), ready_w]
                try:
                    self.pid = await spawner.spawn(str(self.spec_path), fds)
                    self.exit_report = spawner.exit_code(self.pid)
                except SpawnerUnavailable as e:
                    logger.warning("starting the launcher directly: %s", e)
                finally:
                    for extra in fds[:3]:
                        os.close(extra)
            if not self.pid:
                self.pid = _posix_spawn(python, str(self.spec_path), self._fifo("stdout"),
                                        self._fifo("stderr"), ready_w)
                self.is_child = True
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
        asyncio.get_running_loop().add_reader(ready_r, self._launch_done, ready_r)
        info = procs.info(self.pid)
        self.start_ticks = info.start_ticks if info is not None else 0
        self._watch()

    def _launch_done(self, fd: int) -> None:
        try:
            if os.read(fd, 1):
                return  # nobody writes: only EOF comes
        except BlockingIOError:
            return
        except OSError:
            pass
        asyncio.get_running_loop().remove_reader(fd)
        os.close(fd)
        if not self.launched.done():
            self.launched.set_result(None)

    def adopt(self, pid: int, start_ticks: int) -> None:
        """Take over an instance a previous agent started (it must have been checked alive)."""
        self.pid, self.start_ticks, self.is_child = pid, start_ticks, False
        self.launched.set_result(None)
        self.open_output()
        self._watch()

    def _watch(self) -> None:
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            asyncio.get_running_loop().call_soon(self._ended)
            return
        asyncio.get_running_loop().add_reader(self._pidfd, self._ended)

    def set_exit_callback(self, callback: Callable[[Instance], None]) -> None:
        """``callback(instance)`` runs (once, in the loop) when the process has exited."""
        self._on_exit = callback

    # -- running -------------------------------------------------------------------------

    def _pump(self, stream: str) -> None:
        fd = self._fds.get(stream)
        if fd is None:
            return
        for _ in range(16):  # at most 1 MiB per wake-up, then let others run
            try:
                data = os.read(fd, _READ)
            except BlockingIOError:
                return
            except OSError as e:
                logger.debug("reading %s of %s: %s", stream, self.directory, e)
                return
            if not data:
                return
            self.log.write(stream, data)

    def main_pid(self) -> int | None:
        """The program's pid (the supervisor's first child), if it still runs."""
        kids = procs.children(self.pid)
        return kids[0] if kids else None

    def running(self) -> bool:
        return not self.exited.done() and procs.alive(self.pid, self.start_ticks)

    def signal_main(self, sig: int) -> None:
        """Send ``sig`` to the program (or, before it exists, to the launcher)."""
        if self.exited.done():
            return
        main = self.main_pid()
        if main is not None:
            procs.send(main, sig)
        else:
            procs.send(self.pid, sig, self.start_ticks)

    def members(self) -> set[int]:
        """Every live process of this instance's container (cgroup and marker). Blocking."""
        pids = set(self.cgroup.pids()) if self.cgroup is not None else set()
        pids |= set(procs.marked(self.marker))
        if procs.alive(self.pid, self.start_ticks):
            pids.add(self.pid)
        return {p for p in pids if p != os.getpid()}

    def kill_all(self) -> int:
        """SIGKILL every process of the container; how many were found. Blocking."""
        if self.cgroup is not None:
            self.cgroup.kill()
        pids = self.members()
        procs.kill_all(pids)
        return len(pids)

    # -- the end -------------------------------------------------------------------------

    def _ended(self) -> None:
        if self._pidfd >= 0:
            loop = asyncio.get_running_loop()
            loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        if self._on_exit is not None:
            callback, self._on_exit = self._on_exit, None
            callback(self)

    async def wait_report(self, timeout: float = 10.0) -> None:
        """Wait (bounded) for the spawner's report of the exit status, if one is coming."""
        if self.exit_report is None or self.exit_report.done():
            return
        with contextlib.suppress(TimeoutError, SpawnerUnavailable):
            async with asyncio.timeout(timeout):
                await asyncio.shield(self.exit_report)

    def reap(self) -> Exit:
        """How the instance ended (call once its process is gone, after :meth:`wait_report`)."""
        status: int | None = None
        report = self.exit_report
        if report is not None and report.done() and not report.cancelled() and (
                report.exception() is None):
            status = report.result()
        if self.is_child:
            try:
                pid, raw = os.waitpid(self.pid, os.WNOHANG)
                if pid == self.pid:
                    status = os.waitstatus_to_exitcode(raw)
                    if status < 0:
                        status = 128 - status  # killed by a signal: 128 + its number
            except ChildProcessError:
                pass
        start_error = _read_json(self.start_error_path)
        if start_error is not None:
            return Exit(int(start_error.get("exitCode", 128)), "StartError",
                        str(start_error.get("message", "")))
        if status is None:
            try:
                status = int(self.exit_path.read_text().strip())
            except (OSError, ValueError):
                return Exit(137, "ContainerStatusUnknown",
                            "The container could not be located when the pod was terminated")
        if self.cgroup is not None and self.cgroup.oom_kills() > self.oom_before:
            return Exit(status, "OOMKilled")
        return Exit(status, "Completed" if status == 0 else "Error")

    def drain(self) -> None:
        """Copy what is left in the pipes to the log, then close them and the log."""
        loop = asyncio.get_running_loop()
        for stream, fd in list(self._fds.items()):
            self._pump(stream)
            while True:  # drain fully: nobody writes any more
                try:
                    data = os.read(fd, _READ)
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                        logger.debug("draining %s: %s", stream, e)
                    break
                if not data:
                    break
                self.log.write(stream, data)
            loop.remove_reader(fd)
            os.close(fd)
            self.log.end_stream(stream)
        self._fds.clear()
        self.log.close()

    def detach(self) -> None:
        """Stop watching (the agent shuts down; the process keeps running)."""
        loop = asyncio.get_running_loop()
        if self._pidfd >= 0:
            loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        for stream, fd in list(self._fds.items()):
            self._pump(stream)
            loop.remove_reader(fd)
            os.close(fd)
        self._fds.clear()
        self.log.close()
        self._on_exit = None


def _posix_spawn(python: str, spec_path: str, stdout: Path, stderr: Path, ready_w: int) -> int:
    return os.posix_spawn(
        python, [python, "-I", "-S", LAUNCHER, spec_path],
        {"PATH": os.defpath, "LC_ALL": "C.UTF-8"},
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(stdout), os.O_RDWR, 0),
            (os.POSIX_SPAWN_OPEN, 2, str(stderr), os.O_RDWR, 0),
            (os.POSIX_SPAWN_DUP2, ready_w, _READY_FD),
        ],
        setsid=True,
        setsigmask=(),
        setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM),
    )


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
