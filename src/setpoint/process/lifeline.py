"""The child's side of a supervised process: it ends with its parent, and says when it is ready.

A :class:`~setpoint.process.supervisor.Supervisor` starts its child with one end of a
socket pair, named by the environment variable :data:`FD_ENV`, and its own process id in
:data:`PARENT_ENV`. :meth:`Lifeline.from_environment` picks them up (None when the process
was not started so). Then:

- :meth:`Lifeline.bind_to_parent`: on Linux, asks the kernel to send SIGTERM to this process
  when its parent dies (``PR_SET_PDEATHSIG``), then checks that the parent is still the one
  that started it (it may have died before the request: the answer is then False, and the
  caller should exit);
- :meth:`Lifeline.watch`: a daemon thread reads the socket; end of file (the parent closed
  its end, or died: the kernel closes it even after ``kill -9``) calls ``on_lost`` once. A
  thread, so that it works however busy the event loop is;
- :meth:`Lifeline.ready`: tells the parent that the child is ready (a line ``ready``).

Invariants: the socket is not inherited by this process's own children; ``on_lost`` is
called at most once, never after :meth:`Lifeline.close`.

Non-guarantees: ``PR_SET_PDEATHSIG`` is Linux only (elsewhere the socket alone does it); it
follows the *thread* that started the child, so a parent that starts children from a thread
which then ends sends the signal early (the supervisor starts them from its event loop's
thread, which lives as long as the loop).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Final

log = logging.getLogger(__name__)

FD_ENV: Final = "SETPOINT_LIFELINE_FD"
PARENT_ENV: Final = "SETPOINT_PARENT_PID"
READY: Final = b"ready\n"
_PR_SET_PDEATHSIG: Final = 1


class Lifeline:
    """See the module docstring."""

    def __init__(self, sock: socket.socket, parent_pid: int) -> None:
        self._sock = sock
        self.parent_pid = parent_pid
        self._closed = threading.Event()
        self._lost = False
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Lifeline | None:
        env = os.environ if environ is None else environ
        fd_text, parent_text = env.get(FD_ENV), env.get(PARENT_ENV)
        if not fd_text or not parent_text:
            return None
        try:
            fd, parent = int(fd_text), int(parent_text)
            sock = socket.socket(fileno=fd)
        except (ValueError, OSError) as e:
            log.warning("ignoring %s=%s: %s", FD_ENV, fd_text, e)
            return None
        sock.set_inheritable(False)
        return cls(sock, parent)

    def bind_to_parent(self) -> bool:
        """Ask for SIGTERM when the parent dies (Linux); False if it is gone already."""
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
                    log.warning("prctl(PR_SET_PDEATHSIG): %s",
                                os.strerror(ctypes.get_errno()))
            except (OSError, AttributeError) as e:
                log.warning("prctl(PR_SET_PDEATHSIG) unavailable: %s", e)
        return os.getppid() == self.parent_pid

    def watch(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Call ``on_lost`` (from a daemon thread) when the parent's end closes."""
        thread = threading.Thread(target=self._read, args=(on_lost,), daemon=True,
                                  name="parent lifeline")
        thread.start()
        return thread

    def _read(self, on_lost: Callable[[], None]) -> None:
        while not self._closed.is_set():
            try:
                data = self._sock.recv(4096)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                break
        with self._lock:
            if self._closed.is_set() or self._lost:
                return
            self._lost = True
        log.info("the parent process (pid %d) closed the lifeline or is gone; stopping",
                 self.parent_pid)
        on_lost()

    def ready(self) -> None:
        """Tell the parent this process is ready (ignored if the parent is gone)."""
        try:
            self._sock.sendall(READY)
        except OSError:
            pass

    def close(self) -> None:
        with self._lock:
            self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
