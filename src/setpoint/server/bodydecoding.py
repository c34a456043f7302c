"""Request bodies decoded without holding the event loop for long.

A JSON body decodes in orjson's C code, about 70 ms for the largest one taken (3 MiB of small
fields), and holds the interpreter throughout, in a thread or not. YAML and protobuf bodies
are decoded by Python code: a YAML body of 3 MiB takes 1.3 to 5 s, a protobuf one 0.4 s, and
on the event loop every other client would wait that long. :class:`BodyDecoder`
decodes those, when larger than ``threshold`` bytes, in a worker thread instead: the event loop
keeps its turn at the interpreter every few milliseconds (Python's switch interval) while the
thread works. Smaller bodies, and JSON of any size, are decoded at once, which is cheaper than
a hand-over to a thread.

Invariants: at most ``workers`` bodies are decoded in threads at once; a request that finds
them all busy waits for one (its body is already read and bounded in size). A decode whose
request is cancelled (its client went away) runs to its end in its thread, and keeps its
place until then, so cancelled requests cannot pile up threads. The answer, and every error
(a Status from :func:`~setpoint.server.negotiation.decode_body`), is the same as decoding on
the event loop. The threads are the event loop's default executor's, shut down with the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

from setpoint.server import negotiation

#: bodies of these types decode in Python code, slowly enough to be worth a thread when large
THREADED_TYPES: Final = negotiation.YAML_BODY_TYPES | {negotiation.PROTOBUF}


class BodyDecoder:
    """Decodes request bodies; see the module docstring."""

    def __init__(self, *, threshold: int = 64 * 1024, workers: int = 2) -> None:
        if threshold < 0 or workers < 1:
            raise ValueError("threshold must be at least 0 and workers at least 1")
        self.threshold = threshold
        self.workers = workers
        self._slots: asyncio.Semaphore | None = None
        #: bodies decoded in a thread so far (informational, for tests and metrics)
        self.threaded = 0

    async def decode(self, raw: bytes, content_type: str) -> Any:
        """``raw`` decoded as ``content_type`` (see
        :func:`~setpoint.server.negotiation.decode_body`)."""
        if len(raw) <= self.threshold or content_type not in THREADED_TYPES:
            return negotiation.decode_body(raw, content_type)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        slots = self._slots
        loop = asyncio.get_running_loop()
        await slots.acquire()

        def decode_and_release() -> Any:
            try:
                return negotiation.decode_body(raw, content_type)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(slots.release)

        try:
            future = loop.run_in_executor(None, decode_and_release)
        except BaseException:
            slots.release()
            raise
        self.threaded += 1
        # shielded: a cancelled request leaves the decode running, and its place taken,
        # until the thread is done (the thread releases it)
        return await asyncio.shield(future)
