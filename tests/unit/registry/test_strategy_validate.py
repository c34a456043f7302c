"""A strategy's metadata checks: plain metadata of a kind with the default name rule takes
the quick way, and a kind with a name rule of its own still has it applied."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import validation
from setpoint.registry import core
from setpoint.registry.strategy import Strategy


def configmaps() -> tuple[Any, type[Strategy]]:
    return next((i, c) for i, c in core.builtin_resources() if i.resource == "configmaps")


def plain(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"a": "b"}}}


def test_plain_metadata_of_a_kind_with_the_default_name_rule_skips_the_full_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    info, cls = configmaps()
    strategy = cls(info)
    full: list[Any] = []
    real = validation._validate_object_meta
    monkeypatch.setattr(validation, "_validate_object_meta",
                        lambda *a, **k: full.append(a) or real(*a, **k))
    version = info.versions[0]
    assert strategy.validate(plain("cm-1"), version) == []
    assert full == []
    errs = strategy.validate(plain("Not_A_Name"), version)  # not plain: the full checks
    assert [e.field for e in errs] == ["metadata.name"]
    assert len(full) == 1


def test_a_kind_with_its_own_name_rule_still_applies_it() -> None:
    info, cls = configmaps()

    class Picky(cls):  # type: ignore[valid-type,misc]
        def check_name(self, name: str) -> list[str]:
            return [] if name.startswith("ok-") else ["must start with ok-"]

    version = info.versions[0]
    assert Picky(info).validate(plain("ok-1"), version) == []
    errs = Picky(info).validate(plain("cm-1"), version)
    assert [(e.field, e.detail) for e in errs] == [("metadata.name", "must start with ok-")]
