"""Contract: get and list, now and at older revisions; prefixes and paging."""

from __future__ import annotations

import pytest

from setpoint.storage import Backend, FutureRevision, KeyValue


async def _history(backend: Backend) -> dict[str, int]:
    """Writes a small history; returns the revision after each step."""
    marks = {}
    a = await backend.create("/a", b"a1")
    marks["a1"] = a.mod_revision
    b = await backend.create("/b", b"b1")
    marks["b1"] = b.mod_revision
    a = await backend.update("/a", b"a2", a.mod_revision)
    marks["a2"] = a.mod_revision
    marks["b-deleted"] = (await backend.delete("/b")).mod_revision
    marks["b2"] = (await backend.create("/b", b"b2")).mod_revision
    return marks


async def test_get_at_older_revisions_sees_the_value_then(backend: Backend) -> None:
    marks = await _history(backend)

    assert await backend.get("/a", revision=marks["a1"]) == KeyValue("/a", b"a1", 1, 1)
    assert (await backend.get("/a", revision=marks["b1"])).value == b"a1"  # type: ignore[union-attr]
    assert (await backend.get("/a", revision=marks["a2"])).value == b"a2"  # type: ignore[union-attr]
    assert await backend.get("/b", revision=marks["a1"]) is None
    assert await backend.get("/b", revision=marks["b-deleted"]) is None
    assert await backend.get("/b", revision=marks["b2"]) == KeyValue("/b", b"b2", 5, 5)


async def test_revision_zero_means_newest(backend: Backend) -> None:
    await _history(backend)

    assert await backend.get("/a", revision=0) == await backend.get("/a")
    assert (await backend.list("/", revision=0)).revision == await backend.current_revision()


async def test_list_at_older_revisions_sees_the_keys_then(backend: Backend) -> None:
    marks = await _history(backend)

    def values(kvs: list[KeyValue]) -> list[tuple[str, bytes]]:
        return [(kv.key, kv.value) for kv in kvs]

    at_b1 = await backend.list("/", revision=marks["b1"])
    at_deleted = await backend.list("/", revision=marks["b-deleted"])
    now = await backend.list("/")

    assert at_b1.revision == marks["b1"]
    assert values(at_b1.kvs) == [("/a", b"a1"), ("/b", b"b1")]
    assert values(at_deleted.kvs) == [("/a", b"a2")]
    assert values(now.kvs) == [("/a", b"a2"), ("/b", b"b2")]
    assert now.revision == marks["b2"]


async def test_reads_beyond_the_current_revision_raise_future_revision(
        backend: Backend) -> None:
    await backend.create("/a", b"1")

    with pytest.raises(FutureRevision) as caught:
        await backend.get("/a", revision=2)
    assert (caught.value.requested, caught.value.current) == (2, 1)
    with pytest.raises(FutureRevision):
        await backend.list("/", revision=5)


async def test_list_takes_keys_under_the_prefix_in_key_order(backend: Backend) -> None:
    for key in ["/r/pods/b", "/r/pods/a", "/r/podsx", "/r/pod", "/r/pods/a/deeper", "/s/pods/c"]:
        await backend.create(key, key.encode())

    result = await backend.list("/r/pods/")

    assert [kv.key for kv in result.kvs] == ["/r/pods/a", "/r/pods/a/deeper", "/r/pods/b"]
    assert not result.more
    assert result.revision == 6
    assert [kv.key for kv in (await backend.list("")).kvs] == [
        "/r/pod", "/r/pods/a", "/r/pods/a/deeper", "/r/pods/b", "/r/podsx", "/s/pods/c"]
    assert (await backend.list("/nothing/")).kvs == []


async def test_list_with_start_after_and_limit(backend: Backend) -> None:
    for i in range(10):
        await backend.create(f"/p/{i:02d}", b"x")
    await backend.create("/q/00", b"x")

    first = await backend.list("/p/", limit=4)
    second = await backend.list("/p/", start_after=first.kvs[-1].key, limit=4)
    last = await backend.list("/p/", start_after=second.kvs[-1].key, limit=4)

    assert [kv.key for kv in first.kvs] == ["/p/00", "/p/01", "/p/02", "/p/03"]
    assert first.more
    assert first.remaining in (None, 6)
    assert [kv.key for kv in second.kvs] == ["/p/04", "/p/05", "/p/06", "/p/07"]
    assert second.more
    assert [kv.key for kv in last.kvs] == ["/p/08", "/p/09"]
    assert not last.more
    assert last.remaining in (None, 0)
    exact = await backend.list("/p/", start_after="/p/05", limit=4)
    assert [kv.key for kv in exact.kvs] == ["/p/06", "/p/07", "/p/08", "/p/09"]
    assert not exact.more


async def test_start_after_before_the_prefix_is_harmless(backend: Backend) -> None:
    await backend.create("/p/a", b"x")

    result = await backend.list("/p/", start_after="/a")

    assert [kv.key for kv in result.kvs] == ["/p/a"]


async def test_more_ignores_keys_deleted_at_the_revision(backend: Backend) -> None:
    await backend.create("/p/a", b"x")
    await backend.create("/p/b", b"x")
    await backend.delete("/p/b")

    result = await backend.list("/p/", limit=1)

    assert [kv.key for kv in result.kvs] == ["/p/a"]
    assert not result.more


async def test_paging_at_a_pinned_revision_ignores_later_writes(backend: Backend) -> None:
    for i in range(6):
        await backend.create(f"/p/{i}", b"old")
    first = await backend.list("/p/", limit=3)

    await backend.update("/p/4", b"new", 5)
    await backend.delete("/p/5")
    await backend.create("/p/6", b"new")
    rest = await backend.list("/p/", revision=first.revision,
                              start_after=first.kvs[-1].key, limit=3)

    assert rest.revision == first.revision
    assert [(kv.key, kv.value) for kv in rest.kvs] == [
        ("/p/3", b"old"), ("/p/4", b"old"), ("/p/5", b"old")]
    assert not rest.more
