"""A dedicated thread that owns one SQLite connection and runs jobs for the event loop.

Jobs run in submission order. The thread takes every job already queued (up to
``max_batch``) and hands them to ``run_batch`` together: for the writer that is group commit,
for the reader a plain loop. Results come back through ``loop.call_soon_threadsafe``; the
optional ``on_batch`` hook sees each batch's outcomes on the loop *before* any of the batch's
futures resolve, which is where the writer publishes events.

Invariants: a job's future resolves only after ``run_batch`` returned for its batch; batches
are delivered to the loop in the order they ran; :meth:`stop` runs every job submitted
before it, then closes the connection and joins the thread. A cancelled future does not
cancel its job.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from setpoint.storage.interface import StorageError, Unavailable

J = TypeVar("J")
R = TypeVar("R")

Outcomes = list[R | StorageError]


class _Stop:
    """Queued by :meth:`ConnectionThread.stop`: the thread finishes the jobs before it and exits."""


_STOP = _Stop()


class ConnectionThread(Generic[J, R]):
    """Runs ``run_batch(connection, jobs)`` on its own thread; see the module docstring."""

    def __init__(self, *, name: str, connect: Callable[[], sqlite3.Connection],
                 run_batch: Callable[[sqlite3.Connection, Sequence[J]], Outcomes[R]],
                 max_batch: int = 1,
                 on_batch: Callable[[Sequence[J], Outcomes[R]], None] | None = None) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be positive, got {max_batch}")
        self._name = name
        self._connect = connect
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._on_batch = on_batch
        self._queue: queue.SimpleQueue[tuple[J, asyncio.Future[R]] | _Stop] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._accepting = False

    async def start(self) -> None:
        """Start the thread and open the connection there; raises what ``connect`` raised."""
        if self._thread is not None:
            raise RuntimeError(f"{self._name} already started")
        self._loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = self._loop.create_future()
        self._stopped = self._loop.create_future()
        self._thread = threading.Thread(target=self._main, args=(started,), name=self._name,
                                        daemon=True)
        self._thread.start()
        try:
            await started
        except BaseException:
            await self._stopped
            self._thread.join()
            raise
        self._accepting = True

    def submit(self, job: J) -> asyncio.Future[R]:
        """Queue a job; raises :class:`Unavailable` once :meth:`stop` has been called."""
        if not self._accepting or self._loop is None:
            raise Unavailable(f"{self._name} is not running")
        future: asyncio.Future[R] = self._loop.create_future()
        self._queue.put((job, future))
        return future

    async def stop(self) -> None:
        """Finish the queued jobs, close the connection, join the thread. Idempotent."""
        if not self._accepting:
            return
        self._accepting = False
        self._queue.put(_STOP)
        assert self._stopped is not None
        assert self._thread is not None
        await self._stopped
        self._thread.join()

    # -- on the thread ------------------------------------------------------------------

    def _main(self, started: asyncio.Future[None]) -> None:
        try:
            conn = self._connect()
        except BaseException as e:
            self._post(_fail, started, e)
            self._post(_resolve, self._stopped, None)
            return
        self._post(_resolve, started, None)
        try:
            self._serve(conn)
        finally:
            conn.close()
            self._post(_resolve, self._stopped, None)

    def _serve(self, conn: sqlite3.Connection) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, _Stop):
                return
            batch = [item]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, _Stop):
                    stop = True
                    break
                batch.append(item)
            jobs = [job for job, _ in batch]
            try:
                outcomes = self._run_batch(conn, jobs)
            except Exception as e:
                outcomes = [_unavailable(self._name, e) for _ in jobs]
            self._post(self._deliver, batch, outcomes)
            if stop:
                return

    def _post(self, callback: Callable[..., None], *args: object) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            pass  # the loop is closed: nobody is left to receive the result

    # -- on the loop ---------------------------------------------------------------------

    def _deliver(self, batch: list[tuple[J, asyncio.Future[R]]], outcomes: Outcomes[R]) -> None:
        try:
            if self._on_batch is not None:
                self._on_batch([job for job, _ in batch], outcomes)
        finally:  # a failing hook must not leave the batch's callers waiting forever
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    _fail(future, outcome)
                else:
                    _resolve(future, outcome)


def _resolve(future: asyncio.Future[R] | None, result: R) -> None:
    if future is not None and not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[R] | None, error: BaseException) -> None:
    if future is not None and not future.done():
        future.set_exception(error)


def _unavailable(name: str, cause: Exception) -> Unavailable:
    error = Unavailable(f"{name}: {cause}")
    error.__cause__ = cause
    return error
