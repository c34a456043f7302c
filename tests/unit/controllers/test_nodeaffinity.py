"""Node selectors and required/preferred node affinity, operator by operator."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.controllers import nodeaffinity as na

NODE = {"metadata": {"name": "n1", "labels": {"zone": "a", "gpu": "2", "disk": "ssd"}}}


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def pod(*, selector: dict[str, str] | None = None, terms: list[Any] | None = None,
        preferred: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["nodeSelector"] = selector
    affinity: dict[str, Any] = {}
    if terms is not None:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": terms}
    if preferred is not None:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    return {"spec": spec}


@pytest.mark.parametrize(("requirement", "expected"), [
    (req("zone", "In", "a", "b"), True),
    (req("zone", "In", "b"), False),
    (req("missing", "In", "a"), False),
    (req("zone", "NotIn", "b"), True),
    (req("zone", "NotIn", "a"), False),
    (req("missing", "NotIn", "a"), True),
    (req("zone", "Exists"), True),
    (req("missing", "Exists"), False),
    (req("missing", "DoesNotExist"), True),
    (req("zone", "DoesNotExist"), False),
    (req("gpu", "Gt", "1"), True),
    (req("gpu", "Gt", "2"), False),
    (req("gpu", "Lt", "3"), True),
    (req("gpu", "Lt", "-1"), False),
    (req("zone", "Gt", "1"), False),    # the label is not an integer
    (req("gpu", "Gt", "x"), False),     # the value is not an integer
    (req("gpu", "Gt", "1", "2"), False),  # Gt takes exactly one value
    (req("missing", "Gt", "1"), False),
    (req("zone", "Near", "a"), False),  # unknown operator
])
def test_match_expressions(requirement: dict[str, Any], expected: bool) -> None:
    p = pod(terms=[{"matchExpressions": [requirement]}])
    assert na.required_matches(p, NODE) is expected


def test_terms_are_ored_and_requirements_anded() -> None:
    both = {"matchExpressions": [req("zone", "In", "a"), req("disk", "In", "hdd")]}
    assert not na.required_matches(pod(terms=[both]), NODE)
    assert na.required_matches(pod(terms=[both, {"matchExpressions": [
        req("disk", "In", "ssd")]}]), NODE)


def test_empty_terms_match_nothing() -> None:
    assert not na.required_matches(pod(terms=[]), NODE)
    assert not na.required_matches(pod(terms=[{}]), NODE)
    assert not na.required_matches(pod(terms=[{"matchExpressions": []}]), NODE)


def test_match_fields_by_name() -> None:
    assert na.required_matches(
        pod(terms=[{"matchFields": [req("metadata.name", "In", "n1")]}]), NODE)
    assert not na.required_matches(
        pod(terms=[{"matchFields": [req("metadata.name", "NotIn", "n1")]}]), NODE)
    assert not na.required_matches(
        pod(terms=[{"matchFields": [req("metadata.uid", "In", "n1")]}]), NODE)
    assert not na.required_matches(
        pod(terms=[{"matchFields": [req("metadata.name", "Exists")]}]), NODE)
    # fields and expressions of one term are ANDed
    assert not na.required_matches(pod(terms=[{
        "matchFields": [req("metadata.name", "In", "n1")],
        "matchExpressions": [req("zone", "In", "b")]}]), NODE)


def test_node_selector_and_affinity_both_apply() -> None:
    assert na.required_matches(pod(selector={"zone": "a"}), NODE)
    assert not na.required_matches(pod(selector={"zone": "a", "disk": "hdd"}), NODE)
    assert not na.required_matches(pod(selector={"zone": "a"}, terms=[
        {"matchExpressions": [req("gpu", "DoesNotExist")]}]), NODE)
    assert na.required_matches(pod(), NODE)


def test_preferred_score_sums_matching_weights() -> None:
    p = pod(preferred=[
        {"weight": 10, "preference": {"matchExpressions": [req("zone", "In", "a")]}},
        {"weight": 5, "preference": {"matchExpressions": [req("disk", "In", "hdd")]}},
        {"weight": 7, "preference": {"matchFields": [req("metadata.name", "In", "n1")]}},
        {"weight": 3, "preference": {}},          # an empty term matches nothing
        {"weight": True, "preference": {"matchExpressions": [req("zone", "Exists")]}},
    ])
    assert na.preferred_score(p, NODE) == 17


anything = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.sampled_from(
                            ["key", "operator", "values", "matchExpressions", "matchFields",
                             "nodeSelectorTerms", "weight", "preference"]), inner,
                            max_size=4), max_leaves=8)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(anything, anything)
def test_malformed_affinity_never_raises(required: Any, preferred: Any) -> None:
    p = {"spec": {"nodeSelector": required if isinstance(required, dict) else None,
                  "affinity": {"nodeAffinity": {
                      "requiredDuringSchedulingIgnoredDuringExecution": required,
                      "preferredDuringSchedulingIgnoredDuringExecution": preferred}}}}
    na.required_matches(p, NODE)
    na.preferred_score(p, NODE)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6))
def test_gt_lt_compare_integers(label: int, value: int) -> None:
    node = {"metadata": {"name": "n", "labels": {"k": str(label)}}}
    gt = pod(terms=[{"matchExpressions": [req("k", "Gt", str(value))]}])
    lt = pod(terms=[{"matchExpressions": [req("k", "Lt", str(value))]}])
    assert na.required_matches(gt, node) is (label > value)
    assert na.required_matches(lt, node) is (label < value)
