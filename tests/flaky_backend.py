"""A memory backend that fails when a test tells it to, for the storage-error paths."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from setpoint.storage import MemoryBackend


class FlakyBackend(MemoryBackend):
    """Each fault list is consumed in order, one entry per call of its kind; an entry of
    ``None`` lets its call through."""

    def __init__(self) -> None:
        super().__init__()
        #: raised by the running storage watch right after it yields its next item
        self.watch_faults: list[Exception | None] = []
        #: raised by the next calls of current_revision and list
        self.read_faults: list[Exception | None] = []
        #: raised by the next calls of get, create, update and delete
        self.write_faults: list[Exception | None] = []
        #: each update first lets "another server" write the same key: the function turns
        #: the stored object into what that other writer stores (None: no interference)
        self.interferences: list[Callable[[dict[str, Any]], dict[str, Any]] | None] = []
        self.watches = 0

    def watch(self, prefix: str, start_revision: int, *, progress: bool = False) -> Any:
        self.watches += 1
        return self._faulty(super().watch(prefix, start_revision, progress=progress))

    async def _faulty(self, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in stream:
            yield item
            self._fail(self.watch_faults)

    async def current_revision(self) -> int:
        self._fail(self.read_faults)
        return await super().current_revision()

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        self._fail(self.read_faults)
        return await super().list(*args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        self._fail(self.write_faults)
        return await super().get(*args, **kwargs)

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        self._fail(self.write_faults)
        return await super().create(*args, **kwargs)

    async def update(self, key: str, value: bytes, expected_revision: int) -> Any:
        self._fail(self.write_faults)
        if self.interferences:
            other = self.interferences.pop(0)
            current = await super().get(key)
            if other is not None and current is not None:
                await super().update(key, orjson.dumps(other(orjson.loads(current.value))),
                                     current.mod_revision)
        return await super().update(key, value, expected_revision)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        self._fail(self.write_faults)
        return await super().delete(*args, **kwargs)

    @staticmethod
    def _fail(faults: list[Exception | None]) -> None:
        if faults:
            fault = faults.pop(0)
            if fault is not None:
                raise fault
