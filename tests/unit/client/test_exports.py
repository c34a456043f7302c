"""The package exports exactly its curated public names."""

from __future__ import annotations

import types

import setpoint.client


def test_all_lists_every_public_name_and_only_those() -> None:
    public = {name for name, value in vars(setpoint.client).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert set(setpoint.client.__all__) == public
    assert setpoint.client.__all__ == sorted(setpoint.client.__all__)
