"""QuietAdmission: a hook that says it has nothing to do on a resource's writes is not
called, and a store whose hooks are all quiet skips admission; any hook that is not quiet
is called, in order, with the write's attributes."""

from __future__ import annotations

from typing import Any

from setpoint.registry.options import AdmissionAttributes, WriteOptions
from setpoint.registry.storebase import QuietAdmission

from .storefixture import configmap, configmap_store


async def test_quiet_hooks_are_skipped_and_the_others_called_in_order() -> None:
    calls: list[str] = []
    asked: list[tuple[str, str]] = []
    quiet = {"a": True, "b": False}

    def hook(name: str) -> Any:
        async def admit(new: Any, old: Any, attrs: AdmissionAttributes) -> None:
            calls.append(f"{name}:{attrs.operation}:{attrs.name}")
        return admit

    def asks(name: str) -> Any:
        def answer(group: str, resource: str) -> bool:
            asked.append((group, resource))
            return quiet[name]
        return answer

    async with configmap_store() as (store, _):
        store.admission.extend((QuietAdmission(hook("a"), asks("a")),
                                QuietAdmission(hook("b"), asks("b")), hook("plain")))
        await store.create("default", configmap("one"), "v1", WriteOptions())
        assert calls == ["b:CREATE:one", "plain:CREATE:one"]
        assert asked == [("", "configmaps"), ("", "configmaps")]

        # all quiet: no hook is called (and no attributes are built)
        quiet["b"] = True
        del store.admission[2]
        calls.clear()
        await store.create("default", configmap("two"), "v1", WriteOptions())
        assert calls == []

        # a hook that stops being quiet is called on the next write
        quiet["a"] = False
        await store.create("default", configmap("three"), "v1", WriteOptions())
        assert calls == ["a:CREATE:three"]
