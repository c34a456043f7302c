"""Taint and toleration matching, the scheduler's taint reason, and eviction deadlines."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.controllers import taints as t

NO_EXECUTE_UNREACHABLE = {"key": t.UNREACHABLE, "effect": "NoExecute"}


@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    ({"key": "a", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
     {"key": "a", "value": "x", "effect": "NoSchedule"}, True),
    ({"key": "a", "value": "x"}, {"key": "a", "value": "x", "effect": "NoExecute"}, True),
    ({"key": "a", "value": "y"}, {"key": "a", "value": "x", "effect": "NoSchedule"}, False),
    ({"key": "a", "operator": "Exists"}, {"key": "a", "value": "x", "effect": "NoSchedule"},
     True),
    ({"operator": "Exists"}, {"key": "anything", "effect": "NoExecute"}, True),
    ({"operator": "Exists", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"},
     False),
    ({"key": "b", "operator": "Exists"}, {"key": "a", "effect": "NoSchedule"}, False),
    # Equal with no key matches nothing (validation forbids it; never tolerate by accident)
    ({"operator": "Equal", "value": ""}, {"key": "a", "effect": "NoSchedule"}, False),
    ({"key": "a"}, {"key": "a", "effect": "NoSchedule"}, True),  # both values empty
    ({"key": "a", "operator": "Gt"}, {"key": "a", "effect": "NoSchedule"}, False),
])
def test_tolerates(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert t.tolerates(toleration, taint) is expected


def test_first_untolerated_skips_prefer_no_schedule_and_tolerated() -> None:
    taints = [{"key": "soft", "effect": "PreferNoSchedule"},
              {"key": "ok", "value": "1", "effect": "NoSchedule"},
              {"key": "hard", "value": "v", "effect": "NoExecute"}]
    found = t.first_untolerated(taints, [{"key": "ok", "value": "1"}])
    assert found == taints[2]
    assert t.untolerated_reason(found) == "node(s) had untolerated taint {hard: v}"
    assert t.first_untolerated(taints, [{"operator": "Exists"}]) is None


def test_untolerated_reason_without_value() -> None:
    assert t.untolerated_reason(NO_EXECUTE_UNREACHABLE) == \
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"


def test_prefer_no_schedule_count() -> None:
    taints = [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b",
                                                           "effect": "PreferNoSchedule"},
              {"key": "c", "effect": "NoSchedule"}]
    assert t.intolerable_preferences(taints, []) == 2
    assert t.intolerable_preferences(taints, [{"key": "a", "operator": "Exists"}]) == 1
    # a toleration for another effect does not count for preferences
    assert t.intolerable_preferences(taints, [{"key": "a", "operator": "Exists",
                                               "effect": "NoSchedule"}]) == 2


def test_eviction_delay() -> None:
    assert t.eviction_delay([NO_EXECUTE_UNREACHABLE], []) == 0
    assert t.eviction_delay([NO_EXECUTE_UNREACHABLE], [
        {"key": t.UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]) is None
    assert t.eviction_delay([NO_EXECUTE_UNREACHABLE], [
        {"key": t.UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 30},
        {"operator": "Exists", "tolerationSeconds": 10}]) == 10
    # a negative limit counts as zero
    assert t.eviction_delay([NO_EXECUTE_UNREACHABLE], [
        {"operator": "Exists", "tolerationSeconds": -5}]) == 0
    # NoSchedule taints never evict
    assert t.eviction_delay([{"key": "x", "effect": "NoSchedule"}], []) is None


def test_default_tolerations_stand_in_for_missing_ones() -> None:
    defaults = [{"key": t.UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}]
    assert t.eviction_delay([NO_EXECUTE_UNREACHABLE], [], defaults) == 300
    own = [{"key": t.UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 5}]
    assert t.eviction_delay([NO_EXECUTE_UNREACHABLE], own, defaults) == 5
    # defaults cover only what they match
    assert t.eviction_delay([{"key": "other", "effect": "NoExecute"}], [], defaults) == 0


def test_eviction_deadline_counts_from_time_added() -> None:
    tolerations = [{"operator": "Exists", "tolerationSeconds": 60}]
    assert t.eviction_deadline([NO_EXECUTE_UNREACHABLE], tolerations, now=1000.0,
                               added={t.taint_id(NO_EXECUTE_UNREACHABLE): 900.0}) == 960.0
    # a taint added "in the future" (clock skew) counts from now
    assert t.eviction_deadline([NO_EXECUTE_UNREACHABLE], tolerations, now=1000.0,
                               added={t.taint_id(NO_EXECUTE_UNREACHABLE): 5000.0}) == 1060.0
    assert t.eviction_deadline([NO_EXECUTE_UNREACHABLE], [{"operator": "Exists"}],
                               now=1.0) is None


anything = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                        max_leaves=6)
field = st.sampled_from(["key", "operator", "value", "effect", "tolerationSeconds"])


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(field, anything), st.dictionaries(field, anything))
def test_malformed_entries_never_raise(toleration: dict[str, Any],
                                       taint: dict[str, Any]) -> None:
    t.tolerates(toleration, taint)
    t.eviction_delay([taint], [toleration])
    t.intolerable_preferences([taint], [toleration])
    t.first_untolerated([taint], [toleration])


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
       st.text(min_size=1, max_size=5), st.text(max_size=5))
def test_exists_without_key_tolerates_everything(effect: str, key: str, value: str) -> None:
    assert t.tolerates({"operator": "Exists"}, {"key": key, "value": value, "effect": effect})
    assert t.tolerates({"key": key, "operator": "Equal", "value": value},
                       {"key": key, "value": value, "effect": effect})
