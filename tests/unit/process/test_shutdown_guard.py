"""A ShutdownGuard's handler may run again inside itself: Python runs a signal handler
between any two bytecodes of the main thread, so a second signal can arrive while the
first one's handler (or ``trigger``) holds the guard's lock."""

from __future__ import annotations

import asyncio
import signal
import threading

from setpoint.process import FORCED_EXIT_CODE, ShutdownGuard


def test_a_second_signal_while_the_guard_is_locked_still_ends_the_process() -> None:
    loop = asyncio.new_event_loop()
    ended = threading.Event()
    codes: list[int] = []

    def exit(code: int) -> None:
        codes.append(code)
        ended.set()

    guard = ShutdownGuard(loop, lambda: None, timeout=3600, exit=exit)
    try:
        def signals_while_locked() -> None:
            guard._handle(signal.SIGTERM, None)  # the first signal: a graceful stop begins
            with guard._lock:  # the main thread inside the guard's critical section...
                guard._handle(signal.SIGTERM, None)  # ...when the second signal's handler runs

        # in a thread of its own, so that a guard waiting for itself fails this test
        # instead of hanging it
        thread = threading.Thread(target=signals_while_locked, daemon=True)
        thread.start()
        assert ended.wait(30), "the second signal waited for the guard's own lock"
        thread.join(30)
        assert codes == [FORCED_EXIT_CODE]
        assert guard.stopping
    finally:
        guard.uninstall()
        loop.close()
