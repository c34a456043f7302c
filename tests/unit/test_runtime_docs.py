"""docs/runtime.md's reference lists exactly the public names of the packages it documents: the
runtime, the test harness, the client (every method of a Client, every member of its classes)
and the API error classes (with their HTTP codes), so the reference cannot drift."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import setpoint.client
import setpoint.runtime
import setpoint.testing
from setpoint.apimachinery import errors
from setpoint.runtime import typed

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


def documented(section: str) -> set[str]:
    text = DOC.read_text()
    start = text.index(f"### `{section}`\n")
    end = text.find("\n### ", start + 1)
    body = text[start:end if end >= 0 else len(text)]
    return set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", body, flags=re.MULTILINE))


@pytest.mark.parametrize("module", [setpoint.runtime, setpoint.testing, typed],
                         ids=["runtime", "testing", "typed"])
def test_reference_matches_all(module: ModuleType) -> None:
    names = set(module.__all__)
    found = documented(module.__name__)
    assert sorted(found - names) == [], "documented but not public"
    assert sorted(names - found) == [], "public but not documented"


def test_every_name_in_all_exists() -> None:
    for module in (setpoint.runtime, setpoint.testing, typed):
        for name in module.__all__:
            assert hasattr(module, name), name


def section_rows(section: str) -> dict[str, str]:
    """Each table row of a section, by the name in its first cell."""
    text = DOC.read_text()
    start = text.index(f"### `{section}`\n")
    end = text.find("\n### ", start + 1)
    body = text[start:end if end >= 0 else len(text)]
    return {m.group(1): m.group(0) for m in
            re.finditer(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|.*$", body, flags=re.MULTILINE)}


def public(names: object) -> set[str]:
    return {n for n in dir(names) if not n.startswith("_")}


def test_client_reference_matches_all() -> None:
    names = set(setpoint.client.__all__)
    found = documented("setpoint.client")
    assert sorted(found - names) == [], "documented but not public"
    assert sorted(names - found) == [], "public but not documented"


async def test_every_client_method_and_attribute_is_documented() -> None:
    async with setpoint.client.Client(setpoint.client.ClientConfig(
            server="http://127.0.0.1:1")) as client:
        names = public(client)
    found = documented("setpoint.client.Client")
    assert sorted(found - names) == [], "documented but not on a Client"
    assert sorted(names - found) == [], "on a Client but not documented"


def _watch() -> setpoint.client.Watch:
    async def opener() -> Any:
        raise AssertionError("never opened")
    return setpoint.client.Watch(opener, inactivity_timeout=1.0)


@pytest.mark.parametrize(("name", "members"), [
    ("ClientConfig", lambda: {f.name for f in dataclasses.fields(setpoint.client.ClientConfig)}
     | {"is_https"}),
    ("Discovery", lambda: public(setpoint.client.Discovery)),
    ("ResourceRef", lambda: public(setpoint.client.ResourceRef)),
    ("Watch", lambda: public(_watch())),
    ("WatchEvent", lambda: public(setpoint.client.WatchEvent)),
    ("PatchType", lambda: {m.name for m in setpoint.client.PatchType}),
])
def test_each_client_class_row_names_every_member(name: str, members: Any) -> None:
    row = section_rows("setpoint.client")[name]
    missing = sorted(m for m in members() if not re.search(rf"`(await )?{m}\b", row))
    assert missing == [], f"the {name} row does not mention {missing}"


def test_every_error_class_is_documented_with_its_code() -> None:
    classes = {name: cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, errors.ApiError)}
    rows = section_rows("setpoint.apimachinery.errors")
    assert sorted(set(rows) - set(classes)) == [], "documented but not an error class"
    assert sorted(set(classes) - set(rows)) == [], "an error class not documented"
    for name, cls in classes.items():
        code = rows[name].split("|")[2].strip()
        assert code == ("any" if cls is errors.ApiError else str(cls.code)), name
