"""Contract: create, update, delete, compare-and-swap and the global revision."""

from __future__ import annotations

import pytest

from setpoint.storage import (
    Backend,
    KeyExists,
    KeyNotFound,
    KeyValue,
    RevisionConflict,
    Unavailable,
    create_backend,
)
from tests.integration.storage.storage_testkit import Opener


async def test_empty_store_is_at_revision_zero(backend: Backend) -> None:
    assert await backend.current_revision() == 0
    assert await backend.compacted_revision() == 0
    assert await backend.get("/a") is None


async def test_create_then_get(backend: Backend) -> None:
    kv = await backend.create("/a", b"one")

    assert kv == KeyValue("/a", b"one", create_revision=1, mod_revision=1)
    assert await backend.get("/a") == kv
    assert await backend.current_revision() == 1


async def test_create_existing_key_raises_key_exists_with_current_value(
        backend: Backend) -> None:
    kv = await backend.create("/a", b"one")

    with pytest.raises(KeyExists) as caught:
        await backend.create("/a", b"two")

    assert caught.value.key == "/a"
    assert caught.value.current == kv
    assert await backend.get("/a") == kv


async def test_update_with_current_revision_succeeds(backend: Backend) -> None:
    created = await backend.create("/a", b"one")

    updated = await backend.update("/a", b"two", created.mod_revision)

    assert updated == KeyValue("/a", b"two", create_revision=created.create_revision,
                               mod_revision=created.mod_revision + 1)
    assert await backend.get("/a") == updated


@pytest.mark.parametrize("offset", [-1, 1, 100], ids=["older", "newer", "far"])
async def test_update_with_other_revision_raises_conflict(backend: Backend,
                                                          offset: int) -> None:
    await backend.create("/a", b"one")
    current = await backend.update("/a", b"two", 1)

    with pytest.raises(RevisionConflict) as caught:
        await backend.update("/a", b"three", current.mod_revision + offset)

    assert caught.value.expected == current.mod_revision + offset
    assert caught.value.current == current
    assert await backend.get("/a") == current
    assert await backend.current_revision() == 2


async def test_update_missing_key_raises_not_found(backend: Backend) -> None:
    with pytest.raises(KeyNotFound) as caught:
        await backend.update("/missing", b"x", 1)
    assert caught.value.key == "/missing"


async def test_delete_returns_old_value_at_delete_revision(backend: Backend) -> None:
    created = await backend.create("/a", b"one")

    deleted = await backend.delete("/a")

    assert deleted == KeyValue("/a", b"one", create_revision=created.create_revision,
                               mod_revision=2)
    assert await backend.get("/a") is None
    assert (await backend.list("/")).kvs == []


async def test_delete_compares_when_given_a_revision(backend: Backend) -> None:
    created = await backend.create("/a", b"one")
    updated = await backend.update("/a", b"two", created.mod_revision)

    with pytest.raises(RevisionConflict) as caught:
        await backend.delete("/a", created.mod_revision)
    assert caught.value.current == updated

    deleted = await backend.delete("/a", updated.mod_revision)
    assert deleted.mod_revision == updated.mod_revision + 1


async def test_delete_missing_key_raises_not_found(backend: Backend) -> None:
    with pytest.raises(KeyNotFound):
        await backend.delete("/missing")
    await backend.create("/a", b"one")
    await backend.delete("/a")
    with pytest.raises(KeyNotFound):
        await backend.delete("/a")
    with pytest.raises(KeyNotFound):
        await backend.update("/a", b"x", 2)


async def test_recreate_after_delete_starts_a_new_life(backend: Backend) -> None:
    await backend.create("/a", b"one")
    await backend.delete("/a")

    again = await backend.create("/a", b"two")

    assert again == KeyValue("/a", b"two", create_revision=3, mod_revision=3)
    assert await backend.get("/a") == again


async def test_revisions_strictly_increase_across_every_kind_of_write(
        backend: Backend) -> None:
    revisions = [
        (await backend.create("/a", b"1")).mod_revision,
        (await backend.create("/b", b"1")).mod_revision,
        (await backend.update("/a", b"2", 1)).mod_revision,
        (await backend.delete("/b")).mod_revision,
        (await backend.create("/b", b"2")).mod_revision,
        (await backend.delete("/a", 3)).mod_revision,
    ]

    assert revisions == sorted(set(revisions))
    assert await backend.current_revision() == revisions[-1]


async def test_failed_writes_and_reads_take_no_revision(backend: Backend) -> None:
    await backend.create("/a", b"1")
    with pytest.raises(KeyExists):
        await backend.create("/a", b"2")
    with pytest.raises(RevisionConflict):
        await backend.update("/a", b"2", 7)
    with pytest.raises(KeyNotFound):
        await backend.delete("/b")
    await backend.get("/a")
    await backend.list("/")

    assert await backend.current_revision() == 1
    assert (await backend.create("/b", b"1")).mod_revision == 2


async def test_values_are_opaque_bytes(backend: Backend) -> None:
    value = bytes(range(256)) * 4
    await backend.create("/bin", value)
    await backend.create("/empty", b"")

    assert (await backend.get("/bin")) is not None
    assert (await backend.get("/bin")).value == value  # type: ignore[union-attr]
    assert (await backend.get("/empty")).value == b""  # type: ignore[union-attr]


async def test_keys_are_any_unicode(backend: Backend) -> None:
    await backend.create("/ns/ünïcødé/☃", b"x")
    await backend.create("/ns/\U0010ffff", b"y")

    keys = [kv.key for kv in (await backend.list("/ns/")).kvs]

    assert keys == ["/ns/ünïcødé/☃", "/ns/\U0010ffff"]


async def test_invalid_arguments_are_rejected(backend: Backend) -> None:
    with pytest.raises(ValueError, match="key"):
        await backend.create("", b"x")
    with pytest.raises(TypeError, match="bytes"):
        await backend.create("/a", "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        await backend.list("/", limit=0)
    with pytest.raises(ValueError, match="negative"):
        await backend.get("/a", revision=-1)


async def test_closed_backend_is_unavailable(backend: Backend) -> None:
    await backend.close()

    with pytest.raises(Unavailable):
        await backend.create("/a", b"1")
    with pytest.raises(Unavailable):
        await backend.get("/a")
    with pytest.raises(Unavailable):
        backend.watch("/", 0)
    await backend.close()  # idempotent


async def test_backend_is_unavailable_before_start(open_backend: Opener) -> None:
    unstarted = create_backend(open_backend.config())
    assert isinstance(unstarted, Backend)
    with pytest.raises(Unavailable):
        await unstarted.current_revision()
    await unstarted.close()
