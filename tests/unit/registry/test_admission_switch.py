"""AdmissionSwitch: off (and quiet) until a configuration is written through this server or
found in the cache; then on for good; exempt resources are never quiet."""

from __future__ import annotations

from typing import Any, cast

from setpoint.registry.admissionswitch import AdmissionSwitch

GROUP = "admissionregistration.k8s.io"


class Cache:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def count(self, prefix: str) -> int:
        return self.counts.get(prefix, 0)


def switch(cache: Cache) -> AdmissionSwitch:
    return AdmissionSwitch(cast(Any, cache), GROUP, ("validatingadmissionpolicies",),
                           ("/registry/policies/",))


def test_a_configuration_in_the_cache_switches_it_on_for_good() -> None:
    cache = Cache()
    latch = switch(cache)
    assert latch.quiet("", "configmaps")
    assert not latch.on()
    cache.counts["/registry/policies/"] = 1
    assert not latch.quiet("", "configmaps")
    cache.counts.clear()  # deleted again: still on (a wrong "off" would let writes through)
    assert latch.on()
    assert not latch.quiet("apps", "deployments")


def test_writing_a_configuration_switches_it_on_before_the_cache_has_it() -> None:
    latch = switch(Cache())
    assert not latch.quiet(GROUP, "validatingadmissionpolicies")  # exempt: always called
    assert latch.exempt(GROUP, "validatingadmissionpolicies")
    assert latch.on()
    assert not latch.exempt("", "configmaps")


def test_another_kinds_configuration_does_not_switch_it_on() -> None:
    latch = switch(Cache())
    assert latch.exempt(GROUP, "mutatingwebhookconfigurations")
    assert not latch.on()
    assert latch.quiet("", "configmaps")
