"""A child process owned by this one: started with it, restarted when it dies, stopped with it.

:meth:`Supervisor.run` starts ``argv`` with one end of a socket pair (see
:mod:`setpoint.process.lifeline`, which the child uses to end with its parent and to say
when it is ready) and watches it until :meth:`Supervisor.stop`:

- the child runs in a session of its own, so a terminal's Ctrl-C reaches only the parent,
  which stops the child itself, in order;
- when the child exits on its own, or cannot be started (``OSError``: out of file
  descriptors or processes, say), it is started again after a backoff (``restart_backoff``
  doubling up to ``max_restart_backoff``; back to the start once a child has run for
  ``stable_after`` seconds);
- on :meth:`Supervisor.stop`, its end of the socket is closed and the child gets SIGTERM; if
  it has not exited ``stop_timeout`` seconds later, SIGKILL.

Invariants: when :meth:`Supervisor.run` returns, raises or is cancelled, the child has exited
and been reaped (at worst killed): no child is left behind by this supervisor. If this
process itself dies (even by ``kill -9``), the child learns it from the socket (and on Linux
from ``PR_SET_PDEATHSIG``) and ends. :meth:`Supervisor.kill_now` may be called from any
thread or a signal handler.

Non-guarantees: the child's output is not captured (it inherits this process's stdout and
stderr); readiness is what the child reports, nothing is probed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

from setpoint.process import lifeline

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisorConfig:
    #: a name for logs
    name: str
    #: the command line of the child
    argv: tuple[str, ...]
    #: added to this process's environment for the child
    env: Mapping[str, str] = field(default_factory=dict)
    #: seconds between SIGTERM and SIGKILL when stopping
    stop_timeout: float = 15.0
    #: seconds before the first restart; doubled each time up to ``max_restart_backoff``
    restart_backoff: float = 1.0
    max_restart_backoff: float = 30.0
    #: a child that ran this long is restarted after ``restart_backoff`` again
    stable_after: float = 60.0

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("argv must not be empty")
        if min(self.stop_timeout, self.restart_backoff, self.stable_after) <= 0:
            raise ValueError("timeouts and backoffs must be positive")
        if self.max_restart_backoff < self.restart_backoff:
            raise ValueError("max_restart_backoff must be at least restart_backoff")


class Supervisor:
    """See the module docstring."""

    def __init__(self, config: SupervisorConfig) -> None:
        self.config = config
        #: the current child's process id (None between children)
        self.pid: int | None = None
        #: every child started, in order, and the exit codes of those that ended
        self.pids: list[int] = []
        self.exit_codes: list[int] = []
        #: attempts that could not start a child at all
        self.start_failures = 0
        #: set while the current child has said it is ready
        self.ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._process: asyncio.subprocess.Process | None = None

    @property
    def restarts(self) -> int:
        return max(len(self.pids) - 1, 0)

    def stop(self) -> None:
        """Ask :meth:`run` to stop the child and return."""
        self._stopping.set()

    async def wait_ready(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def kill_now(self) -> None:
        """SIGKILL the current child, if any (for a process about to end abruptly)."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)

    async def run(self) -> None:
        """Run the child, restarting it, until :meth:`stop`; see the module docstring."""
        loop = asyncio.get_running_loop()
        delay = self.config.restart_backoff
        try:
            while not self._stopping.is_set():
                started = loop.time()
                try:
                    code = await self._run_once()
                except OSError as e:  # could not start it (out of file descriptors, say)
                    self.start_failures += 1
                    log.warning("%s could not be started: %s; trying again in %gs",
                                self.config.name, e, delay)
                else:
                    if self._stopping.is_set():
                        return
                    ran = loop.time() - started
                    if ran >= self.config.stable_after:
                        delay = self.config.restart_backoff
                    log.warning("%s (pid %s) exited with code %s after %.1fs; restarting in "
                                "%gs", self.config.name, self.pids[-1], code, ran, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
                delay = min(delay * 2, self.config.max_restart_backoff)
        finally:
            self.kill_now()
            if self._process is not None:
                await self._process.wait()

    async def _run_once(self) -> int:
        ours, theirs = socket.socketpair()
        try:
            env = {**os.environ, **self.config.env,
                   lifeline.FD_ENV: str(theirs.fileno()),
                   lifeline.PARENT_ENV: str(os.getpid())}
            process = await asyncio.create_subprocess_exec(
                *self.config.argv, stdin=subprocess.DEVNULL, env=env,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._process = process
        self.pid = process.pid
        self.pids.append(process.pid)
        log.info("%s started (pid %d)", self.config.name, process.pid)
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        try:
            async with asyncio.TaskGroup() as group:
                reports = group.create_task(self._read_reports(reader))
                exited = group.create_task(process.wait())
                stopping = group.create_task(self._stopping.wait())
                await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not exited.done():
                    await self._terminate(process, writer)
                reports.cancel()
                stopping.cancel()
        finally:
            writer.close()
            self.ready.clear()
            self.pid = None
        code = process.returncode if process.returncode is not None else -1
        self.exit_codes.append(code)
        return code

    async def _read_reports(self, reader: asyncio.StreamReader) -> None:
        while True:
            line = await reader.readline()
            if not line:
                return
            if line == lifeline.READY:
                self.ready.set()

    async def _terminate(self, process: asyncio.subprocess.Process,
                         writer: asyncio.StreamWriter) -> None:
        writer.close()  # the child sees the end of its lifeline
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), self.config.stop_timeout)
        except TimeoutError:
            log.warning("%s (pid %d) did not stop within %gs; killing it", self.config.name,
                        process.pid, self.config.stop_timeout)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
