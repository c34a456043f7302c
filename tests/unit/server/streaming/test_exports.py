"""The streaming package exports exactly its curated public names."""

from __future__ import annotations

import types

from setpoint.server import streaming


def test_all_lists_every_public_name_and_only_those() -> None:
    public = {name for name, value in vars(streaming).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert set(streaming.__all__) == public
    assert streaming.__all__ == sorted(streaming.__all__)
