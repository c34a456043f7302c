"""The public surface of ``setpoint.schema.cel``: ``__all__`` lists exactly what it exports."""

from __future__ import annotations

import types

from setpoint.schema import cel


def test_all_is_the_public_api() -> None:
    exported = {name for name, value in vars(cel).items()
                if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert sorted(cel.__all__) == sorted(exported)


def test_all_names_resolve() -> None:
    for name in cel.__all__:
        assert getattr(cel, name) is not None
