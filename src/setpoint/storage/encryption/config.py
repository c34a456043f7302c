"""``EncryptionConfiguration`` (apiserver.config.k8s.io/v1): which resources, which keys.

::

    apiVersion: apiserver.config.k8s.io/v1
    kind: EncryptionConfiguration
    resources:
      - resources: [secrets]            # or widgets.example.com, *.example.com, *.*
        providers:
          - secretbox: {keys: [{name: key2, secret: <base64 of 32 bytes>}]}
          - secretbox: {keys: [{name: key1, secret: <base64>}]}
          - identity: {}

The first provider's first key encrypts every write; every listed key can decrypt (so a new
key goes first, and the old one stays until every value was rewritten). Resources are named
``resource`` for the core group and ``resource.group`` otherwise; ``*.group`` names every
resource of a group and ``*.*`` every resource. The first entry that names a resource wins.

Invariants: a configuration that loads is usable (every key decodes to a valid size, every
entry has a provider); errors name the entry, never the key material.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from setpoint.storage.encryption import providers
from setpoint.storage.encryption.providers import Provider

API_VERSIONS = ("apiserver.config.k8s.io/v1",)


class EncryptionConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Rule:
    """Key prefixes a rule covers, and its providers (the first one writes)."""

    prefixes: tuple[str, ...]
    everything: bool
    providers: tuple[Provider, ...]

    def covers(self, key: str) -> bool:
        return self.everything or key.startswith(self.prefixes)


@dataclass(frozen=True, slots=True)
class EncryptionConfig:
    rules: tuple[Rule, ...]

    def rule_for(self, key: str) -> Rule | None:
        for rule in self.rules:
            if rule.covers(key):
                return rule
        return None


def _prefixes(name: str) -> tuple[tuple[str, ...], bool]:
    if name == "*.*":
        return (), True
    resource, _, group = name.partition(".")
    if resource == "*":
        if not group:
            raise EncryptionConfigError(f"resource {name!r}: a wildcard needs a group")
        return (f"/registry/{group}/",), False
    if not resource:
        raise EncryptionConfigError(f"resource {name!r} is not valid")
    return (f"/registry/{group or 'core'}/{resource}/",), False


def _secret(entry: Any, where: str) -> tuple[str, bytes]:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or \
            not entry["name"] or not isinstance(entry.get("secret"), str):
        raise EncryptionConfigError(f"{where}: every key needs a name and a secret")
    try:
        return entry["name"], base64.b64decode(entry["secret"], validate=True)
    except (binascii.Error, ValueError) as e:
        raise EncryptionConfigError(f"{where}: key {entry['name']!r} is not base64") from e


def _providers(items: Any, where: str) -> list[Provider]:
    if not isinstance(items, list) or not items:
        raise EncryptionConfigError(f"{where}: providers must be a non-empty list")
    out: list[Provider] = []
    for i, item in enumerate(items):
        here = f"{where}.providers[{i}]"
        if not isinstance(item, dict) or len(item) != 1:
            raise EncryptionConfigError(f"{here}: exactly one provider per entry")
        (kind, spec), = item.items()
        if kind == "identity":
            out.append(providers.Identity())
            continue
        if kind not in ("secretbox", "aesgcm"):
            raise EncryptionConfigError(f"{here}: unsupported provider {kind!r} (supported: "
                                        "secretbox, aesgcm, identity)")
        keys = spec.get("keys") if isinstance(spec, dict) else None
        if not isinstance(keys, list) or not keys:
            raise EncryptionConfigError(f"{here}: {kind} needs keys")
        for entry in keys:
            name, secret = _secret(entry, here)
            try:
                out.append(providers.SecretBox(name, secret) if kind == "secretbox"
                           else providers.AESGCMProvider(name, secret))
            except ValueError as e:
                raise EncryptionConfigError(f"{here}: key {name!r}: {e}") from e
    return out


def parse_config(doc: Any) -> EncryptionConfig:
    if not isinstance(doc, dict) or doc.get("kind") != "EncryptionConfiguration" or \
            doc.get("apiVersion") not in API_VERSIONS:
        raise EncryptionConfigError("not an apiserver.config.k8s.io/v1 EncryptionConfiguration")
    entries = doc.get("resources")
    if not isinstance(entries, list):
        raise EncryptionConfigError("resources must be a list")
    rules: list[Rule] = []
    for i, entry in enumerate(entries):
        where = f"resources[{i}]"
        names = entry.get("resources") if isinstance(entry, dict) else None
        if not isinstance(names, list) or not names or \
                not all(isinstance(n, str) for n in names):
            raise EncryptionConfigError(f"{where}: resources must be a list of names")
        provs = tuple(_providers(entry.get("providers"), where))
        for name in names:
            prefixes, everything = _prefixes(name)
            rules.append(Rule(prefixes, everything, provs))
    return EncryptionConfig(tuple(rules))


def load_config(path: Path) -> EncryptionConfig:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise EncryptionConfigError(f"{path}: not YAML: {e}") from e
    return parse_config(doc)


def generate_config(resources: Sequence[str] = ("secrets",)) -> str:
    """A new configuration: a fresh secretbox key for ``resources``, then identity."""
    secret = base64.b64encode(os.urandom(32)).decode()
    doc = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
           "resources": [{"resources": list(resources), "providers": [
               {"secretbox": {"keys": [{"name": "key1", "secret": secret}]}},
               {"identity": {}}]}]}
    return yaml.safe_dump(doc, sort_keys=False)
