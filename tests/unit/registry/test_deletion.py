"""The finalizers a DELETE leaves for the garbage collector (``deletionFinalizersForGarbage
Collection``), one row per DeleteOptions and starting finalizers."""

from __future__ import annotations

import pytest

from setpoint.registry.deletion import FOREGROUND, ORPHAN, gc_finalizers
from setpoint.registry.options import DeleteOptions


def obj(*finalizers: str) -> dict[str, object]:
    return {"metadata": {"name": "x", "finalizers": list(finalizers)}}


CASES = [
    # (id, starting finalizers, options, expected)
    ("background-none", [], DeleteOptions(propagation_policy="Background"), []),
    ("no-policy-none", [], DeleteOptions(), []),
    ("foreground", [], DeleteOptions(propagation_policy="Foreground"), [FOREGROUND]),
    ("orphan", [], DeleteOptions(propagation_policy="Orphan"), [ORPHAN]),
    ("orphan-dependents-true", [], DeleteOptions(orphan_dependents=True), [ORPHAN]),
    ("orphan-dependents-false", [ORPHAN], DeleteOptions(orphan_dependents=False), []),
    ("keeps-others-in-order", ["b/x", "a/y"], DeleteOptions(propagation_policy="Foreground"),
     ["b/x", "a/y", FOREGROUND]),
    ("background-drops-foreground", ["a/y", FOREGROUND],
     DeleteOptions(propagation_policy="Background"), ["a/y"]),
    ("orphan-replaces-foreground", [FOREGROUND], DeleteOptions(propagation_policy="Orphan"),
     [ORPHAN]),
    ("foreground-replaces-orphan", [ORPHAN], DeleteOptions(propagation_policy="Foreground"),
     [FOREGROUND]),
    ("no-policy-keeps-foreground", [FOREGROUND], DeleteOptions(), [FOREGROUND]),
    ("no-policy-keeps-orphan", ["a/y", ORPHAN], DeleteOptions(), ["a/y", ORPHAN]),
    ("orphan-dependents-false-is-not-foreground", [], DeleteOptions(orphan_dependents=False),
     []),
]


@pytest.mark.parametrize(("start", "opts", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_gc_finalizers(start: list[str], opts: DeleteOptions, expected: list[str]) -> None:
    assert gc_finalizers(obj(*start), opts) == expected


def test_an_unchanged_set_keeps_the_objects_order() -> None:
    current = obj(FOREGROUND, "a/y")
    assert gc_finalizers(current, DeleteOptions(propagation_policy="Foreground")) == [
        FOREGROUND, "a/y"]
