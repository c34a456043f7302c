"""docs/runtime.md's reference lists exactly the public names of the packages it documents."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

import setpoint.runtime
import setpoint.testing

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


def documented(section: str) -> set[str]:
    text = DOC.read_text()
    start = text.index(f"### `{section}`\n")
    end = text.find("\n### ", start + 1)
    body = text[start:end if end >= 0 else len(text)]
    return set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", body, flags=re.MULTILINE))


@pytest.mark.parametrize("module", [setpoint.runtime, setpoint.testing],
                         ids=["runtime", "testing"])
def test_reference_matches_all(module: ModuleType) -> None:
    names = set(module.__all__)
    found = documented(module.__name__)
    assert sorted(found - names) == [], "documented but not public"
    assert sorted(names - found) == [], "public but not documented"


def test_every_name_in_all_exists() -> None:
    for module in (setpoint.runtime, setpoint.testing):
        for name in module.__all__:
            assert hasattr(module, name), name
