"""Random operation sequences against every backend, checked against a plain list model.

The model is the log itself: a list of the events the backend acknowledged. Every read is
answered from it, so the machine checks that revisions strictly increase, that a
compare-and-swap succeeds iff its revision is the key's current one, that reads at a
revision see the log's prefix, that a watch from N replays exactly the log's suffix under
its prefix and then goes live, and that compacted history raises ``Expired`` (reads below
the compacted revision, watches from at or below it).

Hypothesis drives rules synchronously, so each machine runs its backend on a private event
loop, closed in ``teardown``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from setpoint.storage import (
    Event,
    EventType,
    Expired,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    RevisionConflict,
    StorageConfig,
    create_backend,
)
from tests.integration.storage.storage_testkit import take

T = TypeVar("T")

# "/ab" sits next to the "/a/" prefix without being under it; "/a" covers both.
KEYS = st.sampled_from(["/a/1", "/a/2", "/ab", "/b/1"])
PREFIXES = st.sampled_from(["", "/a", "/a/", "/b/"])
VALUES = st.binary(max_size=4)


class Model:
    """The acknowledged log, and what every read must answer from it."""

    def __init__(self) -> None:
        self.log: list[Event] = []
        self.compacted = 0

    @property
    def revision(self) -> int:
        return self.log[-1].revision if self.log else 0

    def value_at(self, key: str, revision: int) -> KeyValue | None:
        value: KeyValue | None = None
        for event in self.log:
            if event.revision > revision:
                break
            if event.kv.key == key:
                value = None if event.type is EventType.DELETE else event.kv
        return value

    def live(self, key: str) -> KeyValue | None:
        return self.value_at(key, self.revision)

    def listing(self, prefix: str, revision: int) -> list[KeyValue]:
        keys = sorted({e.kv.key for e in self.log if e.kv.key.startswith(prefix)})
        values = (self.value_at(key, revision) for key in keys)
        return [kv for kv in values if kv is not None]

    def suffix(self, prefix: str, start: int) -> list[Event]:
        return [e for e in self.log if e.revision >= start and e.kv.key.startswith(prefix)]

    def record(self, event: Event) -> None:
        assert event.revision > self.revision, "revisions must strictly increase"
        self.log.append(event)


class StorageMachine(RuleBasedStateMachine):
    kind: ClassVar[str] = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = tempfile.TemporaryDirectory()
        self.backend = create_backend(self.config(Path(self.directory.name)))
        self.model = Model()
        self.run(self.backend.start())

    def config(self, directory: Path) -> StorageConfig:
        """The backend's configuration; ``directory`` belongs to this run."""
        path = directory / "machine.db" if self.kind == "sqlite" else None
        return StorageConfig(kind=self.kind, path=path,  # type: ignore[arg-type]
                             synchronous="NORMAL")

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            self.run(self.backend.close())
            self.run(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
            self.directory.cleanup()

    # -- writes --------------------------------------------------------------------------

    @rule(key=KEYS, value=VALUES)
    def create(self, key: str, value: bytes) -> None:
        current = self.model.live(key)
        if current is not None:
            with pytest.raises(KeyExists) as caught:
                self.run(self.backend.create(key, value))
            assert caught.value.current == current
            return
        kv = self.run(self.backend.create(key, value))
        assert kv.create_revision == kv.mod_revision
        self.model.record(Event(EventType.PUT, kv, None))
        assert kv == KeyValue(key, value, kv.mod_revision, kv.mod_revision)

    @rule(key=KEYS, value=VALUES, offset=st.sampled_from([0, 0, -1, 1, 2]))
    def update(self, key: str, value: bytes, offset: int) -> None:
        current = self.model.live(key)
        expected = (current.mod_revision if current else self.model.revision) + offset
        if current is None:
            with pytest.raises(KeyNotFound):
                self.run(self.backend.update(key, value, expected))
        elif expected != current.mod_revision:
            with pytest.raises(RevisionConflict) as caught:
                self.run(self.backend.update(key, value, expected))
            assert caught.value.current == current
        else:
            kv = self.run(self.backend.update(key, value, expected))
            self.model.record(Event(EventType.PUT, kv, current))
            assert kv == KeyValue(key, value, current.create_revision, kv.mod_revision)

    @rule(key=KEYS, compare=st.sampled_from(["none", "right", "wrong"]))
    def delete(self, key: str, compare: str) -> None:
        current = self.model.live(key)
        expected = {"none": None, "right": current.mod_revision if current else 1,
                    "wrong": (current.mod_revision if current else 1) + 1}[compare]
        if current is None:
            with pytest.raises(KeyNotFound):
                self.run(self.backend.delete(key, expected))
        elif expected is not None and expected != current.mod_revision:
            with pytest.raises(RevisionConflict):
                self.run(self.backend.delete(key, expected))
        else:
            kv = self.run(self.backend.delete(key, expected))
            self.model.record(Event(EventType.DELETE, kv, current))
            assert kv == KeyValue(key, current.value, current.create_revision, kv.mod_revision)

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.model.revision), label="compact to")
        self.run(self.backend.compact(target))
        self.model.compacted = max(self.model.compacted, target)

    # -- reads ---------------------------------------------------------------------------

    def _draw_revision(self, data: st.DataObject) -> int:
        return data.draw(st.integers(0, self.model.revision + 1), label="revision")

    @rule(key=KEYS, data=st.data())
    def get_at(self, key: str, data: st.DataObject) -> None:
        revision = self._draw_revision(data)
        if revision == 0:
            assert self.run(self.backend.get(key, revision)) == self.model.live(key)
        elif revision < self.model.compacted:
            with pytest.raises(Expired):
                self.run(self.backend.get(key, revision))
        elif revision > self.model.revision:
            with pytest.raises(FutureRevision):
                self.run(self.backend.get(key, revision))
        else:
            assert self.run(self.backend.get(key, revision)) == self.model.value_at(key,
                                                                                    revision)

    @rule(prefix=PREFIXES, data=st.data())
    def list_at(self, prefix: str, data: st.DataObject) -> None:
        revision = self._draw_revision(data)
        if 0 < revision < self.model.compacted:
            with pytest.raises(Expired):
                self.run(self.backend.list(prefix, revision=revision))
            return
        if revision > self.model.revision:
            with pytest.raises(FutureRevision):
                self.run(self.backend.list(prefix, revision=revision))
            return
        at = revision or self.model.revision
        expected = self.model.listing(prefix, at)
        result = self.run(self.backend.list(prefix, revision=revision))
        assert result.kvs == expected
        assert result.revision == at
        assert not result.more
        pages = self.run(self._pages(prefix, at))
        assert pages == expected

    async def _pages(self, prefix: str, revision: int) -> list[KeyValue]:
        kvs: list[KeyValue] = []
        start_after: str | None = None
        while True:
            page = await self.backend.list(prefix, revision=revision, start_after=start_after,
                                           limit=2)
            kvs.extend(page.kvs)
            if not page.more:
                return kvs
            start_after = page.kvs[-1].key

    @rule(prefix=PREFIXES, data=st.data())
    def watch_from(self, prefix: str, data: st.DataObject) -> None:
        start = self._draw_revision(data)
        stream = self.backend.watch(prefix, start)
        if max(start, 1) <= self.model.compacted:
            with pytest.raises(Expired):
                self.run(anext(stream))
            return
        expected = self.model.suffix(prefix, max(start, 1))
        assert self.run(take(stream, len(expected))) == expected
        # Then live: the next event under the prefix must be the next write under it.
        marker = prefix + "~marker"
        current = self.model.live(marker)
        if current is None:
            self.create(marker, b"m")
        else:
            self.update(marker, b"m", 0)
        assert self.run(take(stream, 1)) == [self.model.log[-1]]
        self.run(stream.aclose())  # type: ignore[attr-defined]

    @invariant()
    def revisions_match_the_model(self) -> None:
        assert self.run(self.backend.current_revision()) == self.model.revision
        assert self.run(self.backend.compacted_revision()) == self.model.compacted


_SETTINGS = settings(max_examples=150, stateful_step_count=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


class MemoryMachine(StorageMachine):
    kind = "memory"


class SQLiteMachine(StorageMachine):
    kind = "sqlite"


TestMemoryStateMachine = MemoryMachine.TestCase
TestMemoryStateMachine.settings = _SETTINGS
TestSQLiteStateMachine = SQLiteMachine.TestCase
TestSQLiteStateMachine.settings = _SETTINGS
