"""Stop signals that always end the process: graceful first, then bounded.

A :class:`ShutdownGuard` installs Python-level handlers for SIGINT and SIGTERM (not the event
loop's ``add_signal_handler``: those run only when the loop gets back to its selector, which a
loop kept busy never does; Python-level handlers run in the main thread between bytecodes,
busy loop or not).

- The first signal, or :meth:`ShutdownGuard.trigger` (from any thread; asking again is a
  no-op), schedules the graceful stop into the event loop
  (``loop.call_soon_threadsafe(on_stop)``) and starts a watchdog thread: if the process is
  still running ``timeout`` seconds later, it is ended.
- A second signal ends it at once.

"Ended" means: every ``on_force`` hook is called (to kill child processes, say), a line goes
to stderr, and the process exits with ``os._exit(FORCED_EXIT_CODE)`` (no cleanup, no
flush: whatever was acknowledged is already durable; the rest is abandoned).

Invariants: :meth:`ShutdownGuard.uninstall` (or leaving the ``with`` block) restores the
previous handlers and disarms the watchdog; the guard keeps no state outside itself. Hooks
must be quick and must not block (they run in a signal handler or the watchdog thread). The
guard's lock is reentrant: a handler runs between two bytecodes of whatever the main thread
was doing, so a second signal can arrive while the main thread holds it (in the first
signal's handler, or in :meth:`ShutdownGuard.trigger`); a plain lock would then wait for
itself forever, and the second signal would hang the process instead of ending it.

Non-guarantees: handlers are only installed from the main thread (Python's rule); a process
stuck in one C call that never returns to the interpreter (a blocking system call with
signals masked, say) is ended by the watchdog thread, not by the second signal.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType
from typing import Any, Final

log = logging.getLogger(__name__)

#: the exit code of a process ended by the watchdog or a second signal
FORCED_EXIT_CODE: Final = 1
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

Handler = Callable[[int, FrameType | None], Any] | int | None


class ShutdownGuard:
    """See the module docstring."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_stop: Callable[[], None], *,
                 timeout: float, on_force: Sequence[Callable[[], None]] = (),
                 name: str = "setpoint", signals: Sequence[int] = STOP_SIGNALS,
                 exit: Callable[[int], None] = os._exit) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._loop = loop
        self._on_stop = on_stop
        self.timeout = timeout
        self._on_force = list(on_force)
        self._name = name
        self._signals = tuple(signals)
        self._exit = exit
        self._previous: dict[int, Handler] = {}
        self._lock = threading.RLock()  # reentrant: see the module's invariants
        self._stopping = False
        self._signals_seen = 0
        self._disarmed = threading.Event()
        self._watchdog: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self._stopping

    def add_force_hook(self, hook: Callable[[], None]) -> None:
        self._on_force.append(hook)

    def install(self) -> ShutdownGuard:
        for sig in self._signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        """Restore the previous handlers and disarm the watchdog."""
        self._disarmed.set()
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def __enter__(self) -> ShutdownGuard:
        return self.install()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.uninstall()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        with self._lock:
            self._signals_seen += 1
            again = self._signals_seen > 1
        if again:
            self.force(f"{name} again while stopping")
        self.trigger(name)

    def trigger(self, reason: str = "stop requested") -> None:
        """Ask for a graceful stop, bounded by the watchdog (only the first call counts)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        self._watchdog = threading.Thread(target=self._watch, name=f"{self._name} shutdown",
                                          daemon=True)
        self._watchdog.start()
        try:
            self._loop.call_soon_threadsafe(self._on_stop)
        except RuntimeError:  # the loop is closed: nothing graceful is left to do
            self.force(f"{reason} after the event loop closed")

    def _watch(self) -> None:
        if not self._disarmed.wait(self.timeout):
            self.force(f"not stopped within {self.timeout:g}s")

    def force(self, why: str) -> None:
        """End the process now (see the module docstring)."""
        for hook in self._on_force:
            try:
                hook()
            except Exception as e:  # ending anyway; say why it was incomplete
                _stderr(f"{self._name}: while ending: {e!r}")
        _stderr(f"{self._name}: {why}; exiting now")
        self._exit(FORCED_EXIT_CODE)


def _stderr(line: str) -> None:
    try:
        os.write(sys.stderr.fileno(), (line + "\n").encode(errors="replace"))
    except (OSError, ValueError):
        pass
