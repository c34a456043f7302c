"""``kubectl exec``: a command in a running container's context.

The command runs through the launcher in ``exec`` mode: it joins the container's cgroups,
enters its network, UTS and mount namespaces and its root (with namespace isolation), takes
its environment and working directory, and carries its marker, so it is the container's for
every purpose — deleting the pod kills it too. Without namespaces, paths under a
``mountPath`` in the command are rewritten to the volume's directory, as for the container.

A session has ``stdout`` and ``stderr`` readers, a ``stdin`` writer when asked for, and
:meth:`ProcessExec.wait` for the exit code. With ``tty`` the command gets a pseudo-terminal
(its controlling terminal, in a new session): output arrives on ``stdout`` only and
:meth:`ProcessExec.resize` sets the window size. A command that cannot be started ends with
exit code 126 and the reason on stderr, as ``kubectl exec`` shows it.

Bounded: at most ``max_execs`` sessions at once (exec probes included); beyond, starting one
fails at once rather than queueing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import pty
import secrets
import struct
import termios
from typing import TYPE_CHECKING, Any

from setpoint.agent import instances
from setpoint.agent import runtime as rt

if TYPE_CHECKING:
    from setpoint.agent.process import ProcessRuntime, _Pod

__all__ = ["ProcessExec", "start_exec"]

_READ = 64 * 1024


class ProcessExec:
    """One exec session (see the module docstring)."""

    def __init__(self, proc: asyncio.subprocess.Process, *, stdout: asyncio.StreamReader,
                 stderr: asyncio.StreamReader | None,
                 stdin: rt.InputWriter | None,
                 master: int | None, spec_path: str, release: asyncio.Semaphore) -> None:
        self._proc = proc
        self.stdout = stdout
        self.stderr = stderr
        self.stdin = stdin
        self._master = master
        self._spec_path = spec_path
        self._release = release
        self._closed = False

    async def wait(self) -> int:
        code = await self._proc.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._spec_path)
        return 128 - code if code < 0 else code

    def resize(self, width: int, height: int) -> None:
        if self._master is not None and width > 0 and height > 0:
            fcntl.ioctl(self._master, termios.TIOCSWINSZ,
                        struct.pack("HHHH", min(height, 65535), min(width, 65535), 0, 0))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
            await self._proc.wait()
            if self.stdin is not None:
                self.stdin.close()
            if self._master is not None:
                asyncio.get_running_loop().remove_reader(self._master)
                os.close(self._master)
                self._master = None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._spec_path)
            self._release.release()


class TerminalInput:
    """What is typed into a command's terminal, written to the pseudo-terminal's controller
    side (``fd``, non-blocking, owned by the session) as it accepts it.

    Not through the event loop's pipe transport: uvloop's reads the descriptor it writes to
    notice its end, and here the same descriptor carries the command's output, which it
    would swallow. At most ``limit`` bytes wait; :meth:`drain` waits while more do. Input
    for a terminal whose command has gone is discarded. :meth:`write_eof` ends the input
    (nothing more is written; a terminal has no end of input of its own).
    """

    def __init__(self, fd: int, limit: int = _READ) -> None:
        self._fd = fd
        self._limit = limit
        self._buffer = bytearray()
        self._closed = False
        self._writing = False
        self._room = asyncio.Event()
        self._room.set()
        self._loop = asyncio.get_running_loop()

    def write(self, data: bytes) -> None:
        if self._closed or not data:
            return
        self._buffer += data
        if not self._writing:
            self._flush()
            if self._buffer and not self._closed:
                self._writing = True
                self._loop.add_writer(self._fd, self._flush)
        if len(self._buffer) > self._limit:
            self._room.clear()

    def _flush(self) -> None:
        try:
            written = os.write(self._fd, self._buffer)
        except BlockingIOError:
            return
        except OSError:  # the terminal is gone: nobody reads the rest
            written = len(self._buffer)
        del self._buffer[:written]
        if len(self._buffer) <= self._limit:
            self._room.set()
        if not self._buffer and self._writing:
            self._writing = False
            self._loop.remove_writer(self._fd)

    async def drain(self) -> None:
        await self._room.wait()

    def write_eof(self) -> None:
        self._closed = True

    def close(self) -> None:
        self._closed = True
        self._buffer.clear()
        self._room.set()
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._fd)

    async def wait_closed(self) -> None:
        return None


def _pump_pty(master: int, reader: asyncio.StreamReader) -> None:
    try:
        data = os.read(master, _READ)
    except BlockingIOError:
        return
    except OSError as e:  # EIO: the terminal's last user is gone
        if e.errno != errno.EIO:
            reader.set_exception(e)
        data = b""
    if data:
        reader.feed_data(data)
    else:
        asyncio.get_running_loop().remove_reader(master)
        reader.feed_eof()


async def start_exec(runtime: ProcessRuntime, p: _Pod, container: str, command: list[str], *,
                     stdin: bool, tty: bool) -> ProcessExec:
    if not command or not all(isinstance(a, str) for a in command):
        raise ValueError("exec needs a command")
    if p.container_spec(container) is None:
        raise rt.ContainerNotFound(f"container {container} is not valid for pod {p.rec.name}")
    inst = p.instances.get(container)
    launch = p.launch.get(container)
    if (inst is None or inst.exited.done() or not inst.launched.done() or launch is None
            or not inst.running()):
        raise rt.ContainerNotRunning(f'container not found ("{container}")')
    slots = runtime.exec_slots()
    if slots.locked():
        raise rt.AgentError(f"too many exec sessions ({runtime.config.max_execs}) on this node")
    await slots.acquire()
    try:
        return await _spawn(runtime, inst, launch, command, stdin=stdin, tty=tty, slots=slots)
    except BaseException:
        slots.release()
        raise


async def _spawn(runtime: ProcessRuntime, inst: instances.Instance, launch: dict[str, Any],
                 command: list[str], *, stdin: bool, tty: bool, slots: asyncio.Semaphore
                 ) -> ProcessExec:
    from setpoint.agent import supervisor

    argv = supervisor.rewrite_paths(command, launch.get("rewrites") or [])
    spec = {"mode": "exec", "argv": argv, "env": launch["env"], "cwd": launch["cwd"],
            "cgroups": inst.cgroup.procs_files() if inst.cgroup is not None else [],
            "target_pid": inst.pid if launch.get("namespaces") else None, "tty": tty,
            "start_error": os.devnull}
    spec_path = str(inst.directory / f"exec-{secrets.token_hex(6)}.json")
    fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    launcher = [runtime.config.python, "-I", "-S", instances.LAUNCHER, spec_path]
    loop = asyncio.get_running_loop()
    if not tty:
        proc = await asyncio.create_subprocess_exec(
            *launcher, stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, env={"PATH": os.defpath})
        assert proc.stdout is not None
        assert proc.stderr is not None
        return ProcessExec(proc, stdout=proc.stdout, stderr=proc.stderr,
                           stdin=proc.stdin if stdin else None, master=None,
                           spec_path=spec_path, release=slots)
    master, slave = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(*launcher, stdin=slave, stdout=slave,
                                                    stderr=slave, env={"PATH": os.defpath})
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    reader = asyncio.StreamReader(limit=_READ)
    loop.add_reader(master, _pump_pty, master, reader)
    writer = TerminalInput(master) if stdin else None
    return ProcessExec(proc, stdout=reader, stderr=None, stdin=writer, master=master,
                       spec_path=spec_path, release=slots)
