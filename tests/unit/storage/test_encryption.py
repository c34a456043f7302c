"""Encryption at rest: what reaches storage, key rotation, and configuration errors."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from setpoint.storage.encryption import (
    EncryptingBackend,
    EncryptionConfigError,
    generate_config,
    load_config,
)
from setpoint.storage.encryption.backend import Undecryptable
from setpoint.storage.encryption.config import parse_config
from setpoint.storage.memory import MemoryBackend

SECRET_KEY = "/registry/core/secrets/ns/s"
MAP_KEY = "/registry/core/configmaps/ns/c"


def config(*providers: dict[str, object], resources: tuple[str, ...] = ("secrets",)) -> dict:
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": list(resources), "providers": list(providers)}]}


def key(name: str, byte: int, size: int = 32) -> dict[str, str]:
    return {"name": name, "secret": base64.b64encode(bytes([byte]) * size).decode()}


async def started(cfg: dict) -> tuple[EncryptingBackend, MemoryBackend]:
    """An encrypting backend over a started memory backend (returned too, to look below)."""
    inner = MemoryBackend()
    await inner.start()
    return EncryptingBackend(inner, parse_config(cfg)), inner


@pytest.mark.parametrize(("provider", "prefix"), [
    ({"secretbox": {"keys": [key("k1", 1)]}}, b"k8s:enc:secretbox:v1:k1:"),
    ({"aesgcm": {"keys": [key("k1", 1)]}}, b"k8s:enc:aesgcm:v1:k1:"),
])
async def test_covered_values_are_ciphertext_below_and_plaintext_above(
        provider: dict[str, object], prefix: bytes) -> None:
    backend, inner = await started(config(provider))
    await backend.create(SECRET_KEY, b"hunter2")
    await backend.create(MAP_KEY, b"plain")
    raw = await inner.get(SECRET_KEY)
    assert raw is not None
    assert raw.value.startswith(prefix)
    assert b"hunter2" not in raw.value
    assert (await inner.get(MAP_KEY)).value == b"plain"  # type: ignore[union-attr]
    assert (await backend.get(SECRET_KEY)).value == b"hunter2"  # type: ignore[union-attr]
    listed = await backend.list("/registry/core/secrets/")
    assert [kv.value for kv in listed.kvs] == [b"hunter2"]


async def test_aesgcm_binds_a_value_to_its_key() -> None:
    backend, inner = await started(config({"aesgcm": {"keys": [key("k1", 1)]}}))
    written = await backend.create(SECRET_KEY, b"hunter2")
    raw = await inner.get(SECRET_KEY)
    assert raw is not None
    other = "/registry/core/secrets/ns/other"
    await inner.create(other, raw.value)  # an attacker with write access to storage
    with pytest.raises(Undecryptable):
        await backend.get(other)
    assert written.value == b"hunter2"


async def test_rotation_new_key_first_reads_old_values_and_writes_new() -> None:
    old, inner = await started(config({"secretbox": {"keys": [key("k1", 1)]}}))
    await old.create(SECRET_KEY, b"v1")
    rotated = EncryptingBackend(inner, parse_config(config(
        {"secretbox": {"keys": [key("k2", 2), key("k1", 1)]}})))
    current = await rotated.get(SECRET_KEY)
    assert current is not None
    assert current.value == b"v1"
    assert current.stale  # written with a key that is no longer the first: rewrite it
    await rotated.update(SECRET_KEY, b"v2", current.mod_revision)
    raw = await inner.get(SECRET_KEY)
    assert raw is not None
    assert raw.value.startswith(b"k8s:enc:secretbox:v1:k2:")
    only_new = EncryptingBackend(inner, parse_config(config(
        {"secretbox": {"keys": [key("k2", 2)]}})))
    fresh = await only_new.get(SECRET_KEY)
    assert fresh is not None
    assert (fresh.value, fresh.stale) == (b"v2", False)


async def test_identity_reads_values_written_before_encryption_and_nothing_else() -> None:
    inner = MemoryBackend()
    await inner.start()
    await inner.create(SECRET_KEY, b"old plaintext")
    backend = EncryptingBackend(inner, parse_config(config(
        {"secretbox": {"keys": [key("k1", 1)]}}, {"identity": {}})))
    assert (await backend.get(SECRET_KEY)).value == b"old plaintext"  # type: ignore[union-attr]
    strict = EncryptingBackend(inner, parse_config(config(
        {"secretbox": {"keys": [key("k1", 1)]}})))
    with pytest.raises(Undecryptable, match="no configured key"):
        await strict.get(SECRET_KEY)


async def test_watch_events_are_decrypted() -> None:
    backend, _ = await started(config({"secretbox": {"keys": [key("k1", 1)]}}))
    stream = backend.watch("/registry/core/secrets/", 0)
    created = await backend.create(SECRET_KEY, b"a")
    await backend.update(SECRET_KEY, b"b", created.mod_revision)
    first, second = await anext(stream), await anext(stream)
    assert (first.kv.value, second.kv.value, second.prev.value if second.prev else None) == (
        b"a", b"b", b"a")


@pytest.mark.parametrize(("doc", "message"), [
    ({"kind": "Other"}, "EncryptionConfiguration"),
    (config(), "providers must be a non-empty list"),
    (config({"secretbox": {"keys": [key("k", 1, 16)]}}), "32 bytes"),
    (config({"aesgcm": {"keys": [key("k", 1, 20)]}}), "16, 24 or 32"),
    (config({"kms": {}}), "unsupported provider 'kms'"),
    (config({"secretbox": {"keys": [{"name": "k", "secret": "!!"}]}}), "not base64"),
    (config({"identity": {}}, resources=("*",)), "needs a group"),
])
def test_bad_configurations_are_refused(doc: dict, message: str) -> None:
    with pytest.raises(EncryptionConfigError, match=message):
        parse_config(doc)


def test_a_generated_configuration_loads_and_holds_a_fresh_key(tmp_path: Path) -> None:
    path = tmp_path / "encryption.yaml"
    path.write_text(generate_config())
    cfg = load_config(path)
    rule = cfg.rule_for(SECRET_KEY)
    assert rule is not None
    assert rule.providers[0].name == "secretbox:key1"
    assert cfg.rule_for(MAP_KEY) is None
    assert yaml.safe_load(generate_config()) != yaml.safe_load(path.read_text())


def test_wildcards_name_groups_and_everything() -> None:
    cfg = parse_config(config({"identity": {}}, resources=("*.example.com", "widgets.x.io")))
    assert cfg.rule_for("/registry/example.com/gadgets/ns/a") is not None
    assert cfg.rule_for("/registry/x.io/widgets/ns/a") is not None
    assert cfg.rule_for("/registry/x.io/other/ns/a") is None
    assert parse_config(config({"identity": {}}, resources=("*.*",))).rule_for("/any") \
        is not None


async def test_the_wrapped_backends_health_is_reported_through_it() -> None:
    """Readiness reads ``health()`` of the backend it is given: a wrapper that hid it made
    /readyz pass while SQLite could no longer acknowledge writes."""

    class Failing(MemoryBackend):
        problem: str | None = None

        def health(self) -> str | None:
            return self.problem

    inner = Failing()
    backend = EncryptingBackend(inner, parse_config(config({"identity": {}})))
    assert backend.health() is None
    inner.problem = "the database file was deleted"
    assert backend.health() == "the database file was deleted"
    assert EncryptingBackend(MemoryBackend(), parse_config(config({"identity": {}}))
                             ).health() is None
