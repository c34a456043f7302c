"""The watch cache's history on its own: hot and cold entries, shared bytes, both bounds."""

from __future__ import annotations

import orjson
import pytest

from setpoint.registry import history as hist

KEY = "/registry/core/configmaps/ns/a"


def value(n: int, size: int = 1000) -> bytes:
    return orjson.dumps({"metadata": {"name": "a"}, "data": {"n": str(n), "pad": "x" * size}})


class Writer:
    """Records a key's successive versions as the watch cache does."""

    def __init__(self, history: hist.History) -> None:
        self.history = history
        self.revision = 0
        self.current: dict[str, bytes] = {}
        self.objects: dict[str, hist.Obj] = {}

    def put(self, key: str, raw: bytes) -> hist.Entry:
        self.revision += 1
        before = self.current.get(key)
        old = self.objects.get(key)
        obj = hist.decode(raw, self.revision)
        kind = hist.ADDED if old is None else hist.MODIFIED
        entry = self.history.record(
            kind, key, self.revision, obj, old, value=None,
            prev_value=bytes(before) if before is not None else None,
            prev_revision=int(old["metadata"]["resourceVersion"]) if old else 0)
        self.current[key] = raw
        self.objects[key] = obj
        return entry

    def delete(self, key: str) -> hist.Entry:
        self.revision += 1
        raw = bytes(self.current.pop(key))  # storage hands over its own copy of the value
        old = self.objects.pop(key)
        return self.history.record(hist.DELETED, key, self.revision,
                                   hist.with_revision(old, self.revision), old, value=raw,
                                   prev_value=raw,
                                   prev_revision=int(old["metadata"]["resourceVersion"]))


def test_newest_entry_hands_out_the_current_object_and_the_one_before() -> None:
    w = Writer(hist.History(capacity=100, max_bytes=10**9))
    first = w.put(KEY, value(1))
    first_object = first.event().object
    second = w.put(KEY, value(2))
    event = second.event()
    assert event.object is w.objects[KEY]
    assert event.prev is first_object  # the same object, not a copy
    assert first.obj is None  # the older entry keeps bytes only
    assert first.value is not None
    assert second.prev_value is first.value  # one copy of the bytes between them
    assert second.shares_prev


def test_cold_entries_decode_to_what_was_handed_out() -> None:
    w = Writer(hist.History(capacity=100, max_bytes=10**9))
    entries = [w.put(KEY, value(i)) for i in range(3)]
    gone = w.delete(KEY)
    cold = entries[1].event()
    assert cold.type == hist.MODIFIED
    assert cold.object["data"]["n"] == "1"
    assert cold.object["metadata"]["resourceVersion"] == "2"
    assert cold.prev is not None
    assert cold.prev["data"]["n"] == "0"
    assert cold.prev["metadata"]["resourceVersion"] == "1"
    assert entries[0].event().prev is None  # ADDED
    deleted = gone.event()  # still hot: the newest entry of the key
    assert deleted.type == hist.DELETED
    assert deleted.object["data"]["n"] == "2"
    assert deleted.object["metadata"]["resourceVersion"] == str(gone.revision)


def test_bytes_bound_evicts_oldest_and_moves_the_window() -> None:
    history = hist.History(capacity=10_000, max_bytes=50_000)
    w = Writer(history)
    for i in range(200):
        w.put(KEY, value(i, size=2000))
        assert history.bytes <= 50_000
    assert 10 <= len(history) <= 25
    oldest = history.oldest_revision()
    assert oldest is not None
    assert history.window_start == oldest - 1
    assert [e.revision for e in history.after(history.window_start)] == list(
        range(oldest, w.revision + 1))
    assert history.evicted_for_bytes == 200 - len(history)


def test_charge_counts_each_kept_copy_of_bytes_once() -> None:
    history = hist.History(capacity=3, max_bytes=10**9)
    w = Writer(history)
    for i in range(10):
        w.put(KEY, value(i, size=10_000))
    entries = list(history)
    assert len(entries) == 3
    # kept: the oldest entry's value and its previous version (whose entry is gone), the
    # middle one's value; the newest is hot (its object is the cache's current state)
    kept = {id(b): len(b) for e in entries for b in (e.value, e.prev_value) if b is not None}
    overhead = len(entries) * (hist.ENTRY_OVERHEAD + len(KEY))
    assert history.bytes == sum(kept.values()) + overhead
    assert history.bytes == sum(e.charge for e in entries)


def test_a_single_event_larger_than_the_budget_is_kept_alone() -> None:
    history = hist.History(capacity=100, max_bytes=1000)
    w = Writer(history)
    w.put(KEY, value(1, size=10))
    w.put(KEY, value(2, size=50_000))
    w.put(KEY, value(3, size=10))
    assert len(history) == 1
    assert history.window_start == 2


def test_capacity_bounds_the_count() -> None:
    history = hist.History(capacity=5, max_bytes=10**9)
    w = Writer(history)
    for i in range(20):
        w.put(f"{KEY}{i}", value(i, size=10))
    assert len(history) == 5
    assert history.window_start == 15
    assert history.evicted_for_bytes == 0


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        hist.History(capacity=0, max_bytes=1)
    with pytest.raises(ValueError, match="positive"):
        hist.History(capacity=1, max_bytes=0)


# --- frames: the encoded event, shared by the watchers that send it the same way ----------


class Maker:
    """A frame maker that counts its calls."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return bytes(self.data)


def test_a_frame_is_made_once_per_key_and_shared() -> None:
    history = hist.History(capacity=100, max_bytes=10**9)
    entry = Writer(history).put(KEY, value(1))
    json_maker, partial_maker = Maker(b"json-line\n"), Maker(b"partial-line\n")
    first = history.frame(entry, ("MODIFIED", "v1", "json"), json_maker)
    again = history.frame(entry, ("MODIFIED", "v1", "json"), json_maker)
    assert first == b"json-line\n"
    assert again is first
    assert json_maker.calls == 1
    # another form, another type or another version is another frame
    assert history.frame(entry, ("MODIFIED", "v1", "partial"), partial_maker) == \
        b"partial-line\n"
    history.frame(entry, ("ADDED", "v1", "json"), json_maker)
    history.frame(entry, ("MODIFIED", "v2", "json"), json_maker)
    assert json_maker.calls == 3
    assert partial_maker.calls == 1


def test_frames_are_charged_with_their_entry_and_go_with_it() -> None:
    history = hist.History(capacity=2, max_bytes=10**9)
    w = Writer(history)
    entry = w.put(KEY, value(1))
    before = history.bytes
    history.frame(entry, "json", Maker(b"x" * 5000))
    assert history.bytes == before + 5000 + hist.FRAME_OVERHEAD
    assert entry.charge == entry.own_bytes()
    w.put(KEY, value(2))  # the entry turns cold: its frames stay, charged
    assert entry.frames is not None
    assert history.bytes == sum(e.charge for e in history)
    w.put("/registry/core/configmaps/ns/b", value(3))
    w.put("/registry/core/configmaps/ns/c", value(4))  # evicts the entry
    assert entry.frames is None
    assert not entry.kept
    assert history.bytes == sum(e.charge for e in history)
    # an evicted entry's frame is made for the asker and not kept
    maker = Maker(b"late\n")
    assert history.frame(entry, "json", maker) == b"late\n"
    assert history.frame(entry, "json", maker) == b"late\n"
    assert maker.calls == 2
    assert entry.frames is None


def test_a_frame_is_kept_only_within_the_byte_budget() -> None:
    history = hist.History(capacity=100, max_bytes=3000)
    entry = Writer(history).put(KEY, value(1, size=500))
    room = history.max_bytes - history.bytes
    too_big = Maker(b"y" * room)  # with the frame's overhead it does not fit
    assert history.frame(entry, "json", too_big) == b"y" * room
    history.frame(entry, "json", too_big)
    assert too_big.calls == 2
    assert entry.frames is None
    fits = Maker(b"z" * (room - hist.FRAME_OVERHEAD))
    history.frame(entry, "partial", fits)
    history.frame(entry, "partial", fits)
    assert fits.calls == 1
    assert history.bytes == history.max_bytes


def test_at_most_max_frames_per_entry() -> None:
    history = hist.History(capacity=100, max_bytes=10**9)
    entry = Writer(history).put(KEY, value(1))
    for n in range(hist.MAX_FRAMES + 5):
        history.frame(entry, ("table", n), Maker(b"row\n"))
    assert entry.frames is not None
    assert len(entry.frames) == hist.MAX_FRAMES


def test_reset_drops_the_frames() -> None:
    history = hist.History(capacity=100, max_bytes=10**9)
    entry = Writer(history).put(KEY, value(1))
    history.frame(entry, "json", Maker(b"line\n"))
    history.reset(10)
    assert entry.frames is None
    assert not entry.kept
    assert history.bytes == 0


def test_a_verdict_is_decided_once_per_key_while_the_entry_is_kept() -> None:
    history = hist.History(capacity=1, max_bytes=10**9)
    w = Writer(history)
    entry = w.put(KEY, value(1))
    decided: list[str] = []

    def decide(answer: str | None) -> str | None:
        decided.append(str(answer))
        return answer

    assert history.verdict(entry, ("tier=web", "v1"), lambda: decide("ADDED")) == "ADDED"
    assert history.verdict(entry, ("tier=web", "v1"), lambda: decide("DELETED")) == "ADDED"
    assert history.verdict(entry, ("tier=db", "v1"), lambda: decide(None)) is None
    assert history.verdict(entry, ("tier=db", "v1"), lambda: decide("ADDED")) is None
    assert decided == ["ADDED", "None"]
    w.put("/registry/core/configmaps/ns/b", value(2))  # evicts the entry
    assert entry.verdicts is None
    assert history.verdict(entry, ("tier=web", "v1"), lambda: decide("MODIFIED")) == \
        "MODIFIED"
    assert entry.verdicts is None
