"""AdmissionAttributes.in_version: objects in the request's version as they are; another
version converted, and with ``keep`` converted once for every later caller."""

from __future__ import annotations

from typing import Any

from setpoint.registry.options import AdmissionAttributes


def attributes(calls: list[tuple[str, str]]) -> AdmissionAttributes:
    async def convert(obj: dict[str, Any], version: str) -> dict[str, Any]:
        calls.append((obj["metadata"]["name"], version))
        return {**obj, "apiVersion": f"g/{version}"}
    return AdmissionAttributes(
        operation="UPDATE", group="g", version="v1", resource="things", kind="Thing",
        subresource="", namespace="ns", name="t", namespaced=True, user=None, dry_run=False,
        options={}, sink=None, versions=("v1", "v2"), convert=convert)


async def test_kept_conversions_are_made_once_and_others_each_time() -> None:
    calls: list[tuple[str, str]] = []
    attrs = attributes(calls)
    new = {"apiVersion": "g/v1", "metadata": {"name": "new"}}
    old = {"apiVersion": "g/v1", "metadata": {"name": "old"}}
    assert await attrs.in_version(new, old, "v1") == (new, old)
    first = await attrs.in_version(new, old, "v2")
    assert [o["apiVersion"] for o in first if o] == ["g/v2", "g/v2"]
    assert await attrs.in_version(new, old, "v2") is first
    assert calls == [("new", "v2"), ("old", "v2")]
    # a mutating hook's objects change between calls: converted every time, never kept
    await attrs.in_version(new, None, "v2", keep=False)
    assert calls[2:] == [("new", "v2")]
    assert attrs.converted == {"v2": first}
