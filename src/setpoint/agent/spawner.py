"""Starting container processes cheaply: a small forking helper (a "zygote").

Starting the launcher as a new interpreter costs tens of milliseconds of CPU per container;
forking an already running, small one costs about one. :class:`Spawner` runs one helper
process (:func:`setpoint.agent._launcher.serve`) per runtime and asks it, over a
``SOCK_SEQPACKET`` socket, to fork a launcher with the given descriptors; the helper answers
with the pid, and reports each child's exit status when it ends (the helper is their
parent: the agent is not, so it learns exit statuses from it).

If the helper cannot be started or dies, :meth:`Spawner.spawn` raises
:class:`SpawnerUnavailable` and the runtime starts the launcher directly instead. When the
agent goes away the helper's socket closes and it exits; containers keep running (their exit
status then comes from what their supervisor shell wrote, as for any adopted container).

Bounds: requests wait for their answer at most ``timeout`` seconds; exit statuses not yet
claimed are kept for at most ``max_unclaimed`` processes (the oldest are forgotten).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any, Final

__all__ = ["Spawner", "SpawnerUnavailable"]

logger = logging.getLogger(__name__)

_SOCK_FD = 3
#: The launcher script (the spawner is its ``--serve`` mode).
LAUNCHER: Final = str(Path(__file__).with_name("_launcher.py"))


class SpawnerUnavailable(Exception):
    pass


def _start_helper(python: str, sock_fd: int) -> int:
    return os.posix_spawn(
        python, [python, "-I", "-S", LAUNCHER, "--serve", str(_SOCK_FD)],
        {"PATH": os.defpath, "LC_ALL": "C.UTF-8"},
        file_actions=[(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                      (os.POSIX_SPAWN_DUP2, sock_fd, _SOCK_FD)],
        setsid=True, setsigmask=())


class Spawner:
    def __init__(self, *, python: str = sys.executable, timeout: float = 30.0,
                 max_unclaimed: int = 10_000) -> None:
        self._python = python
        self._timeout = timeout
        self._max_unclaimed = max_unclaimed
        self._sock: socket.socket | None = None
        self._pid = 0
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._answers: dict[int, asyncio.Future[int]] = {}
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._unclaimed: collections.OrderedDict[int, int] = collections.OrderedDict()
        self._lock = asyncio.Lock()
        self._broken = False

    async def _ensure(self) -> socket.socket:
        if self._broken:
            raise SpawnerUnavailable("the spawner failed before")
        if self._sock is not None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._pid = _start_helper(self._python, theirs.fileno())
        except OSError as e:
            ours.close()
            self._broken = True
            raise SpawnerUnavailable(f"cannot start the spawner: {e}") from e
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._reader = asyncio.create_task(self._read(ours), name="spawner-reader")
        return ours

    async def _read(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await loop.sock_recv(sock, 65536)
                if not data:
                    break
                message: dict[str, Any] = json.loads(data)
                if "exited" in message:
                    pid, code = int(message["exited"]), int(message["code"])
                    waiter = self._exits.pop(pid, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(code)
                    else:
                        self._unclaimed[pid] = code
                        while len(self._unclaimed) > self._max_unclaimed:
                            self._unclaimed.popitem(last=False)
                elif ((answer := self._answers.pop(int(message.get("id", 0)), None)) is not None
                      and not answer.done()):
                    answer.set_result(int(message["pid"]))
        except (OSError, ValueError) as e:
            logger.warning("the spawner's socket failed: %s", e)
        finally:
            self._fail_all()

    def _fail_all(self) -> None:
        self._broken = True
        for fut in [*self._answers.values(), *self._exits.values()]:
            if not fut.done():
                fut.set_exception(SpawnerUnavailable("the spawner went away"))
        self._answers.clear()
        self._exits.clear()

    async def spawn(self, spec_path: str, fds: list[int]) -> int:
        """Fork a launcher for ``spec_path`` with ``fds`` as its 0, 1, 2 (and 3); its pid."""
        async with self._lock:
            sock = await self._ensure()
            request_id = next(self._ids)
            answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._answers[request_id] = answer
            try:
                socket.send_fds(sock, [json.dumps({"id": request_id,
                                                   "spec": spec_path}).encode()], fds)
            except OSError as e:
                self._answers.pop(request_id, None)
                self._broken = True
                raise SpawnerUnavailable(f"the spawner is gone: {e}") from e
        try:
            async with asyncio.timeout(self._timeout):
                return await answer
        except TimeoutError as e:
            self._broken = True
            raise SpawnerUnavailable("the spawner did not answer") from e

    def exit_code(self, pid: int) -> asyncio.Future[int]:
        """Resolves to ``pid``'s exit status as the spawner reaped it (an exception when the
        spawner went away first)."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if pid in self._unclaimed:
            fut.set_result(self._unclaimed.pop(pid))
        elif self._broken:
            fut.set_exception(SpawnerUnavailable("the spawner went away"))
        else:
            self._exits[pid] = fut
        return fut

    async def close(self) -> None:
        """Stop the spawner (its children keep running)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._pid:
            with contextlib.suppress(ChildProcessError):
                await asyncio.to_thread(os.waitpid, self._pid, 0)
            self._pid = 0
        self._fail_all()
